"""Threshold step: reference values, rounding, and the sqrt(2) sigma1 equivalence."""

from __future__ import annotations

import numpy as np
import pytest
from scipy.special import log_ndtr, ndtr

from pate_cli.core.gnmax import rdp_gnmax
from pate_cli.core.threshold import (
    log_pr_answered_threshold,
    logq_threshold,
    rdp_threshold,
    rdp_threshold_data_independent,
    round_votes,
)
from pate_cli.orders import DEFAULT_ORDERS
from tests.conftest import as_float, reference_json

UNIT = reference_json("unit_vectors.json")
SUBSET = np.array(UNIT["orders_subset"])


@pytest.mark.parametrize(
    "case", UNIT["threshold"], ids=lambda c: f"{c['threshold']}-{c['sigma1']}-{c['max_count']}"
)
def test_threshold_matches_reference(case):
    counts = np.array([[case["max_count"], 0.0]])
    log_pr = log_pr_answered_threshold(counts, case["threshold"], case["sigma1"])
    assert log_pr[0] == pytest.approx(case["logpr_answered"], rel=1e-12)
    logq = logq_threshold(counts, case["threshold"], case["sigma1"])
    rdp = rdp_threshold(logq, case["sigma1"], SUBSET)[0]
    np.testing.assert_allclose(rdp, as_float(case["rdp_threshold_subset"]["value"]), rtol=1e-9)
    np.testing.assert_allclose(
        rdp_threshold_data_independent(case["sigma1"], SUBSET),
        as_float(case["rdp_data_independent_threshold_subset"]["value"]),
        rtol=1e-12,
    )


def test_reference_rounding_is_half_to_even():
    # 2.5 rounds to 2 and 3.5 to 4, as Python's round in the reference.
    halves = np.array([[2.5, 0.0], [3.5, 0.0]])
    log_pr = log_pr_answered_threshold(halves, 3.0, 1.0, half_even=True)
    expected = log_pr_answered_threshold(np.array([[2.0, 0.0], [4.0, 0.0]]), 3.0, 1.0)
    np.testing.assert_array_equal(log_pr, expected)


def test_default_rounding_keeps_sensitivity_one():
    # Half up: a change of 1 in the max moves the rounded value by exactly 1.
    x = np.arange(-5.0, 5.0, 0.25)
    assert np.all(round_votes(x + 1) - round_votes(x) == 1)
    assert np.any(round_votes(x + 1, half_even=True) - round_votes(x, half_even=True) == 2)


def test_threshold_rdp_is_gnmax_with_sqrt2_sigma_on_the_rarer_outcome():
    # max(votes) 240, 200 and 140 at T = 200, sigma1 = 40: z = 1, 0, -1.5.
    counts = np.array([[240.0, 0.0], [200.0, 0.0], [140.0, 10.0]])
    rarer = np.log([ndtr(-1.0), 0.5, ndtr(-1.5)])
    logq = logq_threshold(counts, 200.0, 40.0)
    np.testing.assert_allclose(logq, rarer, rtol=1e-14)
    np.testing.assert_allclose(
        rdp_threshold(logq, 40.0, DEFAULT_ORDERS),
        rdp_gnmax(rarer, 2**0.5 * 40.0, DEFAULT_ORDERS),
        rtol=1e-9,
    )


def test_rarer_outcome_keeps_its_own_tail_where_pr_answered_rounds_to_one():
    # z = 77.5: Pr[not answered] = Phi(-77.5) ~ e^-3008, while log Pr[answered] rounds to 0.
    counts = np.array([[31.0, 9.0]])
    assert log_pr_answered_threshold(counts, 0.0, 0.4)[0] == 0.0
    logq = logq_threshold(counts, 0.0, 0.4)[0]
    assert logq == pytest.approx(float(log_ndtr(-77.5)), rel=1e-14)
    assert -3010 < logq < -3000
    assert rdp_threshold(np.array([logq]), 0.4, np.array([21.0]))[0, 0] > 46.49


def test_a_log_pr_answered_is_refused_as_the_rarer_outcome():
    with pytest.raises(ValueError, match="less likely outcome"):
        rdp_threshold(np.log([0.9]), 150.0, DEFAULT_ORDERS)


def test_threshold_bounds_are_ordered():
    top = np.arange(0.0, 251.0)[:, None]
    log_pr = log_pr_answered_threshold(top, 200.0, 150.0)
    rdp = rdp_threshold(logq_threshold(top, 200.0, 150.0), 150.0, DEFAULT_ORDERS)
    assert np.all(rdp >= 0)
    assert np.all(rdp <= rdp_threshold_data_independent(150.0, DEFAULT_ORDERS))
    assert np.all(np.diff(log_pr) >= 0)  # more votes for the top class: answered more often

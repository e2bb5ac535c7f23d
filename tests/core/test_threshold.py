"""Threshold step: reference values, rounding, and the sqrt(2) sigma1 equivalence."""

from __future__ import annotations

import numpy as np
import pytest

from pate_cli.core.gnmax import rdp_gnmax
from pate_cli.core.threshold import (
    log_pr_answered_threshold,
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
    rdp = rdp_threshold(log_pr, case["sigma1"], SUBSET)[0]
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
    log_pr = np.log(np.array([0.999, 0.5, 1e-6]))
    rarer = np.log(np.array([0.001, 0.5, 1e-6]))
    np.testing.assert_allclose(
        rdp_threshold(log_pr, 150.0, DEFAULT_ORDERS),
        rdp_gnmax(rarer, 2**0.5 * 150.0, DEFAULT_ORDERS),
        rtol=1e-9,
    )


def test_threshold_bounds_are_ordered():
    log_pr = log_pr_answered_threshold(np.arange(0.0, 251.0)[:, None], 200.0, 150.0)
    rdp = rdp_threshold(log_pr, 150.0, DEFAULT_ORDERS)
    assert np.all(rdp >= 0)
    assert np.all(rdp <= rdp_threshold_data_independent(150.0, DEFAULT_ORDERS))
    assert np.all(np.diff(log_pr) >= 0)  # more votes for the top class: answered more often

"""Settings at the edge of double precision: numbers (inf where infinite) or exit 2, never 70.

Each case crashed once (exit 70) before it was handled.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from pate_cli.core import smooth as ss_core
from pate_cli.core.gnmax import rdp_gnmax, rdp_gnmax_data_independent
from pate_cli.errors import ExitCode
from tests.conftest import run_cli


@pytest.fixture
def votes(write_npy):
    return write_npy(np.array([[7.0, 3.0, 0.0]]))


def _inf(value: object) -> bool:
    return value == "inf"


def test_huge_sigma_keeps_prop8_where_theorem6_loses_every_digit():
    # At sigma 6e16 Theorem 6's sum comes out -5.6e-17 (its true value is near 1e-34):
    # the candidate is rounding noise, and Prop. 8's bound stays.
    orders = np.array([2.0, 14.0, 500.0])
    logq = np.log(np.array([0.6]))
    rdp = rdp_gnmax(logq, 6e16, orders)[0]
    assert np.all(rdp >= 0)
    np.testing.assert_array_equal(rdp, rdp_gnmax_data_independent(6e16, orders))


def test_analyze_at_a_huge_sigma(votes):
    out = run_cli(["analyze", votes, "--sigma", 6e16, "--delta", 1e-5, "--json"]).json
    assert out["data_dependent"]["epsilon"] == pytest.approx(out["data_independent"]["epsilon"])
    assert 0 < out["data_independent"]["epsilon"] < 1


def test_smooth_sensitivity_at_a_huge_sigma_and_order_2(votes):
    args = ["smooth-sensitivity", votes, "--sigma", 1e120, "--order", 2, "--skip-conditions"]
    out = run_cli([*args, "--delta", 1e-5, "--json"]).json
    assert out["released"] is False  # both steps data-independent at this sigma
    assert out["epsilon_data_dependent"] >= 0


def test_vanishing_sigma1_releases_an_infinite_cost(votes):
    args = ["analyze", votes, "--threshold", 5, "--sigma1", 1e-200, "--sigma", 2]
    release = run_cli([*args, "--delta", 1e-5, "--json"]).json["release"]
    assert _inf(release["smooth_sensitivity"])
    assert _inf(release["gnss_cost"])
    assert _inf(release["epsilon_expected_release"])
    assert _inf(release["epsilon_released"])
    assert _inf(release["noise_std"])


def test_unbounded_local_sensitivity_has_an_infinite_cost_at_every_beta():
    beta, smooth, _ = ss_core.optimal_gnss_parameters(np.array([1.0, np.inf]), 0.5, 8.0)
    assert math.isinf(smooth) and 0 < beta < 1 / 16


def test_tiny_sigma_with_skip_conditions_is_one_line_exit_2(votes):
    args = ["smooth-sensitivity", votes, "--sigma", 1e-300, "--delta", 1e-5, "--skip-conditions"]
    result = run_cli(args, expect=ExitCode.BAD_INPUT)
    assert result.stderr.count("\n") == 1
    assert "cannot be bounded" in result.stderr


def test_interactive_with_abstentions_below_the_baseline(write_npy):
    # Rows sum to 1 and 3 of M = 6 teachers: votes - baseline has a negative maximum in the
    # first row (round(max) = -1), which the threshold step's tables must cover.
    counts = write_npy(np.array([[1.0, 0.0, 0.0], [2.0, 1.0, 0.0]]))
    baseline = write_npy(np.array([[0.4, 0.3, 0.3], [0.2, 0.5, 0.3]]), "baseline.npy")
    args = ["analyze", counts, "--teachers", 6, "--baseline", baseline, "--threshold", 1]
    out = run_cli([*args, "--sigma1", 1, "--sigma", 1, "--delta", 1e-5, "--json"]).json
    release = out["release"]
    assert release["released"] is True
    assert 0 < release["smooth_sensitivity"] < math.inf


def test_the_joint_threshold_bound_takes_an_answer_cost_past_the_float_range():
    # plan's search with pilot votes reached answer costs near 1e306: (lambda - 1) times it
    # overflowed inside the joint bound (a warning, an error under -W error) instead of inf.
    from pate_cli.core.threshold import rdp_threshold_joint

    out = rdp_threshold_joint(
        np.array([0.3]), 5.0, np.array([2.0, 50.0]), np.array([[1e307, 1e307]])
    )
    assert out[0, 1] == np.inf and out[0, 0] >= 1e307

"""RDP -> (epsilon, delta): the classic and improved conversions."""

from __future__ import annotations

import math

import numpy as np
import pytest

from pate_cli.core.conversion import best_order, eps_curve_classic, eps_curve_improved
from pate_cli.orders import DEFAULT_ORDERS, REFERENCE_ORDERS
from tests.conftest import reference_json

UNIT = reference_json("unit_vectors.json")


@pytest.mark.parametrize("case", UNIT["compute_eps_from_delta"], ids=lambda c: str(c["delta"]))
def test_classic_matches_reference(case):
    orders, rdp = np.array(case["orders"]), np.array(case["rdp"])
    eps = eps_curve_classic(orders, rdp, case["delta"])
    index = best_order(eps)
    assert eps[index] == pytest.approx(case["value"][0], rel=1e-12)
    assert orders[index] == case["value"][1]


def test_first_minimum_wins_on_the_duplicated_order_100():
    rdp = np.zeros(REFERENCE_ORDERS.size)
    rdp[REFERENCE_ORDERS != 100.0] = 1.0
    eps = eps_curve_classic(REFERENCE_ORDERS, rdp, 1e-5)
    assert best_order(eps) == 196 and REFERENCE_ORDERS[198] == 100.0


def _dp_accounting_compute_epsilon(orders, rdp, delta):
    """dp_accounting's compute_epsilon, written out as the scalar loop it is."""
    eps = []
    for a, r in zip(orders, rdp, strict=True):
        if delta**2 + math.expm1(-r) > 0:
            eps.append(0.0)
        elif a > 1.01:
            eps.append(r + math.log1p(-1 / a) - math.log(delta * a) / (a - 1))
        else:
            eps.append(math.inf)
    index = int(np.argmin(eps))
    return max(0.0, eps[index]), orders[index]


@pytest.mark.parametrize("delta", [1e-5, 1e-8, 0.3])
def test_improved_matches_dp_accounting_loop_and_never_exceeds_classic(delta):
    rng = np.random.default_rng(3)
    orders = np.concatenate(([1.005, 1.5], DEFAULT_ORDERS))
    for scale in (1e-9, 1e-3, 0.1, 10.0):
        rdp = rng.uniform(0, scale, orders.size) * orders
        improved = eps_curve_improved(orders, rdp, delta)
        index = best_order(improved)
        expected_eps, expected_order = _dp_accounting_compute_epsilon(orders, rdp, delta)
        assert max(0.0, improved[index]) == pytest.approx(expected_eps, rel=1e-12, abs=1e-300)
        assert orders[index] == expected_order
        classic = eps_curve_classic(orders, rdp, delta)
        assert improved.min() <= classic.min()


def test_epsilon_non_increasing_in_delta():
    for case in reference_json("reference_test_suite.json")["core_test"][
        "compute_eps_from_delta_monotonicity"
    ]:
        orders, rdp = np.array(case["orders"]), np.array(case["rdp"])
        for curve in (eps_curve_classic, eps_curve_improved):
            best = [max(0.0, curve(orders, rdp, d).min()) for d in case["deltas"]]
            assert np.all(np.diff(best) <= 0)
        classic = [eps_curve_classic(orders, rdp, d).min() for d in case["deltas"]]
        np.testing.assert_allclose(classic, case["eps"], rtol=1e-12)


@pytest.mark.parametrize("bad", [0.0, 1.0, -1e-5, math.nan])
def test_bad_delta_is_a_value_error(bad):
    with pytest.raises(ValueError):
        eps_curve_classic(np.array([2.0]), np.array([0.1]), bad)


def test_mismatched_lengths_are_a_value_error():
    case = reference_json("reference_test_suite.json")["core_test"][
        "compute_eps_from_delta_value_error"
    ]
    with pytest.raises(ValueError):
        eps_curve_classic(np.array(case["orders"]), np.array(case["rdp"]), case["delta"])

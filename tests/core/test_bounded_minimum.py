"""pate_cli.core.bounded_minimum against scipy.optimize.minimize_scalar(method="bounded"),
which C5 and C6 were checked with: the same points, so the same minimum, bit for bit."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import optimize, special

from pate_cli.core import conditions
from pate_cli.core.bounded_minimum import bounded_minimum
from pate_cli.core.theorem6 import _logq0_sound, _theorem6_derivative, log_bl_gnmax


def _scipy(fun, lower: float, upper: float, **options) -> tuple[float, float, bool, int]:
    calls = []

    def counted(x: float) -> float:
        calls.append(x)
        return fun(x)

    result = optimize.minimize_scalar(
        counted, bounds=(lower, upper), method="bounded", options=options
    )
    return float(result.x), float(result.fun), bool(result.success), len(calls)


def _ours(fun, lower: float, upper: float, **options) -> tuple[float, float, bool, int]:
    calls = []

    def counted(x: float) -> float:
        calls.append(x)
        return fun(x)

    x, minimum, converged = bounded_minimum(counted, lower, upper, **options)
    return float(x), float(minimum), converged, len(calls)


FUNCTIONS = [
    (lambda x: (x - 0.3) ** 2, 0.0, 1.0),
    (lambda x: math.sin(3 * x) + 0.1 * x, -4.0, 4.0),
    (lambda x: abs(x - 2.0), 0.0, 10.0),
    (lambda x: x, 0.0, 1.0),  # the minimum at an end
    (lambda x: -x, 0.0, 1e-300),  # an interval narrower than the tolerance
    (lambda x: 1.0, 0.0, 5.0),  # flat
    (lambda x: math.cos(1 / (x + 0.05)), 0.0, 2.0),  # many local minima
    (lambda x: (x - 1e6) ** 2, 0.0, 2e6),
    (lambda x: math.nan, 0.0, 1.0),  # NaN: not converged
    (lambda x: math.nan if 0.3 < x < 0.5 else (x - 0.4) ** 2, 0.0, 1.0),  # NaN near the minimum
]


@pytest.mark.parametrize("case", range(len(FUNCTIONS)))
def test_the_same_points_and_minimum_as_scipy(case):
    fun, lower, upper = FUNCTIONS[case]
    ours, theirs = _ours(fun, lower, upper), _scipy(fun, lower, upper)
    assert ours[2:] == theirs[2:]
    assert np.array_equal(ours[:2], theirs[:2], equal_nan=True)


def test_it_stops_at_maxiter_evaluations_as_scipy():
    def far(x: float) -> float:
        return abs(x - 7e5) ** 0.5

    ours = _ours(far, 0.0, 1e6, maxiter=10)
    assert ours == _scipy(far, 0.0, 1e6, maxiter=10)
    assert ours[2:] == (False, 10)


@pytest.mark.parametrize("sigma", [0.5, 2.0, 10.0, 40.0, 150.0])
@pytest.mark.parametrize("num_classes", [2, 10, 100])
@pytest.mark.parametrize("order", [1.5, 4.0, 14.0, 64.0])
def test_the_conditions_derivatives_as_scipy(sigma, num_classes, order):
    """C5's and C6's derivatives as check_conditions minimises them (the sound q0 and q1)."""
    try:
        logq0 = _logq0_sound(sigma, order, num_classes)
    except ArithmeticError:
        pytest.skip("no q0 at this sigma and order")
    q0 = math.exp(logq0)
    q1 = math.exp(float(log_bl_gnmax(np.array([logq0]), sigma, num_classes)[0]))
    half = (num_classes - 1) / 2

    def c5(q: float) -> float:
        return _theorem6_derivative(q, sigma, order)

    def c6(q: float) -> float:
        z = float(special.erfcinv(q / half))
        upper = half * float(special.erfc(z - 1 / sigma))
        with np.errstate(all="ignore"):
            slope = np.exp(2 * z / sigma - 1 / np.float64(sigma) ** 2)
            return float(c5(upper) * slope - c5(q))

    for fun, upper in ((c5, q0), (c6, q1)):
        if upper > 0:
            ours, theirs = _ours(fun, 0, upper), _scipy(fun, 0, upper)
            assert ours[2:] == theirs[2:]
            assert np.array_equal(ours[:2], theirs[:2], equal_nan=True)


def test_check_conditions_imports_no_scipy_optimize():
    import subprocess
    import sys

    code = (
        "import sys; from pate_cli.core.conditions import check_conditions; "
        "check_conditions(40.0, 10, 14.0); print('scipy.optimize' in sys.modules)"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout.split() == ["False"]
    assert conditions.bounded_minimum is bounded_minimum

"""Conditions C5 and C6, and whether a step's data-dependent bound can ever beat Prop. 8's.

Papernot et al. 2018, Appendix B.4.2: C5 (beta(q) non-decreasing on [0, q0]) and C6
(beta(B_U(q)) - beta(q) non-decreasing on [0, q1]) are checked as the reference does, by a
bounded minimisation of the derivative of Theorem 6's bound (analytic here:
``theorem6._theorem6_derivative``). A step whose data-dependent bound never beats the
data-independent one at an order is accounted data-independently: it has no sensitivity.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import numpy as np
from scipy import special

from pate_cli.core._common import (
    _check_num_classes,
    _check_num_teachers,
    _check_order,
    _check_positive,
)
from pate_cli.core.bounded_minimum import bounded_minimum
from pate_cli.core.gnmax import logq_gnmax, rdp_gnmax, rdp_gnmax_data_independent
from pate_cli.core.theorem6 import (
    NumericalRangeError,
    _logq0_scalar,
    _logq0_sound,
    _theorem6_derivative,
    log_bl_gnmax,
)
from pate_cli.core.threshold import (
    logq_threshold,
    rdp_threshold,
    rdp_threshold_data_independent,
)


def is_data_independent_always_opt_gnmax(
    num_teachers: int, num_classes: int, sigma: float, order: float
) -> bool:
    """Tell whether GNMax's data-dependent bound never beats Prop. 8's at this order.

    As the reference's ``is_data_independent_always_opt_gaussian``: the most
    favourable histogram (unanimous) gives RDP within ``np.isclose`` of lambda/sigma^2
    (its relative tolerance only: see the comment below).

    Shapes: scalars -> bool.
    """
    num_teachers = _check_num_teachers(num_teachers)
    if int(num_classes) != num_classes or num_classes < 1:
        raise ValueError(f"num_classes must be a positive integer, got {num_classes}")
    sigma = _check_positive("sigma", sigma)
    order = _check_order(order)
    unanimous = np.zeros((1, int(num_classes)))
    unanimous[0, 0] = num_teachers
    orders = np.array([order])
    dependent = rdp_gnmax(logq_gnmax(unanimous, sigma), sigma, orders)[0, 0]
    # atol=0: the reference's default atol=1e-8 calls any cost below 1e-8 "close".
    return bool(np.isclose(dependent, rdp_gnmax_data_independent(sigma, orders)[0], atol=0))


def is_data_independent_always_opt_threshold(
    num_teachers: int, threshold: float, sigma1: float, order: float, sensitivity: int = 1
) -> bool:
    """Tell whether the threshold step's data-dependent bound never beats Prop. 8's.

    As the reference's ``is_data_independent_always_opt_threshold``: the RDP
    depends only on max(votes) in [0, M] and is checked at both ends with
    ``np.isclose`` (relative tolerance only) against lambda / (2 sigma1^2).

    Shapes: scalars -> bool.
    """
    num_teachers = _check_num_teachers(num_teachers)
    sigma1 = _check_positive("sigma1", sigma1)
    order = _check_order(order)
    ends = np.array([[0.0], [float(num_teachers)]])
    orders = np.array([order])
    logq = logq_threshold(ends, threshold, sigma1)
    dependent = rdp_threshold(logq, sigma1, orders, sensitivity=sensitivity)
    independent = rdp_threshold_data_independent(sigma1, orders, sensitivity=sensitivity)[0]
    return bool(np.all(np.isclose(dependent[:, 0], independent, atol=0)))


def _minimum_of(fn: Callable[[float], float], upper: float) -> float:
    def checked(q: float) -> float:
        value = fn(q)
        if math.isnan(value):
            raise NumericalRangeError(
                f"C5/C6 cannot be checked numerically: the derivative is not representable "
                f"at q = {q:.6g}"
            )
        return value

    _, minimum, converged = bounded_minimum(checked, 0, upper)  # scipy's, step for step
    if not converged:
        raise RuntimeError("the bounded minimiser did not converge while checking C5/C6")
    return float(minimum)


def check_conditions(
    sigma: float, num_classes: int, order: float, *, reference: bool = False
) -> tuple[bool, bool]:
    """Conditions C5 and C6 (Appendix B.4.2, Papernot et al. 2018) at one order.

    C5: beta(q) is non-decreasing on [0, q0]. C6: Delta beta(q) =
    beta(B_U(q)) - beta(q) is non-decreasing on [0, q1], q1 = B_L(q0). As the
    reference, a condition holds when the minimum of the derivative found by
    ``scipy.optimize.minimize_scalar(method="bounded")`` is >= 0 (its steps, taken by
    ``core.bounded_minimum``: a numerical check, not a proof); the derivative is
    analytic here instead of symbolic (sympy), and C6 is only checked when C5 holds.
    q0 and q1 are those of the sound analysis (where the published bound reaches
    Prop. 8's), or with
    ``reference`` the reference's (the Brent root of Theorem 6 = Prop. 8).

    Returns:
        (C5, C6).

    Raises:
        ValueError: sigma <= 0, num_classes < 2, order <= 1.
        NumericalRangeError: q0 or q1 underflows, so the interval cannot be searched.
        RuntimeError: the minimiser does not converge.

    Shapes: scalars -> (bool, bool).
    """
    sigma = _check_positive("sigma", sigma)
    num_classes = _check_num_classes(num_classes)
    order = _check_order(order)
    logq0 = _logq0_scalar(sigma, order) if reference else _logq0_sound(sigma, order, num_classes)
    q0 = math.exp(logq0)
    if q0 == 0.0:
        raise NumericalRangeError(
            f"C5/C6 cannot be checked numerically: q0 = exp({logq0:.6g}) underflows to 0"
        )
    cond5 = _minimum_of(lambda q: _theorem6_derivative(q, sigma, order), q0) >= 0
    if not cond5:
        return False, False
    logq1 = float(log_bl_gnmax(np.array([logq0]), sigma, num_classes)[0])
    q1 = math.exp(logq1)
    if q1 == 0.0:
        raise NumericalRangeError(
            f"C6 cannot be checked numerically: q1 = exp({logq1:.6g}) underflows to 0"
        )
    half_classes = (num_classes - 1) / 2

    def delta_derivative(q: float) -> float:
        z = float(special.erfcinv(q / half_classes))
        upper = half_classes * float(special.erfc(z - 1 / sigma))  # B_U without the cap
        # dB_U/dq = exp(2 z / sigma - 1 / sigma^2) from d erfc and d erfcinv.
        with np.errstate(all="ignore"):
            slope = np.exp(2 * z / sigma - 1 / np.float64(sigma) ** 2)
            return float(
                _theorem6_derivative(upper, sigma, order) * slope
                - _theorem6_derivative(q, sigma, order)
            )

    cond6 = _minimum_of(delta_derivative, q1) >= 0
    return True, bool(cond6)

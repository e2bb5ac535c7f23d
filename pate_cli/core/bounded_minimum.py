"""The minimum of a function of one variable on an interval, found as
``scipy.optimize.minimize_scalar(fun, bounds=(lower, upper), method="bounded")`` finds it.

Brent's method with golden sections and parabolic steps (Forsythe, Malcolm and Moler's
``fmin``), step for step as scipy writes it, with its defaults (``xatol`` 1e-5, at most 500
evaluations): the same points evaluated, so the same minimum to the last bit
(tests/core/test_bounded_minimum.py holds the two to it). Conditions C5 and C6 are checked
by it as the 2018 reference checks them; importing ``scipy.optimize`` for it took 0.2 s of
each release's start-up.
"""

from __future__ import annotations

import math
from collections.abc import Callable

_SQRT_EPS = math.sqrt(2.2e-16)
_GOLDEN_MEAN = 0.5 * (3.0 - math.sqrt(5.0))


def _sign_or_one(x: float) -> float:
    """numpy's ``sign(x) + (x == 0)``: -1 below 0, 1 at or above it, NaN for NaN."""
    if x < 0:
        return -1.0
    return 1.0 if x >= 0 else math.nan


def _maximum(a: float, b: float) -> float:
    """numpy's ``maximum``: NaN where either is."""
    if math.isnan(a) or math.isnan(b):
        return math.nan
    return a if a >= b else b


def bounded_minimum(
    fun: Callable[[float], float],
    lower: float,
    upper: float,
    *,
    xatol: float = 1e-5,
    maxiter: int = 500,
) -> tuple[float, float, bool]:
    """``(x, fun(x), converged)`` at the minimum found on ``[lower, upper]`` (finite,
    ``lower <= upper``); not converged after ``maxiter`` evaluations, or at a NaN."""
    if not (math.isfinite(lower) and math.isfinite(upper)):
        raise ValueError("Optimization bounds must be finite scalars.")
    if lower > upper:
        raise ValueError("The lower bound exceeds the upper bound.")
    a, b = lower, upper
    fulc = a + _GOLDEN_MEAN * (b - a)
    nfc = xf = fulc
    rat = e = 0.0
    fx = fun(xf)
    num = 1
    fu = math.inf
    ffulc = fnfc = fx
    xm = 0.5 * (a + b)
    tol1 = _SQRT_EPS * abs(xf) + xatol / 3.0
    tol2 = 2.0 * tol1
    converged = True
    while abs(xf - xm) > (tol2 - 0.5 * (b - a)):
        golden = True
        if abs(e) > tol1:  # a parabolic fit
            golden = False
            r = (xf - nfc) * (fx - ffulc)
            q = (xf - fulc) * (fx - fnfc)
            p = (xf - fulc) * q - (xf - nfc) * r
            q = 2.0 * (q - r)
            if q > 0.0:
                p = -p
            q = abs(q)
            r = e
            e = rat
            if abs(p) < abs(0.5 * q * r) and p > q * (a - xf) and p < q * (b - xf):
                rat = (p + 0.0) / q
                x = xf + rat
                if (x - a) < tol2 or (b - x) < tol2:
                    rat = tol1 * _sign_or_one(xm - xf)
            else:
                golden = True
        if golden:  # a golden-section step
            e = a - xf if xf >= xm else b - xf
            rat = _GOLDEN_MEAN * e
        x = xf + _sign_or_one(rat) * _maximum(abs(rat), tol1)
        fu = fun(x)
        num += 1
        if fu <= fx:
            if x >= xf:
                a = xf
            else:
                b = xf
            fulc, ffulc = nfc, fnfc
            nfc, fnfc = xf, fx
            xf, fx = x, fu
        else:
            if x < xf:
                a = x
            else:
                b = x
            if fu <= fnfc or nfc == xf:
                fulc, ffulc = nfc, fnfc
                nfc, fnfc = x, fu
            elif fu <= ffulc or fulc == xf or fulc == nfc:
                fulc, ffulc = x, fu
        xm = 0.5 * (a + b)
        tol1 = _SQRT_EPS * abs(xf) + xatol / 3.0
        tol2 = 2.0 * tol1
        if num >= maxiter:
            converged = False
            break
    if math.isnan(xf) or math.isnan(fx) or math.isnan(fu):
        converged = False
    return xf, fx, converged

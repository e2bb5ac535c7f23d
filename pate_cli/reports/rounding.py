"""How a figure is rounded where it is printed for people: one policy, the safe side.

A number copied out of a table into a paper must keep the promise its full value keeps, so
every figure is rounded at the digits it shows towards the side that errs safe:

- **up** (``up=True``): a privacy cost or a bound on one. Every epsilon (data-dependent,
  data-independent, guaranteed, worst case, exact, released, sampled, running), every RDP
  value, a sensitivity (local, smooth), the GNSS cost, the log q bound of Prop. 7, a
  Gaussian-DP mu and a pure charge's epsilon0. The printed figure is never below the value:
  3.926701 prints as 3.9268, not 3.9267.
- **down** (``up=False``): what a budget has left. Never above the value.
- **nearest** (:func:`nearest`): what bounds nothing. Agreement, accuracy, Pr[answered],
  the expected number answered, shares, quantiles, and the release's noise std, beta and
  sigma_ss (a spread and two parameters of the noise: a copied one is a setting, whose cost
  pate computes afresh, not a promise).

Rounding is exact. A value's decimal is its shortest ``repr``, the number ``--json`` prints,
so a value exact at the shown digits (3.9267) is printed as it is and only a longer one is
moved; no binary expansion leaks in. Zero prints unsigned (never "-0.0000"), infinities as
"inf" and "-inf". JSON and the ledger's files keep full precision
(:func:`pate_cli.reports.encoding.number_text`); this module is for text meant to be read.

It imports nothing of the package, so the Markdown view, the reports and the command line's
renderers all round through it.
"""

from __future__ import annotations

import math
from decimal import ROUND_CEILING, ROUND_FLOOR, Context, Decimal


def _is_scientific(value: float) -> bool:
    """Whether :func:`nearest` writes ``value`` in scientific notation."""
    return value != 0 and (abs(value) < 1e-3 or abs(value) >= 1e6)


def _scientific(rounded: Decimal, digits: int) -> str:
    """A decimal already at ``digits`` significant digits as ``e`` writes a float
    ("1.235e+06"), from its own digits: a float would move a subnormal's."""
    exponent = rounded.adjusted()
    return f"{rounded.scaleb(-exponent):.{digits - 1}f}e{exponent:+03d}"


def _general(rounded: Decimal, digits: int) -> str:
    """A decimal already at ``digits`` significant digits as ``g`` writes a float: fixed
    from 1e-4 to below 10**digits, else scientific, trailing zeros dropped."""
    exponent = rounded.adjusted()
    if -4 <= exponent < digits:
        text = f"{rounded:.{max(digits - 1 - exponent, 0)}f}"
        return text.rstrip("0").rstrip(".") if "." in text else text
    mantissa = f"{rounded.scaleb(-exponent):.{digits - 1}f}"
    mantissa = mantissa.rstrip("0").rstrip(".") if "." in mantissa else mantissa
    return f"{mantissa}e{exponent:+03d}"


def nearest(value: float, digits: int = 4) -> str:
    """A figure that bounds nothing, rounded to nearest: ``digits`` decimals, or ``digits``
    significant digits in scientific notation below 1e-3 and from 1e6; "inf" and "-inf"."""
    if math.isinf(value):
        return "inf" if value > 0 else "-inf"
    if value == 0:
        return f"{0.0:.{digits}f}"  # unsigned: -0.0 too
    if _is_scientific(value):
        return f"{value:.{digits - 1}e}"
    return f"{value:.{digits}f}"


def bound(value: float, digits: int = 4, *, up: bool = True) -> str:
    """A bound, written as :func:`nearest` writes it but rounded up at the last digit shown
    (a cost: never printed below ``value``), or down with ``up=False`` (what is left: never
    above).

    Examples: ``bound(3.926701) == "3.9268"``, ``bound(3.9267) == "3.9267"``,
    ``bound(3.926701, up=False) == "3.9267"``, ``bound(-1e-20) == "-1.000e-20"``.
    """
    if not math.isfinite(value) or value == 0:
        return nearest(value, digits)
    rounding = ROUND_CEILING if up else ROUND_FLOOR
    exact = Decimal(repr(float(value)))
    if _is_scientific(value):
        return _scientific(Context(prec=digits, rounding=rounding).plus(exact), digits)
    shown = exact.quantize(Decimal(1).scaleb(-digits), rounding=rounding)
    return f"{shown + 0:.{digits}f}"  # + 0: a rounded zero loses its sign


def bound_significant(value: float, digits: int = 6, *, up: bool = True) -> str:
    """A bound to ``digits`` significant digits, as the ``g`` format writes it, rounded up
    (or down with ``up=False``): ``bound_significant(3.926701, 4) == "3.927"``, where a
    message says "epsilon 3.92671 exceeds ..." rather than a table's fixed decimals."""
    if value == 0:
        return "0"  # unsigned: -0.0 too
    if not math.isfinite(value):
        return nearest(value)
    rounding = ROUND_CEILING if up else ROUND_FLOOR
    rounded = Context(prec=digits, rounding=rounding).plus(Decimal(repr(float(value))))
    return _general(rounded, digits)

"""One-sided bisection: the boundary of a monotone predicate, approached from one side only.

Every solver of the package that inverts a monotone bound (the epsilon of an exact curve at a
target delta, the sound log q0 of ``rdp_gnmax``, the sigma, sigma1, gamma or number of queries
that ``pate plan`` returns) needs an answer on a known side of the boundary: an epsilon whose
delta is within the target, never one just below the boundary whose delta exceeds it. A
two-sided root finder (Brent, or bisection returning the midpoint) gives no such promise.
:func:`bisect_boundary` keeps the promise by construction: it only ever returns the end of the
bracket where the predicate was seen to hold. Each caller finds its own bracket (doubling,
halving) and phrases its predicate so that "holds" means "this value keeps the bound sound".
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any, Literal, overload

Midpoint = Literal["arithmetic", "geometric", "integer"]


@overload
def bisect_boundary(
    holds: Callable[[int], bool], good: int, bad: int, *, midpoint: Literal["integer"]
) -> int: ...


@overload
def bisect_boundary(
    holds: Callable[[float], bool],
    good: float,
    bad: float,
    *,
    midpoint: Literal["arithmetic", "geometric"] = "arithmetic",
    rtol: float = 0.0,
) -> float: ...


def bisect_boundary(
    holds: Callable[[Any], bool],
    good: float,
    bad: float,
    *,
    midpoint: Midpoint = "arithmetic",
    rtol: float = 0.0,
) -> float:
    """The end of a shrinking bracket at which ``holds`` is true: a boundary from one side.

    Contract:

    * ``holds`` is monotone on the bracket: true on the side of ``good``, false on the side
      of ``bad``, switching once. Either end may be the smaller one.
    * The ends are the caller's claim and are never evaluated: ``holds(good)`` is taken as
      true and ``holds(bad)`` as false (the caller has usually just evaluated both while
      bracketing).
    * Each step evaluates ``holds`` at an interior point ``m`` of [lo, hi] (lo, hi the two
      ends in increasing order) and moves ``good`` to ``m`` if it holds, else ``bad``.
    * The result is ``good``: the argument itself or a point at which ``holds`` returned
      true. Never a point where it returned false, so the bound the predicate encodes
      (delta <= target, cost <= target, ...) holds at the answer whatever the rounding.
      If the predicate holds at both ends the answer approaches ``bad`` (and still holds);
      if it holds at neither (``good`` was not a good end) the answer is ``good``
      unchanged, since every step moves ``bad``.
    * Midpoint and stopping rule (lo, hi as above, checked before each step):

      - ``"arithmetic"``: m = (lo + hi) / 2, or lo / 2 + hi / 2 where the sum overflows;
        stop once hi - lo <= rtol * |hi|.
      - ``"geometric"`` (ends > 0): m = sqrt(lo * hi), or sqrt(lo) * sqrt(hi) where the
        product overflows or underflows so far that the former leaves the bracket; stop
        once hi / lo - 1 <= rtol.
      - ``"integer"`` (integer ends): m = (lo + hi) // 2, so the answer is an integer: the
        largest (or smallest, with ``good`` above ``bad``) at which ``holds`` is true. No
        width test; ``rtol`` is unused.

      In every mode the search also stops when m is not strictly between lo and hi: the
      ends are adjacent doubles (adjacent integers), or one is infinite. So it ends for any
      rtol >= 0, rtol = 0 bisecting to adjacent doubles: each step halves hi - lo
      (arithmetic, integer) or log(hi / lo) (geometric), which takes at most about 2100,
      log2(hi - lo) + 1 and 64 steps respectively.

    Args:
        holds: the monotone predicate; true means the value keeps the caller's bound sound.
        good: an end where ``holds`` is true (the side the answer is taken from).
        bad: an end where ``holds`` is false.
        midpoint: how the bracket is split, and which width ``rtol`` measures (see above).
        rtol: relative width at which to stop (0: bisect until the ends are adjacent).

    Returns:
        ``good`` after the last step: within the stopping width of the boundary, on the
        side where ``holds`` is true.

    Raises:
        ValueError: an unknown ``midpoint``, a negative or NaN ``rtol``, a NaN end, or an
            end <= 0 with ``"geometric"``.
    """
    _check_bracket(good, bad, midpoint, rtol)
    while True:
        lo, hi = (good, bad) if good < bad else (bad, good)
        middle = _split(lo, hi, midpoint, rtol)
        if middle is None:
            return good
        if holds(middle):
            good = middle
        else:
            bad = middle


def _check_bracket(good: float, bad: float, midpoint: Midpoint, rtol: float) -> None:
    """Refuse what ``bisect_boundary``'s contract excludes (its Raises)."""
    if midpoint not in ("arithmetic", "geometric", "integer"):
        raise ValueError(f"midpoint must be arithmetic, geometric or integer, not {midpoint!r}")
    if not rtol >= 0:
        raise ValueError(f"rtol must be >= 0, not {rtol!r}")
    if good != good or bad != bad:  # NaN (an integer end is never one)
        raise ValueError(f"the bracket has a NaN end: good={good!r}, bad={bad!r}")
    if midpoint == "geometric" and not (good > 0 and bad > 0):
        raise ValueError(f"a geometric bracket needs ends > 0: good={good!r}, bad={bad!r}")


def _split(lo: Any, hi: Any, midpoint: Midpoint, rtol: float) -> Any:
    """The interior point to evaluate next, or None where the search stops (the bracket is
    within ``rtol``, or nothing lies strictly between its ends)."""
    if midpoint == "integer":
        middle = (lo + hi) // 2
    elif midpoint == "geometric":
        if not hi / lo - 1 > rtol:
            return None
        middle = math.sqrt(lo * hi)
        if not lo < middle < hi:  # lo * hi left the double range: take the roots first
            middle = math.sqrt(lo) * math.sqrt(hi)
    else:
        if not hi - lo > rtol * abs(hi):
            return None
        middle = (lo + hi) / 2
        if not lo < middle < hi:  # lo + hi overflowed: halve first
            middle = lo / 2 + hi / 2
    return middle if lo < middle < hi else None  # adjacent ends: nothing left to split

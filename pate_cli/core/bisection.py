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


def replay_boundary(
    holds: Callable[[float], bool],
    good: float,
    bad: float,
    root: float,
    zone: float,
    *,
    rtol: float,
) -> float:
    """``bisect_boundary(holds, good, bad, rtol=rtol)`` (arithmetic midpoints), bit for bit,
    from ``root``, an estimate of where ``holds`` switches: ``holds`` is evaluated only at the
    midpoints within ``zone`` of ``root`` and at the two ends the search finishes with.

    Elsewhere a midpoint is taken to hold when it lies on ``good``'s side of ``root``. Where
    ``holds`` is monotone, the first midpoint so misjudged lies between ``root`` and the true
    switch, and the search then finishes with a good end that fails ``holds`` or a bad end
    that passes it (the ends nest toward the misjudged side). Both ends are checked, and if
    either check fails the search is run again with ``holds`` throughout: the answer is
    always ``bisect_boundary``'s where ``holds`` is monotone outside the zone."""
    seen: dict[float, bool] = {}

    def truly(x: float) -> bool:
        if x not in seen:
            seen[x] = holds(x)
        return seen[x]

    side = 1.0 if good > bad else -1.0
    last_bad = [bad]

    def judged(x: float) -> bool:
        answer = truly(x) if abs(x - root) <= zone else (x - root) * side > 0
        if not answer:
            last_bad[0] = x  # the search's bad end from here on (its brackets nest)
        return answer

    found = bisect_boundary(judged, good, bad, rtol=rtol)
    # The caller's ends are taken as given, as bisect_boundary takes them.
    settled = (found == good or truly(found)) and (last_bad[0] == bad or not truly(last_bad[0]))
    return found if settled else bisect_boundary(truly, good, bad, rtol=rtol)


def sign_change(
    excess: Callable[[float], float],
    good: float,
    bad: float,
    at_good: float,
    at_bad: float,
    rtol: float,
) -> float:
    """A point within ``rtol |x|`` of where ``excess`` changes sign between ``bad`` (where it
    is ``at_bad`` > 0) and ``good`` (``at_good`` <= 0), by the Illinois method: regula falsi
    whose end kept twice in a row has its value halved, a bisection step where the secant
    leaves the bracket (or is not a number), at most ``_SECANT_STEPS`` steps. No promise of
    a side: an estimate for :func:`replay_boundary`."""
    kept = 0  # the end kept at the last step: +1 good, -1 bad
    for _ in range(_SECANT_STEPS):
        if not abs(good - bad) > rtol * max(abs(good), abs(bad)):
            break
        x = (bad * at_good - good * at_bad) / (at_good - at_bad)
        if not min(good, bad) < x < max(good, bad):
            x = bad / 2 + good / 2
            if not min(good, bad) < x < max(good, bad):  # adjacent doubles
                break
        value = excess(x)
        if value <= 0:
            good, at_good = x, value
            at_bad = at_bad / 2 if kept == -1 else at_bad
            kept = -1
        else:
            bad, at_bad = x, value
            at_good = at_good / 2 if kept == 1 else at_good
            kept = 1
    return bad / 2 + good / 2


_SECANT_STEPS = 100

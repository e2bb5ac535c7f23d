"""The composition of pure-DP mechanisms of different epsilon0, without Renyi DP in between.

A mechanism that is eps-DP is dominated by randomised response of that eps (Kairouz, Oh and
Viswanath 2015), so k_g mechanisms of each eps_g composed are dominated by the product of
those pairs, whose privacy loss is L = sum_g (k_g - 2 l_g) eps_g with l_g ~ Bin(k_g, q_g),
q_g = 1 / (1 + e^eps_g), independent. Its curve is the optimal composition of the
mechanisms (Murtagh and Vadhan 2016, Theorem 1.5):

    delta(eps) = E[(1 - e^(eps - L))_+],

a sum over every subset of the steps in general (#P-hard), but over the counts l_g when the
steps take a few values of eps0. :func:`curve` sums it for two values
(more are raised to two: an eps-DP step is eps'-DP for every eps' >= eps), in O(window) an
epsilon: the outer count's atoms one by one, the inner's sum over the steps whose loss
passes eps - L_outer from prefix sums whose every term is positive (no cancellation).
Beyond the windows it sums, closed forms bound it (Hoeffding's inequality; each share's
optimal composition beside the others' largest loss). Every rounding is moved up.

:func:`heterogeneous_epsilon` solves delta(eps) = delta from above, never above the basic
composition sum k_g eps_g.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import partial

import numpy as np
from scipy import special

from pate_cli.core.exact import (
    _PURE_EPS0_LIMIT,
    _PURE_WINDOW,
    _ROUNDING,
    _log_binomial_cdf,
    _log_binomial_pmf,
    epsilon_for,
    log_delta_pure_composition,
    pure_composition_epsilon,
)
from pate_cli.core.logmath import log1mexp

Share = tuple[float, int]
"""(eps0, count): ``count`` mechanisms, each eps0-DP."""

_U = 2.0**-53  # the unit roundoff
# A prefix sum's terms are scaled by e^(2 eps0 j) within a block: at most e^300.
_BLOCK_GROWTH = 300.0
# exp() of a value below this is subnormal or 0: the terms lost there are charged whole.
_LOG_TINY = -708.0
# The most levels of a share summed one by one (each epsilon costs some 40 passes over them):
# past it (millions of steps, where the closed forms are close) the closed-form bounds.
_PAIR_WINDOW = 1 << 16


def basic_epsilon(shares: Sequence[Share]) -> float:
    """sum k_g eps0_g (basic composition, Dwork, McSherry, Nissim and Smith 2006), rounded
    up past its roundings (each product's and the sum's)."""
    total = math.fsum(count * eps0 for eps0, count in shares)
    return math.nextafter(total * (1 + 4 * len(shares) * _U), math.inf)


def merged(shares: Sequence[Share]) -> list[Share]:
    """The shares with equal eps0 added up, those of no step (count 0 or eps0 0) left out,
    largest eps0 first."""
    counts: dict[float, int] = {}
    for eps0, count in shares:
        if count > 0 and eps0 > 0:
            counts[float(eps0)] = counts.get(float(eps0), 0) + int(count)
    return sorted(counts.items(), reverse=True)


def _two_levels(shares: list[Share]) -> list[Share]:
    """At most two values of eps0: every share below the second largest raised to it (an
    eps-DP step is eps'-DP for eps' >= eps), so the curve is an upper bound."""
    if len(shares) <= 2:
        return shares
    (top, top_count), (second, _) = shares[0], shares[1]
    return [(top, top_count), (second, sum(count for _, count in shares[1:]))]


def heterogeneous_epsilon(shares: Sequence[Share], delta: float) -> float:
    """Epsilon of the composition of ``shares`` at ``delta``, from above, never above the
    basic composition."""
    found = merged(shares)
    if not found:
        return 0.0
    if len(found) == 1:
        return pure_composition_epsilon(found[0][0], found[0][1], delta)
    basic = basic_epsilon(found)
    if found[0][0] > _PURE_EPS0_LIMIT:  # a step's outcome all but certain: basic (exact.py)
        return basic
    # Levels less likely than delta e^-40 are summed as their mass (each term is below it).
    return min(epsilon_for(curve(found, math.log(delta) - 40), delta), basic)


def curve(shares: Sequence[Share], floor: float = -math.inf) -> Callable[[float], float]:
    """log delta(eps) of ``shares`` composed, bounded above (module docstring): the windows
    built once, each epsilon O(window). Levels whose log pmf is below ``floor`` add their
    mass whole (a term of the sum is below its level's pmf)."""
    found = merged(shares)
    levels = _two_levels(found)
    if not levels:
        return lambda eps: -math.inf
    if len(levels) == 1:
        return partial(log_delta_pure_composition, eps0=levels[0][0], k=levels[0][1])
    # Every loss is at most sum k eps0: past it delta is 0.
    top = basic_epsilon(found)
    pair = _Pair.of(levels[0], levels[1], top, floor)

    def log_delta(eps: float) -> float:
        if eps >= top:
            return -math.inf
        return _log_delta_bounds(eps, levels) if pair is None else pair.log_delta(eps)

    return log_delta


def _log_delta_bounds(eps: float, shares: Sequence[Share]) -> float:
    """Closed-form bounds where the pair is not summed: Hoeffding's, and each share's optimal
    composition at eps less the others' largest loss (sum k eps0: their loss never passes
    it, so (1 - e^(eps - L))_+ <= (1 - e^(eps - rest - L_g))_+)."""
    found = _log_delta_hoeffding(eps, shares)
    for number, (eps0, count) in enumerate(shares):
        rest = basic_epsilon([share for n, share in enumerate(shares) if n != number])
        if eps - rest >= 0:
            found = min(found, log_delta_pure_composition(eps - rest, eps0, count))
    return found


def _log_delta_hoeffding(eps: float, shares: Sequence[Share]) -> float:
    """log of Hoeffding's bound (1963, Theorem 2) on P[L > eps] >= delta(eps): L is a sum of
    independent steps in [-eps0, eps0] of mean eps0 tanh(eps0 / 2), so
    log delta(eps) <= -(eps - c)^2 / (2 sum k eps0^2), c = sum k eps0 tanh(eps0 / 2) (the
    heterogeneous form of Kairouz, Oh and Viswanath 2015's Theorem 3.4 bound)."""
    centre = math.fsum(k * e * math.tanh(e / 2) for e, k in shares) * (1 + 8 * _ROUNDING)
    spread = math.fsum(k * e * e for e, k in shares) * (1 + 8 * _ROUNDING)  # rounded up
    if not eps > centre or not spread > 0:
        return 0.0
    gap = eps - centre
    return max(-gap * gap / (2 * spread) * (1 - 8 * _ROUNDING), -1.7e308)


@dataclass(frozen=True)
class _Window:
    """One share's count l ~ Bin(k, q): the levels summed one by one, their log pmf, the
    losses (k - 2 l) eps0, and the log of the mass outside them."""

    eps0: float
    count: int
    low: int
    log_pmf: np.ndarray
    loss: np.ndarray
    log_outside: float
    rounding: float
    """How far the log pmf may be below its truth (log-gammas of up to log k!)."""

    @classmethod
    def of(cls, eps0: float, count: int, floor: float = -math.inf) -> _Window | None:
        """The levels within 40 standard deviations of the mean whose log pmf is at least
        ``floor``, the others' mass outside (None: too many levels to sum each epsilon)."""
        q = math.exp(-float(np.logaddexp(0.0, eps0)))  # 1 / (1 + e^eps0), no overflow
        spread = 40 * math.sqrt(count * q * (1 - q)) + 40
        if 2 * spread + 1 > _PURE_WINDOW:
            return None
        low = max(0, math.floor(count * q - spread))
        high = min(count, math.ceil(count * q + spread))
        levels = np.arange(low, high + 1, dtype=np.float64)
        log_pmf = _log_binomial_pmf(levels, count, q)
        size = 2.0 * float(special.gammaln(count + 1.0))
        size += count * (abs(math.log(q)) + abs(math.log1p(-q)))
        rounding = 4 * _ROUNDING * size
        kept = np.flatnonzero(log_pmf >= floor)
        start, stop = (kept[0], kept[-1] + 1) if kept.size else (log_pmf.argmax(),) * 2
        stop = max(stop, start + 1)
        if stop - start > _PAIR_WINDOW:
            return None
        below = _log_binomial_cdf(low - 1, count, q)
        above = _log_binomial_cdf(count - high - 1, count, 1 - q)  # P[l > high]
        dropped = np.concatenate((log_pmf[:start], log_pmf[stop:])) + rounding
        outside = special.logsumexp(np.append(dropped, [below, above]))
        return cls(
            eps0,
            count,
            low + int(start),
            log_pmf[start:stop],
            (count - 2 * levels[start:stop]) * eps0,
            float(outside),
            rounding,
        )


@dataclass(frozen=True)
class _Pair:
    """Two shares: the outer one's atoms summed one by one, the inner one's sum over the
    steps whose loss passes x from its prefix sums (``_Prefix``)."""

    outer: _Window
    inner: _Window
    prefix: _Prefix

    reach: float
    """Above every |eps|, |x| and |loss| the sums meet: 3 sum k eps0."""

    @classmethod
    def of(cls, first: Share, second: Share, top: float, floor: float) -> _Pair | None:
        """None where a window is too long, or where the inner's losses are too close
        together for doubles to tell which pass x (``top``: sum k eps0, the largest loss;
        ``floor``: the windows' least log pmf summed one by one)."""
        one, other = _Window.of(*first, floor), _Window.of(*second, floor)
        if one is None or other is None:
            return None
        outer, inner = sorted((one, other), key=lambda w: w.log_pmf.size)  # shorter outside
        if not 3 * top * 1e-12 < inner.eps0:
            return None
        return cls(outer, inner, _Prefix.of(inner), 3 * top)

    def log_delta(self, eps: float) -> float:
        """log of sum over the outer atoms of pmf * D(eps - L_outer), D the inner share's
        delta curve (at any real x), bounded above; plus the outer mass outside its window
        (D <= 1 there)."""
        outer = self.outer
        inner = _log_inner_delta(eps - outer.loss, self.inner, self.prefix, self.reach)
        parts = np.append(outer.log_pmf + inner, outer.log_outside)
        found = float(_log_sum(parts[:, None])[0])
        # The pmfs' roundings, and the sum's (an ulp a term, relative) and the logs'.
        slack = outer.rounding + self.inner.rounding + 4 * _U * parts.size + 1e-12
        return min(found + slack, 0.0)


@dataclass(frozen=True)
class _Prefix:
    """The inner window's prefix sums, its pmf scaled by e^-shift: A[n] = sum_(i<n) p_i
    and C[n] = sum_(i<n) p_i (1 - e^(-2 eps0 (n - 1 - i))), n = 0 .. W, each a sum of
    positive terms. C[n + 1] = (1 - e^(-2 eps0)) A[n] + e^(-2 eps0) C[n] (the recurrence of
    its terms), solved a block at a time, every product positive."""

    shift: float
    log_a: np.ndarray
    log_c: np.ndarray
    log_lost: float
    """log of the mass of the terms lost to underflow (charged whole)."""

    @classmethod
    def of(cls, window: _Window) -> _Prefix:
        shift = float(window.log_pmf.max())
        scaled = window.log_pmf - shift
        p = np.exp(scaled)
        a = np.concatenate(([0.0], np.cumsum(p)))
        c = _recurrence(a, 2 * window.eps0)
        lost = np.count_nonzero(scaled < _LOG_TINY)
        log_lost = math.log(2 * lost) + _LOG_TINY + shift if lost else -math.inf
        with np.errstate(divide="ignore"):  # an empty prefix: log 0 = -inf, as meant
            return cls(shift, np.log(a), np.log(c), log_lost)


def _recurrence(a: np.ndarray, step: float) -> np.ndarray:
    """C of ``_Prefix``: C[0] = C[1] = 0, C[n + 1] = (1 - e^-step) A[n] + e^-step C[n].
    Within a block starting at s, C[n + 1] = e^(-step (n + 1 - s)) C[s] + (1 - e^-step)
    e^(-step n) sum_(s <= j <= n) e^(step j) A[j], the sum scaled by e^(-step s) so its
    terms stay below e^300."""
    size = a.size
    c = np.zeros(size)
    gain, keep = -math.expm1(-step), math.exp(-step)
    block = max(1, int(_BLOCK_GROWTH / step))
    carry = 0.0  # C[s]
    for start in range(0, size - 1, block):
        stop = min(start + block, size - 1)  # n = start .. stop - 1 gives C[start+1 .. stop]
        offset = np.arange(stop - start, dtype=np.float64) * step
        grown = np.cumsum(np.exp(offset) * a[start:stop])
        decay = np.exp(-offset)
        c[start + 1 : stop + 1] = decay * keep * carry + gain * decay * grown
        carry = c[stop]
    return c


def _log_inner_delta(x: np.ndarray, window: _Window, prefix: _Prefix, reach: float) -> np.ndarray:
    """Upper bounds on log D(x) = log sum over the inner levels l with L_l > x of
    pmf_l (1 - e^(x - L_l)), at each x (the outer atoms'), capped at 0 (D <= 1).

    n = the levels with L_l > x, counted in doubles (off by one at most: ``_Pair.of``
    checks the losses are far enough apart); the first n - 2 from the prefix sums, where
    g = x - L_(n - 3) <= -2 eps0: D_prefix = A (1 - e^g) + e^g C, both terms positive; the
    next four one by one, each with its gap moved down past its roundings and never above
    0 (a level whose loss is at or below x adds a positive bound, never a negative). Each
    gap's roundings (x's, the losses', the difference's) are within 8 ulp of ``reach``."""
    eps0, low, size = window.eps0, window.low, window.log_pmf.size
    ahead = np.ceil((window.count * eps0 - x) / (2 * eps0)) - low
    first = np.clip(ahead - 2, 0, size).astype(np.int64)
    parts = [np.full(x.shape, np.logaddexp(window.log_outside, prefix.log_lost))]
    has = first > 0
    last = np.maximum(first - 1, 0)
    gap = x - window.loss[last]
    slack = 8 * _U * reach + 1e-300
    below, above = gap - slack, np.minimum(gap + slack, 0.0)
    with np.errstate(divide="ignore", invalid="ignore"):
        prefix_part = np.logaddexp(
            prefix.log_a[first] + log1mexp(np.minimum(below, -1e-300)),
            above + prefix.log_c[first],
        )
    # The sums' roundings: a few ulp a term, relative, moved up.
    prefix_part = prefix_part + prefix.shift + (size + 16) * 4 * _U
    parts.append(np.where(has, prefix_part, -np.inf))
    for step in range(4):
        level = first + step
        inside = level < size
        at = np.minimum(level, size - 1)
        loss = window.loss[at]
        moved = x - loss - slack
        term = window.log_pmf[at] + log1mexp(np.minimum(moved, -1e-300))
        parts.append(np.where(inside, term, -np.inf))
    return np.minimum(_log_sum(np.stack(parts)) + 1e-14, 0.0)


def _log_sum(parts: np.ndarray) -> np.ndarray:
    """log sum exp over the first axis, each column's largest taken out first (a column all
    -inf gives -inf). Cheaper than scipy's on the few rows here, to a few ulp."""
    top = parts.max(axis=0)
    safe = np.where(np.isfinite(top), top, 0.0)
    with np.errstate(divide="ignore"):  # a column all -inf: log 0 = -inf, as meant
        found: np.ndarray = safe + np.log(np.exp(parts - safe).sum(axis=0))
    return found

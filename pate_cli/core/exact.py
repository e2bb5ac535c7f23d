"""Exact (epsilon, delta) curves of whole runs, without Renyi DP in between.

- A GNMax run is one Gaussian mechanism on the vote histograms: moving one teacher's vote
  changes a histogram by sqrt(2) in L2, so Q queries with noise sigma are mu-Gaussian DP
  with mu = sqrt(2 Q) / sigma (Dong, Roth and Su 2022, Corollary 3.3 for the composition);
  the threshold step of Confident-GNMax adds 1 / sigma1^2 per query to mu^2 (its statistic,
  the top count, moves by 1). Its exact curve is
  delta(eps) = Phi(-eps/mu + mu/2) - e^eps Phi(-eps/mu - mu/2) (Corollary 2.13).
- An LNMax run composes Q mechanisms that are each eps0-DP (Laplace noise of scale 1/gamma on
  counts of L1 sensitivity 2: eps0 = 2 gamma). The optimal composition is exactly
  delta(eps) = sum_l C(Q, l) [e^((Q-l) eps0) - e^(eps + l eps0)]_+ / (1 + e^eps0)^Q
  (Kairouz, Oh and Viswanath 2015, Theorem 3.5), a difference of two binomial tails.

The Gaussian curve's two terms nearly cancel at small mu: :func:`log_delta_gaussian` bounds it
from above instead, never below by a rounding error (its docstring says how).

Both curves decrease in epsilon; :func:`epsilon_for` solves delta(eps) = delta by bisection
and returns the upper end of the bracket, never an epsilon whose delta exceeds the target
(replayed from a root found in a few evaluations: the same value, in half the time).
Each figure is computed once per (mu, delta) or (eps0, k, delta) in a process.
"""

from __future__ import annotations

import functools
import math
import sys
from collections.abc import Callable

import numpy as np
from scipy import special

from pate_cli.core.bisection import replay_boundary, sign_change
from pate_cli.core.logmath import log1mexp

# Each value of log_ndtr (in the log) and of erfcx (relative, at arguments >= -0.5) is taken
# to be within _TERM_ERROR + _ROUNDING |value| of the truth: both are good to a few ulp there
# (against mpmath at 40 digits: 6e-17 + 1e-15 |value| and 9e-16 at worst), so 1e-13 is ample.
_TERM_ERROR = 1e-13
_ROUNDING = 1e-15  # a few ulp: a computed result is moved this much of its size to its safe side
_SUBNORMAL = 1e-320  # and this much more where the roundings were among the subnormals
_LOG_SQRT_2PI = 0.5 * math.log(2 * math.pi)
_SQRT_HALF_PI = math.sqrt(math.pi / 2)
# Simpson's bound is tried where mu <= 1 (beyond it the two terms barely cancel) and z is below
# _SIMPSON_Z (beyond it delta < e^-5e11, and Q(z) alone bounds it).
_SIMPSON_MU = 1.0
_SIMPSON_Z = 1e6


def log_delta_gaussian(eps: float, mu: float) -> float:
    """An upper bound on log delta(eps) of mu-Gaussian DP (Dong, Roth and Su 2022, Corollary
    2.13), above it by at most ~3e-12 (1 + |log delta|) (against mpmath); -inf only at mu = 0.

    With z = eps/mu - mu/2, phi the normal density, Q(z) = 1 - Phi(z) and R = Q / phi (the
    Mills ratio): delta = Q(z) - e^eps Q(z + mu) = phi(z) [R(z) - R(z + mu)], since
    e^eps phi(z + mu) = phi(z). The smaller of two upper bounds: the two terms, each rounded to
    its safe side (tight where they do not cancel: mu large), and Simpson's rule on
    R(z) - R(z + mu) (tight where they do: mu small).
    """
    if mu == 0:
        return -math.inf
    if math.isinf(mu):
        return 0.0
    z = _z_below(eps, mu)
    bound = _log_delta_two_terms(z, mu)
    if mu <= _SIMPSON_MU and z <= _SIMPSON_Z:
        bound = min(bound, _log_delta_simpson(z, mu))
    # 0 < delta <= Q(z) <= 1 for mu > 0: below the double range the lowest double bounds it.
    return min(max(bound, -sys.float_info.max), 0.0)


def _up(value: float) -> float:
    """A computed ``value`` plus its slack (_TERM_ERROR + _ROUNDING |value|): at or above the
    truth it stands for (an infinite value is left as it is)."""
    return value + (_TERM_ERROR + _ROUNDING * abs(value)) if math.isfinite(value) else value


def _down(value: float) -> float:
    """A computed ``value`` minus its slack: at or below the truth it stands for."""
    return value - (_TERM_ERROR + _ROUNDING * abs(value)) if math.isfinite(value) else value


def _z_below(eps: float, mu: float) -> float:
    """A double at or below z = eps/mu - mu/2. delta falls as z grows (d delta / d eps =
    -e^eps Q(z + mu) < 0 at fixed mu), so a bound at this z is one at eps."""
    quotient = eps / mu
    z = quotient - mu / 2
    if not math.isfinite(z):
        return z
    # Two roundings (three with mu / 2 subnormal), each within half an ulp of its result.
    margin = _ROUNDING * quotient + _ROUNDING * abs(z) + _SUBNORMAL  # no overflow on the way
    return math.nextafter(z - margin, -math.inf)


def _log_phi(z: float) -> float:
    """log phi(z) = -z^2/2 - log sqrt(2 pi), rounded to nearest (``_up``/``_down`` bound it)."""
    return -0.5 * z * z - _LOG_SQRT_2PI


def _mills(w: float) -> float:
    """R(w) = Q(w) / phi(w) = sqrt(pi/2) erfcx(w / sqrt 2) (erfc(x) = 2 Q(x sqrt 2)), rounded
    to nearest: within _TERM_ERROR relative for w >= -0.5 (the argument's two roundings move
    it by less, as |x erfcx'(x) / erfcx(x)| < 1 for x >= 0)."""
    return _SQRT_HALF_PI * float(special.erfcx(w / math.sqrt(2)))


def _log_delta_two_terms(z: float, mu: float) -> float:
    """log of Q(z) - phi(z) R(z + mu), the first term rounded up and the second down; Q(z)
    alone where the rounded terms cross (they cancel beyond their accuracy)."""
    first = _up(float(special.log_ndtr(-z)))
    # R decreases: at a double at or above z + mu (> 0) it is at most R(z + mu).
    mills = _mills(math.nextafter(z + mu, math.inf))
    if not mills > 0:  # R below the double range: the second term is negligible
        return first
    second = _down(_down(_log_phi(z)) + _down(math.log(mills)))
    if not second < first:
        return first
    # log(1 - e^x) decreases in x: the difference is rounded down.
    gap = math.nextafter(second - first, -math.inf)
    return _up(first + float(log1mexp(np.float64(gap))))


def _m1_above(w: float) -> float:
    """An upper bound on M1(w) = -R'(w) = 1 - w R(w) (R' = w R - 1, from phi' = -w phi) for
    w >= -0.5: the difference with its error bounded (tight for w below ~3, where it does not
    cancel much) and, for w > 1, ``_m1_continued_fraction`` (tight above ~3)."""
    ratio = _mills(w)
    difference = 1.0 - w * ratio
    # The error is at most (_TERM_ERROR + a few ulp) |w| R plus an ulp of the difference.
    bound = difference + _TERM_ERROR * (abs(difference) + 2 * abs(w) * ratio)
    return min(bound, _m1_continued_fraction(w)) if w > 1 else bound


# Maps of the continued fraction below: an even number, so that a tail of 0 bounds it below.
_FRACTION_DEPTH = 40


def _m1_continued_fraction(w: float) -> float:
    """An upper bound on M1(w) for w > 0 from Laplace's continued fraction for the Mills ratio.
    M_k(w) = the integral over t > 0 of t^k e^(-w t - t^2/2) (R = M_0) satisfy
    w M_k + M_(k+1) = k M_(k-1) (integration by parts), so r_k = M_k / M_(k-1) > 0 is
    k / (w + r_(k+1)) and M1 = 1 / (1 + w (w + r_2)). Each map x -> k / (w + x) decreases on
    x >= 0, so an even number of them from r_(depth+2) = 0 < the truth gives r_2 from below,
    M1 from above (Gordon's bound R >= w / (1 + w^2) is depth 0)."""
    tail = 0.0
    for k in range(_FRACTION_DEPTH + 1, 1, -1):
        tail = k / (w + tail)
    # Each step adds under an ulp of relative error and shrinks the earlier ones (the map's
    # relative sensitivity is tail / (w + tail) < 1): 1e-13 is far above the 40 steps' 1e-14.
    return (1 + _TERM_ERROR) / (1 + w * (w + tail))


# Composite Simpson on _SIMPSON_PANELS panels of [z, z + mu] (weights 1 4 2 4 ... 2 4 1).
_SIMPSON_PANELS = 4


def _log_delta_simpson(z: float, mu: float) -> float:
    """log of phi(z) times composite Simpson's rule for R(z) - R(z + mu), the integral of M1
    over [z, z + mu]. Each panel's rule exceeds its integral by h^5 M1^(4)(xi) / 90 (the rule's
    error term, h the half-panel) and M1^(4) > 0: R(w) = the integral over t > 0 of
    e^(-w t - t^2/2) (Q(w) = the integral of phi(w + t)), so M1^(4)(w) is the integral of
    t^5 e^(-w t - t^2/2). M1 decreases (M1' is minus that of t^2): nodes rounded down and
    values rounded up keep the rule an upper bound."""
    half = mu / (2 * _SIMPSON_PANELS)
    last = 2 * _SIMPSON_PANELS
    terms = []
    for step in range(last + 1):
        shift = step * half
        node = z + shift
        # Three roundings (the half-panel, the shift, the sum), each within half an ulp.
        node = math.nextafter(node - (_ROUNDING * (shift + abs(node)) + _SUBNORMAL), -math.inf)
        weight = 1.0 if step in (0, last) else 4.0 if step % 2 else 2.0
        terms.append(weight * _m1_above(node))
    total = math.fsum(terms)
    if not total > 0:  # pragma: no cover - each bound is above M1 > 0
        return math.inf
    # The rule is (h / 3) times the weighted sum, h = mu / (2 panels).
    parts = (_log_phi(z), math.log(mu), -math.log(6.0 * _SIMPSON_PANELS), math.log(total))
    # The sums' roundings, each within an ulp of a part's size.
    return _up(math.fsum(parts) + _ROUNDING * math.fsum(abs(p) for p in parts))


def log_delta_pure_composition(eps: float, eps0: float, k: int) -> float:
    """log delta(eps) of the optimal composition of k eps0-DP mechanisms (Kairouz, Oh and
    Viswanath 2015, Theorem 3.5), summed term by term in log space."""
    if k == 0 or eps0 == 0:
        return -math.inf
    if eps >= k * eps0:
        return -math.inf
    # Terms l with (k - l) eps0 > eps + l eps0, l = 0 .. last.
    last = math.ceil((k * eps0 - eps) / (2 * eps0)) - 1
    if last < 0:
        return -math.inf
    q0 = math.exp(-math.log1p(math.exp(eps0))) if eps0 < 700 else 0.0  # 1 / (1 + e^eps0)
    # C(k, l) e^((k-l) eps0) / (1 + e^eps0)^k = Bin(k, q0).pmf(l); the other term is
    # e^eps Bin(k, 1 - q0).pmf(l). Only l within 40 standard deviations of k q0 are summed
    # one by one; the mass of Bin(k, q0) outside them (each term is below its pmf) is added
    # whole, so delta is never understated.
    spread = 40 * math.sqrt(k * q0 * (1 - q0)) + 40
    if 2 * spread + 1 > _PURE_WINDOW:  # too many terms to sum: a closed-form bound instead
        return _log_delta_pure_hoeffding(eps, eps0, k)
    low = max(0, math.floor(k * q0 - spread))
    high = min(last, math.ceil(k * q0 + spread))
    parts = []
    if high >= low:
        levels = np.arange(low, high + 1, dtype=np.float64)
        log_x = _log_binomial_pmf(levels, k, q0)
        # Bin(k, 1 - q0).pmf(l) = Bin(k, q0).pmf(l) ((1 - q0) / q0)^(2l - k)
        # = Bin(k, q0).pmf(l) e^((2l - k) eps0): the two terms' ratio, exactly.
        gap = np.minimum(eps + (2 * levels - k) * eps0, -1e-300)
        parts.append(log_x + log1mexp(gap))
    if low > 0:  # the mass of Bin(k, q0) below the window, each term below its pmf
        parts.append(np.array([_log_binomial_cdf(min(low, last + 1) - 1, k, q0)]))
    if high < last:  # and between the window and the last positive term
        below = _log_binomial_cdf(last, k, q0)
        upto = _exact_log_binomial_cdf(max(high, low - 1), k, q0)
        if upto is None or not math.isfinite(below):  # a bound: the mass up to last, whole
            parts.append(np.array([below]))
        else:
            parts.append(np.array([below + float(log1mexp(np.float64(min(upto - below, 0.0))))]))
    if not parts:
        return -math.inf
    # Each log pmf sums log-gammas of up to log k! and k |log q0|, each good to a few ulp of
    # its size: at k ~ 3000 that is ~1e-11 in the log, moved to the safe side with the sum.
    size = 2.0 * float(special.gammaln(k + 1.0)) + k * (abs(math.log(q0)) + abs(math.log1p(-q0)))
    return _up(float(special.logsumexp(np.concatenate(parts))) + 4 * _ROUNDING * size)


# The most terms of the optimal composition summed one by one (arrays of 16 MB each).
_PURE_WINDOW = 1 << 21


def _log_delta_pure_hoeffding(eps: float, eps0: float, k: int) -> float:
    """An upper bound on log delta(eps) of k eps0-DP mechanisms composed, from Kairouz, Oh
    and Viswanath 2015, Theorem 3.4: (c + eps0 sqrt(2 k log(1/d)), d)-DP for every d in
    (0, 1], c = k eps0 tanh(eps0 / 2), so log delta(eps) <= -(eps - c)^2 / (2 k eps0^2)."""
    centre = k * eps0 * math.tanh(eps0 / 2) * (1 + 4 * _ROUNDING)  # rounded up
    if not eps > centre:
        return 0.0
    ratio = (eps - centre) / (eps0 * math.sqrt(2.0 * k))
    # Its few roundings moved up; below the double range the lowest double bounds it.
    return max(-ratio * ratio * (1 - 8 * _ROUNDING), -sys.float_info.max)


def _log_binomial_pmf(levels: np.ndarray, k: int, p: float) -> np.ndarray:
    """log Bin(k, p).pmf at ``levels`` from log-gamma (no scipy.stats: it costs 0.4 s to
    import, on every command)."""
    return (
        special.gammaln(k + 1.0)
        - special.gammaln(levels + 1.0)
        - special.gammaln(k - levels + 1.0)
        + levels * math.log(p)
        + (k - levels) * math.log1p(-p)
    )


def _log_binomial_cdf(level: int, k: int, p: float) -> float:
    """log P[Bin(k, p) <= level], from the regularised incomplete beta (``bdtr``); a mass
    below the double range comes out as -inf, which moves no epsilon. Where ``bdtr`` cannot
    be evaluated (k beyond its integer range), the Chernoff bound, never below the truth."""
    exact = _exact_log_binomial_cdf(level, k, p)
    return _chernoff_log_cdf(level, k, p) if exact is None else exact


def _exact_log_binomial_cdf(level: int, k: int, p: float) -> float | None:
    """``_log_binomial_cdf`` from ``bdtr``; None where it gives no number."""
    if level < 0:
        return -math.inf
    if level >= k:
        return 0.0
    with np.errstate(divide="ignore", invalid="ignore"):
        value = float(np.log(special.bdtr(level, k, p)))
    return None if math.isnan(value) else value


def _chernoff_log_cdf(level: int, k: int, p: float) -> float:
    """log of the Chernoff bound P[Bin(k, p) <= a k] <= exp(-k KL(a || p)) for a < p (and 1
    above): an upper bound on the lower tail."""
    a = level / k
    if a >= p:
        return 0.0
    kl = (a * math.log(a / p) if a > 0 else 0.0) + (1 - a) * math.log((1 - a) / (1 - p))
    return -k * kl * (1 - 1e-12)  # rounded up: the bound is tight at level 0


def epsilon_for(log_delta: Callable[[float], float], delta: float) -> float:
    """The smallest epsilon >= 0 with delta(epsilon) <= delta, from above: the upper end of a
    bisection's bracket on the decreasing curve (to 1e-12 relative; see
    :func:`~pate_cli.core.bisection.bisect_boundary`), found from the Illinois method's root
    in a few evaluations and the same value bit for bit
    (:func:`~pate_cli.core.bisection.replay_boundary`)."""
    target = math.log(delta)
    at_low = log_delta(0.0) - target
    if at_low <= 0:
        return 0.0
    high = 1.0
    while (at_high := log_delta(high) - target) > 0:
        high *= 2.0
        at_low = at_high
        if high > 1e300:
            return math.inf
    low = 0.0 if high == 1.0 else high / 2

    def excess(eps: float) -> float:
        return log_delta(eps) - target

    root = sign_change(excess, high, low, at_high, at_low, _ROOT_ZONE / 2)
    # The upper end: the bisection only ever returns an epsilon whose delta was seen <= target.
    return replay_boundary(
        lambda eps: log_delta(eps) <= target, high, low, root, _ROOT_ZONE * root, rtol=_BRACKET
    )


# The bracket's relative width, and the zone about the root (relative to it) in which the
# bisection's midpoints are evaluated: the computed curves' roundings move their crossing
# of the target by some 1e-15 relative, far inside it.
_BRACKET = 1e-12
_ROOT_ZONE = 1e-11


# Both figures are cached: pure functions of their numbers, which compare and plan ask for
# hundreds of times (an lru_cache of a pure function is the one cache the core allows).
@functools.lru_cache(maxsize=4096)
def _gaussian_epsilon(mu: float, delta: float) -> float:
    return epsilon_for(lambda eps: log_delta_gaussian(eps, mu), delta)


def gaussian_epsilon(mu: float, delta: float) -> float:
    """Epsilon of mu-Gaussian DP at delta, once per (mu, delta) in a process."""
    return _gaussian_epsilon(float(mu), float(delta))


# Beyond this eps0 a step's outcome is all but certain (1 / (1 + e^eps0) < 1e-21) and the
# optimal composition gains nothing measurable on the basic one, k eps0 (an upper bound).
_PURE_EPS0_LIMIT = 50.0


def pure_composition_epsilon(eps0: float, k: int, delta: float) -> float:
    """Epsilon of the optimal composition of k eps0-DP mechanisms at delta (never above
    the basic composition k eps0, which is also a bound), once per (eps0, k, delta) in a
    process."""
    return _pure_composition_epsilon(float(eps0), int(k), float(delta))


@functools.lru_cache(maxsize=4096)
def _pure_composition_epsilon(eps0: float, k: int, delta: float) -> float:
    # k eps0 rounded up, past its two roundings (k's to a double, the product's).
    basic = math.nextafter(math.nextafter(k * eps0, math.inf), math.inf)
    if eps0 > _PURE_EPS0_LIMIT:
        return basic
    return min(epsilon_for(lambda eps: log_delta_pure_composition(eps, eps0, k), delta), basic)

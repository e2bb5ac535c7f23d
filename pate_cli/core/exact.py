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

Both curves decrease in epsilon; :func:`epsilon_for` solves delta(eps) = delta by bisection
and returns the upper end of the bracket, never an epsilon whose delta exceeds the target.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import numpy as np
from scipy import special

from pate_cli.core.bisection import bisect_boundary
from pate_cli.core.logmath import log1mexp


def log_delta_gaussian(eps: float, mu: float) -> float:
    """log delta(eps) of mu-Gaussian DP (Dong, Roth and Su 2022, Corollary 2.13), each
    tail from its own log_ndtr; -inf where delta is 0."""
    if mu == 0:
        return -math.inf
    if math.isinf(mu):
        return 0.0
    first = float(special.log_ndtr(-eps / mu + mu / 2))
    second = eps + float(special.log_ndtr(-eps / mu - mu / 2))
    if second >= first:  # delta is 0 up to rounding: never reported as positive by luck
        return -math.inf
    return first + float(log1mexp(np.float64(second - first)))


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
    return float(special.logsumexp(np.concatenate(parts))) if parts else -math.inf


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
    """The smallest epsilon >= 0 with delta(epsilon) <= delta, from above: bisection on a
    decreasing curve, returning the bracket's upper end (to 1e-12 relative; see
    :func:`~pate_cli.core.bisection.bisect_boundary`)."""
    target = math.log(delta)
    if log_delta(0.0) <= target:
        return 0.0
    high = 1.0
    while log_delta(high) > target:
        high *= 2.0
        if high > 1e300:
            return math.inf
    low = 0.0 if high == 1.0 else high / 2
    # The upper end: the bisection only ever returns an epsilon whose delta was seen <= target.
    return bisect_boundary(lambda eps: log_delta(eps) <= target, high, low, rtol=1e-12)


def gaussian_epsilon(mu: float, delta: float) -> float:
    """Epsilon of mu-Gaussian DP at delta."""
    return epsilon_for(lambda eps: log_delta_gaussian(eps, mu), delta)


# Beyond this eps0 a step's outcome is all but certain (1 / (1 + e^eps0) < 1e-21) and the
# optimal composition gains nothing measurable on the basic one, k eps0 (an upper bound).
_PURE_EPS0_LIMIT = 50.0


def pure_composition_epsilon(eps0: float, k: int, delta: float) -> float:
    """Epsilon of the optimal composition of k eps0-DP mechanisms at delta (never above
    the basic composition k eps0, which is also a bound)."""
    basic = k * eps0
    if eps0 > _PURE_EPS0_LIMIT:
        return basic
    return min(epsilon_for(lambda eps: log_delta_pure_composition(eps, eps0, k), delta), basic)

"""Lower bounds on a mechanism's privacy loss from its samples, and the laws that fix the test.

An audit runs a mechanism N times on each of two neighbouring inputs A and B and counts how
often its output falls in a set S fixed before those draws. If the mechanism is
(epsilon, delta)-DP, Pr_A[S] <= e^epsilon Pr_B[S] + delta, so

    epsilon >= log(Pr_A[S] - delta) - log(Pr_B[S])

and with one-sided Clopper-Pearson bounds on both rates, each at alpha / 2, the right side
with Pr_A[S] replaced by its lower bound and Pr_B[S] by its upper bound is below epsilon with
probability at least 1 - alpha (Nasr, Song, Thakurta, Papernot and Carlini 2021, Section 4:
epsilon_lb = log(1 - FNR_ub - delta) - log(FPR_ub)). Where the mechanism is mu-Gaussian DP
every test satisfies FNR >= Phi(Phi^-1(1 - FPR) - mu) (Dong, Roth and Su 2022, Def. 2.6), so
mu >= Phi^-1(1 - FPR_ub) - Phi^-1(FNR_ub) with the same confidence (the Gaussian-shaped
estimate of Nasr et al. 2023).

A run of T queries outputs T outcomes; the pair (A, B) repeated T times makes every run's
likelihood ratio a function of how many times each kind of outcome showed (its count vector),
whose law is multinomial. The best sets S are the level sets of that ratio
(Neyman-Pearson): a prefix of the count vectors sorted by their privacy loss. The exact
(epsilon, delta) of the pair is the largest log((P(S) - delta) / Q(S)) over those prefixes
and both directions; the audit's test is the prefix and direction whose bound at the
expected counts (N P(S), N Q(S)) is largest.

Shapes: a law is log-probabilities of K kinds of outcome, (K,) on each side; count vectors
(V, K).
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass

import numpy as np
from numpy.typing import ArrayLike, NDArray
from scipy.special import betaincinv, gammaln, logsumexp, ndtri

FloatArray = NDArray[np.float64]
IntArray = NDArray[np.int64]

# A bound computed from betaincinv and logs is moved this much (relative, and absolute) to its
# safe side: both are good to a few ulp, far inside it.
_SLACK = 1e-12
# The stated law's exact epsilon, from probabilities good to ~1e-11 relative, is raised past
# their roundings: each log-probability moved 1e-9 in the direction that raises epsilon.
_LAW_SLACK = 1e-9
_BATCH = 16  # prefixes bounded at a time
STEADY = 0.1
"""The largest standard deviation of the bound a test is chosen with (where one has it): a
rerun lands within about 0.2 of the expected bound."""
MOST_VECTORS = 1 << 16
"""The most count vectors a run's law is enumerated over (kinds are merged past it)."""


def clopper_pearson_lower(hits: ArrayLike, runs: int, alpha: float) -> FloatArray:
    """The one-sided lower Clopper-Pearson bound on a rate: below it with probability at most
    ``alpha``. ``hits`` may be fractional (the expected count). Shapes: hits (...) -> (...)."""
    k = np.asarray(hits, dtype=np.float64)
    with np.errstate(invalid="ignore", divide="ignore"):
        found = betaincinv(np.maximum(k, 1e-300), runs - k + 1.0, alpha)  # Beta(k, n-k+1) quantile
    found = np.where(k <= 0, 0.0, found)
    return np.asarray(np.clip(found * (1 - _SLACK), 0.0, 1.0))


def clopper_pearson_upper(hits: ArrayLike, runs: int, alpha: float) -> FloatArray:
    """The one-sided upper Clopper-Pearson bound on a rate: above it with probability at most
    ``alpha``. Shapes: hits (...) -> (...)."""
    k = np.asarray(hits, dtype=np.float64)
    with np.errstate(invalid="ignore", divide="ignore"):
        found = betaincinv(k + 1.0, np.maximum(runs - k, 1e-300), 1.0 - alpha)  # Beta(k+1, n-k)
    found = np.where(k >= runs, 1.0, found)
    return np.asarray(np.clip(found * (1 + _SLACK) + 1e-300, 0.0, 1.0))


def epsilon_from_rates(low_a: ArrayLike, high_b: ArrayLike, delta: float) -> FloatArray:
    """log(Pr_A[S] - delta) - log(Pr_B[S]) at a lower bound of the first rate and an upper
    bound of the second, 0 where the first is at most delta (no bound), rounded down."""
    a, b = np.asarray(low_a, dtype=np.float64), np.asarray(high_b, dtype=np.float64)
    with np.errstate(divide="ignore", invalid="ignore"):
        found = np.log(np.maximum(a - delta, 0.0)) - np.log(b)
    found = np.where((a > delta) & (b > 0), found, 0.0)
    return np.asarray(np.maximum(found - _SLACK * (1 + np.abs(found)), 0.0))


def epsilon_lower_bound(
    hits_a: float, hits_b: float, runs: int, alpha: float, delta: float
) -> float:
    """The audit's bound: S showed ``hits_a`` times in ``runs`` runs on A and ``hits_b`` times
    on B; below the epsilon of any (epsilon, delta)-DP mechanism with probability at least
    1 - alpha (module docstring)."""
    low = clopper_pearson_lower(hits_a, runs, alpha / 2)
    high = clopper_pearson_upper(hits_b, runs, alpha / 2)
    return float(epsilon_from_rates(low, high, delta))


def gaussian_mu_lower_bound(hits_a: float, hits_b: float, runs: int, alpha: float) -> float:
    """Phi^-1(TPR_lb) - Phi^-1(FPR_ub): below the mu of a mu-GDP mechanism with probability
    at least 1 - alpha (Dong, Roth and Su 2022, Def. 2.6), 0 where not positive."""
    low = float(clopper_pearson_lower(hits_a, runs, alpha / 2))
    high = float(clopper_pearson_upper(hits_b, runs, alpha / 2))
    if low <= 0.0 or high >= 1.0:
        return 0.0
    mu = float(ndtri(low) - ndtri(high))
    return max(mu - _SLACK * (1 + abs(mu)), 0.0)


@functools.lru_cache(maxsize=64)
def compositions(kinds: int, total: int) -> IntArray:
    """Every vector of ``kinds`` non-negative integers summing to ``total``, in a fixed order
    (read-only: one array per (kinds, total) in a process).

    Shapes: -> (C(total + kinds - 1, kinds - 1), kinds).
    """
    rows = np.zeros((1, 0), dtype=np.int64)
    left = np.array([total], dtype=np.int64)
    for _ in range(kinds - 1):
        reps = left + 1
        owner = np.repeat(np.arange(len(rows)), reps)
        starts = np.cumsum(reps) - reps
        first = np.arange(int(reps.sum()), dtype=np.int64) - np.repeat(starts, reps)
        rows = np.column_stack([rows[owner], first])
        left = left[owner] - first
    out = np.column_stack([rows, left])
    out.flags.writeable = False
    return out


def vector_count(kinds: int, total: int) -> int:
    """How many count vectors :func:`compositions` gives."""
    return math.comb(total + kinds - 1, kinds - 1)


def merged_kinds(
    log_p: ArrayLike, log_q: ArrayLike, total: int, limit: int = MOST_VECTORS
) -> IntArray:
    """Kinds of outcome merged (a post-processing: any test of the merged outcomes is a test of
    the outcomes) until a run of ``total`` queries has at most ``limit`` count vectors: kinds
    neighbouring in privacy loss first, so the level sets lose least. Returns the new kind of
    each kind. Shapes: (K,), (K,) -> (K,)."""
    p, q = np.asarray(log_p, dtype=np.float64), np.asarray(log_q, dtype=np.float64)
    kinds = p.size
    group = np.arange(kinds, dtype=np.int64)
    if _fits(kinds, total, limit):
        return group
    with np.errstate(invalid="ignore"):
        loss = np.where(np.isneginf(p) & np.isneginf(q), 0.0, p - q)
    order = np.argsort(loss, kind="stable")
    parts = [[int(k)] for k in order]
    while len(parts) > 1 and not _fits(len(parts), total, limit):
        # Merge the adjacent pair whose merged mass is smallest (it moves the level sets least).
        pairs = zip(parts, parts[1:], strict=False)
        mass = [np.logaddexp(logsumexp(p[a + b]), logsumexp(q[a + b])) for a, b in pairs]
        at = int(np.argmin(mass))
        parts[at : at + 2] = [parts[at] + parts[at + 1]]
    for index, part in enumerate(parts):
        group[part] = index
    return group


def _fits(kinds: int, total: int, limit: int) -> bool:
    """At most ``limit`` count vectors, each coded by one int64 (``vector_codes``)."""
    coded = total == 1 or kinds * math.log2(total + 1) < 62
    return vector_count(kinds, total) <= limit and coded


def vector_codes(vectors: IntArray, total: int) -> IntArray:
    """Each count vector as one integer, its digits in base total + 1 (distinct vectors,
    distinct codes; for one query, the kind that showed). Shapes: (V, K) -> (V,)."""
    if total == 1:
        return np.asarray(np.argmax(vectors, axis=1), dtype=np.int64)
    radix = np.int64(total + 1) ** np.arange(vectors.shape[1], dtype=np.int64)
    return np.asarray(vectors @ radix, dtype=np.int64)


def merged_law(log_p: ArrayLike, group: IntArray) -> FloatArray:
    """The law of the merged kinds (``merged_kinds``): each group's probabilities summed."""
    p = np.asarray(log_p, dtype=np.float64)
    if np.array_equal(group, np.arange(group.size)):  # nothing merged
        return p
    out = np.full(int(group.max()) + 1, -np.inf)
    for index in range(out.size):
        members = p[group == index]
        out[index] = logsumexp(members) if np.isfinite(members).any() else -np.inf
    return out


@dataclass(frozen=True)
class RunLaw:
    """The law of a run's count vectors on both sides: ``vectors`` (V, K) and their
    log-probabilities under A and B, (V,) each."""

    vectors: IntArray
    log_a: FloatArray
    log_b: FloatArray

    @classmethod
    def of(cls, log_p: ArrayLike, log_q: ArrayLike, total: int) -> RunLaw:
        """``total`` independent queries of the laws ``log_p`` (on A) and ``log_q`` (on B)."""
        p, q = np.asarray(log_p, dtype=np.float64), np.asarray(log_q, dtype=np.float64)
        vectors = compositions(p.size, total)
        coefficient = gammaln(total + 1.0) - gammaln(vectors + 1.0).sum(axis=1)
        return cls(vectors, coefficient + _dot(vectors, p), coefficient + _dot(vectors, q))


def _dot(vectors: IntArray, log_p: FloatArray) -> FloatArray:
    """sum_k vectors[:, k] log_p[k], a kind that never shows adding nothing (0 * -inf = 0)."""
    with np.errstate(invalid="ignore"):  # 0 * -inf, masked
        terms = np.where(vectors > 0, vectors * log_p, 0.0)
    return np.asarray(terms.sum(axis=1))


@dataclass(frozen=True)
class Test:
    """A test fixed before the draws that bound it: the count vectors in S (``members``,
    (V,) bool), the side S is likely on (``positive``: "A" or "B"), and Pr[S] on that side and
    the other, in logs."""

    members: NDArray[np.bool_]
    positive: str
    log_rate: float
    log_other: float


def _prefixes(law: RunLaw) -> list[tuple[str, IntArray, FloatArray, FloatArray]]:
    """Both directions' prefixes: the vectors sorted by privacy loss towards the positive side,
    and the cumulative log-probabilities of each prefix on that side and the other."""
    out = []
    for positive, first, second in (("A", law.log_a, law.log_b), ("B", law.log_b, law.log_a)):
        with np.errstate(invalid="ignore"):
            loss = np.where(np.isneginf(first), -np.inf, first - second)
        order = np.argsort(-loss, kind="stable")
        out.append(
            (
                positive,
                order,
                np.logaddexp.accumulate(first[order]),
                np.logaddexp.accumulate(second[order]),
            )
        )
    return out


def pair_epsilon(law: RunLaw, delta: float) -> float:
    """The exact epsilon at ``delta`` of the run's two laws, both directions: the largest
    log((P(S) - delta) / Q(S)) over the level sets S (Neyman-Pearson), each log-probability
    moved ``_LAW_SLACK`` towards a larger epsilon."""
    best = 0.0
    for _, _, rate, other in _prefixes(law):
        found = epsilon_from_rates(np.exp(rate + _LAW_SLACK), np.exp(other - _LAW_SLACK), delta)
        with np.errstate(divide="ignore"):
            certain = (np.exp(rate) > delta) & np.isneginf(other)
        if certain.any():
            return math.inf
        best = max(best, float(found.max()) + 2 * _SLACK * (1 + float(found.max())))
    return best


def bound_spread(rate: FloatArray, other: FloatArray, runs: int, delta: float) -> FloatArray:
    """The standard deviation of the bound log(rate - delta) - log(other) over the binomial
    counts, to first order: sqrt((1 - p) / (N p) (p / (p - delta))^2 + (1 - q) / (N q)), 0
    for a rate of 0, inf where p <= delta."""
    p = np.clip(np.asarray(rate, dtype=np.float64), 0.0, 1.0)
    q = np.clip(np.asarray(other, dtype=np.float64), 0.0, 1.0)
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        first = np.where(p > delta, (1 - p) / (runs * p) * (p / (p - delta)) ** 2, np.inf)
        second = np.where(q > 0, (1 - q) / (runs * np.maximum(q, 1e-300)), 0.0)
    return np.asarray(np.sqrt(first + second))


def best_test(law: RunLaw, runs: int, alpha: float, delta: float) -> tuple[Test, float]:
    """The test whose bound at the expected counts is largest among those that bound
    something and vary by at most ``STEADY`` (one standard deviation, ``bound_spread``);
    among all of them where none of those bounds anything; and that bound."""
    prefixes = _prefixes(law)
    for steady in (True, False):
        found = _best_prefix(prefixes, runs, alpha, delta, steady)
        if found is not None and found[1] > 0:
            return found
    positive, order, rate, other = prefixes[0]  # nothing bounds: the likeliest outcome of A
    members = np.zeros(order.size, dtype=bool)
    members[order[0]] = True
    return Test(members, positive, float(rate[0]), float(other[0])), 0.0


def _best_prefix(
    prefixes: list[tuple[str, IntArray, FloatArray, FloatArray]],
    runs: int,
    alpha: float,
    delta: float,
    steady: bool,
) -> tuple[Test, float] | None:
    """The prefix of largest bound at the expected counts (``steady``: of those whose bound
    varies by at most ``STEADY``). A prefix's plug-in figure (its rates themselves; inf where
    the other side never shows it) is at least its bound, so prefixes are bounded in the
    order of their plug-in figures until the next cannot win."""
    best: tuple[Test, float] | None = None
    for positive, order, rate, other in prefixes:
        plug = epsilon_from_rates(np.exp(rate), np.exp(other), delta)
        plug = np.where(np.isneginf(other) & (np.exp(rate) > delta), np.inf, plug)
        if steady:
            spread = bound_spread(np.exp(rate), np.exp(other), runs, delta)
            plug = np.where(spread <= STEADY, plug, -1.0)
        ranked = np.argsort(-plug, kind="stable")
        for start in range(0, ranked.size, _BATCH):
            if plug[ranked[start]] <= 0 or (best is not None and plug[ranked[start]] <= best[1]):
                break
            picked = ranked[start : start + _BATCH]
            picked = picked[plug[picked] > 0]
            low = clopper_pearson_lower(runs * np.exp(rate[picked]), runs, alpha / 2)
            high = clopper_pearson_upper(runs * np.exp(other[picked]), runs, alpha / 2)
            bounds = epsilon_from_rates(low, high, delta)
            at = int(np.argmax(bounds))
            if best is None or bounds[at] > best[1]:
                cut = int(picked[at])
                members = np.zeros(order.size, dtype=bool)
                members[order[: cut + 1]] = True
                test = Test(members, positive, float(rate[cut]), float(other[cut]))
                best = (test, float(bounds[at]))
    return best


def expected_bound(law: RunLaw, runs: int, alpha: float, delta: float) -> float:
    """The best test's bound at the expected counts (a search's score)."""
    return best_test(law, runs, alpha, delta)[1]


def _binomial_support(runs: int, rate: float) -> tuple[FloatArray, FloatArray]:
    """The counts of Binomial(runs, rate) within 12 standard deviations (and 8 counts) of its
    mean, and their probabilities (log-gamma form; the mass left out is below 1e-30)."""
    mean = runs * rate
    spread = 12.0 * math.sqrt(runs * rate * (1.0 - rate)) + 8.0
    first, last = max(0, math.floor(mean - spread)), min(runs, math.ceil(mean + spread))
    k = np.arange(first, last + 1, dtype=np.float64)
    with np.errstate(divide="ignore", invalid="ignore"):
        log_pmf = (
            gammaln(runs + 1.0)
            - gammaln(k + 1.0)
            - gammaln(runs - k + 1.0)
            + np.where(k > 0, k * math.log(rate) if rate > 0 else -np.inf, 0.0)
            + np.where(k < runs, (runs - k) * math.log1p(-rate) if rate < 1 else -np.inf, 0.0)
        )
    return k, np.asarray(np.exp(log_pmf))


def expected_lower_bound(
    rate_a: float, rate_b: float, runs: int, alpha: float, delta: float
) -> float:
    """E[epsilon_lower_bound] when S shows with probability ``rate_a`` in each run on A and
    ``rate_b`` on B: the bound's mean over the two binomial counts, each value of the bound
    max(0, a - b) with a = log(lower rate - delta), b = log(upper rate) summed in sorted order
    (sum_a P(a) [a F(a) - G(a)], F and G the mass and the first moment of b below a)."""
    rate_a, rate_b = min(max(rate_a, 0.0), 1.0), min(max(rate_b, 0.0), 1.0)
    hits_a, mass_a = _binomial_support(runs, rate_a)
    hits_b, mass_b = _binomial_support(runs, rate_b)
    low = clopper_pearson_lower(hits_a, runs, alpha / 2)
    with np.errstate(divide="ignore"):
        a = np.where(low > delta, np.log(np.maximum(low - delta, 1e-300)), -np.inf)
        b = np.log(clopper_pearson_upper(hits_b, runs, alpha / 2))
    order = np.argsort(b)
    b, mass_b = b[order], mass_b[order]
    below_mass = np.concatenate([[0.0], np.cumsum(mass_b)])
    below_first = np.concatenate([[0.0], np.cumsum(mass_b * b)])
    live = np.isfinite(a)
    at = np.searchsorted(b, a[live], side="left")
    gain = a[live] * below_mass[at] - below_first[at]
    return float(np.sum(mass_a[live] * np.maximum(gain, 0.0)))

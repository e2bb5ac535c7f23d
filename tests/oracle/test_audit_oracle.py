"""The auditing core (``pate_cli.core.auditing``) against oracles that share none of its formulas.

Clopper-Pearson bounds against the exact binomial law: their coverage summed term by term
with ``math.comb``, and their value against a bisection of the exact binomial tail (never on
the unsafe side, checked in rational arithmetic). The bounds on epsilon and on the Gaussian-DP
mu against simulated counts (they exceed the truth at most alpha of the time, where the
plug-in figure does about half the time) and against the same bounds built on the bisected
rates. The exact epsilon of a pair of laws composed over T queries against a brute force over
every set of outputs (T = 1, and every set of output sequences for the smallest runs), over
the level sets of the sequences' likelihood ratio, and against the hockey-stick divergence of
the sequences' product law. The count vectors against ``itertools``, their laws against the
multinomial formula, merging against the law it post-processes, the best test against every
level set of the run, and the expected bound against Monte Carlo and the exact double sum over
both binomial laws.
"""

from __future__ import annotations

import itertools
import math
import warnings
from collections.abc import Callable
from fractions import Fraction
from statistics import NormalDist

import numpy as np
import pytest
from numpy.typing import NDArray

from pate_cli.core import auditing as au

FloatArray = NDArray[np.float64]
DELTAS = [0.0, 1e-6, 1e-3, 0.05, 0.3]
ALPHAS = [0.01, 0.05, 0.2]


# ----------------------------------------------------------------------------- binomial oracle


def binomial_pmf(runs: int, rate: FloatArray) -> FloatArray:
    """Binomial(runs, rate) at 0..runs, from math.comb. Shapes: (m,) -> (m, runs + 1)."""
    k = np.arange(runs + 1)
    weights = np.array([float(math.comb(runs, j)) for j in range(runs + 1)])
    p = np.asarray(rate, dtype=np.float64)[:, None]
    return np.asarray(weights * p**k * (1.0 - p) ** (runs - k))


def tail_at_least(runs: int, hits: NDArray[np.int64], rate: FloatArray) -> FloatArray:
    pmf = binomial_pmf(runs, rate)
    return np.where(np.arange(runs + 1) >= hits[:, None], pmf, 0.0).sum(axis=1)


def tail_at_most(runs: int, hits: NDArray[np.int64], rate: FloatArray) -> FloatArray:
    pmf = binomial_pmf(runs, rate)
    return np.where(np.arange(runs + 1) <= hits[:, None], pmf, 0.0).sum(axis=1)


def bisected_lower(hits: NDArray[np.int64], runs: int, alpha: float) -> FloatArray:
    """The p with P[Bin(runs, p) >= hits] = alpha (0 at no hits), from its safe side."""
    hits = np.asarray(hits, dtype=np.int64)
    low, high = np.zeros(hits.size), np.ones(hits.size)
    for _ in range(110):
        mid = (low + high) / 2
        above = tail_at_least(runs, hits, mid) > alpha
        high, low = np.where(above, mid, high), np.where(above, low, mid)
    return np.where(hits == 0, 0.0, low)


def bisected_upper(hits: NDArray[np.int64], runs: int, alpha: float) -> FloatArray:
    """The p with P[Bin(runs, p) <= hits] = alpha (1 at every run a hit), from its safe side."""
    hits = np.asarray(hits, dtype=np.int64)
    low, high = np.zeros(hits.size), np.ones(hits.size)
    for _ in range(110):
        mid = (low + high) / 2
        above = tail_at_most(runs, hits, mid) > alpha
        low, high = np.where(above, mid, low), np.where(above, high, mid)
    return np.where(hits == runs, 1.0, high)


def exact_tail(runs: int, hits: int, rate: float, at_least: bool) -> Fraction:
    p = Fraction(rate)
    ks = range(hits, runs + 1) if at_least else range(hits + 1)
    return sum((math.comb(runs, k) * p**k * (1 - p) ** (runs - k) for k in ks), Fraction(0))


def normal_cdf(x: float) -> float:
    return 0.5 * math.erfc(-x / math.sqrt(2.0))


# ----------------------------------------------------------------------------- pair oracle


def random_law(rng: np.random.Generator, kinds: int, impossible: float = 0.2) -> FloatArray:
    """Probabilities of ``kinds`` outcomes, skewed, each impossible with that probability."""
    weights = rng.exponential(size=kinds) ** rng.uniform(1.0, 4.0)
    weights[rng.random(kinds) < impossible] = 0.0
    if weights.sum() == 0:
        weights[rng.integers(kinds)] = 1.0
    return weights / weights.sum()


def logs(p: FloatArray) -> FloatArray:
    with np.errstate(divide="ignore"):
        return np.log(p)


def run_law(log_p: FloatArray, log_q: FloatArray, total: int) -> au.RunLaw:
    """``RunLaw.of`` (its own test: an impossible kind warns nothing)."""
    return au.RunLaw.of(log_p, log_q, total)


def sequence_law(p: FloatArray, total: int) -> FloatArray:
    """Every output sequence's probability under ``total`` independent draws of ``p``."""
    return np.array([math.prod(p[list(s)]) for s in itertools.product(range(p.size), repeat=total)])


def sets_epsilon(rate: FloatArray, other: FloatArray, delta: float, rounding: float = 0) -> float:
    """max(0, the largest log((P(S) - delta) / Q(S))) over the sets given by their P and Q,
    each P raised and each Q lowered by ``rounding`` (relative)."""
    rate, other = rate * (1 + rounding), other * (1 - rounding)
    live = rate - delta > 0
    if np.any(live & (other == 0)):
        return math.inf
    if not live.any():
        return 0.0
    return max(0.0, float(np.max(np.log(rate[live] - delta) - np.log(other[live]))))


def level_set_epsilon(p: FloatArray, q: FloatArray, delta: float, rounding: float = 0) -> float:
    """The largest log((P(S) - delta) / Q(S)) over the level sets of P / Q, both directions."""
    best = 0.0
    for first, second in ((p, q), (q, p)):
        with np.errstate(divide="ignore", invalid="ignore"):
            loss = np.where(first > 0, np.log(first) - np.log(second), -np.inf)
        order = np.argsort(-loss, kind="stable")
        found = sets_epsilon(np.cumsum(first[order]), np.cumsum(second[order]), delta, rounding)
        best = max(best, found)
    return best


def subset_epsilon(p: FloatArray, q: FloatArray, delta: float, rounding: float = 0) -> float:
    """The largest log((P(S) - delta) / Q(S)) over every set S of outcomes, both directions."""
    masks = ((np.arange(2**p.size)[:, None] >> np.arange(p.size)) & 1).astype(np.float64)
    rate, other = masks @ p, masks @ q
    return max(
        sets_epsilon(rate, other, delta, rounding), sets_epsilon(other, rate, delta, rounding)
    )


def hockey_stick(p: FloatArray, q: FloatArray, epsilon: float) -> float:
    return math.fsum(np.maximum(p - math.exp(epsilon) * q, 0.0))


# pair_epsilon holds for every law within this of the one it is given (relative).
ROUNDING = 1e-11


def assert_pair_epsilon(
    found: float, brute_force: Callable[..., float], *laws: FloatArray, delta: float
) -> None:
    """``found`` at least the brute force at the worst law within ROUNDING, and at most
    1e-6 relative above it at the law itself."""
    truth = brute_force(*laws, delta)
    if math.isinf(truth):
        assert math.isinf(found)
        return
    assert brute_force(*laws, delta, ROUNDING) <= found <= truth * (1 + 1e-6) + 1e-8


# ----------------------------------------------------------------------------- Clopper-Pearson


@pytest.mark.parametrize("runs", [20, 50])
@pytest.mark.parametrize("alpha", ALPHAS)
def test_clopper_pearson_covers(runs: int, alpha: float) -> None:
    hits = np.arange(runs + 1)
    lower = au.clopper_pearson_lower(hits, runs, alpha)
    upper = au.clopper_pearson_upper(hits, runs, alpha)
    # The coverage peaks just below each bound (lower) and just above it (upper).
    edges_low = bisected_lower(hits[1:], runs, alpha) * (1 - 1e-9)
    edges_high = bisected_upper(hits[:-1], runs, alpha) * (1 + 1e-9)
    for rates, edges, missed in (
        (np.linspace(1e-3, 1 - 1e-3, 400), edges_low, lambda r: lower[None, :] > r[:, None]),
        (np.linspace(1e-3, 1 - 1e-3, 400), edges_high, lambda r: upper[None, :] < r[:, None]),
    ):
        grid = np.concatenate([rates, edges])
        coverage = np.where(missed(grid), binomial_pmf(runs, grid), 0.0).sum(axis=1)
        assert coverage.max() <= alpha + 1e-12
        assert coverage[rates.size :].max() >= alpha * (1 - 1e-4)


@pytest.mark.parametrize("runs", [20, 50])
@pytest.mark.parametrize("alpha", ALPHAS)
def test_clopper_pearson_is_the_binomial_tail_root(runs: int, alpha: float) -> None:
    hits = np.arange(runs + 1)
    lower = au.clopper_pearson_lower(hits, runs, alpha)
    upper = au.clopper_pearson_upper(hits, runs, alpha)
    root_low, root_high = bisected_lower(hits, runs, alpha), bisected_upper(hits, runs, alpha)
    np.testing.assert_allclose(lower, root_low, rtol=1e-9, atol=0)
    np.testing.assert_allclose(upper, root_high, rtol=1e-9, atol=1e-300)
    assert lower[0] == 0.0 and upper[-1] == 1.0
    level = Fraction(alpha)
    for k in range(1, runs + 1):
        assert exact_tail(runs, k, float(lower[k]), at_least=True) <= level
    for k in range(runs):
        assert exact_tail(runs, k, float(upper[k]), at_least=False) <= level


def test_clopper_pearson_at_fractional_hits_lies_between_neighbours() -> None:
    runs, alpha = 50, 0.05
    hits = np.linspace(0.0, runs, 1001)
    for bound in (au.clopper_pearson_lower, au.clopper_pearson_upper):
        values = bound(hits, runs, alpha)
        assert np.all(np.diff(values) >= 0)
        below = bound(np.floor(hits), runs, alpha)
        above = bound(np.ceil(hits), runs, alpha)
        assert np.all((below <= values) & (values <= above))


# ----------------------------------------------------------------------------- lower bounds


@pytest.mark.parametrize("alpha", [0.05, 0.2])
@pytest.mark.parametrize("delta", [0.0, 1e-3, 0.1])
def test_lower_bounds_are_built_on_half_alpha_rates(alpha: float, delta: float) -> None:
    runs = 50
    hits = np.arange(runs + 1)
    low = bisected_lower(hits, runs, alpha / 2)
    high = bisected_upper(hits, runs, alpha / 2)
    normal = NormalDist()
    for a, b in itertools.product(range(0, runs + 1, 3), range(0, runs + 1, 3)):
        bound = au.epsilon_lower_bound(a, b, runs, alpha, delta)
        truth = math.log(low[a] - delta) - math.log(high[b]) if low[a] > delta else 0.0
        assert bound == pytest.approx(max(truth, 0.0), rel=1e-9, abs=1e-10)
        mu = au.gaussian_mu_lower_bound(a, b, runs, alpha)
        gap = normal.inv_cdf(low[a]) - normal.inv_cdf(high[b]) if 0 < low[a] and high[b] < 1 else 0
        assert mu == pytest.approx(max(gap, 0.0), rel=1e-8, abs=1e-9)


def _exceeding(
    bound: Callable[[int, int], float],
    hits_a: NDArray[np.int64],
    hits_b: NDArray[np.int64],
    truth: float,
) -> float:
    """The fraction of draws whose bound is above ``truth`` (each distinct pair bounded once)."""
    pairs, counts = np.unique(np.stack([hits_a, hits_b], axis=1), axis=0, return_counts=True)
    above = np.array([bound(int(a), int(b)) > truth for a, b in pairs])
    return float(counts[above].sum() / hits_a.size)


@pytest.mark.parametrize(
    ("rate_a", "rate_b", "runs", "alpha", "delta"),
    [(0.5, 0.05, 1000, 0.05, 1e-3), (0.9, 0.01, 2000, 0.1, 0.0), (0.3, 0.2, 500, 0.2, 0.01)],
)
def test_epsilon_lower_bound_exceeds_the_truth_at_most_alpha(
    rate_a: float, rate_b: float, runs: int, alpha: float, delta: float
) -> None:
    trials = 20_000
    rng = np.random.default_rng(20240611)
    hits_a, hits_b = rng.binomial(runs, rate_a, trials), rng.binomial(runs, rate_b, trials)
    truth = math.log(rate_a - delta) - math.log(rate_b)
    tolerance = alpha + 4 * math.sqrt(alpha * (1 - alpha) / trials)

    def audited(a: int, b: int) -> float:
        return au.epsilon_lower_bound(a, b, runs, alpha, delta)

    def plug_in(a: int, b: int) -> float:
        return math.log(a / runs - delta) - math.log(b / runs) if b > 0 else math.inf

    assert _exceeding(audited, hits_a, hits_b, truth) <= tolerance
    assert _exceeding(plug_in, hits_a, hits_b, truth) > tolerance


@pytest.mark.parametrize(("mu", "cut"), [(1.5, 0.5), (1.0, 1.5), (2.5, 2.0)])
@pytest.mark.parametrize("alpha", [0.05, 0.2])
def test_gaussian_mu_lower_bound_exceeds_mu_at_most_alpha(
    mu: float, cut: float, alpha: float
) -> None:
    runs, trials = 1000, 20_000
    rng = np.random.default_rng(7)
    rate_a, rate_b = normal_cdf(mu - cut), normal_cdf(-cut)  # x > cut under N(mu, 1), N(0, 1)
    hits_a, hits_b = rng.binomial(runs, rate_a, trials), rng.binomial(runs, rate_b, trials)
    tolerance = alpha + 4 * math.sqrt(alpha * (1 - alpha) / trials)
    normal = NormalDist()

    def audited(a: int, b: int) -> float:
        return au.gaussian_mu_lower_bound(a, b, runs, alpha)

    def plug_in(a: int, b: int) -> float:
        if not (0 < a < runs and 0 < b < runs):
            return 0.0
        return normal.inv_cdf(a / runs) - normal.inv_cdf(b / runs)

    assert _exceeding(audited, hits_a, hits_b, mu) <= tolerance
    assert _exceeding(plug_in, hits_a, hits_b, mu) > tolerance


# ----------------------------------------------------------------------------- expected bound


@pytest.mark.parametrize(
    ("rate_a", "rate_b", "alpha", "delta"),
    [(0.3, 0.02, 0.05, 1e-5), (0.6, 0.25, 0.1, 0.01), (0.95, 0.0, 0.05, 0.0), (0.1, 0.09, 0.2, 0)],
)
def test_expected_lower_bound_is_the_double_sum(
    rate_a: float, rate_b: float, alpha: float, delta: float
) -> None:
    runs = 200
    hits = np.arange(runs + 1)
    low = bisected_lower(hits, runs, alpha / 2)
    high = bisected_upper(hits, runs, alpha / 2)
    with np.errstate(divide="ignore", invalid="ignore"):
        bound = np.log(low[:, None] - delta) - np.log(high[None, :])
    bound = np.where(low[:, None] > delta, np.maximum(bound, 0.0), 0.0)
    mass = (
        binomial_pmf(runs, np.array([rate_a]))[0][:, None]
        * binomial_pmf(runs, np.array([rate_b]))[0][None, :]
    )
    truth = math.fsum((mass * bound).ravel())
    found = au.expected_lower_bound(rate_a, rate_b, runs, alpha, delta)
    assert found == pytest.approx(truth, rel=1e-8, abs=1e-12)


@pytest.mark.parametrize(
    ("rate_a", "rate_b", "runs", "alpha", "delta"),
    [(0.4, 0.05, 1000, 0.05, 1e-4), (0.05, 0.002, 5000, 0.1, 1e-3)],
)
def test_expected_lower_bound_matches_monte_carlo(
    rate_a: float, rate_b: float, runs: int, alpha: float, delta: float
) -> None:
    trials = 20_000
    rng = np.random.default_rng(99)
    draws = np.stack([rng.binomial(runs, rate_a, trials), rng.binomial(runs, rate_b, trials)], 1)
    pairs, inverse = np.unique(draws, axis=0, return_inverse=True)
    values = np.array([au.epsilon_lower_bound(a, b, runs, alpha, delta) for a, b in pairs])
    sample = values[inverse.ravel()]
    error = sample.std(ddof=1) / math.sqrt(trials)
    found = au.expected_lower_bound(rate_a, rate_b, runs, alpha, delta)
    assert abs(sample.mean() - found) <= 4 * error


# ----------------------------------------------------------------------------- exact epsilon


def test_pair_epsilon_of_one_query_is_the_best_set() -> None:
    rng = np.random.default_rng(1)
    for _ in range(150):
        kinds = int(rng.integers(2, 6))
        p, q = random_law(rng, kinds), random_law(rng, kinds)
        law = run_law(logs(p), logs(q), 1)
        for delta in DELTAS:
            assert_pair_epsilon(au.pair_epsilon(law, delta), subset_epsilon, p, q, delta=delta)


@pytest.mark.parametrize("total", [2, 3])
def test_pair_epsilon_of_a_run_is_the_best_level_set_of_its_sequences(total: int) -> None:
    rng = np.random.default_rng(total)
    for _ in range(60):
        kinds = int(rng.integers(2, 6))
        p, q = random_law(rng, kinds), random_law(rng, kinds)
        law = run_law(logs(p), logs(q), total)
        seq_p, seq_q = sequence_law(p, total), sequence_law(q, total)
        for delta in DELTAS:
            found = au.pair_epsilon(law, delta)
            assert_pair_epsilon(found, level_set_epsilon, seq_p, seq_q, delta=delta)
            if math.isfinite(found):
                assert hockey_stick(seq_p, seq_q, found) <= delta * (1 + 1e-6)
                assert hockey_stick(seq_q, seq_p, found) <= delta * (1 + 1e-6)


@pytest.mark.parametrize(("kinds", "total"), [(2, 3), (3, 2)])
def test_pair_epsilon_of_a_run_is_the_best_set_of_its_sequences(kinds: int, total: int) -> None:
    rng = np.random.default_rng(10 * kinds + total)
    for _ in range(40):
        p, q = random_law(rng, kinds), random_law(rng, kinds)
        law = run_law(logs(p), logs(q), total)
        seq_p, seq_q = sequence_law(p, total), sequence_law(q, total)
        for delta in DELTAS:
            assert_pair_epsilon(
                au.pair_epsilon(law, delta), subset_epsilon, seq_p, seq_q, delta=delta
            )


def test_pair_epsilon_known_cases() -> None:
    # Randomised response at e^1 : 1, and a pair one side of which can show an outcome the
    # other cannot (more often than delta, then less often).
    p = np.array([math.e, 1.0]) / (1 + math.e)
    law = run_law(np.log(p), np.log(p[::-1]), 1)
    assert au.pair_epsilon(law, 0.0) == pytest.approx(1.0, rel=1e-8)
    assert au.pair_epsilon(run_law(np.log(p), np.log(p[::-1]), 3), 0.0) == pytest.approx(3.0)
    law = run_law(np.log([0.5, 0.5]), logs(np.array([1.0, 0.0])), 2)
    assert au.pair_epsilon(law, 0.7) == math.inf
    assert au.pair_epsilon(law, 0.8) == pytest.approx(0.0, abs=1e-9)


# ----------------------------------------------------------------------------- count vectors


@pytest.mark.parametrize("kinds", [1, 2, 3, 4, 5])
@pytest.mark.parametrize("total", [0, 1, 2, 5, 7])
def test_compositions_are_every_count_vector_once(kinds: int, total: int) -> None:
    rows = au.compositions(kinds, total)
    assert rows.shape == (math.comb(total + kinds - 1, kinds - 1), kinds)
    assert len(rows) == au.vector_count(kinds, total)
    assert np.all(rows >= 0) and np.all(rows.sum(axis=1) == total)
    found = {tuple(int(x) for x in row) for row in rows}
    assert len(found) == len(rows)
    expected = {
        tuple(int(x) for x in np.bincount(np.array(c, dtype=np.int64), minlength=kinds))
        for c in itertools.combinations_with_replacement(range(kinds), total)
    }
    assert found == expected


def test_vector_codes_are_distinct_and_decode() -> None:
    rng = np.random.default_rng(3)
    for kinds, total in [(3, 4), (5, 6), (4, 20), (7, 3)]:
        rows = au.compositions(kinds, total)
        codes = au.vector_codes(rows, total)
        assert len(set(codes.tolist())) == len(rows)
        loose = np.unique(rng.integers(0, total + 1, size=(500, kinds)), axis=0)
        codes = au.vector_codes(loose, total)
        assert len(set(codes.tolist())) == len(loose)
        for row, code in zip(loose, codes.tolist(), strict=True):
            digits = []
            for _ in range(kinds):
                code, digit = divmod(code, total + 1)
                digits.append(digit)
            assert digits == row.tolist()


def test_run_law_is_multinomial() -> None:
    rng = np.random.default_rng(4)
    for _ in range(40):
        kinds, total = int(rng.integers(1, 5)), int(rng.integers(0, 7))
        p, q = random_law(rng, kinds), random_law(rng, kinds)
        law = run_law(logs(p), logs(q), total)
        for side, probs in ((law.log_a, p), (law.log_b, q)):
            assert math.fsum(np.exp(side)) == pytest.approx(1.0, rel=1e-12)
            for row, log_mass in zip(law.vectors, side, strict=True):
                ways = math.factorial(total) // math.prod(math.factorial(int(c)) for c in row)
                mass = ways * math.prod(float(probs[k]) ** int(c) for k, c in enumerate(row))
                assert math.exp(log_mass) == pytest.approx(mass, rel=1e-12, abs=0)


def test_merging_fits_keeps_mass_and_never_raises_epsilon() -> None:
    rng = np.random.default_rng(5)
    for _ in range(30):
        kinds, total = int(rng.integers(5, 10)), int(rng.integers(3, 8))
        limit = int(rng.choice([1, 10, 60, 300]))
        p, q = random_law(rng, kinds), random_law(rng, kinds)
        group = au.merged_kinds(logs(p), logs(q), total, limit)
        merged = int(group.max()) + 1
        assert sorted(set(group.tolist())) == list(range(merged))
        assert au.vector_count(merged, total) <= limit
        if au.vector_count(kinds, total) <= limit:
            assert merged == kinds
        else:
            assert merged < kinds
        merged_p, merged_q = au.merged_law(logs(p), group), au.merged_law(logs(q), group)
        for probs, merged_logs in ((p, merged_p), (q, merged_q)):
            summed = np.bincount(group, weights=probs, minlength=merged)
            np.testing.assert_allclose(np.exp(merged_logs), summed, rtol=1e-12, atol=0)
        before = run_law(logs(p), logs(q), total)
        after = run_law(merged_p, merged_q, total)
        for delta in DELTAS:
            coarse, fine = au.pair_epsilon(after, delta), au.pair_epsilon(before, delta)
            assert coarse <= fine * (1 + 1e-6) + 1e-9


# ----------------------------------------------------------------------------- best test


def _spread(rate: float, other: float, runs: int, delta: float) -> float:
    """The bound's first-order standard deviation, as the docstring of best_test states it."""
    rate, other = min(rate, 1.0), min(other, 1.0)
    if rate <= delta:
        return math.inf
    first = (1 - rate) / (runs * rate) * (rate / (rate - delta)) ** 2
    return math.sqrt(first + ((1 - other) / (runs * other) if other > 0 else 0.0))


def _level_sets(law: au.RunLaw, runs: int, alpha: float, delta: float) -> list[tuple[bool, float]]:
    """Every level set of the run's likelihood ratio (a whole group of equal loss at a time),
    both directions: whether its bound is steady, and its bound at the expected counts."""
    out = []
    for pos, neg in ((law.log_a, law.log_b), (law.log_b, law.log_a)):
        with np.errstate(invalid="ignore"):
            level = np.where(np.isneginf(pos), -np.inf, pos - neg)
        for cut in np.unique(level):
            inside = level >= cut
            a, b = math.fsum(np.exp(pos[inside])), math.fsum(np.exp(neg[inside]))
            found = au.epsilon_lower_bound(runs * a, runs * b, runs, alpha, delta)
            out.append((_spread(a, b, runs, delta) <= au.STEADY, found))
    return out


def _assert_best(law: au.RunLaw, runs: int, alpha: float, delta: float) -> None:
    test, bound = au.best_test(law, runs, alpha, delta)
    first, second = (law.log_a, law.log_b) if test.positive == "A" else (law.log_b, law.log_a)
    rate = math.fsum(np.exp(first[test.members]))
    other = math.fsum(np.exp(second[test.members]))
    assert math.exp(test.log_rate) == pytest.approx(rate, rel=1e-12)
    assert math.exp(test.log_other) == pytest.approx(other, rel=1e-12, abs=1e-300)
    with np.errstate(invalid="ignore"):
        loss = np.where(np.isneginf(first), -np.inf, first - second)
    assert loss[test.members].min() >= loss[~test.members].max(initial=-np.inf)
    assert bound == pytest.approx(
        au.epsilon_lower_bound(runs * rate, runs * other, runs, alpha, delta), rel=1e-9, abs=1e-12
    )
    assert bound <= au.pair_epsilon(law, delta)
    candidates = _level_sets(law, runs, alpha, delta)
    steady = [found for ok, found in candidates if ok and found > 0]
    if steady:  # the best steady test that bounds something
        assert _spread(rate, other, runs, delta) <= au.STEADY * (1 + 1e-9)
        assert bound >= max(steady) * (1 - 1e-9)
    else:  # none: the best of all
        assert bound >= max(found for _, found in candidates) * (1 - 1e-9)


@pytest.mark.parametrize("runs", [100, 1_000, 100_000, 10_000_000])
def test_best_test_is_the_best_steady_level_set(runs: int) -> None:
    rng = np.random.default_rng(runs)
    for _ in range(25):
        kinds, total = int(rng.integers(2, 5)), int(rng.integers(1, 7))
        delta = float(rng.choice([0.0, 1e-5, 1e-2]))
        p, q = random_law(rng, kinds, impossible=0.0), random_law(rng, kinds, impossible=0.0)
        _assert_best(run_law(logs(p), logs(q), total), runs, 0.05, delta)


@pytest.mark.parametrize("runs", [1_000, 1_000_000])
def test_best_test_finds_a_set_the_other_side_never_shows(runs: int) -> None:
    law = run_law(logs(np.array([1.0, 0.0])), logs(np.array([0.5, 0.5])), 1)
    _assert_best(law, runs, 0.05, 1e-5)


def test_best_test_of_a_mirrored_pair_is_mirrored() -> None:
    rng = np.random.default_rng(8)
    for _ in range(30):
        kinds, total = int(rng.integers(2, 4)), int(rng.integers(1, 4))
        p, q = random_law(rng, kinds, impossible=0.0), random_law(rng, kinds, impossible=0.0)
        forward = au.best_test(run_law(logs(p), logs(q), total), 10_000, 0.05, 1e-5)[1]
        backward = au.best_test(run_law(logs(q), logs(p), total), 10_000, 0.05, 1e-5)[1]
        assert forward == pytest.approx(backward, rel=1e-9, abs=1e-12)


def test_run_law_of_an_impossible_kind_warns_nothing() -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        law = au.RunLaw.of(np.log([0.5, 0.5]), logs(np.array([1.0, 0.0])), 2)
    assert np.isneginf(law.log_b).sum() == 2

"""The privacy-profile oracle checks itself against independent facts.

The hockey-stick divergence against its definition as a sup over events; its shape (convex,
non-increasing, 1 at gamma = 0, above (1 - gamma)_+) and the identity that ties the two
directions at eps < 0; the exact epsilon against a bisection of the divergence; runs against
explicit product distributions, basic composition, and the Gaussian-DP curve that no
post-processing of a Gaussian mechanism can exceed.
"""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from numpy.typing import NDArray
from scipy import optimize
from scipy.special import log_ndtr, logsumexp, ndtr

from tests.oracle import exact
from tests.oracle import pld_oracle as po
from tests.oracle.strategies import histograms

GAMMAS = np.array([0.0, 1e-3, 0.1, 0.5, 0.9, 1.0, 1.1, 2.0, 5.0, 50.0, 1e4])
DELTAS = [0.0, 1e-8, 1e-5, 1e-3, 0.1]


# ----------------------------------------------------------------------------- strategies


def log_uniform(low: float, high: float) -> st.SearchStrategy[float]:
    return st.floats(math.log(low), math.log(high)).map(lambda x: min(max(math.exp(x), low), high))


@st.composite
def mechanisms(draw: st.DrawFn, max_teachers: int = 14) -> po.Mechanism:
    kind = draw(st.sampled_from(["gnmax", "confident", "lnmax"]))
    if kind == "gnmax":
        return po.GNMax(draw(log_uniform(0.5, 10.0)))
    if kind == "lnmax":
        return po.LNMax(draw(log_uniform(0.1, 3.0)))
    return po.ConfidentGNMax(
        draw(st.floats(0.0, float(max_teachers))),
        draw(log_uniform(0.5, 10.0)),
        draw(log_uniform(0.5, 10.0)),
    )


@st.composite
def distributions(draw: st.DrawFn, size: int) -> NDArray[np.float64]:
    """Normalised log-probabilities over ``size`` outcomes, some of them possibly 0."""
    logits = draw(
        st.lists(st.one_of(st.floats(-40.0, 0.0), st.just(-np.inf)), min_size=size, max_size=size)
    )
    logits[draw(st.integers(0, size - 1))] = 0.0  # not all zero
    row = np.array(logits, dtype=np.float64)
    return np.asarray(exact.normalise(row - logsumexp(row))[0], dtype=np.float64)


@st.composite
def distribution_pairs(draw: st.DrawFn) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
    size = draw(st.integers(1, 6))
    return draw(distributions(size)), draw(distributions(size))


# ----------------------------------------------------------------------------- second methods


def subsets_sup(logp: NDArray[np.float64], logq: NDArray[np.float64], gamma: float) -> float:
    """sup over every event S of P(S) - gamma Q(S) (the empty event gives 0)."""
    p, q = np.exp(logp), np.exp(logq)
    best = 0.0
    for size in range(1, p.size + 1):
        for event in itertools.combinations(range(p.size), size):
            chosen = list(event)
            best = max(best, math.fsum(p[chosen]) - gamma * math.fsum(q[chosen]))
    return best


def bisect_epsilon(logp: NDArray[np.float64], logq: NDArray[np.float64], delta: float) -> float:
    """The smallest eps >= 0 with hockey_stick(e^eps) <= delta, by multisection: each round
    evaluates the divergence at 65 points and keeps the cell where it crosses delta."""

    def profile(eps: NDArray[np.float64]) -> NDArray[np.float64]:
        return po.hockey_stick(logp, logq, np.exp(eps))

    if profile(np.zeros(1))[0] <= delta:
        return 0.0
    infinite = (logp > -np.inf) & (logq == -np.inf)
    if math.fsum(np.exp(logp[infinite])) > delta:
        return math.inf
    with np.errstate(invalid="ignore"):
        losses = np.where((logp > -np.inf) & ~infinite, logp - logq, -np.inf)
    # At the largest finite loss only the mass where q = 0 is left: that is <= delta.
    low, high = 0.0, float(np.max(losses, initial=0.0))
    for _ in range(12):
        grid = np.linspace(low, high, 65)
        at_or_below = profile(grid) <= delta
        at_or_below[-1] = True
        first = int(np.flatnonzero(at_or_below)[0])
        low, high = float(grid[max(first - 1, 0)]), float(grid[first])
        if high - low <= 1e-15 * max(1.0, high):
            break
    return high


def gdp_delta(mu: float, eps: float) -> float:
    """The privacy profile of mu-Gaussian DP."""
    return float(ndtr(mu / 2 - eps / mu) - math.exp(eps + float(log_ndtr(-mu / 2 - eps / mu))))


def gdp_epsilon(mu: float, delta: float) -> float:
    if gdp_delta(mu, 0.0) <= delta:
        return 0.0
    high = 1.0
    while gdp_delta(mu, high) > delta:
        high *= 2
    return float(
        optimize.brentq(lambda e: gdp_delta(mu, e) - delta, 0.0, high, xtol=1e-15, rtol=1e-15)
    )


def close(ours: float, theirs: float, tol: float = 1e-9) -> bool:
    if math.isinf(theirs):
        return ours == theirs
    return abs(ours - theirs) <= tol * max(1.0, abs(theirs))


# ----------------------------------------------------------------------------- hockey stick


@settings(max_examples=100)
@given(pair=distribution_pairs())
def test_hockey_stick_is_the_sup_over_events(
    pair: tuple[NDArray[np.float64], NDArray[np.float64]],
) -> None:
    logp, logq = pair
    ours = po.hockey_stick(logp, logq, GAMMAS)
    assert ours.shape == GAMMAS.shape
    assert np.all(ours >= 0)
    for gamma, value in zip(GAMMAS, ours, strict=True):
        assert abs(value - subsets_sup(logp, logq, float(gamma))) <= 1e-12


@settings(max_examples=30)
@given(hist=histograms(), mechanism=mechanisms())
def test_hockey_stick_of_mechanism_rows_is_the_sup_over_events(
    hist: NDArray[np.int64], mechanism: po.Mechanism
) -> None:
    rows = mechanism.log_probs(np.vstack([hist[None, :], exact.neighbours(hist)]))
    for other in rows[1:4]:
        for first, second in [(rows[0], other), (other, rows[0])]:
            ours = po.hockey_stick(first, second, GAMMAS)
            theirs = [subsets_sup(first, second, float(g)) for g in GAMMAS]
            assert np.all(np.abs(ours - theirs) <= 1e-12)


def test_hockey_stick_shapes_and_inputs() -> None:
    logp = np.log([[0.5, 0.5], [0.9, 0.1]])
    logq = np.log([0.25, 0.75])
    assert po.hockey_stick(logp, logq, GAMMAS).shape == (2, GAMMAS.size)
    assert po.hockey_stick(logp, logq, 1.0).shape == (2,)
    assert po.hockey_stick(logp[0], logq, 1.0).shape == ()
    assert po.hockey_stick(logp[0], logq, 1.0) == pytest.approx(0.25, abs=1e-15)
    # q = 0 < p: that mass counts whatever gamma is; p = 0 never counts.
    with np.errstate(divide="ignore"):
        zero = np.log([0.0, 1.0])
    assert po.hockey_stick(np.log([0.5, 0.5]), zero[::-1], 1e300) == 0.5
    assert po.hockey_stick(zero, np.log([0.5, 0.5]), 0.5) == pytest.approx(0.75, abs=1e-15)
    with pytest.raises(ValueError):
        po.hockey_stick(logp, logq, -1.0)


def test_hockey_stick_of_near_certain_rows_keeps_tiny_values() -> None:
    """p = (1 - a, a), q = (1 - b, b), a > b tiny: delta(1) = a - b, below the rounding of 1 - a."""
    a, b = 3e-200, 1e-200
    logp = exact.normalise(np.log([1.0, a]))[0]
    logq = exact.normalise(np.log([1.0, b]))[0]
    assert po.hockey_stick(logp, logq, 1.0) == pytest.approx(a - b, rel=1e-12)
    assert po.hockey_stick(logq, logp, 1.0) == pytest.approx(a - b, rel=1e-12)


@settings(max_examples=40)
@given(hist=histograms(), mechanism=mechanisms(), which=st.integers(0, 100))
def test_profile_shape(hist: NDArray[np.int64], mechanism: po.Mechanism, which: int) -> None:
    """Convex and non-increasing in gamma, 1 at gamma = 0, at least (1 - gamma)_+; at
    eps < 0, delta_{P||Q}(e^eps) = 1 - e^eps + e^eps delta_{Q||P}(e^-eps)."""
    rows = po.query_rows(hist, mechanism)
    other = rows[1 + which % (rows.shape[0] - 1)]
    gammas = np.linspace(0.0, 4.0, 81)
    for first, second in [(rows[0], other), (other, rows[0])]:
        profile = po.hockey_stick(first, second, gammas)
        assert profile[0] == pytest.approx(1.0, abs=1e-14)
        assert np.all(np.diff(profile) <= 1e-14)
        assert np.all(np.diff(profile, n=2) >= -1e-14)
        assert np.all(profile >= np.maximum(1 - gammas, 0) - 1e-14)
        eps = -np.linspace(0.01, 5.0, 30)
        left = po.hockey_stick(first, second, np.exp(eps))
        right = 1 - np.exp(eps) + np.exp(eps) * po.hockey_stick(second, first, np.exp(-eps))
        assert np.all(np.abs(left - right) <= 1e-13)


# ----------------------------------------------------------------------------- one query


@settings(max_examples=30)
@given(hist=histograms(), mechanism=mechanisms())
def test_query_profiles(hist: NDArray[np.int64], mechanism: po.Mechanism) -> None:
    """The max over neighbours, taken here one neighbour at a time; the two directions tied
    by delta_{P||Q}(e^eps) = 1 - e^eps + e^eps delta_{Q||P}(e^-eps) (max commutes with it)."""
    eps = np.linspace(-4.0, 4.0, 33)
    remove, add = po.query_profiles(hist, mechanism, eps)
    assert remove.shape == add.shape == eps.shape
    mine = mechanism.log_probs(hist[None, :])[0]
    others = mechanism.log_probs(exact.neighbours(hist))
    by_remove = np.max([po.hockey_stick(mine, other, np.exp(eps)) for other in others], axis=0)
    by_add = np.max([po.hockey_stick(other, mine, np.exp(eps)) for other in others], axis=0)
    assert np.all(np.abs(remove - by_remove) <= 1e-15)
    assert np.all(np.abs(add - by_add) <= 1e-15)
    assert np.all((remove >= 0) & (remove <= 1 + 1e-15) & (add >= 0) & (add <= 1 + 1e-15))
    flipped = 1 - np.exp(eps) + np.exp(eps) * add[::-1]
    assert np.all(np.abs(remove[eps < 0] - flipped[eps < 0]) <= 1e-13)


def test_confident_rows() -> None:
    """Pr[abstain] is the threshold step's, Pr[class j] = Pr[answered] GNMax_j."""
    mechanism = po.ConfidentGNMax(threshold=6.0, sigma1=2.0, sigma=1.5)
    hists = np.array([[5, 3, 0], [8, 0, 0], [2, 2, 4]])
    rows = mechanism.log_probs(hists)
    assert rows.shape == (3, 4)
    answered = exact.threshold_log_probs(hists, 6.0, 2.0)[:, 0]
    gnmax = exact.gnmax_log_probs(hists, 1.5)
    for row, hist, pr_answered, classes in zip(rows, hists, answered, gnmax, strict=True):
        z = (max(hist) - 6.0) / 2.0
        assert math.exp(row[0]) == pytest.approx(float(ndtr(-z)), rel=1e-12)
        assert np.exp(row[1:]) == pytest.approx(np.exp(pr_answered + classes), rel=1e-12)
        assert math.fsum(np.exp(row)) == pytest.approx(1.0, abs=1e-15)


# ----------------------------------------------------------------------------- epsilon


def test_epsilon_known_cases() -> None:
    # Randomised response with log-ratio a: delta(eps) = (e^a - e^eps) / (1 + e^a).
    a = 1.3
    logp = np.log([math.exp(a), 1.0]) - math.log1p(math.exp(a))
    logq = logp[::-1]
    assert po.epsilon_at_delta(logp, logq, 0.0) == pytest.approx(a, rel=1e-14)
    for delta in (1e-6, 1e-3, 0.2):
        expected = math.log(math.exp(a) - delta * (1 + math.exp(a)))
        assert po.epsilon_at_delta(logp, logq, delta) == pytest.approx(expected, rel=1e-12)
    assert po.epsilon_at_delta(logp, logq, 0.6) == 0.0  # above delta(0) = TV
    assert po.epsilon_at_delta(logp, logp, 0.0) == 0.0
    # Mass 1/2 where Q is 0: infinite below delta = 1/2.
    with np.errstate(divide="ignore"):
        certain = np.log([1.0, 0.0])
    half = np.log([0.5, 0.5])
    assert po.epsilon_at_delta(half, certain, 0.49) == math.inf
    assert po.epsilon_at_delta(half, certain, 0.5) == 0.0
    assert po.epsilon_at_delta(certain, half, 0.0) == pytest.approx(math.log(2), rel=1e-15)
    # Rows at once.
    both = po.epsilon_at_delta(np.stack([logp, logq]), logq, 0.0)
    assert both.shape == (2,)
    assert both == pytest.approx([a, 0.0], rel=1e-14)
    with pytest.raises(ValueError):
        po.epsilon_at_delta(logp, logq, -1.0)


@settings(max_examples=100)
@given(pair=distribution_pairs(), delta=st.sampled_from(DELTAS))
def test_epsilon_matches_bisection(
    pair: tuple[NDArray[np.float64], NDArray[np.float64]], delta: float
) -> None:
    logp, logq = pair
    ours = float(po.epsilon_at_delta(logp, logq, delta))
    theirs = bisect_epsilon(logp, logq, delta)
    assert close(ours, theirs, 1e-10), (ours, theirs)
    if math.isfinite(ours):
        assert po.hockey_stick(logp, logq, math.exp(ours)) <= delta + 1e-14


@settings(max_examples=30)
@given(hist=histograms(), mechanism=mechanisms(), delta=st.sampled_from(DELTAS[1:]))
def test_one_query_run_is_the_worst_neighbour(
    hist: NDArray[np.int64], mechanism: po.Mechanism, delta: float
) -> None:
    mine = mechanism.log_probs(hist[None, :])[0]
    others = mechanism.log_probs(exact.neighbours(hist))
    remove = max(bisect_epsilon(mine, other, delta) for other in others)
    add = max(bisect_epsilon(other, mine, delta) for other in others)
    run = hist[None, :]
    assert close(po.run_epsilon_one_direction(run, mechanism, delta, "remove"), remove, 1e-10)
    assert close(po.run_epsilon_one_direction(run, mechanism, delta, "add"), add, 1e-10)
    assert close(po.run_epsilon(run, mechanism, delta), max(remove, add), 1e-10)


@settings(max_examples=15)
@given(
    first=histograms(max_classes=3, max_teachers=6),
    second=st.data(),
    mechanism=mechanisms(max_teachers=6),
    delta=st.sampled_from(DELTAS[1:]),
)
def test_two_query_run_matches_explicit_products(
    first: NDArray[np.int64], second: st.DataObject, mechanism: po.Mechanism, delta: float
) -> None:
    """Every neighbouring run built by hand, each outcome pair's probability multiplied out."""
    other = second.draw(histograms(first.size, first.size, 6))
    choices = []
    for hist in (first, other):
        options = np.vstack([hist[None, :], exact.neighbours(hist)])
        choices.append(np.exp(mechanism.log_probs(options)))

    def product(a: NDArray[np.float64], b: NDArray[np.float64]) -> NDArray[np.float64]:
        with np.errstate(divide="ignore"):
            return np.log([x * y for x, y in itertools.product(a, b)])

    mine = product(choices[0][0], choices[1][0])
    remove = add = 0.0
    for a, b in itertools.product(choices[0], choices[1]):
        theirs = product(a, b)
        remove = max(remove, bisect_epsilon(mine, theirs, delta))
        add = max(add, bisect_epsilon(theirs, mine, delta))
    run = np.stack([first, other])
    # Products in linear space round differently from sums of logs.
    assert close(po.run_epsilon_one_direction(run, mechanism, delta, "remove"), remove, 1e-9)
    assert close(po.run_epsilon_one_direction(run, mechanism, delta, "add"), add, 1e-9)


def test_run_rows() -> None:
    mechanism = po.ConfidentGNMax(threshold=4.0, sigma1=1.5, sigma=2.0)
    hists = np.array([[4, 1, 0], [2, 2, 1]])
    rows = po.run_log_probs(hists, mechanism)
    sizes = [1 + exact.neighbours(h).shape[0] for h in hists]
    assert rows.shape == (sizes[0] * sizes[1], 4 * 4)
    assert np.all(np.abs(logsumexp(rows, axis=1)) <= 1e-14)
    singles = [mechanism.log_probs(np.vstack([h[None, :], exact.neighbours(h)])) for h in hists]
    # Combination (i, j) is row i * sizes[1] + j; outcome (a, b) is column a * 4 + b.
    for i, j, a, b in [(0, 0, 0, 0), (3, 5, 2, 1), (sizes[0] - 1, sizes[1] - 1, 3, 3)]:
        expected = singles[0][i, a] + singles[1][j, b]
        assert rows[i * sizes[1] + j, a * 4 + b] == pytest.approx(expected, rel=1e-15)
    with pytest.raises(ValueError):
        po.run_epsilon_one_direction(hists, mechanism, 1e-5, "both")  # type: ignore[arg-type]


@settings(max_examples=25)
@given(hist=histograms(max_classes=3, max_teachers=10), mechanism=mechanisms(max_teachers=10))
def test_composition(hist: NDArray[np.int64], mechanism: po.Mechanism) -> None:
    """Two identical queries cost at least one and at most two at delta/2 each."""
    delta = 1e-5
    one = po.run_epsilon(hist[None, :], mechanism, delta)
    two = po.run_epsilon(np.stack([hist, hist]), mechanism, delta)
    half = po.run_epsilon(hist[None, :], mechanism, delta / 2)
    assert one <= two * (1 + 1e-12) + 1e-12
    assert two <= 2 * half * (1 + 1e-12) + 1e-12


@settings(max_examples=25)
@given(run=po.tiny_run(), delta=st.sampled_from([1e-6, 1e-5, 1e-3]))
def test_tiny_runs_between_their_queries_and_composition(run: po.Run, delta: float) -> None:
    """A run costs at least each of its queries alone (the neighbour that changes only that
    query), and at most the sum of their costs at delta/k (basic composition)."""
    hists, mechanism = run
    total = po.run_epsilon(hists, mechanism, delta)
    assert math.isfinite(total) and total >= 0
    alone = [po.run_epsilon(h[None, :], mechanism, delta) for h in hists]
    split = [po.run_epsilon(h[None, :], mechanism, delta / len(hists)) for h in hists]
    assert max(alone) <= total * (1 + 1e-12) + 1e-12
    assert total <= math.fsum(split) * (1 + 1e-12) + 1e-12
    both = max(
        po.run_epsilon_one_direction(hists, mechanism, delta, direction)
        for direction in po.DIRECTIONS
    )
    assert total == both


# ----------------------------------------------------------------------------- Gaussian DP


@pytest.mark.parametrize("sigma", [1.0, 3.0, 30.0, 300.0, 3000.0])
@pytest.mark.parametrize(
    "hists", [[[2, 1]], [[3, 3]], [[0, 5]], [[4, 1], [1, 4]], [[2, 2], [5, 0], [3, 2]]]
)
@pytest.mark.parametrize("delta", [1e-8, 1e-5, 1e-2])
def test_two_classes_stay_below_gaussian_dp(
    sigma: float, hists: list[list[int]], delta: float
) -> None:
    """With two classes GNMax answers 1[n_0 - n_1 + sigma (Z_0 - Z_1) > 0]: a post-processing
    of a Gaussian mechanism of sensitivity 2 and noise sigma sqrt(2), so mu = sqrt(2) / sigma
    per query and sqrt(k) mu for k queries. No run can exceed that curve."""
    mechanism = po.GNMax(sigma)
    counts = np.array(hists, dtype=np.int64)
    rows = mechanism.log_probs(counts)
    for row, (n0, n1) in zip(rows, counts, strict=True):
        assert math.exp(row[0]) == pytest.approx(
            float(ndtr((n0 - n1) / (sigma * math.sqrt(2)))), rel=1e-10
        )
    mu = math.sqrt(len(hists)) * math.sqrt(2) / sigma
    ours = po.run_epsilon(counts, mechanism, delta)
    bound = gdp_epsilon(mu, delta)
    assert ours <= bound + 1e-9, (ours, bound)
    assert ours > 0 or bound < 1e-3


def test_gdp_helper() -> None:
    """The Gaussian-DP curve at its known point: delta(0) = 2 Phi(mu/2) - 1."""
    for mu in (0.01, 0.5, 2.0):
        assert gdp_delta(mu, 0.0) == pytest.approx(2 * float(ndtr(mu / 2)) - 1, rel=1e-12)
        eps = gdp_epsilon(mu, 1e-5)
        assert gdp_delta(mu, eps) == pytest.approx(1e-5, rel=1e-8)


# ----------------------------------------------------------------------------- corpus


def test_tiny_runs_corpus() -> None:
    runs = po.tiny_runs(seed=7, count=40)
    again = po.tiny_runs(seed=7, count=40)
    assert len(runs) == 40
    kinds = [type(mechanism) for _, mechanism in runs]
    assert kinds.count(po.GNMax) == kinds.count(po.ConfidentGNMax) == 20
    for (hists, mechanism), (same_hists, same_mechanism) in zip(runs, again, strict=True):
        assert np.array_equal(hists, same_hists) and mechanism == same_mechanism
        num_queries, num_classes = hists.shape
        teachers = set(hists.sum(axis=1).tolist())
        assert 1 <= num_queries <= 3 and 2 <= num_classes <= 4
        assert len(teachers) == 1 and 4 <= teachers.pop() <= 14
        assert np.all(hists >= 0)
        if isinstance(mechanism, po.GNMax):
            assert 1 <= mechanism.sigma <= 6
        else:
            assert isinstance(mechanism, po.ConfidentGNMax)
            num_teachers = int(hists[0].sum())
            assert num_teachers / 2 <= mechanism.threshold <= num_teachers
            assert 1 <= mechanism.sigma1 <= 6 and 1 <= mechanism.sigma <= 6
    other_seed = po.tiny_runs(seed=8, count=40)
    assert any(not np.array_equal(a, b) for (a, _), (b, _) in zip(runs, other_seed, strict=True))


@settings(max_examples=50)
@given(run=po.tiny_run())
def test_tiny_run_strategy(run: po.Run) -> None:
    hists, mechanism = run
    num_queries, num_classes = hists.shape
    assert 1 <= num_queries <= 3 and 2 <= num_classes <= 4
    teachers = set(hists.sum(axis=1).tolist())
    assert len(teachers) == 1
    num_teachers = teachers.pop()
    assert 4 <= num_teachers <= 14
    if isinstance(mechanism, po.GNMax):
        assert 1 <= mechanism.sigma <= 6
    else:
        assert isinstance(mechanism, po.ConfidentGNMax)
        assert num_teachers / 2 <= mechanism.threshold <= num_teachers
        assert 1 <= mechanism.sigma1 <= 6 and 1 <= mechanism.sigma <= 6


def test_largest_run() -> None:
    """k = 3 queries, C = 4 classes, M = 14 teachers, Confident-GNMax: the largest run the
    tiny runs reach (benchmarks/bench_pld_oracle.py times it). Its figure is add's, at or
    above its costliest query alone and at most their sum at delta / 3."""
    mechanism = po.ConfidentGNMax(threshold=9.0, sigma1=2.0, sigma=1.5)
    hists = np.array([[10, 2, 1, 1], [5, 5, 2, 2], [4, 4, 3, 3]])
    delta = 1e-5
    epsilon = po.run_epsilon(hists, mechanism, delta)
    assert epsilon == pytest.approx(4.5464702228, rel=1e-9)
    assert po.run_epsilon_one_direction(hists, mechanism, delta, "add") == epsilon
    remove = po.run_epsilon_one_direction(hists, mechanism, delta, "remove")
    assert remove == pytest.approx(3.8687704031, rel=1e-9)
    alone = [po.run_epsilon(h[None, :], mechanism, delta) for h in hists]
    split = [po.run_epsilon(h[None, :], mechanism, delta / 3) for h in hists]
    assert alone[0] == pytest.approx(3.8100538478, rel=1e-9)
    assert max(alone) <= epsilon <= math.fsum(split)

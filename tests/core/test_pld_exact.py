"""Bounds on the exact outcome probabilities of GNMax and Confident-GNMax, and on the worst
neighbour's privacy profiles: against the independent oracle (tests/oracle/exact.py), closed
forms and mpmath."""

from __future__ import annotations

import math
from functools import partial

import mpmath
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy.special import log_ndtr
from scipy.stats import norm

from pate_cli.core import outcome_bounds, pld_exact
from pate_cli.core.pld_exact import (
    TooManyClassesError,
    confident_log_prob_bounds,
    gnmax_log_prob_bounds,
    worst_neighbour_profiles,
    worst_neighbour_profiles_many,
)
from tests.oracle import exact as oracle
from tests.oracle.strategies import EXAMPLES, histograms, log_uniform

U = 2.0**-53
EPS = np.linspace(-1.0, 3.0, 41)


def oracle_slack(truth: np.ndarray, num_classes: int) -> np.ndarray:
    """How far the oracle's own logs may be from the truth: 1e-12 relative, plus its sums of
    C log_ndtr terms, each rounded to a few ulp of its size."""
    return 1e-12 + 4 * num_classes * U * np.abs(truth)


def assert_brackets(lower, upper, truth, num_classes):
    slack = oracle_slack(truth, num_classes)
    assert np.all(lower <= truth + slack), np.max(lower - truth)
    assert np.all(upper >= truth - slack), np.min(upper - truth)
    # Tight: 1e-10 relative, and the logs' own rounding where |log p| is large.
    assert np.all(upper - lower <= 1e-10 + 5e-14 * np.abs(truth)), np.max(upper - lower)
    assert np.all(upper <= 0.0)


def with_fraction(hist: np.ndarray, fraction: float) -> np.ndarray:
    """Votes moved off the integers on every other class (the direct path)."""
    return hist + fraction * (np.arange(hist.size) % 2)


@settings(max_examples=EXAMPLES)
@given(
    hist=histograms(min_classes=2, max_classes=20, max_teachers=300),
    sigma=log_uniform(0.5, 200.0),
    fraction=st.sampled_from([0.0, 0.0, 0.0, 0.25, 0.5]),
)
def test_gnmax_bounds_bracket_the_oracle(hist, sigma, fraction):
    hists = with_fraction(hist, fraction)[None, :]
    lower, upper = gnmax_log_prob_bounds(hists, sigma)
    truth = oracle.gnmax_log_probs(hists, sigma)
    assert_brackets(lower, upper, truth, hist.size)


@settings(max_examples=EXAMPLES)
@given(
    hist=histograms(min_classes=2, max_classes=12, max_teachers=300),
    sigma=log_uniform(0.5, 200.0),
    sigma1=log_uniform(0.5, 200.0),
    share=st.floats(0.0, 1.2),
)
def test_confident_bounds_bracket_the_oracle(hist, sigma, sigma1, share):
    hists = hist[None, :].astype(np.float64)
    threshold = share * hist.sum()
    lower, upper = confident_log_prob_bounds(hists, threshold, sigma1, sigma)
    answered, abstain = oracle.threshold_log_probs(hists, threshold, sigma1).T
    truth = np.concatenate(
        [abstain[:, None], answered[:, None] + oracle.gnmax_log_probs(hists, sigma)], axis=1
    )
    assert lower.shape == upper.shape == (1, hist.size + 1)
    assert_brackets(lower, upper, truth, hist.size + 1)


def test_many_rows_at_once_bracket_the_oracle(mnist_counts, monkeypatch):
    """The paper's MNIST votes in one call, split into several blocks (and threads)."""
    monkeypatch.setattr(pld_exact, "_BLOCK_CELLS", 1 << 14)
    hists = mnist_counts[:120]
    lower, upper = gnmax_log_prob_bounds(hists, 40.0)
    assert_brackets(lower, upper, oracle.gnmax_log_probs(hists, 40.0), hists.shape[1])


# ----------------------------------------------------------------------------- mpmath


@pytest.mark.parametrize("sigma", [0.5, 1.0, 3.0, 40.0])
@pytest.mark.parametrize("gap", [0, 1, 5, 40, 300])
def test_two_classes_against_the_closed_form(gap, sigma):
    """With two classes p_1 = Phi(-gap / (sigma sqrt 2)), at 40 digits: within the bounds."""
    lower, upper = gnmax_log_prob_bounds(np.array([[gap, 0.0]]), sigma)
    with mpmath.workdps(40):
        low_class = mpmath.log(mpmath.ncdf(-mpmath.mpf(gap) / (sigma * mpmath.sqrt(2))))
        top_class = mpmath.log1p(-mpmath.exp(low_class))
        for column, truth in ((0, top_class), (1, low_class)):
            assert mpmath.mpf(lower[0, column]) <= truth <= mpmath.mpf(upper[0, column])


def mp_log_prob(hist: list[int], sigma: float, j: int) -> tuple[mpmath.mpf, mpmath.mpf]:
    """log p_j by mpmath.quad at 30 digits, the integrand scaled by its value at the mode
    (found on a fine float grid) and the line split around it, and a bound on its error
    (the quadrature's estimate, relative, plus 1e-28 for the 30 digits' rounding)."""
    d = [(hist[j] - v) / sigma for i, v in enumerate(hist) if i != j]
    grid = np.arange(-15.0, max([0.0] + [-x for x in d]) + 15.0, 0.01)
    log_f = -0.5 * grid**2 + sum(log_ndtr(grid + x) for x in d)
    mode = float(grid[np.argmax(log_f)])
    with mpmath.workdps(30):
        exact_d = [mpmath.mpf(hist[j] - v) / sigma for i, v in enumerate(hist) if i != j]

        def log_integrand(t):
            return mpmath.log(mpmath.npdf(t)) + mpmath.fsum(
                mpmath.log(mpmath.ncdf(t + x)) for x in exact_d
            )

        scale = log_integrand(mpmath.mpf(mode))
        points = [mpmath.mpf(mode) + o for o in (-16, -8, -4, -2, -1, 0, 1, 2, 4, 8, 16)]
        value, error = mpmath.quad(
            lambda t: mpmath.exp(log_integrand(t) - scale),
            [-mpmath.inf, *points, mpmath.inf],
            error=True,
        )
        assert error < 1e-25 * value
        return mpmath.log(value) + scale, error / value + mpmath.mpf("1e-28")


@pytest.mark.parametrize(
    ("hist", "sigma", "classes"),
    [
        ([3, 1, 0], 2.0, [0, 1, 2]),
        ([100, 3, 2], 1.0, [0, 1, 2]),
        ([7, 7, 6, 0], 3.0, [0, 2, 3]),
        ([214, 8, 7, 6, 4, 4, 2, 1, 1, 7], 40.0, [6]),
    ],
)
def test_bounds_contain_mpmath_quadrature(hist, sigma, classes):
    lower, upper = gnmax_log_prob_bounds(np.array([hist], dtype=np.float64), sigma)
    for j in classes:
        truth, error = mp_log_prob(hist, sigma, j)
        assert mpmath.mpf(lower[0, j]) <= truth + error
        assert truth - error <= mpmath.mpf(upper[0, j])
        assert upper[0, j] - lower[0, j] <= 1e-10 + 5e-14 * abs(float(truth))


# ----------------------------------------------------------------------------- profiles


def hockey_stick(log_p: np.ndarray, log_q: np.ndarray, eps: np.ndarray) -> np.ndarray:
    """sum_o max(p_o - e^eps q_o, 0) for each eps. Shapes: (O,), (O,), (I,) -> (I,)."""
    p, q = np.exp(log_p), np.exp(log_q)
    return np.maximum(p[None, :] - np.exp(eps)[:, None] * q[None, :], 0.0).sum(axis=1)


def oracle_profiles(hist, eps, log_probs):
    """The max over neighbours of both hockey-stick divergences, from the oracle."""
    others = oracle.neighbours(hist)
    logp = log_probs(np.vstack([hist[None, :], others]))
    remove = np.zeros(eps.size)
    add = np.zeros(eps.size)
    for row in logp[1:]:
        remove = np.maximum(remove, hockey_stick(logp[0], row, eps))
        add = np.maximum(add, hockey_stick(row, logp[0], eps))
    return remove, add


def assert_profile_above(mine, truth, eps):
    assert np.all(mine >= truth - 1e-14), np.min(mine - truth)
    assert np.all(mine <= truth + 1e-9), np.max(mine - truth)
    assert np.all(mine >= np.maximum(-np.expm1(eps), 0.0))
    assert np.all(mine <= 1.0)


@settings(max_examples=max(20, EXAMPLES // 2))
@given(hist=histograms(min_classes=2, max_classes=5, max_teachers=30), sigma=log_uniform(0.5, 50.0))
def test_gnmax_profiles_are_above_the_oracle(hist, sigma):
    remove, add = worst_neighbour_profiles(
        hist, EPS, log_prob_bounds=partial(gnmax_log_prob_bounds, sigma=sigma)
    )
    truth_remove, truth_add = oracle_profiles(hist, EPS, lambda h: oracle.gnmax_log_probs(h, sigma))
    assert_profile_above(remove, truth_remove, EPS)
    assert_profile_above(add, truth_add, EPS)


def confident_oracle(hists, threshold, sigma1, sigma):
    answered, abstain = oracle.threshold_log_probs(hists, threshold, sigma1).T
    gn = oracle.gnmax_log_probs(hists, sigma)
    return np.concatenate([abstain[:, None], answered[:, None] + gn], axis=1)


@settings(max_examples=max(20, EXAMPLES // 2))
@given(
    hist=histograms(min_classes=2, max_classes=4, max_teachers=30),
    sigma=log_uniform(0.5, 50.0),
    sigma1=log_uniform(0.5, 50.0),
    share=st.floats(0.0, 1.2),
)
def test_confident_profiles_are_above_the_oracle(hist, sigma, sigma1, share):
    threshold = share * hist.sum()
    bounds = partial(confident_log_prob_bounds, threshold=threshold, sigma1=sigma1, sigma=sigma)
    remove, add = worst_neighbour_profiles(hist, EPS, log_prob_bounds=bounds)
    truth_remove, truth_add = oracle_profiles(
        hist, EPS, lambda h: confident_oracle(h, threshold, sigma1, sigma)
    )
    assert_profile_above(remove, truth_remove, EPS)
    assert_profile_above(add, truth_add, EPS)


@settings(max_examples=EXAMPLES)
@given(
    logs=st.lists(
        st.tuples(st.floats(-800.0, 0.0), st.floats(-800.0, 0.0)), min_size=1, max_size=21
    ),
    extra=st.lists(st.floats(-5.0, 5.0), max_size=5),
)
def test_pair_profile_is_above_its_formula(logs, extra):
    """The sorted prefix sums bound sum_o max(e^a_o - e^(eps + b_o), 0) from above at every
    eps, also exactly at a ratio a_o - b_o and next to it, and among the subnormals (the sum
    evaluated exactly by mpmath)."""
    log_a = np.array([[a for a, _ in logs]])
    log_b = np.array([[b for _, b in logs]])
    gaps = (log_a - log_b)[0]
    eps = np.sort(
        np.concatenate([gaps, np.nextafter(gaps, -np.inf), np.nextafter(gaps, np.inf), extra])
    )
    # Decreasing eps in; the difference unclipped out (the callers clip it at 0).
    mine = np.maximum(pld_exact._pair_profiles(log_a, log_b, eps[::-1])[0][::-1], 0.0)
    with mpmath.workdps(50):
        for value, e in zip(mine, eps, strict=True):
            exact = mpmath.fsum(
                max(mpmath.exp(a) - mpmath.exp(mpmath.mpf(e) + b), 0) for a, b in logs
            )
            assert mpmath.mpf(value) >= exact
            # Where eps is within rounding of a ratio the term's sign is unsure: it is bounded
            # by 8 ulp of the logs' sizes times e^a.
            unsure = mpmath.fsum(16 * U * (abs(a) + abs(b) + 1) * mpmath.exp(a) for a, b in logs)
            mass = mpmath.fsum(mpmath.exp(a) for a, _ in logs)
            assert value <= exact * (1 + 1e-13) + 1e-300 + unsure + 1e-14 * mass


@pytest.mark.parametrize(
    ("hist", "sigma"),
    [([214, 8, 7, 6, 4, 4, 2, 1, 1, 7], 40.0), ([3, 1, 0], 2.0), ([5, 5, 0, 0], 0.7)],
)
def test_profiles_are_below_the_gaussian_mechanism(hist, sigma):
    """GNMax post-processes n + sigma Z, and neighbours are sqrt(2) apart: each profile is at
    most that of mu-GDP, mu = sqrt(2) / sigma (Dong, Roth and Su 2022, Corollary 2.13)."""
    mu = math.sqrt(2) / sigma
    eps = np.linspace(-1.0, 3.0, 81)
    gaussian = norm.cdf(-eps / mu + mu / 2) - np.exp(eps) * norm.cdf(-eps / mu - mu / 2)
    for curve in worst_neighbour_profiles(
        np.array(hist, dtype=np.float64),
        eps,
        log_prob_bounds=partial(gnmax_log_prob_bounds, sigma=sigma),
    ):
        assert np.all(curve <= gaussian + 1e-11)


@pytest.mark.parametrize("confident", [False, True])
def test_many_is_each_histogram_alone(confident):
    """Sorting, deduplicating (also the moves between tied classes) and blocking change
    nothing beyond rounding; permuted histograms get the same profiles."""
    rng = np.random.default_rng(7)
    base = rng.multinomial(40, [0.6, 0.2, 0.1, 0.05, 0.05], size=6).astype(np.float64)
    ties = np.array(
        [[5.0, 5.0, 5.0, 0.0, 0.0], [3.0, 0.0, 3.0, 0.0, 0.0], [1.0, 0.0, 0.0, 0.0, 0.0]]
    )
    hists = np.vstack([base, base[:, ::-1], base[:2], ties, np.zeros((1, 5))])
    bounds = (
        partial(confident_log_prob_bounds, threshold=25.0, sigma1=8.0, sigma=6.0)
        if confident
        else partial(gnmax_log_prob_bounds, sigma=6.0)
    )
    remove, add = worst_neighbour_profiles_many(hists, EPS, log_prob_bounds=bounds)
    assert remove.shape == add.shape == (hists.shape[0], EPS.size)
    for row, hist in enumerate(hists):
        one_remove, one_add = worst_neighbour_profiles(hist, EPS, log_prob_bounds=bounds)
        np.testing.assert_allclose(remove[row], one_remove, rtol=1e-12, atol=1e-15)
        np.testing.assert_allclose(add[row], one_add, rtol=1e-12, atol=1e-15)
    np.testing.assert_array_equal(remove[:6], remove[6:12])
    # No votes, no neighbour: the curve of a distribution against itself.
    np.testing.assert_allclose(remove[-1], np.maximum(-np.expm1(EPS), 0.0), rtol=1e-14)


@pytest.mark.parametrize("confident", [False, True])
@pytest.mark.parametrize(
    ("cells", "bases"),
    [(7, 512), (3 * EPS.size, 2), (17 * EPS.size, 512)],
    ids=["eps-split", "three-pairs", "seventeen-pairs"],
)
def test_profiles_over_many_blocks_are_the_one_block_ones(monkeypatch, cells, bases, confident):
    """A histogram's neighbours (and the eps) split over many blocks: each profile is the
    maximum over all of them, the one-block figure, never the last block's alone. Blocks
    of 7 cells (one pair, the eps in six pieces), of 3 and of 17 pairs at every eps, two
    histograms to a block of bases; the same bounds at the default size (one block)."""
    rng = np.random.default_rng(7)
    hists = np.vstack(
        [
            rng.multinomial(40, [0.6, 0.2, 0.1, 0.05, 0.05], size=4),
            [[5, 5, 5, 0, 0], [20, 19, 1, 0, 0], [36, 1, 1, 1, 1]],
        ]
    ).astype(np.float64)
    bounds = (
        partial(confident_log_prob_bounds, threshold=25.0, sigma1=8.0, sigma=6.0)
        if confident
        else partial(gnmax_log_prob_bounds, sigma=6.0)
    )
    whole = worst_neighbour_profiles_many(hists, EPS, log_prob_bounds=bounds)
    alone = [worst_neighbour_profiles(hist, EPS, log_prob_bounds=bounds) for hist in hists]
    monkeypatch.setattr(pld_exact, "_BLOCK_CELLS", cells)
    monkeypatch.setattr(pld_exact, "_BASE_BLOCK", bases)
    blocked = worst_neighbour_profiles_many(hists, EPS, log_prob_bounds=bounds)
    for direction in (0, 1):
        # A pair's profile is the same in any block but for the eps pieces' running sums.
        np.testing.assert_allclose(blocked[direction], whole[direction], rtol=1e-12, atol=1e-15)
    for row, hist in enumerate(hists):
        one_remove, one_add = worst_neighbour_profiles(hist, EPS, log_prob_bounds=bounds)
        np.testing.assert_allclose(one_remove, alone[row][0], rtol=1e-12, atol=1e-15)
        np.testing.assert_allclose(one_add, alone[row][1], rtol=1e-12, atol=1e-15)
    # And above the oracle's worst neighbour, within its 1e-9.
    log_probs = (
        (lambda h: confident_oracle(h, 25.0, 8.0, 6.0))
        if confident
        else (lambda h: oracle.gnmax_log_probs(h, 6.0))
    )
    for row in (4, 5):
        truth_remove, truth_add = oracle_profiles(hists[row].astype(np.int64), EPS, log_probs)
        assert_profile_above(blocked[0][row], truth_remove, EPS)
        assert_profile_above(blocked[1][row], truth_add, EPS)


def test_many_on_mnist_votes_and_twenty_classes(mnist_counts):
    """The paper's MNIST votes (10 classes, 250 teachers) and a 20-class histogram: the
    deduplicated profiles are each histogram's own."""
    rng = np.random.default_rng(11)
    cases = [
        (mnist_counts[:6], partial(gnmax_log_prob_bounds, sigma=40.0)),
        (
            mnist_counts[6:10],
            partial(confident_log_prob_bounds, threshold=200.0, sigma1=150.0, sigma=40.0),
        ),
        (
            rng.multinomial(60, [0.3] + [0.7 / 19] * 19, size=2).astype(np.float64),
            partial(gnmax_log_prob_bounds, sigma=3.0),
        ),
    ]
    for hists, bounds in cases:
        remove, add = worst_neighbour_profiles_many(hists, EPS, log_prob_bounds=bounds)
        for row, hist in enumerate(hists):
            one_remove, one_add = worst_neighbour_profiles(hist, EPS, log_prob_bounds=bounds)
            np.testing.assert_allclose(remove[row], one_remove, rtol=1e-12, atol=1e-15)
            np.testing.assert_allclose(add[row], one_add, rtol=1e-12, atol=1e-15)


def test_profiles_at_extreme_eps():
    """Far beyond e^eps's range and in between: in [0, 1], never NaN, falling in eps, in any
    order; infinite eps is refused."""
    eps = np.array([-1e300, -800.0, -50.0, 0.0, 50.0, 699.0, 701.0, 800.0, 1e300])
    shuffled = np.random.default_rng(5).permutation(eps.size)
    bounds = partial(gnmax_log_prob_bounds, sigma=0.5)
    for hist in (np.array([30.0, 0.0, 0.0]), np.array([2.0, 1.0, 1.0])):
        curves = worst_neighbour_profiles(hist, eps, log_prob_bounds=bounds)
        again = worst_neighbour_profiles(hist, eps[shuffled], log_prob_bounds=bounds)
        for curve, other in zip(curves, again, strict=True):
            assert np.all((curve >= 0) & (curve <= 1))
            assert np.all(np.diff(curve) <= 0)
            assert curve[0] == 1.0
            assert curve[-1] == 0.0
            np.testing.assert_array_equal(curve[shuffled], other)
    for bad in (np.inf, -np.inf, np.nan):
        with pytest.raises(ValueError, match="eps must be finite"):
            worst_neighbour_profiles(hist, [0.0, bad], log_prob_bounds=bounds)


# ----------------------------------------------------------------------------- edges


def test_table_and_direct_paths_agree(monkeypatch):
    """Integer votes read tables of log Phi per gap; the direct path computes the same
    doubles."""
    rng = np.random.default_rng(3)
    hists = rng.multinomial(250, [0.8] + [0.2 / 9] * 9, size=50).astype(np.float64)
    tabulated = gnmax_log_prob_bounds(hists, 40.0)
    monkeypatch.setattr(outcome_bounds, "_TABLE_ENTRIES", 0)
    direct = gnmax_log_prob_bounds(hists, 40.0)
    np.testing.assert_array_equal(tabulated[0], direct[0])
    np.testing.assert_array_equal(tabulated[1], direct[1])


@pytest.mark.parametrize("sigma", [1e-3, 1e-1, 1e4, 1e8])
def test_extreme_sigma_gives_valid_bounds(sigma):
    hists = np.array([[300.0, 0.0, 0.0], [5.0, 5.0, 4.0], [0.0, 0.0, 0.0]])
    lower, upper = gnmax_log_prob_bounds(hists, sigma)
    assert not np.any(np.isnan(lower)) and not np.any(np.isnan(upper))
    assert np.all(lower <= upper) and np.all(upper <= 0)
    # Classes with equal votes are equally likely: three ways of a tie at zero votes.
    np.testing.assert_allclose(upper[2], math.log(1 / 3), atol=1e-9)
    np.testing.assert_allclose(lower[2], math.log(1 / 3), atol=1e-9)


def test_nearly_certain_outcome_keeps_its_complement():
    """The most likely class is bounded by 1 - (the others): log p stays about -(the others'
    mass), here ~1e-18, not a rounding-sized 1e-13."""
    lower, upper = gnmax_log_prob_bounds(np.array([[250.0, 0.0, 0.0]]), 20.0)
    others = math.exp(np.logaddexp(lower[0, 1], lower[0, 2]))
    assert 0 < others < 1e-17
    assert -others * (1 + 1e-10) <= lower[0, 0] <= upper[0, 0] <= -others * (1 - 1e-10)


def test_more_than_twenty_classes_are_refused():
    hists = np.ones((2, 21))
    message = "exact privacy-loss pairs cover at most 20 classes; got 21"
    bounds = partial(gnmax_log_prob_bounds, sigma=1.0)
    calls = [
        lambda: gnmax_log_prob_bounds(hists, 1.0),
        lambda: confident_log_prob_bounds(hists, 5.0, 1.0, 1.0),
        lambda: worst_neighbour_profiles(hists[0], EPS, log_prob_bounds=bounds),
        lambda: worst_neighbour_profiles_many(hists, EPS, log_prob_bounds=bounds),
    ]
    for call in calls:
        with pytest.raises(TooManyClassesError, match=f"^{message}$"):
            call()
    assert issubclass(TooManyClassesError, ValueError)

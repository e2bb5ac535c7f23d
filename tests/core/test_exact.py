"""Exact (epsilon, delta) curves against independent computations: Google's dp_accounting
(privacy loss distributions) for Gaussian DP, a direct high-precision sum for the optimal
composition of pure-DP steps."""

from __future__ import annotations

import math

import mpmath
import numpy as np
import pytest
from dp_accounting.pld import privacy_loss_distribution as pld
from scipy.stats import norm

from pate_cli.core import exact
from pate_cli.core.bisection import bisect_boundary, replay_boundary
from tests.conftest import MNIST, run_cli


@pytest.mark.parametrize(
    ("sigma", "queries", "delta"),
    [(40, 640, 1e-5), (100, 10_000, 1e-8), (5, 100, 1e-6), (300, 50, 1e-3), (2, 1, 1e-5)],
)
def test_gaussian_dp_against_the_pld_accountant(sigma, queries, delta):
    """Never above dp_accounting's PLD epsilon (a pessimistic discretisation), within 1%."""
    mu = math.sqrt(2 * queries) / sigma
    mine = exact.gaussian_epsilon(mu, delta)
    distribution = pld.from_gaussian_mechanism(
        standard_deviation=1 / mu, sensitivity=1, value_discretization_interval=1e-4
    )
    theirs = distribution.get_epsilon_for_delta(delta)
    assert mine <= theirs <= mine * 1.01 + 1e-6


@pytest.mark.parametrize("mu", [0.05, 0.9, 3.0, 20.0])
def test_gaussian_dp_is_the_closed_form(mu):
    """delta at the returned epsilon is the target (the curve of Dong, Roth and Su, by
    scipy's normal cdf), and a hair below it the delta is above the target."""
    delta = 1e-5
    eps = exact.gaussian_epsilon(mu, delta)

    def curve(e: float) -> float:
        return norm.cdf(-e / mu + mu / 2) - math.exp(e) * norm.cdf(-e / mu - mu / 2)

    assert curve(eps) <= delta * (1 + 1e-9)
    assert curve(eps * (1 - 1e-6)) > delta


@pytest.mark.parametrize(
    "mu", [0.0, 5e-324, 1e-300, 1e-15, 1e-6, 0.3, 1.0, 3.0, 1e3, 1e10, 1e200, 1.7e308, math.inf]
)
def test_gaussian_dp_edges(mu):
    """mu = 0 costs nothing, mu = inf everything; a delta at or above delta(0) costs eps 0;
    epsilons grow as delta shrinks; never NaN, and log delta stays in [-max float, 0] for
    0 < mu < inf (a bound on a positive delta, never -inf); no warnings (they are errors)."""
    deltas = [5e-324, 1e-300, 1e-12, 1e-5, 0.1, 0.99, 1.0]
    epsilons = [exact.gaussian_epsilon(mu, delta) for delta in deltas]
    assert all(eps >= 0 for eps in epsilons)  # NaN fails this too
    assert epsilons == sorted(epsilons, reverse=True)
    if mu == 0:
        assert epsilons == [0.0] * len(deltas)
    elif math.isinf(mu):
        assert epsilons[:-1] == [math.inf] * (len(deltas) - 1)
    elif mu >= 1e154:  # eps ~ mu^2 / 2 is beyond the doubles
        assert epsilons[:-1] == [math.inf] * (len(deltas) - 1)
    else:
        delta0 = math.erf(mu / (2 * math.sqrt(2)))  # Phi(mu/2) - Phi(-mu/2), uncancelled
        assert all(eps == 0 for eps, d in zip(epsilons, deltas, strict=True) if d >= delta0)
        for eps in (0.0, 5e-324, 1e-300, 1.0, 1e10, 1e300, 1.7e308):
            assert -1.8e308 < exact.log_delta_gaussian(eps, mu) <= 0.0
    if 1.0 <= mu <= 1e10:
        assert epsilons[0] > mu * mu / 2  # delta <= Q(eps/mu - mu/2): eps >= mu^2/2 + 37 mu


def _optimal_delta(eps: float, eps0: float, k: int) -> mpmath.mpf:
    """Kairouz, Oh and Viswanath 2015, Theorem 3.5, summed term by term at 60 digits."""
    mpmath.mp.dps = 60
    total = mpmath.mpf(0)
    for level in range(k + 1):
        term = mpmath.binomial(k, level) * (
            mpmath.e ** ((k - level) * eps0) - mpmath.e ** (eps + level * eps0)
        )
        total += max(term, 0)
    return total / (1 + mpmath.e**eps0) ** k


@pytest.mark.parametrize(
    ("eps0", "k", "eps"),
    [(0.2, 100, 3.0), (0.5, 50, 5.0), (1.0, 7, 2.0), (0.1, 400, 1.0), (0.02, 3000, 2.0)],
)
def test_optimal_composition_against_a_high_precision_sum(eps0, k, eps):
    want = float(mpmath.log(_optimal_delta(eps, eps0, k)))
    assert exact.log_delta_pure_composition(eps, eps0, k) == pytest.approx(want, rel=1e-9)


@pytest.mark.parametrize(("eps0", "k"), [(0.2, 100), (1.0, 7), (0.05, 2000)])
def test_optimal_composition_epsilon_holds_its_delta(eps0, k):
    delta = 1e-5
    eps = exact.pure_composition_epsilon(eps0, k, delta)
    assert float(_optimal_delta(eps, eps0, k)) <= delta * (1 + 1e-9)
    assert float(_optimal_delta(eps * (1 - 1e-6), eps0, k)) > delta
    assert eps < k * eps0  # tighter than the basic composition


def test_the_mnist_sample_exact_bound_is_below_the_classic_one():
    """Acceptance: 640 queries, sigma 40, delta 1e-5, plain GNMax."""
    report = run_cli(
        ["analyze", MNIST, "--sigma", 40, "--queries", 640, "--delta", 1e-5, "--json"]
    ).json
    exact_bound = report["data_independent_exact"]
    assert exact_bound["method"] == "gaussian"
    assert exact_bound["mu"] == pytest.approx(math.sqrt(2 * 640) / 40, rel=1e-15)
    assert exact_bound["epsilon"] < report["data_independent"]["epsilon"]
    closed = exact.gaussian_epsilon(math.sqrt(2 * 640) / 40, 1e-5)
    assert exact_bound["epsilon"] == pytest.approx(closed, rel=1e-9)
    assert exact_bound["epsilon"] == pytest.approx(3.84861028, rel=1e-8)


def test_confident_gnmax_counts_every_query_or_the_mask(tmp_path):
    """mu^2 = Q / sigma1^2 + 2 A / sigma^2: A = Q by default, the mask's count realised."""
    table2 = ["--threshold", 200, "--sigma1", 150, "--sigma", 40, "--queries", 640]
    report = run_cli(["analyze", MNIST, *table2, "--delta", 1e-5, "--json"]).json
    bound = report["data_independent_exact"]
    assert bound["answered"] == 640
    assert bound["mu"] == pytest.approx(math.sqrt(640 / 150**2 + 2 * 640 / 40**2), rel=1e-15)
    mask = tmp_path / "mask.npy"
    run_cli(
        [
            "aggregate",
            MNIST,
            *table2,
            "--delta",
            1e-5,
            "--seed",
            1,
            "--output",
            tmp_path / "l.npy",
            "--answered-output",
            mask,
        ]
    )
    realised = run_cli(
        ["analyze", MNIST, *table2, "--delta", 1e-5, "--answered", mask, "--json"]
    ).json
    answered = realised["data_independent_exact"]["answered"]
    assert answered == realised["expected_answered"] < 640
    assert realised["data_independent_exact"]["epsilon"] < bound["epsilon"]
    # Publishable stays the worst case: the mask's count depends on the votes.
    bases = {f["basis"]: f["epsilon"] for f in realised["publishable"]}
    assert bases["data-independent-exact"] == pytest.approx(bound["epsilon"], rel=1e-12)


def test_the_lnmax_exact_figure_of_analyze_holds_its_delta():
    """analyze's LNMax figure (100 queries, gamma 0.1: 0.2-DP each) against the 60-digit sum:
    delta at the reported epsilon is within the target, a hair below it is not."""
    report = run_cli(
        ["analyze", MNIST, "--gamma", 0.1, "--queries", 100, "--delta", 1e-5, "--json"]
    ).json
    bound = report["data_independent_exact"]
    assert bound["method"] == "pure-dp-optimal" and bound["eps0"] == 0.2
    eps = bound["epsilon"]
    assert float(_optimal_delta(eps, 0.2, 100)) <= 1e-5 * (1 + 1e-9)
    assert float(_optimal_delta(eps * (1 - 1e-6), 0.2, 100)) > 1e-5


@pytest.mark.parametrize(("eps0", "k", "eps"), [(0.1, 400, 3.0), (0.02, 3000, 2.0), (0.5, 50, 8.0)])
def test_beyond_its_window_the_optimal_composition_is_hoeffding_s_bound(monkeypatch, eps0, k, eps):
    """Where the binomial's window is too wide to sum, Kairouz, Oh and Viswanath's Theorem
    3.4 bounds delta: held above the high-precision sum, and equal to its closed form."""
    monkeypatch.setattr(exact, "_PURE_WINDOW", 16)
    bound = exact.log_delta_pure_composition(eps, eps0, k)
    assert bound >= float(mpmath.log(_optimal_delta(eps, eps0, k)))
    centre = k * eps0 * math.tanh(eps0 / 2)
    assert bound == pytest.approx(-((eps - centre) ** 2) / (2 * k * eps0**2), rel=1e-12)


def test_a_trillion_pure_steps_compose_in_closed_form_without_a_trillion_terms():
    """Q = 1e12 steps of 2e-6-DP: the window would hold some 4e7 terms (arrays of gigabytes);
    the bound's epsilon is c + eps0 sqrt(2 k log(1/delta)), c = k eps0 tanh(eps0/2)."""
    eps0, k, delta = 2e-6, 10**12, 1e-5
    found = exact.pure_composition_epsilon(eps0, k, delta)
    closed = k * eps0 * math.tanh(eps0 / 2) + eps0 * math.sqrt(2 * k * math.log(1 / delta))
    assert closed <= found <= closed * (1 + 1e-9)


def _bisected(log_delta, delta: float) -> float:
    """epsilon_for as it was: the doubling bracket, then bisection to 1e-12 throughout."""
    target = math.log(delta)
    if log_delta(0.0) <= target:
        return 0.0
    high = 1.0
    while log_delta(high) > target:
        high *= 2.0
        if high > 1e300:
            return math.inf
    low = 0.0 if high == 1.0 else high / 2
    return bisect_boundary(lambda eps: log_delta(eps) <= target, high, low, rtol=1e-12)


def _counted(function):
    calls = []

    def counting(eps: float) -> float:
        calls.append(eps)
        return function(eps)

    return counting, calls


_MUS = [1e-6, 3e-5, 1e-3, 0.02, 0.0707, 0.3, 1.0, 2.2, 5.0, 13.0, 40.0, 1e3]
_DELTAS = [1e-14, 1e-10, 1e-8, 1e-5, 1e-3, 0.1, 0.6]


@pytest.mark.parametrize("delta", _DELTAS)
def test_the_root_finder_gives_the_bisection_s_gaussian_epsilon_bit_for_bit(delta):
    """Every (mu, delta) of the grid: the same double as the bisection it replaces (never
    below it, and equal wherever printed), in about half its evaluations."""
    ours = theirs = 0
    for mu in _MUS:
        curve, calls = _counted(lambda eps, mu=mu: exact.log_delta_gaussian(eps, mu))
        found = exact.epsilon_for(curve, delta)
        ours += len(calls)
        curve, calls = _counted(lambda eps, mu=mu: exact.log_delta_gaussian(eps, mu))
        assert found == _bisected(curve, delta), mu
        theirs += len(calls)
    assert ours < 0.6 * theirs


@pytest.mark.parametrize(
    ("eps0", "k"), [(1e-3, 10_000), (0.05, 300), (0.2, 100), (1.0, 7), (3.0, 2)]
)
def test_the_root_finder_gives_the_bisection_s_pure_epsilon_bit_for_bit(eps0, k):
    for delta in _DELTAS:
        found = exact.epsilon_for(lambda e: exact.log_delta_pure_composition(e, eps0, k), delta)
        want = _bisected(lambda e: exact.log_delta_pure_composition(e, eps0, k), delta)
        assert found == want, delta


def test_a_wrong_root_still_gives_the_bisection_s_answer():
    """replay_boundary checks the two ends it finishes with: from a root far off (or not a
    number) it finds the bisection's answer all the same, by the bisection itself."""
    target = math.log(1e-5)

    def holds(eps: float) -> bool:
        return exact.log_delta_gaussian(eps, 0.5) <= target

    want = bisect_boundary(holds, 8.0, 4.0, rtol=1e-12)
    for root in (4.5, 7.9, want * (1 + 1e-9), want * (1 - 1e-9), math.nan):
        assert replay_boundary(holds, 8.0, 4.0, root, 1e-11 * want, rtol=1e-12) == want


def test_each_exact_epsilon_is_computed_once_per_parameters(monkeypatch):
    """The data-independent exact figures are cached per process: a second call with the
    same numbers (as floats or numpy scalars) evaluates no curve, and gives the same value."""
    exact._gaussian_epsilon.cache_clear()
    exact._pure_composition_epsilon.cache_clear()
    calls = []
    gaussian, pure = exact.log_delta_gaussian, exact.log_delta_pure_composition
    monkeypatch.setattr(exact, "log_delta_gaussian", lambda *a: calls.append(a) or gaussian(*a))
    monkeypatch.setattr(exact, "log_delta_pure_composition", lambda *a: calls.append(a) or pure(*a))
    first = exact.gaussian_epsilon(0.8944271909999159, 1e-5)
    assert calls and first == pytest.approx(3.84861028, rel=1e-8)
    calls.clear()
    assert exact.gaussian_epsilon(np.float64(0.8944271909999159), 1e-5) == first
    assert not calls
    assert exact.gaussian_epsilon(0.8944271909999159, 1e-6) > first and calls  # a new delta
    calls.clear()
    once = exact.pure_composition_epsilon(0.2, 100, 1e-5)
    assert calls
    calls.clear()
    assert exact.pure_composition_epsilon(0.2, np.int64(100), 1e-5) == once
    assert not calls


@pytest.mark.parametrize(
    ("eps0", "k", "delta"),
    [(0.2, 100, 1e-5), (1.0, 7, 1e-3), (0.05, 300, 1e-8), (0.01, 2000, 1e-5), (2.0, 3, 0.2)],
)
def test_the_pure_epsilon_is_never_below_a_50_digit_bisection(eps0, k, delta):
    """The optimal composition's epsilon against an independent oracle: Theorem 3.5's sum at
    50 digits, bisected to 1e-30. Never below it, within 1e-9 of it."""
    with mpmath.workdps(50):
        e0 = mpmath.mpf(eps0)

        def within(eps: mpmath.mpf) -> bool:
            total = mpmath.fsum(
                mpmath.binomial(k, level)
                * max(mpmath.exp((k - level) * e0) - mpmath.exp(eps + level * e0), 0)
                for level in range(k + 1)
            )
            return total / (1 + mpmath.exp(e0)) ** k <= delta

        low, high = mpmath.mpf(0), mpmath.mpf(k * eps0)
        while high - low > high * mpmath.mpf("1e-30"):
            middle = (low + high) / 2
            low, high = (low, middle) if within(middle) else (middle, high)
        ours = exact.pure_composition_epsilon(eps0, k, delta)
        assert mpmath.mpf(ours) >= high
        assert mpmath.mpf(ours) <= high * (1 + mpmath.mpf("1e-9"))

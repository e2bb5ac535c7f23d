"""Oracles for the figures of a release: smooth sensitivity, GNSS cost, exact Gaussian DP.

Each expected value is computed here from the papers' formulas, in mpmath at 50 digits or by
enumerating every histogram of a few teachers; nothing is taken from ``pate_cli``'s own
formulas. The package's numbers are then read through its functions and reports:

- the local sensitivity at every distance d and the beta-smooth sensitivity (Papernot et al.
  2018, Definition 12 / Theorem 24) of Interactive-, Confident- and plain GNMax, and of LNMax
  (2017), never below a brute force over every histogram within distance d and each of its
  neighbours, of a per-query cost computed independently (Theorem 6 with Prop. 7, 8 and 10 of
  2018; Lemma 4 and Theorem 3 of 2017);
- the expected GNSS-released epsilon: the data-dependent RDP at the release's order plus
  Theorem 23's cost, converted classically (Mironov 2017, Prop. 3);
- the exact data-independent epsilon under half-to-even rounding: mu-Gaussian DP (Dong, Roth
  and Su 2022, Corollary 2.13 / 3.3) with the sensitivities found by enumeration (2 for the
  threshold statistic at exact halves);
- every RDP an analysis reports at extreme parameters is >= 0 and never above the
  data-independent one.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable

import mpmath
import numpy as np
import pytest

import pate_cli as pate
from pate_cli.core.horizon import Horizon
from pate_cli.core.ls_lnmax import LnmaxSensitivity, local_sensitivity_lnmax
from pate_cli.core.smooth import (
    beta_grid,
    local_sensitivity_total,
    local_sensitivity_walked,
    smooth_sensitivity,
)
from tests.conftest import MNIST
from tests.oracle import exact

DIGITS = 50
# The package rounds its bounds up; the oracle agrees with its per-query costs to ~1e-15
# relative: a bound may fall below the brute force by this much relative, and by FLOOR.
TOLERANCE = 1e-9
FLOOR = 1e-15
# The package's smooth sensitivities are within 3.1 times the brute force's on these cases.
LOOSENESS = 4.0
DELTA = 1e-5

Mpf = mpmath.mpf


# ----------------------------------------------------------------------------- per-query costs


def theorem6_rdp(q: Mpf, sigma: float, order: float) -> Mpf:
    """The data-dependent RDP of one GNMax answer at ``order`` (Papernot et al. 2018).

    Theorem 6 with Prop. 10's mu2 = sigma sqrt(-log q), mu1 = mu2 + 1 and Prop. 8's
    eps_i = mu_i / sigma^2, where its conditions hold (mu1 > order, mu2 > 1, -log q > eps2 and
    q below the point where the bound stops increasing), never above Prop. 8's
    order / sigma^2; q = 0 is a fixed outcome (RDP 0). mpmath throughout.
    """
    sigma, order, q = Mpf(sigma), Mpf(order), Mpf(q)
    independent = order / sigma**2
    if q == 0:
        return Mpf(0)
    log_q = mpmath.log(q)
    mu2 = sigma * mpmath.sqrt(-log_q)
    mu1 = mu2 + 1
    eps1, eps2 = mu1 / sigma**2, mu2 / sigma**2
    if not (mu1 > order and mu2 > 1 and -log_q > eps2):
        return independent
    turn = (mu2 - 1) * eps2 - mu2 * (mpmath.log(1 + 1 / (mu1 - 1)) + mpmath.log(1 + 1 / (mu2 - 1)))
    if not log_q <= turn:
        return independent
    a = (1 - q) / (1 - (q * mpmath.exp(eps2)) ** ((mu2 - 1) / mu2))
    b = mpmath.exp(eps1) / q ** (1 / (mu1 - 1))
    moment = (1 - q) * a ** (order - 1) + q * b ** (order - 1)
    return min(independent, mpmath.log(moment) / (order - 1))


def gnmax_q(hist, sigma: float) -> Mpf:
    """Prop. 7 (2018): sum over i != i* of Pr[N(0, 2 sigma^2) >= n_i* - n_i], i* the first
    largest count, capped at 1 - 1/C."""
    counts = [int(n) for n in hist]
    top = counts.index(max(counts))
    q = mpmath.fsum(
        mpmath.erfc(Mpf(counts[top] - n) / (2 * Mpf(sigma))) / 2
        for i, n in enumerate(counts)
        if i != top
    )
    return min(q, 1 - Mpf(1) / len(counts))


def threshold_margin(hist, baseline, threshold: float, sigma1: float) -> Mpf:
    """z = (round(max(n - baseline)) - T) / sigma1, rounded half up (Algorithm 2, 2018)."""
    statistic = max(Mpf(int(n)) - Mpf(b) for n, b in zip(hist, baseline, strict=True))
    return (mpmath.floor(statistic + Mpf(1) / 2) - Mpf(threshold)) / Mpf(sigma1)


def expected_cost(
    hist, baseline, threshold: float | None, sigma1: float, sigma: float, order: float
) -> Mpf:
    """The per-query RDP of (Confident/Interactive) GNMax in expectation over the threshold
    noise, as the 2018 paper accounts it: the threshold step (Theorem 6 on the less likely
    of its two outcomes, sigma -> sqrt(2) sigma1) plus Pr[answered] times the answer step
    (Theorem 6 at Prop. 7's q). Without a threshold: the answer step alone."""
    answer = theorem6_rdp(gnmax_q(hist, sigma), sigma, order)
    if threshold is None:
        return answer
    z = threshold_margin(hist, baseline, threshold, sigma1)
    step1 = theorem6_rdp(mpmath.ncdf(-abs(z)), mpmath.sqrt(2) * Mpf(sigma1), order)
    return step1 + mpmath.ncdf(z) * answer


def lnmax_cost(hist, gamma: float, order: float) -> Mpf:
    """LNMax's per-query RDP (Papernot et al. 2017): Lemma 4's
    q = min(1 - 1/C, sum_{j != j*} (2 + gamma g_j) / (4 e^(gamma g_j))), Theorem 3 as RDP at
    order l + 1 where q <= 1 / (e^eps + 1), eps = 2 gamma, capped by min(eps^2 order / 2, eps);
    q = 0 gives 0."""
    gamma, order = Mpf(gamma), Mpf(order)
    counts = [int(n) for n in hist]
    top = max(counts)
    eps = 2 * gamma
    independent = min(eps**2 * order / 2, eps)
    gaps = [gamma * (top - n) for n in counts]
    gaps.remove(Mpf(0))  # the top class's own gap
    q = min(mpmath.fsum((2 + g) / (4 * mpmath.exp(g)) for g in gaps), 1 - Mpf(1) / len(counts))
    if q == 0:
        return Mpf(0)
    if q > 1 / (mpmath.exp(eps) + 1):
        return independent
    moment = order - 1
    value = (1 - q) * ((1 - q) / (1 - mpmath.exp(eps) * q)) ** moment + q * mpmath.exp(eps * moment)
    return min(independent, mpmath.log(value) / moment)


def costs(cost: Callable[[np.ndarray], Mpf], hists: np.ndarray) -> np.ndarray:
    """A per-query cost of every histogram, at 50 digits, as floats. Shapes: (H, C) -> (H,)."""
    with mpmath.workdps(DIGITS):
        return np.array([float(cost(hist)) for hist in hists])


# ----------------------------------------------------------------------------- brute force


def brute_force(values: np.ndarray, num_teachers: int, num_classes: int):
    """For every histogram n0: A_d(n0) = max over n within distance d of n0 of max over the
    neighbours n' of n of |f(n') - f(n)|, for d = 0 .. M-1 (the local sensitivity at
    distance d of Definition 12, 2018), from every histogram's own local sensitivity.
    Shapes: (H,) -> (H, M)."""
    hists = exact.histograms(num_teachers, num_classes)
    local = exact.local_sensitivities(lambda _: values, num_teachers, num_classes)
    return np.array([exact.ls_by_distance(hist, local, num_teachers) for hist in hists])


def smooth(ls: np.ndarray, beta: float) -> float:
    """Definition 12: max_d e^(-beta d) A_d."""
    return float(np.max(ls * np.exp(-beta * np.arange(ls.size))))


def assert_covers(bound: np.ndarray, truth: np.ndarray, where: str, order: float) -> None:
    """bound[d] >= truth[d] at every distance, and the beta-smooth sensitivities likewise for
    beta across Theorem 23's range [0, 1/(2 order)); and the smooth sensitivity no more than
    LOOSENESS times the brute force's (the bounds are not exact: Prop. 13's B_U and B_L, the
    plateau on [q1, q0], Pr[answered] and the answer's cost bounded apart)."""
    shortfall = truth * (1 - TOLERANCE) - FLOOR - bound
    worst = int(np.argmax(shortfall))
    assert shortfall[worst] <= 0, (
        f"{where}: local sensitivity at d={worst} is {bound[worst]!r}, below the brute "
        f"force {truth[worst]!r}"
    )
    for beta in np.linspace(0.0, 0.99 / (2 * order), 6):
        ours, true = smooth_sensitivity(bound, beta), smooth(truth, beta)
        assert ours >= true * (1 - TOLERANCE) - FLOOR, (where, beta, ours, true)
        assert ours <= LOOSENESS * true + FLOOR, (where, beta, ours, true)


def assert_walk_stops_soundly(
    horizon: Horizon, bound: np.ndarray, truth: np.ndarray, order: float, where: str
) -> None:
    """A release's walk (``core.horizon``, betas of the reference's grid at ``order``): the
    full walk's ``bound`` at the distances walked, bit for bit; past them W at least the
    full walk and the brute force, and e^(-beta d) W below the smooth sensitivity at every
    beta of the grid, which is the full walk's and at least the brute force's."""
    walked = horizon.total
    np.testing.assert_array_equal(walked, bound[: walked.size], err_msg=where)
    rest = slice(walked.size, None)
    assert np.all(horizon.bound >= bound[rest] * (1 - 1e-12)), where
    assert np.all(horizon.bound >= truth[rest] * (1 - TOLERANCE) - FLOOR), where
    past = np.arange(walked.size, bound.size)
    for beta in beta_grid(order):
        ours = smooth_sensitivity(walked, beta)
        assert ours == smooth_sensitivity(bound, beta), (where, beta)
        assert ours >= smooth(truth, beta) * (1 - TOLERANCE) - FLOOR, (where, beta)
        assert np.all(np.exp(-beta * past) * horizon.bound < ours), (where, beta)


def published_cost(hist, mechanism, baseline, order: float) -> float:
    """The package's RDP of one query at one order, through ``pate.analyze``."""
    votes = pate.load_votes(np.array([hist]), format="counts")
    report = pate.analyze(
        votes,
        mechanism,
        delta=DELTA,
        orders=[order],
        baseline=None if baseline is None else np.array([baseline], dtype=np.float64),
        release=False,
    )
    return float(report.data_dependent.rdp[0])


# ----------------------------------------------------------------------------- 1. GNMax family

# (M, C, baseline, T, sigma1, sigma, order); baseline None: Confident-GNMax, and T None too:
# plain GNMax. With a baseline, the threshold statistic round(max(n - baseline)) can rise
# while GNMax's q rises too, so Pr[answered] and the answer's cost move together: a
# histogram d teachers away has a top of at most h + d, and its neighbour h + d + 1, whose
# Pr[answered] must weight the answer step's local sensitivity. Weighted by Pr[answered] at
# h + d instead, each case below falls under the brute force (by 0.59, 0.88 and 0.58).
GNMAX_CASES = [
    (10, 2, (1.0, 9.0), 3.0, 2.0, 0.5, 1.5),
    (10, 3, (9.0, 1.0, 0.0), 3.0, 1.0, 0.5, 1.5),
    (10, 3, (1.0, 9.0, 0.0), 1.5, 1.0, 1.0, 3.0),
    (8, 3, None, 4.0, 1.0, 1.0, 2.0),
    (8, 3, None, None, 1.0, 0.7, 3.0),
    # Orders of the default grid below 2.
    (8, 3, None, 4.0, 1.0, 1.0, 1.1),
    (8, 3, None, None, 1.0, 0.7, 1.25),
    (10, 3, (9.0, 1.0, 0.0), 3.0, 1.0, 0.5, 1.75),
]


@pytest.mark.parametrize("walk", [False, True], ids=["tabulated", "walk"])
@pytest.mark.parametrize(
    ("num_teachers", "num_classes", "baseline", "threshold", "sigma1", "sigma", "order"),
    GNMAX_CASES,
)
def test_gnmax_smooth_sensitivity_covers_the_brute_force(
    num_teachers, num_classes, baseline, threshold, sigma1, sigma, order, walk
):
    """Theorem 24 / Definition 12 (Papernot et al. 2018): ``local_sensitivity_total`` of one
    query, entry d, bounds max |f(n'') - f(n')| over every histogram n' within distance d and
    its neighbours n'', and ``smooth_sensitivity`` of it bounds the brute-force beta-smooth
    sensitivity, for f the expected per-query cost (threshold step + Pr[answered] x answer
    step, Theorem 6 / Prop. 7, 8, 10) computed here in mpmath. The oracle's f is first shown
    equal to what ``pate.analyze`` reports for each histogram. Both sound bounds: the default
    tabulated one and the exact walk."""
    hists = exact.histograms(num_teachers, num_classes)
    shift = np.zeros(num_classes) if baseline is None else np.array(baseline)
    values = costs(
        lambda h: expected_cost(h, shift, threshold, sigma1, sigma, order),
        hists,
    )
    if threshold is None:
        mechanism = pate.GNMax(sigma)
    elif baseline is None:
        mechanism = pate.ConfidentGNMax(threshold=threshold, sigma1=sigma1, sigma=sigma)
    else:
        mechanism = pate.InteractiveGNMax(threshold=threshold, sigma1=sigma1, sigma=sigma)
    for hist, value in zip(hists, values, strict=True):
        published = published_cost(hist, mechanism, baseline, order)
        assert published == pytest.approx(value, rel=TOLERANCE, abs=1e-12), hist

    truth = brute_force(values, num_teachers, num_classes)
    stopped = 0
    for hist, true in zip(hists, truth, strict=True):
        votes = hist[None, :].astype(np.float64)
        step1 = {} if threshold is None else {"threshold": threshold, "sigma1": sigma1}
        if baseline is not None:
            step1["step1_votes"] = votes - shift
        bound = local_sensitivity_total(votes, num_teachers, order, sigma, walk=walk, **step1)
        assert bound.shape == (num_teachers,)
        assert_covers(bound, true, f"histogram {hist.tolist()}", order)
        start = Horizon.start(float(beta_grid(order).min()), num_teachers, 1)
        horizon = local_sensitivity_walked(
            votes, num_teachers, order, sigma, start, walk=walk, **step1
        )
        assert_walk_stops_soundly(horizon, bound, true, order, f"histogram {hist.tolist()}")
        stopped += horizon.walked < num_teachers
    # The default bound's walk stops early on some histograms of every case.
    assert walk or stopped > 0


# ----------------------------------------------------------------------------- 4. LNMax

# (M, C, gamma, order): the tightest cases found by scanning (A_0 within 3e-5, 4e-5 and 6e-4
# relative of the bound, at (6, 8), (13, 15) and (0, 0, 6, 8)), and two ordinary ones. The
# bound's reach of one cell past the cell of q_hi (q_lo) in ``ls_lnmax._row_bounds`` is a
# margin no histogram needs: each cell is bounded at its far ends and the envelope is monotone
# towards its peak, and the brute force's extreme q over a ball never left the cell of q_hi or
# q_lo in 162,692 (histogram, d) checks; so the brute force cannot see it removed.
LNMAX_CASES = [
    (14, 2, 4.519720209142112, 1.5174060300426222),
    (28, 2, 4.519720209142112, 1.7705940388624184),
    (14, 4, 3.156090972209859, 1.7025990418650543),
    (9, 3, 0.3, 5.0),
    (12, 2, 1.0, 10.0),
]


@pytest.mark.parametrize(("num_teachers", "num_classes", "gamma", "order"), LNMAX_CASES)
def test_lnmax_smooth_sensitivity_covers_the_brute_force(num_teachers, num_classes, gamma, order):
    """Definition 12 / Theorem 24 (2018) for LNMax (2017): ``local_sensitivity_lnmax``'s entry
    d of every histogram bounds max |f(n'') - f(n')| over the histograms n' within distance d
    and their neighbours n'', and its smooth sensitivity the brute force's, for f Lemma 4's q
    in Theorem 3 as RDP capped by min(eps^2 order / 2, eps), eps = 2 gamma, in mpmath. The
    oracle's f is first shown equal to ``pate.analyze``'s per-query RDP."""
    hists = exact.histograms(num_teachers, num_classes)
    values = costs(lambda h: lnmax_cost(h, gamma, order), hists)
    mechanism = pate.LNMax(gamma)
    for hist, value in list(zip(hists, values, strict=True))[:: max(1, len(hists) // 40)]:
        published = published_cost(hist, mechanism, None, order)
        assert published == pytest.approx(value, rel=TOLERANCE, abs=1e-12), hist
    truth = brute_force(values, num_teachers, num_classes)
    bounds = local_sensitivity_lnmax(hists, num_teachers, gamma, order)
    assert bounds.shape == truth.shape
    tables = LnmaxSensitivity(num_classes, num_teachers, gamma, order)
    stopped = 0
    for hist, bound, true in zip(hists, bounds, truth, strict=True):
        assert_covers(bound, true, f"histogram {hist.tolist()}", order)
        start = Horizon.start(float(beta_grid(order).min()), num_teachers, 1)
        horizon = tables.walked(hist[None, :], None, start)
        assert_walk_stops_soundly(horizon, bound, true, order, f"histogram {hist.tolist()}")
        stopped += horizon.walked < num_teachers
    assert stopped > 0


# ----------------------------------------------------------------------------- 2. GNSS release


def theorem23(beta: float, sigma_ss: float, order: float) -> Mpf:
    """RDP of the GNSS release at ``order`` (Theorem 23, Papernot et al. 2018):
    order e^(2 beta) / sigma_ss^2 + (beta order - log(1 - 2 order beta) / 2) / (order - 1)."""
    beta, sigma_ss, order = Mpf(beta), Mpf(sigma_ss), Mpf(order)
    return order * mpmath.exp(2 * beta) / sigma_ss**2 + (
        beta * order - mpmath.log(1 - 2 * order * beta) / 2
    ) / (order - 1)


def classic_epsilon(rdp: Mpf, order: float, delta: float) -> Mpf:
    """eps = rdp + log(1/delta) / (order - 1) (Mironov 2017, Prop. 3)."""
    return rdp + mpmath.log(1 / Mpf(delta)) / (Mpf(order) - 1)


def run_rdp(votes: np.ndarray, mechanism, order: float, threshold_independent: bool) -> Mpf:
    """The run's data-dependent RDP at ``order``, composed over the queries (Theorem 4, 2018):
    the answer step (Theorem 6 at Prop. 7's q) weighted by Pr[answered], plus the threshold
    step on every query, at Prop. 8's order / (2 sigma1^2) when the release accounts it
    data-independently."""
    rows, counts = np.unique(votes.astype(np.int64), axis=0, return_counts=True)
    threshold = getattr(mechanism, "threshold", None)
    sigma1 = getattr(mechanism, "sigma1", 1.0)
    zero = np.zeros(votes.shape[1])
    total = Mpf(0)
    for row, count in zip(rows, counts, strict=True):
        answer = theorem6_rdp(gnmax_q(row, mechanism.sigma), mechanism.sigma, order)
        if threshold is None:
            total += count * answer
            continue
        z = threshold_margin(row, zero, threshold, sigma1)
        if threshold_independent:
            step1 = Mpf(order) / (2 * Mpf(sigma1) ** 2)
        else:
            step1 = theorem6_rdp(mpmath.ncdf(-abs(z)), mpmath.sqrt(2) * Mpf(sigma1), order)
        total += count * (step1 + mpmath.ncdf(z) * answer)
    return total


# (mechanism, beta, sigma_ss): chosen on the votes, or fixed by the caller.
RELEASES = [
    (pate.GNMax(40), None, None),
    (pate.ConfidentGNMax(threshold=200, sigma1=150, sigma=40), None, None),
    (pate.ConfidentGNMax(threshold=200, sigma1=150, sigma=40), 0.03, 6.0),
]


@pytest.mark.parametrize(("mechanism", "beta", "sigma_ss"), RELEASES)
def test_expected_release_pays_the_gnss_cost(mnist_counts, mechanism, beta, sigma_ss):
    """The expected GNSS-released epsilon is the data-dependent RDP at the release's order plus
    Theorem 23's cost at the report's beta and sigma_ss, converted classically: on the 2018
    paper's first 640 MNIST queries (the README's 2.5765 for Confident-GNMax), with the
    data-dependent RDP composed here in mpmath (Theorem 6, Prop. 7) from the votes."""
    votes = mnist_counts[:640]
    report = pate.smooth_sensitivity(
        pate.load_votes(MNIST, queries=640),
        mechanism,
        delta=DELTA,
        beta=beta,
        sigma_ss=sigma_ss,
        seed=0,
    )
    release = report.release
    assert release.released
    order = release.order
    if beta is not None:
        assert (release.beta, release.sigma_ss) == (beta, sigma_ss)
    assert 0 < release.beta < 1 / (2 * order)
    with mpmath.workdps(DIGITS):
        rdp = run_rdp(votes, mechanism, order, release.data_independent_steps[0])
        cost = theorem23(release.beta, release.sigma_ss, order)
        expected = classic_epsilon(rdp + cost, order, DELTA)
        dependent = classic_epsilon(rdp, order, DELTA)
    assert release.rdp_at_order == pytest.approx(float(rdp), rel=1e-9)
    assert release.gnss_cost == pytest.approx(float(cost), rel=1e-9)
    assert release.epsilon_data_dependent == pytest.approx(float(dependent), rel=1e-9)
    assert release.epsilon_expected_release == pytest.approx(float(expected), rel=1e-9)
    assert release.noise_std == pytest.approx(release.smooth_sensitivity * release.sigma_ss)


# ----------------------------------------------------------------------------- 3. exact GDP


def gaussian_epsilon(mu: Mpf, delta: float) -> Mpf:
    """The smallest eps with delta(eps) = Phi(-eps/mu + mu/2) - e^eps Phi(-eps/mu - mu/2) <= delta
    (mu-GDP, Dong, Roth and Su 2022, Corollary 2.13), by bisection in mpmath."""

    def excess(eps: Mpf) -> Mpf:
        return (
            mpmath.ncdf(-eps / mu + mu / 2) - mpmath.exp(eps) * mpmath.ncdf(-eps / mu - mu / 2)
        ) - delta

    low, high = Mpf(0), Mpf(1)
    while excess(high) > 0:
        low, high = high, 2 * high
    for _ in range(200):
        middle = (low + high) / 2
        if excess(middle) > 0:
            low = middle
        else:
            high = middle
    return high


def largest_moves(num_teachers: int, baseline: np.ndarray, half_even: bool) -> tuple[int, float]:
    """(the largest move of the rounded threshold statistic round(max(n - baseline)), the
    largest L2 move of the histogram) between neighbouring histograms, by enumeration."""
    rounding = np.rint if half_even else (lambda x: np.floor(x + 0.5))
    statistic, histogram = 0, 0.0
    for hist in exact.histograms(num_teachers, baseline.size):
        rows = np.vstack([hist, exact.neighbours(hist)])
        top = rounding(np.max(rows - baseline, axis=1))
        statistic = max(statistic, int(np.max(np.abs(top[1:] - top[0]))))
        histogram = max(histogram, float(np.max(np.linalg.norm(rows[1:] - rows[0], axis=1))))
    return statistic, histogram


# Votes of 7 teachers over 2 classes with the baseline (3.5, 3.5): votes - baseline is an
# exact half on every query, so half to even moves the rounded statistic by 2 (2.5 -> 2,
# 3.5 -> 4) while half up moves it by 1.
HALF_VOTES = np.array([[6, 1], [5, 2], [4, 3], [7, 0], [2, 5], [6, 1]], dtype=np.float64)
HALF_BASELINE = np.full(HALF_VOTES.shape, 3.5)


@pytest.mark.parametrize("half_even", [True, False])
@pytest.mark.parametrize(("sigma1", "sigma"), [(15.0, 20.0), (4.0, 30.0), (40.0, 5.0)])
def test_exact_gaussian_dp_accounts_the_threshold_statistics_move(half_even, sigma1, sigma):
    """The publishable ``data-independent-exact`` figure of Interactive-GNMax is the epsilon of
    mu-Gaussian DP with mu^2 = sum over queries of (s / sigma1)^2 + (sqrt(2) / sigma)^2
    (Dong, Roth and Su 2022, Corollary 3.3, every query answered), s the largest move of the
    rounded threshold statistic between neighbours and sqrt(2) the histogram's L2 move, both
    found by enumerating every histogram of 7 teachers (s = 2 under half to even at exact
    halves, 1 under half up); epsilon from Corollary 2.13 by bisection in mpmath."""
    moves, step = largest_moves(7, HALF_BASELINE[0], half_even)
    assert (moves, step) == (2 if half_even else 1, pytest.approx(math.sqrt(2)))
    queries = HALF_VOTES.shape[0]
    with mpmath.workdps(DIGITS):
        mu = mpmath.sqrt(queries * ((moves / Mpf(sigma1)) ** 2 + (Mpf(step) / Mpf(sigma)) ** 2))
        truth = float(gaussian_epsilon(mu, DELTA))
    report = pate.analyze(
        pate.load_votes(HALF_VOTES, format="counts"),
        pate.InteractiveGNMax(threshold=5.0, sigma1=sigma1, sigma=sigma),
        delta=DELTA,
        baseline=HALF_BASELINE,
        half_even=half_even,
        release=False,
    )
    exact_figures = [f for f in report.publishable if f.basis == "data-independent-exact"]
    assert len(exact_figures) == 1
    for epsilon in (
        exact_figures[0].epsilon,
        report.exact_worst_case.epsilon,
        report.exact.epsilon,
    ):
        assert epsilon >= truth * (1 - 1e-12)
        assert epsilon == pytest.approx(truth, rel=1e-6)
    assert report.exact_worst_case.mu == pytest.approx(float(mu), rel=1e-12)


# ----------------------------------------------------------------------------- 5. guards

GUARD_ORDERS = [1.01, 1.5, 2.0, 3.0, 10.0, 100.0, 1000.0, 1e6]
GUARD_VOTES = {
    "tie": np.array([[5, 5, 0]]),
    "clear": np.array([[9, 1, 0], [10, 0, 0]]),
    "tiny q": np.array([[10**9, 0], [10**9 - 1, 1]]),
    "mixed": np.array([[250, 0, 0], [125, 125, 0], [200, 30, 20], [100, 90, 60]]),
}


def guard_mechanisms():
    """Noise far past the votes' scale (sigma 1e17, 1e150), far below it (1e-3), gamma tiny and
    huge, thresholds certain either way: where rounding decides the sign of a small cost."""
    out = [pate.GNMax(s) for s in (1e-3, 0.1, 1.0, 1e3, 1e8, 1e17, 1e150, 1e200)]
    for sigma1, sigma, threshold in itertools.product(
        (1e-3, 1.0, 1e17), (1e-3, 1.0, 1e17), (0, 5, 1e9)
    ):
        for bound in ("theorem6", "exact"):
            out.append(
                pate.ConfidentGNMax(
                    threshold=threshold, sigma1=sigma1, sigma=sigma, threshold_bound=bound
                )
            )
    out += [pate.LNMax(g) for g in (1e-300, 1e-17, 1e-9, 1e-3, 1.0, 1e3, 1e17, 1e300)]
    return out


@pytest.mark.parametrize("name", list(GUARD_VOTES))
def test_every_reported_rdp_is_non_negative_at_extreme_parameters(name):
    """RDP is a Renyi divergence, >= 0 (and Theorem 6's sum is >= 1 in exact arithmetic, so its
    log is >= 0): no rounding may publish a negative cost, and the data-dependent total is
    never above the data-independent one (Prop. 8 caps Theorem 6). Every RDP curve of the
    report and each step's total, at orders 1.01 .. 1e6, for every mechanism."""
    votes = pate.load_votes(GUARD_VOTES[name], format="counts")
    for mechanism in guard_mechanisms():
        try:
            report = pate.analyze(votes, mechanism, delta=DELTA, orders=GUARD_ORDERS, release=False)
        except ValueError as error:  # the conversion refuses a negative or NaN RDP
            pytest.fail(f"{mechanism} on {name}: {error}")
        curves = {
            "data_dependent": report.data_dependent.rdp,
            "data_independent": report.data_independent.rdp,
            "worst_case": report.worst_case.rdp,
        }
        if report.guaranteed is not None:
            curves["guaranteed"] = report.guaranteed.rdp
        steps = report.account.steps
        for part in ("threshold", "answer", "threshold_independent", "answer_independent"):
            curves[part] = getattr(steps, part)
        for curve, rdp in curves.items():
            rdp = np.asarray(rdp, dtype=np.float64)
            assert np.all(rdp >= 0), (mechanism, curve, rdp)
        dependent, independent = curves["data_dependent"], curves["data_independent"]
        assert np.all(dependent <= independent), (mechanism, dependent, independent)
        assert report.data_dependent.epsilon >= 0

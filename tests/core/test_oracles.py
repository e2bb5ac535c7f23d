"""Independent checks of the bounds: Monte Carlo for q, mpmath re-derivations for the RDP.

The reference vectors of ``test_gnmax.py`` and friends check that pate agrees with the 2018
code; these tests check that the code agrees with the *papers*, by two routes that share
nothing with it:

- Monte Carlo: on seeded random histograms, the q bounds (Prop. 7 of 2018 for GNMax, Lemma 4
  of 2017 for LNMax) are never below the simulated Pr[noisy argmax != argmax], up to four
  standard errors; a bound computed with too little noise is caught, so the check has teeth.
- mpmath at 50 digits: Theorem 6 with Prop. 10's mu1, mu2 (written from the paper, with the
  conditions under which it applies), the threshold step, Theorem 3 of 2017, Prop. 7 and
  Lemma 4 themselves, and both RDP -> (epsilon, delta) conversions, each compared with the
  float64 code to rtol 1e-9 (1e-12 for the closed forms), including next to q0, where the
  data-dependent bound meets the data-independent lambda / sigma^2.
"""

from __future__ import annotations

import math

import mpmath
import numpy as np
import pytest
from mpmath import mpf

from pate_cli.core.conversion import eps_curve_classic, eps_curve_improved
from pate_cli.core.gnmax import logq_gnmax, rdp_gnmax
from pate_cli.core.lnmax import logq_lnmax, rdp_lnmax
from pate_cli.core.threshold import log_pr_answered_threshold, logq_threshold, rdp_threshold

DPS = 50


def digits_for(logq: float) -> int:
    """Working digits for q = e^logq: 50, or enough that 1 + q keeps q to 20 digits.

    The bounds are log(1 + O(q)) for small q; at 50 digits 1 + 1e-200 is 1 and the oracle
    would print 0 where float64 (rightly) has 1e-200. Below 1e-330 float64 has 0 too.
    """
    return int(min(400, max(DPS, 20 - logq / math.log(10))))


# ----------------------------------------------------------------------------- Monte Carlo

DRAWS = 20_000  # per histogram; 4 standard errors of a rate p are 4 sqrt(p (1-p) / DRAWS)
MC_CASES = [  # (classes C, teachers M, noise scale, Dirichlet concentration, seed)
    (2, 10, 2.0, 1.0, 0),
    (3, 50, 5.0, 0.5, 1),
    (10, 250, 20.0, 0.3, 2),
    (10, 250, 40.0, 1.0, 3),
    (50, 1000, 30.0, 0.1, 4),
]


def _histograms(num_classes: int, num_teachers: int, alpha: float, seed: int) -> np.ndarray:
    """Eight seeded vote histograms (8, C), two of them with a tie for the top class."""
    rng = np.random.default_rng(seed)
    counts = rng.multinomial(num_teachers, rng.dirichlet(np.full(num_classes, alpha), 8))
    counts = counts.astype(np.float64)
    counts[0, :2] = counts[0, :2].sum() / 2  # a tie (fractional when the sum is odd)
    counts[1, 1] = counts[1].max()
    return counts


def _flip_rate(counts: np.ndarray, noise: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Empirical Pr[argmax(counts + noise) != argmax(counts)] per row, and its standard error.

    ``noise`` has shape (rows * DRAWS, C): DRAWS samples per row, rows repeated in order.
    """
    rows = counts.shape[0]
    noisy = np.repeat(counts, DRAWS, axis=0) + noise
    flips = noisy.argmax(axis=1) != np.repeat(counts.argmax(axis=1), DRAWS)
    rate = flips.reshape(rows, DRAWS).mean(axis=1)
    return rate, np.sqrt(rate * (1 - rate) / DRAWS)


@pytest.mark.parametrize("num_classes, num_teachers, sigma, alpha, seed", MC_CASES)
def test_gnmax_q_bound_covers_simulated_flip_rate(num_classes, num_teachers, sigma, alpha, seed):
    counts = _histograms(num_classes, num_teachers, alpha, seed)
    rng = np.random.default_rng(100 + seed)
    rate, se = _flip_rate(
        counts, sigma * rng.standard_normal((counts.shape[0] * DRAWS, num_classes))
    )
    bound = np.exp(logq_gnmax(counts, sigma))
    assert np.all(bound >= rate - 4 * se), (bound, rate)
    assert rate.max() > 0.05  # the cases exercise the bound, not only q ~ 0


@pytest.mark.parametrize("num_classes, num_teachers, scale, alpha, seed", MC_CASES)
def test_lnmax_q_bound_covers_simulated_flip_rate(num_classes, num_teachers, scale, alpha, seed):
    gamma = 1 / scale  # Laplace noise of scale 1/gamma
    counts = _histograms(num_classes, num_teachers, alpha, seed)
    rng = np.random.default_rng(200 + seed)
    shape = (counts.shape[0] * DRAWS, num_classes)
    rate, se = _flip_rate(counts, rng.laplace(0.0, 1 / gamma, shape))
    bound = np.exp(logq_lnmax(counts, gamma))
    assert np.all(bound >= rate - 4 * se), (bound, rate)
    assert rate.max() > 0.05


def test_monte_carlo_catches_a_bound_that_is_too_small():
    """The check has teeth: the bound for half the actual noise undercuts the simulation."""
    num_classes, num_teachers, sigma, alpha, seed = MC_CASES[3]
    counts = _histograms(num_classes, num_teachers, alpha, seed)
    rng = np.random.default_rng(100 + seed)
    rate, se = _flip_rate(
        counts, sigma * rng.standard_normal((counts.shape[0] * DRAWS, num_classes))
    )
    assert np.any(np.exp(logq_gnmax(counts, sigma / 2)) < rate - 4 * se)
    laplace = rng.laplace(0.0, sigma, (counts.shape[0] * DRAWS, num_classes))
    rate, se = _flip_rate(counts, laplace)
    assert np.any(np.exp(logq_lnmax(counts, 2 / sigma)) < rate - 4 * se)


# ---------------------------------------------------------------------- mpmath: Theorem 6


def theorem6_mp(q: mpf, sigma: mpf, order: mpf) -> mpf:
    """RDP of GNMax at ``order`` given q >= Pr[outcome != i*], from the 2018 paper.

    Theorem 6 with Prop. 10's mu2 = sigma sqrt(log(1/q)), mu1 = mu2 + 1 and
    eps_i = mu_i / sigma^2 (Prop. 8), used when it applies -- mu2 > 1 (so mu2/(mu2-1) > 0),
    lambda < mu1 (the paper's lambda <= mu1; the code uses strict), q e^eps2 < 1 (A > 0) and
    q <= e^((mu2-1) eps2) / (mu1/(mu1-1) mu2/(mu2-1))^mu2 -- and never above lambda/sigma^2.
    """
    independent = order / sigma**2
    if q == 0:
        return mpf(0)
    mu2 = sigma * mpmath.sqrt(-mpmath.log(q))
    mu1 = mu2 + 1
    eps1, eps2 = mu1 / sigma**2, mu2 / sigma**2
    if not (mu2 > 1 and order < mu1 and q * mpmath.exp(eps2) < 1):
        return independent
    limit = mpmath.exp((mu2 - 1) * eps2) / (mu1 / (mu1 - 1) * mu2 / (mu2 - 1)) ** mu2
    if not q <= limit:
        return independent
    a = (1 - q) / (1 - (q * mpmath.exp(eps2)) ** ((mu2 - 1) / mu2))
    b = mpmath.exp(eps1) / q ** (1 / (mu1 - 1))
    bound = mpmath.log((1 - q) * a ** (order - 1) + q * b ** (order - 1)) / (order - 1)
    return min(bound, independent)


def crossover_logq(sigma: float, order: float) -> mpf:
    """log q0: where Theorem 6's bound reaches lambda / sigma^2 (bisection on log q)."""
    sigma_mp, order_mp = mpf(sigma), mpf(order)
    independent = order_mp / sigma_mp**2
    low, high = mpf(-1e6), mpf(-1e-9)
    assert theorem6_mp(mpmath.exp(low), sigma_mp, order_mp) < independent
    for _ in range(200):
        middle = (low + high) / 2
        if theorem6_mp(mpmath.exp(middle), sigma_mp, order_mp) < independent:
            low = middle
        else:
            high = middle
    return low


SIGMAS_ORDERS = [(1.0, 1.5), (10.0, 2.0), (40.0, 20.0), (40.0, 100.0), (150.0, 300.0)]


@pytest.mark.parametrize("sigma, order", SIGMAS_ORDERS)
def test_rdp_gnmax_matches_theorem6_in_mpmath(sigma, order):
    with mpmath.workdps(DPS):
        logq0 = crossover_logq(sigma, order)
        points = [float(logq0 * f) for f in (200, 20, 3, 1.5, 1.01, 1.000001, 0.999999, 0.9)]
        points += [-1e4, -50.0, -1.0, math.log(0.5)]
    logq = np.array(points)
    actual = rdp_gnmax(logq, sigma, np.array([order]))[:, 0]
    expected = []
    for x in points:
        with mpmath.workdps(digits_for(x)):
            expected.append(float(theorem6_mp(mpmath.exp(mpf(x)), mpf(sigma), mpf(order))))
    np.testing.assert_allclose(actual, expected, rtol=1e-9, atol=0)
    # The points straddle q0: data-dependent below it, lambda / sigma^2 above it.
    independent = order / sigma**2
    assert actual[0] < 0.5 * independent and actual[-1] == independent


def test_theorem6_oracle_is_not_the_trivial_bound():
    """Below q0 the oracle and the code give much less than lambda/sigma^2 (the test's point)."""
    with mpmath.workdps(DPS):
        value = theorem6_mp(mpf("1e-20"), mpf(40), mpf(20))
    assert float(value) < 1e-3 * 20 / 40**2
    assert rdp_gnmax(np.array([math.log(1e-20)]), 40.0, np.array([20.0]))[0, 0] == pytest.approx(
        float(value), rel=1e-9
    )


@pytest.mark.parametrize(
    "counts, sigma",
    [
        ([250, 0, 0], 40.0),
        ([100, 90, 60], 40.0),
        ([5, 5, 0, 0], 1.0),
        ([1000, 10, 10, 10, 10], 3.0),  # q ~ exp(-27000): far below float's range of q
        ([3, 2, 1], 1e-3),
        ([30, 31, 29], 100.0),  # near the cap 1 - 1/C
    ],
)
def test_logq_gnmax_matches_prop7_in_mpmath(counts, sigma):
    with mpmath.workdps(DPS):
        n = [mpf(c) for c in counts]
        top = max(range(len(n)), key=lambda i: (n[i], -i))
        union = mpmath.fsum(
            mpmath.erfc((n[top] - n[i]) / (2 * mpf(sigma))) / 2 for i in range(len(n)) if i != top
        )
        expected = float(mpmath.log(min(union, 1 - mpf(1) / len(n))))
    actual = logq_gnmax(np.array([counts], dtype=float), sigma)[0]
    assert actual == pytest.approx(expected, rel=1e-12)


# ------------------------------------------------------------ mpmath: the threshold step


@pytest.mark.parametrize(
    "top, threshold, sigma1",
    [(250, 200, 150), (180, 300, 200), (250, 200, 5), (40, 300, 50), (120, 120, 10), (0, 1e4, 30)],
)
def test_threshold_step_matches_mpmath(top, threshold, sigma1):
    orders = np.array([1.5, 2.0, 8.0, 50.0, 300.0])
    counts = np.array([[top, min(top, 3.0), 0.0]])
    with mpmath.workdps(DPS):
        p = mpmath.ncdf((mpf(top) - threshold) / sigma1)
        log_q = float(mpmath.log(min(p, 1 - p)))
        expected_log_p = float(mpmath.log(p))
    with mpmath.workdps(digits_for(log_q)):
        p = mpmath.ncdf((mpf(top) - threshold) / sigma1)
        q = min(p, 1 - p)
        expected = [float(theorem6_mp(q, mpmath.sqrt(2) * sigma1, mpf(o))) for o in orders]
    log_p = log_pr_answered_threshold(counts, threshold, sigma1)
    assert log_p[0] == pytest.approx(expected_log_p, rel=1e-12)
    logq = logq_threshold(counts, threshold, sigma1)
    assert logq[0] == pytest.approx(log_q, rel=1e-12)
    np.testing.assert_allclose(rdp_threshold(logq, sigma1, orders)[0], expected, rtol=1e-9)


# -------------------------------------------------------------- mpmath: LNMax, 2017


def theorem3_mp(q: mpf, gamma: mpf, order: mpf) -> mpf:
    """RDP of a (2 gamma)-DP answer given q, Theorem 3 of 2017 as RDP at order l + 1.

    For q < (e^(2 gamma) - 1) / (e^(4 gamma) - 1) the log-moment at l = order - 1 is at most
    log((1-q) ((1-q)/(1-e^(2 gamma) q))^l + q e^(2 gamma l)); RDP = log-moment / l. Never above
    the data-independent min(eps^2 lambda / 2, eps) of an eps-DP answer (Theorem 2, eps-DP).
    """
    eps = 2 * gamma
    independent = min(eps**2 * order / 2, eps)
    moment = order - 1
    if not q < (mpmath.exp(eps) - 1) / (mpmath.exp(2 * eps) - 1):
        return independent
    log_mgf = mpmath.log(
        (1 - q) * ((1 - q) / (1 - mpmath.exp(eps) * q)) ** moment + q * mpmath.exp(eps * moment)
    )
    return min(log_mgf / moment, independent)


@pytest.mark.parametrize("gamma", [0.05, 0.1, 1.0, 3.0])
def test_rdp_lnmax_matches_theorem3_in_mpmath(gamma):
    orders = np.array([1.5, 2.0, 5.0, 21.0, 100.0])
    with mpmath.workdps(DPS):
        boundary = float(mpmath.log(1 / (mpmath.exp(2 * mpf(gamma)) + 1)))
    logq = np.array([boundary * f for f in (1e3, 10, 2, 1.01)] + [boundary * 0.99, -1e-3])
    expected = []
    for x in logq:
        with mpmath.workdps(digits_for(x)):
            q = mpmath.exp(mpf(x))
            expected.append([float(theorem3_mp(q, mpf(gamma), mpf(o))) for o in orders])
    actual = rdp_lnmax(logq, gamma, orders)
    np.testing.assert_allclose(actual, expected, rtol=1e-9, atol=0)
    assert np.all(actual[0] < actual[-1])  # some points are data-dependent, some not


@pytest.mark.parametrize(
    "counts, gamma",
    [([250, 0, 0], 0.05), ([100, 90, 60], 0.1), ([5, 5, 0, 0], 1.0), ([30, 31, 29], 0.01)],
)
def test_logq_lnmax_matches_lemma4_in_mpmath(counts, gamma):
    with mpmath.workdps(DPS):
        n, g = [mpf(c) for c in counts], mpf(gamma)
        top = max(range(len(n)), key=lambda i: (n[i], -i))
        union = mpmath.fsum(
            (2 + g * (n[top] - n[j])) / (4 * mpmath.exp(g * (n[top] - n[j])))
            for j in range(len(n))
            if j != top
        )
        expected = float(mpmath.log(min(union, 1 - mpf(1) / len(n))))
    actual = logq_lnmax(np.array([counts], dtype=float), gamma)[0]
    assert actual == pytest.approx(expected, rel=1e-12)


# ------------------------------------------------------------------ mpmath: conversions

CONVERSION_ORDERS = np.array([1.005, 1.02, 1.5, 2.0, 10.0, 32.5, 500.0, 1e6])
CONVERSION_RDPS = np.array([0.0, 1e-14, 1e-3, 0.05, 1.0, 30.0, 1e4, 7e5])


@pytest.mark.parametrize("delta", [1e-300, 1e-5, 0.1, 0.5, 1 - 1e-12])
def test_conversions_match_mpmath(delta):
    with mpmath.workdps(DPS):
        d = mpf(delta)
        classic, improved = [], []
        for a, r in zip(CONVERSION_ORDERS, CONVERSION_RDPS, strict=True):
            a, r = mpf(a), mpf(r)
            classic.append(float(r + mpmath.log(1 / d) / (a - 1)))
            # The KL bound already gives delta. As dp_accounting, pate tests this in float64,
            # where delta^2 underflows below 1.5e-154: at rdp = 0 it then misses the shortcut
            # and falls through to the formula below, which is larger, so still a valid bound.
            underflow = delta**2 == 0.0 and r == 0
            if d**2 + mpmath.expm1(-r) > 0 and not underflow:
                improved.append(0.0)
            elif a <= mpf("1.01"):  # dp_accounting does not use orders this close to 1
                improved.append(math.inf)
            else:
                improved.append(float(r + mpmath.log(1 - 1 / a) - mpmath.log(d * a) / (a - 1)))
    np.testing.assert_allclose(
        eps_curve_classic(CONVERSION_ORDERS, CONVERSION_RDPS, delta), classic, rtol=1e-12
    )
    np.testing.assert_allclose(
        eps_curve_improved(CONVERSION_ORDERS, CONVERSION_RDPS, delta), improved, rtol=1e-9
    )

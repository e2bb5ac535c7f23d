"""The oracle checks itself, so that it cannot be silently wrong.

Closed forms (two classes, uniform votes), symmetry, normalisation of the raw integrals,
agreement with two other integration methods (adaptive Gauss-Kronrod in scipy, and mpmath
at 30 digits), the divergence against mpmath at 350 digits, and the enumeration of
histograms. The last tests show that the oracle catches bounds that are slightly too small.
The exact Gaussian DP epsilon of pate (``pate_cli.core.exact``) is checked against a 60-digit
bisection of its curve, never below it.
"""

from __future__ import annotations

import itertools
import math

import mpmath as mp
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy import integrate, optimize
from scipy.special import log_ndtr, logsumexp

from tests.oracle import exact
from tests.oracle.strategies import EXAMPLES, SELF_CHECK_EXAMPLES, histograms, log_uniform

# log p from the trapezoid rule against other methods: relative to max(1, |log p|), so
# e^-500 is compared to ~13 significant digits of its logarithm.
LOG_TOL = 1e-12


def close_logs(ours: np.ndarray, theirs: np.ndarray, tol: float = LOG_TOL) -> bool:
    ours, theirs = np.asarray(ours, dtype=np.float64), np.asarray(theirs, dtype=np.float64)
    return bool(np.all(np.abs(ours - theirs) <= tol * np.maximum(1.0, np.abs(theirs))))


# ----------------------------------------------------------------------------- second methods


def gnmax_log_probs_adaptive(hist: np.ndarray, sigma: float) -> np.ndarray:
    """log p_j by scipy.integrate.quad around a mode found by Brent's method.

    Shares only the integrand with ``exact``: a different rule (adaptive Gauss-Kronrod on
    the real line) and a different mode finder.
    """
    hist = np.asarray(hist, dtype=np.float64)
    out = []
    for j in range(hist.size):
        d = np.delete((hist[j] - hist) / sigma, j)

        def log_integrand(t: float, d: np.ndarray = d) -> float:
            return -0.5 * t * t - 0.5 * math.log(2 * math.pi) + float(np.sum(log_ndtr(t + d)))

        peak = optimize.minimize_scalar(
            lambda t, g=log_integrand: -g(t), bracket=(0.0, 1.0), method="brent", tol=1e-10
        ).x
        top = log_integrand(peak)
        total = 0.0
        for a, b in [(-np.inf, peak - 4), (peak - 4, peak), (peak, peak + 4), (peak + 4, np.inf)]:
            value, _ = integrate.quad(
                lambda t, g=log_integrand, top=top: math.exp(g(t) - top),
                a,
                b,
                epsabs=0,
                epsrel=1e-13,
                limit=200,
            )
            total += value
        out.append(top + math.log(total))
    return np.array(out)


def lnmax_log_probs_adaptive(hist: np.ndarray, gamma: float) -> np.ndarray:
    """log p_j of LNMax by scipy.integrate.quad between consecutive counts, in x."""
    hist = np.asarray(hist, dtype=np.float64)
    scale = 1 / gamma

    def log_cdf(t: float) -> float:
        return t / scale - math.log(2) if t < 0 else math.log1p(-0.5 * math.exp(-t / scale))

    edges = [-np.inf, *sorted(set(hist.tolist())), np.inf]
    out = []
    for j in range(hist.size):

        def log_integrand(x: float, j: int = j) -> float:
            own = -abs(x - hist[j]) / scale - math.log(2 * scale)
            return own + sum(log_cdf(x - hist[i]) for i in range(hist.size) if i != j)

        low, high = hist.min() - 20 * scale, hist.max() + 20 * scale
        peak = optimize.minimize_scalar(
            lambda x, g=log_integrand: -g(x),
            bounds=(low, high),
            method="bounded",
            options={"xatol": 1e-10},
        ).x
        top = log_integrand(peak)
        total = 0.0
        for a, b in itertools.pairwise(edges):
            value, _ = integrate.quad(
                lambda x, g=log_integrand, top=top: math.exp(g(x) - top),
                a,
                b,
                epsabs=0,
                epsrel=1e-13,
                limit=200,
            )
            total += value
        out.append(top + math.log(total))
    return np.array(out)


def gnmax_log_probs_mp(hist: np.ndarray, sigma: float, dps: int = 30) -> np.ndarray:
    """log p_j by mpmath.quad at ``dps`` digits, breakpoints around a root of g' by findroot."""
    out = []
    with mp.workdps(dps):
        s = mp.mpf(sigma)
        counts = [mp.mpf(int(v)) for v in hist]
        for j in range(len(counts)):

            def g(t: mp.mpf, j: int = j) -> mp.mpf:
                value = -t * t / 2 - mp.log(mp.sqrt(2 * mp.pi))
                for i, n in enumerate(counts):
                    if i != j:
                        value += mp.log(mp.ncdf(t + (counts[j] - n) / s))
                return value

            guess = max(float(c) for c in counts) - float(counts[j])
            peak = mp.findroot(lambda t, g=g: mp.diff(g, t), guess / (2 * float(s)) + 0.5)
            top = g(peak)
            points = [peak + k for k in (-13, -6, -3, -1, 0, 1, 3, 6, 13)]
            total = mp.quad(lambda t, g=g, top=top: mp.exp(g(t) - top), [-mp.inf, *points, mp.inf])
            out.append(float(top + mp.log(total)))
    return np.array(out)


# ----------------------------------------------------------------------------- histograms


@pytest.mark.parametrize(("num_teachers", "num_classes"), [(1, 2), (2, 3), (5, 4), (14, 4), (9, 2)])
def test_histograms_are_every_composition(num_teachers, num_classes):
    """Stars and bars: C(M + C - 1, C - 1) distinct non-negative rows summing to M."""
    hists = exact.histograms(num_teachers, num_classes)
    assert hists.shape == (math.comb(num_teachers + num_classes - 1, num_classes - 1), num_classes)
    assert np.all(hists >= 0) and np.all(hists.sum(axis=1) == num_teachers)
    assert len({tuple(row) for row in hists}) == hists.shape[0]


def test_neighbours_change_one_vote():
    """n - e_a + e_b for a != b with n_a >= 1: C (C-1) moves, fewer where classes are empty."""
    assert len(exact.neighbours([3, 2, 1])) == 6
    assert len(exact.neighbours([5, 0, 0])) == 2
    assert {tuple(r) for r in exact.neighbours([1, 1])} == {(0, 2), (2, 0)}
    for row in exact.neighbours([4, 0, 2, 1]):
        assert row.sum() == 7 and exact.distance(row, [4, 0, 2, 1]) == 1


def test_local_sensitivities_match_a_loop_over_neighbours():
    """The indexed table gives max |f(n') - f(n)| as a direct loop over ``neighbours`` does."""
    weights = np.array([3, -17, 29, 1])

    def f(hists: np.ndarray) -> np.ndarray:
        # Integer-valued, so both routes are exact and must agree bit for bit.
        return ((hists @ weights) ** 2 + hists[:, 0] * hists[:, 2]).astype(np.float64)

    hists = exact.histograms(6, 4)
    table = exact.local_sensitivities(f, 6, 4)
    loop = [np.max(np.abs(f(exact.neighbours(h)) - f(h[None, :])[0])) for h in hists]
    np.testing.assert_array_equal(table, loop)


def test_smooth_sensitivity_of_known_functions():
    """f = n_1 has LS = 1 everywhere; f = n_1^2 has LS = 2 n_1 + 1 below M, 2M - 1 at M."""
    ls = exact.local_sensitivities(lambda h: h[:, 0].astype(float), 5, 3)
    assert np.all(ls == 1.0)
    assert exact.smooth_sensitivity([2, 2, 1], ls, 5, 0.3) == 1.0
    ls = exact.local_sensitivities(lambda h: h[:, 0].astype(float) ** 2, 5, 3)
    hists = exact.histograms(5, 3)
    np.testing.assert_array_equal(ls, np.where(hists[:, 0] < 5, 2 * hists[:, 0] + 1, 9))
    # From (0, 4, 1): LS 9 at (5, 0, 0), five votes away; LS 2k+1 at distance k for k < 5.
    beta = 0.2
    expected = max(
        max((2 * k + 1) * math.exp(-beta * k) for k in range(5)), 9 * math.exp(-5 * beta)
    )
    assert exact.smooth_sensitivity([0, 4, 1], ls, 5, beta) == pytest.approx(expected, rel=1e-15)
    np.testing.assert_array_equal(exact.ls_by_distance([0, 4, 1], ls, 5), [1, 3, 5, 7, 9])


# ----------------------------------------------------------------------------- GNMax


@pytest.mark.parametrize("sigma", [0.05, 0.3, 1.0, 7.0, 1e4, 1e100])
@pytest.mark.parametrize("counts", [(7, 3), (14, 0), (5, 5), (0, 14), (250, 0)])
def test_gnmax_two_classes_closed_form(counts, sigma):
    """C = 2: Pr[class 2] = Phi(-(n_1 - n_2) / (sqrt(2) sigma)), down to e^-12000."""
    gap = (counts[0] - counts[1]) / (math.sqrt(2) * sigma)
    logp = exact.gnmax_log_probs([counts], sigma)[0]
    # The oracle's smaller class is exact; log_ndtr of the larger is good to ~1e-13 only.
    small = int(np.argmin(logp))
    want = log_ndtr(-gap) if small == 1 else log_ndtr(gap)
    assert close_logs(logp[small], want, 1e-13)
    assert logp[1 - small] == pytest.approx(log_ndtr(abs(gap)), rel=1e-12, abs=1e-300)


@pytest.mark.parametrize("num_classes", [2, 3, 4, 7])
@pytest.mark.parametrize("sigma", [0.1, 1.0, 50.0])
def test_gnmax_uniform_votes_give_one_over_c(num_classes, sigma):
    raw = exact.gnmax_log_probs([[3] * num_classes], sigma, raw=True)[0]
    np.testing.assert_allclose(raw, -math.log(num_classes), rtol=1e-14)


@settings(max_examples=SELF_CHECK_EXAMPLES)
@given(hist=histograms(max_classes=5), sigma=log_uniform(0.1, 1e4), seed=st.integers(0, 99))
def test_gnmax_permutation_and_normalisation(hist, sigma, seed):
    """Relabelling classes relabels outcomes; the raw integrals sum to 1 to 1e-12."""
    raw = exact.gnmax_log_probs([hist], sigma, raw=True)[0]
    assert abs(math.fsum(np.exp(raw)) - 1) <= 1e-12
    perm = np.random.default_rng(seed).permutation(hist.size)
    moved = exact.gnmax_log_probs([hist[perm]], sigma, raw=True)[0]
    assert close_logs(moved, raw[perm], 1e-13)


@settings(max_examples=SELF_CHECK_EXAMPLES)
@given(hist=histograms(), sigma=log_uniform(0.2, 1e4))
def test_gnmax_matches_adaptive_quadrature(hist, sigma):
    assert close_logs(
        exact.gnmax_log_probs([hist], sigma, raw=True)[0], gnmax_log_probs_adaptive(hist, sigma)
    )


@pytest.mark.parametrize(
    ("hist", "sigma"),
    [
        ((9, 4, 1, 0), 0.5),
        ((14, 0, 0), 0.127),  # log p ~ -3000 for both small classes
        ((2, 3, 3, 6), 40.0),
    ],
)
def test_gnmax_matches_mpmath(hist, sigma):
    assert close_logs(
        exact.gnmax_log_probs([hist], sigma, raw=True)[0], gnmax_log_probs_mp(hist, sigma)
    )


# ----------------------------------------------------------------------------- LNMax


@pytest.mark.parametrize("gamma", [0.01, 0.05, 0.5, 2.0, 5.0])
@pytest.mark.parametrize("counts", [(7, 3), (14, 0), (5, 5), (3, 9)])
def test_lnmax_two_classes_closed_form(counts, gamma):
    """C = 2: Pr[L_1 - L_2 > g] = e^(-gamma g) (2 + gamma g) / 4 for Laplace(1/gamma) noise."""
    gap = abs(counts[0] - counts[1]) * gamma
    logp = exact.lnmax_log_probs([counts], gamma, raw=True)[0]
    want = -gap + math.log(2 + gap) - math.log(4)
    assert close_logs(np.min(logp), want, 1e-13)
    assert abs(math.fsum(np.exp(logp)) - 1) <= 1e-12


@pytest.mark.parametrize("num_classes", [2, 3, 4, 6])
@pytest.mark.parametrize("gamma", [0.05, 1.0, 10.0])
def test_lnmax_uniform_votes_give_one_over_c(num_classes, gamma):
    raw = exact.lnmax_log_probs([[4] * num_classes], gamma, raw=True)[0]
    np.testing.assert_allclose(raw, -math.log(num_classes), rtol=1e-13)


@settings(max_examples=SELF_CHECK_EXAMPLES)
@given(hist=histograms(), gamma=log_uniform(0.01, 5.0), seed=st.integers(0, 99))
def test_lnmax_matches_adaptive_quadrature(hist, gamma, seed):
    """Two integration methods agree; permutation and normalisation as for GNMax."""
    raw = exact.lnmax_log_probs([hist], gamma, raw=True)[0]
    assert abs(math.fsum(np.exp(raw)) - 1) <= 1e-12
    assert close_logs(raw, lnmax_log_probs_adaptive(hist, gamma))
    perm = np.random.default_rng(seed).permutation(hist.size)
    assert close_logs(exact.lnmax_log_probs([hist[perm]], gamma, raw=True)[0], raw[perm], 1e-13)


def test_lnmax_matches_mpmath():
    """(9, 4, 1, 0) at gamma = 3: log p down to -40, mpmath.quad at 30 digits."""
    hist, gamma = (9, 4, 1, 0), 3.0
    with mp.workdps(30):
        scale = 1 / mp.mpf(gamma)

        def cdf(t: mp.mpf) -> mp.mpf:
            return mp.exp(t / scale) / 2 if t < 0 else 1 - mp.exp(-t / scale) / 2

        want = []
        for j in range(4):

            def integrand(x: mp.mpf, j: int = j) -> mp.mpf:
                value = mp.exp(-abs(x - hist[j]) / scale) / (2 * scale)
                for i in range(4):
                    if i != j:
                        value *= cdf(x - hist[i])
                return value

            want.append(float(mp.log(mp.quad(integrand, [-mp.inf, 0, 1, 4, 9, mp.inf]))))
    assert close_logs(exact.lnmax_log_probs([hist], gamma, raw=True)[0], want)


# ----------------------------------------------------------------------------- threshold


@pytest.mark.parametrize(
    ("counts", "threshold", "sigma1"),
    [((31, 9), 0.0, 0.4), ((3, 2), 40.0, 0.5), ((7, 7), 7.0, 2.0), ((236, 14), 30.0, 4.5)],
)
def test_threshold_outcomes_match_mpmath(counts, threshold, sigma1):
    """Both outcomes from their own tails: log Pr[not answered] = -3003 stays exact."""
    with mp.workdps(50):
        z = (mp.mpf(max(counts)) - mp.mpf(threshold)) / mp.mpf(sigma1)
        want = [float(mp.log(mp.ncdf(z))), float(mp.log(mp.ncdf(-z)))]
    assert close_logs(exact.threshold_log_probs([counts], threshold, sigma1)[0], want, 1e-13)


def test_threshold_rounds_half_up():
    """round(max) is floor(max + 1/2): 2.5 -> 3 (Python's round would give 2)."""
    np.testing.assert_array_equal(exact.round_half_up([0.5, 1.5, 2.5, 2.49]), [1, 2, 3, 2])


# ----------------------------------------------------------------------------- divergence


def renyi_mp(logp: np.ndarray, logq: np.ndarray, order: float) -> float:
    """D_order at 350 digits (divergences down to 1e-300 are resolved), with each row's
    largest entry re-derived as 1 - others."""
    with mp.workdps(350):

        def distribution(logs: np.ndarray) -> list[mp.mpf]:
            probs = [mp.exp(mp.mpf(float(v))) for v in logs]
            top = int(np.argmax(logs))
            probs[top] = 1 - mp.fsum(p for i, p in enumerate(probs) if i != top)
            return probs

        lam = mp.mpf(order)
        p, q = distribution(logp), distribution(logq)
        s = mp.fsum(a**lam * b ** (1 - lam) for a, b in zip(p, q, strict=True) if a > 0)
        return float(mp.log(s) / (lam - 1))


@st.composite
def distribution_pairs(draw: st.DrawFn) -> tuple[np.ndarray, np.ndarray]:
    """Two normalised log-distributions, from far apart to nearly equal, with tiny entries."""
    size = draw(st.integers(2, 5))
    logits = np.array(draw(st.lists(st.floats(-700, 0), min_size=size, max_size=size)))
    scale = draw(st.sampled_from([1e-6, 1e-3, 0.1, 3.0, 100.0]))
    shift = np.array(draw(st.lists(st.floats(-1, 1), min_size=size, max_size=size)))
    first = exact.normalise(logits - logsumexp(logits))[0]
    moved = logits + scale * shift
    second = exact.normalise(moved - logsumexp(moved))[0]
    return first, second


@settings(max_examples=SELF_CHECK_EXAMPLES)
@given(pair=distribution_pairs(), order=log_uniform(1.01, 500.0))
def test_renyi_matches_mpmath(pair, order):
    """Any pair: to 1e-9, or 1e-15 absolute. The largest entry of a row rounded to a double
    is off by ~1e-16, which is all there is of a divergence ~r^2 between rows that differ by
    r ~ 1e-6 (mpmath re-derives it exactly from the others)."""
    logp, logq = pair
    want = renyi_mp(logp, logq, order)
    assert exact.renyi(logp, logq, order) == pytest.approx(want, rel=1e-9, abs=1e-15)


@st.composite
def near_certain_pairs(draw: st.DrawFn) -> tuple[np.ndarray, np.ndarray]:
    """Two rows whose first outcome has probability > 1 - 1e-3 and the rest down to e^-700."""
    size = draw(st.integers(2, 5))
    rows = []
    for _ in range(2):
        # Down to e^-1000: below the double range, where only their logarithms exist.
        rest = draw(st.lists(st.floats(-1000, -9), min_size=size - 1, max_size=size - 1))
        rows.append(exact.normalise([[0.0, *rest]])[0])
    return rows[0], rows[1]


@settings(max_examples=SELF_CHECK_EXAMPLES)
@given(pair=near_certain_pairs(), order=log_uniform(1.01, 500.0))
def test_renyi_of_near_certain_rows_is_relatively_exact(pair, order):
    """Where the data-dependent bounds are tiny (q -> 0) the oracle must be too: 1e-9
    relative, down to divergences of 1e-300. Identical rows diverge by exactly 0, which
    mpmath, re-deriving the largest entry from the rounded others, misses by ~1e-34; rows a
    few ulps apart diverge by less than that error, so there only the size is checked."""
    logp, logq = pair
    if np.array_equal(logp, logq):
        assert exact.renyi(logp, logq, order) == 0.0
        return
    if np.allclose(logp, logq, rtol=8 * np.finfo(float).eps, atol=0.0):
        assert 0.0 <= exact.renyi(logp, logq, order) <= 1e-30
        return
    want = renyi_mp(logp, logq, order)
    assert exact.renyi(logp, logq, order) == pytest.approx(want, rel=1e-9, abs=1e-300)


def test_renyi_special_values():
    """D(P||P) = 0; a Q that misses an outcome of P gives inf; outcomes P misses do not count."""
    logp = np.log([0.5, 0.25, 0.25])
    assert exact.renyi(logp, logp, 7.0) == 0.0
    assert exact.renyi(logp, [math.log(0.5), math.log(0.5), -np.inf], 3.0) == np.inf
    with np.errstate(divide="ignore"):  # log 0 = -inf is the outcome P never shows
        assert exact.renyi(np.log([1.0, 0.0]), np.log([0.5, 0.5]), 2.0) == pytest.approx(
            math.log(2)
        )
    # Bernoulli(1/2) against Bernoulli(1/4) at order 2: log(0.25/0.25 + 0.25/0.75) = log(4/3).
    assert exact.renyi(np.log([0.5, 0.5]), np.log([0.25, 0.75]), 2.0) == pytest.approx(
        math.log(4 / 3), rel=1e-15
    )


def test_renyi_of_near_certain_outcomes_is_exact():
    """q = 1e-200 against q' = 2e-200 at order 2: D = q^2/q' + (1-q)^2/(1-q') - 1 ~ 1e-200."""
    lq, lq2 = math.log(1e-200), math.log(2e-200)
    logp = exact.normalise([[0.0, lq]])[0]
    logq = exact.normalise([[0.0, lq2]])[0]
    # (1-q)^2/(1-2q) - 1 = q^2 / (1-2q) ~ 1e-400 (below the double range), q^2/q' = 0.5e-200.
    assert exact.renyi(logp, logq, 2.0) == pytest.approx(0.5e-200, rel=1e-12)


def test_renyi_with_subnormal_probabilities():
    """(1, 55) against (0, 56), T = 1.33203125, sigma1 = 1.3956124250860895, order e:
    Pr[not answered] = e^-743.95 is subnormal, yet its term e^-743.95 (e^47.9 - 1) is not.
    mpmath at 400 digits: 2.73523654139157e-303 (a product formed from the subnormal
    probability gave 3.37e-303)."""
    truth, worst = exact.max_over_neighbours(
        [1, 55], lambda h: exact.threshold_log_probs(h, 1.33203125, 1.3956124250860895), math.e
    )
    assert tuple(worst) == (0, 56)
    assert truth == pytest.approx(2.73523654139157e-303, rel=1e-11)


# ----------------------------------------------------------------------------- teeth


def test_oracle_catches_gnmax_bound_with_too_much_noise():
    """rdp_gnmax computed as if sigma were 1.5 times larger is below the exact divergence.

    (12, 1, 1) at sigma = 1, order 5, where Theorem 6 is in force (4.27 < Prop. 8's 5): the
    exact sup is 3.854, at the neighbour (13, 0, 1) that widens the gap.
    """
    from pate_cli.core.gnmax import logq_gnmax, rdp_gnmax

    hist, sigma, order = np.array([12, 1, 1]), 1.0, 5.0

    def bound(noise: float) -> float:
        logq = logq_gnmax(hist[None, :].astype(float), noise)
        return float(rdp_gnmax(logq, noise, np.array([order]))[0, 0])

    truth, worst = exact.max_over_neighbours(hist, lambda h: exact.gnmax_log_probs(h, sigma), order)
    assert truth == pytest.approx(3.8536217543464346, rel=1e-10)
    assert tuple(worst) == (13, 0, 1)
    assert truth <= bound(sigma) < 5.0  # the real, data-dependent bound holds (4.27) ...
    assert bound(1.5 * sigma) < truth  # ... and a 1.5x-noise one is caught (1.83)


def test_brute_force_catches_smooth_sensitivity_one_percent_low():
    """Confident-GNMax at (10, 2, 3, 3): pate's smooth sensitivity equals the brute force to
    1e-13, so 0.99 times it is caught."""
    from tests.oracle.test_soundness import confident_cost, pate_smooth_sensitivity

    hist = np.array([10, 2, 3, 3])
    params = {
        "threshold": 12.222150299716327,
        "sigma1": 5.975880119984785,
        "sigma": 7.055760832106127,
    }
    order, beta = 1.712, 0.17683829846944138
    f, flags = confident_cost(int(hist.sum()), hist.size, order=order, **params)
    ls = exact.local_sensitivities(f, int(hist.sum()), hist.size)
    truth = exact.smooth_sensitivity(hist, ls, int(hist.sum()), beta)
    ours = pate_smooth_sensitivity(hist, order, beta, flags=flags, **params)
    assert ours >= truth * (1 - 1e-9)
    assert 0.99 * ours < truth


# ----------------------------------------------------------------------------- exact Gaussian DP

# The digits of the Gaussian DP oracle: its two terms cancel to delta / Q ~ mu / z^2 (~1e-8 at
# mu = 1e-6), which leaves over 50 digits.
GDP_DPS = 60
# How far above the oracle pate's epsilon may be: 1e-10 relative, plus 1e-10 delta absolute
# for epsilons near 0 (there the curve's slope is ~1/2, so pate's slack in delta, at most
# ~1e-11 of it, becomes ~2e-11 delta in epsilon, however small epsilon is). Found: 4.3e-11
# relative on the grid, 1.6e-11 delta near 0.
GDP_REL_GAP = 1e-10
GDP_DELTA_GAP = 1e-10
GDP_EXAMPLES = max(10, EXAMPLES // 5)


def gdp_delta_mp(eps: mp.mpf, mu: mp.mpf) -> mp.mpf:
    """delta(eps) of mu-Gaussian DP (Dong, Roth and Su 2022, Corollary 2.13), as written, at
    the working precision."""
    return mp.ncdf(-eps / mu + mu / 2) - mp.exp(eps) * mp.ncdf(-eps / mu - mu / 2)


def gdp_epsilon_mp(mu: float, delta: float) -> mp.mpf:
    """The smallest eps >= 0 with delta(eps) <= delta, at 60 digits: 0 if delta(0) <= delta,
    else the upper end of a bracket [low, high] (delta(low) > delta >= delta(high)) bisected
    to 1e-30 relative. Newton's method on log delta (d delta / d eps = -e^eps Phi(-eps/mu -
    mu/2)) proposes a narrow bracket first; it is kept only if delta says it brackets."""
    with mp.workdps(GDP_DPS):
        mu_, target = mp.mpf(mu), mp.mpf(delta)

        def within(eps: mp.mpf) -> bool:
            return gdp_delta_mp(eps, mu_) <= target

        if within(mp.mpf(0)):
            return mp.mpf(0)
        low, high = mp.mpf(0), mp.mpf(1)
        while not within(high):
            low, high = high, 2 * high
        guess = high
        for _ in range(60):
            value = gdp_delta_mp(guess, mu_)
            slope = -mp.exp(guess) * mp.ncdf(-guess / mu_ - mu_ / 2)
            step = (mp.log(value) - mp.log(target)) * value / slope
            guess -= step
            if not low < guess < high:
                guess = (low + high) / 2
            elif abs(step) < guess * mp.mpf("1e-40"):
                break
        narrow = guess * mp.mpf("1e-26")
        if low < guess - narrow and guess + narrow < high:
            if not within(guess - narrow) and within(guess + narrow):
                low, high = guess - narrow, guess + narrow
        while high - low > high * mp.mpf("1e-30"):
            middle = (low + high) / 2
            if within(middle):
                high = middle
            else:
                low = middle
        return high


def check_gaussian_epsilon(mu: float, delta: float) -> None:
    """pate's epsilon is at or above the oracle's, never below by any amount, and at most
    GDP_REL_GAP relative + GDP_DELTA_GAP delta above it."""
    from pate_cli.core import exact as pate_exact

    ours = pate_exact.gaussian_epsilon(mu, delta)
    truth = gdp_epsilon_mp(mu, delta)
    with mp.workdps(GDP_DPS):
        assert mp.mpf(ours) >= truth, (mu, delta, ours, truth)
        slack = truth * GDP_REL_GAP + mp.mpf(delta) * GDP_DELTA_GAP
        assert mp.mpf(ours) - truth <= slack, (mu, delta, ours, truth)


def test_gaussian_dp_oracle_finds_known_epsilons():
    """The oracle itself: eps = 0 exactly where delta(0) = Phi(mu/2) - Phi(-mu/2) <= delta;
    the root of delta(eps) = delta to 1e-30 (checked on either side at 60 digits); the
    reported case mu = 1e-6, delta = 1e-12 (4.424892759089482e-06 at 50 digits)."""
    assert gdp_epsilon_mp(0.1, 0.05) == 0  # delta(0) = 0.0399
    truth = gdp_epsilon_mp(1e-6, 1e-12)
    assert float(truth) == pytest.approx(4.424892759089482e-06, rel=1e-15)
    with mp.workdps(GDP_DPS):
        for mu, delta in [(1e-6, 1e-12), (3.0, 1e-5), (30.0, 0.1)]:
            eps = gdp_epsilon_mp(mu, delta)
            assert gdp_delta_mp(eps, mp.mpf(mu)) <= delta
            assert gdp_delta_mp(eps * (1 - mp.mpf("1e-29")), mp.mpf(mu)) > delta


@pytest.mark.parametrize("delta", [1e-12, 1e-10, 1e-8, 1e-5, 1e-3, 0.1])
@pytest.mark.parametrize("mu", [1e-6, 1e-5, 1e-4, 1e-3, 1e-2, 0.1, 1.0, 3.0, 10.0, 30.0])
def test_gaussian_epsilon_is_never_below_the_oracle(mu, delta):
    """pate's exact Gaussian DP epsilon against a 60-digit bisection of Corollary 2.13: never
    below (the two terms nearly cancel at small mu, which once put it 5e-10 below at
    mu = 1e-6), and tight."""
    check_gaussian_epsilon(mu, delta)


@settings(max_examples=GDP_EXAMPLES)
@given(mu=log_uniform(1e-6, 30.0), delta=log_uniform(1e-12, 0.1))
def test_gaussian_epsilon_is_never_below_the_oracle_anywhere(mu, delta):
    check_gaussian_epsilon(mu, delta)


@settings(max_examples=SELF_CHECK_EXAMPLES)
@given(mu=log_uniform(1e-6, 30.0), z=st.one_of(st.just(0.0), st.floats(0.0, 40.0)))
def test_log_delta_gaussian_is_an_upper_bound(mu, z):
    """At eps = mu z + mu^2 / 2 (z = 0: eps = 0; z = 40: delta ~ e^-800), pate's log delta is
    at or above log delta at 60 digits, and within 1e-11 (1 + |log delta|) of it (found:
    2.8e-12)."""
    from pate_cli.core import exact as pate_exact

    eps = mu * z + mu * mu / 2 if z else 0.0
    ours = pate_exact.log_delta_gaussian(eps, mu)
    with mp.workdps(GDP_DPS):
        truth = mp.log(gdp_delta_mp(mp.mpf(eps), mp.mpf(mu)))
        assert mp.mpf(ours) >= truth
        assert mp.mpf(ours) - truth <= mp.mpf("1e-11") * (1 + abs(truth))

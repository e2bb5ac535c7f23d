"""The FFT composition (``pate_cli.core.pld_compose``) charges to delta all it leaves out.

Against the exact Gaussian-DP epsilon (scipy.stats.norm here) on loss grids that truncate
the pair, where the mass beyond the grid sits at +infinity; and against a direct
convolution written here, charge by charge: the composed mass at +infinity, the finite
mass above the window (Chernoff's bound), and the FFT's roundings on every loss of the
window. Each charge is what the composition hands its epsilon solver (``_epsilon_of``).
"""

from __future__ import annotations

import math

import mpmath
import numpy as np
import pytest
from scipy.optimize import brentq
from scipy.stats import norm

from pate_cli.core import pld, pld_compose
from pate_cli.core.pld_compose import TAIL_SHARE, Pessimistic, compose_epsilon

U = 2.0**-53


def gaussian_dp_epsilon(mu: float, delta: float) -> float:
    """The smallest eps with Phi(mu/2 - eps/mu) - e^eps Phi(-mu/2 - eps/mu) <= delta."""

    def excess(eps: float) -> float:
        return norm.cdf(mu / 2 - eps / mu) - math.exp(eps) * norm.cdf(-mu / 2 - eps / mu) - delta

    return brentq(excess, 0.0, 50.0, xtol=1e-14, rtol=1e-15)


def truncated_gaussian(mu: float, grid: float, reach: float) -> Pessimistic:
    """mu-GDP's pair on the losses -reach .. reach: beyond reach its profile stays at
    delta_mu(reach), the P-mass at +infinity."""
    last = round(reach / grid)
    eps = np.arange(-last, last + 1) * grid
    return pld.connect_the_dots(-last, pld.gaussian_profile(mu, eps)[None, :], grid)


def composed_infinity(pmf: Pessimistic, counts) -> float:
    """1 - prod_g (1 - w_g)^k_g at 40 digits."""
    with mpmath.workdps(40):
        kept = mpmath.fprod(
            (1 - mpmath.mpf(float(w))) ** int(k) for w, k in zip(pmf.infinity, counts, strict=True)
        )
        return float(1 - kept)


# ----------------------------------------------------------------------------- Gaussian DP


def test_one_pair_on_a_grid_of_two_each_way():
    """mu = 1 on [-2, 2]: 2.1% of P's mass is past the grid's last loss. At delta 0.1 the
    figure is the exact 1.1603339 to within the hull's step (2.3e-7 here)."""
    pmf = truncated_gaussian(1.0, 1e-3, 2.0)
    assert pmf.infinity[0] == pytest.approx(0.020924, rel=1e-4)
    truth = gaussian_dp_epsilon(1.0, 0.1)
    assert truth == pytest.approx(1.1603339, abs=1e-7)
    ours = compose_epsilon(pmf, np.array([1]), 1e-3, 0.1)
    assert truth <= ours <= truth + 1e-6


@pytest.mark.parametrize(
    ("mu", "grid", "reach", "copies", "delta"),
    [(0.5, 1e-3, 1.5, 4, 0.1), (0.3, 1e-3, 1.0, 10, 1e-2)],
)
def test_truncated_grids_stay_above_gaussian_dp(mu, grid, reach, copies, delta):
    """k copies of a truncated mu-GDP pair: at or above the exact epsilon of sqrt(k) mu,
    and at most the Gaussian figure at delta less the composed mass at +infinity, a grid
    step per copy higher (each copy's losses are on the grid)."""
    pmf = truncated_gaussian(mu, grid, reach)
    infinity = composed_infinity(pmf, [copies])
    assert infinity > delta / 200  # the truncation is part of the figure
    ours = compose_epsilon(pmf, np.array([copies]), grid, delta)
    truth = gaussian_dp_epsilon(mu * math.sqrt(copies), delta)
    ceiling = gaussian_dp_epsilon(mu * math.sqrt(copies), delta - infinity) + copies * grid
    assert truth <= ours <= ceiling, (truth, ours, ceiling)


def test_more_mass_at_infinity_than_delta_is_no_finite_figure():
    """mu = 1 on [-3, 3] leaves 1.5e-3 at +infinity: at delta 1e-3 no epsilon is enough
    (the exact pair's 3.1387 is past the grid)."""
    pmf = truncated_gaussian(1.0, 1e-3, 3.0)
    assert pmf.infinity[0] == pytest.approx(1.5372e-3, rel=1e-3)
    assert gaussian_dp_epsilon(1.0, 1e-3) == pytest.approx(3.13867, abs=1e-5)
    assert compose_epsilon(pmf, np.array([1]), 1e-3, 1e-3) == math.inf


# ----------------------------------------------------------------------------- direct convolution


def direct_convolution(pmf: Pessimistic, counts) -> tuple[int, np.ndarray, float]:
    """The composed finite masses at losses (lo + i) grid, copy by copy, and a bound on
    their relative rounding: each entry is a sum of n non-negative products (n the shorter
    factor's length), within (n + 1) U of itself, the errors of successive convolutions
    adding up."""
    total = np.array([1.0])
    relative = 0.0
    for row, count in enumerate(counts):
        for _ in range(count):
            relative += 1.01 * (min(total.size, pmf.masses.shape[1]) + 1) * U
            total = np.convolve(total, pmf.masses[row])
    return pmf.lo * int(sum(counts)), total, relative


def direct_epsilon(lo: int, masses: np.ndarray, infinity: float, grid: float, delta: float):
    """The smallest eps >= 0 with infinity + sum_L m_L (1 - e^(eps - L grid))_+ <= delta:
    (low, high) around it, by bisection."""
    losses = (lo + np.arange(masses.size)) * grid

    def delta_at(eps: float) -> float:
        return infinity + math.fsum(masses * np.maximum(-np.expm1(eps - losses), 0.0))

    low, high = 0.0, float(losses[-1]) + 1.0
    if delta_at(0.0) <= delta:
        return 0.0, 0.0
    for _ in range(200):
        middle = (low + high) / 2
        if delta_at(middle) > delta:
            low = middle
        else:
            high = middle
    return low, high


def qbound_pmf(sigma, grid, counts, delta, log_a):
    """The q-bound pairs of ``log_a`` (log b half a unit higher) on the run's loss grid."""
    mu = math.sqrt(2) / sigma
    eps = pld.loss_grid(mu, grid, delta, sum(counts))
    log_a = np.array(log_a)
    remove, _ = pld.qbound_profiles(log_a, np.minimum(log_a + 0.5, 0.0), mu, eps)
    return pld.connect_the_dots(-(eps.size // 2), remove, grid)


CASES = {
    # Rows of few atoms (transformed by a direct DFT), of more (by the rfft), and a grid
    # that truncates the pair (2.7% of the composed mass at +infinity).
    "dft-one-kind": (lambda: qbound_pmf(30, 1e-2, [7], 1e-3, [-4.0]), 1e-2, [7], 1e-3),
    "dft-two-kinds": (lambda: qbound_pmf(30, 1e-2, [3, 5], 0.1, [-4.0, -5.5]), 1e-2, [3, 5], 0.1),
    "fft-two-kinds": (
        lambda: qbound_pmf(40, 2e-3, [3, 5], 1e-3, [-1.0, -2.5]),
        2e-3,
        [3, 5],
        1e-3,
    ),
    "fft-one-kind": (lambda: qbound_pmf(30, 5e-3, [7], 1e-3, [-8.0]), 5e-3, [7], 1e-3),
    "truncated-gaussian": (lambda: truncated_gaussian(0.5, 1e-2, 1.0), 1e-2, [4], 0.1),
}


@pytest.mark.parametrize("case", list(CASES))
def test_each_charge_covers_what_direct_convolution_finds(monkeypatch, case):
    """What the composition hands its epsilon solver, against the composed distribution
    itself: delta less the target is at least the mass at +infinity and the finite mass
    above the window (and at most those plus the window's share of delta); every loss of
    the window has at least its composed mass (the FFT's roundings charged), and at most
    that plus what wraps from outside the window; the figure is at or above the direct
    one."""
    make, grid, counts, delta = CASES[case]
    pmf = make()
    seen = {}
    solve = pld_compose._epsilon_of

    def spy(masses, bottom, grid, target):
        seen.update(masses=masses.copy(), bottom=bottom, target=target)
        return solve(masses, bottom, grid, target)

    monkeypatch.setattr(pld_compose, "_epsilon_of", spy)
    ours = compose_epsilon(pmf, np.array(counts), grid, delta)
    lo, exact, relative = direct_convolution(pmf, counts)
    infinity = composed_infinity(pmf, counts)
    masses, bottom = seen["masses"], seen["bottom"]
    top = bottom + masses.size
    # The composed masses at the window's losses, and those outside it.
    index = np.arange(bottom, top) - lo
    inside = (index >= 0) & (index < exact.size)
    window = np.zeros(masses.size)
    window[inside] = exact[index[inside]]
    below = math.fsum(exact[: max(bottom - lo, 0)])
    above = math.fsum(exact[max(top - lo, 0) :]) * (1 + relative)
    charged = delta - seen["target"]
    # The mass at +infinity, then the finite mass above the window: each charged.
    assert charged >= infinity, (charged, infinity)
    assert charged - infinity >= above, (charged - infinity, above)
    assert charged <= (infinity + delta * TAIL_SHARE) * (1 + 1e-9) + 1e-15
    # The roundings: no loss of the window below its composed mass.
    short = window * (1 - 2 * relative) - masses
    worst = int(np.argmax(short))
    assert short[worst] <= 0, (
        f"loss {(bottom + worst) * grid:.4g}: {masses[worst]} < {window[worst]}"
    )
    assert np.max(masses - window) <= below + above + 1e-12
    # The figure: at or above the composed distribution's own, and close to it.
    low, high = direct_epsilon(lo, exact * (1 - 2 * relative), infinity, grid, delta)
    assert low <= ours <= high + 1e-5, (ours, low, high)

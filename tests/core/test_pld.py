"""The privacy-loss-distribution core (``pate_cli.core.pld``) against independent figures:
the exact Gaussian-DP epsilon and Google's dp_accounting where every query is a Gaussian
mechanism (q-bounds of 1), direct convolution for the FFT, and a finer grid."""

from __future__ import annotations

import math

import numpy as np
import pytest
from dp_accounting.pld import privacy_loss_distribution as dp_pld
from scipy.special import log_ndtr

from pate_cli.core import exact, pld

DELTA = 1e-5


def gaussian_run(sigma: float, queries: int, delta: float, grid: float | None = None) -> float:
    """The q-bound figure of ``queries`` GNMax queries whose q-bounds are 1 (no help from
    the votes): every pair is then the Gaussian mechanism's."""
    ones = np.zeros(queries)
    return pld.qbound_epsilon(ones, ones, math.sqrt(2) / sigma, delta, grid=grid).epsilon


@pytest.mark.parametrize(
    ("sigma", "queries", "delta"),
    [(40, 1, 1e-5), (40, 640, 1e-5), (100, 10_000, 1e-8), (5, 100, 1e-6), (2, 3, 1e-5)],
)
def test_with_q_bounds_of_one_it_meets_gaussian_dp_from_above(sigma, queries, delta):
    """At or above the exact mu-GDP epsilon (mu = sqrt(2 Q) / sigma), within 0.3% (the
    grid's and the FFT's allowances: the larger at small delta over many queries), and
    within those of dp_accounting's pessimistic PLD."""
    ours = gaussian_run(sigma, queries, delta)
    truth = exact.gaussian_epsilon(math.sqrt(2 * queries) / sigma, delta)
    assert truth <= ours <= truth * 1.003 + 1e-3
    theirs = (
        dp_pld.from_gaussian_mechanism(
            standard_deviation=sigma / math.sqrt(2),
            sensitivity=1,
            value_discretization_interval=1e-3,
        )
        .self_compose(queries)
        .get_epsilon_for_delta(delta)
    )
    assert abs(ours - theirs) <= 0.002 * theirs + 2e-3


@pytest.mark.parametrize(("sigma", "queries"), [(40, 640), (5, 20), (40, 1)])
def test_a_finer_grid_never_raises_it_by_more_than_a_step(sigma, queries):
    coarse = gaussian_run(sigma, queries, DELTA, grid=2e-3)
    fine = gaussian_run(sigma, queries, DELTA, grid=1e-3)
    assert fine <= coarse + 2e-3


def direct_epsilon(pmf: pld.Pessimistic, counts, grid, delta) -> float:
    """The composition by direct convolution of non-negative masses (each entry's rounding
    relative to itself), and its epsilon by bisection on delta(eps) from its definition."""
    total = np.array([1.0])
    lo = 0
    infinity_log = 0.0
    for row, count in enumerate(counts):
        for _ in range(count):
            total = np.convolve(total, pmf.masses[row])
            lo += pmf.lo
            infinity_log += math.log1p(-pmf.infinity[row])
    losses = (lo + np.arange(total.size)) * grid
    infinity = -math.expm1(infinity_log)

    def delta_at(eps: float) -> float:
        return infinity + float(np.sum(total * np.maximum(-np.expm1(eps - losses), 0.0)))

    low, high = 0.0, float(losses[-1]) + 1
    if delta_at(0.0) <= delta:
        return 0.0
    for _ in range(100):
        middle = (low + high) / 2
        low, high = (middle, high) if delta_at(middle) > delta else (low, middle)
    return high


@pytest.mark.parametrize(
    ("log_a", "log_b", "counts"),
    [
        ([-3.0, -0.5], [-2.5, -0.2], [3, 2]),
        ([-20.0, -9.0, 0.0], [-19.0, -8.0, 0.0], [4, 3, 1]),
        ([-1.0], [-0.9], [6]),
    ],
)
def test_the_fft_composition_is_at_or_above_direct_convolution(log_a, log_b, counts):
    """The same distributions composed by direct convolution: the FFT's epsilon is never
    below, and within 1e-9 relative plus its bounded rounding."""
    mu, grid = math.sqrt(2) / 3, 1e-3
    eps = pld.loss_grid(mu, grid, DELTA, sum(counts))
    remove, _ = pld.qbound_profiles(np.array(log_a), np.array(log_b), mu, eps)
    pmf = pld.connect_the_dots(-(eps.size // 2), remove, grid)
    ours = pld.compose_epsilon(pmf, np.array(counts), grid, DELTA)
    theirs = direct_epsilon(pmf, counts, grid, DELTA)
    assert theirs * (1 - 1e-9) <= ours <= theirs * (1 + 1e-6) + 1e-9


def test_the_hull_is_the_profile_of_its_distribution():
    """Connect the dots: the distribution's profile passes through the hull's vertices and
    is at or above every bound it was built from, never below."""
    mu, grid = 0.5, 1e-2
    eps = pld.loss_grid(mu, grid, DELTA, 1)
    remove, _ = pld.qbound_profiles(np.array([-2.0]), np.array([-1.5]), mu, eps)
    pmf = pld.connect_the_dots(-(eps.size // 2), remove, grid)
    losses = (pmf.lo + np.arange(pmf.masses.shape[1])) * grid
    terms = pmf.masses[0][None, :] * np.maximum(-np.expm1(eps[:, None] - losses[None, :]), 0)
    profile = pmf.infinity[0] + terms.sum(axis=1)
    hull_below = profile >= remove[0] * (1 - 1e-9)
    # Where the bounds are not convex the hull is below them; it is never below its own
    # vertices, and the distribution has P-mass 1.
    assert hull_below.mean() > 0.5
    assert math.isclose(pmf.masses.sum() + pmf.infinity[0], 1.0, rel_tol=1e-12)
    assert np.all(np.diff(profile) <= 1e-15)  # non-increasing


def test_confident_profiles_are_at_most_the_joint_gaussian():
    mu, joint = math.sqrt(2) / 4, math.hypot(math.sqrt(2) / 4, 1 / 2)
    eps = pld.loss_grid(joint, 1e-3, DELTA, 1)
    z = np.array([-1.0, 0.0, 3.0])
    remove, add = pld.confident_profiles(
        *(
            np.log(np.array(v))
            for v in ([0.16, 0.5, 0.9987], [0.07, 0.31, 0.9938], [0.31, 0.69, 0.9998])
        ),
        np.full(3, -1.0),
        np.full(3, -0.8),
        mu,
        joint,
        eps,
    )
    assert z.size == remove.shape[0]
    gaussian = pld.gaussian_profile(joint, eps)
    assert np.all(remove <= gaussian) and np.all(add <= gaussian)
    assert np.all(remove >= np.maximum(-np.expm1(eps), 0) - 1e-15)


def _andrew_lower_hull(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    """The lower convex hull of points sorted by x, interpolated at every x (Andrew 1979, in
    exact rational arithmetic on the doubles given: an oracle with no tolerance)."""
    from fractions import Fraction

    xs, ys = [Fraction(v) for v in x], [Fraction(v) for v in y]
    hull: list[int] = []
    for i in range(len(xs)):
        while len(hull) >= 2:
            a, b = hull[-2], hull[-1]
            if (xs[b] - xs[a]) * (ys[i] - ys[a]) - (ys[b] - ys[a]) * (xs[i] - xs[a]) <= 0:
                hull.pop()
            else:
                break
        hull.append(i)
    return np.interp(x, x[hull], y[hull])


def test_the_hull_is_the_exact_lower_hull_of_its_bounds():
    """On the q-bound and confident profiles of 24 kinds of query (log a, log b from -30 to
    0, margins -2 to 4), each direction: the distribution's profile at every grid point is
    at or above the bounds' exact lower convex hull (in gamma, with (0, 1)) and within 1e-9
    of it (the hull's margin, 1e-10, and the roundings of its atoms)."""
    rng = np.random.default_rng(12)
    mu, grid = math.sqrt(2) / 10, 1e-2
    joint = math.hypot(mu, 1 / 30)
    eps = pld.loss_grid(joint, grid, DELTA, 1000)
    log_a = -30 * rng.random(24) ** 2
    log_b = np.minimum(log_a + rng.random(24), 0.0)
    z = rng.uniform(-2, 4, 24)
    shift = 1 / 30
    rows = [
        *pld.qbound_profiles(log_a, log_b, mu, eps),
        *pld.confident_profiles(
            log_ndtr(z), log_ndtr(z - shift), log_ndtr(z + shift), log_a, log_b, mu, joint, eps
        ),
    ]
    first = -(eps.size // 2)
    gamma = np.exp((first + np.arange(eps.size)) * grid)
    for profiles in rows:
        pmf = pld.connect_the_dots(first, profiles, grid)
        for row in range(profiles.shape[0]):
            bounds = np.minimum(profiles[row], 1.0)
            bounds = np.maximum.accumulate(bounds[::-1])[::-1]  # non-increasing, as ours
            hull = _andrew_lower_hull(np.r_[0.0, gamma], np.r_[1.0, bounds])[1:]
            terms = pmf.masses[row][None, :] * np.maximum(1 - gamma[:, None] / gamma[None, :], 0)
            profile = pmf.infinity[row] + terms.sum(axis=1)
            assert np.all(profile >= hull * (1 - 1e-12) - 1e-300)
            assert np.all(profile <= hull * (1 + 1e-9) + 1e-15)

"""Privacy-loss distributions of a data-dependent run: each query's dominating pair,
discretised pessimistically, composed by FFT.

A query answered by a Gaussian noisy max is post-processing of a Gaussian mechanism, so
every neighbouring pair of its outcome distributions is mu-Gaussian DP (Dong, Roth and Su
2022, Corollary 2.13): delta_mu(eps) = Phi(mu/2 - eps/mu) - e^eps Phi(-mu/2 - eps/mu).
Its votes bound more: with o* the outcome it gives almost surely, P(o != o*) <= a and
Q(o != o*) <= b for every neighbour (Prop. 7 of 2018 for GNMax). For gamma = e^eps, the
hockey-stick divergence splits over {o*} and the rest (the q-bound pair):

    delta(eps) <= min(delta_mu(eps), (1 - gamma (1 - b))_+ + R(eps; a)),
    R(eps; a) = sup_{p <= a} p - gamma Phi(Phi^-1(p) - mu),

since a mu-GDP pair has Q(S) >= Phi(Phi^-1(P(S)) - mu) for every set S; the supremand is
concave in p, maximal at p* = Phi(mu/2 - eps/mu), where it is delta_mu(eps). The other
direction swaps a and b, and below eps = 0 a profile is also at most
1 - gamma + gamma delta_other(-eps) (the identity of a pair's two profiles).

A profile bounded on the grid eps_i = i h is convex in gamma, so the chords of the lower
convex hull of the bounds lie above it: the privacy-loss distribution with atoms at the
hull's vertices has exactly that piecewise-linear profile (Doroshenko, Ghazi, Kamath,
Kumar and Manurangsi 2022, "Connect the Dots") and dominates the query's pair. Dominating
pairs compose (tensorisation of the Blackwell order), so the run's privacy-loss
distribution is the convolution of the queries', computed by one FFT product
(``pate_cli.core.pld_compose``), with every rounding and the window's tails charged to
delta.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray
from scipy.special import log_ndtr, ndtri_exp

from pate_cli.core.exact import log_delta_gaussian
from pate_cli.core.pld_compose import TAIL_SHARE, Pessimistic, compose_epsilon
from pate_cli.core.theorem6 import NumericalRangeError

FloatArray = NDArray[np.float64]
IntArray = NDArray[np.int64]

_U = 2.0**-53  # the unit roundoff of a double
# A computed profile value is moved up by this much of itself (the formulas' few roundings).
_INFLATE = 1e-12
# Relative margin of a hull over its bounds, for the roundings of its atoms.
_HULL_MARGIN = 1e-10
# The grid step of the losses (``auto_grid``'s largest) and the width of the cells of
# log a and log b that group the queries.
DEFAULT_GRID = 1e-3
DEFAULT_CELL = 1e-2
# The finest grid step ``auto_grid`` gives: the composed window spans some 3e-3 (Chernoff's
# bound at theta 1e4) whatever the noise, so a finer step only makes it longer (a coarser
# one is as sound, only less tight).
FINEST_GRID = 1e-7
# The largest loss a grid may reach: the profiles are read at gamma = e^loss, a double
# below e^709 (with room for the products with it).
LARGEST_LOSS = 700.0


@dataclass(frozen=True)
class PldEpsilon:
    """A run's epsilon from its privacy-loss distributions, both directions."""

    epsilon: float
    """The larger of remove's and add's: an upper bound on the run's data-dependent epsilon."""
    remove: float
    add: float
    grid: float
    queries: int
    groups: int


# ----------------------------------------------------------------------------- profiles


def gaussian_profile(mu: float, eps: FloatArray) -> FloatArray:
    """Upper bounds on delta_mu(eps) of mu-Gaussian DP (Corollary 2.13), at every eps.

    delta = Phi(-z) (1 - e^x), z = |eps|/mu - mu/2, x = |eps| + log Phi(-z - mu) - log Phi(-z)
    <= 0, with x moved down by its roundings' bound; where that bound is not small against
    |x| (the two terms nearly cancel), :func:`~pate_cli.core.exact.log_delta_gaussian` (never
    below by a rounding). Below 0: 1 - e^eps + e^eps delta_mu(-eps) (the pair is symmetric).
    Shapes: (I,) -> (I,).
    """
    eps = np.asarray(eps, dtype=np.float64)
    if not mu > 0:
        return np.where(eps < 0, -np.expm1(np.minimum(eps, 0.0)), 0.0)
    size = np.abs(eps)
    # A z past the double range (mu tiny against eps) leaves x or its slack not finite:
    # the careful bound below takes those.
    with np.errstate(over="ignore", divide="ignore", invalid="ignore"):
        z = size / mu - mu / 2
        log_far, log_near = log_ndtr(-z - mu), log_ndtr(-z)
        x = size + log_far - log_near
        slack = 8 * _U * (size + np.abs(log_far) + np.abs(log_near) + (np.abs(z) + mu + 1) ** 2)
        upper = np.exp(log_near) * -np.expm1(np.minimum(x - slack, 0.0))
    careful = ~(slack < 1e-6 * np.abs(x))
    for index in np.flatnonzero(careful):
        upper[index] = math.exp(log_delta_gaussian(float(size[index]), mu))
    negative = eps < 0
    upper[negative] = -np.expm1(eps[negative]) + np.exp(eps[negative]) * upper[negative]
    return np.minimum(1.0, upper * (1 + _INFLATE))


def _rest(log_a: FloatArray, mu: float, eps: FloatArray, gaussian: FloatArray) -> FloatArray:
    """Upper bounds on R(eps; a) = sup_{p <= a} p - e^eps Phi(Phi^-1(p) - mu) (module
    docstring). Shapes: log_a (G, 1), eps (I,) -> (G, I)."""
    log_star = log_ndtr(mu / 2 - eps / mu)  # p*, where the supremum is delta_mu itself
    below = log_a < log_star + math.log1p(-1e-9)  # a clearly below p*: the supremand at a
    z = ndtri_exp(np.minimum(log_a, 0.0))
    log_shifted = log_ndtr(z - mu)
    # R = a (1 - e^x), x = eps + log Phi(z - mu) - log a <= 0; x's roundings (its three
    # terms, and z's through log Phi's slope |z - mu| + 1) bound it from below.
    x = eps + log_shifted - log_a
    slack = 8 * _U * (np.abs(eps) + np.abs(log_shifted) + np.abs(log_a) + (np.abs(z) + 1) ** 2)
    with np.errstate(over="ignore", invalid="ignore"):
        at_a = np.exp(log_a) * -np.expm1(np.minimum(x - slack, 0.0)) * (1 + _INFLATE)
    return np.where(below, np.minimum(at_a, gaussian), gaussian)


def _one_direction(
    log_a: FloatArray, log_b: FloatArray, mu: float, eps: FloatArray, gaussian: FloatArray
) -> FloatArray:
    """The q-bound on delta_{P||Q}(eps) at every eps, P's rest at most a, Q's at most b:
    min(delta_mu, (1 - gamma (1 - b))_+ + R(eps; a)). Shapes: (G,), (G,), (I,) -> (G, I)."""
    gamma = np.exp(eps)
    b = np.exp(log_b)[:, None]
    # 1 - gamma (1 - b) = gamma b - (gamma - 1), each part's rounding moved up.
    top = gamma * b - np.expm1(eps)
    top = np.maximum(top + 4 * _U * (gamma * b + np.abs(np.expm1(eps))), 0.0)
    rest = _rest(log_a[:, None], mu, eps, gaussian)
    return np.minimum(gaussian, (top + rest) * (1 + _INFLATE))


def qbound_profiles(
    log_a: FloatArray, log_b: FloatArray, mu: float, eps: FloatArray
) -> tuple[FloatArray, FloatArray]:
    """Upper bounds on each query's remove (P = M(n)) and add (Q = M(n')) profiles, worst
    case over its neighbours, on a grid ``eps`` symmetric about 0 (eps[i] = -eps[-1 - i]).

    ``log_a``: log of a bound on P(o != o*); ``log_b``: on Q(o != o*) for every
    neighbour. Below eps = 0 each direction is also at most 1 - gamma + gamma (the other
    direction at -eps). Shapes: (G,), (G,), (I,) -> (G, I), (G, I).
    """
    eps = np.asarray(eps, dtype=np.float64)
    gaussian = gaussian_profile(mu, eps)
    remove = _one_direction(log_a, log_b, mu, eps, gaussian)
    add = _one_direction(log_b, log_a, mu, eps, gaussian)
    _mirror(remove, add, eps)
    return remove, add


def confident_profiles(
    log_p: FloatArray,
    log_low: FloatArray,
    log_high: FloatArray,
    log_a: FloatArray,
    log_b: FloatArray,
    mu: float,
    mu_joint: float,
    eps: FloatArray,
) -> tuple[FloatArray, FloatArray]:
    """Upper bounds on the remove and add profiles of a query with a threshold step:
    answered with probability p (P) and p' in [low, high] (every neighbour), then a
    Gaussian noisy max with q-bounds a, b (mu-GDP); the whole is mu_joint-GDP.

    Its outcomes are abstain and the answers, so for any S (Algorithm 1 of 2018):
    delta_{P||Q}(gamma) = ((1 - p) - gamma (1 - p'))_+ + p delta_gn(gamma p' / p), and
    delta_{Q||P}(gamma) = ((1 - p') - gamma (1 - p))_+ + p' delta'_gn(gamma p / p');
    each term is bounded at its own worst p' (the first grows with p' in remove, the
    second falls), and delta_gn, which falls with gamma, is read at the grid point at or
    below. Shapes: (G,) each, eps (I,) a grid symmetric about 0 -> (G, I), (G, I).
    """
    eps = np.asarray(eps, dtype=np.float64)
    step = float(eps[1] - eps[0])
    # The answer step's profiles on the grid, extended below to the largest shift.
    shifts, flat, pad = _shifts(log_p, log_low, log_high, step, eps.size)
    below = eps[0] - step * np.arange(pad, 0, -1)
    wide = np.concatenate((below, eps))
    gaussian = gaussian_profile(mu, wide)
    answer_remove = _one_direction(log_a, log_b, mu, wide, gaussian)
    answer_add = _one_direction(log_b, log_a, mu, wide, gaussian)
    columns = pad + np.arange(eps.size)
    gamma = np.exp(eps)
    p, low, high = (np.exp(v)[:, None] for v in (log_p, log_low, log_high))
    q_not, low_not, high_not = (
        -np.expm1(v)[:, None] for v in (log_p, log_low, log_high)
    )  # 1 - p and the like, each from its own function
    rows = np.arange(log_p.size)[:, None]
    slack = 4 * _U * (1 + gamma)
    # Remove: (1 - p) - gamma (1 - p') at p' = high; the answer at gamma low / p.
    first = np.maximum(q_not - gamma * high_not + slack, 0.0)
    read = answer_remove[rows, columns[None, :] - shifts[0][:, None]]
    remove = first + p * np.where(flat[0][:, None], 1.0, read)
    # Add: (1 - p') - gamma (1 - p) at p' = low; p' times the answer at gamma p / p', high.
    first = np.maximum(low_not - gamma * q_not + slack, 0.0)
    read = answer_add[rows, columns[None, :] - shifts[1][:, None]]
    add = first + high * np.where(flat[1][:, None], 1.0, read)
    joint = gaussian_profile(mu_joint, eps)
    remove = np.minimum(remove * (1 + _INFLATE), joint)
    add = np.minimum(add * (1 + _INFLATE), joint)
    _mirror(remove, add, eps)
    return remove, add


# Below eps = -_FLAT_LOSS every profile is within e^-40 of 1 (delta >= 1 - e^eps, and at most
# 1): a read that far below the grid is 1, and the grid is extended by _MOST_PAD steps at most.
_FLAT_LOSS = 40.0
_MOST_PAD = 1 << 16


def _shifts(
    log_p: FloatArray, log_low: FloatArray, log_high: FloatArray, step: float, size: int
) -> tuple[list[IntArray], list[NDArray[np.bool_]], int]:
    """How many grid steps below gamma each query's answer profile is read (remove: at gamma
    low / p, add: at gamma p / high), whether it is read as 1 instead (further below than
    _FLAT_LOSS, or _MOST_PAD steps, past the grid), and the steps the grid is extended by.

    Each log ratio (<= 0) is moved down by its roundings (log Phi of a far tail keeps few
    digits of a difference) and read one step lower still. Where both of its terms are
    -inf, its weight (p, or high) is 0 and any column does."""
    cap = min(math.ceil(_FLAT_LOSS / step), _MOST_PAD) + size
    shifts, flat = [], []
    for upper, lower in ((log_low, log_p), (log_p, log_high)):
        with np.errstate(invalid="ignore"):
            ratio = np.minimum(upper - lower, 0.0) - 4 * _U * (np.abs(upper) + np.abs(lower))
        ratio = np.where(np.isnan(ratio), 0.0, ratio)
        steps = np.ceil(-ratio / step - 1e-9) + 1
        flat.append(steps > cap)
        shifts.append(np.where(steps > cap, 1, steps).astype(np.int64))
    return shifts, flat, int(max(int(s.max()) for s in shifts))


def _mirror(remove: FloatArray, add: FloatArray, eps: FloatArray) -> None:
    """Below eps = 0, each direction is also at most 1 - gamma + gamma (the other at -eps):
    the identity of a pair's two profiles. In place. Shapes: (G, I), (G, I), (I,)."""
    negative = eps < 0
    gamma = np.exp(eps[negative])
    base = -np.expm1(eps[negative])
    for ours, theirs in ((remove, add), (add, remove)):
        mirrored = theirs[:, ::-1][:, negative]  # the other direction at -eps
        via = (base + gamma * mirrored) * (1 + _INFLATE) + 2 * _U
        ours[:, negative] = np.minimum(ours[:, negative], via)


# ----------------------------------------------------------------------------- one query


def connect_the_dots(first: int, profiles: FloatArray, grid: float) -> Pessimistic:
    """Each row's privacy-loss distribution whose profile is the lower convex hull (in
    gamma) of the row's bounds at losses (first + i) grid and of (gamma = 0, delta = 1).

    A convex profile at or below the bounds at the grid points is at or below that hull
    everywhere (the hull is the greatest convex function below the points), and the hull is
    exactly the profile of atoms at its vertices, each with P-mass x_k (slope after - slope
    before) (the kink there; Connect the Dots, Sec. 4). Beyond the last point the profile
    stays at its last value: the mass at +infinity. Shapes: profiles (G, I).
    """
    rows, size = profiles.shape
    x = np.concatenate(([0.0], np.exp((first + np.arange(size)) * grid)))
    y = np.concatenate((np.ones((rows, 1)), np.minimum(profiles, 1.0)), axis=1)
    # Non-increasing in gamma, as every profile is: raising a bound is safe.
    y[:, 1:] = np.maximum.accumulate(y[:, :0:-1], axis=1)[:, ::-1]
    bounds = y[:, 1:].copy()
    # The hull of bounds raised by a margin for the arithmetic below (slopes, atoms, the
    # check's sums), which the check against the bounds themselves then allows for.
    y[:, 1:] = np.minimum(y[:, 1:] * (1 + _HULL_MARGIN), 1.0)
    keep = _lower_hull(x, y)
    left, right = _neighbours(keep)
    columns = np.arange(size + 1)
    with np.errstate(invalid="ignore", divide="ignore"):
        before = (y - np.take_along_axis(y, left, 1)) / (x - x[left])
        after = (np.take_along_axis(y, right, 1) - y) / (x[right] - x)
    after = np.where(right == columns, 0.0, after)  # after the last vertex: flat
    atoms = np.where(keep & (columns > 0), np.maximum(x * (after - before), 0.0), 0.0)[:, 1:]
    last = size - np.argmax(keep[:, ::-1], axis=1)  # the last vertex (the last point)
    infinity = y[np.arange(rows), last].copy()
    return _settled(Pessimistic(first, atoms, infinity), keep[:, 1:], x[1:], bounds)


def _neighbours(keep: NDArray[np.bool_]) -> tuple[IntArray, IntArray]:
    """For every column, the nearest kept column before it and after it (itself at the
    ends). Shapes: (G, I) -> (G, I), (G, I)."""
    columns = np.arange(keep.shape[1])
    marked = np.where(keep, columns, -1)
    left = np.maximum.accumulate(np.concatenate((marked[:, :1], marked[:, :-1]), axis=1), axis=1)
    left = np.where(left < 0, columns, left)
    marked = np.where(keep, columns, keep.shape[1])
    shifted = np.concatenate((marked[:, 1:], marked[:, -1:]), axis=1)
    right = np.minimum.accumulate(shifted[:, ::-1], axis=1)[:, ::-1]
    right = np.where(right >= keep.shape[1], columns, right)
    return left.astype(np.int64), right.astype(np.int64)


def _lower_hull(x: FloatArray, y: FloatArray) -> NDArray[np.bool_]:
    """Per row, which points sorted by x are vertices of the lower convex hull (both ends
    kept), to within ``_HULL_TOLERANCE`` of each chord. A few rounds drop, all at once, every
    point above the chord of its nearest kept neighbours less that tolerance (a point above
    it is no vertex; one within it, on a stretch the roundings made ragged, leaves the chord
    that far below it at most, per round: far less than the hull's margin over its bounds,
    ``_HULL_MARGIN``); rows still changing after them finish by the monotone chain over
    their kept points. Shapes: (I,), (G, I) -> (G, I)."""
    keep = np.ones(y.shape, dtype=bool)
    inner = np.zeros(y.shape[1], dtype=bool)
    inner[1:-1] = True
    active = np.arange(y.shape[0])
    for _ in range(_HULL_ROUNDS):
        if not active.size:
            return keep
        kept, rows = keep[active], y[active]
        left, right = _neighbours(kept)
        y_left, y_right = np.take_along_axis(rows, left, 1), np.take_along_axis(rows, right, 1)
        with np.errstate(invalid="ignore", divide="ignore"):
            chord = y_left + (y_right - y_left) * ((x - x[left]) / (x[right] - x[left]))
        above = kept & inner & (rows > chord - _HULL_TOLERANCE * np.abs(chord))
        changed = above.any(axis=1)
        keep[active] = kept & ~above
        active = active[changed]
    for row in active:
        points = np.flatnonzero(keep[row])
        keep[row] = False
        keep[row, _monotone_chain(x[points], y[row, points], points)] = True
    return keep


_HULL_ROUNDS = 32
# Relative slack of the rounds' chord test: _HULL_ROUNDS of it stay far below _HULL_MARGIN.
_HULL_TOLERANCE = 1e-13


def _monotone_chain(x: FloatArray, y: FloatArray, index: IntArray) -> list[int]:
    """The lower hull's vertices (as ``index`` entries) of points sorted by x (Andrew 1979)."""
    hull: list[int] = []
    for i in range(x.size):
        while len(hull) >= 2:
            a, b = hull[-2], hull[-1]
            # b is dropped when it is not below the chord from a to i.
            if (x[b] - x[a]) * (y[i] - y[a]) - (y[b] - y[a]) * (x[i] - x[a]) <= 0:
                hull.pop()
            else:
                break
        hull.append(i)
    return [int(index[i]) for i in hull]


def _profile_at(pmf: Pessimistic, x: FloatArray) -> FloatArray:
    """delta(gamma) = infinity + sum_j w_j (1 - gamma / x_j)_+ at gamma = x (the atoms'
    positions), from two running sums from the top. Shapes: -> (G, I)."""
    masses = pmf.masses
    above = np.cumsum(masses[:, ::-1], axis=1)[:, ::-1]
    weighted = np.cumsum((masses / x)[:, ::-1], axis=1)[:, ::-1]
    return pmf.infinity[:, None] + (above - masses) - x * (weighted - masses / x)


def _settled(
    pmf: Pessimistic, vertices: NDArray[np.bool_], x: FloatArray, bounds: FloatArray
) -> Pessimistic:
    """The distributions with P-mass 1 exactly (each largest atom takes what the sums
    leave) and profiles at or above ``bounds`` at their vertices: a shortfall the roundings
    left is moved from the lowest atoms to +infinity (which raises delta everywhere)."""
    masses, infinity = pmf.masses, pmf.infinity
    rows = np.arange(masses.shape[0])
    for _ in range(8):
        top = np.argmax(masses, axis=1)
        masses[rows, top] = 0.0
        masses[rows, top] = np.maximum(1.0 - infinity - masses.sum(axis=1), 0.0)
        found = _profile_at(Pessimistic(pmf.lo, masses, infinity), x)
        short = np.maximum(np.max(np.where(vertices, bounds - found, 0.0), axis=1), 0.0)
        if not short.any():
            return Pessimistic(pmf.lo, masses, infinity)
        for row in np.flatnonzero(short):
            move = 2 * float(short[row]) + 4 * _U
            infinity[row] += move
            for index in np.flatnonzero(masses[row]):
                taken = min(move, float(masses[row, index]))
                masses[row, index] -= taken
                move -= taken
                if move <= 0:
                    break
    raise AssertionError("the pessimistic distribution did not settle above its bounds")


# ----------------------------------------------------------------------------- grids


def grid_for(mu: float, grid: float, tolerance: float) -> FloatArray:
    """A loss grid symmetric about 0, out to where delta_mu falls below ``tolerance``
    (every q-bound profile lies below delta_mu). Shapes: -> (2 L + 1,).

    Raises:
        NumericalRangeError: delta_mu is still above ``tolerance`` at ``LARGEST_LOSS`` (mu
            too large for the profiles' e^loss)."""
    past = NumericalRangeError(
        f"the privacy losses of {mu:.3g}-Gaussian DP reach past {LARGEST_LOSS:g} before "
        f"delta falls to {tolerance:.3g}: past the double range of e^loss"
    )
    last = 1
    while math.exp(log_delta_gaussian(last * grid, mu)) > tolerance:
        if last * grid > LARGEST_LOSS:
            raise past
        last *= 2
    low, high = last // 2, last
    while high - low > 1:
        middle = (low + high) // 2
        if math.exp(log_delta_gaussian(middle * grid, mu)) > tolerance:
            low = middle
        else:
            high = middle
    if high * grid > LARGEST_LOSS:
        raise past
    points: FloatArray = np.arange(-high, high + 1, dtype=np.float64) * grid
    return points


def auto_grid(mu: float, joint: float = 0.0) -> float:
    """The grid step for pairs of at most mu-GDP: 1e-3, or finer where the losses of one
    query spread less (a 32nd of mu, rounded down to 1, 2 or 5 times a power of ten):
    connect-the-dots' excess over the true profile shrinks with the step. ``FINEST_GRID`` at
    least, and a 2048th of ``joint`` (the mu of the whole query, whose losses the grid spans:
    some 8 joint mu, so about 16,000 steps each way at most)."""
    target = min(DEFAULT_GRID, max(mu / 32, joint / 2048, FINEST_GRID)) if mu > 0 else DEFAULT_GRID
    power = 10.0 ** math.floor(math.log10(target))
    return max(k * power for k in (1, 2, 5) if k * power <= target * (1 + 1e-12))


def loss_grid(mu: float, grid: float, delta: float, queries: int) -> FloatArray:
    """The loss grid of a run of ``queries`` queries, each pair mu-Gaussian DP at most: its
    ends (where the profiles are charged whole to +infinity) take at most a 1e-7 part of
    ``delta`` over the run."""
    return grid_for(mu, grid, delta * TAIL_SHARE / max(queries, 1))


def cells(
    log_a: FloatArray,
    log_b: FloatArray,
    width: float,
    floor: float,
    exact: FloatArray | None = None,
) -> tuple[FloatArray, FloatArray, IntArray, FloatArray]:
    """Queries grouped by their cells of (log a, log b), each rounded up to a multiple of
    ``width`` (the q-bound grows with both) and raised to ``floor`` at least, and by their
    value of ``exact`` (a threshold's margin) when given. Returns the cells' (log a, log b),
    each cell's number of queries and its ``exact`` value (0 without). Shapes: (Q,) -> (G,)."""
    columns = [np.zeros(log_a.size) if exact is None else np.asarray(exact, dtype=np.float64)]
    for values in (log_a, log_b):
        nudged = np.maximum(values + 1e-12 * (1 + np.abs(values)), floor)  # rounded up
        columns.append(np.ceil(nudged / width))
    unique, counts = np.unique(np.stack(columns, axis=1), axis=0, return_counts=True)
    ups = np.minimum(unique[:, 1:] * width, 0.0)
    return ups[:, 0], ups[:, 1], counts.astype(np.int64), unique[:, 0]


# ----------------------------------------------------------------------------- runs


def epsilon_from_profiles(
    first: int,
    remove: FloatArray,
    add: FloatArray,
    counts: IntArray,
    grid: float,
    delta: float,
) -> tuple[float, float]:
    """(remove's, add's) epsilon of a run whose g-th kind of query, ``counts[g]`` of them,
    has profiles at most ``remove[g]`` and ``add[g]`` at losses (first + i) grid.
    Shapes: remove, add (G, I), counts (G,)."""
    found = [
        compose_epsilon(connect_the_dots(first, profiles, grid), counts, grid, delta)
        for profiles in (remove, add)
    ]
    return found[0], found[1]


def qbound_epsilon(
    log_a: FloatArray,
    log_b: FloatArray,
    mu: float,
    delta: float,
    *,
    grid: float | None = None,
    cell: float = DEFAULT_CELL,
) -> PldEpsilon:
    """The epsilon of a run of queries, each mu-Gaussian DP with P(o != o*) <= e^log_a and
    Q(o != o*) <= e^log_b for its every neighbour: the q-bound pairs (module docstring),
    grouped by their cells of (log a, log b) (rounded up), composed. Shapes: (Q,), (Q,)."""
    queries = int(log_a.size)
    grid = auto_grid(mu) if grid is None else grid
    if queries == 0:
        return PldEpsilon(0.0, 0.0, 0.0, grid, 0, 0)
    tolerance = delta * TAIL_SHARE / queries
    cell_a, cell_b, counts, _ = cells(log_a, log_b, cell, math.log(tolerance))
    eps = loss_grid(mu, grid, delta, queries)
    remove, add = qbound_profiles(cell_a, cell_b, mu, eps)
    first = -(eps.size // 2)
    eps_remove, eps_add = epsilon_from_profiles(first, remove, add, counts, grid, delta)
    return PldEpsilon(
        max(eps_remove, eps_add), eps_remove, eps_add, grid, queries, int(counts.size)
    )


def confident_epsilon(
    margins: FloatArray,
    shift: float,
    log_a: FloatArray,
    log_b: FloatArray,
    mu: float,
    mu_joint: float,
    delta: float,
    *,
    grid: float | None = None,
    cell: float = DEFAULT_CELL,
) -> PldEpsilon:
    """The epsilon of a run of queries with a threshold step of margin z = (h - T) / sigma1
    (answered with probability Phi(z); a neighbour moves z by at most ``shift``), each then
    a mu-GDP noisy max with q-bounds a, b (:func:`confident_profiles`); grouped by their
    margin and their cells of (log a, log b), composed. Shapes: (Q,) each."""
    queries = int(margins.size)
    grid = auto_grid(mu) if grid is None else grid
    if queries == 0:
        return PldEpsilon(0.0, 0.0, 0.0, grid, 0, 0)
    tolerance = delta * TAIL_SHARE / queries
    cell_a, cell_b, counts, z = cells(log_a, log_b, cell, math.log(tolerance), margins)
    eps = loss_grid(mu_joint, grid, delta, queries)
    remove, add = confident_profiles(
        log_ndtr(z), log_ndtr(z - shift), log_ndtr(z + shift), cell_a, cell_b, mu, mu_joint, eps
    )
    first = -(eps.size // 2)
    found = epsilon_from_profiles(first, remove, add, counts.astype(np.int64), grid, delta)
    return PldEpsilon(max(found), found[0], found[1], grid, queries, int(counts.size))

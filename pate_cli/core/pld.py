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
delta. The hulls are ``pate_cli.core.pld_hull``'s.

Queries are grouped by their cells of (log a, log b) and their threshold margin; where the
cells are many (a few candidates per query: q depends on every count), they are merged
within a work budget into the larger log a and log b (``pate_cli.core.pld_groups``), which
only raises each member's pair. The profiles and hulls are worked on ``_ROWS`` kinds at a
time, so that the memory is the grid's times that, and the work's progress is told to an
``advance`` hook as it goes.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray
from scipy.special import log_ndtr, ndtri_exp

from pate_cli.core.exact import log_delta_gaussian
from pate_cli.core.pld_compose import TAIL_SHARE, Pessimistic, compose_epsilon
from pate_cli.core.pld_groups import within_budget
from pate_cli.core.pld_hull import connect_the_dots
from pate_cli.core.theorem6 import NumericalRangeError

FloatArray = NDArray[np.float64]
IntArray = NDArray[np.int64]

_U = 2.0**-53  # the unit roundoff of a double
# A computed profile value is moved up by this much of itself (the formulas' few roundings).
_INFLATE = 1e-12
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


Advance = Callable[[float], None]
"""advance(share): called as a run's work proceeds, with the share of it just done (the
shares of a run sum to 1)."""

# Shares of a run's work: the cells and their merging, the profiles, then per direction the
# hulls and the composition (as measured on 50,000 queries of 450 kinds).
_SHARE_CELLS, _SHARE_PROFILES, _SHARE_HULLS = 0.1, 0.1, 0.15
_SHARE_COMPOSE = (1 - _SHARE_CELLS - _SHARE_PROFILES) / 2 - _SHARE_HULLS
PROFILED = 1 - _SHARE_CELLS - _SHARE_PROFILES
"""The share of a run's work :func:`epsilon_from_profiles` tells (the hulls, the
compositions): what is left once the profiles are made."""
# Kinds of query whose profiles and hulls are worked on at once: the work's memory is some
# ten arrays of this many rows times the loss grid, whatever the number of kinds.
_ROWS = 128


def epsilon_from_profiles(
    first: int,
    remove: FloatArray,
    add: FloatArray,
    counts: IntArray,
    grid: float,
    delta: float,
    advance: Advance | None = None,
) -> tuple[float, float]:
    """(remove's, add's) epsilon of a run whose g-th kind of query, ``counts[g]`` of them,
    has profiles at most ``remove[g]`` and ``add[g]`` at losses (first + i) grid, the
    hulls ``_ROWS`` kinds at a time. Shapes: remove, add (G, I), counts (G,)."""
    tick = advance or _ignore
    found = []
    for profiles in (remove, add):
        parts = []
        for start in range(0, profiles.shape[0], _ROWS):
            parts.append(connect_the_dots(first, profiles[start : start + _ROWS], grid))
            tick(_SHARE_HULLS * parts[-1].masses.shape[0] / profiles.shape[0])
        masses = np.concatenate([part.masses for part in parts])
        infinity = np.concatenate([part.infinity for part in parts])
        found.append(compose_epsilon(Pessimistic(first, masses, infinity), counts, grid, delta))
        tick(_SHARE_COMPOSE)
    return found[0], found[1]


def _ignore(share: float) -> None:
    """No progress to show."""


def _by_rows(
    profiles: Callable[[slice], tuple[FloatArray, FloatArray]], rows: int, size: int
) -> tuple[FloatArray, FloatArray]:
    """``profiles(rows)`` for ``_ROWS`` kinds at a time, into two (rows, size) arrays: the
    profiles' temporaries are those of a block, not of the whole run."""
    remove, add = np.empty((rows, size)), np.empty((rows, size))
    for start in range(0, rows, _ROWS):
        block = slice(start, min(start + _ROWS, rows))
        remove[block], add[block] = profiles(block)
    return remove, add


def qbound_epsilon(
    log_a: FloatArray,
    log_b: FloatArray,
    mu: float,
    delta: float,
    *,
    grid: float | None = None,
    cell: float = DEFAULT_CELL,
    advance: Advance | None = None,
) -> PldEpsilon:
    """The epsilon of a run of queries, each mu-Gaussian DP with P(o != o*) <= e^log_a and
    Q(o != o*) <= e^log_b for its every neighbour: the q-bound pairs (module docstring),
    grouped by their cells of (log a, log b) (rounded up), merged within a work budget
    (``pate_cli.core.pld_groups``: each pair only raised), composed. ``advance``: told of
    the work as it is done (:data:`Advance`). Shapes: (Q,), (Q,)."""
    queries = int(log_a.size)
    grid = auto_grid(mu) if grid is None else grid
    if queries == 0:
        return PldEpsilon(0.0, 0.0, 0.0, grid, 0, 0)
    tolerance = delta * TAIL_SHARE / queries
    cell_a, cell_b, counts, _ = cells(log_a, log_b, cell, math.log(tolerance))
    eps = loss_grid(mu, grid, delta, queries)
    cell_a, cell_b, counts, _ = within_budget(
        cell_a, cell_b, counts, np.zeros(counts.size), mu, eps.size
    )
    tick = advance or _ignore
    tick(_SHARE_CELLS)
    remove, add = _by_rows(
        lambda rows: qbound_profiles(cell_a[rows], cell_b[rows], mu, eps), counts.size, eps.size
    )
    tick(_SHARE_PROFILES)
    first = -(eps.size // 2)
    eps_remove, eps_add = epsilon_from_profiles(first, remove, add, counts, grid, delta, advance)
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
    advance: Advance | None = None,
) -> PldEpsilon:
    """The epsilon of a run of queries with a threshold step of margin z = (h - T) / sigma1
    (answered with probability Phi(z); a neighbour moves z by at most ``shift``), each then
    a mu-GDP noisy max with q-bounds a, b (:func:`confident_profiles`); grouped by their
    margin and their cells of (log a, log b), merged within a margin and a work budget
    (``pate_cli.core.pld_groups``: each pair only raised), composed. ``advance``: told of
    the work as it is done (:data:`Advance`). Shapes: (Q,) each."""
    queries = int(margins.size)
    grid = auto_grid(mu) if grid is None else grid
    if queries == 0:
        return PldEpsilon(0.0, 0.0, 0.0, grid, 0, 0)
    tolerance = delta * TAIL_SHARE / queries
    cell_a, cell_b, counts, z = cells(log_a, log_b, cell, math.log(tolerance), margins)
    eps = loss_grid(mu_joint, grid, delta, queries)
    # Merged within a margin only; each merge weighed by how often the answer is given.
    cell_a, cell_b, counts, z = within_budget(
        cell_a, cell_b, counts, z, mu, eps.size, np.exp(log_ndtr(z))
    )
    tick = advance or _ignore
    tick(_SHARE_CELLS)
    log_p, log_low, log_high = log_ndtr(z), log_ndtr(z - shift), log_ndtr(z + shift)

    def profiles(rows: slice) -> tuple[FloatArray, FloatArray]:
        return confident_profiles(
            log_p[rows], log_low[rows], log_high[rows], cell_a[rows], cell_b[rows], mu,
            mu_joint, eps,
        )  # fmt: skip

    remove, add = _by_rows(profiles, counts.size, eps.size)
    tick(_SHARE_PROFILES)
    first = -(eps.size // 2)
    found = epsilon_from_profiles(first, remove, add, counts.astype(np.int64), grid, delta, advance)
    return PldEpsilon(max(found), found[0], found[1], grid, queries, int(counts.size))

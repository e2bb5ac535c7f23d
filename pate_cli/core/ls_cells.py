"""GNMax's local sensitivity at every distance d, tabulated over cells: the release's default.

The exact walk (``ls_gnmax``, Algorithm 4 of Papernot et al. 2018, Appendix B) evaluates
the union bound q (Prop. 7) and LS~ (Prop. 13) at every step of every distinct row's walk.
This module bounds the same quantity from above with a fraction of that work. Write
T(g) = Pr[N(0, 2 sigma^2) >= g] = Phi(-g / (sqrt(2) sigma)), z(q) = Phi^-1(q / (C - 1)) and
delta = sqrt(2) / sigma (a neighbour moves z by at most delta, Prop. 13).

1. LS~ is read from a table over cells of z of width delta / k. A cell's entry is the
   sound LS~ (``ls_tilde``: arguments nudged against the user, the C6-free increment
   bound when C6 is not verified) at its top edge, then the running maximum over the cells
   below it. Under C6 LS~ is non-decreasing below q1 (Prop. 14), so an entry bounds LS~ at
   every q of its cell and below it; without C6 the increment bound is already a running
   maximum of the same kind. The published cost phi (C5: non-decreasing below q0) is read
   the same way, at the top edge rounded up, for the largest cost of a ball.
2. Right walk (q < q1). After d steps (leader v0 - d, runner-up v1 + d, the rest unchanged)
   q_d = T(g1 - 2 d) + sum_{j >= 2} T(g_j - d), with g the gaps to the leader; Algorithm 4
   takes it as the largest q within distance d. x -> Phi(Phi^-1(x) + s) is concave for
   s >= 0 (the Gaussian trade-off curve), so by Jensen the rest is at most
   (C - 2) Phi(z_r + d delta / 2), z_r = Phi^-1(r / (C - 2)) and r = sum_{j >= 2} T(g_j).
   z_r is rounded up to a multiple of delta / (2 k_r), so the bound is a function of the
   whole gap g1 and one grid index: rows sharing both share every step, and the bound at
   step d is read from a table of log Phi at index i_r + d k_r. Both terms grow with d;
   from the first step where the bound reaches q1 (or the runner-up would pass the leader)
   the row is on the plateau, LS~'s largest value.
3. Left walk (q > q0). The exact walk's states (their q decreases, its smallest q in the
   ball) with LS = DI - phi(B_L(q)) read from a table whose entries sit at each cell's
   bottom edge (the function decreases in q), made non-increasing by a running maximum
   from above. From the first state at or below q0, the plateau.

Each bound is at least the exact walk's at the same distance (rows share, never split, a
cell), so the released epsilon is never below the exact walk's; the tests hold both to
brute force over small histograms. The looseness is one cell of LS~ (1/k of a step) plus
Jensen's on the rest of the right walk, which is small when the runner-up dominates.

Shapes: Q queries, C classes, M teachers (distances d = 0 .. M-1).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from functools import partial

import numpy as np
from numpy.typing import ArrayLike, NDArray
from scipy.special import log_ndtr, ndtri_exp

from pate_cli.core._common import (
    _ENTRY_CHUNK,
    _PAIR_CHUNK,
    _as_integer_votes,
    _call,
    _check_num_teachers,
    _check_order,
    _check_positive,
    _ordered_map,
)
from pate_cli.core.compact import Compact, narrow
from pate_cli.core.gnmax import rdp_gnmax_data_independent
from pate_cli.core.ls_gnmax import (
    GroupPlan,
    PlanSpan,
    WalkChunk,
    _canonical_rows,
    _Segments,
    _walk_lengths,
    _WalkEvaluator,
    walk_plan,
)
from pate_cli.core.ls_tilde import _GnmaxSensitivity, _nudge

# Cells of LS~ per neighbour step of z: the bound exceeds the walk's by about 1/k of a step.
_CELLS_PER_STEP = 32
# At most this many cells per table: a wider range gets wider cells (looser, still sound).
_MAX_CELLS = 1 << 15
# Grid points of the right walk's rest per half step of z (its own step is delta / 2).
_REST_PER_STEP = 16
# The rest's z at most this low: below it Phi underflows far under any head term.
_LOWEST_Z = -38.0


@dataclass(frozen=True)
class _ZTable:
    """Values over cells of z: cell c >= 1 is (low + (c - 1) width, low + c width], cell 0
    is everything at or below ``low``, the last cell everything above its bottom edge."""

    low: float
    width: float
    values: NDArray[np.float64]

    def cells(self, logq: NDArray[np.float64], log_c1: float) -> NDArray[np.intp]:
        """The cell of each log q (q = (C - 1) Phi(z))."""
        z = ndtri_exp(np.minimum(logq - log_c1, 0.0))
        with np.errstate(invalid="ignore", over="ignore"):
            position = np.floor((z - self.low) / self.width) + 1
        # A NaN (none is expected) reads the largest entry, never a smaller one.
        largest = float(np.argmax(self.values))
        position = np.nan_to_num(position, nan=largest, neginf=0.0, posinf=self.values.size - 1)
        return np.clip(position, 0, self.values.size - 1).astype(np.intp)


def _z_edges(low: float, high: float, step: float) -> tuple[float, NDArray[np.float64]]:
    """(width, edges low .. >= high) of cells of about step / _CELLS_PER_STEP."""
    width = max(step / _CELLS_PER_STEP, (high - low) / _MAX_CELLS, 1e-300)
    count = max(1, math.ceil((high - low) / width))
    return width, low + width * np.arange(count + 1, dtype=np.float64)


@dataclass(frozen=True)
class _Tables:
    """LS~ and the largest cost of the right walk, and LS of the left walk, over z-cells."""

    right_ls: _ZTable
    right_cost: NDArray[np.float64]
    left_ls: _ZTable | None
    log_c1: float
    independent: float  # Prop. 8's cost: the largest cost of a left state's ball

    @classmethod
    def build(cls, params: _GnmaxSensitivity, lowest_logq: float, left: bool) -> _Tables:
        """Tables for right states of log q at least ``lowest_logq``; ``left``: also the
        left walk's."""
        log_c1 = math.log(params.num_classes - 1)
        delta = math.sqrt(2) / params.sigma

        def z_of(logq: float) -> float:
            return float(ndtri_exp(np.array([min(logq - log_c1, 0.0)]))[0])

        z1 = z_of(params.logq1)
        low = min(max(z_of(lowest_logq), _LOWEST_Z - 2.0), z1) - delta
        width, edges = _z_edges(low, z1 + delta, delta)
        logq = np.minimum(log_c1 + log_ndtr(edges), params.log_cap)
        ls, cost = params.ls_and_cost(logq, np.zeros(logq.size, dtype=bool))
        right_ls = _ZTable(low, width, np.maximum.accumulate(ls))
        right_cost = np.maximum.accumulate(cost)
        left_ls = None
        if left:
            z0 = z_of(params.logq0)
            top = z_of(params.log_cap) + delta
            left_width, left_edges = _z_edges(z0 - delta, top, delta)
            # Entry c sits at cell c's bottom edge: the left walk's LS decreases in q.
            bottoms = np.concatenate(([left_edges[0]], left_edges[:-1]))
            logq = np.minimum(log_c1 + log_ndtr(bottoms), params.log_cap)
            values, _ = params.ls_and_cost(logq, np.ones(logq.size, dtype=bool))
            values = np.maximum.accumulate(values[::-1])[::-1]
            left_ls = _ZTable(z0 - delta, left_width, values)
        independent = rdp_gnmax_data_independent(params.sigma, np.array([params.order]))[0]
        return cls(right_ls, right_cost, left_ls, log_c1, float(independent))

    def largest(self, plateau: float) -> tuple[float, float]:
        """(LS, cost) no state's exceeds: every LS the walks read is an entry of a table or
        the plateau, every cost an entry of ``right_cost`` or Prop. 8's."""
        ls = max(float(self.right_ls.values.max()), plateau)
        if self.left_ls is not None:
            ls = max(ls, float(self.left_ls.values.max()))
        return ls, max(float(self.right_cost.max()), self.independent)


def plan_cells(
    sorted_rows: NDArray[np.int64], num_teachers: int, params: _GnmaxSensitivity, extra: int = 0
) -> GroupPlan:
    """Group the rows and lay out their states (``GroupPlan``): rows (R, C - extra) sorted
    non-increasing, ``extra`` zero-vote classes beyond them (``compact.narrow``)."""
    num_rows = sorted_rows.shape[0]
    leader = sorted_rows[:, 0]
    head_gap = leader - sorted_rows[:, 1]
    scale = math.sqrt(2) * params.sigma
    # log T(g) for whole gaps g = 0 .. the largest leader, as Prop. 7 evaluates it.
    largest = int(leader.max()) if num_rows else 0
    log_tail = log_ndtr(-np.arange(largest + 2, dtype=np.float64) / scale)
    log_rest = _log_rest(sorted_rows, extra, log_tail)
    logq = np.minimum(np.logaddexp(log_tail[head_gap], log_rest), params.log_cap)
    right = np.flatnonzero(logq < params.logq1)
    left = np.flatnonzero(logq > params.logq0)
    rest = _Rest.build(params, log_rest[right])
    # Right groups: rows of one head gap and one rest index share every state.
    span = int(rest.index.max()) - rest.lowest + 1 if right.size else 1
    keys = head_gap[right] * span + (rest.index - rest.lowest)
    group_key, right_group = np.unique(keys, return_inverse=True)
    group_gap, group_rest = np.divmod(group_key, span)
    num_right = group_key.size
    # Groups: the right groups, then every left row, then one group of plateau rows.
    group_of_row = np.full(num_rows, num_right + left.size, dtype=np.intp)
    group_of_row[right] = right_group.reshape(-1)
    group_of_row[left] = num_right + np.arange(left.size)
    walker = _WalkEvaluator(sorted_rows[left], params, extra) if left.size else None
    left_last = np.zeros(0, dtype=np.int64)
    if walker is not None:
        lengths = _walk_lengths(walker, np.arange(left.size), np.ones(left.size, dtype=bool))
        left_last = np.minimum(lengths, num_teachers - 1)
    lowest_logq = float(logq[right].min()) if right.size else params.logq1
    tables = _Tables.build(params, lowest_logq, left.size > 0)
    right_state = _RightState(group_gap, group_rest + rest.lowest, log_tail, rest, params)
    walks = _CellWalks(right_state, tables, walker, left_last + 1, num_teachers)
    num_groups = num_right + left.size + 1
    return GroupPlan(group_of_row, num_groups, walks.span, tables.largest(params.plateau))


class _CellWalks:
    """The tabulated plan's walks range by range of distances: the right groups' (each on
    the plateau from the first distance a scan finds, the scan going as far as the ranges
    asked for), the left rows' exact walks (their lengths known), and the group of plateau
    rows (on it from distance 0)."""

    def __init__(
        self,
        right: _RightState,
        tables: _Tables,
        walker: _WalkEvaluator | None,
        left_done: NDArray[np.int64],
        num_teachers: int,
    ) -> None:
        self.right, self.tables, self.walker = right, tables, walker
        self.left_done = left_done.astype(np.int64)
        self.scan = _PlateauScan(right, num_teachers)

    def span(self, start: int, stop: int) -> PlanSpan:
        """``GroupPlan.span``: the groups' first distances on the plateau (``stop`` where
        not before it), and their states at distances start .. stop-1, chunk by chunk."""
        self.right.rest.reach(stop)
        right_done = np.minimum(self.scan.advance(stop), stop)
        left_done = np.minimum(self.left_done, stop)
        done = np.concatenate([right_done, left_done, np.zeros(1, dtype=np.int64)])
        right_walks = _Segments(
            np.arange(right_done.size),
            np.full(right_done.size, start, dtype=np.int64),
            np.maximum(right_done - start, 0),
            np.zeros(right_done.size, dtype=bool),
        )
        left_walks = _Segments(
            np.arange(left_done.size),
            np.full(left_done.size, start, dtype=np.int64),
            np.maximum(left_done - start, 0),
            np.ones(left_done.size, dtype=bool),
        )
        return done, self._chunks(right_walks, left_walks)

    def _chunks(self, right: _Segments, left: _Segments) -> Iterator[Callable[[], WalkChunk]]:
        def thunks() -> Iterator[Callable[[], WalkChunk]]:
            for group, step, _ in right.chunks():
                yield partial(self.right.chunk, self.tables, group, step)
            for row, step, _ in left.chunks():
                assert self.walker is not None
                offset = right.row.size
                yield partial(_left_chunk, self.walker, self.tables, offset, row, step)

        # Little work (fewer states than a chunk) is one piece: no thread is started for it.
        if int(right.length.sum() + left.length.sum()) > _PAIR_CHUNK:
            yield from thunks()
        else:
            yield partial(_joined_chunks, list(thunks()))


def _joined_chunks(pieces: list[Callable[[], WalkChunk]]) -> WalkChunk:
    """The pieces' states as one chunk."""
    done = [piece() for piece in pieces]
    if not done:
        empty = np.zeros(0)
        return np.zeros(0, dtype=np.intp), np.zeros(0, dtype=np.int64), empty, empty
    group, step, ls, cost = (np.concatenate(parts) for parts in zip(*done, strict=True))
    return group, step, ls, cost


def _log_rest(
    sorted_rows: NDArray[np.int64], extra: int, log_tail: NDArray[np.float64]
) -> NDArray[np.float64]:
    """log r = log sum_{j >= 2} T(v0 - v_j) per row, ``extra`` zero-vote classes included."""
    num_rows, width = sorted_rows.shape
    out = np.full(num_rows, -math.inf)
    if width + extra <= 2:
        return out
    per_block = max(1, _ENTRY_CHUNK // width)
    for start in range(0, num_rows, per_block):
        block = sorted_rows[start : start + per_block]
        terms = log_tail[block[:, :1] - block[:, 2:]]
        if extra:
            zeros = log_tail[block[:, 0]] + math.log(extra)
            terms = np.concatenate([terms, zeros[:, None]], axis=1)
        out[start : start + block.shape[0]] = np.logaddexp.reduce(terms, axis=1)
    return out


class _Rest:
    """Jensen's bound of the right walk's rest: log((C - 2) Phi(z)) on the grid z = i width,
    each row's z_r rounded up to ``index``; a step of the walk adds ``_REST_PER_STEP``. The
    grid holds i = lowest .. the largest index plus those steps for the distances walked so
    far (``reach``): it is sized by the rows' spread and the walk, not by M."""

    def __init__(
        self, index: NDArray[np.int64], lowest: int, width: float, log_classes: float | None
    ) -> None:
        self.index = index  # per right row
        self.lowest = lowest
        self.width = width
        self.log_classes = log_classes  # log(C - 2); None: two classes, no rest
        self.values = np.zeros(0)  # at i = lowest .. lowest + size - 1

    @classmethod
    def build(cls, params: _GnmaxSensitivity, log_rest: NDArray[np.float64]) -> _Rest:
        num_rest = params.num_classes - 2
        width = math.sqrt(2) / params.sigma / 2 / _REST_PER_STEP
        floor = math.floor(_LOWEST_Z / width)
        if num_rest == 0:  # two classes: no rest
            return cls(np.full(log_rest.size, floor, dtype=np.int64), floor, width, None)
        log_classes = math.log(num_rest)
        z = ndtri_exp(np.minimum(log_rest - log_classes, 0.0))  # -inf: no rest at all
        index = np.maximum(np.ceil(z / width), floor).astype(np.int64)
        lowest = int(index.min()) if index.size else floor
        return cls(index, lowest, width, log_classes)

    def reach(self, distances: int) -> None:
        """Extend the grid to every row's distances 0 .. ``distances`` - 1."""
        highest = int(self.index.max()) if self.index.size else self.lowest
        size = highest - self.lowest + _REST_PER_STEP * (distances - 1) + 1
        if size <= self.values.size:
            return
        new = np.arange(self.values.size, size, dtype=np.float64)
        if self.log_classes is None:
            more = np.full(new.size, -math.inf)
        else:
            more = self.log_classes + log_ndtr(self.width * (self.lowest + new))
        self.values = np.concatenate([self.values, more])

    def at(self, index: NDArray[np.int64], distance: NDArray[np.int64]) -> NDArray[np.float64]:
        return self.values[index - self.lowest + _REST_PER_STEP * distance]


@dataclass(frozen=True)
class _RightState:
    """The right groups (head gap, rest index) and the bound of log q at their steps."""

    gap: NDArray[np.int64]
    rest_index: NDArray[np.int64]
    log_tail: NDArray[np.float64]
    rest: _Rest
    params: _GnmaxSensitivity

    def logq(self, group: NDArray[np.intp], distance: NDArray[np.int64]) -> NDArray[np.float64]:
        """The bound of log q at step ``distance`` (broadcast with ``group``), capped."""
        head = self.log_tail[np.maximum(self.gap[group] - 2 * distance, 0)]
        bound = np.logaddexp(head, self.rest.at(self.rest_index[group], distance))
        return np.minimum(bound, self.params.log_cap)

    def chunk(self, tables: _Tables, group: NDArray[np.intp], step: NDArray[np.int64]) -> WalkChunk:
        cells = tables.right_ls.cells(_nudge(self.logq(group, step), 1), tables.log_c1)
        return group, step, tables.right_ls.values[cells], tables.right_cost[cells]


class _PlateauScan:
    """Each right group's first distance on the plateau: where the bound reaches q1, or where
    the runner-up would pass the leader (both terms grow with d), at most M. The scan goes
    distance by distance, as far as it is asked (``advance``), from where it stopped."""

    def __init__(self, state: _RightState, num_teachers: int) -> None:
        self.state = state
        self.done = np.minimum(state.gap // 2 + 1, num_teachers).astype(np.int64)
        self.active = np.arange(state.gap.size)
        self.position, self.block = 0, 32

    def advance(self, stop: int) -> NDArray[np.int64]:
        """The groups' first distances on the plateau, found for those below ``stop`` (the
        rest: where the runner-up would pass the leader, or M). The rest's grid must reach
        ``stop``."""
        done, logq1 = self.done, self.state.params.logq1
        while self.active.size and self.position < stop:
            active = self.active
            size = max(1, min(self.block, _ENTRY_CHUNK // active.size, stop - self.position))
            distance = np.arange(self.position, self.position + size)
            reached = self.state.logq(active[:, None], distance[None, :]) >= logq1
            hit = reached.any(axis=1)
            first = self.position + np.argmax(reached, axis=1)
            done[active[hit]] = np.minimum(done[active[hit]], first[hit])
            self.active = active[~hit & (done[active] > distance[-1] + 1)]
            self.position, self.block = self.position + size, self.block + self.block // 2
        return done


def _left_chunk(
    walker: _WalkEvaluator,
    tables: _Tables,
    offset: int,
    row: NDArray[np.intp],
    step: NDArray[np.int64],
) -> WalkChunk:
    """The exact left walk's states, LS read at their cells' bottom edges."""
    assert tables.left_ls is not None
    state = walker.state(row, step, np.ones(row.size, dtype=bool))
    # log q nudged down: rounding never lifts a state into a higher cell.
    cells = tables.left_ls.cells(_nudge(state.logq, -1), tables.log_c1)
    return offset + row, step, tables.left_ls.values[cells], np.full(row.size, tables.independent)


def local_sensitivity_gnmax(
    counts: ArrayLike | Compact,
    num_teachers: int,
    sigma: float,
    order: float,
    *,
    reference: bool = False,
    walk: bool = False,
    increments_verified: bool = False,
) -> NDArray[np.float64]:
    """Upper bounds on GNMax's local sensitivity at distance d, per query (dense counts, or
    compact ones: ``compact.narrow``).

    Algorithms 3-5 (Props. 13, 14, 19, Theorem 20), Papernot et al. 2018: entry d
    bounds the local sensitivity of the published per-query bound (``rdp_gnmax``) over
    every histogram within distance d, from the histogram reached after d steps of the
    walk (towards q1 from below, towards q0 from above, each the extreme q at that
    distance); after the walk, and for q in [q1, q0], it is the plateau. The argument is
    in ``_GnmaxSensitivity``. With a single class the outcome is fixed: every entry is 0.

    ``reference=True`` is the reference's ``compute_local_sensitivity_bounds_gnmax``
    (LS~ of beta(q), the step that leaves (q0, 1] keeping its own LS~), which can be
    below the true local sensitivity at small sigma.

    Args:
        counts: integer vote counts.
        num_teachers: M, the number of distances (d = 0 .. M-1).
        sigma: GNMax noise standard deviation.
        order: Renyi order.
        reference: the reference's bounds instead of the sound ones.
        walk: the exact walk's sound bounds instead of the default tabulated ones
            (``ls_cells``: never below them, far cheaper).
        increments_verified: C6 holds at this order (``check_conditions``); without it
            the sound bounds add a cell-wise bound that needs no C6.

    Returns:
        Local-sensitivity bounds per query and distance.

    Raises:
        ValueError: non-integer or negative counts, sigma <= 0, order <= 1, M < 1.

    Shapes: counts (Q, C) -> (Q, M).
    """
    votes, extra = narrow(counts)
    votes = _as_integer_votes(votes)
    num_teachers = _check_num_teachers(num_teachers)
    sigma = _check_positive("sigma", sigma)
    order = _check_order(order)
    num_queries, num_classes = votes.shape[0], votes.shape[1] + extra
    if num_classes == 1 or num_queries == 0:
        return np.zeros((num_queries, num_teachers))
    params = _GnmaxSensitivity.build(
        sigma, order, num_classes, reference=reference, increments_verified=increments_verified
    )
    unique, inverse = _canonical_rows(votes)
    build = walk_plan if walk or reference else plan_cells
    plan = build(unique, num_teachers, params, extra)
    table = np.full((plan.num_groups, num_teachers), params.plateau)
    _, chunks = plan.span(0, num_teachers)
    for group, step, ls, _ in _ordered_map(_call, chunks):
        table[group, step] = ls
    return table[plan.group_of_row[inverse]]

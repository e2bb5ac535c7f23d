"""GNMax's local sensitivity at every distance d: the walks of Algorithm 4.

Papernot et al. 2018, Appendix B, Algorithms 4-5 (Props. 14, 19, Theorem 20): the bound at
distance d is LS~(q(n_d)) (``ls_tilde``), with n_d the histogram reached after d steps of a
walk on the sorted votes: "right" (q < q1) moves one vote from the leader to the runner-up,
"left" (q > q0) moves one vote from the largest non-leader to the leader. Both walks change
log q monotonically, so the walk length is found by a bisection that runs for all rows at
once. The state at step d has a closed form (left: the non-leaders are levelled from the
top, "water filling"), so every (row, d) pair is evaluated independently. Vote counts are
integers, hence every gap is an integer and log Pr[N(0, 2 sigma^2) >= gap] comes from a
table. Prop. 7's union bound is summed relative to its largest term, over distinct
non-leader counts with multiplicities, in linear space on a shifted table, and only over
classes whose term is not negligible (a rigorous Gaussian-tail bound, ``_TAIL_LOG_CUTOFF``,
prunes terms below ~1e-19). On the right walk the steps where even the third-largest count
is negligible form an interval in closed form; there q is the runner-up term alone and LS~
is read from a table per integer gap. Equal sorted rows are evaluated once. The result
equals the reference's union bound to a few ulps.

Shapes: Q queries, C classes, M teachers (distances d = 0 .. M-1).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from functools import partial
from typing import Any, Literal

import numpy as np
from numpy.typing import NDArray
from scipy.special import log_ndtr

from pate_cli.core._common import _PAIR_CHUNK, _ordered_map
from pate_cli.core.ls_tilde import _GnmaxSensitivity

# A non-leader class whose union-bound term is below exp(-45) * 1.5 of the head
# term is dropped: even 1000 such terms change q by < 1e-16 relative.
_TAIL_LOG_CUTOFF = 45.0
# Tail sums run in linear space on exp(log-tail + _LINEAR_SHIFT) when the head term
# is at least exp(_LINEAR_MIN_LOG_HEAD), so it stays a normal double.
_LINEAR_SHIFT = 650.0
_LINEAR_MIN_LOG_HEAD = -1350.0


class _RowSearch:
    """Row-wise searchsorted on (R, W) rows, each non-decreasing, through one flat key array."""

    def __init__(self, ascending_rows: NDArray[np.float64]) -> None:
        num_rows, width = ascending_rows.shape
        low = float(ascending_rows.min()) if ascending_rows.size else 0.0
        self._width = width
        self._offset = low
        self._span = (float(ascending_rows.max()) - low if ascending_rows.size else 0.0) + 2.0
        bands = (np.arange(num_rows) * self._span)[:, None]
        self._keys = ((ascending_rows - low) + bands).ravel()

    def count(
        self, row: NDArray[np.intp], value: NDArray[np.float64], side: Literal["left", "right"]
    ) -> NDArray[np.int64]:
        """Entries of each row < value (side="left") or <= value (side="right")."""
        # Clipping keeps each query inside its own row's band of keys.
        local = np.clip(value - self._offset, -0.5, self._span - 1.5)
        found = np.searchsorted(self._keys, local + row * self._span, side=side)
        return found - row.astype(np.int64) * self._width


class _TailTable:
    """Per-row non-leader values, non-increasing, with multiplicities (None = all 1)."""

    def __init__(self, values: NDArray[np.int64], counts: NDArray[np.float64] | None) -> None:
        self.width = values.shape[1]
        self.values = values.ravel()
        self.counts = None if counts is None else counts.ravel()
        self._search = _RowSearch(-values.astype(np.float64))

    @classmethod
    def distinct(cls, values: NDArray[np.int64], extra: int = 0) -> _TailTable:
        """Group equal values of non-increasing rows; pads are value -1 with count 0.
        ``extra`` more zero-vote classes join each row's group of value 0."""
        num_rows, width = values.shape
        if width == 0:
            return cls(np.full((num_rows, 1), -1, dtype=np.int64), np.zeros((num_rows, 1)))
        is_new = np.ones(values.shape, dtype=bool)
        is_new[:, 1:] = values[:, 1:] != values[:, :-1]
        group = np.cumsum(is_new, axis=1) - 1
        num_groups = int(group[:, -1].max()) + 1
        flat = (np.arange(num_rows)[:, None] * num_groups + group).ravel()
        grouped = np.full(num_rows * num_groups, -1, dtype=np.int64)
        grouped[flat] = values.ravel()
        counts = np.bincount(flat, minlength=num_rows * num_groups).astype(np.float64)
        counts[grouped == 0] += extra  # one group of zeros per row: the caller's rows end in 0
        return cls(grouped.reshape(num_rows, num_groups), counts.reshape(num_rows, num_groups))

    def kept(
        self, row: NDArray[np.intp], start: NDArray[np.int64], min_value: NDArray[np.float64]
    ) -> NDArray[np.int64]:
        """Entries from ``start`` on whose value is >= min_value (a prefix: rows are sorted)."""
        end = self._search.count(row, -min_value, "right")
        return np.maximum(end - start, 0)

    def relative_sum(
        self,
        log_tail: NDArray[np.float64],
        linear_tail: NDArray[np.float64],
        row: NDArray[np.intp],
        start: NDArray[np.int64],
        kept: NDArray[np.int64],
        leader: NDArray[np.int64],
        log_head: NDArray[np.float64],
    ) -> NDArray[np.float64]:
        """sum over kept entries of count * Pr[tail at gap leader - value] / head term.

        Pairs are sorted by how many entries they keep, so the loop over entry
        ranks works on shrinking prefixes (no padding, no per-rank compaction).
        Sums run on the shifted linear table when the head term allows it.
        """
        out = np.zeros(row.size)
        linear = log_head >= _LINEAR_MIN_LOG_HEAD
        for group in (np.flatnonzero(linear & (kept > 0)), np.flatnonzero(~linear & (kept > 0))):
            if group.size == 0:
                continue
            order = group[np.argsort(-kept[group], kind="stable")]
            kept_sorted = kept[order]
            active = np.searchsorted(
                -kept_sorted, -np.arange(1, int(kept_sorted[0]) + 1), side="right"
            )
            base = row[order] * self.width + start[order]
            leader_sorted = leader[order]
            acc = np.zeros(order.size)
            if linear[order[0]]:
                for rank, size in enumerate(active):
                    index = base[:size] + rank
                    terms = linear_tail[leader_sorted[:size] - self.values[index]]
                    if self.counts is not None:
                        terms *= self.counts[index]
                    acc[:size] += terms
                # Linear table values are exp(log tail + shift): divide by the head's.
                out[order] = acc / np.exp(log_head[order] + _LINEAR_SHIFT)
            else:
                head_sorted = log_head[order]
                for rank, size in enumerate(active):
                    index = base[:size] + rank
                    terms = np.exp(
                        log_tail[leader_sorted[:size] - self.values[index]] - head_sorted[:size]
                    )
                    if self.counts is not None:
                        terms *= self.counts[index]
                    acc[:size] += terms
                out[order] = acc
        return out


@dataclass
class _PairState:
    """log q and bookkeeping for a batch of (row, step) pairs of the walks."""

    logq: NDArray[np.float64]
    top_rest: NDArray[np.int64]  # largest non-leader count (left walk's stop test)
    head_gap: NDArray[np.int64]  # leader minus runner-up (right walk)
    is_pure: NDArray[np.bool_]  # right walk whose tail is negligible: q is the runner-up term


class _WalkEvaluator:
    """log q (Prop. 7) of the histogram reached after d steps of Algorithm 4's walk.

    Rows are the distinct sorted vote vectors. Right walk at step d: leader
    v0 - d, runner-up v1 + d, the others unchanged. Left walk: leader v0 + d, and
    d votes taken greedily from the largest non-leader, which levels the top k
    non-leaders to L or L+1 (k from the cumulative "fill cost").
    """

    def __init__(
        self, sorted_rows: NDArray[np.int64], params: _GnmaxSensitivity, extra: int = 0
    ) -> None:
        """``extra``: zero-vote classes beyond the rows' columns (compact votes), each row's
        last column being a zero they join: their terms enter as its multiplicity."""
        self.params = params
        self.leader = np.ascontiguousarray(sorted_rows[:, 0])
        rest = np.ascontiguousarray(sorted_rows[:, 1:])
        self.runner_up = np.ascontiguousarray(rest[:, 0])
        num_rows, num_rest = rest.shape
        self.num_rest = num_rest
        self.prefix = np.zeros((num_rows, num_rest + 1), dtype=np.int64)
        np.cumsum(rest, axis=1, out=self.prefix[:, 1:])
        below = np.zeros_like(rest)
        below[:, :-1] = rest[:, 1:]
        # fill_cost[:, k-1]: moves that level the top k non-leaders down to the next one.
        fill_cost = self.prefix[:, 1:] - np.arange(1, num_rest + 1) * below
        self.fill_search = _RowSearch(fill_cost.astype(np.float64))
        self.right_tail = _TailTable.distinct(np.ascontiguousarray(rest[:, 1:]), extra)
        weights = None
        if extra:
            weights = np.ones(rest.shape)
            weights[:, -1] += extra
        self.left_tail = _TailTable(rest, weights)
        self.third = rest[:, 1] if num_rest > 1 else None
        self.scale = math.sqrt(2 * params.sigma**2)  # sd of the difference of two noises
        # Every gap a walk reaches is at most a row's total of votes (and one more).
        max_gap = int((self.prefix[:, -1] + self.leader).max()) + 2 if num_rows else 2
        # log Pr[N(0, 2 sigma^2) >= g] for integer gaps g, exactly as Prop. 7 evaluates it.
        self.log_tail = log_ndtr(-np.arange(max_gap + 1, dtype=np.float64) / self.scale)
        # The same tails in linear space, shifted so that they stay normal doubles
        # down to exp(-1350); deeper entries underflow to 0, negligible against a head
        # term above that (see relative_sum).
        self.linear_tail = np.exp(self.log_tail + _LINEAR_SHIFT)
        self._pure_table: tuple[NDArray[np.float64], NDArray[np.float64]] | None = None

    def pure_table(self) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
        """(LS~, largest cost) per integer gap g of a right-walk state whose q is the
        runner-up term alone."""
        if self._pure_table is None:
            size = self.log_tail.size
            ls, cost = np.empty(size), np.empty(size)
            # In chunks: the gaps run to M, and each evaluation takes a few dozen temporaries.
            for start in range(0, size, _PAIR_CHUNK):
                part = np.minimum(self.log_tail[start : start + _PAIR_CHUNK], self.params.log_cap)
                right = np.zeros(part.size, dtype=bool)
                chunk = slice(start, start + part.size)
                ls[chunk], cost[chunk] = self.params.ls_and_cost(part, right)
            self._pure_table = (ls, cost)
        return self._pure_table

    def _reach(self, head_gap: NDArray[np.int64]) -> NDArray[np.float64]:
        # For y2 >= y1 >= 0, log(sf(y2)/sf(y1)) <= -(y2^2 - y1^2)/2 + log 1.5 (Birnbaum's
        # and Sampford's bounds on Mills' ratio): gaps beyond this reach add < 1.5 e^-K.
        return np.sqrt(head_gap.astype(np.float64) ** 2 + 2 * _TAIL_LOG_CUTOFF * self.scale**2)

    def state(
        self, row: NDArray[np.intp], step: NDArray[np.int64], left: NDArray[np.bool_]
    ) -> _PairState:
        logq = np.empty(row.size)
        top_rest = np.empty(row.size, dtype=np.int64)
        head_gap = np.zeros(row.size, dtype=np.int64)
        is_pure = np.zeros(row.size, dtype=bool)
        (right_pairs,) = np.nonzero(~left)
        (left_pairs,) = np.nonzero(left)
        if right_pairs.size:
            r, d = row[right_pairs], step[right_pairs]
            leader = self.leader[r] - d
            runner_up = self.runner_up[r] + d
            gap = leader - runner_up
            log_head = self.log_tail[gap]
            start = np.zeros(r.size, dtype=np.int64)
            kept = self.right_tail.kept(r, start, leader - self._reach(gap))
            tail = self.right_tail.relative_sum(
                self.log_tail, self.linear_tail, r, start, kept, leader, log_head
            )
            # Prop. 7: q = sum of pairwise tails = head term * (1 + relative tail).
            logq[right_pairs] = log_head + np.log1p(tail)
            top_rest[right_pairs] = runner_up
            head_gap[right_pairs] = gap
            is_pure[right_pairs] = kept == 0
        if left_pairs.size:
            r, d = row[left_pairs], step[left_pairs]
            levelled = np.minimum(
                self.fill_search.count(r, d.astype(np.float64), "left") + 1, self.num_rest
            )
            total = self.prefix[r, levelled] - d
            level = total // levelled
            high = total - level * levelled  # this many sit at level + 1
            top = level + (high > 0)
            head_count = np.where(high > 0, high, levelled)
            low_count = np.where(high > 0, levelled - high, 0)
            leader = self.leader[r] + d
            gap = leader - top
            log_head = self.log_tail[gap]
            kept = self.left_tail.kept(r, levelled, leader - self._reach(gap))
            tail = self.left_tail.relative_sum(
                self.log_tail, self.linear_tail, r, levelled, kept, leader, log_head
            )
            head = head_count + low_count * np.exp(self.log_tail[gap + 1] - log_head)
            logq[left_pairs] = log_head + np.log(head + tail)
            top_rest[left_pairs] = top
        # Prop. 7's cap q <= 1 - 1/C.
        return _PairState(np.minimum(logq, self.params.log_cap), top_rest, head_gap, is_pure)

    def pure_steps(
        self, row: NDArray[np.intp], last_step: NDArray[np.int64]
    ) -> tuple[NDArray[np.int64], NDArray[np.int64]]:
        """Inclusive range of right-walk steps whose tail is negligible (empty: lo > hi).

        The third-largest count u bounds every other tail term; it is negligible
        when (x-u)^2 - g^2 > 2 K s^2, i.e. (v1-u+d)(2 v0-v1-u-3d) > 2 K s^2, a
        concave quadratic in d, hence an interval of steps.
        """
        if self.third is None:  # two classes: q is the runner-up term alone
            return np.zeros(row.size, dtype=np.int64), last_step.copy()
        v0 = self.leader[row].astype(np.float64)
        v1 = self.runner_up[row].astype(np.float64)
        u = self.third[row].astype(np.float64)
        offset = v1 - u
        span = 2 * v0 - v1 - u
        linear = span - 3 * offset
        constant = offset * span - 2 * _TAIL_LOG_CUTOFF * self.scale**2
        discriminant = linear**2 + 12 * constant
        root = np.sqrt(np.maximum(discriminant, 0.0))
        lo = np.floor((linear - root) / 6) + 1
        hi = np.ceil((linear + root) / 6) - 1
        lo = np.where(discriminant > 0, np.maximum(lo, 0), np.inf)
        hi = np.minimum(hi, last_step)
        lo = np.minimum(lo, last_step + 1)
        return lo.astype(np.int64), hi.astype(np.int64)


def _walk_lengths(
    evaluator: _WalkEvaluator, row: NDArray[np.intp], left: NDArray[np.bool_]
) -> NDArray[np.int64]:
    """Count the steps until Algorithm 4's loop stops, by bisection (log q is monotone).

    Right walk: continue while log q < log q1. Left walk: continue while
    log q > log q0 and a non-leader vote is left. Step 0 always continues.
    """
    params = evaluator.params
    low = np.zeros(row.size, dtype=np.int64)
    # Right: at most a tie of leader and runner-up (there q >= 1/2 > q1);
    # left: at most every non-leader vote moved.
    high = np.where(
        left, evaluator.prefix[row, -1], (evaluator.leader[row] - evaluator.runner_up[row]) // 2
    )
    while True:
        (open_,) = np.nonzero(high - low > 1)
        if open_.size == 0:
            return high
        middle = (low[open_] + high[open_]) // 2
        state = evaluator.state(row[open_], middle, left[open_])
        go_on = np.where(
            left[open_],
            (state.logq > params.logq0) & (state.top_rest > 0),
            state.logq < params.logq1,
        )
        low[open_] = np.where(go_on, middle, low[open_])
        high[open_] = np.where(go_on, high[open_], middle)


@dataclass
class _Segments:
    """Runs of consecutive distances: row, first distance, length, walk direction."""

    row: NDArray[np.intp]
    start: NDArray[np.int64]
    length: NDArray[np.int64]
    left: NDArray[np.bool_]

    def chunks(self) -> Iterator[tuple[NDArray[np.intp], NDArray[np.int64], NDArray[np.bool_]]]:
        """(row, distance, left) per pair, in chunks of about ``_PAIR_CHUNK`` pairs."""
        keep = self.length > 0
        # A long run (a walk of millions of steps) is cut into pieces of at most a chunk,
        # so that no chunk outgrows ``_PAIR_CHUNK`` pairs, whatever M.
        pieces = -(-self.length[keep] // _PAIR_CHUNK)
        segment = np.repeat(np.flatnonzero(keep), pieces)
        piece = np.arange(segment.size) - np.repeat(np.cumsum(pieces) - pieces, pieces)
        start = self.start[segment] + piece * _PAIR_CHUNK
        length = np.minimum(self.length[segment] - piece * _PAIR_CHUNK, _PAIR_CHUNK)
        row, left = self.row[segment], self.left[segment]
        ends = np.cumsum(length)
        first = 0
        while first < row.size:
            base = ends[first - 1] if first else 0
            last = max(int(np.searchsorted(ends, base + _PAIR_CHUNK, side="right")), first + 1)
            counts = length[first:last]
            owner = np.repeat(np.arange(first, last), counts)
            offset = np.arange(owner.size) - (np.cumsum(counts) - counts)[owner - first]
            yield row[owner], start[owner] + offset, left[owner]
            first = last


@dataclass
class _WalkPlan:
    """Every canonical row's walk: the rows that walk and their filled distances."""

    evaluator: _WalkEvaluator
    walking: NDArray[np.intp]
    last_step: NDArray[np.int64]  # last filled distance per walking row (< M)
    evaluated: _Segments  # distances whose log q is computed
    pure: _Segments  # right-walk distances read from the per-gap LS~ table


# Rows per block of the walks' planning (each block on its own thread).
_ROW_BLOCK = 1 << 15


def _row_blocks(index: NDArray[np.intp]) -> list[NDArray[np.intp]]:
    return [index[start : start + _ROW_BLOCK] for start in range(0, index.size, _ROW_BLOCK)]


def _joined(parts: Iterator[NDArray[Any]], dtype: type) -> NDArray[Any]:
    return np.concatenate([np.zeros(0, dtype=dtype), *parts])


def _plan_walks(
    sorted_rows: NDArray[np.int64], num_teachers: int, params: _GnmaxSensitivity, extra: int = 0
) -> _WalkPlan:
    evaluator = _WalkEvaluator(sorted_rows, params, extra)
    num_rows = sorted_rows.shape[0]

    def start_of(rows: NDArray[np.intp]) -> NDArray[np.float64]:
        return evaluator.state(
            rows, np.zeros(rows.size, dtype=np.int64), np.zeros(rows.size, dtype=bool)
        ).logq

    logq = _joined(_ordered_map(start_of, _row_blocks(np.arange(num_rows))), np.float64)
    # Algorithm 4, case 1: q in [q1, q0] is on the plateau at every distance.
    (walking,) = np.nonzero((logq < params.logq1) | (logq > params.logq0))
    left = logq[walking] > params.logq0

    def lengths(rows: NDArray[np.intp]) -> NDArray[np.int64]:
        return _walk_lengths(evaluator, walking[rows], left[rows])

    found = _joined(_ordered_map(lengths, _row_blocks(np.arange(walking.size))), np.int64)
    last_step = np.minimum(found, num_teachers - 1)
    lo, hi = evaluator.pure_steps(walking, last_step)
    lo = np.where(left, last_step + 1, lo)
    hi = np.where(left, last_step, hi)
    has_pure = lo <= hi
    evaluated = _Segments(
        np.concatenate([walking, walking]),
        np.concatenate([np.zeros_like(lo), np.where(has_pure, hi + 1, lo)]),
        np.concatenate(
            [np.where(has_pure, lo, last_step + 1), np.where(has_pure, last_step - hi, 0)]
        ),
        np.concatenate([left, left]),
    )
    pure = _Segments(walking, lo, np.where(has_pure, hi - lo + 1, 0), left)
    return _WalkPlan(evaluator, walking, last_step, evaluated, pure)


WalkChunk = tuple[NDArray[np.intp], NDArray[np.int64], NDArray[np.float64], NDArray[np.float64]]
"""(canonical row, distance, LS~, largest cost) of a chunk of (row, distance) pairs."""


def _clipped(segments: _Segments, start: int, stop: int) -> _Segments:
    """The segments' distances within start .. stop-1."""
    first = np.maximum(segments.start, start)
    end = np.minimum(segments.start + segments.length, stop)
    return _Segments(segments.row, first, np.maximum(end - first, 0), segments.left)


def _walk_chunks(plan: _WalkPlan, start: int, stop: int) -> Iterator[Callable[[], WalkChunk]]:
    """For every filled distance from ``start`` to ``stop`` - 1 of every walk, chunk by chunk,
    what evaluates (canonical row, distance, LS~, largest cost); the largest cost bounds the
    published cost over the ball (Prop. 8's bound where the walk does not give a better one).
    Each chunk is evaluated when called, so that chunks can run on threads."""
    evaluator = plan.evaluator
    table, cost_table = evaluator.pure_table()

    def walked(
        row: NDArray[np.intp], step: NDArray[np.int64], left: NDArray[np.bool_]
    ) -> WalkChunk:
        params = evaluator.params
        state = evaluator.state(row, step, left)
        ls = np.empty(row.size)
        cost = np.empty(row.size)
        pure = state.is_pure
        ls[pure] = table[state.head_gap[pure]]
        cost[pure] = cost_table[state.head_gap[pure]]
        ls[~pure], cost[~pure] = params.ls_and_cost(state.logq[~pure], left[~pure])
        return row, step, ls, cost

    def read(row: NDArray[np.intp], step: NDArray[np.int64]) -> WalkChunk:
        gap = evaluator.leader[row] - evaluator.runner_up[row] - 2 * step
        return row, step, table[gap], cost_table[gap]

    for row, step, left in _clipped(plan.evaluated, start, stop).chunks():
        yield partial(walked, row, step, left)
    for row, step, _ in _clipped(plan.pure, start, stop).chunks():
        yield partial(read, row, step)


PlanSpan = tuple[NDArray[np.int64], Iterator[Callable[[], WalkChunk]]]
"""A plan's walks over a range of distances: each group's first distance on the plateau
(the range's end if it is not on it before), and the chunks of its states in the range."""


@dataclass
class GroupPlan:
    """How the local sensitivity of distinct sorted rows is bounded: rows in groups that share
    every state, and their walks range by range of distances: ``span(start, stop)``, asked
    for in order from distance 0 (a plan's tables grow with the distances walked), gives each
    group's first distance on the plateau, ``stop`` where it is not on it before ``stop``, and
    what evaluates the groups' states at distances start .. stop-1 before it, chunk by chunk
    (``WalkChunk``s, their first field the group). No state's LS~ and largest cost exceed
    ``largest`` (the plateau's included): W's part of ``core.horizon``."""

    group_of_row: NDArray[np.intp]  # (R,)
    num_groups: int
    span: Callable[[int, int], PlanSpan]
    largest: tuple[float, float]


def walk_plan(
    sorted_rows: NDArray[np.int64], num_teachers: int, params: _GnmaxSensitivity, extra: int = 0
) -> GroupPlan:
    """The exact walk of every row, each row its own group."""
    plan = _plan_walks(sorted_rows, num_teachers, params, extra)
    done_from = np.zeros(sorted_rows.shape[0], dtype=np.int64)
    done_from[plan.walking] = plan.last_step + 1

    def span(start: int, stop: int) -> PlanSpan:
        return np.minimum(done_from, stop), _walk_chunks(plan, start, stop)

    num_rows = sorted_rows.shape[0]
    return GroupPlan(np.arange(num_rows), num_rows, span, params.largest())


# Odd 64-bit multipliers of the row hash (fixed: the grouping is the same on every run).
_HASH_MULTIPLIERS = np.random.default_rng(0x5EED).integers(1, 2**63, 4096, dtype=np.uint64) | 1


def _canonical_rows(votes: NDArray[np.int64]) -> tuple[NDArray[np.int64], NDArray[np.intp]]:
    """Distinct rows after sorting each in non-increasing order, and the inverse map.

    Rows are grouped by a 64-bit hash (a sort of Q integers, not of Q rows), and every
    row is then compared with its group's first row: a collision, however unlikely,
    falls back to the exact grouping of ``np.unique(axis=0)``. The groups come out in
    the order of their hashes, which nothing downstream depends on.
    """
    ordered = -np.sort(-votes, axis=1)
    num_classes = ordered.shape[1]
    if num_classes > _HASH_MULTIPLIERS.size:
        unique, inverse = np.unique(ordered, axis=0, return_inverse=True)
        return unique, inverse.reshape(-1)
    with np.errstate(over="ignore"):  # arithmetic modulo 2**64
        keys = ordered.astype(np.uint64) @ _HASH_MULTIPLIERS[:num_classes]
    _, first, inverse = np.unique(keys, return_index=True, return_inverse=True)
    unique = ordered[first]
    if not np.array_equal(unique[inverse], ordered):
        unique, inverse = np.unique(ordered, axis=0, return_inverse=True)
    return unique, inverse.reshape(-1)

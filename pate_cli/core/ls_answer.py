"""The answer step's local sensitivity summed over queries, range by range of distances.

Papernot et al. 2018, Theorem 24: the total's bound is the sum of the per-query bounds. In
expectation a query's answer step costs Pr[answered] g(n), so its term at distance d is the
change of that product over the ball (``_AnswerWeights``). Queries are grouped by the states
their walks share (``ls_cells``' groups, or the exact walk's rows, ``ls_gnmax``) and by the
rounded top h of step 1; each group's states are evaluated once, chunk by chunk, and the
distances past a group's walk add the plateau. Every part goes through the distances range by
range (``core.horizon``), so that a release walks only those that can change its smooth
sensitivity, and gives its bound W there.

Shapes: Q queries, C classes, M teachers (distances d = 0 .. M-1).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from functools import partial

import numpy as np
from numpy.typing import NDArray

from pate_cli.core._common import _blocks, _ordered_map
from pate_cli.core.ls_cells import plan_cells
from pate_cli.core.ls_gnmax import GroupPlan, WalkChunk, _canonical_rows, walk_plan
from pate_cli.core.ls_threshold import _ChangeWindow
from pate_cli.core.ls_tilde import _GnmaxSensitivity


@dataclass(frozen=True)
class _AnswerWeights:
    """What multiplies a query's GNMax local sensitivity at distance d.

    ``pr_answered`` is None for a constant weight per query (plain GNMax: 1; a realised
    run: its 0/1 mask). In expectation the cost is thr(n) + P(n) g(n) with P = Pr[answered],
    a non-decreasing function of the rounded top vote h of step 1 (h moves by at most 1 a
    step), so over a histogram n'' within distance d and its neighbour n':
    |P(n') g(n') - P(n'') g(n'')| <= P(n') |g(n') - g(n'')| + |P(n') - P(n'')| g(n''),
    at most P(min(h + d + 1, M)) LS_g[d] + max_{|h'' - h| <= d} |dP(h'')| G[d], with G[d]
    the largest cost over the ball (the right walk's state, else Prop. 8's DI_g).
    """

    weights: NDArray[np.float64]  # per query (Q,)
    tops: NDArray[np.int64] | None = None  # h per query (Q,), with pr_answered
    pr_answered: NDArray[np.float64] | None = None  # P(h) for h = 0 .. M
    change: _ChangeWindow | None = None  # max |dP| within distance d of h, with pr_answered
    independent: float = 0.0  # Prop. 8's bound of the answer step's cost, with change
    sensitivity: int = 1  # how far a neighbour moves h (2: half to even at exact halves)

    @property
    def ahead(self) -> int:
        """How far past h + d the top of a neighbour of a histogram d away can be: h' <= h
        + d + (s - 1), h'' <= h' + s, so 2 s - 1 (1 for s = 1)."""
        return 2 * self.sensitivity - 1

    def change_at(self, top: NDArray[np.int64], distance: NDArray[np.int64]) -> NDArray[np.float64]:
        """A bound of |P(h') - P(h'')| over h' within distance d (+ s - 1) of h and h'' a
        neighbour's (within s of h'): s times the largest single step of P within
        d + 2 (s - 1) of h."""
        assert self.change is not None
        return self.sensitivity * self.change.at(top, distance + 2 * (self.sensitivity - 1))


@dataclass(frozen=True)
class _Pairs:
    """The live queries grouped by (canonical row, h): a row's walk runs once for all its
    pairs. Shapes: P pairs, R canonical rows."""

    row: NDArray[np.int64]  # canonical row of each pair (P,), non-decreasing
    top: NDArray[np.int64]  # h of each pair (P,)
    weight: NDArray[np.float64]  # the summed weights of the pair's queries (P,)
    start: NDArray[np.intp]  # each row's first pair (R,)
    count: NDArray[np.intp]  # each row's number of pairs (R,)
    highest: int  # the largest top h

    @classmethod
    def group(
        cls,
        inverse: NDArray[np.intp],
        tops: NDArray[np.int64],
        weights: NDArray[np.float64],
        num_rows: int,
        highest: int,
    ) -> _Pairs:
        """Pairs of the queries (canonical row ``inverse``, top ``tops``), weights summed."""
        key, pair_of_query = np.unique(inverse * (highest + 1) + tops, return_inverse=True)
        pair_row, pair_top = np.divmod(key, highest + 1)
        pair_weight = np.asarray(
            np.bincount(pair_of_query.reshape(-1), weights=weights), dtype=np.float64
        )
        pair_start = np.searchsorted(pair_row, np.arange(num_rows))
        pair_count = np.diff(np.append(pair_start, pair_row.size))
        return cls(pair_row, pair_top, pair_weight, pair_start, pair_count, highest)

    def weight_at(
        self, pair: NDArray[np.intp], step: NDArray[np.int64], answer: _AnswerWeights
    ) -> NDArray[np.float64]:
        """The pairs' weights at distance ``step``: times Pr[answered] at the highest top a
        histogram that far (or its neighbour) can have, in expectation."""
        pr = answer.pr_answered
        if pr is None:
            return self.weight[pair]
        return (
            self.weight[pair] * pr[np.minimum(self.top[pair] + step + answer.ahead, self.highest)]
        )


def _chunk_sums(
    pairs: _Pairs, answer: _AnswerWeights, evaluate: Callable[[], WalkChunk]
) -> tuple[int, NDArray[np.float64]]:
    """A chunk's terms summed per distance: (first distance, sums from there)."""
    row, step, ls, cost = evaluate()
    counts = pairs.count[row]
    owner = np.repeat(np.arange(row.size), counts)
    pair = (
        pairs.start[row][owner]
        + np.arange(owner.size)
        - np.repeat(np.cumsum(counts) - counts, counts)
    )
    at = step[owner]
    terms = pairs.weight_at(pair, at, answer) * ls[owner]
    if answer.change is not None:
        terms += pairs.weight[pair] * answer.change_at(pairs.top[pair], at) * cost[owner]
    first = int(at.min()) if at.size else 0
    return first, np.asarray(np.bincount(at - first, weights=terms), dtype=np.float64)


class _AnsweredPlateau:
    """The plateau of the pairs off their walk, weighted by Pr[answered] and its change,
    range by range of distances: per distinct h, the weight of the pairs on the plateau so far
    is carried from range to range (a running sum, in the order of the distances)."""

    def __init__(self, pairs: _Pairs, answer: _AnswerWeights, plateau: float) -> None:
        self.pairs, self.answer, self.plateau = pairs, answer, plateau
        self.distinct, top_index = np.unique(pairs.top, return_inverse=True)
        self.top_index = top_index.reshape(-1)
        self.carry = np.zeros(self.distinct.size)

    def add(
        self, total: NDArray[np.float64], start: int, stop: int, pair_done: NDArray[np.int64]
    ) -> None:
        """Add (in place) the plateau at distances start .. stop-1 to ``total`` (its range),
        ``pair_done`` each pair's first distance on it (``stop`` when not before)."""
        answer, pairs, width = self.answer, self.pairs, stop - start
        pr = answer.pr_answered
        assert pr is not None
        arrived = (pair_done >= start) & (pair_done < stop)
        finished = np.zeros((0, width))
        for block, span in _blocks(self.distinct.size, width):
            rows = self.distinct[block]
            if span.start == 0:
                mine = arrived & (self.top_index >= block.start) & (self.top_index < block.stop)
                cells = (self.top_index[mine] - block.start) * width + (pair_done[mine] - start)
                done = np.bincount(cells, weights=pairs.weight[mine], minlength=rows.size * width)
                steps = np.concatenate([self.carry[block, None], done.reshape(rows.size, width)], 1)
                finished = np.cumsum(steps, axis=1)[:, 1:]
                self.carry[block] = finished[:, -1]
            distance = np.arange(start + span.start, start + span.stop)
            top = np.minimum(rows[:, None] + distance + answer.ahead, pairs.highest)
            weight = self.plateau * pr[top]
            if answer.change is not None:
                weight += answer.independent * answer.change_at(rows[:, None], distance)
            total[span] += np.sum(finished[:, span] * weight, axis=0)


def _walk_plan(
    unique: NDArray[np.int64],
    num_teachers: int,
    params: _GnmaxSensitivity,
    extra: int,
    walk: bool,
) -> GroupPlan:
    """The tabulated plan (``ls_cells``), or with ``walk`` (or the reference's bounds) the
    exact walk of every canonical row, each its own group."""
    if walk or params.reference:
        return walk_plan(unique, num_teachers, params, extra)
    return plan_cells(unique, num_teachers, params, extra)


class _GnmaxWalk:
    """sum_q w_q(d) LS_gnmax(q)[d] range by range of distances (``span``, asked for in order
    from 0) without a (Q, M) array, ``extra`` zero-vote classes beyond the columns
    (``compact.narrow``). Shapes: votes (Q, C).

    Queries are grouped by (group, h), a group being rows that share every state (a
    canonical row of the exact ``walk``, or ``ls_cells``' groups); each group's states run
    once, in chunks. ``bound`` is at least the total at every distance: the weights times
    the largest LS and cost the plan's states take (``GroupPlan.largest``), Pr[answered] and
    its change at their largest; ``per_query`` the same of one query of weight 1, whatever
    the votes (``_GnmaxSensitivity.largest``).
    """

    def __init__(
        self,
        votes: NDArray[np.int64],
        answer: _AnswerWeights,
        num_teachers: int,
        params: _GnmaxSensitivity,
        extra: int = 0,
        walk: bool = False,
    ) -> None:
        self.answer, self.params = answer, params
        self.per_query = self._per_weight(*params.largest())
        self.bound = 0.0
        self.plan: GroupPlan | None = None
        live = answer.weights != 0
        if not np.any(live):
            return
        unique, inverse = _canonical_rows(votes[live])
        tops = np.zeros(inverse.size, dtype=np.int64) if answer.tops is None else answer.tops[live]
        pr = answer.pr_answered
        highest = num_teachers if pr is None else pr.size - 1  # the largest top h
        self.plan = _walk_plan(unique, num_teachers, params, extra, walk)
        self.pairs = _Pairs.group(
            self.plan.group_of_row[inverse],
            tops,
            answer.weights[live],
            self.plan.num_groups,
            highest,
        )
        self.bound = float(self.pairs.weight.sum()) * self._per_weight(*self.plan.largest)
        self.carry = 0.0  # with fixed weights: the pairs' weight on the plateau so far
        self.answered = None if pr is None else _AnsweredPlateau(self.pairs, answer, params.plateau)

    def _per_weight(self, ls: float, cost: float) -> float:
        """A bound of one unit of weight's term at any distance, from the largest LS and cost."""
        pr, answer = self.answer.pr_answered, self.answer
        if pr is None:
            return ls
        value = float(pr.max()) * ls
        if answer.change is not None:
            value += answer.sensitivity * answer.change.largest * cost
        return value

    def span(self, start: int, stop: int) -> NDArray[np.float64]:
        """The total at distances start .. stop-1. Shapes: -> (stop - start,)."""
        total = np.zeros(stop - start)
        if self.plan is None:
            return total
        done, chunks = self.plan.span(start, stop)
        # Chunks on threads; their sums are added in chunk order, whatever the thread count.
        for first, sums in _ordered_map(partial(_chunk_sums, self.pairs, self.answer), chunks):
            total[first - start : first - start + sums.size] += sums
        # Pairs off their walk (or on the plateau throughout) contribute the plateau.
        pair_done = done[self.pairs.row]
        if self.answered is not None:
            self.answered.add(total, start, stop, pair_done)
            return total
        arrived = (pair_done >= start) & (pair_done < stop)
        weights = np.bincount(
            pair_done[arrived] - start, weights=self.pairs.weight[arrived], minlength=stop - start
        )
        finished = np.cumsum(np.concatenate([[self.carry], weights]))[1:]
        self.carry = float(finished[-1])
        return total + self.params.plateau * finished


class _MovedTotal:
    """An answer step at Prop. 8's cost ``independent``: that cost times the change of
    Pr[answered] within each distance, summed over queries, range by range of distances;
    every entry is at most its largest change, so ``bound`` is that times the queries
    (``counts``: the queries each entry of ``tops`` stands for; None: one)."""

    def __init__(
        self,
        window: _ChangeWindow,
        tops: NDArray[np.int64],
        sensitivity: int,
        independent: float,
        counts: NDArray[np.float64] | None = None,
    ) -> None:
        self.window, self.tops, self.counts = window, tops, counts
        self.reach = 2 * (sensitivity - 1)
        self.factor = independent * sensitivity
        self.per_query = self.factor * window.largest
        held = tops.size if counts is None else float(counts.sum())  # the queries held
        self.bound = held * self.per_query

    def span(self, start: int, stop: int) -> NDArray[np.float64]:
        return self.factor * self.window.total(self.tops, start, stop, self.reach, self.counts)

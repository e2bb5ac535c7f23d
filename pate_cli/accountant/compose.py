"""Compose the per-query costs of a mechanism into RDP totals.

Expected accounting (the 2018 reference's ``_compute_rdp``): for
Confident/Interactive-GNMax every query pays the threshold step and pays the
GNMax step weighted by Pr[answered]. Realised accounting (``answered``, a
boolean mask from ``pate aggregate``) pays the threshold step on every query
seen and the GNMax step only where the mask is true. A mask shorter than the
votes means the run stopped early: only its prefix was seen.

A query's data-dependent cost depends on the votes only through one scalar
(``terms.py``), so equal scalars are evaluated once and weighted by how often
they occur. Votes are consumed in chunks of queries, so memory depends on the
chunk size and not on the number of queries.

Terms held by distinct row (``QueryTerms.distinct``) find their distinct scalars among the
rows' (a sort of the rows, not of the queries), and their weights are the same sums as the
queries': whole weights (a count, the realised mask) summed per row first, which is exact in
any order; other weights (Pr[answered]) summed over the queries in their order, as
``_distinct`` sums them. Every total is then the same number, to the last bit.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from numpy.typing import NDArray

from pate_cli.accountant.figures import eps_curve
from pate_cli.accountant.terms import (
    FloatArray,
    Grouped,
    QueryTerms,
    answer_weights,
    query_terms,
)
from pate_cli.choices import Conversion
from pate_cli.core._common import thread_count
from pate_cli.engines import map_blocks
from pate_cli.mechanisms import Mechanism
from pate_cli.mechanisms.steps import CostKey, ThresholdStep


@dataclass(frozen=True)
class RdpAccount:
    """RDP totals of a run, data-dependent and data-independent."""

    data_dependent: FloatArray
    """Total data-dependent RDP per order (K,); equal to data_independent when forced."""
    data_independent: FloatArray
    """Total data-independent RDP per order (K,)."""
    expected_answered: float
    """Expected (or, realised, actual) number of queries the teachers answered."""
    num_queries_seen: int
    """Queries accounted for (all, or the prefix a realised run saw)."""
    realized: bool
    """True when accounted from an answered mask."""
    worst_case: FloatArray
    """Data-independent RDP with every query answered (K,): a function of the parameters
    and the number of queries alone, so publishable as it is. It equals ``data_independent``
    for GNMax and LNMax on a full run; for Confident/Interactive-GNMax that one weights the
    answer step by Pr[answered] or the mask, which depend on the votes."""
    steps: StepCosts | None = None
    """Each step's total, as ``compose`` gave them (the release reads them at its order)."""


@dataclass(frozen=True)
class StepCosts:
    """Each step's cost of a run, data-dependent and data-independent: ``compose``'s result.

    Arrays are totals per order (K,), or per query and order (Q, K) for a ledger. A
    mechanism without a threshold step has zeros there.
    """

    threshold: FloatArray
    """The threshold step on every query seen (its data-independent cost where forced)."""
    answer: FloatArray
    """The answer step weighted by Pr[answered] or the mask (data-independent where forced)."""
    threshold_independent: FloatArray
    """Prop. 8's cost of the threshold step, lambda / (2 sigma1^2) per query seen."""
    answer_independent: FloatArray
    """The data-independent cost of the answer step, with the same weights."""

    @property
    def data_independent(self) -> FloatArray:
        total: FloatArray = self.threshold_independent + self.answer_independent
        return total

    @property
    def data_dependent(self) -> FloatArray:
        """threshold + answer, never above the data-independent total.

        Both bound the same composition, so their minimum does too; it also absorbs
        last-ulp differences between summing per query and multiplying by a count.
        """
        return np.minimum(self.threshold + self.answer, self.data_independent)

    def at(self, index: int, *, data_independent: tuple[bool, bool]) -> StepCosts:
        """The costs at one order (index into the orders), with the steps flagged in
        ``data_independent`` (threshold, answer) accounted at their data-independent cost."""

        def pick(dependent: FloatArray, independent: FloatArray, forced: bool) -> FloatArray:
            return (independent if forced else dependent)[..., index : index + 1]

        return StepCosts(
            pick(self.threshold, self.threshold_independent, data_independent[0]),
            pick(self.answer, self.answer_independent, data_independent[1]),
            self.threshold_independent[..., index : index + 1],
            self.answer_independent[..., index : index + 1],
        )


# Distinct values evaluated per block: (block, K) temporaries of a few MB at most.
_COST_BLOCK = 4096


# Values grouped per block first when there are more than a few blocks of them.
_DISTINCT_BLOCK = 1 << 16


def _group(
    values: FloatArray, weights: Sequence[FloatArray | None]
) -> tuple[FloatArray, FloatArray]:
    """The distinct values (sorted) and, per weight vector, the weight of each: (U,), (R, U)."""
    unique, inverse = np.unique(values, return_inverse=True)
    inverse = inverse.ravel()
    per_value = [np.bincount(inverse, weights=w, minlength=unique.size) for w in weights]
    stacked = np.stack(per_value).reshape(len(weights), unique.size)
    return unique, stacked.astype(np.float64, copy=False)  # counts of None weights are ints


def _distinct(
    values: FloatArray, weights: Sequence[FloatArray | None], threads: int
) -> tuple[FloatArray, FloatArray]:
    """``_group`` of the whole run, in two stages when it is long.

    Each block of queries is grouped on its own (on threads, or an engine's workers), then
    the blocks' distinct values are grouped again: a run with few distinct values never sorts
    all its queries. Blocks are fixed and combined in order: the sums do not depend
    on the thread count.
    """
    if values.size <= 4 * _DISTINCT_BLOCK:
        return _group(values, weights)
    starts = range(0, values.size, _DISTINCT_BLOCK)

    def arguments(index: int) -> tuple[Any, ...]:
        rows = slice(starts[index], starts[index] + _DISTINCT_BLOCK)
        return values[rows], [None if w is None else w[rows] for w in weights]

    parts = map_blocks(_group, len(starts), arguments, threads=threads)
    block_values = np.concatenate([u for u, _ in parts])
    block_weights = np.concatenate([w for _, w in parts], axis=1)
    return _group(block_values, list(block_weights))


def _whole(weights: FloatArray) -> bool:
    """Every weight a whole number: their sums are exact, in any order."""
    return bool(np.array_equal(weights, np.floor(weights)))


def grouped_weights(
    grouped: Grouped,
    of_row: NDArray[np.intp],
    size: int,
    weights: FloatArray | None,
    block: int,
    whole: bool | None = None,
) -> FloatArray:
    """The sum of ``weights`` (None: ones) over the queries of each of ``size`` distinct
    values, the value of each row being ``of_row``: whole weights summed per row first
    (exact, in any order); others over the queries in their order, a ``block`` of queries
    at a time, the blocks' sums added in order (as ``_distinct`` adds them); ``whole``:
    whether the weights are whole, where the caller knows. Shapes: -> (size,)."""
    if weights is None:
        return np.asarray(np.bincount(of_row, weights=grouped.counts, minlength=size), float)
    if _whole(weights) if whole is None else whole:
        per_row = np.bincount(grouped.inverse, weights=weights, minlength=of_row.size)
        return np.asarray(np.bincount(of_row, weights=per_row, minlength=size), float)
    index = of_row[grouped.inverse]
    total = np.zeros(size)
    for start in range(0, max(index.size, 1), block):
        rows = slice(start, start + block)
        total += np.bincount(index[rows], weights=weights[rows], minlength=size)
    return total


def _distinct_grouped(
    grouped: Grouped, weights: Sequence[FloatArray | None]
) -> tuple[FloatArray, FloatArray] | None:
    """``_distinct`` of ``grouped``'s per-query array from its rows: the distinct values
    among the rows', and per weight vector the same sums ``_distinct`` makes
    (``grouped_weights``). None where those sums would cost more than ``_distinct`` itself
    (many distinct values, each summed block by block). Shapes: -> (V,), (R, V)."""
    unique, of_row = np.unique(grouped.values, return_inverse=True)
    of_row = of_row.reshape(-1)
    num = grouped.inverse.size
    block = _DISTINCT_BLOCK if num > 4 * _DISTINCT_BLOCK else max(num, 1)  # _distinct's stages
    whole = [w is None or _whole(w) for w in weights]
    if not all(whole) and block < num and unique.size > _DISTINCT_BLOCK:
        return None
    found = [
        grouped_weights(grouped, of_row, unique.size, w, block, is_whole)
        for w, is_whole in zip(weights, whole, strict=True)
    ]
    return unique, np.stack(found).reshape(len(weights), unique.size)


def weighted_costs(
    values: FloatArray,
    weights: Sequence[FloatArray | None],
    cost: Callable[[FloatArray], FloatArray],
    *,
    workers: int | None = None,
    grouped: Grouped | None = None,
) -> FloatArray:
    """sum_q w[q] * cost(values)[q] for each weight vector w (None: all ones).

    ``cost`` is evaluated once per distinct value, in blocks, on up to ``workers``
    threads (numpy releases the GIL in its loops); blocks are added in a fixed
    order, so the result does not depend on the thread count. ``grouped``: ``values`` by
    distinct row, whose distinct values and weights are then found from the rows
    (``_distinct_grouped``: the same numbers).

    Shapes: values (Q,), each weight (Q,), cost (U,) -> (U, K); returns (R, K).
    """
    threads = workers if workers is not None else thread_count(4)
    found = None if grouped is None else _distinct_grouped(grouped, weights)
    unique, per_value = _distinct(values, weights, threads) if found is None else found
    used = np.any(per_value != 0, axis=0)
    unique, per_value = unique[used], per_value[:, used]
    starts = range(0, unique.size, _COST_BLOCK)

    def arguments(index: int) -> tuple[Any, ...]:
        rows = slice(starts[index], starts[index] + _COST_BLOCK)
        return per_value[:, rows], cost, unique[rows]

    parts = map_blocks(_cost_block, len(starts), arguments, threads=threads)
    # cost of no value at all gives the (0, K) shape, so the total is (R, K) even then.
    total = np.zeros((len(weights), cost(unique[:0]).shape[1]))
    for part in parts:
        total = total + part
    return total


def _cost_block(
    weights: FloatArray, cost: Callable[[FloatArray], FloatArray], values: FloatArray
) -> FloatArray:
    """One block of ``weighted_costs``: its values' costs, weighted. Shapes: weights (R, B),
    values (B,) -> (R, K)."""
    # numpy's own loop, not BLAS: a BLAS product's last bits follow its thread count.
    total: FloatArray = np.einsum("rb,bk->rk", weights, cost(values))
    return total


def answer_cost(mechanism: Mechanism, orders: FloatArray) -> Callable[[FloatArray], FloatArray]:
    """RDP of one answer as a function of log q: the answer step's (Theorem 6 for GNMax,
    Theorem 3 of 2017 for LNMax)."""
    return mechanism.answer_step.cost(orders)


Total = Callable[
    [FloatArray, FloatArray | None, CostKey, Callable[[FloatArray], FloatArray], Grouped | None],
    FloatArray,
]
"""total(values, weights, key, cost, grouped): a step's cost over the queries from its
per-query scalars (``grouped``: the same by distinct row, or None); ``sum_over_queries`` (the
run's total) or ``per_query`` (one row per query)."""


def sum_over_queries(
    values: FloatArray,
    weights: FloatArray | None,
    key: CostKey,
    cost: Callable[[FloatArray], FloatArray],
    grouped: Grouped | None = None,
) -> FloatArray:
    """sum_q w[q] cost(values)[q], each distinct value costed once. Shapes: -> (K,)."""
    return weighted_costs(values, [weights], cost, grouped=grouped)[0]


def per_query(
    values: FloatArray,
    weights: FloatArray | None,
    key: CostKey,
    cost: Callable[[FloatArray], FloatArray],
    grouped: Grouped | None = None,
) -> FloatArray:
    """w[q] cost(values)[q] for every query, each distinct value costed once.
    Shapes: -> (Q, K)."""
    distinct, inverse = np.unique(np.asarray(values, dtype=np.float64), return_inverse=True)
    out = cost(distinct)[inverse.ravel()]
    return out if weights is None else weights[:, None] * out


def compose(
    mechanism: Mechanism,
    terms: QueryTerms,
    orders: FloatArray,
    *,
    weights: FloatArray | None,
    data_independent: tuple[bool, bool] = (False, False),
    total: Total = sum_over_queries,
) -> StepCosts:
    """The composition rule of a run's cost, for every caller (analyze, compare, the
    ledger and the release).

    Confident/Interactive-GNMax pay the threshold step on every query seen (Theorem 6 on
    the less likely outcome, with sigma -> sqrt(2) sigma1) and the answer step (Theorem 6
    with Prop. 7's q for GNMax; Theorem 3 with Lemma 4's q for LNMax, 2017) weighted by
    ``weights``: Pr[answered] in expectation, the mask for a realised run, 1 without a
    threshold. A step flagged in ``data_independent`` (threshold, answer) is accounted at
    its data-independent cost (Prop. 8 per query; min(eps^2 lambda / 2, eps) for LNMax).
    ``StepCosts.data_dependent`` adds the steps and takes the minimum with the
    data-independent total.

    Args:
        mechanism: the aggregator and its parameters.
        terms: the per-query scalars (``query_terms``), computed once by the caller.
        orders: Renyi orders (K,).
        weights: the answer step's weight per query, or None for 1.
        data_independent: account the (threshold, answer) step at its data-independent cost.
        total: how a step's per-query costs are reduced: ``sum_over_queries`` (totals per
            order) or ``per_query`` (one row per query).

    Shapes: terms (Q,), weights (Q,), orders (K,) -> StepCosts of (K,) or (Q, K) arrays.
    """
    orders = np.asarray(orders, dtype=np.float64)
    answer_independent = _answer_independent_cost(mechanism, terms.num_seen, orders, weights, total)
    step = mechanism.threshold_step
    if step is not None:
        threshold_total, threshold_independent = _threshold_costs(
            step, terms, orders, forced=data_independent[0], total=total
        )
    else:
        threshold_independent = np.zeros_like(answer_independent)
        threshold_total = threshold_independent
    if data_independent[1]:
        answer_total = answer_independent
    else:
        assert terms.logq is not None
        cost = answer_cost(mechanism, orders)
        grouped = terms.grouped("logq")
        answer_total = total(terms.logq, weights, answer_key(mechanism), cost, grouped)
    return StepCosts(threshold_total, answer_total, threshold_independent, answer_independent)


def _answer_independent_cost(
    mechanism: Mechanism, num: int, orders: FloatArray, weights: FloatArray | None, total: Total
) -> FloatArray:
    """The answer step's data-independent cost, each query's weighted: per query (Q, K) for
    ``per_query``, else the total (K,)."""
    per_answer = _data_independent_answer(mechanism, orders)
    if total is per_query:
        weighted: FloatArray = (np.ones(num) if weights is None else weights)[:, None] * per_answer
        return weighted
    answered = float(num if weights is None else weights.sum())
    return scaled_cost(answered, per_answer)


def _threshold_costs(
    step: ThresholdStep, terms: QueryTerms, orders: FloatArray, *, forced: bool, total: Total
) -> tuple[FloatArray, FloatArray]:
    """The threshold step's (cost, data-independent cost) on every query seen: Theorem 6 on
    the less likely outcome (sigma -> sqrt(2) sigma1), its exact cost (``threshold_bound``
    "exact"), or Prop. 8's where ``forced``."""
    num = terms.num_seen
    moves = terms.threshold_sensitivity
    per_query_seen = step.data_independent(orders, moves)
    independent = (
        np.broadcast_to(per_query_seen, (num, orders.size)).copy()
        if total is per_query
        else scaled_cost(num, per_query_seen)
    )
    if forced:
        return independent, independent
    cost = step.cost(orders, moves)
    statistic = getattr(terms, cost.statistic)
    assert statistic is not None
    key, grouped = threshold_key(step, moves), terms.grouped(cost.statistic)
    return total(statistic, None, key, cost.function, grouped), independent


@dataclass(frozen=True)
class PrefixEpsilons:
    """For every k, the epsilon of the first k queries analysed alone: the minimum over the
    orders, as ``epsilon_result`` takes it of a whole run. Shapes: (L,)."""

    epsilon: FloatArray
    order_index: NDArray[np.intp]


def prefix_epsilon_blocks(
    mechanism: Mechanism,
    terms: QueryTerms,
    orders: FloatArray,
    delta: float,
    kind: Conversion,
    *,
    weights: FloatArray | None,
    data_independent: bool = False,
    chunk_size: int = 2048,
) -> Iterator[tuple[int, int, PrefixEpsilons, PrefixEpsilons]]:
    """The running epsilons of :func:`prefix_epsilons`, one chunk of queries at a time:
    ``(start, stop, data-dependent, data-independent)``, each of (stop - start,). The running
    totals are carried from chunk to chunk, so memory is a chunk times the orders."""
    orders = np.asarray(orders, dtype=np.float64)
    num = terms.num_seen
    running = [np.zeros(orders.size) for _ in range(4)]
    for start in range(0, num, chunk_size):
        stop = min(start + chunk_size, num)
        steps = compose(
            mechanism,
            terms.rows(start, stop),
            orders,
            weights=None if weights is None else weights[start:stop],
            data_independent=(data_independent, data_independent),
            total=per_query,
        )
        parts = (steps.threshold, steps.answer, steps.threshold_independent)
        sums = [
            np.cumsum(part, axis=0) + carry
            for part, carry in zip((*parts, steps.answer_independent), running, strict=True)
        ]
        running = [total[-1] for total in sums]
        prefix = StepCosts(*sums)
        found = []
        for rdp in (prefix.data_dependent, prefix.data_independent):
            raw = eps_curve(kind, np.broadcast_to(orders, rdp.shape), rdp, delta)
            best = np.argmin(raw, axis=1)  # the first of equal minima, as best_order
            epsilon = np.maximum(raw[np.arange(stop - start), best], 0.0)
            found.append(PrefixEpsilons(epsilon, best))
        yield start, stop, found[0], found[1]


def prefix_epsilons(
    mechanism: Mechanism,
    terms: QueryTerms,
    orders: FloatArray,
    delta: float,
    kind: Conversion,
    *,
    weights: FloatArray | None,
    data_independent: bool = False,
    chunk_size: int = 2048,
) -> tuple[PrefixEpsilons, PrefixEpsilons]:
    """The running epsilon of a run, data-dependent and data-independent: for every prefix
    of k queries, what the analysis of those k queries reports.

    One pass over the queries: ``compose``'s per-query step costs, in chunks, are summed
    into running totals (K,) and ``StepCosts``' rule (the minimum with the data-independent
    total) is applied to each prefix's totals, as to a whole run's
    (:func:`prefix_epsilon_blocks`). Memory is a chunk times the orders.

    Shapes: terms (L,), weights (L,), orders (K,) -> two PrefixEpsilons of (L,).
    """
    num = terms.num_seen
    dependent = PrefixEpsilons(np.empty(num), np.empty(num, dtype=np.intp))
    independent = PrefixEpsilons(np.empty(num), np.empty(num, dtype=np.intp))
    blocks = prefix_epsilon_blocks(
        mechanism,
        terms,
        orders,
        delta,
        kind,
        weights=weights,
        data_independent=data_independent,
        chunk_size=chunk_size,
    )
    for start, stop, block_dependent, block_independent in blocks:
        for out, block in ((dependent, block_dependent), (independent, block_independent)):
            out.epsilon[start:stop] = block.epsilon
            out.order_index[start:stop] = block.order_index
    return dependent, independent


def answer_key(mechanism: Mechanism) -> CostKey:
    """What the answer step's per-query cost depends on besides log q: the step itself."""
    return (mechanism.answer_step,)


def threshold_key(step: ThresholdStep, moves: int) -> CostKey:
    """What the threshold step's per-query cost depends on besides its statistic: the step
    itself and how far a neighbour moves the statistic."""
    return (step, moves)


def _data_independent_answer(mechanism: Mechanism, orders: FloatArray) -> FloatArray:
    """One answer's data-independent RDP: the answer step's (Prop. 8, or the pure-DP bound
    of 2017 for LNMax)."""
    return mechanism.answer_step.data_independent(orders)


def account(
    votes: FloatArray,
    mechanism: Mechanism,
    orders: FloatArray,
    *,
    baseline: FloatArray | None = None,
    answered: NDArray[np.bool_] | None = None,
    data_independent: bool = False,
    half_even: bool = False,
    chunk_size: int | None = None,
    progress: Callable[[int], None] | None = None,
) -> RdpAccount:
    """Total RDP of answering the queries in ``votes`` with ``mechanism``.

    Args:
        votes: vote counts (Q, C); any array-like that slices by rows.
        mechanism: the aggregator and its parameters.
        orders: Renyi orders (K,).
        baseline: Interactive-GNMax only: the student's baseline (Q, C), on the votes' scale.
        answered: realised run: boolean mask of the queries the teachers answered, (L,)
            with L <= Q; only the first L queries were seen.
        data_independent: use data-independent bounds for every step.
        half_even: round the threshold statistic half to even, as the reference does
            (see ``core.threshold.round_votes``).
        chunk_size: queries per chunk of the pass over the votes.
        progress: called with the number of queries done after each chunk.

    Shapes: votes (Q, C), orders (K,) -> RdpAccount with (K,) curves.
    """
    orders = np.asarray(orders, dtype=np.float64)
    terms = query_terms(
        votes,
        mechanism,
        num_seen=None if answered is None else len(answered),
        baseline=baseline,
        half_even=half_even,
        need_logq=not data_independent,
        chunk_size=chunk_size,
        progress=progress,
    )
    return account_terms(
        mechanism,
        terms,
        orders,
        num_queries=len(votes),
        answered=answered,
        data_independent=data_independent,
    )


def account_terms(
    mechanism: Mechanism,
    terms: QueryTerms,
    orders: FloatArray,
    *,
    num_queries: int,
    answered: NDArray[np.bool_] | None = None,
    data_independent: bool = False,
) -> RdpAccount:
    """``account`` from per-query terms already computed. Shapes: orders (K,)."""
    weights = answer_weights(terms, answered)
    steps = compose(
        mechanism,
        terms,
        orders,
        weights=weights,
        data_independent=(data_independent, data_independent),
    )
    return RdpAccount(
        data_dependent=steps.data_dependent,
        data_independent=steps.data_independent,
        expected_answered=float(terms.num_seen if weights is None else weights.sum()),
        num_queries_seen=terms.num_seen,
        realized=answered is not None,
        worst_case=data_independent_rdp(
            mechanism, orders, num_queries, num_queries, terms.threshold_sensitivity
        ),
        steps=steps,
    )


def scaled_cost(count: float, cost: FloatArray) -> FloatArray:
    """count x per-step cost, where no step costs nothing even if one step costs inf."""
    return np.zeros_like(cost) if count == 0 else count * cost


def data_independent_rdp(
    mechanism: Mechanism,
    orders: FloatArray,
    num_seen: int,
    num_answered: float,
    threshold_sensitivity: int = 1,
) -> FloatArray:
    """Data-independent totals: Prop. 8 per answer, plus the threshold step per query seen
    (its statistic moving by ``threshold_sensitivity``)."""
    answers = scaled_cost(num_answered, _data_independent_answer(mechanism, orders))
    step = mechanism.threshold_step
    if step is not None:
        per_query_seen = step.data_independent(orders, threshold_sensitivity)
        return scaled_cost(num_seen, per_query_seen) + answers
    return answers

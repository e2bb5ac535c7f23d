"""The per-query terms of a run, computed once per call.

A query's data-dependent cost depends on the votes only through a few scalars: log q of
the answer step (Prop. 7 of 2018 for GNMax, Lemma 4 of 2017 for LNMax), and for the
threshold step its statistic (the rounded top vote, in noise units) and log Pr[answered].
``query_terms`` computes them in one pass over the votes, chunk by chunk; every figure,
the ledger and the release read them from there.

Votes held by distinct row (``core.distinct.DistinctRows``) are evaluated once per distinct
row (of the votes, or of the votes and the baseline side by side); each query's terms are
its row's, and the terms keep the rows (``QueryTerms.distinct``) so that a sum over the
queries can be a sum over the rows weighted by their counts (``accountant.compose``).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any

import numpy as np
from numpy.typing import NDArray

from pate_cli.core._common import thread_count
from pate_cli.core.compact import Counts, parts, read_rows
from pate_cli.core.distinct import DistinctRows
from pate_cli.engines import map_blocks
from pate_cli.mechanisms import Mechanism
from pate_cli.mechanisms.steps import ThresholdStep

DEFAULT_CHUNK_SIZE = 1 << 16

FloatArray = NDArray[np.float64]


@dataclass(frozen=True)
class QueryTerms:
    """The per-query scalars that the costs depend on, for the queries seen."""

    log_pr_answered: FloatArray | None
    """log Pr[answered] of the threshold step (Q,); None without one."""
    logq_threshold: FloatArray | None
    """log of the threshold step's less likely outcome (Q,), from its own tail; None without one."""
    logq: FloatArray | None
    """log q of the answer step (Q,); None when data-independent bounds are forced."""
    num_seen: int
    margins: FloatArray | None = None
    """The threshold step's statistic in noise units, (h - T) / sigma1 (Q,)."""
    threshold_sensitivity: int = 1
    """How far a neighbour moves the rounded statistic h: 1, or 2 under half to even where a
    value of votes - baseline is an exact half (the threshold step's ``moves``). Every
    privacy bound of the threshold step reads it; its probabilities do not."""
    logq_neighbour: FloatArray | None = None
    """log of the answer step's q bound for every neighbour of the votes (Q,), for the
    privacy-loss-distribution account; None unless asked for (``neighbour``)."""
    distinct: Distinct | None = None
    """The same terms by distinct row, where the votes are held so; None otherwise."""

    def rows(self, start: int, stop: int) -> QueryTerms:
        """The terms of queries [start, stop); the threshold sensitivity is the run's (the
        distinct rows are kept for a prefix, ``start`` 0)."""

        def part(values: FloatArray | None) -> FloatArray | None:
            return None if values is None else values[start:stop]

        distinct = self.distinct
        return replace(
            self,
            log_pr_answered=part(self.log_pr_answered),
            logq_threshold=part(self.logq_threshold),
            logq=part(self.logq),
            num_seen=stop - start,
            margins=part(self.margins),
            logq_neighbour=part(self.logq_neighbour),
            distinct=None if distinct is None or start else distinct.prefix(stop),
        )

    def grouped(self, name: str) -> Grouped | None:
        """The per-query array ``name`` (a field of the terms) by distinct row, or None."""
        if self.distinct is None:
            return None
        values = getattr(self.distinct.terms, name)
        if values is None:
            return None
        return Grouped(values, self.distinct.inverse, self.distinct.counts)


@dataclass(frozen=True)
class Grouped:
    """A per-query array held by distinct row: ``values[inverse]`` is the array (L,).
    Shapes: values (U,), inverse (L,), counts (U,) the queries of each row, each at least 1."""

    values: FloatArray
    inverse: NDArray[np.signedinteger[Any]]
    counts: NDArray[np.int64]


@dataclass(frozen=True)
class Distinct:
    """The terms of each distinct row (``terms``, of U rows), the row of each query seen
    (``inverse``, (L,)) and how many queries seen hold each row (``counts``, (U,), each at
    least 1)."""

    terms: QueryTerms
    inverse: NDArray[np.signedinteger[Any]]
    counts: NDArray[np.int64]

    def prefix(self, num: int) -> Distinct:
        """The first ``num`` queries' rows (the first rows: they come in the order of their
        first query)."""
        inverse = self.inverse[:num]
        held = int(inverse.max()) + 1 if inverse.size else 0
        counts = np.bincount(inverse, minlength=held).astype(np.int64)
        return Distinct(self.terms.rows(0, held), inverse, counts)


def query_terms(
    votes: Counts | Any,
    mechanism: Mechanism,
    *,
    num_seen: int | None = None,
    baseline: FloatArray | None = None,
    half_even: bool = False,
    need_logq: bool = True,
    answer_only: bool = False,
    neighbour: Callable[[Counts], FloatArray] | None = None,
    chunk_size: int | None = None,
    progress: Callable[[int], None] | None = None,
    workers: int | None = None,
) -> QueryTerms:
    """One pass over the votes, chunk by chunk: log Pr[answered] and log q per query.

    ``answer_only`` leaves the threshold step out (the answer step's terms alone);
    ``neighbour`` is a second column read in the same pass: the answer step's q bound for
    every neighbour (``--pld``'s q-bound pairs, ``pld.PldPlan.neighbour``).
    Chunks run on up to ``workers`` threads (reading a chunk and numpy's loops release
    the GIL); each writes its own slice, so the result does not depend on the count.

    Shapes: votes (Q, C) -> (Q,) arrays for the first ``num_seen`` queries.
    """
    if isinstance(votes, DistinctRows):
        options: dict[str, Any] = {"half_even": half_even, "need_logq": need_logq}
        options |= {"answer_only": answer_only, "neighbour": neighbour}
        options |= {"chunk_size": chunk_size, "workers": workers}
        return _by_distinct_rows(votes, mechanism, num_seen, baseline, progress, options)
    seen = len(votes) if num_seen is None else num_seen
    chunk_size = DEFAULT_CHUNK_SIZE if chunk_size is None else chunk_size  # read when called
    step = None if answer_only else mechanism.threshold_step
    is_threshold = step is not None
    log_pr = np.empty(seen) if is_threshold else None
    logq_step1 = np.empty(seen) if is_threshold else None
    step1_margins = np.empty(seen) if is_threshold else None
    logq = np.empty(seen) if need_logq else None
    logq_neighbour = None if neighbour is None else np.empty(seen)
    sensitivities = [1]

    def rows(start: int) -> tuple[Any, ...]:
        """``_block_terms``'s arguments for the block at ``start``."""
        stop = min(start + chunk_size, seen)
        block_baseline = None if baseline is None else baseline[start:stop]
        counts = read_rows(votes, start, stop)
        return (counts, block_baseline, mechanism, step, half_even, need_logq, neighbour)

    def store(start: int, found: QueryTerms) -> None:
        stop = start + found.num_seen
        for name, out in (
            ("margins", step1_margins),
            ("log_pr_answered", log_pr),
            ("logq_threshold", logq_step1),
            ("logq", logq),
            ("logq_neighbour", logq_neighbour),
        ):
            if out is not None:
                out[start:stop] = getattr(found, name)
        sensitivities.append(found.threshold_sensitivity)

    starts = range(0, seen, chunk_size)
    sizes = [min(chunk_size, seen - start) for start in starts]
    threads = workers if workers is not None else thread_count()
    found = map_blocks(
        _block_terms,
        len(starts),
        lambda i: rows(starts[i]),
        threads=threads,
        advance=progress,
        sizes=sizes,
    )
    for start, block in zip(starts, found, strict=True):  # each block's own rows' terms
        store(start, block)
    if step is not None and half_even and max(sensitivities) == 1:
        sensitivities.append(_moves_after(votes, seen, step, baseline, chunk_size))
    return QueryTerms(
        log_pr, logq_step1, logq, seen, step1_margins, max(sensitivities), logq_neighbour
    )


def _moves_after(
    votes: Any, seen: int, step: ThresholdStep, baseline: FloatArray | None, chunk_size: int
) -> int:
    """How far a neighbour moves the rounded statistic under half to even on the queries
    after the ``seen``: the worst case covers the file's every query (a realised run)."""
    moves = [1]
    for start in range(seen, len(votes), chunk_size):
        rest, _, _ = parts(read_rows(votes, start, start + chunk_size))
        if baseline is not None:
            rest = rest - baseline[start : start + chunk_size]
        moves.append(step.moves(rest, half_even=True))
    return max(moves)


def _block_terms(
    counts: Counts,
    baseline: FloatArray | None,
    mechanism: Mechanism,
    step: ThresholdStep | None,
    half_even: bool,
    need_logq: bool,
    neighbour: Callable[[Counts], FloatArray] | None,
) -> QueryTerms:
    """The terms of one block of queries, from its rows alone (and the baseline's): a
    function of its arguments, run in this process or on an engine's worker."""
    found = None
    if step is not None:
        values, _, _ = parts(counts)  # the statistic reads the top count alone
        found = step.terms(values if baseline is None else values - baseline, half_even)
    return QueryTerms(
        log_pr_answered=None if found is None else found.log_pr_answered,
        logq_threshold=None if found is None else found.logq,
        logq=mechanism.answer_step.logq(counts) if need_logq else None,
        num_seen=len(counts),
        margins=None if found is None else found.margins,
        threshold_sensitivity=1 if found is None else found.moves,
        logq_neighbour=None if neighbour is None else neighbour(counts),
    )


def _by_distinct_rows(
    votes: DistinctRows,
    mechanism: Mechanism,
    num_seen: int | None,
    baseline: FloatArray | None,
    progress: Callable[[int], None] | None,
    options: dict[str, Any],
) -> QueryTerms:
    """``query_terms`` of votes held by distinct row: the terms of each distinct row (of the
    votes, or of the votes and the baseline side by side) once, each query's its row's. The
    worst case of a realised run's threshold sensitivity covers the rows of the queries not
    seen too, as it covers those queries."""
    seen = len(votes) if num_seen is None else num_seen
    rows, row_baseline = (votes, None) if baseline is None else votes.paired(baseline)
    held = rows.prefix(seen)
    num = held.num_rows
    terms = query_terms(
        held.rows,
        mechanism,
        baseline=None if row_baseline is None else row_baseline[:num],
        **options,
    )
    step = None if options["answer_only"] else mechanism.threshold_step
    moves = terms.threshold_sensitivity
    if step is not None and options["half_even"] and moves == 1 and num < rows.num_rows:
        rest = rows.rows[num:] if row_baseline is None else rows.rows[num:] - row_baseline[num:]
        terms = replace(terms, threshold_sensitivity=step.moves(rest, half_even=True))
    if progress is not None:
        progress(seen)

    index = held.inverse.astype(np.intp)  # converted once, not by each gather

    def each(values: FloatArray | None) -> FloatArray | None:
        return None if values is None else values[index]

    return QueryTerms(
        each(terms.log_pr_answered),
        each(terms.logq_threshold),
        each(terms.logq),
        seen,
        each(terms.margins),
        terms.threshold_sensitivity,
        each(terms.logq_neighbour),
        Distinct(terms, held.inverse, held.counts),
    )


def answer_weights(
    terms: QueryTerms, answered: NDArray[np.bool_] | None = None
) -> FloatArray | None:
    """The weight of each query's answer step: the realised mask, Pr[answered] in
    expectation (the 2018 reference's accounting), or None when every query is answered."""
    if answered is not None:
        return answered.astype(np.float64)
    if terms.log_pr_answered is not None:
        distinct = terms.distinct
        if distinct is not None and distinct.terms.log_pr_answered is not None:
            return np.exp(distinct.terms.log_pr_answered)[distinct.inverse]  # each row's once
        return np.exp(terms.log_pr_answered)
    return None

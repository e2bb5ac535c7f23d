"""The accountant's pass as a pair, for a map-reduce of one's own: a block's part, then the
finish from the parts put together.

A query's cost depends on its votes only through a few scalars (``terms.py``), each the
query's own. So a run's account splits into a map and a reduce that give the one-process
figures to the last bit, whatever ran each block and in whatever order the blocks came back:

- :func:`partial_account` (on any worker): the terms of one block of queries, and where the
  block starts in the run (a :class:`Partial`: a few floats a query);
- :func:`merge_partials` (anywhere): the parts put together in the order of their starts,
  which must tile the run's queries from 0 (an exact concatenation: no sum is taken yet);
- :func:`finish_account`: every figure of ``accountant.run.run_account`` from the merged
  terms, with the sums taken as the one-process run takes them.

``--engine dask`` runs the same map over the blocks of a file or folder (``pate_cli.engines``).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, replace

import numpy as np

from pate_cli.accountant.run import RunAccount, run_account
from pate_cli.accountant.terms import FloatArray, QueryTerms, query_terms
from pate_cli.choices import Conversion
from pate_cli.common.spelling import option
from pate_cli.errors import UsageError
from pate_cli.mechanisms import Mechanism

# The terms' per-query arrays (each None where the mechanism has no such term).
_ARRAYS = ("log_pr_answered", "logq_threshold", "logq", "margins")


@dataclass(frozen=True)
class Partial:
    """The per-query terms of queries [start, start + num_queries) of a run."""

    start: int
    terms: QueryTerms

    @property
    def num_queries(self) -> int:
        return self.terms.num_seen

    @property
    def stop(self) -> int:
        return self.start + self.num_queries


def partial_account(
    counts: FloatArray,
    mechanism: Mechanism,
    *,
    start: int = 0,
    baseline: FloatArray | None = None,
    half_even: bool = False,
) -> Partial:
    """The part of one block of queries (``counts``, checked votes of the block: Q_b x C)
    that begins at query ``start`` of the run; ``baseline``: the block's rows of
    Interactive-GNMax's baseline; ``half_even`` as ``analyze``'s."""
    terms = query_terms(counts, mechanism, baseline=baseline, half_even=half_even, workers=1)
    return Partial(int(start), terms)


def merge_partials(parts: Iterable[Partial]) -> Partial:
    """The parts as one, in the order of their starts: they must tile [0, Q) with no gap or
    overlap and hold the same terms (of one mechanism). The threshold step's sensitivity is
    the largest (``QueryTerms.threshold_sensitivity``: the run's worst case)."""
    ordered = sorted(parts, key=lambda part: part.start)
    if not ordered:
        raise UsageError(f"{option('parts')}: expected at least one part")
    held = [name for name in _ARRAYS if getattr(ordered[0].terms, name) is not None]
    position = 0
    for part in ordered:
        if part.start != position:
            what = "a gap" if part.start > position else "an overlap"
            raise UsageError(
                f"{option('parts')}: {what} at query {position}: the next part starts at "
                f"{part.start}; the parts must tile the run's queries from 0"
            )
        if [n for n in _ARRAYS if getattr(part.terms, n) is not None] != held:
            raise UsageError(
                f"{option('parts')}: the part at query {part.start} holds other terms than "
                "the first (parts of another mechanism?)"
            )
        position = part.stop
    joined = {
        name: np.concatenate([getattr(part.terms, name) for part in ordered]) for name in held
    }
    terms = replace(
        ordered[0].terms,
        num_seen=position,
        threshold_sensitivity=max(part.terms.threshold_sensitivity for part in ordered),
        distinct=None,
        logq_neighbour=None,
        **{name: joined.get(name) for name in _ARRAYS},
    )
    return Partial(0, terms)


def finish_account(
    merged: Partial,
    mechanism: Mechanism,
    orders: FloatArray,
    delta: float,
    conversion: Conversion,
) -> RunAccount:
    """Every figure of the run whose parts were merged (``merge_partials``): what
    ``analyze`` reports without a release, from the same terms by the same sums."""
    if merged.start != 0:
        raise UsageError(f"{option('merged')}: a run's parts start at query 0 (merge them first)")
    return run_account(
        None,
        mechanism,
        orders,
        delta,
        conversion,
        num_queries=merged.num_queries,
        terms=merged.terms,
    )

"""The per-query ledger as data: one row per query of an analysed run, and its summaries.

A :class:`Ledger` holds, at the report's best data-dependent order, each query's index in the
file, top vote and gap, log q, Pr[answered], RDP and running epsilon (``ledger.py`` builds it
from an analysis and writes it). The summaries read it alone: the most expensive queries, and
the cost by teacher agreement, the top vote share n_max / M, in the buckets of the 2018 paper's
Figure 5 ([0, 0.5), [0.5, 0.6), ..., [0.9, 1]).

This module imports no report model, so the report models can hold a ledger (``--breakdown``)
while ``ledger.py`` reads the analysis it splits.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any

import numpy as np
from numpy.typing import NDArray

from pate_cli.core.compact import Compact, top_two_values

FloatArray = NDArray[np.float64]

#: Lower edges of the agreement buckets (top vote share n_max / M); the last is closed at 1.
BUCKET_EDGES: tuple[float, ...] = (0.0, 0.5, 0.6, 0.7, 0.8, 0.9)
#: How many of the most expensive queries the summary and the table list.
TOP_QUERIES = 10


# ---------------------------------------------------------------------------
# Agreement buckets (2018 paper, Figure 5).


def bucket_labels() -> list[str]:
    """Labels of the agreement buckets: "[0.0, 0.5)", ..., "[0.9, 1.0]"."""
    uppers = (*BUCKET_EDGES[1:], 1.0)
    return [
        f"[{lo:.1f}, {hi:.1f}{']' if i == len(BUCKET_EDGES) - 1 else ')'}"
        for i, (lo, hi) in enumerate(zip(BUCKET_EDGES, uppers, strict=True))
    ]


def agreement_bucket(top_share: FloatArray) -> NDArray[np.intp]:
    """Bucket index of each top vote share; shares above 1 (``--teachers``) go to the last.

    Shapes: top_share (Q,) -> (Q,).
    """
    index = np.searchsorted(np.asarray(BUCKET_EDGES), top_share, side="right") - 1
    return np.clip(index, 0, len(BUCKET_EDGES) - 1)


_TOP_BLOCK = 1 << 16


def top_two(counts: FloatArray | Compact) -> tuple[FloatArray, FloatArray]:
    """Top vote count and its gap to the runner-up (the top count itself for one class).

    Shapes: counts (Q, C) -> (Q,), (Q,).
    """
    if isinstance(counts, Compact):
        top, second = top_two_values(counts)
        return top, np.where(np.isfinite(second), top - second, top)
    num, classes = counts.shape
    top, gap = np.empty(num), np.empty(num)
    # In blocks of rows: memory of a block, not of a partitioned copy of every count.
    for start in range(0, num, _TOP_BLOCK):
        block = np.asarray(counts[start : start + _TOP_BLOCK], dtype=np.float64)
        stop = start + block.shape[0]
        if classes == 1:
            top[start:stop] = gap[start:stop] = block[:, 0]
            continue
        pair = np.partition(block, -2, axis=1)[:, -2:]
        top[start:stop] = pair[:, 1]
        gap[start:stop] = pair[:, 1] - pair[:, 0]
    return top, gap


# ---------------------------------------------------------------------------
# The ledger.

#: The columns of a ledger block (``Ledger.blocks``), in the order the files write them.
BLOCK_COLUMNS = (
    "index",
    "top_votes",
    "gap",
    "logq",
    "pr_answered",
    "rdp",
    "running_epsilon",
    "running_order",
    "running_epsilon_data_independent",
)
#: The costly columns of a block: each needs the composed cost of every query before it.
RUNNING_COLUMNS = ("running_epsilon", "running_order", "running_epsilon_data_independent")
Block = dict[str, NDArray[Any]]
"""Consecutive rows of a ledger, by column (``BLOCK_COLUMNS``)."""


@dataclass(frozen=True, eq=False)
class Ledger:
    """Per-query costs of one analysed run at its best data-dependent order.

    The rows are computed block by block from the analysis (``rows``), so that writing a
    ledger of millions of queries, or summarising it, holds one block at a time; the whole
    columns (``rdp``, ``running_epsilon``...) are computed on first use and kept. Arrays
    have one entry per query accounted (L: all Q, or the prefix a realised run saw).
    """

    mechanism: dict[str, Any]
    """The mechanism as in the report's JSON."""
    realized: bool
    """True for a realised run (an answered mask)."""
    forced_data_independent: bool
    """True when the report forced data-independent bounds (the terms are those)."""
    delta: float
    conversion: str
    num_teachers: int
    order: float
    """The report's best data-dependent order; ``rdp`` is evaluated there."""
    data_independent_order: float
    """The report's best data-independent order, for ``running_epsilon_data_independent``."""
    epsilon: float
    """The report's data-dependent epsilon (``running_epsilon[-1]`` up to rounding)."""
    num_queries: int
    """L, the number of rows."""
    rows: Callable[..., Iterator[Block]] = field(repr=False)
    """``rows(running=True)``: the rows, block by block, computed afresh on every call;
    with ``running=False`` without the running epsilons (NaN), which cost the most."""

    def blocks(self, *, running: bool = True) -> Iterator[Block]:
        """The rows block by block: from the columns when they were computed, else afresh
        (``running``: with the running epsilons)."""
        if "_columns" not in self.__dict__:
            if not running or "totals" not in self.__dict__ or self.totals.running is None:
                yield from self.rows(running=running)
                return
            # The running epsilons were kept by the summing pass: the rest is cheap to redo.
            start = 0
            for block in self.rows(running=False):
                stop = start + block["rdp"].size
                for name, values in (self.totals.running or {}).items():
                    block[name] = values[start:stop]
                yield block
                start = stop
            return
        columns = self._columns
        for start in range(0, self.num_queries, _SUMMARY_BLOCK):
            yield {name: values[start : start + _SUMMARY_BLOCK] for name, values in columns.items()}

    @cached_property
    def _columns(self) -> Block:
        parts: dict[str, list[NDArray[Any]]] = {name: [] for name in BLOCK_COLUMNS}
        for block in self.rows():
            for name in BLOCK_COLUMNS:
                parts[name].append(block[name])
        return {
            name: np.concatenate(values) if values else np.empty(0, dtype=_DTYPES.get(name))
            for name, values in parts.items()
        }

    @property
    def index(self) -> NDArray[np.int64]:
        """The file's query index of each row."""
        return self._columns["index"]

    @property
    def top_votes(self) -> FloatArray:
        return self._columns["top_votes"]

    @property
    def gap(self) -> FloatArray:
        """Top vote count minus the runner-up's."""
        return self._columns["gap"]

    @property
    def logq(self) -> FloatArray:
        """log q of the answer step (an upper bound on log Pr[answer != plurality])."""
        return self._columns["logq"]

    @property
    def pr_answered(self) -> FloatArray:
        """Pr[answered] (expected), 1/0 from the mask (realised), or 1 without a threshold."""
        return self._columns["pr_answered"]

    @property
    def rdp(self) -> FloatArray:
        """RDP of each query at ``order``: threshold step + pr_answered * answer step."""
        return self._columns["rdp"]

    @property
    def running_epsilon(self) -> FloatArray:
        """Epsilon of the first i+1 queries analysed alone (the minimum over the orders)."""
        return self._columns["running_epsilon"]

    @property
    def running_order(self) -> FloatArray:
        """The order that attains ``running_epsilon``."""
        return self._columns["running_order"]

    @property
    def running_epsilon_data_independent(self) -> FloatArray:
        """Data-independent epsilon of the first i+1 queries (the minimum over the orders)."""
        return self._columns["running_epsilon_data_independent"]

    @cached_property
    def totals(self) -> Totals:
        """The sums and the most expensive rows, in one pass over the blocks."""
        return _totals(self)

    def summary(self) -> dict[str, Any]:
        """The JSON ``breakdown``: see ``ledger_summary``."""
        return ledger_summary(self)

    @property
    def total_rdp(self) -> float:
        return self.totals.rdp

    @property
    def top_share(self) -> FloatArray:
        """Teacher agreement n_max / M of each query."""
        share: FloatArray = self.top_votes / self.num_teachers
        return share

    @property
    def share(self) -> FloatArray:
        """Each query's share of the total RDP (0 everywhere when the total is 0)."""
        return share_of(self.rdp, self.total_rdp)


_DTYPES = {"index": np.int64}
#: Up to this many rows (48 MiB of running epsilons) the summing pass keeps the running
#: epsilons for the ledger's file; beyond, writing it computes them again (twice the time,
#: memory of a block whatever the number of queries).
KEEP_RUNNING = 1 << 21
_SUMMARY_BLOCK = 1 << 15


def share_of(rdp: FloatArray, total: float) -> FloatArray:
    """Each part's share of the total RDP: 0 everywhere when the total is 0; when it is
    infinite, 1 for each infinite part (each alone makes the total infinite) and 0 for the
    finite ones, since inf / inf would be NaN, which no output may hold."""
    rdp = np.asarray(rdp, dtype=np.float64)
    if total == 0:
        return np.zeros_like(rdp)
    if math.isinf(total):
        return np.where(np.isinf(rdp), 1.0, 0.0)
    share: FloatArray = rdp / total
    return share


@dataclass(frozen=True)
class Totals:
    """What the summaries need of a whole ledger, gathered block by block."""

    rdp: float
    """Sum of the per-query RDP (in file order, block by block)."""
    answered: float
    """Sum of Pr[answered]."""
    bucket_queries: NDArray[np.intp]
    bucket_answered: FloatArray
    bucket_rdp: FloatArray
    top_rows: list[dict[str, Any]]
    """The ``TOP_QUERIES`` most expensive rows (``BLOCK_COLUMNS`` plus ``position``), the
    costliest first, the earliest first on ties."""
    last_running_epsilon: float
    running: dict[str, FloatArray] | None
    """The running epsilons and orders of every row (``RUNNING_COLUMNS``): the costly part
    of a row, kept so that writing the ledger need not compute it again (3 floats a row),
    up to ``KEEP_RUNNING`` rows; None beyond (they are computed again when written)."""


def _rechunk(blocks: Iterator[Block], size: int) -> Iterator[Block]:
    """The same rows in blocks of exactly ``size`` (the last shorter): sums taken block by
    block then come out the same bit for bit however the rows were computed."""
    pending: list[Block] = []
    held = 0
    for block in blocks:
        pending.append(block)
        held += block["rdp"].size
        while held >= size:
            joined = {name: np.concatenate([b[name] for b in pending]) for name in pending[0]}
            yield {name: values[:size] for name, values in joined.items()}
            rest = {name: values[size:] for name, values in joined.items()}
            pending, held = [rest], held - size
    if held:
        yield {name: np.concatenate([b[name] for b in pending]) for name in pending[0]}


def _totals(ledger: Ledger, count: int = TOP_QUERIES) -> Totals:
    size = len(BUCKET_EDGES)
    queries = np.zeros(size, dtype=np.intp)
    answered_by, rdp_by = np.zeros(size), np.zeros(size)
    total_rdp, total_answered = 0.0, 0.0
    top: list[tuple[float, int, dict[str, Any]]] = []
    position = 0
    keep = ledger.num_queries <= KEEP_RUNNING
    running: dict[str, list[FloatArray]] = {name: [] for name in RUNNING_COLUMNS}
    last = 0.0
    for block in _rechunk(ledger.blocks(), _SUMMARY_BLOCK):
        rdp = block["rdp"]
        if rdp.size:
            last = float(block["running_epsilon"][-1])
        for name in RUNNING_COLUMNS if keep else ():
            running[name].append(block[name])
        which = agreement_bucket(block["top_votes"] / ledger.num_teachers)
        queries += np.bincount(which, minlength=size)
        answered_by += np.bincount(which, weights=block["pr_answered"], minlength=size)
        rdp_by += np.bincount(which, weights=rdp, minlength=size)
        total_rdp += float(rdp.sum())
        total_answered += float(block["pr_answered"].sum())
        for i in np.argsort(-rdp, kind="stable")[:count]:
            row = {name: block[name][i].item() for name in BLOCK_COLUMNS}
            top.append((-float(rdp[i]), position + int(i), row))
        top = sorted(top, key=lambda item: (item[0], item[1]))[:count]
        position += rdp.size
    return Totals(
        rdp=total_rdp,
        answered=total_answered,
        bucket_queries=queries,
        bucket_answered=answered_by,
        bucket_rdp=rdp_by,
        top_rows=[{**row, "position": where} for _, where, row in top],
        last_running_epsilon=last,
        running={
            name: np.concatenate(parts) if parts else np.empty(0) for name, parts in running.items()
        }
        if keep
        else None,
    )


@dataclass(frozen=True)
class Bucket:
    """Queries whose top vote share falls in [low, high) (the last bucket closed at 1)."""

    label: str
    low: float
    high: float
    queries: int
    expected_answered: float
    rdp: float
    share: float
    """Share of the ledger's total RDP."""


def buckets(ledger: Ledger) -> list[Bucket]:
    """The cost by teacher agreement (2018 paper, Figure 5)."""
    totals = ledger.totals
    shares = share_of(np.asarray(totals.bucket_rdp, dtype=np.float64), totals.rdp)
    uppers = (*BUCKET_EDGES[1:], 1.0)
    return [
        Bucket(
            label=label,
            low=low,
            high=high,
            queries=int(totals.bucket_queries[i]),
            expected_answered=float(totals.bucket_answered[i]),
            rdp=float(totals.bucket_rdp[i]),
            share=float(shares[i]),
        )
        for i, (label, low, high) in enumerate(
            zip(bucket_labels(), BUCKET_EDGES, uppers, strict=True)
        )
    ]


def most_expensive_rows(ledger: Ledger) -> list[dict[str, Any]]:
    """The ``TOP_QUERIES`` most expensive queries as rows of the ledger (with their share
    and top share), the costliest first, the earliest first on ties."""
    total = ledger.totals.rdp
    return [
        {
            "index": int(row["index"]),
            "top_votes": float(row["top_votes"]),
            "gap": float(row["gap"]),
            "top_share": float(row["top_votes"] / ledger.num_teachers),
            "logq": float(row["logq"]),
            "pr_answered": float(row["pr_answered"]),
            "rdp": float(row["rdp"]),
            "share": float(share_of(np.array([row["rdp"]]), total)[0]),
            "running_epsilon": float(row["running_epsilon"]),
            "running_order": float(row["running_order"]),
            "running_epsilon_data_independent": float(row["running_epsilon_data_independent"]),
        }
        for row in ledger.totals.top_rows
    ]


def ledger_summary(ledger: Ledger) -> dict[str, Any]:
    """JSON-safe summary: the order, totals, the most expensive queries and the buckets."""
    return {
        "order": ledger.order,
        "num_queries": ledger.num_queries,
        "total_rdp": ledger.total_rdp,
        "epsilon": ledger.totals.last_running_epsilon,
        "most_expensive": most_expensive_rows(ledger),
        "by_agreement": [
            {
                "top_share": [b.low, b.high],
                "label": b.label,
                "queries": b.queries,
                "expected_answered": b.expected_answered,
                "rdp": b.rdp,
                "share": b.share,
            }
            for b in buckets(ledger)
        ],
    }

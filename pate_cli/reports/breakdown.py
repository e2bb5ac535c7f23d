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

from dataclasses import dataclass
from typing import Any

import numpy as np
from numpy.typing import NDArray

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


def top_two(counts: FloatArray) -> tuple[FloatArray, FloatArray]:
    """Top vote count and its gap to the runner-up (the top count itself for one class).

    Shapes: counts (Q, C) -> (Q,), (Q,).
    """
    counts = np.asarray(counts, dtype=np.float64)
    if counts.shape[1] == 1:
        top = counts[:, 0].copy()
        return top, top.copy()
    pair = np.partition(counts, -2, axis=1)[:, -2:]
    return pair[:, 1], pair[:, 1] - pair[:, 0]


# ---------------------------------------------------------------------------
# The ledger.


@dataclass(frozen=True)
class Ledger:
    """Per-query costs of one analysed run at its best data-dependent order.

    Arrays have one entry per query accounted (L: all Q, or the prefix a realised run saw).
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
    index: NDArray[np.int64]
    """The file's query index of each row."""
    top_votes: FloatArray
    gap: FloatArray
    """Top vote count minus the runner-up's."""
    logq: FloatArray
    """log q of the answer step (an upper bound on log Pr[answer != plurality])."""
    pr_answered: FloatArray
    """Pr[answered] (expected), 1/0 from the mask (realised), or 1 without a threshold."""
    rdp: FloatArray
    """RDP of each query at ``order``: threshold step + pr_answered * answer step."""
    running_epsilon: FloatArray
    """Epsilon of the first i+1 queries analysed alone (the minimum over the orders)."""
    running_order: FloatArray
    """The order that attains ``running_epsilon``."""
    running_epsilon_data_independent: FloatArray
    """Data-independent epsilon of the first i+1 queries (the minimum over the orders)."""

    def summary(self) -> dict[str, Any]:
        """The JSON ``breakdown``: see ``ledger_summary``."""
        return ledger_summary(self)

    @property
    def num_queries(self) -> int:
        """L, the number of rows."""
        return int(self.index.size)

    @property
    def total_rdp(self) -> float:
        return float(self.rdp.sum())

    @property
    def top_share(self) -> FloatArray:
        """Teacher agreement n_max / M of each query."""
        share: FloatArray = self.top_votes / self.num_teachers
        return share

    @property
    def share(self) -> FloatArray:
        """Each query's share of the total RDP (0 everywhere when the total is 0)."""
        total = self.total_rdp
        if total == 0:
            return np.zeros_like(self.rdp)
        share: FloatArray = self.rdp / total
        return share


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
    which = agreement_bucket(ledger.top_share)
    size = len(BUCKET_EDGES)
    queries = np.bincount(which, minlength=size)
    answered = np.bincount(which, weights=ledger.pr_answered, minlength=size)
    rdp = np.bincount(which, weights=ledger.rdp, minlength=size)
    total = ledger.total_rdp
    uppers = (*BUCKET_EDGES[1:], 1.0)
    return [
        Bucket(
            label=label,
            low=low,
            high=high,
            queries=int(queries[i]),
            expected_answered=float(answered[i]),
            rdp=float(rdp[i]),
            share=float(rdp[i] / total) if total > 0 else 0.0,
        )
        for i, (label, low, high) in enumerate(
            zip(bucket_labels(), BUCKET_EDGES, uppers, strict=True)
        )
    ]


def most_expensive(ledger: Ledger, count: int = TOP_QUERIES) -> NDArray[np.intp]:
    """Row positions of the ``count`` most expensive queries, the earliest first on ties."""
    by_cost = np.argsort(-ledger.rdp, kind="stable")
    return by_cost[:count]


def _row(ledger: Ledger, share: FloatArray, i: int) -> dict[str, Any]:
    return {
        "index": int(ledger.index[i]),
        "top_votes": float(ledger.top_votes[i]),
        "gap": float(ledger.gap[i]),
        "top_share": float(ledger.top_votes[i] / ledger.num_teachers),
        "logq": float(ledger.logq[i]),
        "pr_answered": float(ledger.pr_answered[i]),
        "rdp": float(ledger.rdp[i]),
        "share": float(share[i]),
        "running_epsilon": float(ledger.running_epsilon[i]),
        "running_order": float(ledger.running_order[i]),
        "running_epsilon_data_independent": float(ledger.running_epsilon_data_independent[i]),
    }


def ledger_summary(ledger: Ledger) -> dict[str, Any]:
    """JSON-safe summary: the order, totals, the most expensive queries and the buckets."""
    share = ledger.share
    return {
        "order": ledger.order,
        "num_queries": ledger.num_queries,
        "total_rdp": ledger.total_rdp,
        "epsilon": float(ledger.running_epsilon[-1]) if ledger.num_queries else 0.0,
        "most_expensive": [_row(ledger, share, int(i)) for i in most_expensive(ledger)],
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

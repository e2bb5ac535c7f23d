"""The per-query cost ledger: where a run's privacy budget goes.

``accounting.account`` sums per-query RDP terms into one curve per order and
deduplicates them on the way (a query's cost depends on the votes only through
log q and log Pr[answered]). The ledger undoes the sum at a single order, the
report's best data-dependent order, and keeps one row per query:

- the file's query index, the top vote count and its gap to the runner-up;
- log q of the answer step (GNMax and LNMax bounds of Pr[answer != plurality]);
- Pr[answered]: the threshold step's probability (expected accounting), 1/0
  from the mask (realised accounting, only the L queries the run saw), or 1 for
  mechanisms without a threshold;
- its RDP: threshold step + Pr[answered] * answer step, exactly the terms that
  ``account`` sums (data-independent terms when the report forced them);
- its share of the total;
- the running epsilon: the epsilon of the first k queries analysed alone, the
  minimum over the report's orders of their composed cost (the number ``analyze
  --queries k`` gives), with the order that attains it; the last value is the
  report's epsilon. A second running epsilon does the same with the
  data-independent bounds, for the plot of epsilon against queries. Both come
  from one pass over running sums of the per-query costs
  (``accounting.prefix_epsilons``).

Queries are also grouped by teacher agreement, the top vote share n_max / M,
in the buckets of the 2018 paper's Figure 5 ([0, 0.5), [0.5, 0.6), ...,
[0.9, 1]): how many queries fall in each, how many are expected to be answered
and what share of the cost they carry.

The module also holds the output-file helpers shared by the commands that write
reports (``--ledger``, ``--csv``, ``--plot``): a path check to run before any
work, and an atomic write (a temporary file in the same folder, then
``os.replace``), so a failed run never leaves a partial file.
"""

from __future__ import annotations

import csv
import io
from dataclasses import dataclass
from typing import Any

import numpy as np
from numpy.typing import NDArray

from pate_cli.accountant.compose import (
    Conversion,
    QueryTerms,
    answer_weights,
    compose,
    per_query,
    prefix_epsilons,
    query_terms,
)
from pate_cli.mechanisms import Mechanism
from pate_cli.reports.models import AnalysisReport, dumps
from pate_cli.votes import Votes, check_output_path, write_atomic

FloatArray = NDArray[np.float64]

#: Lower edges of the agreement buckets (top vote share n_max / M); the last is closed at 1.
BUCKET_EDGES: tuple[float, ...] = (0.0, 0.5, 0.6, 0.7, 0.8, 0.9)
#: How many of the most expensive queries the summary and the table list.
TOP_QUERIES = 10
LEDGER_SUFFIXES = (".csv", ".json")
COLUMNS = (
    "index",
    "top_votes",
    "gap",
    "top_share",
    "logq",
    "pr_answered",
    "rdp",
    "share",
    "running_epsilon",
    "running_order",
    "running_epsilon_data_independent",
)


def check_ledger_path(path: str) -> str:
    """``check_output_path`` for ``--ledger``: a .csv or .json file in an existing folder."""
    return check_output_path(path, "--ledger", LEDGER_SUFFIXES)


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


def _per_query_rdp(
    mechanism: Mechanism,
    terms: QueryTerms,
    order: float,
    weights: FloatArray | None,
    *,
    data_independent: bool,
) -> FloatArray:
    """Each query's RDP at one order, by ``accounting.compose``'s rule. Shapes: -> (L,)."""
    steps = compose(
        mechanism,
        terms,
        np.array([order]),
        weights=weights,
        data_independent=(data_independent, data_independent),
        total=per_query,
    )
    rdp: FloatArray = steps.data_dependent[:, 0]
    return rdp


def build_ledger(
    votes: Votes,
    mechanism: Mechanism,
    report: AnalysisReport,
    *,
    baseline: FloatArray | None = None,
    answered: NDArray[np.bool_] | None = None,
    half_even: bool = False,
    terms: QueryTerms | None = None,
) -> Ledger:
    """Split the report's data-dependent cost into per-query terms at its best order.

    Args:
        votes: The votes the report analysed.
        mechanism: The mechanism it analysed.
        report: The analysis (its order, delta, conversion and forced-bounds flag are used).
        baseline: Interactive-GNMax baseline (Q, C), on the votes' scale, as given to the report.
        answered: The realised run's answered mask (L,), L <= Q, as given to the report.
        half_even: As given to the report (threshold rounding).
        terms: The report's per-query terms (with log q), when the caller has them.

    Returns:
        The ledger, one row per query accounted (L rows for a realised run).

    Shapes: votes.counts (Q, C) -> ledger arrays (L,).
    """
    num = votes.num_queries if answered is None else int(answered.size)
    counts = np.asarray(votes.counts[:num], dtype=np.float64)
    if terms is None:
        terms = query_terms(
            counts,
            mechanism,
            baseline=None if baseline is None else baseline[:num],
            half_even=half_even,
        )
    assert terms.logq is not None
    weights = answer_weights(terms, None if answered is None else answered[:num])
    order = report.data_dependent.order
    rdp = _per_query_rdp(
        mechanism, terms, order, weights, data_independent=report.forced_data_independent
    )
    running, running_independent = prefix_epsilons(
        mechanism,
        terms,
        report.orders,
        report.delta,
        Conversion(report.conversion),
        weights=weights,
        data_independent=report.forced_data_independent,
    )
    logq = terms.logq
    weight = np.ones(num) if weights is None else weights
    top, gap = top_two(counts)
    selection = votes.selection
    index = (
        np.arange(num, dtype=np.int64) if selection is None else selection[:num].astype(np.int64)
    )
    return Ledger(
        mechanism=dict(report.mechanism),
        realized=report.realized,
        forced_data_independent=report.forced_data_independent,
        delta=report.delta,
        conversion=report.conversion,
        num_teachers=votes.num_teachers,
        order=order,
        data_independent_order=report.data_independent.order,
        epsilon=report.data_dependent.epsilon,
        index=index,
        top_votes=top,
        gap=gap,
        logq=logq,
        pr_answered=weight,
        rdp=rdp,
        running_epsilon=running.epsilon,
        running_order=report.orders[running.order_index],
        running_epsilon_data_independent=running_independent.epsilon,
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


def _csv_number(value: float) -> str:
    """Full precision, with infinities spelled as the JSON encoder does."""
    if np.isinf(value):
        return "inf" if value > 0 else "-inf"
    return repr(float(value))


def _columns(ledger: Ledger) -> dict[str, np.ndarray]:
    return {
        "index": ledger.index,
        "top_votes": ledger.top_votes,
        "gap": ledger.gap,
        "top_share": ledger.top_share,
        "logq": ledger.logq,
        "pr_answered": ledger.pr_answered,
        "rdp": ledger.rdp,
        "share": ledger.share,
        "running_epsilon": ledger.running_epsilon,
        "running_order": ledger.running_order,
        "running_epsilon_data_independent": ledger.running_epsilon_data_independent,
    }


def ledger_csv(ledger: Ledger) -> str:
    """The ledger as CSV text: a header of ``COLUMNS`` and one row per query."""
    columns = _columns(ledger)
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow(COLUMNS)
    index = columns.pop("index")
    values = list(columns.values())
    for i in range(ledger.num_queries):
        writer.writerow([str(int(index[i]))] + [_csv_number(v[i]) for v in values])
    return out.getvalue()


def ledger_json(ledger: Ledger) -> dict[str, Any]:
    """The ledger as a JSON-safe dictionary: the setting, then one record per query."""
    columns = {name: values.tolist() for name, values in _columns(ledger).items()}
    return {
        "mechanism": ledger.mechanism,
        "accounting": "realized" if ledger.realized else "expected",
        "data_independent_forced": ledger.forced_data_independent,
        "delta": ledger.delta,
        "conversion": ledger.conversion,
        "order": ledger.order,
        "data_independent_order": ledger.data_independent_order,
        "num_teachers": ledger.num_teachers,
        "epsilon": ledger.epsilon,
        "total_rdp": ledger.total_rdp,
        "queries": [
            {name: columns[name][i] for name in COLUMNS} for i in range(ledger.num_queries)
        ],
    }


def write_ledger(ledger: Ledger, path: str) -> None:
    """Write the ledger as .csv or .json (by suffix), atomically.

    Raises:
        UsageError: The suffix is neither .csv nor .json.
        InputError: The folder is missing or the file cannot be written.
    """
    suffix = check_ledger_path(path)
    text = ledger_csv(ledger) if suffix == ".csv" else dumps(ledger_json(ledger)) + "\n"
    write_atomic(path, lambda stream: stream.write(text.encode("utf-8")))

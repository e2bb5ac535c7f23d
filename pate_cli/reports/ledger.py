"""The per-query cost ledger: where a run's privacy budget goes.

``accountant.compose.account`` sums per-query RDP terms into one curve per order and
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
  (``accountant.compose.prefix_epsilons``).

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

import io
import json
from collections.abc import Iterator
from dataclasses import dataclass
from typing import IO, Any

import numpy as np
from numpy.typing import NDArray

from pate_cli.accountant.compose import (
    PrefixEpsilons,
    compose,
    per_query,
    prefix_epsilon_blocks,
)
from pate_cli.accountant.terms import QueryTerms, answer_weights, query_terms
from pate_cli.choices import Conversion
from pate_cli.core.compact import read_rows
from pate_cli.mechanisms import Mechanism
from pate_cli.reports.breakdown import (
    BUCKET_EDGES,
    TOP_QUERIES,
    Block,
    Bucket,
    Ledger,
    agreement_bucket,
    bucket_labels,
    buckets,
    ledger_summary,
    most_expensive_rows,
    share_of,
    top_two,
)
from pate_cli.reports.encoding import csv_text, dumps, number_text
from pate_cli.reports.models import AnalysisReport
from pate_cli.votes import Votes, check_output_path, write_atomic

__all__ = [
    # The ledger as data and its summaries (``breakdown``), read from here as well.
    "BUCKET_EDGES",
    "TOP_QUERIES",
    "Bucket",
    "Ledger",
    "agreement_bucket",
    "bucket_labels",
    "buckets",
    "ledger_summary",
    "most_expensive_rows",
    "top_two",
    # Building and writing it.
    "COLUMNS",
    "LEDGER_SUFFIXES",
    "build_ledger",
    "check_ledger_path",
    "ledger_csv",
    "ledger_json",
    "write_ledger",
]

FloatArray = NDArray[np.float64]

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


def _per_query_rdp(
    mechanism: Mechanism,
    terms: QueryTerms,
    order: float,
    weights: FloatArray | None,
    *,
    data_independent: bool,
) -> FloatArray:
    """Each query's RDP at one order, by ``accountant.compose``'s rule. Shapes: -> (L,)."""
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
        The ledger, one row per query accounted (L rows for a realised run), computed block
        by block when it is read (``Ledger.rows``).

    Shapes: votes.counts (Q, C) -> ledger arrays (L,).
    """
    num = votes.num_queries if answered is None else int(answered.size)
    if terms is None:
        terms = query_terms(
            read_rows(votes.counts, 0, num),
            mechanism,
            baseline=None if baseline is None else baseline[:num],
            half_even=half_even,
        )
    assert terms.logq is not None
    weights = answer_weights(terms, None if answered is None else answered[:num])
    rows = _LedgerRows(votes, votes.selection, mechanism, report, terms, terms.logq, weights, num)
    return Ledger(
        mechanism=dict(report.mechanism),
        realized=report.realized,
        forced_data_independent=report.forced_data_independent,
        delta=report.delta,
        conversion=report.conversion,
        num_teachers=votes.num_teachers,
        order=report.data_dependent.order,
        data_independent_order=report.data_independent.order,
        epsilon=report.data_dependent.epsilon,
        num_queries=num,
        rows=rows,
    )


# Queries a block of the ledger holds (its running epsilons are computed over the orders
# a block at a time): the text or the columns of one block, never of the whole ledger, are
# in memory while it is written or summarised.
_ROWS = 1 << 9


@dataclass(frozen=True, eq=False)
class _LedgerRows:
    """``Ledger.rows`` of a report: the ledger's rows computed afresh, a block at a time."""

    votes: Votes
    selection: NDArray[np.int64] | None  # the votes' file index of each query, if selected
    mechanism: Mechanism
    report: AnalysisReport
    terms: QueryTerms
    logq: FloatArray  # the terms' log q (L,)
    weights: FloatArray | None  # the answer step's weight per query (L,), None for 1
    num: int  # L

    def __call__(self, running: bool = True) -> Iterator[Block]:
        """The ledger's rows, a chunk of queries at a time: the running epsilons carry
        their totals from chunk to chunk (``prefix_epsilon_blocks``); without ``running``
        they are left out (NaN), for the sums that do not need them."""
        if not running:
            for start in range(0, self.num, _ROWS):
                stop = min(start + _ROWS, self.num)
                none = PrefixEpsilons(np.full(stop - start, np.nan), np.zeros(stop - start, int))
                yield self._block(start, stop, none, none)
            return
        report = self.report
        blocks = prefix_epsilon_blocks(
            self.mechanism,
            self.terms,
            report.orders,
            report.delta,
            Conversion(report.conversion),
            weights=self.weights,
            data_independent=report.forced_data_independent,
            chunk_size=_ROWS,
        )
        for start, stop, dependent, independent in blocks:
            yield self._block(start, stop, dependent, independent)

    def _block(
        self, start: int, stop: int, dependent: PrefixEpsilons, independent: PrefixEpsilons
    ) -> Block:
        """The rows of queries start .. stop, with the given running epsilons."""
        report = self.report
        part = None if self.weights is None else self.weights[start:stop]
        top, gap = top_two(self.votes.counts[start:stop])  # a block read (a file streamed)
        index = (
            np.arange(start, stop, dtype=np.int64)
            if self.selection is None
            else self.selection[start:stop].astype(np.int64)
        )
        return {
            "index": index,
            "top_votes": top,
            "gap": gap,
            "logq": self.logq[start:stop],
            "pr_answered": np.ones(stop - start) if part is None else part,
            "rdp": _per_query_rdp(
                self.mechanism,
                self.terms.rows(start, stop),
                report.data_dependent.order,
                part,
                data_independent=report.forced_data_independent,
            ),
            "running_epsilon": dependent.epsilon,
            "running_order": report.orders[dependent.order_index],
            "running_epsilon_data_independent": independent.epsilon,
        }


def _file_columns(ledger: Ledger, block: Block) -> dict[str, NDArray[Any]]:
    """A block's columns as the files write them (``COLUMNS``: the top share and the share of
    the total added)."""
    return {
        "index": block["index"],
        "top_votes": block["top_votes"],
        "gap": block["gap"],
        "top_share": block["top_votes"] / ledger.num_teachers,
        "logq": block["logq"],
        "pr_answered": block["pr_answered"],
        "rdp": block["rdp"],
        "share": share_of(block["rdp"], ledger.total_rdp),
        "running_epsilon": block["running_epsilon"],
        "running_order": block["running_order"],
        "running_epsilon_data_independent": block["running_epsilon_data_independent"],
    }


def _csv_rows(columns: dict[str, NDArray[Any]]) -> str:
    values = [v for name, v in columns.items() if name != "index"]
    return csv_text(
        [str(index), *(number_text(v[i]) for v in values)]
        for i, index in enumerate(columns["index"].tolist())
    )


def _json_rows(columns: dict[str, NDArray[Any]]) -> str:
    listed = {name: values.tolist() for name, values in columns.items()}
    return ", ".join(
        dumps({name: listed[name][i] for name in COLUMNS}) for i in range(len(listed["index"]))
    )


def _json_head(ledger: Ledger) -> dict[str, Any]:
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
    }


def stream_ledger(ledger: Ledger, stream: IO[bytes], suffix: str) -> None:
    """Write the ledger to ``stream`` as CSV (``.csv``) or JSON (``.json``), block by block
    (``Ledger.blocks``): the whole text, or the whole columns, are never in memory."""
    if suffix == ".csv":
        stream.write(csv_text([COLUMNS]).encode("utf-8"))
        for block in ledger.blocks():
            stream.write(_csv_rows(_file_columns(ledger, block)).encode("utf-8"))
        return
    stream.write((dumps(_json_head(ledger))[:-1] + ', "queries": [').encode("utf-8"))
    separator = ""
    for block in ledger.blocks():
        if block["rdp"].size:
            stream.write((separator + _json_rows(_file_columns(ledger, block))).encode("utf-8"))
            separator = ", "
    stream.write(b"]}\n")


def ledger_csv(ledger: Ledger) -> str:
    """The ledger as CSV text: a header of ``COLUMNS`` and one row per query."""
    buffer = io.BytesIO()
    stream_ledger(ledger, buffer, ".csv")
    return buffer.getvalue().decode("utf-8")


def ledger_json(ledger: Ledger) -> dict[str, Any]:
    """The ledger as a JSON-safe dictionary: the setting, then one record per query."""
    buffer = io.BytesIO()
    stream_ledger(ledger, buffer, ".json")
    loaded: dict[str, Any] = json.loads(buffer.getvalue())
    return loaded


def write_ledger(ledger: Ledger, path: str) -> None:
    """Write the ledger as .csv or .json (by suffix), atomically and block by block.

    Raises:
        UsageError: The suffix is neither .csv nor .json.
        InputError: The folder is missing or the file cannot be written.
    """
    suffix = check_ledger_path(path)
    write_atomic(path, lambda stream: stream_ledger(ledger, stream, suffix))

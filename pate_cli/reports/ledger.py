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
from typing import IO, Any

import numpy as np
from numpy.typing import NDArray

from pate_cli.accountant.compose import compose, per_query, prefix_epsilons
from pate_cli.accountant.terms import QueryTerms, answer_weights, query_terms
from pate_cli.choices import Conversion
from pate_cli.mechanisms import Mechanism
from pate_cli.reports.breakdown import (
    BUCKET_EDGES,
    TOP_QUERIES,
    Bucket,
    Ledger,
    agreement_bucket,
    bucket_labels,
    buckets,
    ledger_summary,
    most_expensive,
    top_two,
)
from pate_cli.reports.encoding import dumps
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
    "most_expensive",
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


# Rows written per block: the text of one block, never of the whole ledger, is in memory.
_BLOCK_ROWS = 1 << 15


def _csv_rows(ledger: Ledger, start: int, stop: int) -> str:
    columns = _columns(ledger)
    index = columns.pop("index")
    values = list(columns.values())
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    for i in range(start, stop):
        writer.writerow([str(int(index[i]))] + [_csv_number(v[i]) for v in values])
    return out.getvalue()


def _json_rows(ledger: Ledger, start: int, stop: int) -> str:
    columns = {name: values[start:stop].tolist() for name, values in _columns(ledger).items()}
    return ", ".join(
        dumps({name: columns[name][i] for name in COLUMNS}) for i in range(stop - start)
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
    """Write the ledger to ``stream`` as CSV (``.csv``) or JSON (``.json``), block by block:
    the bytes are those of :func:`ledger_csv` or of ``dumps(ledger_json(...))`` and a
    newline, without the whole text ever in memory."""
    blocks = range(0, ledger.num_queries, _BLOCK_ROWS)
    if suffix == ".csv":
        stream.write((",".join(COLUMNS) + "\n").encode("utf-8"))
        for start in blocks:
            stop = min(start + _BLOCK_ROWS, ledger.num_queries)
            stream.write(_csv_rows(ledger, start, stop).encode("utf-8"))
        return
    stream.write((dumps(_json_head(ledger))[:-1] + ', "queries": [').encode("utf-8"))
    for start in blocks:
        stop = min(start + _BLOCK_ROWS, ledger.num_queries)
        separator = ", " if start else ""
        stream.write((separator + _json_rows(ledger, start, stop)).encode("utf-8"))
    stream.write(b"]}\n")


def ledger_csv(ledger: Ledger) -> str:
    """The ledger as CSV text: a header of ``COLUMNS`` and one row per query."""
    buffer = io.BytesIO()
    stream_ledger(ledger, buffer, ".csv")
    return buffer.getvalue().decode("utf-8")


def ledger_json(ledger: Ledger) -> dict[str, Any]:
    """The ledger as a JSON-safe dictionary: the setting, then one record per query."""
    columns = {name: values.tolist() for name, values in _columns(ledger).items()}
    return {
        **_json_head(ledger),
        "queries": [
            {name: columns[name][i] for name in COLUMNS} for i in range(ledger.num_queries)
        ],
    }


def write_ledger(ledger: Ledger, path: str) -> None:
    """Write the ledger as .csv or .json (by suffix), atomically and block by block.

    Raises:
        UsageError: The suffix is neither .csv nor .json.
        InputError: The folder is missing or the file cannot be written.
    """
    suffix = check_ledger_path(path)
    write_atomic(path, lambda stream: stream_ledger(ledger, stream, suffix))

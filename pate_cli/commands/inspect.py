"""``pate inspect``: what a votes file holds, before any privacy analysis.

The command reads the votes with the shared format and selection flags, calls
:func:`pate_cli.inspection.inspect_votes` and prints the report as JSON or as
Rich tables (:func:`render_inspect`, a function of the report alone).
"""

from __future__ import annotations

from rich.console import Group, RenderableType
from rich.table import Table
from rich.text import Text

from pate_cli._options import (
    FormatOpt,
    IndicesOpt,
    JsonOpt,
    NumClassesOpt,
    QueriesOpt,
    TeachersOpt,
    VotesArg,
    emit,
    selection_options,
)
from pate_cli.inspection import QUANTILES, Histogram, InspectReport, inspect_votes
from pate_cli.votes import VoteFormat


def _quantile_table(report: InspectReport) -> Table:
    table = Table(title="Teacher agreement per query", title_justify="left", header_style="bold")
    table.add_column("statistic")
    for key, _ in QUANTILES:
        table.add_column(key, justify="right")
    table.add_column("mean", justify="right")
    for name, dist, digits in (
        ("top vote share n_max/M", report.profile.top_share, 3),
        ("top-2 gap (votes)", report.profile.gap, 1),
    ):
        table.add_row(
            name,
            *(f"{dist.quantiles[key]:.{digits}f}" for key, _ in QUANTILES),
            f"{dist.mean:.{digits}f}",
        )
    return table


def _histogram_table(title: str, column: str, histogram: Histogram, total: int) -> Table:
    table = Table(title=title, title_justify="left", header_style="bold")
    table.add_column(column, justify="right")
    table.add_column("queries", justify="right")
    table.add_column("fraction", justify="right")
    table.add_column("", justify="left")
    widest = max(histogram.queries) or 1
    for label, n in zip(histogram.labels, histogram.queries, strict=True):
        table.add_row(
            Text(label),
            str(n),
            f"{100 * n / total:.1f}%" if total else "-",
            Text("#" * round(20 * n / widest), style="cyan"),
        )
    return table


def render_inspect(report: InspectReport) -> RenderableType:
    """The inspection as Rich renderables: input line, quantiles, two histograms, counts."""
    source, profile = report.input, report.profile
    how = "detected" if source.detected else "given"
    header = Text()
    header.append(source.path, style="bold")
    header.append(
        f"  format {source.format} ({how}), dtype {report.dtype}, {source.num_queries} queries"
        f" x {source.num_classes} classes, {source.num_teachers} teachers"
    )
    if source.num_queries != source.num_file_queries:
        header.append(f" (of {source.num_file_queries} in the file)")
    total = profile.num_queries
    plurality = ", ".join(f"{c}: {n}" for c, n in enumerate(profile.plurality_counts))
    return Group(
        header,
        _quantile_table(report),
        _histogram_table(
            "Top vote share (2018 paper, Figure 5 buckets)",
            "n_max/M",
            profile.top_share.histogram,
            total,
        ),
        _histogram_table("Gap between the top two counts", "gap", profile.gap.histogram, total),
        Text(
            f"unanimous: {profile.unanimous} of {total} queries; tied at the top: "
            f"{profile.tied}; plurality class counts: {plurality}"
        ),
    )


def inspect(
    votes_path: VotesArg,
    fmt: FormatOpt = VoteFormat.AUTO,
    num_classes: NumClassesOpt = None,
    teachers: TeachersOpt = None,
    queries: QueriesOpt = None,
    indices: IndicesOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """Describe a votes file: its format, size and how strongly the teachers agree.

    Reads the file as the other commands do (format detection, --queries,
    --indices) and reports the format, dtype, queries, teachers and classes,
    the distribution of the top vote share n_max/M and of the gap between
    the top two counts (quantiles and histograms), and how many queries are
    unanimous or tied at the top. Strong agreement is what makes the
    data-dependent analysis cheap.

    Example:

        pate inspect sample_data/mnist_250_teachers.npy
    """
    votes = selection_options(votes_path, fmt, num_classes, teachers, queries, indices)
    report = inspect_votes(votes)
    emit(report.to_dict(), render_inspect(report), report.warnings, as_json)

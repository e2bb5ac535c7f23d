"""``pate inspect``: how the teachers agree, as quantiles, histograms and counts."""

from __future__ import annotations

from rich.console import Group, RenderableType
from rich.table import Table
from rich.text import Text

from pate_cli.cli.render.common import input_line
from pate_cli.jobs.inspection import QUANTILES, Histogram, InspectReport, VocabularyProfile
from pate_cli.reports.models import InputSummary


def _quantile_table(report: InspectReport) -> Table:
    assert report.profile is not None
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


def _readings_table(report: InspectReport) -> Table:
    """The readings weighed: sizes, how the labels agree by query and by teacher (Goodman
    and Kruskal's lambda, and what chance alone reaches), and which one is read."""
    table = Table(title="Readings", title_justify="left", header_style="bold")
    for name, justify in (
        ("", "left"),
        ("reading", "left"),
        ("teachers", "right"),
        ("queries", "right"),
        ("classes", "right"),
        ("agree by query", "right"),
        ("by teacher", "right"),
        ("picked by", "left"),
    ):
        table.add_column(name, justify=justify)  # type: ignore[arg-type]
    for i, reading in enumerate(report.readings):
        by_query = by_teacher = "-"
        if reading.agreement is not None:
            query, teacher = reading.agreement
            by_query = f"{query.lam:.3f} (chance {query.chance:.3f})"
            by_teacher = f"{teacher.lam:.3f} (chance {teacher.chance:.3f})"
        teachers = "M" if reading.num_teachers is None else str(reading.num_teachers)
        table.add_row(
            "read" if i == report.taken else "",
            f"{reading.format.value}, {reading.layout}",
            teachers,
            str(reading.num_queries),
            str(reading.num_classes),
            by_query,
            by_teacher,
            reading.pick.removeprefix("pass "),
        )
    return table


def _render_unread(report: InspectReport) -> RenderableType:
    """A file of several plausible readings: what it is, its readings and why none is read."""
    source = report.input
    shape = " x ".join(str(n) for n in getattr(source, "shape", ()))
    header = Text()
    header.append(getattr(source, "path", ""), style="bold")
    header.append(f"  dtype {report.dtype}, shape {shape}: no reading taken")
    refusal = (report.refusal or "").split(": ", 1)[-1]
    return Group(header, _readings_table(report), Text(f"not read as it is: {refusal}"))


def render_inspect(report: InspectReport) -> RenderableType:
    """The inspection as Rich renderables: input line, quantiles, two histograms, counts; for
    a file of several plausible readings, the readings."""
    source, profile = report.input, report.profile
    if profile is None or not isinstance(source, InputSummary):
        return _render_unread(report)
    header = input_line(source, report.dtype)
    total = profile.num_queries
    plurality = _plurality(profile.plurality_counts)
    vocabulary = profile.vocabulary
    lines: list[RenderableType] = [] if vocabulary is None else [_vocabulary_line(vocabulary)]
    if len(report.readings) > 1:  # the layouts of labels that their agreement decided
        lines.append(_readings_table(report))
    return Group(
        header,
        *lines,
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


# Classes beyond this many are listed by their plurality counts, the largest first.
_LISTED_CLASSES = 20


def _plurality(counts: tuple[int, ...]) -> str:
    """Every class's plurality count, or for a vocabulary the most frequent ones."""
    if len(counts) <= _LISTED_CLASSES:
        return ", ".join(f"{c}: {n}" for c, n in enumerate(counts))
    order = sorted((c for c, n in enumerate(counts) if n), key=lambda c: (-counts[c], c))
    shown = ", ".join(f"{c}: {counts[c]}" for c in order[:10])
    return f"{shown} (the {min(10, len(order))} most frequent of {len(order)} classes that win)"


def _vocabulary_line(vocabulary: VocabularyProfile) -> Text:
    low, mean, high = vocabulary.nonzeros
    candidates = vocabulary.candidates
    per_query = (
        "" if candidates is None else f"; candidates {candidates[0]}-{candidates[1]} per query"
    )
    return Text(
        f"vocabulary of {vocabulary.classes} classes; classes with votes per query: {low} to "
        f"{high} (mean {mean:.2f}); {vocabulary.distinct_rows} distinct vote rows{per_query}"
    )

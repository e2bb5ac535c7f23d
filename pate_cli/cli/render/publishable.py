"""What may be published and what is private: the headline of a report (the publishable
figure, then the private one), the name of the data-dependent figure, the closing line of
the publishable figures, and the whole rendering of ``--public``."""

from __future__ import annotations

from typing import Any

from rich.console import Group, RenderableType
from rich.table import Table
from rich.text import Text

from pate_cli.cli.render.common import PRIVATE, PUBLISHABLE, fmt_bound, mechanism_line
from pate_cli.mechanisms import answers_every_query
from pate_cli.reports.models import AggregateReport, AnalysisReport, SmoothSensitivityReport
from pate_cli.reports.publishable import Figure


def dependent_name(mechanism: dict[str, Any], realized: bool) -> str:
    """The name of the data-dependent figure. For Confident/Interactive-GNMax in
    expectation it is the 2018 paper's expected cost, an average over the threshold noise,
    not a bound on the run (the guaranteed figure is)."""
    if answers_every_query(mechanism) or realized:
        return "data-dependent epsilon"
    return "expected data-dependent epsilon"


def headline(figures: tuple[Figure, ...], private: str, delta: float) -> Text:
    """The first line of a report: the epsilon to publish, then the private one."""
    text = Text()
    if figures:
        best = figures[0]
        text.append(f"epsilon {fmt_bound(best.epsilon)}", style=f"bold {PUBLISHABLE}")
        text.append(f" publishable ({best.basis}), delta {delta:g}")
    text.append("; ")
    text.append(private, style=PRIVATE)
    return text


def publishable_line(figures: tuple[Figure, ...], absent: str | None = None) -> Text:
    """The figures that may be published, best first; everything else above is private.
    ``absent``: why there is no exact figure among them, said on a line of its own."""
    text = Text("publishable: ", style="bold")
    for i, figure in enumerate(figures):
        if i:
            text.append("; ")
        text.append(f"epsilon = {fmt_bound(figure.epsilon)}", style=f"bold {PUBLISHABLE}")
        text.append(f" ({figure.basis}, delta {figure.delta:g})")
    text.append(". Every other figure depends on the votes: private.")
    if absent is not None:
        text.append(f"\n{absent}")
    return text


def public(report: AnalysisReport | SmoothSensitivityReport | AggregateReport) -> RenderableType:
    """``--public``: the publishable figures and nothing else derived from the votes."""
    data = report.to_dict(public=True)
    summary = data["input"]
    header = Text(
        f"format {summary['format']}, {summary['num_queries']} queries x "
        f"{summary['num_classes']} classes, {summary['num_teachers']} teachers"
    )
    table = Table(title="What may be published", title_justify="left", header_style="bold")
    for column, justify in (("basis", "left"), ("epsilon", "right"), ("delta", "right")):
        table.add_column(column, justify=justify)  # type: ignore[arg-type]
    table.add_column("note", overflow="fold")
    for figure in data["publishable"]:
        table.add_row(
            figure["basis"], fmt_bound(figure["epsilon"]), f"{figure['delta']:g}", figure["note"]
        )
    parts: list[RenderableType] = [header, mechanism_line(report.mechanism), table]
    if report.gate is not None:
        verdict = "within" if report.gate.passed else "over"
        parts.append(
            Text(
                f"{report.gate.on.value} epsilon {fmt_bound(report.gate.epsilon)} is {verdict} the "
                f"budget {report.gate.limit:g}"
            )
        )
    return Group(*parts)

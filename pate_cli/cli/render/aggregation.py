"""``pate aggregate``: what was released, and the realised next to the expected cost."""

from __future__ import annotations

from rich.console import Group, RenderableType
from rich.table import Table
from rich.text import Text

from pate_cli.cli.render.common import (
    fmt_bound,
    fmt_order,
    input_line,
    mechanism_line,
    noise_words,
)
from pate_cli.cli.render.publishable import headline, publishable_line
from pate_cli.reports.markdown import answered_count
from pate_cli.reports.models import AggregateReport


def aggregate(report: AggregateReport) -> RenderableType:
    """The aggregate summary: what was released, and the realised next to the expected cost."""
    counts = Table(title="Labels", title_justify="left", header_style="bold")
    for column in (
        "queries seen",
        "answered",
        "abstained",
        "student labelled",
        "agreement",
        "accuracy",
    ):
        counts.add_column(column, justify="right")
    counts.add_row(
        f"{report.num_seen} of {report.num_queries}",
        str(report.answered),
        str(report.abstained),
        str(report.student_labelled),
        "-"
        if report.agreement_with_plurality is None
        else f"{report.agreement_with_plurality:.4f}",
        "-" if report.accuracy is None else f"{report.accuracy:.4f}",
    )
    cost = Table(title="Privacy cost", title_justify="left", header_style="bold")
    for column in ("accounting", "answered", "data-dep. epsilon", "order", "data-indep. epsilon"):
        cost.add_column(column, justify="right")
    for name, block in (("realised run", report.privacy), ("expected", report.expected_privacy)):
        cost.add_row(
            name,
            answered_count(block.expected_answered, block.realized),
            fmt_bound(block.data_dependent.epsilon),
            fmt_order(block.data_dependent.order),
            fmt_bound(block.data_independent.epsilon),
        )
    if report.output is None:
        written = "nothing written: the budget gate failed, so no label is released"
    else:
        written = f"labels written to {report.output}"
    if report.answered_mask:
        written += f"; answered mask to {report.answered_mask}"
    return Group(
        headline(
            report.publishable,
            f"realised data-dependent epsilon {fmt_bound(report.privacy.data_dependent.epsilon)} "
            "(private)",
            report.delta,
        ),
        input_line(report.input),
        mechanism_line(report.mechanism),
        Text(
            f"noise: {noise_words(report.noise)}, delta {report.privacy.delta:g}, "
            f"conversion {report.privacy.conversion}"
        ),
        counts,
        cost,
        Text(written),
        publishable_line(report.publishable, report.privacy.exact_absent),
    )

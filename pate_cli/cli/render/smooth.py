"""``pate smooth-sensitivity``: the GNSS release, what it costs, and one sample."""

from __future__ import annotations

from rich.console import Group, RenderableType
from rich.table import Table
from rich.text import Text

from pate_cli.cli.render.common import (
    fmt,
    fmt_bound,
    fmt_order,
    input_line,
    mechanism_line,
    noise_words,
    required,
)
from pate_cli.cli.render.publishable import dependent_name, headline, publishable_line
from pate_cli.mechanisms import answers_every_query
from pate_cli.reports.markdown import answered_count
from pate_cli.reports.models import SmoothSensitivityReport
from pate_cli.reports.publishable import release_withheld


def smooth_sensitivity(report: SmoothSensitivityReport) -> RenderableType:
    """The GNSS release: the data-dependent epsilon, the cost of releasing it, one sample."""
    release = report.release
    private = (
        f"expected released epsilon {fmt_bound(release.epsilon_expected_release)} (private)"
        if release.released and release.epsilon_expected_release is not None
        else f"data-dependent epsilon {fmt_bound(release.epsilon_data_dependent)} (private)"
    )
    header = Group(
        headline(report.publishable, private, report.delta),
        input_line(report.input),
        mechanism_line(report.mechanism),
        Text(
            f"delta {report.delta:g}, conversion {report.conversion}, order "
            f"{fmt_order(release.order)}, "
            f"{'realised run' if report.realized else 'expected cost'}"
        ),
    )
    table = Table(title="Smooth-sensitivity release", title_justify="left", header_style="bold")
    table.add_column("quantity")
    table.add_column("value", justify="right")
    table.add_row(
        "answered" if report.realized else "expected answered",
        answered_count(release.expected_answered, report.realized),
    )
    # Plain GNMax and LNMax have no threshold step: only the steps there are are named.
    there = (not answers_every_query(report.mechanism), True)
    named = zip(release.step_names, release.data_independent_steps, there, strict=True)
    forced = [name for name, independent, present in named if independent and present]
    table.add_row("data-independent steps", ", ".join(forced) or "none")
    if not release.conditions_apply:
        table.add_row("conditions C5 / C6", "not needed (LNMax: its bound rises with q)")
    elif release.conditions is not None or release.released:
        conditions = release.conditions or (None, None)
        verdicts = ["unverified" if c is None else "holds" if c else "FAILS" for c in conditions]
        table.add_row("conditions C5 / C6", " / ".join(verdicts))
    table.add_row(
        dependent_name(report.mechanism, report.realized),
        fmt_bound(release.epsilon_data_dependent),
    )
    if not release.released:
        table.add_row("data-independent epsilon", _cost(release.epsilon_data_independent))
        table.add_row("worst case (every query answered)", _cost(release.epsilon_worst_case))
        nothing = Text(f"nothing to release: {release.reason}", style="bold")
        return Group(header, table, nothing, publishable_line(report.publishable, _absent(report)))
    table.add_row("beta", fmt(required(release.beta)))
    table.add_row("smooth sensitivity E[SS_beta]", _cost(release.smooth_sensitivity))
    table.add_row("sigma_ss", fmt(required(release.sigma_ss)))
    table.add_row("GNSS cost (RDP)", _cost(release.gnss_cost))
    table.add_row("noise std", fmt(required(release.noise_std)))
    table.add_row(
        "expected released epsilon", _cost(release.epsilon_expected_release), style="bold"
    )
    table.add_row(
        f"sampled released epsilon ({noise_words(release.noise)})",
        _cost(release.epsilon_released),
    )
    closing = Text()
    closing.append(f"released epsilon = {_cost(release.epsilon_expected_release)}", style="bold")
    closing.append(
        f" +/- {fmt(required(release.noise_std))} at order {fmt_order(release.order)} "
        f"(expected, private: data-dependent {fmt_bound(release.epsilon_data_dependent)} + GNSS "
        f"cost {_cost(release.gnss_cost)}); sampled: {_cost(release.epsilon_released)}"
    )
    withheld = release_withheld(release)
    if withheld is not None:
        closing.append(f" (the sample is private: {withheld})")
    return Group(header, table, closing, publishable_line(report.publishable, _absent(report)))


def _absent(report: SmoothSensitivityReport) -> str | None:
    """Why the report has no exact figure (its analysis's), or None."""
    return None if report.analysis is None else report.analysis.exact_absent


def _cost(value: float | None) -> str:
    """A figure of the release that is a cost or bounds one (an epsilon, the smooth
    sensitivity, the GNSS cost): rounded up (``fmt_bound``)."""
    return fmt_bound(required(value))

"""``pate audit``: the lower bound, how it was found, and the claimed figures beside it.

The lower bounds (the audit's, the Gaussian-shaped estimate, the confidence) are rounded
down, the claimed upper figures up, the expected value to nearest (it bounds nothing)."""

from __future__ import annotations

from rich.console import Group, RenderableType
from rich.table import Table
from rich.text import Text

from pate_cli.jobs.audit import AuditReport
from pate_cli.reports.rounding import bound, nearest

_NAMES = {
    "data_independent": "data-independent (Renyi DP, every query answered)",
    "data_independent_exact": "data-independent, exact",
    "guaranteed": "data-dependent, guaranteed (the worse histogram of the pair)",
    "stated_law": "exact epsilon of the pair, from the mechanism's stated law",
    "claim": "--claim",
}


def render_audit(report: AuditReport) -> RenderableType:
    """The bound (rounded down: a lower bound never printed above itself), the claimed
    figures (rounded up), which are below it, and what fixed the test."""
    head = Text.assemble(
        ("epsilon >= ", "bold"),
        (bound(report.epsilon_lower_bound, up=False), "bold green"),
        f"  with probability >= {bound(1 - report.alpha, 4, up=False)} at delta {report.delta:g}, "
        f"{report.queries} quer{'y' if report.queries == 1 else 'ies'} a run, "
        f"{report.runs:,} runs a side ({report.method}; test fixed from the {report.test_from})",
    )
    expected = nearest(report.epsilon_lower_bound_expected)
    lines = [
        head,
        Text(f"its expected value (over both counts, under the {report.test_from}): {expected}"),
        Text(_pair_line(report)),
    ]
    if report.mu_lower_bound is not None and report.epsilon_gaussian is not None:
        lines.append(
            Text(
                f"Gaussian-shaped estimate: mu >= {bound(report.mu_lower_bound, up=False)}, "
                f"epsilon {bound(report.epsilon_gaussian, up=False)} (a lower bound where the "
                "mechanism is Gaussian DP: compare it with the exact data-independent figure)"
            )
        )
    table = Table(title="Claimed upper figures", title_justify="left", header_style="bold")
    table.add_column("figure")
    table.add_column("epsilon", justify="right")
    table.add_column("against the lower bound")
    for name, value in report.claimed.items():
        below = name in report.exceeds
        verdict = Text("BELOW IT", style="bold red") if below else Text("above it", style="green")
        table.add_row(Text(_NAMES.get(name, name)), bound(value), verdict)
    verdict = (
        Text(
            f"exceeds: {', '.join(report.exceeds)} (the implementation or its claim is wrong)",
            style="bold red",
        )
        if report.exceeds
        else Text("no claimed figure is below the lower bound", style="green")
    )
    return Group(*lines, table, verdict)


def _pair_line(report: AuditReport) -> str:
    pair = report.pair
    if pair["source"] == "votes":
        start, end = pair["move"]
        return (
            f"pair: query {pair['query']} of the votes and its neighbour in which one teacher "
            f"moves from class {start} to class {end}"
        )
    return f"pair: {pair['a']} and {pair['b']} (searched)"

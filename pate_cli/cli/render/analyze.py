"""``pate analyze``: the orders around the optimum, the closing lines, the GNSS release line,
and the per-query ledger of ``--breakdown``."""

from __future__ import annotations

import numpy as np
from rich import box
from rich.console import Group, RenderableType
from rich.markup import escape
from rich.table import Table
from rich.text import Text

from pate_cli.accountant.pld import PldFigure
from pate_cli.cli.render.common import (
    PRIVATE,
    PUBLISHABLE,
    Fit,
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
from pate_cli.release.gnss import NotReleased, Release
from pate_cli.reports.ledger import Ledger, buckets, most_expensive_rows
from pate_cli.reports.markdown import answered_count
from pate_cli.reports.models import AnalysisReport


def _rows_near(orders: np.ndarray, centers: list[int], width: int) -> list[int]:
    """Indices of the orders around the given ones, in increasing order of value."""
    by_value = np.argsort(orders, kind="stable")
    rank = np.empty_like(by_value)
    rank[by_value] = np.arange(orders.size)
    keep: set[int] = set()
    for center in centers:
        lo, hi = max(0, rank[center] - width), min(orders.size, rank[center] + width + 1)
        keep.update(int(i) for i in by_value[lo:hi])
    return sorted(keep, key=lambda i: (orders[i], i))


def _averaged(report: AnalysisReport) -> str:
    """What the expected figure is, where it is one: said once, in the closing line."""
    if dependent_name(report.mechanism, report.realized) == "data-dependent epsilon":
        return ""
    return ", the paper's average over the threshold noise, not a bound on the run"


# The orders table's headers, in full and (where the console is narrow) abbreviated.
_WIDE_HEADERS = ("order", "data-dep. RDP", "data-dep. eps", "data-indep. RDP", "data-indep. eps")
_NARROW_HEADERS = ("order", "dd RDP", "dd eps", "di RDP", "di eps")


def analysis(report: AnalysisReport, *, all_orders: bool = False) -> RenderableType:
    """The analyze report: the headline, input, mechanism, the orders around the optimum
    (a gap row where some are left out, and a legend), and the closing lines."""
    dependent, independent = report.data_dependent, report.data_independent
    orders = report.orders
    every_query = answers_every_query(report.mechanism)
    if all_orders:
        rows = list(range(orders.size))
    else:
        rows = _rows_near(orders, [dependent.order_index, independent.order_index], 4)
    table = Fit(
        _orders_table(report, rows, _WIDE_HEADERS, every_query=every_query, wide=True),
        _orders_table(report, rows, _NARROW_HEADERS, every_query=every_query, wide=False),
    )
    parts: list[RenderableType] = [
        _header(report),
        table,
        _legend(all_orders),
        _closing(report, every_query),
    ]
    if report.data_dependent_pld is not None:
        parts.append(pld_line(report.data_dependent_pld))
    if report.release is not None:
        parts.append(release_line(report.release))
    parts.append(publishable_line(report.publishable, report.exact_absent))
    return Group(*parts)


def _header(report: AnalysisReport) -> Group:
    """The headline, the input, the mechanism, and the accounting's setting."""
    dependent = report.data_dependent
    return Group(
        headline(
            report.publishable,
            f"{dependent_name(report.mechanism, report.realized)} "
            f"{fmt_bound(dependent.epsilon)} at order {fmt_order(dependent.order)} (private)",
            report.delta,
        ),
        input_line(report.input),
        mechanism_line(report.mechanism),
        Text(
            f"delta {report.delta:g}, conversion {report.conversion}, "
            f"{'realised run (answered mask)' if report.realized else 'expected cost'}"
            + (", data-independent bounds forced" if report.forced_data_independent else "")
        ),
    )


def _orders_table(
    report: AnalysisReport,
    rows: list[int],
    headers: tuple[str, ...],
    *,
    every_query: bool,
    wide: bool,
) -> Table:
    """RDP and epsilon per order, data-dependent and data-independent, for the orders
    ``rows`` (a "..." row where some are left out; * the best order of a column)."""
    dependent, independent = report.data_dependent, report.data_independent
    orders = report.orders
    independent_style = PUBLISHABLE if every_query else PRIVATE
    by_value = np.argsort(orders, kind="stable")
    rank = np.empty_like(by_value)
    rank[by_value] = np.arange(orders.size)
    table = Table(
        title="Renyi DP per order",
        title_justify="left",
        header_style="bold",
        box=box.HEAVY_HEAD if wide else box.SIMPLE_HEAD,
        show_edge=wide,
        pad_edge=wide,
        padding=(0, 1) if wide else (0, 0),
    )
    styles = (None, PRIVATE, PRIVATE, independent_style, independent_style)
    for header, style in zip(headers, styles, strict=True):
        table.add_column(header, justify="right", style=style, no_wrap=True)
    previous = None
    for i in rows:
        if previous is not None and rank[i] > rank[previous] + 1:
            table.add_row("...", "", "", "", "", style="dim")
        previous = i
        table.add_row(
            fmt_order(orders[i]),
            fmt_bound(dependent.rdp[i]),
            fmt_bound(dependent.eps[i]) + (" *" if i == dependent.order_index else "  "),
            fmt_bound(independent.rdp[i]),
            fmt_bound(independent.eps[i]) + (" *" if i == independent.order_index else "  "),
            style="bold" if i == dependent.order_index else None,
        )
    return table


def _legend(all_orders: bool) -> Text:
    """Which orders the table shows, and what its marks and colours mean."""
    shown = (
        "every order" if all_orders else "the orders around each optimum (--all-orders shows all)"
    )
    return Text(
        f"{shown}; * the best order of the column; yellow: depends on the votes (private), "
        "green: publishable as it is (dd: data-dependent, di: data-independent)",
        style="dim",
    )


def _closing(report: AnalysisReport, every_query: bool) -> Text:
    """The epsilons at their best orders (data-dependent, data-independent, guaranteed and
    worst case, where they differ) and the number of queries answered."""
    dependent, independent = report.data_dependent, report.data_independent
    closing = Text()
    closing.append(
        f"{dependent_name(report.mechanism, report.realized)} {fmt_bound(dependent.epsilon)}",
        style=f"bold {PRIVATE}",
    )
    closing.append(
        f" at order {fmt_order(dependent.order)} (private{_averaged(report)}); "
        "data-independent epsilon "
        f"{fmt_bound(independent.epsilon)} at order {fmt_order(independent.order)}"
        f"{'' if every_query else ' (private: weighted by Pr[answered])'}; "
    )
    guaranteed = report.guaranteed
    if guaranteed is not None and not every_query:
        closing.append(
            "guaranteed (no averaging over the threshold noise) "
            f"{fmt_bound(guaranteed.epsilon)} at order {fmt_order(guaranteed.order)} (private); "
        )
    worst = report.worst_case
    if worst.epsilon != independent.epsilon:
        closing.append(
            f"worst case (every query answered) {fmt_bound(worst.epsilon)} at order "
            f"{fmt_order(worst.order)}; ",
            style=PUBLISHABLE,
        )
    if report.realized:
        answered = answered_count(report.expected_answered, True)
        closing.append(f"answered {answered} of {report.num_queries_seen} queries seen")
    else:
        closing.append(
            f"expected answered {report.expected_answered:.1f} of {report.num_queries_seen}"
        )
    return closing


def pld_line(figure: PldFigure) -> Text:
    """One line on the privacy-loss-distribution figure, beside the RDP one."""
    line = Text()
    line.append(f"data-dependent epsilon (PLD) {fmt_bound(figure.epsilon)}", style=PRIVATE)
    pairs = "q-bound pairs" if figure.method == "q-bound" else "exact worst-neighbour pairs"
    line.append(
        f" (private; both directions, {pairs}, {figure.queries} queries in "
        f"{figure.groups} groups, loss grid {figure.grid:g})"
    )
    return line


def release_line(release: Release) -> Text:
    """One line on the GNSS release shown under the analyze table."""
    if isinstance(release, NotReleased) or not release.released:
        return Text(f"GNSS release: none ({release.reason})")
    return Text(
        "GNSS-released epsilon (expected, private) = "
        f"{fmt_bound(required(release.epsilon_expected_release))} +/- "
        f"{fmt(required(release.noise_std))} at order {fmt_order(release.order)}; sampled "
        f"({noise_words(release.noise)}): {fmt_bound(required(release.epsilon_released))}",
        style="bold",
    )


def render_ledger(ledger: Ledger) -> RenderableType:
    """The most expensive queries and the cost by teacher agreement, as Rich tables."""
    answered = "answered" if ledger.realized else escape("Pr[ans]")
    top = Table(
        title=f"Most expensive queries (RDP at order {fmt_order(ledger.order)}; running: the "
        "epsilon of the queries up to this one, at their best order)",
        title_justify="left",
        header_style="bold",
        box=box.SIMPLE_HEAD,
        show_edge=False,
    )
    for column in ("query", "top", "gap", "log q", answered, "RDP", "share", "running"):
        top.add_column(column, justify="right", no_wrap=True)
    for row in most_expensive_rows(ledger):
        top.add_row(
            str(row["index"]),
            f"{row['top_votes']:g}",
            f"{row['gap']:g}",
            fmt_bound(row["logq"]),
            f"{row['pr_answered']:.4f}",
            fmt_bound(row["rdp"]),
            f"{100 * row['share']:.2f}%",
            fmt_bound(row["running_epsilon"]),
        )
    by_agreement = Table(
        title=f"Cost by teacher agreement (top vote share n_max/M, M = {ledger.num_teachers})",
        title_justify="left",
        header_style="bold",
    )
    for column in ("n_max/M", "queries", "answered" if ledger.realized else "exp. answered"):
        by_agreement.add_column(column, justify="right")
    by_agreement.add_column("RDP", justify="right")
    by_agreement.add_column("share of cost", justify="right")
    for bucket in buckets(ledger):
        by_agreement.add_row(
            Text(bucket.label),
            str(bucket.queries),
            answered_count(bucket.expected_answered, ledger.realized),
            fmt_bound(bucket.rdp),
            f"{100 * bucket.share:.1f}%",
        )
    by_agreement.add_row(
        "all",
        str(ledger.num_queries),
        answered_count(ledger.totals.answered, ledger.realized),
        fmt_bound(ledger.total_rdp),
        "100.0%" if ledger.total_rdp > 0 else "0.0%",
        style="bold",
    )
    closing = Text(
        f"{ledger.num_queries} queries, total RDP {fmt_bound(ledger.total_rdp)} at order "
        f"{fmt_order(ledger.order)} -> epsilon {fmt_bound(ledger.totals.last_running_epsilon)}"
    )
    return Group(top, by_agreement, closing)

"""Rich renderings of the reports. Functions return renderables; they never print or compute."""

from __future__ import annotations

import math
from typing import Any

import numpy as np
from rich import box
from rich.console import Console, ConsoleOptions, Group, RenderableType, RenderResult
from rich.markup import escape
from rich.measure import Measurement
from rich.table import Table
from rich.text import Text

from pate_cli.choices import GateOn
from pate_cli.comparison import NOTE, PARAMETERS, CompareReport, CompareRow
from pate_cli.inspection import QUANTILES, Histogram, InspectReport
from pate_cli.mechanisms import MechanismName
from pate_cli.records.record import Check
from pate_cli.release.gnss import NotReleased, Release
from pate_cli.reports.budget import Figure, release_withheld
from pate_cli.reports.ledger import Ledger, buckets, most_expensive
from pate_cli.reports.models import (
    AggregateReport,
    AnalysisReport,
    InputSummary,
    SmoothSensitivityReport,
)
from pate_cli.seeds import Noise


def fmt(value: float, digits: int = 4) -> str:
    """A float for people: fixed or scientific as fits, 'inf' for infinity, never 'nan'."""
    if np.isinf(value):
        return "inf" if value > 0 else "-inf"
    if value != 0 and (abs(value) < 1e-3 or abs(value) >= 1e6):
        return f"{value:.{digits - 1}e}"
    return f"{value:.{digits}f}"


def fmt_order(order: float) -> str:
    return f"{order:g}" if float(order).is_integer() else f"{order:.2f}"


def input_line(summary: InputSummary, dtype: str | None = None) -> Text:
    """What was read: path, format, (dtype,) sizes, and the selection out of the file."""
    how = "detected" if summary.detected else "given"
    if summary.format == "labels" and len(summary.file_shape) == 2:  # which axis is which
        rows, columns = summary.file_shape
        layout = summary.layout.split(" x ")
        how += f", {rows} {layout[0]} x {columns} {layout[1]}"
    text = Text()
    text.append(summary.path, style="bold")
    stored = "" if dtype is None else f", dtype {dtype}"
    queries = (
        f"{summary.num_queries} queries"
        if summary.num_queries == summary.num_file_queries
        else f"{summary.num_queries} of the file's {summary.num_file_queries} queries"
    )
    text.append(
        f"  format {summary.format} ({how}){stored}, {queries} x {summary.num_classes} "
        f"classes, {summary.num_teachers} teachers"
    )
    return text


# What a number is decides its colour: publishable figures green, private ones yellow.
PUBLISHABLE = "green"
PRIVATE = "yellow"


def headline(figures: tuple[Figure, ...], private: str, delta: float) -> Text:
    """The first line of a report: the epsilon to publish, then the private one."""
    text = Text()
    if figures:
        best = figures[0]
        text.append(f"epsilon {best.epsilon:.4f}", style=f"bold {PUBLISHABLE}")
        text.append(f" publishable ({best.basis}), delta {delta:g}")
    text.append("; ")
    text.append(private, style=PRIVATE)
    return text


def mechanism_line(mechanism: dict[str, object]) -> Text:
    params = ", ".join(f"{k}={v:g}" for k, v in mechanism.items() if isinstance(v, float))
    return Text.assemble(("mechanism ", ""), (str(mechanism["name"]), "bold cyan"), f"  {params}")


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


def dependent_name(mechanism: dict[str, Any], realized: bool) -> str:
    """The name of the data-dependent figure. For Confident/Interactive-GNMax in
    expectation it is the 2018 paper's expected cost, an average over the threshold noise,
    not a bound on the run (the guaranteed figure is)."""
    if mechanism["name"] in ("gnmax", "lnmax") or realized:
        return "data-dependent epsilon"
    return "expected data-dependent epsilon"


def _averaged(report: AnalysisReport) -> str:
    """What the expected figure is, where it is one: said once, in the closing line."""
    if dependent_name(report.mechanism, report.realized) == "data-dependent epsilon":
        return ""
    return ", the paper's average over the threshold noise, not a bound on the run"


def analysis(report: AnalysisReport, *, all_orders: bool = False) -> RenderableType:
    """The analyze report: the headline, input, mechanism, the orders around the optimum
    (a gap row where some are left out, and a legend), and the closing lines."""
    dependent, independent = report.data_dependent, report.data_independent
    orders = report.orders
    header = Group(
        headline(
            report.publishable,
            f"{dependent_name(report.mechanism, report.realized)} {dependent.epsilon:.4f} at "
            f"order {fmt_order(dependent.order)} (private)",
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
    every_query = report.mechanism["name"] in ("gnmax", "lnmax")
    independent_style = PUBLISHABLE if every_query else PRIVATE
    if all_orders:
        rows = list(range(orders.size))
    else:
        rows = _rows_near(orders, [dependent.order_index, independent.order_index], 4)
    by_value = np.argsort(orders, kind="stable")
    rank = np.empty_like(by_value)
    rank[by_value] = np.arange(orders.size)

    def orders_table(headers: tuple[str, ...], wide: bool) -> Table:
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
                fmt(dependent.rdp[i]),
                fmt(dependent.eps[i]) + (" *" if i == dependent.order_index else "  "),
                fmt(independent.rdp[i]),
                fmt(independent.eps[i]) + (" *" if i == independent.order_index else "  "),
                style="bold" if i == dependent.order_index else None,
            )
        return table

    table = Fit(
        orders_table(
            ("order", "data-dep. RDP", "data-dep. eps", "data-indep. RDP", "data-indep. eps"), True
        ),
        orders_table(("order", "dd RDP", "dd eps", "di RDP", "di eps"), False),
    )
    shown = (
        "every order" if all_orders else "the orders around each optimum (--all-orders shows all)"
    )
    legend = Text(
        f"{shown}; * the best order of the column; yellow: depends on the votes (private), "
        "green: publishable as it is (dd: data-dependent, di: data-independent)",
        style="dim",
    )
    closing = Text()
    closing.append(
        f"{dependent_name(report.mechanism, report.realized)} {dependent.epsilon:.4f}",
        style=f"bold {PRIVATE}",
    )
    closing.append(
        f" at order {fmt_order(dependent.order)} (private{_averaged(report)}); "
        "data-independent epsilon "
        f"{independent.epsilon:.4f} at order {fmt_order(independent.order)}"
        f"{'' if every_query else ' (private: weighted by Pr[answered])'}; "
    )
    guaranteed = report.guaranteed
    if guaranteed is not None and not every_query:
        closing.append(
            f"guaranteed (no averaging over the threshold noise) {guaranteed.epsilon:.4f} at "
            f"order {fmt_order(guaranteed.order)} (private); "
        )
    worst = report.worst_case
    if worst.epsilon != independent.epsilon:
        closing.append(
            f"worst case (every query answered) {worst.epsilon:.4f} at order "
            f"{fmt_order(worst.order)}; ",
            style=PUBLISHABLE,
        )
    if report.realized:
        closing.append(
            f"answered {report.expected_answered:.0f} of {report.num_queries_seen} queries seen"
        )
    else:
        closing.append(
            f"expected answered {report.expected_answered:.1f} of {report.num_queries_seen}"
        )
    parts: list[RenderableType] = [header, table, legend, closing]
    if report.release is not None:
        parts.append(release_line(report.release))
    parts.append(publishable_line(report.publishable))
    return Group(*parts)


def publishable_line(figures: tuple[Figure, ...]) -> Text:
    """The figures that may be published, best first; everything else above is private."""
    text = Text("publishable: ", style="bold")
    for i, figure in enumerate(figures):
        if i:
            text.append("; ")
        text.append(f"epsilon = {figure.epsilon:.4f}", style=f"bold {PUBLISHABLE}")
        text.append(f" ({figure.basis}, delta {figure.delta:g})")
    text.append(". Every other figure depends on the votes: private.")
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
            figure["basis"], f"{figure['epsilon']:.4f}", f"{figure['delta']:g}", figure["note"]
        )
    parts: list[RenderableType] = [header, mechanism_line(report.mechanism), table]
    if report.gate is not None:
        verdict = "within" if report.gate.passed else "over"
        parts.append(
            Text(
                f"{report.gate.on.value} epsilon {report.gate.epsilon:.4f} is {verdict} the "
                f"budget {report.gate.limit:g}"
            )
        )
    return Group(*parts)


def noise_words(noise: Noise | None) -> str:
    """Where a sample's noise came from, in a few words (the seed only when public)."""
    if noise is None:
        return "no noise"
    if noise.public_seed is not None:
        return f"public seed {noise.public_seed}, not private"
    return {
        "os-entropy": "private noise from OS entropy",
        "seed-file": "private noise from the seed file",
    }.get(noise.source, f"{noise.source}, not private")


def release_line(release: Release) -> Text:
    """One line on the GNSS release shown under the analyze table."""
    if isinstance(release, NotReleased) or not release.released:
        return Text(f"GNSS release: none ({release.reason})")
    return Text(
        f"GNSS-released epsilon (expected, private) = {release.epsilon_expected_release:.4f}"
        f" +/- {release.noise_std:.4f} at order {fmt_order(release.order)}"
        f"; sampled ({noise_words(release.noise)}): {release.epsilon_released:.4f}",
        style="bold",
    )


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
            f"{block.expected_answered:.1f}",
            fmt(block.data_dependent.epsilon),
            fmt_order(block.data_dependent.order),
            fmt(block.data_independent.epsilon),
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
            f"realised data-dependent epsilon {report.privacy.data_dependent.epsilon:.4f} "
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
        publishable_line(report.publishable),
    )


def smooth_sensitivity(report: SmoothSensitivityReport) -> RenderableType:
    """The GNSS release: the data-dependent epsilon, the cost of releasing it, one sample."""
    release = report.release
    private = (
        f"expected released epsilon {release.epsilon_expected_release:.4f} (private)"
        if release.released and release.epsilon_expected_release is not None
        else f"data-dependent epsilon {release.epsilon_data_dependent:.4f} (private)"
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
    steps = dict(zip(("threshold", "gnmax"), release.data_independent_steps, strict=True))
    table = Table(title="Smooth-sensitivity release", title_justify="left", header_style="bold")
    table.add_column("quantity")
    table.add_column("value", justify="right")
    table.add_row("expected answered", f"{release.expected_answered:.1f}")
    has_threshold = report.mechanism["name"] != "gnmax"  # plain GNMax has no threshold step
    table.add_row(
        "data-independent steps",
        ", ".join(k for k, v in steps.items() if v and (has_threshold or k != "threshold"))
        or "none",
    )
    if release.conditions is not None or release.released:
        conditions = release.conditions or (None, None)
        verdicts = ["unverified" if c is None else "holds" if c else "FAILS" for c in conditions]
        table.add_row("conditions C5 / C6", " / ".join(verdicts))
    table.add_row(
        dependent_name(report.mechanism, report.realized), fmt(release.epsilon_data_dependent)
    )
    if not release.released:
        table.add_row("data-independent epsilon", fmt(_number(release.epsilon_data_independent)))
        table.add_row("worst case (every query answered)", fmt(_number(release.epsilon_worst_case)))
        nothing = Text(f"nothing to release: {release.reason}", style="bold")
        return Group(header, table, nothing, publishable_line(report.publishable))
    table.add_row("beta", fmt(_number(release.beta)))
    table.add_row("smooth sensitivity E[SS_beta]", fmt(_number(release.smooth_sensitivity)))
    table.add_row("sigma_ss", fmt(_number(release.sigma_ss)))
    table.add_row("GNSS cost (RDP)", fmt(_number(release.gnss_cost)))
    table.add_row("noise std", fmt(_number(release.noise_std)))
    table.add_row(
        "expected released epsilon", fmt(_number(release.epsilon_expected_release)), style="bold"
    )
    table.add_row(
        f"sampled released epsilon ({noise_words(release.noise)})",
        fmt(_number(release.epsilon_released)),
    )
    closing = Text()
    closing.append(
        f"released epsilon = {_number(release.epsilon_expected_release):.4f}", style="bold"
    )
    closing.append(
        f" +/- {_number(release.noise_std):.4f} at order {fmt_order(release.order)} "
        f"(expected, private: data-dependent {release.epsilon_data_dependent:.4f} + GNSS cost "
        f"{_number(release.gnss_cost):.4f}); sampled: {_number(release.epsilon_released):.4f}"
    )
    withheld = release_withheld(release)
    if withheld is not None:
        closing.append(f" (the sample is private: {withheld})")
    return Group(header, table, closing, publishable_line(report.publishable))


def _number(value: float | None) -> float:
    """A field the release always sets once it has released (None would be a bug)."""
    if value is None:
        raise ValueError("a released GNSS release lacks a number")
    return value


# ---------------------------------------------------------------------------
# The per-query ledger (``analyze --breakdown``)


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
    share = ledger.share
    for i in most_expensive(ledger):
        top.add_row(
            str(ledger.index[i]),
            f"{ledger.top_votes[i]:g}",
            f"{ledger.gap[i]:g}",
            fmt(ledger.logq[i]),
            f"{ledger.pr_answered[i]:.4f}",
            fmt(ledger.rdp[i]),
            f"{100 * share[i]:.2f}%",
            fmt(ledger.running_epsilon[i]),
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
            f"{bucket.expected_answered:.1f}",
            fmt(bucket.rdp),
            f"{100 * bucket.share:.1f}%",
        )
    by_agreement.add_row(
        "all",
        str(ledger.num_queries),
        f"{ledger.pr_answered.sum():.1f}",
        fmt(ledger.total_rdp),
        "100.0%" if ledger.total_rdp > 0 else "0.0%",
        style="bold",
    )
    closing = Text(
        f"{ledger.num_queries} queries, total RDP {fmt(ledger.total_rdp)} at order "
        f"{fmt_order(ledger.order)} -> epsilon {fmt(float(ledger.running_epsilon[-1]))}"
    )
    return Group(top, by_agreement, closing)


# ---------------------------------------------------------------------------
# compare

#: Mechanism names in the table, short enough for an 80-column terminal.
_SHORT_NAMES = {
    MechanismName.GNMAX: "gnmax",
    MechanismName.CONFIDENT_GNMAX: "confident",
    MechanismName.INTERACTIVE_GNMAX: "interactive",
    MechanismName.LNMAX: "lnmax",
}


def _compare_number(value: float) -> str:
    if math.isinf(value):
        return "inf" if value > 0 else "-inf"
    return f"{value:.4f}"


class Fit:
    """The wide renderable where it fits the console's width, else the narrow one: a table
    folds into lines rather than cut a number."""

    def __init__(self, wide: Table, narrow: RenderableType) -> None:
        self.wide, self.narrow = wide, narrow

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> RenderResult:
        # Measured without the console's limit, which a measurement is clamped to.
        needed = Measurement.get(console, options.update_width(1 << 16), self.wide).maximum
        yield self.wide if needed <= options.max_width else self.narrow


_COMPARE_LEGEND = (
    "epsilon: data-dependent (private); indep.: data-independent (private where the number "
    "answered depends on the votes); publ.: the smallest publishable figure (every query "
    "answered, exact where it can be); bold: the best of its column"
)


def render_compare(report: CompareReport) -> RenderableType:
    """The rows as a table (one line per setting, folded into a block per setting where the
    console is too narrow), the best value of each column in bold."""
    rows = report.rows
    params = [p for p in PARAMETERS if any(p in r.mechanism.to_json_dict() for r in rows)]
    table = Table(
        title=f"{len(rows)} settings, sorted by {report.sort.value} (best first)",
        title_justify="left",
        header_style="bold",
        box=box.SIMPLE_HEAD,
        show_edge=False,
        pad_edge=False,
        padding=(0, 0),  # the box's space between columns is enough; fits 80 columns
    )
    table.add_column("#", justify="right", no_wrap=True)
    table.add_column("mechanism", no_wrap=True)
    for name in params:
        table.add_column("T" if name == "threshold" else name, justify="right", no_wrap=True)
    for name in ("answered", "epsilon", "order", "indep.", "order", "publ.", "agree"):
        table.add_column(name, justify="right", no_wrap=True)

    def best(values: list[float], largest: bool) -> float:
        return max(values) if largest else min(values)

    best_answered = best([r.expected_answered for r in rows], True)
    best_dependent = best([r.data_dependent.epsilon for r in rows], False)
    best_independent = best([r.data_independent.epsilon for r in rows], False)

    def publishable(row: CompareRow) -> float:
        value = row.epsilons()[GateOn.PUBLISHABLE]
        return math.nan if value is None else value

    best_worst = min((publishable(r) for r in rows), default=math.nan)
    best_agreement = best([r.agreement for r in rows], True)

    def cell(text: str, is_best: bool, colour: str = "") -> Text:
        return Text(text, style=f"bold {colour}".strip() if is_best else colour)

    blocks: list[RenderableType] = []
    baseline = any(r.mechanism.name is MechanismName.GNMAX for r in rows) and any(
        r.mechanism.name is not MechanismName.GNMAX for r in rows
    )
    for rank, row in enumerate(rows, start=1):
        spec = row.mechanism.to_json_dict()
        gated = row.epsilons().get(report.gate_on)
        over = report.max_epsilon is not None and not (
            gated is not None and gated <= report.max_epsilon
        )
        every_query = row.mechanism.name in (MechanismName.GNMAX, MechanismName.LNMAX)
        independent_colour = PUBLISHABLE if every_query else PRIVATE
        worst = publishable(row)
        name = _SHORT_NAMES[row.mechanism.name]
        cells = (
            cell(f"{row.expected_answered:.1f}", row.expected_answered == best_answered),
            cell(
                _compare_number(row.data_dependent.epsilon),
                row.data_dependent.epsilon == best_dependent,
                PRIVATE,
            ),
            Text(fmt_order(row.data_dependent.order)),
            cell(
                _compare_number(row.data_independent.epsilon),
                row.data_independent.epsilon == best_independent,
                independent_colour,
            ),
            Text(fmt_order(row.data_independent.order)),
            cell(_compare_number(worst), worst == best_worst, PUBLISHABLE),
            cell(f"{row.agreement:.4f}", row.agreement == best_agreement),
        )
        table.add_row(
            str(rank),
            name,
            *(f"{spec[p]:g}" if p in spec else "-" for p in params),
            *cells,
            style="dim" if over else None,
        )
        setting = " ".join(
            f"{'T' if p == 'threshold' else p}={spec[p]:g}" for p in params if p in spec
        )
        labels = ("answered", "epsilon", "order", "indep.", "order", "publ.", "agree")
        block = Text(f"{rank} {name} {setting}: ", style="dim" if over else "")
        for i, (label, value) in enumerate(zip(labels, cells, strict=True)):
            block.append(("; " if i else "") + f"{label} ")
            block.append_text(value)
        blocks.append(block)
    source = report.input
    header = input_line(source)
    header.append(
        f"; delta {report.delta:g}, conversion {report.conversion}, expected cost; each epsilon "
        "at its best order"
    )
    narrow = Group(
        Text(f"{len(rows)} settings, sorted by {report.sort.value} (best first)"), *blocks
    )
    parts: list[RenderableType] = [header, Fit(table, narrow), Text(_COMPARE_LEGEND, style="dim")]
    if baseline:
        parts.append(
            Text(
                "gnmax rows: the same --sigma without a threshold step, for comparison "
                "(--mechanism leaves them out)",
                style="dim",
            )
        )
    if report.max_epsilon is not None:
        within = sum(
            (gated := r.epsilons().get(report.gate_on)) is not None and gated <= report.max_epsilon
            for r in rows
        )
        parts.append(
            Text(
                f"{within} of {len(rows)} settings within --max-epsilon {report.max_epsilon:g} "
                f"({report.gate_on.value})"
            )
        )
    parts.append(Text(f"note: {NOTE}", style="italic"))
    return Group(*parts)


# ---------------------------------------------------------------------------
# inspect


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
    header = input_line(source, report.dtype)
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


# ---------------------------------------------------------------------------
# verify


def render_verify(record_path: str, record: dict[str, Any], checks: list[Check]) -> RenderableType:
    import shlex

    table = Table(title=f"Verification of {record_path}", title_justify="left", header_style="bold")
    table.add_column("check")
    table.add_column("result")
    table.add_column("detail", overflow="fold")
    for check in checks:
        table.add_row(  # as text: a record's strings are not Rich markup
            Text(check.name),
            Text("ok", style="green") if check.ok else Text("DIFFERS", style="bold red"),
            Text(check.detail),
        )
    failed = [c.name for c in checks if not c.ok]
    verdict = (
        Text("the record holds", style="bold green")
        if not failed
        else Text(f"the record does not hold: {', '.join(failed)}", style="bold red")
    )
    versions = record.get("versions", {})
    made = ", ".join(f"{k} {v}" for k, v in versions.items())
    kind = record.get("kind", "private")
    # The command line is shown only once it is known to be the recorded call.
    matched = any(c.name == "command line" and c.ok for c in checks)
    line = (
        f"command line: pate {shlex.join(record['argv'])}"
        if matched
        else "command line: not shown (it does not match the recorded call)"
    )
    return Group(
        Text(f"{kind} {record['command']} record made with {made}; {line}"),
        table,
        verdict,
    )

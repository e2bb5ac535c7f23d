"""``pate compare``: the command and its renderings (the engine is ``pate_cli.comparison``)."""

from __future__ import annotations

import math
from typing import Annotated

import typer
from rich import box
from rich.console import Group, RenderableType
from rich.table import Table
from rich.text import Text

from pate_cli import plots
from pate_cli._options import (
    BaselineOpt,
    ConversionOpt,
    DeltaOpt,
    FormatOpt,
    GateOn,
    GateOnOpt,
    HalfEvenOpt,
    IndicesOpt,
    JsonOpt,
    MaxEpsilonOpt,
    NumClassesOpt,
    OrdersOpt,
    QueriesOpt,
    TeachersOpt,
    VotesArg,
    check_delta,
    emit,
    gate,
    selection_options,
)
from pate_cli.accounting import Conversion
from pate_cli.comparison import (
    NOTE,
    CompareReport,
    SortColumn,
    compare_rows,
    edge_warning,
    mechanism_grid,
    parse_list,
    sort_rows,
)
from pate_cli.errors import UsageError
from pate_cli.mechanisms import (
    MechanismName,
)
from pate_cli.orders import parse_orders
from pate_cli.report import InputSummary
from pate_cli.votes import VoteFormat, check_output_path, load_baseline, write_atomic


def _number(value: float) -> str:
    if math.isinf(value):
        return "inf" if value > 0 else "-inf"
    return f"{value:.4f}"


def _order(order: float) -> str:
    return f"{order:g}" if float(order).is_integer() else f"{order:.2f}"


_PARAMETERS = ("threshold", "sigma1", "sigma", "gamma")
#: Mechanism names in the table, short enough for an 80-column terminal.
_SHORT_NAMES = {
    MechanismName.GNMAX: "gnmax",
    MechanismName.CONFIDENT_GNMAX: "confident",
    MechanismName.INTERACTIVE_GNMAX: "interactive",
    MechanismName.LNMAX: "lnmax",
}


def render_compare(report: CompareReport) -> RenderableType:
    """The rows as a Rich table, the best value of each column highlighted."""
    rows = report.rows
    params = [p for p in _PARAMETERS if any(p in r.mechanism.to_json_dict() for r in rows)]
    table = Table(
        title=f"{len(rows)} settings, sorted by {report.sort.value} (best first)",
        title_justify="left",
        header_style="bold",
        box=box.SIMPLE_HEAD,
        show_edge=False,
        pad_edge=False,
        padding=(0, 0),  # the box's space between columns is enough; fits 80 columns
    )
    table.add_column("#", justify="right")
    table.add_column("mechanism")
    for name in params:
        table.add_column("T" if name == "threshold" else name, justify="right")
    for name in (
        "exp.\nanswered",
        "epsilon",
        "order",
        "data-\nindep.\nepsilon",
        "order",
        "agree-\nment",
    ):
        table.add_column(name, justify="right")

    def best(values: list[float], largest: bool) -> float:
        return max(values) if largest else min(values)

    best_answered = best([r.expected_answered for r in rows], True)
    best_dependent = best([r.data_dependent.epsilon for r in rows], False)
    best_independent = best([r.data_independent.epsilon for r in rows], False)
    best_agreement = best([r.agreement for r in rows], True)

    def cell(text: str, is_best: bool) -> Text:
        return Text(text, style="bold green" if is_best else "")

    for rank, row in enumerate(rows, start=1):
        spec = row.mechanism.to_json_dict()
        over = report.max_epsilon is not None and not (
            row.data_dependent.epsilon <= report.max_epsilon
        )
        table.add_row(
            str(rank),
            _SHORT_NAMES[row.mechanism.name],
            *(f"{spec[p]:g}" if p in spec else "-" for p in params),
            cell(f"{row.expected_answered:.1f}", row.expected_answered == best_answered),
            cell(_number(row.data_dependent.epsilon), row.data_dependent.epsilon == best_dependent),
            _order(row.data_dependent.order),
            cell(
                _number(row.data_independent.epsilon),
                row.data_independent.epsilon == best_independent,
            ),
            _order(row.data_independent.order),
            cell(f"{row.agreement:.4f}", row.agreement == best_agreement),
            style="dim" if over else None,
        )
    source = report.input
    header = Text(
        f"{source.path}  format {source.format} ({'detected' if source.detected else 'given'}), "
        f"{source.num_queries} queries x {source.num_classes} classes, "
        f"{source.num_teachers} teachers; delta {report.delta:g}, "
        f"conversion {report.conversion}, expected cost; data-dependent epsilon and "
        "data-independent epsilon, each at its best order"
    )
    parts: list[RenderableType] = [header, table]
    if report.max_epsilon is not None:
        within = sum(r.data_dependent.epsilon <= report.max_epsilon for r in rows)
        parts.append(
            Text(f"{within} of {len(rows)} settings within --max-epsilon {report.max_epsilon:g}")
        )
    parts.append(Text(f"note: {NOTE}", style="italic"))
    return Group(*parts)


_CSV_COLUMNS = (
    "mechanism",
    *_PARAMETERS,
    "expected_answered",
    "epsilon",
    "order",
    "data_independent_epsilon",
    "data_independent_order",
    "agreement",
)


def compare_csv(report: CompareReport) -> str:
    """The rows as CSV, in the report's order, numbers at full precision."""

    def number(value: float) -> str:
        return ("inf" if value > 0 else "-inf") if math.isinf(value) else repr(float(value))

    lines = [",".join(_CSV_COLUMNS)]
    for row in report.rows:
        spec = row.mechanism.to_json_dict()
        values = [
            str(spec["name"]),
            *(number(spec[p]) if p in spec else "" for p in _PARAMETERS),
            number(row.expected_answered),
            number(row.data_dependent.epsilon),
            number(row.data_dependent.order),
            number(row.data_independent.epsilon),
            number(row.data_independent.order),
            number(row.agreement),
        ]
        lines.append(",".join(values))
    return "\n".join(lines) + "\n"


# ---------------------------------------------------------------------------
# The command.

SigmaListOpt = Annotated[
    str | None,
    typer.Option(
        "--sigma",
        "--sigma2",
        metavar="LIST",
        help="GNMax noise std (sigma2 of Confident-GNMax), a comma list: 20,40,80.",
    ),
]
ThresholdListOpt = Annotated[
    str | None,
    typer.Option("--threshold", metavar="LIST", help="Confident-GNMax thresholds T, a comma list."),
]
Sigma1ListOpt = Annotated[
    str | None,
    typer.Option("--sigma1", metavar="LIST", help="Threshold-step noise stds, a comma list."),
]
GammaListOpt = Annotated[
    str | None,
    typer.Option(
        "--gamma", metavar="LIST", help="LNMax: Laplace noise of scale 1/gamma, a comma list."
    ),
]
MechanismRestrictOpt = Annotated[
    MechanismName | None,
    typer.Option(
        "--mechanism",
        help="Compare this mechanism only (default: every mechanism whose flags are given).",
    ),
]
SortOpt = Annotated[
    SortColumn,
    typer.Option(
        "--sort",
        help="Order the rows by this column, best first: epsilon (data-dependent, smallest), "
        "data-independent (smallest), answered (most), agreement (highest).",
    ),
]
CsvOpt = Annotated[
    str | None, typer.Option("--csv", metavar="FILE", help="Also write the rows to this .csv file.")
]
PlotOpt = Annotated[
    str | None,
    typer.Option(
        "--plot",
        metavar="FILE",
        help="Write a figure of epsilon against expected answered, one point per setting "
        "(.png, .svg or .pdf; needs the 'plot' extra).",
    ),
]


def compare(
    votes_path: VotesArg,
    delta: DeltaOpt,
    sigma: SigmaListOpt = None,
    threshold: ThresholdListOpt = None,
    sigma1: Sigma1ListOpt = None,
    gamma: GammaListOpt = None,
    mechanism: MechanismRestrictOpt = None,
    baseline_path: BaselineOpt = None,
    sort: SortOpt = SortColumn.EPSILON,
    orders_text: OrdersOpt = None,
    conversion: ConversionOpt = Conversion.CLASSIC,
    half_even: HalfEvenOpt = False,
    fmt: FormatOpt = VoteFormat.AUTO,
    num_classes: NumClassesOpt = None,
    teachers: TeachersOpt = None,
    queries: QueriesOpt = None,
    indices: IndicesOpt = None,
    csv_path: CsvOpt = None,
    plot_path: PlotOpt = None,
    max_epsilon: MaxEpsilonOpt = None,
    gate_on: GateOnOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """Compare mechanisms and parameter settings side by side on the same votes.

    Give parameters as comma lists; every combination becomes a row with
    its expected number of answered queries, the data-dependent and
    data-independent epsilon (and their orders), and the expected agreement
    with the plurality vote. Each row gives exactly the numbers 'pate
    analyze' gives for that setting. Picking a setting by its data-dependent
    cost is itself a use of the private votes (the output says so); the
    data-independent columns are safe to tune on. --max-epsilon exits 1
    after printing when no setting is within budget (the best row's epsilon,
    data-dependent unless --gate-on data-independent).

    Example:

        pate compare sample_data/mnist_250_teachers.npy --threshold 150,200 --sigma1 100,150 --sigma 40 --queries 640 --delta 1e-5
    """
    check_delta(delta)
    which = gate_on or GateOn.DATA_DEPENDENT
    if which in (GateOn.RELEASED, GateOn.WORST_CASE):
        raise UsageError(
            f"--gate-on {which.value}: compare gates on data-dependent or data-independent"
        )
    mechanisms = mechanism_grid(
        mechanism,
        sigmas=parse_list("--sigma", sigma),
        thresholds=parse_list("--threshold", threshold),
        sigma1s=parse_list("--sigma1", sigma1),
        gammas=parse_list("--gamma", gamma),
        has_baseline=baseline_path is not None,
    )
    orders = parse_orders(orders_text)
    if csv_path is not None:
        check_output_path(csv_path, "--csv", (".csv",))
    if plot_path is not None:
        plots.check_plot_path(plot_path)
    votes = selection_options(votes_path, fmt, num_classes, teachers, queries, indices)
    baseline = load_baseline(baseline_path, votes) if baseline_path is not None else None

    rows = compare_rows(
        votes.counts,
        mechanisms,
        orders,
        delta,
        conversion,
        baseline=baseline,
        half_even=half_even,
    )
    rows = sort_rows(rows, sort)
    report = CompareReport(
        input=InputSummary.from_votes(votes),
        delta=delta,
        conversion=conversion.value,
        orders=orders,
        sort=sort,
        rows=tuple(rows),
        max_epsilon=max_epsilon,
        warnings=(*votes.warnings, *edge_warning(rows)),
    )
    payload = report.to_json_dict()
    if csv_path is not None:
        text = compare_csv(report).encode("utf-8")
        write_atomic(csv_path, lambda stream: stream.write(text))
        payload["csv"] = csv_path
    if plot_path is not None:
        plots.plot_compare(plot_path, payload["rows"])
        payload["plot"] = plot_path
    emit(payload, render_compare(report), report.warnings, as_json)
    gate(
        {
            GateOn.DATA_DEPENDENT: min(r.data_dependent.epsilon for r in rows),
            GateOn.DATA_INDEPENDENT: min(r.data_independent.epsilon for r in rows),
        },
        max_epsilon,
        which,
    )

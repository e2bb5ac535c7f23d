"""``pate compare``: the command and its renderings (the engine is ``pate_cli.jobs.comparison``)."""

from __future__ import annotations

from functools import partial
from typing import TYPE_CHECKING, Annotated

import typer

from pate_cli.choices import SortColumn, TableGateOn
from pate_cli.cli.blocks import (
    ACCOUNTING,
    ENGINE,
    OUTPUT,
    OWN,
    SELECTION,
    command,
    gate,
    mechanism_block,
)
from pate_cli.cli.options import DeltaOpt, PldOpt, TableGateOnOpt, VotesArg

if TYPE_CHECKING:
    from pate_cli.cli.run import Invocation, Params
    from pate_cli.jobs.comparison import CompareReport
    from pate_cli.mechanisms import Mechanism

# ---------------------------------------------------------------------------
# The command.

SortOpt = Annotated[
    SortColumn,
    typer.Option(
        "--sort",
        help="Order the rows by this column, best first: publishable (the smallest "
        "publishable epsilon, the default), epsilon (data-dependent, private), "
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


def describe(p: Params) -> Invocation:
    """What ``pate compare`` with the parameters ``p`` reads, calls and writes."""
    from pate_cli import api, plots
    from pate_cli.cli.run import Call, File, Invocation, Output
    from pate_cli.jobs.comparison import compare_csv, listed, mechanism_grid
    from pate_cli.mechanisms.registry import declarations
    from pate_cli.votes import check_output_path, write_atomic

    def settings() -> list[Mechanism]:
        return mechanism_grid(
            p["mechanism"],
            **{name: listed(parameter, p[name]) for name, parameter in declarations().items()},
            has_baseline=p["baseline_path"] is not None,
            threshold_bound=p["threshold_bound"],
        )

    def write_csv(report: CompareReport, path: str) -> None:
        text = compare_csv(report).encode("utf-8")
        write_atomic(path, lambda stream: stream.write(text))

    def write_plot(report: CompareReport, path: str) -> None:
        plots.save(plots.plot_compare(report), path)

    check_csv = partial(check_output_path, flag="--csv", suffixes=(".csv",))
    csv = Output("--csv", p["csv_path"], "csv", check_csv, write_csv)
    plot = Output("--plot", p["plot_path"], "plot", plots.check_plot_path, write_plot)
    options = {
        "delta": p["delta"],
        "orders": p["orders_text"],
        "conversion": p["conversion"].value,
        "sort": p["sort"].value,
        "half_even": p["half_even"],
        "max_epsilon": p["max_epsilon"],
        "gate_on": p["gate_on"].value,
    }
    if p["pld"] is not None:
        options["pld"] = True if p["pld"] == "q-bound" else p["pld"]
    baseline = File("--baseline", p["baseline_path"], "baseline")
    call = Call.of(api.compare, p, settings, options, baseline)
    return Invocation.of("compare", call, p, outputs=(csv, plot))


# The end of the help: each line one whole command (pate_cli.cli.examples).
EXAMPLES = (
    "pate compare sample_data/mnist_250_teachers.npy --threshold 150,200 --sigma1 100,150 --sigma 40 --queries 640 --delta 1e-5",
)


@command(
    mechanism_block(lists=True),
    OWN,
    ACCOUNTING,
    SELECTION,
    gate(TableGateOnOpt, TableGateOn.PUBLISHABLE, public=False),
    ENGINE,
    OUTPUT,
)
def compare(
    ctx: typer.Context,
    votes_path: VotesArg,
    delta: DeltaOpt,
    sort: SortOpt = SortColumn.PUBLISHABLE,
    csv_path: CsvOpt = None,
    plot_path: PlotOpt = None,
    pld: PldOpt = None,
) -> None:
    """Compare mechanisms and parameter settings side by side on the same votes.

    Give parameters as comma lists; every combination becomes a row with
    its expected number of answered queries, the data-dependent and
    data-independent epsilon (and their orders), and the expected agreement
    with the plurality vote. Each row gives exactly the numbers 'pate
    analyze' gives for that setting. Picking a setting by its data-dependent
    cost is itself a use of the private votes (the output says so); only the
    worst-case epsilon (every query answered) is safe to tune on.
    --max-epsilon exits 1 after printing when no setting is within budget (the
    best row's publishable epsilon, unless --gate-on says otherwise).
    """
    from pate_cli.cli import render
    from pate_cli.cli.run import check_files, finish
    from pate_cli.common import checks
    from pate_cli.engines import check_available, keywords
    from pate_cli.orders import parse_orders

    invocation = describe(ctx.params)
    # compare writes no record, and checks every flag before it reads the votes.
    check_files(invocation)
    checks.delta(delta)
    mechanisms = invocation.call.mechanism()
    parse_orders(ctx.params["orders_text"])
    for output in invocation.outputs:
        output.check_path()
    check_available(invocation.engine)
    votes = invocation.call.selection.load()
    report = invocation.call(votes, mechanisms, **keywords(invocation.engine))
    finish(invocation, mechanisms, report, render.render_compare)

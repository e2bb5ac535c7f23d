"""``pate analyze``: the privacy cost of answering the queries, per order and at the best one."""

from __future__ import annotations

from functools import partial
from typing import TYPE_CHECKING, Annotated

import typer

from pate_cli.choices import GateOn
from pate_cli.cli.blocks import command, gate, mechanism_block, runs
from pate_cli.cli.options import (
    AnsweredOpt,
    DataIndependentOpt,
    DeltaOpt,
    GateOnOpt,
    PldOpt,
    VotesArg,
)

if TYPE_CHECKING:
    from rich.console import RenderableType

    from pate_cli.cli.run import Invocation, Params
    from pate_cli.reports.models import AnalysisReport

# Options of this command alone (the shared ones are in ``pate_cli.cli.options``).
AllOrdersOpt = Annotated[
    bool,
    typer.Option("--all-orders", help="Show every order, not only those near the optimum."),
]
NoReleaseOpt = Annotated[
    bool,
    typer.Option("--no-release", help="Skip the smooth-sensitivity (GNSS) release of the epsilon."),
]
LedgerOpt = Annotated[
    str | None,
    typer.Option(
        "--ledger",
        help="Write the per-query cost ledger (.csv or .json): gap, log q, Pr[answered], "
        "RDP at the best order, share of the total, running epsilon.",
    ),
]
BreakdownOpt = Annotated[
    bool,
    typer.Option(
        "--breakdown",
        help="Show the most expensive queries and the cost by teacher agreement.",
    ),
]
PlotOpt = Annotated[
    str | None,
    typer.Option(
        "--plot",
        help="Write a figure (.png, .svg or .pdf; needs the 'plot' extra): epsilon against "
        "queries answered, and the cost by agreement.",
    ),
]


def describe(p: Params) -> Invocation:
    """What ``pate analyze`` with the parameters ``p`` reads, calls and writes (``pate
    verify`` asks it of a recorded command line too)."""
    from pate_cli import api, plots
    from pate_cli.cli.run import Call, File, Invocation, Output, inferred_mechanism
    from pate_cli.orders import parse_orders
    from pate_cli.reports import ledger

    ledger_file = Output(
        "--ledger",
        p["ledger_path"],
        "ledger",
        ledger.check_ledger_path,
        lambda report, path: ledger.write_ledger(report.ledger, path),
        protected=True,
    )
    plot = Output(
        "--plot",
        p["plot_path"],
        "plot",
        plots.check_plot_path,
        lambda report, path: plots.save(plots.plot_analysis(report), path),
        protected=True,
    )
    options = {
        "delta": p["delta"],
        "orders": p["orders_text"],
        "conversion": p["conversion"].value,
        "data_independent": p["data_independent"],
        "release": not p["no_release"],
        "beta": p["beta"],
        "sigma_ss": p["sigma_ss"],
        "reference_local_sensitivity": not p["strict"],
        "half_even": p["half_even"],
        "breakdown": ledger_file.path is not None or plot.path is not None or p["breakdown"],
        "max_epsilon": p["max_epsilon"],
        "gate_on": p["gate_on"].value,
    }
    if p["walk"]:  # only when asked: a call of a pate without the flag has no such key
        options["walk_local_sensitivity"] = True
    if p["pld"] is not None:  # the same: a call without it is a call of an older pate
        options["pld"] = True if p["pld"] == "q-bound" else p["pld"]
    baseline = File("--baseline", p["baseline_path"], "baseline")
    answered = File("--answered", p["answered_path"], "answered")
    mechanism = inferred_mechanism(p, baseline.path)
    return Invocation.of(
        "analyze",
        Call.of(api.analyze, p, mechanism, options, baseline, answered),
        p,
        outputs=(ledger_file, plot),
        # The ledger and the plot hold data of the votes: never replaced without --force. A
        # second run spends the budget again only when it draws the release's sample.
        spends_budget=not (p["no_release"] or p["data_independent"]),
        progress=True,
        later_checks=(
            partial(parse_orders, p["orders_text"]),
            plot.check_path,
            ledger_file.check_path,
        ),
    )


# The end of the help: each line one whole command (pate_cli.cli.examples).
EXAMPLES = (
    "pate analyze sample_data/mnist_250_teachers.npy --threshold 200 --sigma1 150 --sigma 40 --queries 640 --delta 1e-5",
)


@command(*runs(mechanism_block(), gate(GateOnOpt, GateOn.PUBLISHABLE), release=True))
def analyze(
    ctx: typer.Context,
    votes_path: VotesArg,
    delta: DeltaOpt,
    data_independent: DataIndependentOpt = False,
    answered_path: AnsweredOpt = None,
    all_orders: AllOrdersOpt = False,
    no_release: NoReleaseOpt = False,
    ledger_path: LedgerOpt = None,
    breakdown: BreakdownOpt = False,
    plot_path: PlotOpt = None,
    pld: PldOpt = None,
) -> None:
    """Data-dependent and data-independent privacy cost of answering the queries.

    Reports Renyi DP per order and (epsilon, delta) at the best order for
    GNMax, Confident-GNMax, Interactive-GNMax or LNMax, the expected number of
    queries answered, and the epsilon released through its smooth
    sensitivity (GNSS), for LNMax as for the GNMax family. With --answered,
    the realised run of 'pate aggregate'.
    """
    from pate_cli.cli.run import run  # what the run needs, not its help

    run(describe(ctx.params), partial(_view, all_orders=all_orders, breakdown=breakdown))


def _view(report: AnalysisReport, *, all_orders: bool, breakdown: bool) -> RenderableType:
    """The report's table (every order with ``all_orders``), and its ledger with
    ``breakdown``."""
    from rich.console import Group

    from pate_cli.cli import render

    table = render.analysis(report, all_orders=all_orders)
    if breakdown and report.ledger is not None:
        return Group(table, render.render_ledger(report.ledger))
    return table

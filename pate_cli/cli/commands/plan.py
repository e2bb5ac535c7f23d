"""``pate plan``: choose a parameter for a target (epsilon, delta) before looking at votes."""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated

import typer

from pate_cli.choices import Accountant, Conversion
from pate_cli.cli.blocks import OUTPUT, OWN, command, mechanism_block
from pate_cli.cli.options import ConversionOpt, DeltaOpt, OrdersOpt, emit

if TYPE_CHECKING:
    from rich.text import Text

    from pate_cli.jobs.planning import PlanReport

# Options of this command alone (the shared ones are in ``pate_cli.cli.options``).
EpsilonOpt = Annotated[float, typer.Option("--epsilon", help="The target epsilon (finite, > 0).")]
PlanQueriesOpt = Annotated[
    int | None,
    typer.Option("--queries", help="Number of queries (leave out to solve for it)."),
]
AccountantOpt = Annotated[
    Accountant,
    typer.Option(
        "--accountant",
        help="exact (Gaussian DP of the run, or the optimal composition of LNMax's "
        "pure-DP steps) or rdp (Prop. 8 over the orders, with --conversion).",
    ),
]
PilotVotesOpt = Annotated[
    str | None,
    typer.Option(
        "--votes",
        help="Pilot (or public) votes: plan Confident-GNMax's guaranteed cost on them; "
        "the report says they were looked at.",
    ),
]


# The end of the help: each line one whole command (pate_cli.cli.examples).
EXAMPLES = ("pate plan --delta 1e-5 --epsilon 2 --queries 640",)


@command(OWN, mechanism_block(baseline=False), OUTPUT)
def plan(
    ctx: typer.Context,
    delta: DeltaOpt,
    epsilon: EpsilonOpt,
    queries: PlanQueriesOpt = None,
    accountant: AccountantOpt = Accountant.EXACT,
    conversion: ConversionOpt = Conversion.CLASSIC,
    orders_text: OrdersOpt = None,
    votes_path: PilotVotesOpt = None,
) -> None:
    """Solve for the one parameter left out so that the run meets a target epsilon.

    Give the target (--epsilon, --delta) and every parameter but one of
    the number of queries and the mechanism's noise parameters (sigma,
    sigma1, gamma, or a plugin's own); plan returns the value at
    which the publishable cost (every query answered, data-independent) is
    within the target: never above it, and within 1e-7 relative of it
    (a count: the largest that fits). No votes are read unless
    --votes gives pilot votes.
    """
    from pate_cli.jobs.planning import plan as solve
    from pate_cli.mechanisms.registry import declarations

    report = solve(
        delta=delta,
        epsilon=epsilon,
        mechanism=ctx.params["mechanism"],
        queries=queries,
        accountant=accountant,
        conversion=conversion,
        orders=orders_text,
        votes=votes_path,
        **{name: ctx.params[name] for name in declarations()},
    )
    rendered = _rendered(report)
    emit(report.to_dict(), rendered, report.warnings, ctx.params["as_json"])


def _rendered(report: PlanReport) -> Text:
    """The one line of the human output: the value solved for, then the setting it meets."""
    from rich.text import Text

    from pate_cli.jobs.planning import rounded_up

    # The value as solved (8 significant digits or more, on the safe side): copied, it keeps the target.
    value = f"{int(report.value)}" if report.solve_for == "queries" else repr(report.value)
    setting = ", ".join(
        f"{k}={v!r}" if k == report.solve_for else f"{k}={v:g}"
        for k, v in report.mechanism.items()
        if k != "name"
    )
    return Text.assemble(
        (f"{report.solve_for} = {value}", "bold green"),
        f"  {report.mechanism['name']} {setting}, {report.queries} queries: epsilon "
        f"{rounded_up(report.epsilon, 7)} <= {report.target:g} at delta {report.delta:g} "
        f"({report.accountant} accountant, "
        + (
            "guaranteed data-dependent cost on the pilot votes)"
            if report.votes
            else "every query answered)"
        ),
    )

"""``pate budget init`` and ``pate budget show``: one privacy budget across releases.

``--budget FILE`` on ``analyze``, ``smooth-sensitivity`` and ``aggregate`` charges a run to
the file; ``pate verify FILE`` checks its chain (``pate_cli.budget``).
"""

from __future__ import annotations

from typing import Annotated

import typer

from pate_cli.cli.options import DeltaOpt, JsonOpt, QuietOpt, emit, error_line
from pate_cli.errors import ExitCode

app = typer.Typer(
    help="One privacy budget across releases: create it, and show what it spent.",
    no_args_is_help=True,
    context_settings={"help_option_names": ["-h", "--help"]},
    rich_markup_mode=None,
)

BudgetArg = Annotated[
    str,
    typer.Argument(metavar="BUDGET", help="The budget file (JSON lines).", show_default=False),
]


@app.command("init")
def init(
    budget_path: BudgetArg,
    delta: DeltaOpt,
    max_epsilon: Annotated[
        float,
        typer.Option("--max-epsilon", help="The limit of the total epsilon at --delta."),
    ],
    name: Annotated[
        str | None, typer.Option("--name", help="What the budget is for (free text).")
    ] = None,
    conversion: Annotated[
        str,
        typer.Option(
            "--conversion",
            help="RDP to (epsilon, delta) for a total that composes through RDP: classic or "
            "improved.",
        ),
    ] = "classic",
    force: Annotated[
        bool,
        typer.Option("--force", help="Start an existing budget again (its charges are lost)."),
    ] = False,
    as_json: JsonOpt = False,
    quiet: QuietOpt = False,
) -> None:
    """Create a budget file for one set of teachers' data.

    Every run given --budget FILE charges it: the budget's total, composed
    exactly across runs, never exceeds --max-epsilon at --delta.

    Example:

        pate budget init team.budget.jsonl --delta 1e-5 --max-epsilon 8 --name "MNIST teachers"
    """
    from pate_cli.budget import Budget
    from pate_cli.cli import render

    budget = Budget.init(
        budget_path,
        delta=delta,
        max_epsilon=max_epsilon,
        name=name,
        conversion=conversion,
        force=force,
    )
    emit(budget.to_dict(), render.render_budget(budget.to_dict()), (), as_json)


@app.command("show")
def show(
    budget_path: BudgetArg,
    max_epsilon: Annotated[
        float | None,
        typer.Option(
            "--max-epsilon",
            help="Exit 1 when the total is above this (a gate for a pipeline's last step).",
        ),
    ] = None,
    as_json: JsonOpt = False,
    quiet: QuietOpt = False,
) -> None:
    """Every charge of a budget and their total, composed exactly.

    Example:

        pate budget show team.budget.jsonl --max-epsilon 8
    """
    from pate_cli import checks
    from pate_cli.budget import Budget
    from pate_cli.cli import render

    checks.max_epsilon(max_epsilon)
    payload = Budget.open(budget_path).to_dict()
    spent = payload["total"]["epsilon"]
    passed = max_epsilon is None or spent <= max_epsilon
    if max_epsilon is not None:
        payload["gate"] = {"on": "total", "epsilon": spent, "limit": max_epsilon, "passed": passed}
    emit(payload, render.render_budget(payload), (), as_json)
    if not passed:
        error_line(
            f"pate: the budget's total epsilon {spent:.6g} exceeds --max-epsilon {max_epsilon:g}"
        )
        raise typer.Exit(int(ExitCode.BUDGET_EXCEEDED))

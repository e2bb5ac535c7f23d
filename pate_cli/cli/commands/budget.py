"""``pate budget init`` and ``pate budget show``: one privacy budget across releases.

``--budget FILE`` on ``analyze``, ``smooth-sensitivity`` and ``aggregate`` charges a run to
the file; ``pate verify FILE --records DIR`` audits it (``pate_cli.budget``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated

import typer

from pate_cli.cli.examples import examples
from pate_cli.cli.options import DeltaOpt, JsonOpt, QuietOpt, emit, error_line
from pate_cli.cli.suggestions import CloseSpellingGroup
from pate_cli.errors import ExitCode, UsageError

if TYPE_CHECKING:
    from pate_cli.budget import Budget, Preview

app = typer.Typer(
    cls=CloseSpellingGroup,
    help="One privacy budget across releases: create it, and show what it spent.",
    no_args_is_help=True,
    context_settings={"help_option_names": ["-h", "--help"]},
    rich_markup_mode=None,
)

BudgetArg = Annotated[
    str,
    typer.Argument(metavar="BUDGET", help="The budget file (JSON lines).", show_default=False),
]


@app.command(
    "init",
    **examples(
        'pate budget init team.budget.jsonl --delta 1e-5 --max-epsilon 8 --name "MNIST teachers"'
    ),
)
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
        typer.Option(
            "--force",
            help="Start an existing budget again; the old file is kept beside it, named by "
            "its head (BUDGET.<head12>.jsonl), never removed.",
        ),
    ] = False,
    as_json: JsonOpt = False,
    quiet: QuietOpt = False,
) -> None:
    """Create a budget file for one set of teachers' data.

    Every run given --budget FILE charges it: the budget's total, composed
    across runs the tightest sound way, never exceeds --max-epsilon at
    --delta. Publish the head that 'pate budget show' prints after each
    charge: 'pate verify FILE --head DIGEST' then shows whether the history
    before it was rewritten.
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
    payload = {**budget.to_dict(), "kept": budget.kept}
    emit(payload, render.render_budget(payload), (), as_json)


@app.command(
    "show",
    context_settings={"allow_extra_args": True, "ignore_unknown_options": True},
    **examples(
        "pate budget show team.budget.jsonl --max-epsilon 8",
        "pate budget show team.budget.jsonl --records .",
        "pate budget show team.budget.jsonl --would-charge -- aggregate sample_data/mnist_250_teachers.npy --threshold 200 --sigma1 150 --sigma 40 --queries 640 --delta 1e-5 --output labels.out.npy --budget team.budget.jsonl",
    ),
)
def show(
    ctx: typer.Context,
    budget_path: BudgetArg,
    max_epsilon: Annotated[
        float | None,
        typer.Option(
            "--max-epsilon",
            help="Exit 1 when the total is above this (a gate for a pipeline's last step).",
        ),
    ] = None,
    would_charge: Annotated[
        bool,
        typer.Option(
            "--would-charge",
            help="Followed by -- and a run's command line (aggregate, analyze or "
            "smooth-sensitivity with its --budget): the total that run would leave, nothing "
            "drawn or written; exit 4 when it would be refused over the limit, as the run "
            "would be.",
        ),
    ] = False,
    records: Annotated[
        list[str] | None,
        typer.Option(
            "--records",
            metavar="DIR",
            help="A folder of the budget's records, searched with its subfolders "
            "(repeatable): each charge with its record file, its own epsilon at the budget's "
            "delta and the running total, and the records no charge names.",
        ),
    ] = None,
    as_json: JsonOpt = False,
    quiet: QuietOpt = False,
) -> None:
    """Every charge of a budget, their total composed the tightest sound way, and the head
    to publish; with --records, which record is which charge.
    """
    from pate_cli.budget import Budget
    from pate_cli.cli import render
    from pate_cli.cli.render.common import fmt_bound
    from pate_cli.common import checks

    checks.max_epsilon(max_epsilon)
    budget = Budget.open(budget_path)
    payload = budget.to_dict()
    preview = _would_charge(ctx, budget) if would_charge else None
    if ctx.args and not would_charge:
        raise UsageError(
            f"unexpected {' '.join(ctx.args)!r}: a run's command line goes after --would-charge --"
        )
    spent = payload["total"]["epsilon"]
    passed = max_epsilon is None or spent <= max_epsilon
    if max_epsilon is not None:
        payload["gate"] = {"on": "total", "epsilon": spent, "limit": max_epsilon, "passed": passed}
    if preview is not None:
        payload["would_charge"] = preview.to_dict()
    if records:
        from pate_cli.budget.charge_map import charge_map

        rows, unnamed = charge_map(budget, records)
        payload["charges"] = [row.to_dict() for row in rows]
        payload["records_of_no_charge"] = [item.to_dict() for item in unnamed]
    emit(payload, render.render_budget(payload), (), as_json)
    if not passed:
        error_line(
            f"pate: the budget's total epsilon {fmt_bound(spent, 6, significant=True)} exceeds "
            f"--max-epsilon {max_epsilon:g}"
        )
        raise typer.Exit(int(ExitCode.BUDGET_EXCEEDED))
    if preview is not None and not preview.within_limit:
        error_line(
            "pate: the run would spend epsilon "
            f"{fmt_bound(preview.total.epsilon, 6, significant=True)} in all, over the "
            f"budget's limit {preview.limit:g}: it would be refused"
        )
        raise typer.Exit(int(ExitCode.CHARGE_REFUSED))


def _would_charge(ctx: typer.Context, budget: Budget) -> Preview:
    """What the run whose command line follows ``--would-charge --`` would leave of
    ``budget``: its votes read and its flags parsed as the run would, nothing drawn."""
    from pate_cli.budget.charges import charge_of, seed_file_commitment
    from pate_cli.cli.command_line import invocation_of

    invocation = invocation_of(ctx.find_root().command, list(ctx.args))
    call = invocation.call
    votes = call.selection.load()
    charge = charge_of(
        call.function.__name__,
        invocation.command,
        call.mechanism(),
        votes.num_queries,
        call.options,
        public_seed=call.seed is not None,
        seed_commitment=seed_file_commitment(call.seed_file),
    )
    return budget.preview_charge(charge)

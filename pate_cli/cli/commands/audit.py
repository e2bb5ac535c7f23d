"""``pate audit``: an empirical lower bound on a mechanism's epsilon from its own sampler.

The command checks its options, calls ``pate_cli.api.audit`` (``pate_cli.jobs.audit``),
prints the report as JSON or as a Rich table (``pate_cli.cli.render.audit``) and exits 1
when a claimed figure is below the lower bound: the implementation or its claim is wrong.
"""

from __future__ import annotations

from typing import Annotated, Any

import typer

from pate_cli.choices import TestFrom, VoteFormat
from pate_cli.cli.blocks import OUTPUT, OWN, command, mechanism_block, option
from pate_cli.cli.options import (
    DeltaOpt,
    FormatOpt,
    MemberOpt,
    NumClassesOpt,
    TeachersOpt,
    emit,
    progress_bar,
    show_progress,
)
from pate_cli.errors import ExitCode

AuditVotesArg = Annotated[
    str | None,
    typer.Argument(
        metavar="[VOTES]",
        help="Teacher votes to take the audited query from (--query); without them the "
        "mechanism is audited on the neighbouring pair its search finds.",
        show_default=False,
    ),
]
QueryOpt = Annotated[
    int | None, typer.Option("--query", help="The query of VOTES to audit (0-based).")
]
AuditQueriesOpt = Annotated[
    int, typer.Option("--queries", help="Queries composed in each run (the pair repeated).")
]
RunsOpt = Annotated[
    int, typer.Option("--runs", help="Runs of the mechanism on each side of the pair.")
]
AlphaOpt = Annotated[
    float,
    typer.Option("--alpha", help="The probability that the printed lower bound is wrong."),
]
ClaimOpt = Annotated[
    float | None,
    typer.Option("--claim", help="An epsilon someone claims for this mechanism and --queries."),
]
AuditSeedOpt = Annotated[
    int | None,
    typer.Option("--seed", help="A seed for a reproducible audit (default: OS entropy)."),
]
TestFromOpt = Annotated[
    TestFrom,
    typer.Option(
        "--test-from",
        help="Fix the pair and the test from the mechanism's stated law (law), or from "
        "held-out draws of its sampler (draws: for a sampler not trusted to follow its law).",
    ),
]
ClassesOpt = Annotated[
    int, typer.Option("--classes", help="Classes of the searched pair (without VOTES).")
]

READING = (
    option("fmt", FormatOpt, VoteFormat.AUTO),
    option("num_classes", NumClassesOpt),
    option("member", MemberOpt),
    option("teachers", TeachersOpt),
)
"""How VOTES is read (the audit takes one query of it, so no selection)."""

# The end of the help: each line one whole command (pate_cli.cli.examples).
EXAMPLES = (
    "pate audit --sigma 1 --delta 1e-5",
    "pate audit --sigma 2 --delta 1e-5 --queries 10 --claim 12",
    "pate audit sample_data/mnist_250_teachers.npy --query 0 --threshold 200 --sigma1 150 "
    "--sigma 40 --delta 1e-5 --runs 100000",
)


@command(OWN, mechanism_block(baseline=False), READING, OUTPUT)
def audit(
    ctx: typer.Context,
    delta: DeltaOpt,
    votes_path: AuditVotesArg = None,
    query: QueryOpt = None,
    queries: AuditQueriesOpt = 1,
    runs: RunsOpt = 1_000_000,
    alpha: AlphaOpt = 0.05,
    claim: ClaimOpt = None,
    seed: AuditSeedOpt = None,
    classes: ClassesOpt = 2,
    test_from: TestFromOpt = TestFrom.LAW,
) -> None:
    """Bound a mechanism's epsilon from below with the sampler that really runs.

    Runs the mechanism --runs times on each of two neighbouring vote
    histograms (its own sampler, as 'pate aggregate' runs it), counts how
    often the output falls in a set fixed in advance from the mechanism's
    stated law, and prints a Clopper-Pearson lower bound on epsilon at
    --delta that is wrong with probability at most --alpha. Beside it: the
    bound at the expected counts, a Gaussian-shaped estimate where the
    mechanism is Gaussian, and the upper figures claimed for the same pair
    and --queries (pate's own and --claim). Exit 1 when a claimed figure
    is below the lower bound: the implementation or its claim is wrong.
    """
    from pate_cli import api
    from pate_cli.cli.render.audit import render_audit
    from pate_cli.mechanisms import by_name, infer_mechanism
    from pate_cli.mechanisms.registry import declarations

    name = ctx.params["mechanism"]
    kind = by_name().get(name) if name is not None else None
    mechanism = infer_mechanism(
        name,
        {key: ctx.params.get(key) for key in declarations()},
        has_baseline=kind is not None and kind.needs_baseline,
    )
    read = {key: ctx.params[key] for key in ("num_classes", "member", "teachers")}
    as_json = ctx.params["as_json"]

    def progress(description: str, total: int) -> Any:
        enabled = show_progress(as_json, total * queries * max(classes, 2))
        return progress_bar(description, total, enabled=enabled)

    report = api.audit(
        mechanism,
        delta=delta,
        votes=votes_path,
        query=query,
        queries=queries,
        runs=runs,
        alpha=alpha,
        claim=claim,
        seed=seed,
        classes=classes,
        test_from=test_from,
        progress=progress,
        format=ctx.params["fmt"],
        **read,
    )
    emit(report.to_dict(), render_audit(report), report.warnings, as_json)
    if report.exceeds:
        raise typer.Exit(int(ExitCode.CLAIM_BELOW_AUDIT))

"""``pate verify``: recompute a release record and say, line by line, whether it holds."""

from __future__ import annotations

from functools import partial
from typing import Annotated

import typer

from pate_cli.cli.options import JsonOpt, QuietOpt, emit
from pate_cli.errors import ExitCode, UsageError

# Options of this command alone (the shared ones are in ``pate_cli.cli.options``).
RecordArg = Annotated[
    str,
    typer.Argument(metavar="RECORD", help="A record written by --record.", show_default=False),
]
VerifyVotesOpt = Annotated[
    list[str] | None,
    typer.Option(
        "--votes",
        metavar="FILE",
        help="The votes file, when it is not where the record says. With a budget file: the "
        "votes its records are replayed from (repeatable: each record takes the file whose "
        "SHA-256 it holds), so that its charges are the runs' own.",
    ),
]
InputOpt = Annotated[
    list[str] | None,
    typer.Option(
        "--input",
        help="Another input that moved, as ROLE=PATH (roles: indices, baseline, answered, "
        "student_probs, true_labels).",
    ),
]
ReplaySeedFileOpt = Annotated[
    str | None,
    typer.Option(
        "--seed-file",
        metavar="FILE",
        help="The run's seed file: replays its random sample (labels, answered mask, "
        "released epsilon), which must then match; a file that is not the run's fails the "
        "check (exit 1).",
    ),
]
RecordOpeningOpt = Annotated[
    str | None,
    typer.Option(
        "--opening",
        metavar="FILE",
        help="A public record's opening (written beside it): checks that the votes and the "
        "seed file given are the ones the run used; without it that binding is not checked.",
    ),
]
AllowUncheckedOpt = Annotated[
    bool,
    typer.Option(
        "--allow-unchecked",
        help="Exit 0, not 3, when nothing differs but something could not be checked "
        "(for a pipeline that accepts an unreplayed sample on purpose).",
    ),
]
RecordsDirOpt = Annotated[
    list[str] | None,
    typer.Option(
        "--records",
        metavar="DIR",
        help="With a budget file: a folder of its runs' records, searched with its "
        "subfolders (repeatable): each charge is recomputed from its record, and each record "
        "naming the budget must have its line. Without it a budget is never fully verified.",
    ),
]
PublishedRecordsOpt = Annotated[
    list[str] | None,
    typer.Option(
        "--published-records",
        metavar="DIR",
        help="With a budget file: a folder of records published outside the owner's reach "
        "(a CI's artifacts; repeatable): read as --records, and each pins its charge and "
        "every one before it, as the head it holds.",
    ),
]
HeadOpt = Annotated[
    list[str] | None,
    typer.Option(
        "--head",
        metavar="DIGEST",
        help="With a budget file: a head published earlier ('pate budget show' prints it; "
        "repeatable): the chain must still pass through it, so history before it was not "
        "rewritten.",
    ),
]
VerifyBudgetOpt = Annotated[
    str | None,
    typer.Option(
        "--budget",
        metavar="FILE",
        help="With a record charged to a budget: the budget file, when it is not where the "
        "record says (its charge is recomputed from the record and compared with its line).",
    ),
]
RtolOpt = Annotated[
    float | None,
    typer.Option(
        "--rtol",
        help="Relative tolerance for recomputed numbers (default: 1e-12 when the record "
        "was made with the same versions, else 1e-9; 0 asks for exact equality).",
    ),
]


def _overrides(votes: str | None, inputs: list[str]) -> dict[str, str]:
    found = {} if votes is None else {"votes": votes}
    for item in inputs:
        role, eq, path = item.partition("=")
        if not eq or not role or not path:
            raise UsageError(f"--input {item!r}: expected ROLE=PATH, e.g. indices=indices.npy")
        found[role] = path
    return found


# The end of the help: each line one whole command (pate_cli.cli.examples).
EXAMPLES = ("pate verify sample_data/mnist_table2.record.json",)


def verify(
    ctx: typer.Context,
    record_path: RecordArg,
    votes: VerifyVotesOpt = None,
    inputs: InputOpt = None,
    seed_file: ReplaySeedFileOpt = None,
    opening: RecordOpeningOpt = None,
    allow_unchecked: AllowUncheckedOpt = False,
    records: RecordsDirOpt = None,
    published_records: PublishedRecordsOpt = None,
    heads: HeadOpt = None,
    budget: VerifyBudgetOpt = None,
    rtol: RtolOpt = None,
    as_json: JsonOpt = False,
    quiet: QuietOpt = False,
) -> None:
    """Recompute a release record from its files and check every number in it (or audit a
    budget file against its records and published heads).

    Re-parses the recorded command line and checks that it is the recorded
    call, checks the sha256 of the votes and every other input against the
    record, replays the recorded library call (labels go to a scratch
    folder), compares every number of the recorded report with the
    recomputed one, the C5/C6 conditions, and that the data-independent
    bound is above the data-dependent one: the recorded numbers follow from
    these files and this call under this pate version. The digest only
    detects an accidental change: anyone can recompute it. The random sample
    (released epsilon, labels, answered mask) is replayed and must match
    with --seed-file, or from the seed of a --seed run; otherwise a line says
    it is not re-derivable, and it is not compared. A public record (written
    with --public --record) is checked on its publishable figures. Exit 0
    when all hold, 1 when anything differs, 2 when the record or a file
    cannot be used, 3 when nothing differs but something could not be
    checked. Given a budget file, each charge is recomputed from the record
    it names (--records DIR, searched with its subfolders), every record
    naming the budget must have its line, the chain must pass through every
    --head published earlier, and the total must be within the limit; each
    charge must be pinned by a published head or record, or its record
    replayed from its votes (--votes), else it rests on the owner's files and
    the budget is not fully verified (exit 3); without --records it never
    is.
    """
    from pate_cli.api.replay import replay
    from pate_cli.cli import command_line, render
    from pate_cli.jobs.verification import verify_file

    report = verify_file(
        record_path,
        replay=replay,
        overrides=_overrides(None, inputs or []),
        votes=tuple(votes or ()),
        seed_file=seed_file,
        opening=opening,
        records=tuple(records or ()),
        published=tuple(published_records or ()),
        heads=tuple(heads or ()),
        budget=budget,
        rtol=rtol,
        command_line=partial(command_line.mismatches, ctx.find_root().command),
    )
    emit(report.to_dict(), render.render_verify(report), (), as_json)
    if report.verdict == "differs":
        raise typer.Exit(int(ExitCode.BUDGET_EXCEEDED))
    if report.verdict == "incomplete" and not allow_unchecked:
        raise typer.Exit(int(ExitCode.NOT_CHECKED))

"""Options shared by the commands, and the small helpers every command uses.

Each option is an ``Annotated`` alias defined once, so that the commands spell
and document a flag the same way (the Typer form of sqlite-utils'
``output_options``).
"""

from __future__ import annotations

import io
import os
import sys
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager
from contextvars import ContextVar
from typing import TYPE_CHECKING, Annotated, Any

import typer

from pate_cli.choices import Conversion, Engine, GateOn, TableGateOn, ThresholdBound, VoteFormat
from pate_cli.common import checks
from pate_cli.errors import ExitCode
from pate_cli.mechanisms import by_name, registered

if TYPE_CHECKING:  # the rest loads when a command runs, not when the app starts
    from rich.console import Console

    from pate_cli.jobs.analysis import Progress
    from pate_cli.reports.publishable import Gate
    from pate_cli.votes import Votes

# The command line of the run in progress (after ``pate``), set by the CLI group as it
# parses it; --record stores it, and verify checks it against the recorded call.
ARGV: ContextVar[tuple[str, ...]] = ContextVar("pate_argv", default=())
QUIET: ContextVar[bool] = ContextVar("pate_quiet", default=False)


def _set_quiet(value: bool) -> bool:
    QUIET.set(value)
    return value


def current_argv() -> list[str]:
    """The command line of this run (after ``pate``), as the user gave it."""
    return list(ARGV.get())


#: A ``COLUMNS`` below this is not a width a table can be read at: it is ignored.
MIN_COLUMNS = 20
#: The width of text off a terminal without COLUMNS: wide enough that nothing wraps.
UNWRAPPED = 10_000


class StreamError(Exception):
    """stdout or stderr cannot be written (a full disk, a closed pipe): exit 74."""


def error_line(message: str) -> None:
    """Write one line to stderr, whatever newlines the message carries; a stderr that cannot
    be written is given up on (the exit code still says how the run went)."""
    try:
        sys.stderr.write(" ".join(message.split()) + "\n")
        sys.stderr.flush()
    except (OSError, ValueError):
        pass


# Shared options, defined once and reused by every command.
VotesArg = Annotated[
    str,
    typer.Argument(
        metavar="VOTES",
        help="Teacher votes: .npy (or .npz with one array) of counts (queries x classes), "
        "labels (teachers x queries) or probs (teachers x queries x classes); or counts saved "
        "with scipy.sparse.save_npz.",
        show_default=False,
    ),
]
FormatOpt = Annotated[
    VoteFormat, typer.Option("--format", help="Vote format; auto detects and says what it found.")
]
NumClassesOpt = Annotated[
    int | None, typer.Option("--num-classes", help="Class count for labels input.")
]
MemberOpt = Annotated[
    str | None,
    typer.Option(
        "--member",
        help="The array of an .npz VOTES file to read (its numpy.savez name), when it holds "
        "several.",
    ),
]
CandidatesOpt = Annotated[
    str | None,
    typer.Option(
        "--candidates",
        help="Each query's candidates, chosen without the private votes: an .npy of one "
        "count n per query (a 1-D array: its classes are 0 .. n-1), or of its candidate token "
        "ids (a 2-D array, queries x k, -1 padding; or a scipy.sparse .npz, queries x "
        "vocabulary, whose non-zeros mark them: votes for other tokens are dropped and "
        "aggregate writes token ids).",
    ),
]
TeachersOpt = Annotated[
    int | None,
    typer.Option(
        "--teachers",
        help="Number of teachers M (default: from the data); for labels, picks the layout "
        "of M teachers.",
    ),
]
QueriesOpt = Annotated[int | None, typer.Option("--queries", help="Keep the first N queries.")]
IndicesOpt = Annotated[
    str | None,
    typer.Option(
        "--indices", help=".npy of query indices to keep, in order (applied before --queries)."
    ),
]


def mechanism_name(value: str | None) -> str | None:
    """A registered mechanism's name (``--mechanism``), checked at parse time."""
    return None if value is None else registered(value).name


def mechanism_choices() -> str:
    """The names --mechanism accepts (every registered one), as a choice's metavar."""
    return f"[{'|'.join(by_name())}]"


BaselineOpt = Annotated[
    str | None,
    typer.Option(
        "--baseline",
        help="Interactive-GNMax baseline (queries x classes): M times the student's "
        "probabilities, or probabilities (rows summing to 1), which are scaled by M.",
    ),
]
DeltaOpt = Annotated[
    float, typer.Option("--delta", help="Target delta of the (epsilon, delta) guarantee.")
]
OrdersOpt = Annotated[
    str | None,
    typer.Option(
        "--orders",
        help="Renyi orders: a comma list or start:stop:step (stop excluded). "
        "Default: 1.1, 1.25, 1.5, 1.75, then the 2018 reference's 298 orders from 2 to 500.",
    ),
]
ConversionOpt = Annotated[
    Conversion,
    typer.Option(
        "--conversion",
        help="RDP to (epsilon, delta): classic (the 2018 paper) or improved (Balle et al. 2020).",
    ),
]
DataIndependentOpt = Annotated[
    bool, typer.Option("--data-independent", help="Force data-independent bounds.")
]
AnsweredOpt = Annotated[
    str | None,
    typer.Option(
        "--answered",
        help="Boolean mask of answered queries written by 'pate aggregate': "
        "account the realised run.",
    ),
]
MaxEpsilonOpt = Annotated[
    float | None,
    typer.Option(
        "--max-epsilon",
        help="Exit 1 after printing if the gated epsilon exceeds this (a finite number >= 0).",
        callback=checks.max_epsilon,
    ),
]
_GATE_HELP = (
    "Which epsilon --max-epsilon checks (default: {default}). publishable: the smallest "
    "publishable figure not drawn at random (the smallest of the exact data-independent "
    "figure, every query answered, and the RDP data-independent or worst-case bound); "
    "data-dependent and data-independent may depend on the votes; worst-case: every query "
    "answered{released}."
)
GateOnOpt = Annotated[
    GateOn,
    typer.Option(
        "--gate-on",
        help=_GATE_HELP.format(
            default="publishable", released="; released: the expected GNSS-released epsilon"
        ),
    ),
]
ReleaseGateOnOpt = Annotated[
    GateOn | None,
    typer.Option(
        "--gate-on",
        help=_GATE_HELP.format(
            default="publishable",
            released="; released: the expected GNSS-released epsilon (depends on the votes)",
        ),
        show_default=False,
    ),
]
TableGateOnOpt = Annotated[
    TableGateOn,
    typer.Option("--gate-on", help=_GATE_HELP.format(default="publishable", released="")),
]
ThresholdBoundOpt = Annotated[
    ThresholdBound,
    typer.Option(
        "--threshold-bound",
        help="The threshold step's data-dependent RDP: theorem6 (the 2018 paper, the default) "
        "or exact (the divergence of its two outcomes, maximised over the neighbours; the "
        "release's sensitivity table follows).",
    ),
]
PublicOpt = Annotated[
    bool,
    typer.Option(
        "--public",
        help="Print only the figures that may be published (and the gate, if it checks one); "
        "nothing else derived from the votes.",
    ),
]
HalfEvenOpt = Annotated[
    bool,
    typer.Option(
        "--round-half-even",
        help="Round the threshold statistic half to even as the 2018 reference does "
        "(default: half up, which keeps its sensitivity at 1; differs only at exact halves of "
        "votes - baseline, where every figure then accounts a move of 2).",
    ),
]
JsonOpt = Annotated[
    bool, typer.Option("--json", help="Print one JSON object on stdout, nothing else.")
]
QuietOpt = Annotated[
    bool,
    typer.Option(
        "--quiet",
        "-q",
        help="Print no text for people and no warning, only errors (and the gate's line); "
        "with --json the JSON is still printed. The exit code says how it went.",
        callback=_set_quiet,
        is_eager=True,
    ),
]


def rendered(payload: dict[str, Any], renderable: Any, as_json: bool) -> str:
    """The text of a report as ``emit`` prints it: its JSON through the one encoder,
    ``encoding.dumps`` (byte for byte ``json.dumps(report.to_dict())``), or its Rich view."""
    from rich.console import Console

    from pate_cli.reports.encoding import dumps

    if as_json:
        return dumps(payload) + "\n"
    console = Console(highlight=False)
    if not console.is_terminal and "COLUMNS" not in os.environ:
        # Off a terminal (a pipe, a CI log) nothing is wrapped: tables take their natural
        # width and every line of text stays one line, for grep. COLUMNS still sets a width.
        console = Console(highlight=False, width=UNWRAPPED)
    # Rendered in memory as stdout would show it, never through stdout: Rich's capture
    # flushes its console's file, and a full stdout would then fail the run before its commit
    # in text and after it with --json. Now only ``emit`` writes stdout, after the commit.
    console = Console(
        file=io.StringIO(),
        highlight=False,
        force_terminal=console.is_terminal,
        width=console.width,
    )
    with console.capture() as capture:
        console.print(renderable)
    text = capture.get()
    if console.is_terminal:
        return text
    return "".join(line.rstrip() + "\n" for line in text.splitlines())  # no padding, for grep


def emit(
    payload: dict[str, Any],
    renderable: Any,
    warnings: tuple[str, ...],
    as_json: bool,
    text: str | None = None,
) -> None:
    """The report on stdout (``text``, when already rendered), and its warnings on stderr.

    Raises:
        StreamError: stdout cannot be written.
    """
    if QUIET.get() and not as_json:
        return  # quiet silences the text for people; --json is for a pipeline, and stays
    if text is None:
        text = rendered(payload, renderable, as_json)
    try:
        sys.stdout.write(text)  # with --json the warnings are in the payload too
        sys.stdout.flush()
    except (OSError, ValueError) as error:
        reason = getattr(error, "strerror", None) or str(error)
        raise StreamError(f"cannot write the report to stdout ({reason})") from None
    if not QUIET.get():
        warn(warnings)  # with --json they are in the JSON too


def warn(warnings: tuple[str, ...] | list[str]) -> None:
    """Each warning on stderr: yellow on a terminal, else one unwrapped line (for grep)."""
    from rich.console import Console

    err = Console(stderr=True, highlight=False)
    for warning in warnings:
        if err.is_terminal:
            err.print(f"warning: {warning}", style="yellow")
        else:
            error_line(f"warning: {warning}")


def enforce(gate: Gate | None) -> None:
    """The budget gate: after printing, exit 1 when the gated epsilon exceeds the budget."""
    if gate is None or gate.passed:
        return
    error_line(f"pate: {gate.message}")
    raise typer.Exit(int(ExitCode.BUDGET_EXCEEDED))


def cli_progress(votes: Votes, as_json: bool) -> Progress:
    """Progress for the library's long passes: a Rich bar on stderr, for people only."""

    def factory(description: str, total: int) -> AbstractContextManager[Any]:
        width = (
            votes.num_classes
            if description == "accounting"
            else max(votes.num_teachers, votes.num_classes)
        )
        return progress_bar(description, total, enabled=show_progress(as_json, total * width))

    return factory


EngineOpt = Annotated[
    Engine,
    typer.Option(
        "--engine",
        help="Where the passes over the queries run: in this process (local), or on a Dask "
        "cluster (dask; needs the 'dask' extra). The figures and the labels are the same.",
    ),
]
WorkersOpt = Annotated[
    int | None,
    typer.Option("--workers", help="--engine dask: local worker processes (default: one a CPU)."),
]
SchedulerOpt = Annotated[
    str | None,
    typer.Option(
        "--scheduler",
        help="--engine dask: a running cluster's scheduler (tcp://HOST:PORT), not a local one.",
    ),
]


BetaOpt = Annotated[
    float | None,
    typer.Option(
        "--beta",
        help="Fix the smoothness beta of the release "
        "(default: the reference's choice on the data).",
        callback=checks.beta,
    ),
]
SigmaSsOpt = Annotated[
    float | None,
    typer.Option(
        "--sigma-ss",
        help="Fix the GNSS noise multiplier sigma_ss "
        "(default: the reference's choice on the data).",
        callback=checks.sigma_ss,
    ),
]
SeedOpt = Annotated[
    int | None,
    typer.Option(
        "--seed",
        help="Public seed of the noise, for experiments: the outputs are then not a private "
        "release (the report says so). Default: OS entropy, never written anywhere.",
        callback=checks.seed,
    ),
]
SeedFileOpt = Annotated[
    str | None,
    typer.Option(
        "--seed-file",
        metavar="FILE",
        help="Keep the noise reproducible and private: the seed is read from FILE, or a fresh "
        "one written there (mode 0600) when it does not exist; a record holds only a "
        "commitment to it, and 'pate verify --seed-file FILE' replays the random outputs.",
    ),
]
SkipConditionsOpt = Annotated[
    bool,
    typer.Option(
        "--skip-conditions",
        help="Compute the release even where conditions C5/C6 fail (the output says so).",
    ),
]
StrictOpt = Annotated[
    bool,
    typer.Option(
        "--strict-local-sensitivity/--reference-local-sensitivity",
        help="Local-sensitivity bounds: strict (the default) bounds the change of the "
        "published per-query cost over every histogram within each distance, Pr[answered] "
        "weight included; --reference-local-sensitivity reproduces the 2018 reference's "
        "bounds (Algorithms 3-5 on its beta(q), the answer step weighted at the votes, the "
        "threshold step's largest distances left at 0), which can understate the smooth "
        "sensitivity.",
    ),
]

WalkOpt = Annotated[
    bool,
    typer.Option(
        "--walk-local-sensitivity",
        help="The GNMax family's local sensitivity from the exact walk of every distinct "
        "vote histogram (Algorithm 4), instead of the default bound tabulated over cells of "
        "log q, which is never below it and a few hundredths of a percent above it on real "
        "votes, and faster on large files. Both are sound; the walk is the tighter.",
    ),
]


RecordOpt = Annotated[
    str | None,
    typer.Option(
        "--record",
        help="Also write a release record (.json): the report, the library call, the sha256 "
        "of every file and where the noise came from (never a private seed), for 'pate verify'. "
        "A private record (it holds figures computed from the votes); with --public, a public "
        "record of the publishable figures only.",
    ),
]
BudgetOpt = Annotated[
    str | None,
    typer.Option(
        "--budget",
        metavar="FILE",
        help="Charge this run to a budget file ('pate budget init'): its account, which "
        "depends on no vote and no noise, is composed with the earlier charges before any "
        "noise is drawn and again before any file is written; over the limit, exit 4 and "
        "nothing written or charged.",
    ),
]
OpeningOpt = Annotated[
    str | None,
    typer.Option(
        "--opening",
        metavar="FILE",
        help="Where a public record's opening goes (.json, mode 0600; default: beside the "
        "record, NAME.opening.json): the salts of its commitments to the votes and the seed "
        "file, which 'pate verify --opening' needs to check them. Keep it with the votes.",
    ),
]
ForceOpt = Annotated[
    bool,
    typer.Option(
        "--force",
        help="Replace existing files of the run (--record and its opening; aggregate's "
        "--output and --answered-output; analyze's --ledger and --plot). Without it an "
        "existing one is exit 2 before any work: a second release spends the privacy budget "
        "again, and with it the run warns that it did.",
    ),
]


# Work (queries x classes, or queries x teachers for sensitivities) below which a bar
# would only flash: about half a second on a laptop core.
PROGRESS_MIN_WORK = 2_000_000


def show_progress(as_json: bool, work: int) -> bool:
    """A progress bar only for people: never with --json, never into a pipe or a log."""
    return not as_json and not QUIET.get() and sys.stderr.isatty() and work >= PROGRESS_MIN_WORK


@contextmanager
def progress_bar(
    description: str, total: int, *, enabled: bool, console: Console | None = None
) -> Iterator[Callable[[int], None] | None]:
    """A transient Rich bar on stderr; yields ``advance(n)``, or None when disabled."""
    if not enabled:
        yield None
        return
    from rich.console import Console
    from rich.progress import BarColumn, MofNCompleteColumn, TextColumn, TimeRemainingColumn
    from rich.progress import Progress as RichProgress

    columns = (
        TextColumn("{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeRemainingColumn(),
    )
    target = console if console is not None else Console(stderr=True)
    with RichProgress(*columns, console=target, transient=True) as bar:
        task = bar.add_task(description, total=total)
        yield lambda done: bar.advance(task, done)


PldOpt = Annotated[
    str | None,
    typer.Option(
        "--pld",
        help="Add the data-dependent epsilon from privacy-loss distributions (GNMax, "
        "Confident-GNMax): each query's pair from its q bounds, or with 'exact' its exact "
        "worst-neighbour pair (at most 20 classes). Private, like every data-dependent figure.",
    ),
]


# Options whose value may be left out: the value they take then, and the values they read.
_SHELLS = ("bash", "zsh", "fish", "powershell", "pwsh")
_OPTIONAL_VALUES = {
    "--pld": ("q-bound", ("exact", "q-bound")),
    # "": the current shell (pate_cli.cli.app._completion)
    "--install-completion": ("", _SHELLS),
    "--show-completion": ("", _SHELLS),
}


def with_optional_values(args: list[str]) -> list[str]:
    """``args`` with each option of an optional value given its default where none follows
    (``--pld --json`` reads as ``--pld=q-bound --json``): the parser would take the next
    word as the value whatever it is."""
    out: list[str] = []
    for index, word in enumerate(args):
        if word in _OPTIONAL_VALUES:
            default, values = _OPTIONAL_VALUES[word]
            following = args[index + 1] if index + 1 < len(args) else None
            if following not in values:
                out.append(f"{word}={default}")
                continue
        out.append(word)
    return out

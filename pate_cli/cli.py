"""The ``pate`` command line: thin commands, shared options, one error boundary.

Each command loads and validates its inputs, calls ``accounting`` (and the
other library layers), builds a report, emits it as JSON or Rich tables, and
applies the budget gate. Only this module decides exit codes.
"""

from __future__ import annotations

import os
import sys
import traceback
from enum import Enum
from typing import Annotated, Any, Optional

import typer
from rich.console import Console
from typer.core import TyperGroup

from pate_cli import __version__
from pate_cli.accounting import Conversion, account, epsilon_result
from pate_cli.errors import ExitCode, PateError, UsageError
from pate_cli.mechanisms import MechanismName, infer_mechanism
from pate_cli.orders import parse_orders
from pate_cli.report import AnalysisReport, InputSummary, dumps
from pate_cli import render
try:  # typer >= 0.29 carries its own copy of click
    from typer._click.exceptions import UsageError as ClickUsageError
except ImportError:  # pragma: no cover - older typer on top of click
    from click import UsageError as ClickUsageError

from pate_cli.votes import (
    VoteFormat,
    Votes,
    load_answered_mask,
    load_baseline,
    load_votes,
)


class PateGroup(TyperGroup):
    """The single error boundary: typed errors -> one line and their exit code."""

    def invoke(self, ctx: Any) -> Any:
        try:
            return super().invoke(ctx)
        except (typer.Exit, typer.Abort):
            raise
        except PateError as error:
            if os.environ.get("PATE_DEBUG"):
                raise
            _error_line(f"pate: error: {error.message}")
            raise typer.Exit(int(error.exit_code)) from None
        except ClickUsageError as error:
            # Click's own parse errors, kept on one line; still exit 2.
            command = f"pate {ctx.invoked_subcommand} --help" if ctx.invoked_subcommand else "pate --help"
            _error_line(f"pate: error: {error.format_message()} (see '{command}')")
            raise typer.Exit(int(ExitCode.BAD_INPUT)) from None
        except KeyboardInterrupt:
            _error_line("pate: interrupted")
            raise typer.Exit(int(ExitCode.INTERRUPTED)) from None
        except Exception:
            if os.environ.get("PATE_DEBUG"):
                raise
            sys.stderr.write(traceback.format_exc())
            _error_line(
                "pate: internal error: this is a bug in pate, please report it "
                "with the traceback above and the command you ran"
            )
            raise typer.Exit(int(ExitCode.INTERNAL)) from None


def _error_line(message: str) -> None:
    sys.stderr.write(" ".join(message.split()) + "\n")


app = typer.Typer(
    cls=PateGroup,
    name="pate",
    help="Privacy analysis for PATE (Private Aggregation of Teacher Ensembles).\n\n"
    "Reads saved teacher votes (.npy/.npz) and reports Renyi-DP and (epsilon, delta) "
    "costs, smooth-sensitivity releases, noisy labels and comparisons. "
    "Exit codes: 0 ok, 1 budget exceeded (--max-epsilon), 2 bad input or usage, 70 a bug.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_show_locals=False,
    rich_markup_mode=None,
)


def _version(value: bool) -> None:
    if value:
        typer.echo(f"pate {__version__}")
        raise typer.Exit()


@app.callback()
def _root(
    version: Annotated[
        Optional[bool],
        typer.Option("--version", callback=_version, is_eager=True, help="Show the version and exit."),
    ] = None,
) -> None:
    """Privacy analysis for PATE (Private Aggregation of Teacher Ensembles)."""


class GateOn(str, Enum):
    """Which epsilon the --max-epsilon gate compares."""

    DATA_DEPENDENT = "data-dependent"
    DATA_INDEPENDENT = "data-independent"
    RELEASED = "released"


# Shared options, defined once and reused by every command.
VotesArg = Annotated[
    str,
    typer.Argument(
        metavar="VOTES",
        help="Teacher votes: .npy (or .npz with one array) of counts (queries x classes), "
        "labels (teachers x queries) or probs (teachers x queries x classes).",
        show_default=False,
    ),
]
FormatOpt = Annotated[
    VoteFormat, typer.Option("--format", help="Vote format; auto detects and says what it found.")
]
NumClassesOpt = Annotated[
    Optional[int], typer.Option("--num-classes", help="Class count for labels input.")
]
TeachersOpt = Annotated[
    Optional[int],
    typer.Option("--teachers", help="Number of teachers M (default: from the data)."),
]
QueriesOpt = Annotated[Optional[int], typer.Option("--queries", help="Keep the first N queries.")]
IndicesOpt = Annotated[
    Optional[str],
    typer.Option("--indices", help=".npy of query indices to keep, in order (applied before --queries)."),
]
MechanismOpt = Annotated[
    Optional[MechanismName],
    typer.Option("--mechanism", help="Aggregator; inferred from the flags when omitted."),
]
SigmaOpt = Annotated[
    Optional[float], typer.Option("--sigma", "--sigma2", help="GNMax noise std (sigma2 of Confident-GNMax).")
]
ThresholdOpt = Annotated[
    Optional[float], typer.Option("--threshold", help="Confident-GNMax threshold T.")
]
Sigma1Opt = Annotated[
    Optional[float], typer.Option("--sigma1", help="Noise std of the threshold step.")
]
GammaOpt = Annotated[
    Optional[float], typer.Option("--gamma", help="LNMax: Laplace noise of scale 1/gamma (2017 noise_eps).")
]
BaselineOpt = Annotated[
    Optional[str],
    typer.Option(
        "--baseline",
        help="Interactive-GNMax baseline (queries x classes): M times the student's "
        "probabilities, or probabilities (rows summing to 1), which are scaled by M.",
    ),
]
DeltaOpt = Annotated[float, typer.Option("--delta", help="Target delta of the (epsilon, delta) guarantee.")]
OrdersOpt = Annotated[
    Optional[str],
    typer.Option(
        "--orders",
        help="Renyi orders: a comma list or start:stop:step (stop excluded). "
        "Default: the 2018 reference's 298 orders from 2 to 500.",
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
    Optional[str],
    typer.Option(
        "--answered",
        help="Boolean mask of answered queries written by 'pate aggregate': account the realised run.",
    ),
]
MaxEpsilonOpt = Annotated[
    Optional[float],
    typer.Option("--max-epsilon", help="Exit 1 after printing if the gated epsilon exceeds this."),
]
GateOnOpt = Annotated[
    Optional[GateOn], typer.Option("--gate-on", help="Which epsilon --max-epsilon checks.")
]
HalfEvenOpt = Annotated[
    bool,
    typer.Option(
        "--round-half-even",
        help="Round the threshold statistic half to even as the 2018 reference does "
        "(default: half up, which keeps its sensitivity at 1; differs only at exact halves).",
    ),
]
JsonOpt = Annotated[bool, typer.Option("--json", help="Print one JSON object on stdout, nothing else.")]


def _check_delta(delta: float) -> None:
    if not 0 < delta < 1:
        raise UsageError(f"--delta {delta}: expected a number strictly between 0 and 1")


def _summary(votes: Votes) -> InputSummary:
    return InputSummary(
        path=votes.path,
        sha256=votes.sha256,
        format=votes.format.value,
        detected=votes.detected,
        num_queries=votes.num_queries,
        num_teachers=votes.num_teachers,
        num_classes=votes.num_classes,
        num_file_queries=votes.num_file_queries,
    )


def _emit(payload: dict[str, Any], renderable: Any, warnings: tuple[str, ...], as_json: bool) -> None:
    if as_json:
        typer.echo(dumps(payload))
        return
    Console(highlight=False).print(renderable)
    err = Console(stderr=True, highlight=False)
    for warning in warnings:
        err.print(f"warning: {warning}", style="yellow")


def _gate(epsilon: float, max_epsilon: float | None, which: GateOn) -> None:
    if max_epsilon is None:
        return
    if not epsilon <= max_epsilon:
        _error_line(f"pate: {which.value} epsilon {epsilon:.6g} exceeds --max-epsilon {max_epsilon:g}")
        raise typer.Exit(int(ExitCode.BUDGET_EXCEEDED))


@app.command()
def analyze(
    votes_path: VotesArg,
    delta: DeltaOpt,
    mechanism: MechanismOpt = None,
    sigma: SigmaOpt = None,
    threshold: ThresholdOpt = None,
    sigma1: Sigma1Opt = None,
    gamma: GammaOpt = None,
    baseline_path: BaselineOpt = None,
    orders_text: OrdersOpt = None,
    conversion: ConversionOpt = Conversion.CLASSIC,
    data_independent: DataIndependentOpt = False,
    answered_path: AnsweredOpt = None,
    half_even: HalfEvenOpt = False,
    fmt: FormatOpt = VoteFormat.AUTO,
    num_classes: NumClassesOpt = None,
    teachers: TeachersOpt = None,
    queries: QueriesOpt = None,
    indices: IndicesOpt = None,
    all_orders: Annotated[
        bool, typer.Option("--all-orders", help="Show every order, not only those near the optimum.")
    ] = False,
    max_epsilon: MaxEpsilonOpt = None,
    gate_on: GateOnOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """Data-dependent and data-independent privacy cost of answering the queries.

    Reports Renyi DP per order and (epsilon, delta) at the best order for
    GNMax, Confident-GNMax, Interactive-GNMax or LNMax, and the expected number
    of queries answered. With --answered, the realised run of 'pate aggregate'.

    Example:

        pate analyze sample_data/mnist_250_teachers.npy --threshold 200 --sigma1 150 --sigma 40 --queries 640 --delta 1e-5
    """
    _check_delta(delta)
    votes = load_votes(
        votes_path, fmt=fmt, num_classes=num_classes, teachers=teachers, queries=queries, indices=indices
    )
    chosen = infer_mechanism(
        mechanism,
        sigma=sigma,
        threshold=threshold,
        sigma1=sigma1,
        gamma=gamma,
        has_baseline=baseline_path is not None,
    )
    orders = parse_orders(orders_text)
    baseline = load_baseline(baseline_path, votes) if baseline_path is not None else None
    answered = (
        load_answered_mask(answered_path, votes.num_queries) if answered_path is not None else None
    )
    result = account(
        votes.counts,
        chosen,
        orders,
        baseline=baseline,
        answered=answered,
        data_independent=data_independent,
        half_even=half_even,
    )
    dependent = epsilon_result(orders, result.data_dependent, delta, conversion)
    independent = epsilon_result(orders, result.data_independent, delta, conversion)
    warnings = list(votes.warnings)
    if dependent.at_grid_edge:
        warnings.append(
            f"the best order {dependent.order:g} is at the edge of the order grid; "
            "extend --orders to be sure the minimum is inside it"
        )
    report = AnalysisReport(
        input=_summary(votes),
        mechanism=chosen.to_json_dict(),
        delta=delta,
        conversion=conversion.value,
        orders=orders,
        realized=result.realized,
        forced_data_independent=data_independent,
        expected_answered=result.expected_answered,
        num_queries_seen=result.num_queries_seen,
        data_dependent=dependent,
        data_independent=independent,
        warnings=tuple(warnings),
    )
    _emit(report.to_json_dict(), render.analysis(report, all_orders=all_orders), report.warnings, as_json)
    which = gate_on or GateOn.DATA_DEPENDENT
    if which is GateOn.RELEASED:
        raise UsageError("--gate-on released needs the smooth-sensitivity release")
    _gate(dependent.epsilon if which is GateOn.DATA_DEPENDENT else independent.epsilon, max_epsilon, which)


def main() -> None:
    """Console-script entry point."""
    app(prog_name="pate")

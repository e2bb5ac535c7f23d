"""``pate aggregate``: run an aggregator, write the labels, account the realised run.

The command checks its flags before it reads any file, calls :func:`pate_cli.api.aggregate`,
writes the labels and the answered mask (atomically, only once the run succeeded and only
within budget), prints the report and applies the budget gate (``pate_cli.cli.run``).
"""

from __future__ import annotations

from collections.abc import Callable
from functools import partial
from typing import TYPE_CHECKING, Annotated, Any

import typer

from pate_cli.choices import TableGateOn
from pate_cli.cli.blocks import command, gate, mechanism_block, runs
from pate_cli.cli.options import DeltaOpt, TableGateOnOpt, VotesArg

if TYPE_CHECKING:
    from pate_cli.cli.run import Invocation, Output, Params

# Options of this command alone (the shared ones are in ``pate_cli.cli.options``).
OutputOpt = Annotated[
    str, typer.Option("--output", help="Where to write the labels (.npy, int64, -1 = none).")
]
StudentProbsOpt = Annotated[
    str | None,
    typer.Option(
        "--baseline",
        "--student-probs",
        help="Interactive-GNMax: the student's votes, as in 'pate analyze --baseline': "
        "its probabilities (queries x classes, rows summing to 1) or M times them.",
    ),
]
StudentConfidenceOpt = Annotated[
    float,
    typer.Option(
        "--student-confidence",
        help="Interactive-GNMax: reinforce the student's label when its top probability "
        "exceeds this (gamma of Algorithm 2).",
    ),
]
AnsweredOutputOpt = Annotated[
    str | None,
    typer.Option(
        "--answered-output",
        help="Also write the boolean mask of answered queries, for 'analyze --answered'.",
    ),
]
MaxAnsweredOpt = Annotated[
    int | None, typer.Option("--max-answered", help="Stop after this many answered queries.")
]
MaxQueriesOpt = Annotated[
    int | None, typer.Option("--max-queries", help="Stop after this many queries.")
]
TrueLabelsOpt = Annotated[
    str | None,
    typer.Option("--true-labels", help="True labels (.npy, one per query): report accuracy."),
]


def _release(flag: str, path: str | None, key: str, array: Callable[[Any], Any]) -> Output:
    """A release file, ``array(result)`` (the labels or the answered mask) as .npy: like the
    record, never replaced without --force (a second run is a second use of the votes)."""
    from pate_cli.cli.run import Output
    from pate_cli.votes import check_output_path, save_npy_atomic

    def write(result: Any, to: str) -> None:
        save_npy_atomic(to, array(result))

    check = partial(check_output_path, flag=flag, suffixes=(".npy",))
    return Output(flag, path, key, check, write, release=True)


def describe(p: Params) -> Invocation:
    """What ``pate aggregate`` with the parameters ``p`` reads, calls and writes (``pate
    verify`` asks it of a recorded command line too)."""
    import numpy as np

    from pate_cli import api
    from pate_cli.cli.run import Call, File, Invocation, inferred_mechanism
    from pate_cli.jobs.aggregation import check_parameters

    options = {
        "delta": p["delta"],
        "orders": p["orders_text"],
        "conversion": p["conversion"].value,
        "student_confidence": p["student_confidence"],
        "max_answered": p["max_answered"],
        "max_queries": p["max_queries"],
        "half_even": p["half_even"],
        "max_epsilon": p["max_epsilon"],
        "gate_on": p["gate_on"].value,
    }
    student = File("--baseline", p["student_probs_path"], "student_probs")
    true_labels = File("--true-labels", p["true_labels_path"], "true_labels")
    mechanism = inferred_mechanism(p, student.path)
    labels = _release(
        "--output", p["output"], "labels", lambda result: result.labels.astype(np.int64)
    )
    mask = _release(
        "--answered-output",
        p["answered_output"],
        "answered_mask",
        lambda result: result.answered.astype(bool),
    )
    return Invocation.of(
        "aggregate",
        Call.of(api.aggregate, p, mechanism, options, student, true_labels),
        p,
        outputs=(labels, mask),
        checks=(
            partial(
                check_parameters,
                max_answered=options["max_answered"],
                max_queries=options["max_queries"],
            ),
            labels.check_path,
            mask.check_path,
            partial(check_parameters, student_confidence=options["student_confidence"]),
        ),
        report=lambda result, written: result.to_report(
            output=written.get("labels"), answered_mask=written.get("answered_mask")
        ),
    )


# The end of the help: each line one whole command (pate_cli.cli.examples).
EXAMPLES = (
    "pate aggregate sample_data/mnist_250_teachers.npy --threshold 200 --sigma1 150 --sigma 40 --queries 640 --delta 1e-5 --output labels.out.npy",
)


@command(*runs(mechanism_block(baseline=False), gate(TableGateOnOpt, TableGateOn.PUBLISHABLE)))
def aggregate(
    ctx: typer.Context,
    votes_path: VotesArg,
    output: OutputOpt,
    delta: DeltaOpt,
    student_probs_path: StudentProbsOpt = None,
    student_confidence: StudentConfidenceOpt = 1.0,
    answered_output: AnsweredOutputOpt = None,
    max_answered: MaxAnsweredOpt = None,
    max_queries: MaxQueriesOpt = None,
    true_labels_path: TrueLabelsOpt = None,
) -> None:
    """Run an aggregator on the votes, write the noisy labels, and account the realised run.

    LNMax, GNMax, Confident-GNMax or Interactive-GNMax, with noise from OS
    entropy that is never written anywhere (--seed-file keeps a run
    reproducible without publishing its noise; --seed is for experiments). The
    labels (-1 where nothing was released) are written only after the run
    succeeds, and never over an existing file without --force (a second run
    spends the privacy budget again). The report gives the realised privacy
    cost (the threshold step on every query seen, the answer step on the
    answered ones) next to the expected cost.
    """
    from pate_cli.cli import render
    from pate_cli.cli.run import run

    run(describe(ctx.params), render.aggregate)

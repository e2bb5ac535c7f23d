"""``pate aggregate``: run an aggregator, write the labels, account the realised run.

The command checks its flags before it reads any file, calls
:func:`pate_cli.aggregation.aggregate_votes`, writes the labels and the answered mask
(atomically, only once the run succeeded), prints the report and applies the budget gate.
"""

from __future__ import annotations

from typing import Annotated, Any

import typer

from pate_cli.choices import Conversion, GateOn, TableGateOn, ThresholdBound, VoteFormat
from pate_cli.cli.options import (
    ConversionOpt,
    DeltaOpt,
    ForceOpt,
    FormatOpt,
    GammaOpt,
    HalfEvenOpt,
    IndicesOpt,
    JsonOpt,
    MaxEpsilonOpt,
    MechanismOpt,
    NumClassesOpt,
    OrdersOpt,
    PublicOpt,
    QueriesOpt,
    QuietOpt,
    RecordOpt,
    SeedFileOpt,
    SeedOpt,
    Sigma1Opt,
    SigmaOpt,
    TableGateOnOpt,
    TeachersOpt,
    ThresholdBoundOpt,
    ThresholdOpt,
    VotesArg,
    current_argv,
    emit,
    enforce,
    selection_options,
    votes_call,
)
from pate_cli.mechanisms import infer_mechanism


def aggregate(
    votes_path: VotesArg,
    output: Annotated[
        str, typer.Option("--output", help="Where to write the labels (.npy, int64, -1 = none).")
    ],
    delta: DeltaOpt,
    seed: SeedOpt = None,
    seed_file: SeedFileOpt = None,
    mechanism: MechanismOpt = None,
    sigma: SigmaOpt = None,
    threshold: ThresholdOpt = None,
    sigma1: Sigma1Opt = None,
    gamma: GammaOpt = None,
    student_probs_path: Annotated[
        str | None,
        typer.Option(
            "--baseline",
            "--student-probs",
            help="Interactive-GNMax: the student's votes, as in 'pate analyze --baseline': "
            "its probabilities (queries x classes, rows summing to 1) or M times them.",
        ),
    ] = None,
    student_confidence: Annotated[
        float,
        typer.Option(
            "--student-confidence",
            help="Interactive-GNMax: reinforce the student's label when its top probability "
            "exceeds this (gamma of Algorithm 2).",
        ),
    ] = 1.0,
    answered_output: Annotated[
        str | None,
        typer.Option(
            "--answered-output",
            help="Also write the boolean mask of answered queries, for 'analyze --answered'.",
        ),
    ] = None,
    max_answered: Annotated[
        int | None, typer.Option("--max-answered", help="Stop after this many answered queries.")
    ] = None,
    max_queries: Annotated[
        int | None, typer.Option("--max-queries", help="Stop after this many queries.")
    ] = None,
    true_labels_path: Annotated[
        str | None,
        typer.Option("--true-labels", help="True labels (.npy, one per query): report accuracy."),
    ] = None,
    orders_text: OrdersOpt = None,
    conversion: ConversionOpt = Conversion.CLASSIC,
    half_even: HalfEvenOpt = False,
    threshold_bound: ThresholdBoundOpt = ThresholdBound.THEOREM6,
    fmt: FormatOpt = VoteFormat.AUTO,
    num_classes: NumClassesOpt = None,
    teachers: TeachersOpt = None,
    queries: QueriesOpt = None,
    indices: IndicesOpt = None,
    record_path: RecordOpt = None,
    force: ForceOpt = False,
    max_epsilon: MaxEpsilonOpt = None,
    gate_on: TableGateOnOpt = TableGateOn.PUBLISHABLE,
    public: PublicOpt = False,
    as_json: JsonOpt = False,
    quiet: QuietOpt = False,
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

    Example:

        pate aggregate sample_data/mnist_250_teachers.npy --threshold 200 --sigma1 150 --sigma 40 --queries 640 --delta 1e-5 --output labels.out.npy
    """
    import numpy as np

    from pate_cli.accountant.compose import check_delta
    from pate_cli.aggregation import aggregate_votes, check_parameters
    from pate_cli.cli import render
    from pate_cli.outputs import check_distinct_files, check_not_replaced
    from pate_cli.records.record import build_record, check_record_path, write_record
    from pate_cli.reports.budget import check_public_gate
    from pate_cli.reports.models import AggregateReport
    from pate_cli.votes import check_output_path, save_npy_atomic

    def show(report: AggregateReport) -> None:
        if public:
            emit(report.to_dict(public=True), render.public(report), (), as_json)
        else:
            emit(report.to_json_dict(), render.aggregate(report), report.warnings, as_json)

    check_delta(delta)
    if record_path is not None:
        check_record_path(record_path)
    check_distinct_files(
        {
            "VOTES": votes_path,
            "--indices": indices,
            "--baseline": student_probs_path,
            "--true-labels": true_labels_path,
            "--seed-file": seed_file,
        },
        {"--output": output, "--answered-output": answered_output, "--record": record_path},
    )
    which = GateOn(gate_on.value)
    check_parameters(max_answered=max_answered, max_queries=max_queries)
    check_output_path(output, "--output", (".npy",))
    if answered_output is not None:
        check_output_path(answered_output, "--answered-output", (".npy",))
    check_parameters(student_confidence=student_confidence)
    # The labels, the mask and the record are the release: a second run is a second use of
    # the votes, so none is replaced without --force (checked before the votes are read).
    check_not_replaced(
        {"--output": output, "--answered-output": answered_output, "--record": record_path},
        force=force,
    )
    votes = selection_options(votes_path, fmt, num_classes, teachers, queries, indices)
    chosen = infer_mechanism(
        mechanism,
        sigma=sigma,
        threshold=threshold,
        sigma1=sigma1,
        gamma=gamma,
        has_baseline=student_probs_path is not None,
        baseline_flag="--baseline",
        threshold_bound=threshold_bound,
    )
    if public:
        check_public_gate(which, chosen.to_json_dict(), max_epsilon)
    options: dict[str, Any] = {
        "delta": delta,
        "orders": orders_text,
        "conversion": conversion.value,
        "student_confidence": student_confidence,
        "max_answered": max_answered,
        "max_queries": max_queries,
        "half_even": half_even,
        "max_epsilon": max_epsilon,
        "gate_on": which.value,
    }
    result = aggregate_votes(
        votes,
        chosen,
        seed=seed,
        seed_file=seed_file,
        student_probs=student_probs_path,
        true_labels=true_labels_path,
        **options,
    )
    if result.gate is not None and not result.gate.passed:
        # Nothing over budget is released: no labels, no mask, no record; the report says so.
        report = result.to_report(output=None, answered_mask=None)
        show(report)
        enforce(result.gate)
    report = result.to_report(output=output, answered_mask=answered_output)
    # Outputs are written only now that everything succeeded, each atomically.
    save_npy_atomic(output, result.labels.astype(np.int64))
    if answered_output is not None:
        save_npy_atomic(answered_output, result.answered.astype(bool))
    payload = report.to_json_dict()
    show(report)
    if record_path is not None:
        write_record(
            record_path,
            build_record(
                "aggregate",
                current_argv(),
                report.to_dict(public=True) if public else payload,
                inputs={
                    "votes": votes_path,
                    "indices": indices,
                    "student_probs": student_probs_path,
                    "true_labels": true_labels_path,
                },
                outputs={"labels": output, "answered_mask": answered_output},
                noise=result.noise,
                call={
                    "function": "aggregate",
                    "votes": votes_call(fmt, num_classes, teachers, queries),
                    "mechanism": chosen.to_json_dict(),
                    "options": options,
                },
                public=public,
            ),
        )
    enforce(result.gate)

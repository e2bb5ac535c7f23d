"""``pate aggregate``: run an aggregator with a seed, write the labels, account the realised run."""

from __future__ import annotations

import os
from typing import Annotated

import numpy as np
import typer

from pate_cli import render
from pate_cli._options import (
    ConversionOpt,
    DeltaOpt,
    FormatOpt,
    GammaOpt,
    GateOn,
    GateOnOpt,
    HalfEvenOpt,
    IndicesOpt,
    JsonOpt,
    MaxEpsilonOpt,
    MechanismOpt,
    NumClassesOpt,
    OrdersOpt,
    QueriesOpt,
    RecordOpt,
    Sigma1Opt,
    SigmaOpt,
    TeachersOpt,
    ThresholdOpt,
    VotesArg,
    analysis_epsilons,
    analysis_report,
    check_delta,
    current_argv,
    emit,
    fresh_seed,
    gate,
    selection_options,
    summary,
)
from pate_cli.accounting import Conversion
from pate_cli.aggregators import (
    AggregationResult,
    aggregate_confident_gnmax,
    aggregate_gnmax,
    aggregate_interactive_gnmax,
    aggregate_lnmax,
)
from pate_cli.errors import UsageError
from pate_cli.mechanisms import (
    ConfidentGNMax,
    GNMax,
    InteractiveGNMax,
    LNMax,
    Mechanism,
    assert_never,
    infer_mechanism,
)
from pate_cli.orders import parse_orders
from pate_cli.record import build_record, check_record_path, write_record
from pate_cli.report import AggregateReport
from pate_cli.votes import (
    VoteFormat,
    check_output_path,
    load_student_probs,
    load_true_labels,
    save_npy_atomic,
)


def _run(
    counts: np.ndarray,
    mechanism: Mechanism,
    rng: np.random.Generator,
    student_probs: np.ndarray | None,
    student_confidence: float,
    num_teachers: int,
    max_answered: int | None,
    max_queries: int | None,
    half_even: bool,
) -> AggregationResult:
    limits = {"max_answered": max_answered, "max_queries": max_queries}
    if isinstance(mechanism, InteractiveGNMax):
        assert student_probs is not None
        return aggregate_interactive_gnmax(
            counts,
            student_probs,
            mechanism.threshold,
            mechanism.sigma1,
            mechanism.sigma,
            student_confidence,
            rng,
            num_teachers=num_teachers,
            half_even=half_even,
            **limits,
        )
    if isinstance(mechanism, ConfidentGNMax):
        return aggregate_confident_gnmax(
            counts,
            mechanism.threshold,
            mechanism.sigma1,
            mechanism.sigma,
            rng,
            half_even=half_even,
            **limits,
        )
    if isinstance(mechanism, GNMax):
        return aggregate_gnmax(counts, mechanism.sigma, rng, **limits)
    if isinstance(mechanism, LNMax):
        return aggregate_lnmax(counts, mechanism.gamma, rng, **limits)
    assert_never(mechanism)


def aggregate(
    votes_path: VotesArg,
    output: Annotated[
        str, typer.Option("--output", help="Where to write the labels (.npy, int64, -1 = none).")
    ],
    delta: DeltaOpt,
    seed: Annotated[
        int | None,
        typer.Option(
            "--seed", help="Seed of the noise; without it a fresh seed is drawn and reported."
        ),
    ] = None,
    mechanism: MechanismOpt = None,
    sigma: SigmaOpt = None,
    threshold: ThresholdOpt = None,
    sigma1: Sigma1Opt = None,
    gamma: GammaOpt = None,
    student_probs_path: Annotated[
        str | None,
        typer.Option(
            "--student-probs",
            help="Interactive-GNMax: the student's probabilities (queries x classes, rows sum to 1).",
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
    fmt: FormatOpt = VoteFormat.AUTO,
    num_classes: NumClassesOpt = None,
    teachers: TeachersOpt = None,
    queries: QueriesOpt = None,
    indices: IndicesOpt = None,
    record_path: RecordOpt = None,
    max_epsilon: MaxEpsilonOpt = None,
    gate_on: GateOnOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """Run an aggregator on the votes, write the noisy labels, and account the realised run.

    LNMax, GNMax, Confident-GNMax or Interactive-GNMax with a seeded
    numpy Generator: the same seed gives the same labels, byte for byte. The
    labels (-1 where nothing was released) are written only after the run
    succeeds. The report gives the realised privacy cost (the threshold step
    on every query seen, the answer step on the answered ones) next to the
    expected cost.

    Example:

        pate aggregate sample_data/mnist_250_teachers.npy --threshold 200 --sigma1 150 --sigma 40 --queries 640 --delta 1e-5 --seed 0 --output labels.out.npy
    """
    check_delta(delta)
    if record_path is not None:
        check_record_path(record_path)
    which = gate_on or GateOn.DATA_DEPENDENT
    if which is GateOn.RELEASED:
        raise UsageError(
            "--gate-on released: aggregate gates on data-dependent or data-independent"
        )
    for name, value in (("--max-answered", max_answered), ("--max-queries", max_queries)):
        if value is not None and value < 1:
            raise UsageError(f"{name} {value}: expected a whole number of at least 1")
    if seed is not None and seed < 0:
        raise UsageError(f"--seed {seed}: expected a non-negative integer")
    check_output_path(output, "--output", (".npy",))
    if answered_output is not None:
        check_output_path(answered_output, "--answered-output", (".npy",))
        if os.path.abspath(answered_output) == os.path.abspath(output):
            raise UsageError("--answered-output must differ from --output")
    if not 0 <= student_confidence <= 1:
        raise UsageError(f"--student-confidence {student_confidence}: expected a number in [0, 1]")
    votes = selection_options(votes_path, fmt, num_classes, teachers, queries, indices)
    chosen = infer_mechanism(
        mechanism,
        sigma=sigma,
        threshold=threshold,
        sigma1=sigma1,
        gamma=gamma,
        has_baseline=student_probs_path is not None,
        baseline_flag="--student-probs",
    )
    orders = parse_orders(orders_text)
    probs = load_student_probs(student_probs_path, votes) if student_probs_path else None
    truth = load_true_labels(true_labels_path, votes) if true_labels_path else None
    if seed is None:
        seed = fresh_seed()

    result = _run(
        votes.counts,
        chosen,
        np.random.default_rng(seed),
        probs,
        student_confidence,
        votes.num_teachers,
        max_answered,
        max_queries,
        half_even,
    )
    seen = result.num_seen
    mask = result.answered[:seen]
    baseline = None if probs is None else probs * votes.num_teachers
    expected = analysis_report(
        votes, chosen, orders, delta, conversion, baseline=baseline, half_even=half_even
    )
    if seen == 0:
        raise UsageError(
            "the run saw no query (--max-answered or --max-queries stopped it at once)"
        )
    realised = analysis_report(
        votes,
        chosen,
        orders,
        delta,
        conversion,
        baseline=baseline,
        answered=mask,
        half_even=half_even,
    )
    released = result.labels[:seen] >= 0
    plurality = votes.counts[:seen].argmax(axis=1)
    agreement = (
        float(np.mean(result.labels[:seen][released] == plurality[released]))
        if released.any()
        else None
    )
    accuracy = (
        float(np.mean(result.labels[:seen][released] == truth[:seen][released]))
        if truth is not None and released.any()
        else None
    )
    report = AggregateReport(
        input=summary(votes),
        mechanism=chosen.to_json_dict(),
        seed=seed,
        num_queries=votes.num_queries,
        num_seen=seen,
        answered=result.num_answered,
        student_labelled=result.num_student,
        output=output,
        answered_mask=answered_output,
        agreement_with_plurality=agreement,
        accuracy=accuracy,
        privacy=realised,
        expected_privacy=expected,
        warnings=realised.warnings,
    )
    # Outputs are written only now that everything succeeded, each atomically.
    save_npy_atomic(output, result.labels.astype(np.int64))
    if answered_output is not None:
        save_npy_atomic(answered_output, mask.astype(bool))
    emit(report.to_json_dict(), render.aggregate(report), report.warnings, as_json)
    if record_path is not None:
        write_record(
            record_path,
            build_record(
                "aggregate",
                current_argv(),
                report.to_json_dict(),
                inputs={
                    "votes": votes_path,
                    "indices": indices,
                    "student_probs": student_probs_path,
                    "true_labels": true_labels_path,
                },
                outputs={"labels": output, "answered_mask": answered_output},
                seed=seed,
            ),
        )
    gate(analysis_epsilons(realised), max_epsilon, which)

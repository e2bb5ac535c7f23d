"""``pate smooth-sensitivity``: release the data-dependent epsilon through GNSS (2018, App. B)."""

from __future__ import annotations

from typing import Annotated, Any

import typer

from pate_cli.choices import Conversion, ThresholdBound, VoteFormat
from pate_cli.cli.options import (
    AnsweredOpt,
    BaselineOpt,
    BetaOpt,
    ConversionOpt,
    DeltaOpt,
    ForceOpt,
    FormatOpt,
    GateOn,
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
    ReleaseGateOnOpt,
    SeedFileOpt,
    SeedOpt,
    Sigma1Opt,
    SigmaOpt,
    SigmaSsOpt,
    SkipConditionsOpt,
    StrictOpt,
    TeachersOpt,
    ThresholdBoundOpt,
    ThresholdOpt,
    VotesArg,
    cli_progress,
    current_argv,
    emit,
    enforce,
    selection_options,
    votes_call,
)
from pate_cli.mechanisms import infer_mechanism


def smooth_sensitivity(
    votes_path: VotesArg,
    delta: DeltaOpt,
    mechanism: MechanismOpt = None,
    sigma: SigmaOpt = None,
    threshold: ThresholdOpt = None,
    sigma1: Sigma1Opt = None,
    baseline_path: BaselineOpt = None,
    order: Annotated[
        float | None,
        typer.Option(
            "--order",
            help="Release at this Renyi order (default: the best data-dependent order).",
        ),
    ] = None,
    beta: BetaOpt = None,
    sigma_ss: SigmaSsOpt = None,
    seed: SeedOpt = None,
    seed_file: SeedFileOpt = None,
    skip_conditions: SkipConditionsOpt = False,
    strict: StrictOpt = True,
    orders_text: OrdersOpt = None,
    conversion: ConversionOpt = Conversion.CLASSIC,
    answered_path: AnsweredOpt = None,
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
    gate_on: ReleaseGateOnOpt = None,
    public: PublicOpt = False,
    as_json: JsonOpt = False,
    quiet: QuietOpt = False,
) -> None:
    """Smooth sensitivity of the data-dependent epsilon and its GNSS-released value.

    Computes the local-sensitivity bounds of every query at every teacher
    distance, the beta-smooth sensitivity, the RDP cost of the Gaussian
    release (Theorem 23) and one sampled released epsilon, after checking
    conditions C5/C6 at the order used. Exits 2 when they fail, unless
    --skip-conditions. --max-epsilon gates on the smallest publishable figure
    (--gate-on released: the expected released epsilon, which depends on the
    votes, with a warning). The sample is publishable
    when its order, beta and sigma_ss were fixed in advance (--order, --beta,
    --sigma-ss) and its noise is private.

    Example:

        pate smooth-sensitivity sample_data/mnist_250_teachers.npy --threshold 200 --sigma1 150 --sigma 40 --queries 640 --delta 1e-5
    """
    from pate_cli import api
    from pate_cli.accountant.compose import check_delta
    from pate_cli.cli import render
    from pate_cli.outputs import check_distinct_files, check_not_replaced
    from pate_cli.records.record import build_record, check_record_path, write_record
    from pate_cli.reports.budget import check_public_gate

    check_delta(delta)
    if record_path is not None:
        check_record_path(record_path)
    check_distinct_files(
        {
            "VOTES": votes_path,
            "--indices": indices,
            "--baseline": baseline_path,
            "--answered": answered_path,
            "--seed-file": seed_file,
        },
        {"--record": record_path},
    )
    check_not_replaced({"--record": record_path}, force=force)
    votes = selection_options(votes_path, fmt, num_classes, teachers, queries, indices)
    chosen = infer_mechanism(
        mechanism,
        sigma=sigma,
        threshold=threshold,
        sigma1=sigma1,
        has_baseline=baseline_path is not None,
        threshold_bound=threshold_bound,
    )
    on = gate_on or GateOn.PUBLISHABLE
    if public:
        check_public_gate(on, chosen.to_json_dict(), max_epsilon)
    options: dict[str, Any] = {
        "delta": delta,
        "order": order,
        "orders": orders_text,
        "conversion": conversion.value,
        "beta": beta,
        "sigma_ss": sigma_ss,
        "skip_conditions": skip_conditions,
        "reference_local_sensitivity": not strict,
        "half_even": half_even,
        "max_epsilon": max_epsilon,
        "gate_on": on.value,
    }
    report = api.smooth_sensitivity(
        votes,
        chosen,
        baseline=baseline_path,
        answered=answered_path,
        seed=seed,
        seed_file=seed_file,
        progress=cli_progress(votes, as_json),
        **options,
    )
    release = report.release
    if public:
        emit(report.to_dict(public=True), render.public(report), (), as_json)
    else:
        emit(report.to_json_dict(), render.smooth_sensitivity(report), report.warnings, as_json)
    if record_path is not None:
        write_record(
            record_path,
            build_record(
                "smooth-sensitivity",
                current_argv(),
                report.to_dict(public=True) if public else report.to_json_dict(),
                inputs={
                    "votes": votes_path,
                    "indices": indices,
                    "baseline": baseline_path,
                    "answered": answered_path,
                },
                outputs={},
                noise=release.noise,
                call={
                    "function": "smooth_sensitivity",
                    "votes": votes_call(fmt, num_classes, teachers, queries),
                    "mechanism": chosen.to_json_dict(),
                    "options": options,
                },
                public=public,
            ),
        )
    enforce(report.gate)

"""``pate analyze``: the privacy cost of answering the queries, per order and at the best one."""

from __future__ import annotations

from dataclasses import replace
from typing import Annotated, Any

import typer

from pate_cli.choices import Conversion, GateOn, ThresholdBound, VoteFormat
from pate_cli.cli.options import (
    AnsweredOpt,
    BaselineOpt,
    BetaOpt,
    ConversionOpt,
    DataIndependentOpt,
    DeltaOpt,
    ForceOpt,
    FormatOpt,
    GammaOpt,
    GateOnOpt,
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
    SigmaSsOpt,
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
    threshold_bound: ThresholdBoundOpt = ThresholdBound.THEOREM6,
    fmt: FormatOpt = VoteFormat.AUTO,
    num_classes: NumClassesOpt = None,
    teachers: TeachersOpt = None,
    queries: QueriesOpt = None,
    indices: IndicesOpt = None,
    all_orders: Annotated[
        bool,
        typer.Option("--all-orders", help="Show every order, not only those near the optimum."),
    ] = False,
    no_release: Annotated[
        bool,
        typer.Option(
            "--no-release", help="Skip the smooth-sensitivity (GNSS) release of the epsilon."
        ),
    ] = False,
    beta: BetaOpt = None,
    sigma_ss: SigmaSsOpt = None,
    seed: SeedOpt = None,
    seed_file: SeedFileOpt = None,
    strict: StrictOpt = True,
    ledger_path: Annotated[
        str | None,
        typer.Option(
            "--ledger",
            help="Write the per-query cost ledger (.csv or .json): gap, log q, Pr[answered], "
            "RDP at the best order, share of the total, running epsilon.",
        ),
    ] = None,
    breakdown: Annotated[
        bool,
        typer.Option(
            "--breakdown",
            help="Show the most expensive queries and the cost by teacher agreement.",
        ),
    ] = False,
    plot_path: Annotated[
        str | None,
        typer.Option(
            "--plot",
            help="Write a figure (.png, .svg or .pdf; needs the 'plot' extra): epsilon against "
            "queries answered, and the cost by agreement.",
        ),
    ] = None,
    record_path: RecordOpt = None,
    force: ForceOpt = False,
    max_epsilon: MaxEpsilonOpt = None,
    gate_on: GateOnOpt = GateOn.PUBLISHABLE,
    public: PublicOpt = False,
    as_json: JsonOpt = False,
    quiet: QuietOpt = False,
) -> None:
    """Data-dependent and data-independent privacy cost of answering the queries.

    Reports Renyi DP per order and (epsilon, delta) at the best order for
    GNMax, Confident-GNMax, Interactive-GNMax or LNMax, the expected number of
    queries answered, and (for the GNMax family) the epsilon released through
    its smooth sensitivity (GNSS). With --answered, the realised run of
    'pate aggregate'.

    Example:

        pate analyze sample_data/mnist_250_teachers.npy --threshold 200 --sigma1 150 --sigma 40 --queries 640 --delta 1e-5
    """
    from rich.console import Group

    from pate_cli import api, plots
    from pate_cli.accountant.compose import check_delta
    from pate_cli.cli import render
    from pate_cli.orders import parse_orders
    from pate_cli.outputs import check_distinct_files, check_not_replaced
    from pate_cli.records.record import build_record, check_record_path, write_record
    from pate_cli.release.gnss import GnssRelease
    from pate_cli.reports import ledger
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
        {"--ledger": ledger_path, "--plot": plot_path, "--record": record_path},
    )
    # A record is never replaced without --force (the ledger and plot are derived: replaced).
    check_not_replaced({"--record": record_path}, force=force, spends_budget=False)
    votes = selection_options(votes_path, fmt, num_classes, teachers, queries, indices)
    chosen = infer_mechanism(
        mechanism,
        sigma=sigma,
        threshold=threshold,
        sigma1=sigma1,
        gamma=gamma,
        has_baseline=baseline_path is not None,
        threshold_bound=threshold_bound,
    )
    if public:
        check_public_gate(gate_on, chosen.to_json_dict(), max_epsilon)
    parse_orders(orders_text)  # checked before any output path, as every flag
    if plot_path is not None:
        plots.check_plot_path(plot_path)
    if ledger_path is not None:
        ledger.check_ledger_path(ledger_path)
    options: dict[str, Any] = {
        "delta": delta,
        "orders": orders_text,
        "conversion": conversion.value,
        "data_independent": data_independent,
        "release": not no_release,
        "beta": beta,
        "sigma_ss": sigma_ss,
        "reference_local_sensitivity": not strict,
        "half_even": half_even,
        "breakdown": ledger_path is not None or plot_path is not None or breakdown,
        "max_epsilon": max_epsilon,
        "gate_on": gate_on.value,
    }
    report = api.analyze(
        votes,
        chosen,
        baseline=baseline_path,
        answered=answered_path,
        seed=seed,
        seed_file=seed_file,
        progress=cli_progress(votes, as_json),
        **options,
    )
    renderable = render.analysis(report, all_orders=all_orders)
    if report.ledger is not None:
        if breakdown:
            renderable = Group(renderable, render.render_ledger(report.ledger))
        written: list[tuple[str, str]] = []
        if ledger_path is not None:
            ledger.write_ledger(report.ledger, ledger_path)
            written.append(("ledger", ledger_path))
        if plot_path is not None:
            plots.plot_analysis(plot_path, report, report.ledger)
            written.append(("plot", plot_path))
        report = replace(report, files=tuple(written))
    payload = report.to_json_dict()
    if public:
        emit(report.to_dict(public=True), render.public(report), (), as_json)
    else:
        emit(payload, renderable, report.warnings, as_json)
    if record_path is not None:
        write_record(
            record_path,
            build_record(
                "analyze",
                current_argv(),
                report.to_dict(public=True) if public else payload,
                inputs={
                    "votes": votes_path,
                    "indices": indices,
                    "baseline": baseline_path,
                    "answered": answered_path,
                },
                outputs={},
                noise=report.release.noise if isinstance(report.release, GnssRelease) else None,
                call={
                    "function": "analyze",
                    "votes": votes_call(fmt, num_classes, teachers, queries),
                    "mechanism": chosen.to_json_dict(),
                    "options": options,
                },
                public=public,
            ),
        )
    enforce(report.gate)

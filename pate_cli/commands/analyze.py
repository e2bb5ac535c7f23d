"""``pate analyze``: the privacy cost of answering the queries, per order and at the best one."""

from __future__ import annotations

from typing import Annotated

import typer

from pate_cli import render
from pate_cli._options import (
    AnsweredOpt,
    BaselineOpt,
    ConversionOpt,
    DataIndependentOpt,
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
    Sigma1Opt,
    SigmaOpt,
    TeachersOpt,
    ThresholdOpt,
    VotesArg,
    analysis_report,
    check_delta,
    emit,
    gate,
)
from pate_cli.accounting import Conversion
from pate_cli.errors import UsageError
from pate_cli.mechanisms import infer_mechanism
from pate_cli.orders import parse_orders
from pate_cli.votes import VoteFormat, load_answered_mask, load_baseline, load_votes


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
        bool,
        typer.Option("--all-orders", help="Show every order, not only those near the optimum."),
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
    check_delta(delta)
    which = gate_on or GateOn.DATA_DEPENDENT
    if which is GateOn.RELEASED:
        raise UsageError("--gate-on released: analyze gates on data-dependent or data-independent")
    votes = load_votes(
        votes_path,
        fmt=fmt,
        num_classes=num_classes,
        teachers=teachers,
        queries=queries,
        indices=indices,
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
    report = analysis_report(
        votes,
        chosen,
        orders,
        delta,
        conversion,
        baseline=baseline,
        answered=answered,
        data_independent=data_independent,
        half_even=half_even,
    )
    emit(
        report.to_json_dict(),
        render.analysis(report, all_orders=all_orders),
        report.warnings,
        as_json,
    )
    gate(report, max_epsilon, which)

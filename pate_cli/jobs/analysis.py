"""What ``analyze`` and ``smooth_sensitivity`` run, whole: the budget's charge checked, the
arguments read, the run's account (``accountant.run``, entered once), its report, the release
and the ledger, the gate, and the charge committed.

``run_analyze`` and ``run_smooth_sensitivity`` are the two commands; ``analysis_report`` is
the account of a run as a report without the rest (``aggregate``, ``plan`` and the tests read
it), ``release_of`` the GNSS release from an analysis' own terms and costs. ``pate_cli.api``
is a thin front over these: it checks its arguments, reads the votes and calls one of them.
Nothing here prints, exits or imports a terminal library.
"""

from __future__ import annotations

import os
from dataclasses import replace
from typing import Any

import numpy as np
from numpy.typing import ArrayLike, NDArray

from pate_cli.accountant.figures import EpsilonResult, delta_warnings
from pate_cli.accountant.pld import METHODS, PldPlan, check_pld
from pate_cli.accountant.run import Progress, RunAccount, no_progress, run_account
from pate_cli.accountant.terms import QueryTerms
from pate_cli.budget import Budget, Charge, as_budget
from pate_cli.budget.book import checked_charge
from pate_cli.choices import Conversion, GateOn
from pate_cli.common import checks
from pate_cli.common.spelling import given, option
from pate_cli.errors import UnsupportedError, UsageError
from pate_cli.files.seeds import Noise
from pate_cli.mechanisms import Mechanism
from pate_cli.orders import as_orders
from pate_cli.release.gnss import (
    ConditionError,
    GnssRelease,
    NotReleased,
    Release,
    gnss_release,
)
from pate_cli.release.model import LocalSensitivityBound
from pate_cli.reports.ledger import build_ledger
from pate_cli.reports.models import AnalysisReport, InputSummary, SmoothSensitivityReport
from pate_cli.reports.publishable import (
    analysis_epsilons,
    apply_gate,
    gate_warnings,
    release_epsilons,
)
from pate_cli.votes import Input, Votes, load_answered_mask, load_baseline

__all__ = [
    "Progress",
    "analysis_report",
    "budget_charge",
    "charged",
    "pld_choice",
    "release_of",
    "run_analyze",
    "run_inputs",
    "run_smooth_sensitivity",
]

FloatArray = NDArray[np.float64]
BudgetArgument = Budget | str | os.PathLike[str] | None
"""A ``Budget``, its path, or None."""


def run_analyze(
    votes: Votes,
    mechanism: Mechanism,
    *,
    delta: float,
    orders: str | ArrayLike | None,
    conversion: str | Conversion,
    baseline: Input | None,
    answered: Input | None,
    data_independent: bool,
    mode: str | None,
    noise: Noise | None,
    seed: object,
    seed_file: str | os.PathLike[str] | None,
    beta: float | None,
    sigma_ss: float | None,
    local_sensitivity: LocalSensitivityBound,
    half_even: bool,
    breakdown: bool,
    max_epsilon: float | None,
    gate_on: GateOn,
    progress: Progress | None,
    budget: BudgetArgument,
    pld: bool | str,
) -> AnalysisReport:
    """``pate analyze``, whole (``pate_cli.api.analyze``'s arguments, checked there; ``mode``
    the release's: "expected", "sample" or None): the budget's charge checked before any
    work, the privacy-loss-distribution method checked, the run's inputs read, the run
    accounted, the release, the per-query ledger, the gate and the charge committed."""
    options: dict[str, Any] = {"release": mode == "sample", "data_independent": data_independent}
    options |= {"orders": orders, "beta": beta, "sigma_ss": sigma_ss, "half_even": half_even}
    charge = budget_charge(budget, "analyze", mechanism, votes, options, seed, seed_file)
    checks.delta(delta)
    method = pld_choice(pld, data_independent=data_independent)
    plan = None if method is None else check_pld(mechanism, method)
    grid, kind = as_orders(orders), checks.conversion(conversion)
    baseline_array, answered_mask = run_inputs(votes, baseline, answered)
    report = analysis_report(
        votes,
        mechanism,
        grid,
        delta,
        kind,
        baseline=baseline_array,
        answered=answered_mask,
        data_independent=data_independent,
        half_even=half_even,
        progress=progress,
        pld=plan,
    )
    if mode is not None:
        report = with_release(
            votes,
            mechanism,
            report,
            baseline=baseline_array,
            answered=answered_mask,
            data_independent=data_independent,
            noise=noise,
            beta=beta,
            sigma_ss=sigma_ss,
            local_sensitivity=local_sensitivity,
            half_even=half_even,
            progress=progress,
        )
    # Always kept (its rows are computed only when read, so plot_analysis needs no
    # breakdown); the JSON holds its summary only when ``breakdown`` asks for it.
    ledger = build_ledger(
        votes, mechanism, report, answered=answered_mask, half_even=half_even, terms=report.terms
    )
    report = replace(report, ledger=ledger, breakdown=breakdown)
    report = _gated(report, analysis_epsilons, max_epsilon, gate_on)
    return charged(report, budget, charge, getattr(report.release, "noise", None))


def run_smooth_sensitivity(
    votes: Votes,
    mechanism: Mechanism,
    *,
    delta: float,
    order: float | None,
    orders: str | ArrayLike | None,
    conversion: str | Conversion,
    baseline: Input | None,
    answered: Input | None,
    beta: float | None,
    sigma_ss: float | None,
    noise: Noise,
    seed: object,
    seed_file: str | os.PathLike[str] | None,
    skip_conditions: bool,
    local_sensitivity: LocalSensitivityBound,
    half_even: bool,
    max_epsilon: float | None,
    gate_on: GateOn,
    progress: Progress | None,
    budget: BudgetArgument,
) -> SmoothSensitivityReport:
    """``pate smooth-sensitivity``, whole (``pate_cli.api.smooth_sensitivity``'s arguments,
    checked there): the budget's charge checked before any work, the run's inputs read, the
    run accounted, its GNSS release, the gate and the charge committed."""
    options: dict[str, Any] = {"order": order, "beta": beta, "sigma_ss": sigma_ss}
    options["half_even"] = half_even
    charge = budget_charge(budget, "smooth_sensitivity", mechanism, votes, options, seed, seed_file)
    checks.delta(delta)
    grid, kind = as_orders(orders), checks.conversion(conversion)
    baseline_array, answered_mask = run_inputs(votes, baseline, answered)
    analysis = analysis_report(
        votes,
        mechanism,
        grid,
        delta,
        kind,
        baseline=baseline_array,
        answered=answered_mask,
        half_even=half_even,
        progress=progress,
        guaranteed=gate_on is GateOn.GUARANTEED,  # in no output of this command but its gate
    )
    gnss = release_of(
        votes,
        mechanism,
        analysis,
        baseline=baseline_array,
        answered=answered_mask,
        noise=noise,
        local_sensitivity=local_sensitivity,
        skip_conditions=skip_conditions,
        progress=progress,
        **options,
    )
    report = SmoothSensitivityReport(
        input=InputSummary.from_votes(votes),
        mechanism=analysis.mechanism,
        delta=analysis.delta,
        conversion=analysis.conversion,
        realized=analysis.realized,
        release=gnss,
        warnings=votes.warnings + gnss.warnings,
        analysis=analysis,
    )
    report = _gated(report, release_epsilons, max_epsilon, gate_on)
    return charged(report, budget, charge, gnss.noise)


def _gated(report: Any, epsilons: Any, max_epsilon: float | None, on: GateOn) -> Any:
    """The report with its gate's verdict and, for a gate on a private figure, a warning."""
    gate = apply_gate(epsilons(report), max_epsilon, on)
    notes = gate_warnings(on, report.mechanism, max_epsilon)
    return replace(report, gate=gate, warnings=report.warnings + notes)


def budget_charge(
    budget: BudgetArgument,
    function: str,
    mechanism: Mechanism,
    votes: Votes,
    options: dict[str, Any],
    seed: object,
    seed_file: str | os.PathLike[str] | None,
) -> Charge | None:
    """What a call charges to ``budget`` (``budget.book.checked_charge``), refused before
    any work; None without a budget."""
    if budget is None:
        return None
    command = function.replace("_", "-")
    return checked_charge(
        budget,
        function,
        command,
        mechanism,
        votes.num_queries,
        options,
        seed=seed,
        seed_file=seed_file,
    )


def charged(report: Any, budget: BudgetArgument, charge: Charge | None, noise: Noise | None) -> Any:
    """The report with its charge appended to ``budget`` under its lock (checked again there:
    a concurrent charge may have spent the rest), and its ``budget`` block."""
    if budget is None or charge is None:
        return report
    if noise is not None and noise.commitment is not None and charge.purposes:
        charge = replace(charge, seed_commitment=noise.commitment)
    with as_budget(budget).charging(charge) as pending:
        pending.prepare()
        pending.append()
        pending.check_in_place()  # the file read and appended to is still the budget
        return replace(report, budget=pending.block)


def run_inputs(
    votes: Votes, baseline: Input | None, answered: Input | None
) -> tuple[FloatArray | None, NDArray[np.bool_] | None]:
    """A baseline and an answered mask (files or arrays), read and checked against the
    selected votes."""
    return (
        None if baseline is None else load_baseline(baseline, votes),
        None if answered is None else load_answered_mask(answered, votes.num_queries),
    )


def analysis_report(
    votes: Votes,
    mechanism: Mechanism,
    orders: FloatArray,
    delta: float,
    conversion: Conversion,
    *,
    baseline: FloatArray | None = None,
    answered: NDArray[np.bool_] | None = None,
    data_independent: bool = False,
    half_even: bool = False,
    progress: Progress | None = None,
    guaranteed: bool = True,
    terms: QueryTerms | None = None,
    pld: PldPlan | None = None,
) -> AnalysisReport:
    """Account a run and convert it, without a release: the core of ``analyze``
    (``accountant.run.run_account`` as a report; ``guaranteed``, ``terms``, ``pld``: as
    there)."""
    account = run_account(
        votes.counts,
        mechanism,
        orders,
        delta,
        conversion,
        num_queries=votes.num_queries,
        baseline=baseline,
        answered=answered,
        data_independent=data_independent,
        half_even=half_even,
        progress=progress,
        guaranteed=guaranteed,
        terms=terms,
        pld=pld,
        grouped=votes.grouped,
    )
    return _report(votes, mechanism, account, orders, delta, conversion, answered, data_independent)


def _report(
    votes: Votes,
    mechanism: Mechanism,
    account: RunAccount,
    orders: FloatArray,
    delta: float,
    conversion: Conversion,
    answered: NDArray[np.bool_] | None,
    data_independent: bool,
) -> AnalysisReport:
    """The run's account as ``analyze`` reports it, with its warnings."""
    rdp = account.rdp
    return AnalysisReport(
        input=InputSummary.from_votes(votes),
        mechanism=mechanism.to_json_dict(),
        delta=delta,
        conversion=conversion.value,
        orders=orders,
        realized=rdp.realized,
        forced_data_independent=data_independent,
        expected_answered=rdp.expected_answered,
        num_queries_seen=rdp.num_queries_seen,
        data_dependent=account.data_dependent,
        data_independent=account.data_independent,
        worst_case=account.worst_case,
        exact=account.exact,
        guaranteed=account.guaranteed,
        exact_worst_case=account.exact_worst_case,
        exact_absent=account.exact_absent,
        data_dependent_pld=account.pld,
        warnings=_warnings(
            votes, delta, account.terms.threshold_sensitivity, account.data_dependent
        ),
        account=rdp,
        terms=account.terms,
        answered_mask=answered,
    )


def _warnings(votes: Votes, delta: float, moves: int, dependent: EpsilonResult) -> tuple[str, ...]:
    """The report's warnings: the votes', delta's, a threshold statistic that moves by 2
    between neighbours, and a best order at the edge of the grid."""
    warnings = [*votes.warnings, *delta_warnings(delta, votes.num_queries)]
    if moves > 1:
        warnings.append(
            f"{option('round-half-even')}: a value of votes - baseline is an exact half, where "
            "rounding half to even moves the threshold statistic by 2 between neighbours; every "
            "figure accounts a move of 2 (half up, the default, keeps it at 1)"
        )
    if dependent.at_grid_edge:
        warnings.append(
            f"the best order {dependent.order:g} is at the edge of the order grid; "
            f"extend {option('orders')} to be sure the minimum is inside it"
        )
    return tuple(warnings)


def release_of(
    votes: Votes,
    mechanism: Mechanism,
    report: AnalysisReport,
    *,
    order: float | None = None,
    baseline: FloatArray | None = None,
    answered: NDArray[np.bool_] | None = None,
    beta: float | None = None,
    sigma_ss: float | None = None,
    noise: Noise | None = None,
    local_sensitivity: LocalSensitivityBound = "tabulated",
    skip_conditions: bool = False,
    half_even: bool = False,
    progress: Progress | None = None,
) -> GnssRelease:
    """The GNSS release at the analysis' best data-dependent order (or ``order``).

    Reuses the analysis' per-query terms and step costs, so the release's data-dependent
    epsilon is the analysis' own number, and its distinct rows where the votes are held so
    (``Votes.grouped``): each walked once, weighted by how many queries hold it.
    """
    terms = report.terms if report.terms is not None and report.terms.logq is not None else None
    # The analysis composed every order of its grid: an order given there is read, not redone.
    index: int | None = report.data_dependent.order_index
    if order is not None:
        (found,) = np.nonzero(report.orders == order)
        index = int(found[0]) if found.size else None
    steps = None if index is None or report.account is None else report.account.steps
    with (progress or no_progress)("smooth sensitivity", votes.num_queries) as advance:
        return gnss_release(
            votes.grouped,
            votes.num_teachers,
            mechanism,
            report.data_dependent.order if order is None else order,
            report.delta,
            Conversion(report.conversion),
            epsilon_data_independent=report.data_independent.epsilon,
            epsilon_worst_case=report.worst_case.epsilon,
            baseline=baseline,
            answered=answered,
            beta=beta,
            sigma_ss=sigma_ss,
            noise=noise,
            order_chosen_on_data=order is None and np.unique(report.orders).size > 1,
            local_sensitivity=local_sensitivity,
            skip_conditions=skip_conditions,
            half_even=half_even,
            terms=terms,
            steps=steps,
            order_index=index,
            progress=advance,
        )


def with_release(
    votes: Votes,
    mechanism: Mechanism,
    report: AnalysisReport,
    *,
    baseline: FloatArray | None,
    answered: NDArray[np.bool_] | None,
    data_independent: bool,
    noise: Noise | None,
    beta: float | None,
    sigma_ss: float | None,
    local_sensitivity: LocalSensitivityBound,
    half_even: bool,
    progress: Progress | None,
) -> AnalysisReport:
    """The analysis with its ``release`` block: the GNSS release, or why there is none."""
    notes: tuple[str, ...] = ()
    outcome: Release
    if data_independent:
        outcome = NotReleased(
            "data-independent bounds were forced; the publishable figure is listed below"
        )
    else:
        try:
            gnss = release_of(
                votes,
                mechanism,
                report,
                baseline=baseline,
                answered=answered,
                beta=beta,
                sigma_ss=sigma_ss,
                noise=noise,
                local_sensitivity=local_sensitivity,
                half_even=half_even,
                progress=progress,
            )
            outcome = gnss
            notes = gnss.warnings
        except (ConditionError, UnsupportedError) as error:  # said in the report, not hidden
            outcome = NotReleased(error.message)
    return replace(report, release=outcome, warnings=report.warnings + notes)


def pld_choice(pld: bool | str | None, *, data_independent: bool = False) -> str | None:
    """``pld=`` as a method of the privacy-loss-distribution account: None (not asked),
    "q-bound" (True) or "exact"; refused before any work with ``data_independent`` (the
    figure is a data-dependent one). ``accountant.pld.check_pld`` checks the mechanism."""
    if pld is None or pld is False:
        return None
    if pld is not True and not (isinstance(pld, str) and pld in METHODS):
        raise UsageError(f"{given('pld', pld)}: expected True (the q-bound pairs) or 'exact'")
    if data_independent:
        raise UsageError(
            f"{option('pld')} is a data-dependent figure; {option('data-independent')} "
            "forces data-independent bounds"
        )
    return "q-bound" if pld is True else str(pld)

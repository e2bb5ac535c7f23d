"""The analysis pipeline under the API: account a run, then release its epsilon.

``analyzed`` runs the analysis ``analyze`` and ``smooth_sensitivity`` share, whole: the
``pld=`` method checked before any work, the votes and the run's inputs read, the per-query
terms computed once and composed (``analysis_report``, ``accountant.compose``), and the PLD
figure; ``release_of`` takes the GNSS release from those same terms and costs;
``with_release`` decides what an analysis says about its release and ``with_ledger`` adds the
per-query ledger. ``pate_cli.api`` is a front over these (its arguments checked, the votes
read, the budget charged); nothing here prints, exits or imports a terminal library.
"""

from __future__ import annotations

from collections.abc import Callable
from contextlib import AbstractContextManager, nullcontext
from dataclasses import replace

import numpy as np
from numpy.typing import ArrayLike, NDArray

from pate_cli.accountant.compose import account_terms
from pate_cli.accountant.figures import (
    EpsilonResult,
    ExactBound,
    delta_warnings,
    epsilon_result,
    exact_or_reason,
    guaranteed_rdp,
)
from pate_cli.accountant.pld import METHODS, check_pld, pld_figure
from pate_cli.accountant.terms import QueryTerms, query_terms
from pate_cli.choices import Conversion
from pate_cli.common import checks
from pate_cli.common.spelling import given, option
from pate_cli.errors import UnsupportedError, UsageError
from pate_cli.files.seeds import Noise
from pate_cli.jobs.arguments import read_votes
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
from pate_cli.reports.models import AnalysisReport, InputSummary
from pate_cli.votes import Input, Votes, load_answered_mask, load_baseline

FloatArray = NDArray[np.float64]
Progress = Callable[[str, int], AbstractContextManager[Callable[[int], None] | None]]
"""progress(description, total) -> a context manager yielding advance(done), or None."""


def _no_progress(description: str, total: int) -> AbstractContextManager[None]:
    return nullcontext()


def analyzed(
    votes: Votes | Input,
    mechanism: Mechanism,
    *,
    delta: float,
    orders: str | ArrayLike | None,
    conversion: str | Conversion,
    baseline: Input | None,
    answered: Input | None,
    data_independent: bool,
    half_even: bool,
    progress: Progress | None,
    guaranteed: bool = True,
    pld: bool | str = False,
) -> tuple[Votes, AnalysisReport, FloatArray | None, NDArray[np.bool_] | None]:
    """The arguments checked and read, and the analysis: what ``analyze`` and
    ``smooth_sensitivity`` share, run here whole (the votes, the report, the baseline and the
    answered mask): the privacy-loss-distribution method checked before any work, the votes
    and the run's inputs read, the per-query terms composed, and the PLD figure."""
    checks.delta(delta)
    method = pld_choice(pld, mechanism, data_independent=data_independent)
    votes = read_votes(votes)
    grid = as_orders(orders)
    kind = checks.conversion(conversion)
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
        guaranteed=guaranteed,
        need_neighbour=method == "q-bound",
    )
    report = with_pld(report, votes, mechanism, method, progress)
    return votes, report, baseline_array, answered_mask


def with_ledger(
    report: AnalysisReport,
    votes: Votes,
    mechanism: Mechanism,
    answered: NDArray[np.bool_] | None,
    half_even: bool,
    breakdown: bool,
) -> AnalysisReport:
    """The report with its per-query ledger, always kept (its rows are computed only when
    read, so ``plot_analysis`` needs no breakdown); the JSON holds its summary only when
    ``breakdown`` asks for it."""
    per_query = build_ledger(
        votes, mechanism, report, answered=answered, half_even=half_even, terms=report.terms
    )
    return replace(report, ledger=per_query, breakdown=breakdown)


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
    need_neighbour: bool = False,
) -> AnalysisReport:
    """Account a run and convert it, without a release: the core of ``analyze``.

    ``guaranteed`` False leaves out the joint bound (``report.guaranteed`` None), for callers
    that show none of it. ``terms``: the queries' terms when the caller has them (those of
    the queries seen), so that the votes are not walked again; ``need_neighbour``: with the
    answer step's q for every neighbour, in the same pass (``--pld``)."""
    if terms is None:
        terms = _query_terms(
            votes, mechanism, baseline, answered, half_even, progress, need_neighbour
        )
    result = account_terms(
        mechanism,
        terms,
        orders,
        num_queries=votes.num_queries,
        answered=answered,
        data_independent=data_independent,
    )
    joint: FloatArray | None = None
    if guaranteed and mechanism.threshold_step is not None and not data_independent:
        # Never below the paper's figure: both bound the run (the joint one without the
        # averaging), so their maximum does too, and the two never tell different stories.
        joint = np.maximum(guaranteed_rdp(mechanism, terms, orders), result.data_dependent)
    dependent = epsilon_result(orders, result.data_dependent, delta, conversion)
    joint_result: EpsilonResult | None = dependent if guaranteed else None
    if joint is not None:
        joint_result = epsilon_result(orders, joint, delta, conversion)
    moves = terms.threshold_sensitivity
    exact, exact_worst_case, exact_absent = _exact_bounds(
        mechanism, votes.num_queries, result.num_queries_seen, answered, delta, moves
    )
    return AnalysisReport(
        input=InputSummary.from_votes(votes),
        mechanism=mechanism.to_json_dict(),
        delta=delta,
        conversion=conversion.value,
        orders=orders,
        realized=result.realized,
        forced_data_independent=data_independent,
        expected_answered=result.expected_answered,
        num_queries_seen=result.num_queries_seen,
        data_dependent=dependent,
        data_independent=epsilon_result(orders, result.data_independent, delta, conversion),
        worst_case=epsilon_result(orders, result.worst_case, delta, conversion),
        exact=exact,
        guaranteed=joint_result,
        exact_worst_case=exact_worst_case,
        exact_absent=exact_absent,
        warnings=_warnings(votes, delta, moves, dependent),
        account=result,
        terms=terms,
        answered_mask=answered,
    )


def _query_terms(
    votes: Votes,
    mechanism: Mechanism,
    baseline: FloatArray | None,
    answered: NDArray[np.bool_] | None,
    half_even: bool,
    progress: Progress | None,
    need_neighbour: bool = False,
) -> QueryTerms:
    """One pass over the votes (shown as "accounting"): the per-query terms of the queries
    seen, every one or those of the answered mask."""
    with (progress or _no_progress)("accounting", votes.num_queries) as advance:
        return query_terms(
            votes.counts,
            mechanism,
            num_seen=None if answered is None else len(answered),
            baseline=baseline,
            half_even=half_even,
            need_neighbour=need_neighbour,
            progress=advance,
        )


def _exact_bounds(
    mechanism: Mechanism,
    num_queries: int,
    seen: int,
    answered: NDArray[np.bool_] | None,
    delta: float,
    moves: int,
) -> tuple[ExactBound | None, ExactBound | None, str | None]:
    """The exact bound of the run (the queries it saw and answered) and of the worst case
    (every query answered): the same bound when the run answered every query; None for
    both where the steps' parts have no exact joint account, and why."""
    answered_count = seen if answered is None else int(np.count_nonzero(answered))
    exact, absent = exact_or_reason(mechanism, seen, answered_count, delta, moves)
    if (seen, answered_count) == (num_queries,) * 2:
        return exact, exact, absent
    worst, worst_absent = exact_or_reason(mechanism, num_queries, num_queries, delta, moves)
    return exact, worst, absent or worst_absent


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
    epsilon is the analysis' own number.
    """
    checks.release(order, beta, sigma_ss)
    terms = report.terms if report.terms is not None and report.terms.logq is not None else None
    # The analysis composed every order of its grid: an order given there is read, not redone.
    index: int | None = report.data_dependent.order_index
    if order is not None:
        (found,) = np.nonzero(report.orders == order)
        index = int(found[0]) if found.size else None
    steps = None if index is None or report.account is None else report.account.steps
    with (progress or _no_progress)("smooth sensitivity", votes.num_queries) as advance:
        return gnss_release(
            votes.counts,
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


def pld_choice(
    pld: bool | str | None, mechanism: Mechanism | None = None, *, data_independent: bool = False
) -> str | None:
    """``pld=`` as a method of the privacy-loss-distribution account: None (not asked),
    "q-bound" (True) or "exact"; refused before any work with ``data_independent`` (the
    figure is a data-dependent one) or for a ``mechanism`` it does not cover."""
    if pld is None or pld is False:
        return None
    if pld is not True and not (isinstance(pld, str) and pld in METHODS):
        raise UsageError(f"{given('pld', pld)}: expected True (the q-bound pairs) or 'exact'")
    if data_independent:
        raise UsageError(
            f"{option('pld')} is a data-dependent figure; {option('data-independent')} "
            "forces data-independent bounds"
        )
    method = "q-bound" if pld is True else str(pld)
    if mechanism is not None:
        check_pld(mechanism, method)
    return method


def with_pld(
    report: AnalysisReport,
    votes: Votes,
    mechanism: Mechanism,
    method: str | None,
    progress: Progress | None,
) -> AnalysisReport:
    """The analysis with its data-dependent epsilon from privacy-loss distributions
    (``method``: see :func:`pld_choice`; None leaves the report as it is)."""
    if method is None:
        return report
    assert report.terms is not None and report.terms.logq is not None  # pld_choice's rule
    seen = report.terms.num_seen
    with (progress or _no_progress)("privacy-loss distributions", seen) as advance:
        figure = pld_figure(
            votes.counts, mechanism, report.terms, report.delta, method, advance=advance
        )
    return replace(report, data_dependent_pld=figure)

"""The Python API: what each command computes, as functions that return reports.

``import pate_cli as pate`` exposes these names (see ``pate_cli.__init__`` and the README's
"Python API"). They read, validate and compute exactly as the command line does, and
return frozen reports whose ``to_dict()`` is what the matching command prints with
``--json``. They never print, never exit, and never import typer, rich or matplotlib; a
user mistake raises ``InputError`` or ``UsageError`` (both ``ValueError``s) with the
command line's one-line message.

Long passes report progress through ``progress``: a callable ``progress(description,
total)`` returning a context manager that yields ``advance(n)`` (or None); the command
line gives a Rich bar, a notebook may give tqdm's.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from contextlib import AbstractContextManager, nullcontext
from dataclasses import replace
from typing import Any

import numpy as np
from numpy.typing import ArrayLike, NDArray

from pate_cli.accounting import Conversion, account_terms, epsilon_result, query_terms
from pate_cli.comparison import CompareReport, SortColumn, compare_rows, edge_warning, sort_rows
from pate_cli.errors import UsageError
from pate_cli.ledger import build_ledger
from pate_cli.mechanisms import LNMax, Mechanism
from pate_cli.orders import parse_orders
from pate_cli.release import ConditionError, GnssRelease, gnss_release
from pate_cli.report import AnalysisReport, InputSummary, SmoothSensitivityReport
from pate_cli.votes import VoteFormat, Votes, load_answered_mask, load_baseline
from pate_cli.votes import load_votes as _load_votes

FloatArray = NDArray[np.float64]
Progress = Callable[[str, int], AbstractContextManager[Callable[[int], None] | None]]
"""progress(description, total) -> a context manager yielding advance(done), or None."""
PathLike = str | os.PathLike[str]


def _no_progress(description: str, total: int) -> AbstractContextManager[None]:
    return nullcontext()


# ---------------------------------------------------------------------------
# Inputs


def load_votes(
    path: PathLike,
    *,
    fmt: str | VoteFormat = "auto",
    num_classes: int | None = None,
    teachers: int | None = None,
    queries: int | None = None,
    indices: PathLike | None = None,
) -> Votes:
    """Read teacher votes as the command line's VOTES argument does.

    Args:
        path: a .npy (or an .npz holding one array) of counts (queries x classes), labels
            (teachers x queries) or probs (teachers x queries x classes).
        fmt: "auto" (detect, and say so in the report), "counts", "labels" or "probs".
        num_classes: the class count of labels.
        teachers: the number of teachers M (default: from the data).
        queries: keep the first N queries (after ``indices``).
        indices: a .npy of query indices to keep, in order.

    Raises:
        InputError: the file cannot be read one way only, or is invalid.
        UsageError: a parameter outside its domain.
    """
    try:
        vote_format = VoteFormat(fmt)
    except ValueError:
        choices = ", ".join(f.value for f in VoteFormat)
        raise UsageError(f"fmt {fmt!r}: expected one of {choices}") from None
    return _load_votes(
        os.fspath(path),
        fmt=vote_format,
        num_classes=num_classes,
        teachers=teachers,
        queries=queries,
        indices=None if indices is None else os.fspath(indices),
    )


def _votes(votes: Votes | PathLike) -> Votes:
    return votes if isinstance(votes, Votes) else load_votes(votes)


def _orders(orders: str | ArrayLike | None) -> FloatArray:
    if orders is None or isinstance(orders, str):
        return parse_orders(orders)
    array = np.array(orders, dtype=np.float64).reshape(-1)
    if array.size == 0 or not np.all(np.isfinite(array)) or np.any(array <= 1):
        raise UsageError("orders: expected finite Renyi orders, each greater than 1")
    return array


def _conversion(conversion: str | Conversion) -> Conversion:
    try:
        return Conversion(conversion)
    except ValueError:
        choices = ", ".join(c.value for c in Conversion)
        raise UsageError(f"conversion {conversion!r}: expected one of {choices}") from None


def check_delta(delta: float) -> None:
    """delta must lie strictly between 0 and 1."""
    if not 0 < delta < 1:
        raise UsageError(f"--delta {delta}: expected a number strictly between 0 and 1")


def run_inputs(
    votes: Votes, baseline: PathLike | None, answered: PathLike | None
) -> tuple[FloatArray | None, NDArray[np.bool_] | None]:
    """A baseline and an answered mask, read and checked against the selected votes."""
    return (
        None if baseline is None else load_baseline(os.fspath(baseline), votes),
        None if answered is None else load_answered_mask(os.fspath(answered), votes.num_queries),
    )


def summary(votes: Votes) -> InputSummary:
    """What was read and how: the ``input`` block of every report."""
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


# ---------------------------------------------------------------------------
# The analysis and its release


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
) -> AnalysisReport:
    """Account a run and convert it, without a release: the core of ``analyze``."""
    with (progress or _no_progress)("accounting", votes.num_queries) as advance:
        terms = query_terms(
            votes.counts,
            mechanism,
            num_seen=None if answered is None else len(answered),
            baseline=baseline,
            half_even=half_even,
            progress=advance,
        )
    result = account_terms(
        mechanism,
        terms,
        orders,
        num_queries=votes.num_queries,
        answered=answered,
        data_independent=data_independent,
    )
    dependent = epsilon_result(orders, result.data_dependent, delta, conversion)
    warnings = list(votes.warnings)
    if dependent.at_grid_edge:
        warnings.append(
            f"the best order {dependent.order:g} is at the edge of the order grid; "
            "extend --orders to be sure the minimum is inside it"
        )
    return AnalysisReport(
        input=summary(votes),
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
        warnings=tuple(warnings),
        account=result,
        terms=terms,
        answered_mask=answered,
    )


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
    seed: int | None = None,
    reference_local_sensitivity: bool = False,
    skip_conditions: bool = False,
    half_even: bool = False,
    progress: Progress | None = None,
) -> GnssRelease:
    """The GNSS release at the analysis' best data-dependent order (or ``order``).

    Reuses the analysis' per-query terms and step costs, so the release's data-dependent
    epsilon is the analysis' own number.
    """
    if order is not None and not (np.isfinite(order) and order > 1):
        raise UsageError(f"--order {order}: expected a finite Renyi order greater than 1")
    terms = report.terms if report.terms is not None and report.terms.logq is not None else None
    steps = None if order is not None or report.account is None else report.account.steps
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
            seed=fresh_seed() if seed is None else seed,
            strict=not reference_local_sensitivity,
            skip_conditions=skip_conditions,
            half_even=half_even,
            terms=terms,
            steps=steps,
            order_index=report.data_dependent.order_index,
            progress=advance,
        )


def fresh_seed() -> int:
    """A seed drawn from the operating system's entropy."""
    return int(np.random.SeedSequence().entropy)  # type: ignore[arg-type]


def analyze(
    votes: Votes | PathLike,
    mechanism: Mechanism,
    *,
    delta: float,
    orders: str | ArrayLike | None = None,
    conversion: str | Conversion = "classic",
    baseline: PathLike | None = None,
    answered: PathLike | None = None,
    data_independent: bool = False,
    release: bool = True,
    seed: int | None = None,
    beta: float | None = None,
    sigma_ss: float | None = None,
    reference_local_sensitivity: bool = False,
    half_even: bool = False,
    breakdown: bool = False,
    progress: Progress | None = None,
) -> AnalysisReport:
    """What ``pate analyze`` computes: the cost per order, at the best order, and the release.

    Args:
        votes: votes from ``load_votes``, or a path read with its defaults.
        mechanism: ``GNMax``, ``ConfidentGNMax``, ``InteractiveGNMax`` or ``LNMax``.
        delta: target delta, in (0, 1).
        orders: Renyi orders (an array, or the command line's text); default the 298 of
            the 2018 reference.
        conversion: "classic" (the 2018 paper) or "improved".
        baseline: Interactive-GNMax's baseline file (queries x classes).
        answered: an answered mask written by ``pate aggregate``: account the realised run.
        data_independent: force data-independent bounds.
        release: add the GNSS release of the data-dependent epsilon (GNMax family).
        seed: the release's seed (default: drawn from the operating system's entropy).
        beta: fix the release's smoothness (default: the reference's choice on the votes).
        sigma_ss: fix the release's noise multiplier (default: as beta).
        reference_local_sensitivity: the 2018 reference's local sensitivity, which can be
            below the truth (to reproduce its numbers).
        half_even: round the threshold statistic half to even, as the reference.
        breakdown: add the per-query ledger (``report.ledger``) and its summary by teacher
            agreement (``breakdown`` in the JSON), as ``--breakdown``.
        progress: see the module docstring.

    Returns:
        The report; ``to_dict()`` is ``pate analyze --json``.
    """
    check_delta(delta)
    votes = _votes(votes)
    grid = _orders(orders)
    kind = _conversion(conversion)
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
    )
    if release:
        report = _with_release(
            votes,
            mechanism,
            report,
            baseline=baseline_array,
            answered=answered_mask,
            data_independent=data_independent,
            seed=seed,
            beta=beta,
            sigma_ss=sigma_ss,
            reference_local_sensitivity=reference_local_sensitivity,
            half_even=half_even,
            progress=progress,
        )
    if breakdown:
        per_query = build_ledger(
            votes,
            mechanism,
            report,
            answered=answered_mask,
            half_even=half_even,
            terms=report.terms,
        )
        report = replace(report, ledger=per_query)
    return report


def _with_release(
    votes: Votes,
    mechanism: Mechanism,
    report: AnalysisReport,
    *,
    baseline: FloatArray | None,
    answered: NDArray[np.bool_] | None,
    data_independent: bool,
    seed: int | None,
    beta: float | None,
    sigma_ss: float | None,
    reference_local_sensitivity: bool,
    half_even: bool,
    progress: Progress | None,
) -> AnalysisReport:
    """The analysis with its ``release`` block: the GNSS release, or why there is none."""
    notes: tuple[str, ...] = ()
    outcome: dict[str, Any]
    if isinstance(mechanism, LNMax):
        outcome = {"released": False, "reason": "smooth sensitivity covers the GNMax family"}
    elif data_independent:
        outcome = {"released": False, "reason": "data-independent bounds were forced"}
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
                seed=seed,
                reference_local_sensitivity=reference_local_sensitivity,
                half_even=half_even,
                progress=progress,
            )
            outcome = gnss.to_json_dict()
            notes = gnss.warnings
        except ConditionError as error:
            outcome = {"released": False, "reason": error.message}
    return replace(report, release=outcome, warnings=report.warnings + notes)


def smooth_sensitivity(
    votes: Votes | PathLike,
    mechanism: Mechanism,
    *,
    delta: float,
    order: float | None = None,
    orders: str | ArrayLike | None = None,
    conversion: str | Conversion = "classic",
    baseline: PathLike | None = None,
    answered: PathLike | None = None,
    beta: float | None = None,
    sigma_ss: float | None = None,
    seed: int | None = None,
    skip_conditions: bool = False,
    reference_local_sensitivity: bool = False,
    half_even: bool = False,
    progress: Progress | None = None,
) -> SmoothSensitivityReport:
    """What ``pate smooth-sensitivity`` computes: the GNSS release of the data-dependent epsilon.

    Arguments as ``analyze``; ``order`` fixes the release's order (default: the best
    data-dependent one), ``skip_conditions`` computes it where C5/C6 fail.

    Raises:
        UsageError: LNMax, or a release parameter outside its domain.
        ConditionError: C5 (or, with ``reference_local_sensitivity``, C6) fails or cannot
            be checked at the order, without ``skip_conditions``.
    """
    check_delta(delta)
    votes = _votes(votes)
    if isinstance(mechanism, LNMax):
        raise UsageError("smooth-sensitivity covers gnmax, confident-gnmax and interactive-gnmax")
    grid = _orders(orders)
    kind = _conversion(conversion)
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
    )
    gnss = release_of(
        votes,
        mechanism,
        analysis,
        order=order,
        baseline=baseline_array,
        answered=answered_mask,
        beta=beta,
        sigma_ss=sigma_ss,
        seed=seed,
        reference_local_sensitivity=reference_local_sensitivity,
        skip_conditions=skip_conditions,
        half_even=half_even,
        progress=progress,
    )
    return SmoothSensitivityReport(
        input=summary(votes),
        mechanism=mechanism.to_json_dict(),
        delta=delta,
        conversion=kind.value,
        realized=answered_mask is not None,
        release=gnss.to_json_dict(),
        warnings=votes.warnings + gnss.warnings,
        analysis=analysis,
        gnss=gnss,
    )


def compare(
    votes: Votes | PathLike,
    mechanisms: Sequence[Mechanism],
    *,
    delta: float,
    orders: str | ArrayLike | None = None,
    conversion: str | Conversion = "classic",
    baseline: PathLike | None = None,
    sort: str | SortColumn = "epsilon",
    half_even: bool = False,
    max_epsilon: float | None = None,
) -> CompareReport:
    """What ``pate compare`` computes: each setting's expected cost, best first.

    Each row has exactly the numbers ``analyze`` gives for that setting.
    """
    check_delta(delta)
    votes = _votes(votes)
    if not mechanisms:
        raise UsageError("mechanisms: expected at least one mechanism to compare")
    grid = _orders(orders)
    kind = _conversion(conversion)
    try:
        column = SortColumn(sort)
    except ValueError:
        choices = ", ".join(c.value for c in SortColumn)
        raise UsageError(f"sort {sort!r}: expected one of {choices}") from None
    baseline_array, _ = run_inputs(votes, baseline, None)
    rows = sort_rows(
        compare_rows(
            votes.counts,
            list(mechanisms),
            grid,
            delta,
            kind,
            baseline=baseline_array,
            half_even=half_even,
        ),
        column,
    )
    return CompareReport(
        input=summary(votes),
        delta=delta,
        conversion=kind.value,
        orders=grid,
        sort=column,
        rows=tuple(rows),
        max_epsilon=max_epsilon,
        warnings=(*votes.warnings, *edge_warning(rows)),
    )

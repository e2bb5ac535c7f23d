"""The Python API: what each command computes, as functions that return reports.

``import pate_cli as pate`` exposes these names (see ``pate_cli.__init__`` and the README's
"Python API"). They read, validate and compute exactly as the command line does, and
return frozen reports whose ``to_dict()`` is what the matching command prints with
``--json``. They never print, never exit, and never import typer, rich or matplotlib; a
user mistake raises ``InputError`` or ``UsageError`` (both ``ValueError``s) with the
command line's one-line message, naming the parameter as the caller wrote it.

Parameters the entry points share (each function's docstring lists only its own):

- ``votes``: votes from ``load_votes``, or a path or an array read as ``load_votes`` reads
  it with ``format=``, ``teachers=``, ``num_classes=``, ``member=`` and ``candidates=``.
- ``delta``: the target delta, in (0, 1). ``orders``: Renyi orders (an array, or the
  command line's text; default ``DEFAULT_ORDERS``, 1.1 to 1.75 then the 298 of the 2018
  reference). ``conversion``:
  ``"classic"`` (the 2018 paper) or ``"improved"``.
- ``baseline``: Interactive-GNMax's baseline (queries x classes); ``answered``: ``pate
  aggregate``'s answered mask, to account the realised run (each a file or an array).
- ``seed``: a public seed, for experiments (the report then says the outputs are not
  private), or a ``numpy.random.Generator``; ``seed_file``: a seed file that keeps the
  noise reproducible and private (created, mode 0600, when missing; docs/cli.md,
  "Secrets"). Without either, the noise comes from OS entropy and is never kept.
- ``beta``, ``sigma_ss``: fix the GNSS release's smoothness and noise multiplier (default:
  the reference's choice on the votes); ``reference_local_sensitivity``: the 2018
  reference's local sensitivity, which can be below the truth (to reproduce its numbers);
  ``walk_local_sensitivity``: the exact walk of every histogram instead of the default
  tabulated bound (never below it, a few hundredths of a percent above on real votes);
  ``half_even``: round the threshold statistic half to even, as the reference.
- ``max_epsilon``: a budget; ``report.gate`` says whether the ``gate_on`` figure
  (``GateOn`` or its value; ``"publishable"`` by default: the smallest publishable figure
  not drawn at random) is within it.
- ``budget``: a ``Budget`` or its path, charged the run's account as ``--budget`` does.
- ``pld`` (analyze, compare): True or ``"exact"``, as ``--pld [exact]`` (docs/cli.md).
- ``progress``: for long passes, a callable ``progress(description, total)`` returning a
  context manager that yields ``advance(n)`` (or None); the command line gives a Rich bar,
  a notebook may give tqdm's.
- ``engine`` (analyze, smooth_sensitivity, compare, aggregate): ``"dask"`` runs the passes
  over the queries on a Dask cluster, a local one of ``workers`` processes or the one at
  ``scheduler``, with the same figures and labels (``pate_cli.engines``; docs/cli.md, "Beyond
  one machine"); the report's ``engine`` names it.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from dataclasses import replace
from functools import partial
from typing import TYPE_CHECKING, Any, TypeVar

import numpy as np
from numpy.typing import ArrayLike

from pate_cli.accountant.figures import delta_warnings
from pate_cli.budget import Budget
from pate_cli.choices import Conversion, GateOn
from pate_cli.common import checks
from pate_cli.common.spelling import options as options_of
from pate_cli.engines import EngineChoice, engine_choice, running
from pate_cli.errors import UsageError
from pate_cli.files.seeds import noise_source
from pate_cli.jobs.aggregation import NOISE_BLOCK, AggregateResult, aggregate_votes
from pate_cli.jobs.analysis import (
    Progress,
    pld_choice,
    run_analyze,
    run_inputs,
    run_smooth_sensitivity,
)
from pate_cli.jobs.arguments import read_votes, reading, release_noise
from pate_cli.jobs.comparison import (
    CompareReport,
    SortColumn,
    compare_rows,
    edge_warning,
    sort_rows,
)
from pate_cli.jobs.inspection import InspectReport, inspect_reading
from pate_cli.mechanisms import Mechanism, as_mechanism, is_mechanism
from pate_cli.orders import as_orders, fixed_order
from pate_cli.release.model import bound_of, release_mode
from pate_cli.reports.models import AnalysisReport, InputSummary, SmoothSensitivityReport
from pate_cli.reports.publishable import as_gate_on, check_gate_choice, gate_warnings
from pate_cli.votes import Input, VoteFormat, Votes, as_vote_format
from pate_cli.votes import load_votes as _load_votes

if TYPE_CHECKING:
    from pate_cli.jobs.audit import AuditReport

PathLike = str | os.PathLike[str]
Reported = TypeVar("Reported", AnalysisReport, SmoothSensitivityReport, AggregateResult)


# ---------------------------------------------------------------------------
# Inputs


def load_votes(
    path: Input,
    *,
    fmt: str | VoteFormat | None = None,
    format: str | VoteFormat | None = None,
    num_classes: int | None = None,
    teachers: int | None = None,
    queries: int | None = None,
    indices: Input | None = None,
    member: str | None = None,
    candidates: Input | None = None,
) -> Votes:
    """Read teacher votes as the command line's VOTES argument does, from a file or an array.

    Args:
        path: a .npy (or an .npz holding one array), or the array itself (a numpy array or
            nested lists), of counts (queries x classes), labels (teachers x queries) or
            probs (teachers x queries x classes); an array is read exactly as its file.
        fmt: "auto" (the default: detect, and say so in the report), "counts", "labels" or
            "probs".
        format: the same as ``fmt`` (``--format``); both given must agree.
        num_classes: the class count of labels.
        teachers: the number of teachers M (default: from the data); for labels, it picks
            the layout of M teachers (teachers x queries, or saved queries x teachers).
        queries: keep the first N queries (after ``indices``).
        indices: a .npy, or an array, of query indices to keep, in order.
        member: the array of an .npz to read, by its ``numpy.savez`` keyword (``--member``;
            needed when the .npz holds several arrays).
        candidates: ``--candidates``, chosen without the private votes: a .npy or an array
            of each query's number of classes (1-D: classes 0 .. n - 1), or of its candidate
            token ids (2-D, queries x k, -1 padding), or a sparse queries x vocabulary
            matrix (a ``save_npz`` .npz, or in memory) marking them with its non-zeros. With
            token ids the votes outside them are dropped (one warning), the classes are the
            candidates by increasing id, and ``aggregate`` releases token ids.

    Raises:
        InputError: the votes cannot be read one way only, or are invalid.
        UsageError: a parameter outside its domain.
    """
    vote_format = as_vote_format(fmt, format)
    return _load_votes(
        path,
        fmt=vote_format,
        num_classes=num_classes,
        teachers=teachers,
        queries=queries,
        indices=indices,
        member=member,
        candidates=candidates,
    )


def analyze(
    votes: Votes | Input,
    mechanism: Mechanism,
    *,
    format: str | VoteFormat | None = None,
    teachers: int | None = None,
    num_classes: int | None = None,
    member: str | None = None,
    candidates: Input | None = None,
    delta: float,
    orders: str | ArrayLike | None = None,
    conversion: str | Conversion = "classic",
    baseline: Input | None = None,
    answered: Input | None = None,
    data_independent: bool = False,
    release: bool | str = "expected",
    seed: int | np.random.Generator | None = None,
    seed_file: PathLike | None = None,
    beta: float | None = None,
    sigma_ss: float | None = None,
    reference_local_sensitivity: bool = False,
    walk_local_sensitivity: bool = False,
    half_even: bool = False,
    breakdown: bool = False,
    max_epsilon: float | None = None,
    gate_on: str | GateOn = GateOn.PUBLISHABLE,
    progress: Progress | None = None,
    budget: Budget | PathLike | None = None,
    pld: bool | str = False,
    engine: str = "local",
    workers: int | None = None,
    scheduler: str | None = None,
) -> AnalysisReport:
    """What ``pate analyze`` computes: the cost per order, at the best order, and the release;
    ``to_dict()`` of the report is ``pate analyze --json``.

    Args (the others: the module docstring):
        data_independent: force data-independent bounds.
        release: the GNSS release: ``"expected"`` (the default) its parameters, cost and expected
            epsilon, no noise drawn (``seed``, ``seed_file`` refused); ``"sample"`` (True, as
            ``pate analyze``) also draws its sample; False: none.
        breakdown: the JSON's ``breakdown`` (``--breakdown``), the ledger's summary by teacher
            agreement; ``report.ledger`` (``plot_analysis``'s) is always there, read lazily.
    """
    choice = engine_choice(engine, workers, scheduler)
    checks.max_epsilon(max_epsilon)
    on, mode = as_gate_on(gate_on), release_mode(release)
    _check_analysis_gate(on, mode, data_independent)
    checks.release(fixed_order(orders, mode and not data_independent), beta, sigma_ss, "orders")
    noise = release_noise(mode, seed, seed_file)
    mechanism = as_mechanism(mechanism)
    votes = read_votes(votes, reading(format, teachers, num_classes, member, candidates))
    job = partial(
        run_analyze,
        votes,
        mechanism,
        delta=delta,
        orders=orders,
        conversion=conversion,
        baseline=baseline,
        answered=answered,
        data_independent=data_independent,
        mode=mode,
        noise=noise,
        seed=seed,
        seed_file=seed_file,
        beta=beta,
        sigma_ss=sigma_ss,
        local_sensitivity=bound_of(reference_local_sensitivity, walk_local_sensitivity),
        half_even=half_even,
        breakdown=breakdown,
        max_epsilon=max_epsilon,
        gate_on=on,
        progress=progress,
        budget=budget,
        pld=pld,
    )
    return _run_on(choice, job)


def _check_analysis_gate(on: GateOn, mode: str | None, data_independent: bool) -> None:
    """Refuse, before any work, a gate on a figure this analysis cannot compute."""
    check_gate_choice(
        on,
        releases=mode is not None and not data_independent,
        what=f"this analysis ({options_of('no-release', 'data-independent', joined='or')})",
    )


def smooth_sensitivity(
    votes: Votes | Input,
    mechanism: Mechanism,
    *,
    format: str | VoteFormat | None = None,
    teachers: int | None = None,
    num_classes: int | None = None,
    member: str | None = None,
    candidates: Input | None = None,
    delta: float,
    order: float | None = None,
    orders: str | ArrayLike | None = None,
    conversion: str | Conversion = "classic",
    baseline: Input | None = None,
    answered: Input | None = None,
    beta: float | None = None,
    sigma_ss: float | None = None,
    seed: int | np.random.Generator | None = None,
    seed_file: PathLike | None = None,
    skip_conditions: bool = False,
    reference_local_sensitivity: bool = False,
    walk_local_sensitivity: bool = False,
    half_even: bool = False,
    max_epsilon: float | None = None,
    gate_on: str | GateOn = GateOn.PUBLISHABLE,
    progress: Progress | None = None,
    budget: Budget | PathLike | None = None,
    engine: str = "local",
    workers: int | None = None,
    scheduler: str | None = None,
) -> SmoothSensitivityReport:
    """What ``pate smooth-sensitivity`` computes: the GNSS release of the data-dependent epsilon.

    Arguments as ``analyze``; ``order`` fixes the release's order (default: the best
    data-dependent one), ``skip_conditions`` computes it where C5/C6 fail; the gate checks
    the smallest publishable figure by default, as ``analyze``'s.

    Raises:
        UsageError: a release parameter outside its domain, or LNMax with
            ``reference_local_sensitivity`` (the reference's bounds are GNMax's).
        ConditionError: C5 (or, with ``reference_local_sensitivity``, C6) fails or cannot
            be checked at the order, without ``skip_conditions`` (GNMax family; LNMax's
            bound needs no condition).
    """
    choice = engine_choice(engine, workers, scheduler)
    checks.release(order, beta, sigma_ss)
    checks.max_epsilon(max_epsilon)
    on = as_gate_on(gate_on)
    noise = noise_source(seed, seed_file)
    mechanism = as_mechanism(mechanism)
    votes = read_votes(votes, reading(format, teachers, num_classes, member, candidates))
    job = partial(
        run_smooth_sensitivity,
        votes,
        mechanism,
        delta=delta,
        order=order,
        orders=orders,
        conversion=conversion,
        baseline=baseline,
        answered=answered,
        beta=beta,
        sigma_ss=sigma_ss,
        noise=noise,
        seed=seed,
        seed_file=seed_file,
        skip_conditions=skip_conditions,
        local_sensitivity=bound_of(reference_local_sensitivity, walk_local_sensitivity),
        half_even=half_even,
        max_epsilon=max_epsilon,
        gate_on=on,
        progress=progress,
        budget=budget,
    )
    return _run_on(choice, job)


def compare(
    votes: Votes | Input,
    mechanisms: Sequence[Mechanism],
    *,
    format: str | VoteFormat | None = None,
    teachers: int | None = None,
    num_classes: int | None = None,
    member: str | None = None,
    candidates: Input | None = None,
    delta: float,
    orders: str | ArrayLike | None = None,
    conversion: str | Conversion = "classic",
    baseline: Input | None = None,
    sort: str | SortColumn = "publishable",
    half_even: bool = False,
    max_epsilon: float | None = None,
    gate_on: str | GateOn = GateOn.PUBLISHABLE,
    pld: bool | str = False,
    engine: str = "local",
    workers: int | None = None,
    scheduler: str | None = None,
) -> CompareReport:
    """What ``pate compare`` computes: each setting's expected cost, best first.

    Each row has exactly the numbers ``analyze`` gives for that setting. With
    ``max_epsilon``, each row says whether its ``gate_on`` figure is within it and
    ``report.gate`` whether the best row's is. ``pld`` (as ``analyze``'s) adds each row's
    privacy-loss-distribution figure where its mechanism has one.
    """
    choice = engine_choice(engine, workers, scheduler)
    checks.delta(delta)
    checks.max_epsilon(max_epsilon)
    on = as_gate_on(gate_on)
    check_gate_choice(on, releases=False, what="compare")
    votes = read_votes(votes, reading(format, teachers, num_classes, member, candidates))
    if isinstance(mechanisms, str) or is_mechanism(mechanisms):
        raise TypeError(f"mechanisms={mechanisms!r}: expected a list of mechanism objects")
    mechanisms = [as_mechanism(m, "mechanisms[]") for m in mechanisms]
    if not mechanisms:
        raise UsageError("mechanisms: expected at least one mechanism to compare")
    grid = as_orders(orders)
    kind = checks.conversion(conversion)
    column = checks.choice(SortColumn, sort, "sort")
    baseline_array, _ = run_inputs(votes, baseline, None)
    with running(choice) as used:
        found = compare_rows(
            votes.grouped,
            list(mechanisms),
            grid,
            delta,
            kind,
            baseline=baseline_array,
            half_even=half_even,
            pld=pld_choice(pld),
        )
    rows = sort_rows(found, column)
    return CompareReport(
        input=InputSummary.from_votes(votes),
        delta=delta,
        conversion=kind.value,
        orders=grid,
        sort=column,
        rows=tuple(rows),
        max_epsilon=max_epsilon,
        gate_on=on,
        warnings=(
            *votes.warnings,
            *delta_warnings(delta, votes.num_queries),
            *edge_warning(rows),
            *gate_warnings(on, _gated_mechanism(mechanisms), max_epsilon),
        ),
        engine=None if used is None else used.to_dict(),
    )


def _run_on(choice: EngineChoice, job: Callable[[], Reported]) -> Reported:
    """``job()`` on the engine ``choice`` names, its report naming the engine where it is not
    this process."""
    with running(choice) as used:
        report = job()
    return report if used is None else replace(report, engine=used.to_dict())


def _gated_mechanism(mechanisms: Sequence[Mechanism]) -> dict[str, Any]:
    """For the gate's warning, the rows' mechanism block: a row's that may leave queries
    unanswered when there is one (its figures then depend on the votes), else the first's."""
    thresholded = [m for m in mechanisms if not m.answers_every_query]
    return (thresholded or list(mechanisms))[0].to_json_dict()


def inspect(
    votes: Votes | Input,
    *,
    format: str | VoteFormat | None = None,
    teachers: int | None = None,
    num_classes: int | None = None,
    member: str | None = None,
    candidates: Input | None = None,
) -> InspectReport:
    """What ``pate inspect`` computes: what a vote file is and how strongly teachers agree
    (``format``, ``teachers``, ``num_classes``, ``member``, ``candidates``: as ``load_votes``
    reads a path or an array)."""
    how = reading(format, teachers, num_classes, member, candidates)
    return inspect_reading(lambda: read_votes(votes, how))


def aggregate(
    votes: Votes | Input,
    mechanism: Mechanism,
    *,
    format: str | VoteFormat | None = None,
    teachers: int | None = None,
    num_classes: int | None = None,
    member: str | None = None,
    candidates: Input | None = None,
    delta: float,
    seed: int | np.random.Generator | None = None,
    seed_file: PathLike | None = None,
    orders: str | ArrayLike | None = None,
    conversion: str | Conversion = "classic",
    student_probs: Input | None = None,
    student_confidence: float = 1.0,
    true_labels: Input | None = None,
    max_answered: int | None = None,
    max_queries: int | None = None,
    half_even: bool = False,
    max_epsilon: float | None = None,
    gate_on: str | GateOn = GateOn.PUBLISHABLE,
    progress: Progress | None = None,
    budget: Budget | PathLike | None = None,
    noise_block: int | None = NOISE_BLOCK,
    engine: str = "local",
    workers: int | None = None,
    scheduler: str | None = None,
) -> AggregateResult:
    """What ``pate aggregate`` computes, without writing a file.

    Returns the noisy labels (``.labels``, -1 where nothing was released), the answered
    mask (``.answered``) and the realised run's privacy (``.privacy``, an
    ``AnalysisReport``); see ``pate_cli.jobs.aggregation.aggregate_votes`` for the options.
    ``budget`` (a ``Budget`` or its path) is charged the run's account as ``--budget`` does:
    refused (``BudgetExceeded``, nothing returned) before any noise is drawn when it would
    exceed the limit, and appended under the budget's lock once the labels are drawn.
    ``noise_block``: the queries whose noise one block of streams draws (docs/cli.md,
    "Secrets"); None draws the whole run from one stream a purpose, as pate did before.
    """
    choice = engine_choice(engine, workers, scheduler)
    mechanism = as_mechanism(mechanism)
    votes = read_votes(votes, reading(format, teachers, num_classes, member, candidates))
    job = partial(
        aggregate_votes,
        votes,
        mechanism,
        delta=delta,
        seed=seed,
        seed_file=seed_file,
        orders=orders,
        conversion=conversion,
        student_probs=student_probs,
        student_confidence=student_confidence,
        true_labels=true_labels,
        max_answered=max_answered,
        max_queries=max_queries,
        half_even=half_even,
        max_epsilon=max_epsilon,
        gate_on=gate_on,
        progress=progress,
        budget=budget,
        noise_block=noise_block,
    )
    return _run_on(choice, job)


def audit(
    mechanism: Mechanism,
    *,
    delta: float,
    votes: Votes | Input | None = None,
    query: int | None = None,
    queries: int = 1,
    runs: int = 1_000_000,
    alpha: float = 0.05,
    claim: float | None = None,
    seed: int | None = None,
    classes: int = 2,
    test_from: str = "law",
    progress: Progress | None = None,
    format: str | VoteFormat | None = None,
    teachers: int | None = None,
    num_classes: int | None = None,
    member: str | None = None,
) -> AuditReport:
    """What ``pate audit`` computes: a lower bound on the mechanism's epsilon at ``delta``
    from ``runs`` draws of its own sampler on each of two neighbouring histograms, true with
    probability at least 1 - ``alpha``, beside the upper figures claimed for the same pair
    and number of ``queries`` (``claim``: one more, someone's); ``report.exceeds`` names
    those below the lower bound (docs/cli.md, "Auditing a mechanism").

    Without ``votes``, the pair is searched over histograms of ``classes`` classes; with
    them, it is query ``query`` (required) and its neighbour, and the figures are of
    private data. ``seed``: a public seed for a reproducible audit (default: OS entropy).
    ``test_from``: ``"law"`` (the pair and the test fixed from the mechanism's stated law,
    where it states one) or ``"draws"`` (from held-out draws of its sampler: for a sampler
    not trusted to follow its law).
    """
    from pate_cli.jobs.audit import run_audit  # its modules load when an audit runs

    mechanism = as_mechanism(mechanism)
    read = None
    if votes is not None:
        read = read_votes(votes, reading(format, teachers, num_classes, member, None))
    return run_audit(
        mechanism,
        delta=delta,
        votes=read,
        query=query,
        queries=queries,
        runs=runs,
        alpha=alpha,
        claim=claim,
        seed=seed,
        classes=classes,
        test_from=test_from,
        progress=progress,
    )

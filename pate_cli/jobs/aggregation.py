"""Run an aggregator on votes and account the realised run: the model of ``pate aggregate``.

:func:`aggregate_votes` draws the noisy labels with a mechanism's aggregator
(:mod:`pate_cli.mechanisms.samplers`: LNMax, GNMax, Confident-GNMax, Interactive-GNMax)
from a seed or a ``numpy.random.Generator``, then accounts the run twice:

- the realised cost, composed over the queries the run saw with the answered mask it drew
  (the threshold step on every query seen, the answer step on the answered ones);
- the expected cost of the same setting on all the queries, for comparison.

It also reports how often the released labels agree with the teachers' plurality vote and,
given true labels, how often they are right. The result is a frozen :class:`AggregateResult`;
its ``to_dict()`` is what ``pate aggregate --json`` prints. Nothing here writes a file: the
command writes the labels and the answered mask (each atomically), and names them in its
report through ``to_dict(output=..., answered_mask=...)``.

Parameter checks raise :class:`~pate_cli.errors.UsageError` with the command line's one-line
messages (which name the flags), and invalid arrays :class:`~pate_cli.errors.InputError`.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace
from functools import partial
from typing import Any

import numpy as np
from numpy.typing import ArrayLike, NDArray

from pate_cli.accountant.terms import FloatArray
from pate_cli.budget import Budget
from pate_cli.choices import Conversion, GateOn
from pate_cli.common import checks
from pate_cli.common.spelling import given, option, options
from pate_cli.core import compact
from pate_cli.core.compact import read_rows
from pate_cli.engines import current as current_engine
from pate_cli.errors import UsageError
from pate_cli.files.outputs import StrPath as PathLike
from pate_cli.files.seeds import Noise, noise_source
from pate_cli.jobs.analysis import Progress, analysis_report, budget_charge, charged
from pate_cli.mechanisms import Mechanism, by_name
from pate_cli.mechanisms.base import Run
from pate_cli.mechanisms.samplers import AggregationResult, apply_stop_conditions
from pate_cli.orders import as_orders
from pate_cli.reports.models import AggregateReport, AnalysisReport, InputSummary
from pate_cli.reports.publishable import (
    Gate,
    analysis_epsilons,
    apply_gate,
    as_gate_on,
    check_gate_choice,
    gate_warnings,
)
from pate_cli.reports.reprs import cost_fields, short_repr
from pate_cli.votes import Votes, load_student_probs, load_true_labels


@dataclass(frozen=True, eq=False)
class AggregateResult:
    """One aggregation run: the released labels and what they cost.

    The arrays are read-only. Shapes: labels (Q,); answered (L,), L = ``num_seen``.
    """

    mechanism: Mechanism
    """The aggregator that ran."""
    noise: Noise
    """Where the noise came from; its seed is shown only when it was public (``seed=N``)."""
    labels: NDArray[np.int64]
    """The released label of every query (a token id with candidate token ids, never a
    position among them); -1 where nothing was released (the aggregator abstained, or a
    stop condition ended the run before the query)."""
    answered: NDArray[np.bool_]
    """True where the teachers answered, one entry per query the run saw (a prefix of the
    queries): the mask the realised accounting composes, which ``analyze(answered=...)``
    and ``pate analyze --answered`` accept."""
    student_labelled: int
    """Queries where Interactive-GNMax released the student's own label."""
    agreement_with_plurality: float | None
    """Fraction of the released labels equal to the plurality vote; None if none was released."""
    accuracy: float | None
    """Fraction of the released labels equal to the true labels; None without true labels or
    released labels."""
    privacy: AnalysisReport
    """The realised run's cost: composed over the queries seen, with the answered mask."""
    expected_privacy: AnalysisReport
    """The expected cost of the same setting on every query."""
    budget: dict[str, Any] | None = None
    """The budget the run charged (``budget=``): its path, the total spent with this run,
    the limit and the number of charges; None without one."""
    noise_block: int | None = None
    """Queries a block of streams drew (``Noise.block``); None: one call, one stream each."""
    engine: dict[str, Any] | None = None
    """Where the blocks ran (``engine="dask"``: its name and workers); None: this process."""

    @property
    def input(self) -> InputSummary:
        """What was read and how it was interpreted."""
        return self.privacy.input

    @property
    def num_queries(self) -> int:
        """Q, the number of queries of the votes."""
        return int(self.labels.shape[0])

    @property
    def num_seen(self) -> int:
        """Queries processed before a stop condition (``max_answered``, ``max_queries``)."""
        return int(self.answered.shape[0])

    @property
    def num_answered(self) -> int:
        """Teacher answers: the queries whose cost includes the noisy-argmax step."""
        return int(np.count_nonzero(self.answered))

    @property
    def abstained(self) -> int:
        """Queries seen for which nothing was released."""
        return self.num_seen - self.num_answered - self.student_labelled

    @property
    def gate(self) -> Gate | None:
        """The budget gate's verdict on the realised run, when a limit was given."""
        return self.privacy.gate

    @property
    def warnings(self) -> tuple[str, ...]:
        """One-line notes for the user (from reading the votes and the realised accounting)."""
        return self.noise.notes + self.privacy.warnings

    def _repr_markdown_(self) -> str:
        """The run in a notebook (Jupyter renders Markdown)."""
        return self.to_report()._repr_markdown_()

    def to_report(
        self, *, output: str | None = None, answered_mask: str | None = None
    ) -> AggregateReport:
        """The report of ``pate aggregate``, naming the files the labels and the mask went to.

        Args:
            output: where the labels were written (None: nowhere).
            answered_mask: where the answered mask was written (None: nowhere).
        """
        return AggregateReport(
            input=self.input,
            mechanism=self.mechanism.to_json_dict(),
            noise=self.noise,
            num_queries=self.num_queries,
            num_seen=self.num_seen,
            answered=self.num_answered,
            student_labelled=self.student_labelled,
            output=output,
            answered_mask=answered_mask,
            agreement_with_plurality=self.agreement_with_plurality,
            accuracy=self.accuracy,
            privacy=self.privacy,
            expected_privacy=self.expected_privacy,
            warnings=self.warnings,
            gate=self.gate,
            budget=self.budget,
            noise_block=self.noise_block,
            engine=self.engine,
        )

    def to_dict(
        self, *, output: str | None = None, answered_mask: str | None = None
    ) -> dict[str, Any]:
        """Exactly what ``pate aggregate --json`` prints when the files are the ones named.

        ``output`` and ``answered_mask`` are the paths the labels and the mask were written
        to; they stay None (JSON null) for a run whose arrays were not written.
        """
        return self.to_report(output=output, answered_mask=answered_mask).to_dict()

    def __repr__(self) -> str:
        name, privacy = self.mechanism.to_json_dict()["name"], self.privacy
        return short_repr(
            "AggregateResult",
            **cost_fields(name, self.num_queries, privacy.publishable, privacy.data_dependent),
            seen=self.num_seen,
            answered=self.num_answered,
            accuracy=self.accuracy,
        )


# ---------------------------------------------------------------------------
# Parameters and arrays.


def check_parameters(
    *,
    max_answered: int | None = None,
    max_queries: int | None = None,
    student_confidence: float | None = None,
) -> None:
    """Check the run's parameters (those given; None skips a check).

    ``aggregate_votes`` runs these checks itself; the command runs them before it reads
    any file.

    Raises:
        UsageError: a stop condition below 1, a student confidence
            outside [0, 1]; the message names the caller's parameter (``pate_cli.common.spelling``).
    """
    for name, value in (("max-answered", max_answered), ("max-queries", max_queries)):
        if value is not None and value < 1:
            raise UsageError(f"{given(name, value)}: expected a whole number of at least 1")
    if student_confidence is not None and not 0 <= student_confidence <= 1:
        raise UsageError(
            f"{given('student-confidence', student_confidence)}: expected a number in [0, 1]"
        )


def _student_probs(
    value: ArrayLike | PathLike | None, votes: Votes, mechanism: Mechanism
) -> FloatArray | None:
    """The student's probabilities, from a file or an array, checked by the one rule
    (:func:`~pate_cli.votes.inputs.check_student_probs`); None when not given."""
    if value is None:
        if mechanism.needs_baseline:
            raise UsageError(f"{mechanism.name} needs the student's probabilities")
        return None
    if not mechanism.needs_baseline:
        takers = " or ".join(kind.name for kind in by_name().values() if kind.needs_baseline)
        raise UsageError(f"student probabilities go with {takers} only")
    return load_student_probs(value, votes)


def _true_labels(value: ArrayLike | PathLike | None, votes: Votes) -> NDArray[np.int64] | None:
    """True labels, from a file or an array, checked by the one rule
    (:func:`~pate_cli.votes.inputs.check_true_labels`); None when not given."""
    return None if value is None else load_true_labels(value, votes)


# ---------------------------------------------------------------------------
# The run.


NOISE_BLOCK = 1 << 16
"""Queries whose noise one block of streams draws (``Noise.block``): a run of at most this
many draws as one call of its aggregator, from the purposes' own streams."""


def _run(
    votes: Votes,
    mechanism: Mechanism,
    noise: Noise,
    student_probs: FloatArray | None,
    student_confidence: float,
    limits: dict[str, int | None],
    half_even: bool,
    noise_block: int | None = NOISE_BLOCK,
) -> AggregationResult:
    """Draw the noisy labels: the aggregator of ``mechanism`` on the votes, stopped by
    ``limits`` (``max_answered``, ``max_queries``). Past ``noise_block`` queries, a block at
    a time, each from its own streams (``Noise.block``), the stop conditions applied to the
    whole run (their prefix rule: ``samplers.apply_stop_conditions``); None: one call."""
    teachers, queries = votes.num_teachers, votes.num_queries
    if noise_block is not None:
        noise_block = checks.whole(noise_block, "noise-block", 1, 1 << 62)
    if noise_block is None or queries <= noise_block:
        run = Run(student_probs, student_confidence, teachers, half_even=half_even, **limits)
        return mechanism.run(votes.counts, noise, run)
    starts = range(0, queries, noise_block)

    def block(index: int) -> tuple[Any, ...]:
        rows = slice(starts[index], starts[index] + noise_block)
        probs = None if student_probs is None else student_probs[rows]
        run = Run(probs, student_confidence, teachers, None, None, half_even)
        return mechanism, votes.counts[rows], noise.block(index), run

    engine = current_engine()
    if engine is None:
        parts = [_run_block(*block(index)) for index in range(len(starts))]
    else:  # each block's noise is its own: the same labels wherever it is drawn
        parts = engine.map(_run_block, len(starts), block)
    return apply_stop_conditions(
        np.concatenate([part.labels for part in parts]),
        np.concatenate([part.answered for part in parts]),
        np.concatenate([part.branch for part in parts]),
        **limits,
    )


def _run_block(mechanism: Mechanism, counts: Any, noise: Noise, run: Run) -> AggregationResult:
    """One block's labels, drawn by its own streams (run here or on an engine's worker)."""
    return mechanism.run(counts, noise, run)


def aggregate_votes(
    votes: Votes,
    mechanism: Mechanism,
    *,
    delta: float,
    seed: int | np.random.Generator | None = None,
    seed_file: PathLike | None = None,
    orders: ArrayLike | str | None = None,
    conversion: Conversion | str = Conversion.CLASSIC,
    student_probs: ArrayLike | PathLike | None = None,
    student_confidence: float = 1.0,
    true_labels: ArrayLike | PathLike | None = None,
    max_answered: int | None = None,
    max_queries: int | None = None,
    half_even: bool = False,
    max_epsilon: float | None = None,
    gate_on: str | GateOn = GateOn.PUBLISHABLE,
    progress: Progress | None = None,
    budget: Budget | PathLike | None = None,
    noise_block: int | None = NOISE_BLOCK,
) -> AggregateResult:
    """What ``pate aggregate`` computes: noisy labels, and the cost of the run that drew them.

    Args:
        votes: votes from ``load_votes``.
        mechanism: ``GNMax``, ``ConfidentGNMax``, ``InteractiveGNMax`` or ``LNMax``.
        delta: target delta, in (0, 1).
        seed: a public integer seed (the same seed gives the same labels, byte for byte;
            the run is then reported as not private), or a ``numpy.random.Generator`` to
            draw from; default OS entropy, whose seed is never written anywhere.
        seed_file: a seed file that keeps the run reproducible and private (created, mode
            0600, when missing; see docs/cli.md, "Secrets"). Not with ``seed``.
        orders: Renyi orders (an array, or the command line's text); default
            ``DEFAULT_ORDERS``: 1.1 to 1.75, then the 298 of the 2018 reference.
        conversion: "classic" (the 2018 paper) or "improved".
        student_probs: Interactive-GNMax only (and required by it): the student's class
            probabilities, rows summing to 1 (or every row to M: M times them, a baseline on
            the votes' scale), as an array or a .npy/.npz path; both are checked by the
            same rule (``pate_cli.votes.inputs.check_student_probs``).
        student_confidence: Interactive-GNMax: release the student's label where its top
            probability exceeds this (gamma of Algorithm 2, 2018).
        true_labels: true class labels, one per query (array or path): report accuracy.
        max_answered: stop right after this many teacher answers.
        max_queries: process at most this many queries.
        half_even: round the threshold statistic half to even, as the 2018 reference does.
        max_epsilon: a budget for the realised run: ``result.gate`` says whether its
            ``gate_on`` figure (default publishable: the worst case) is within it; the
            command line releases nothing when it is not.
        gate_on: which epsilon the budget checks (not ``released``: nothing is).
        progress: reports the accounting passes (see :mod:`pate_cli.api`).
        budget: charged as ``pate_cli.api.aggregate`` says (before any noise is drawn).
        noise_block: queries a block of streams draws (``_run``); None: one stream a purpose.

    Returns the labels, the answered mask, the realised and the expected privacy cost; no
    file is written. ``to_dict()`` is ``pate aggregate --json``.

    Raises:
        UsageError: a parameter outside its domain, student probabilities missing for (or
            given to a mechanism other than) Interactive-GNMax, or a Generator on an engine.
        InputError: student probabilities or true labels of the wrong shape or values.

    Shapes: votes.counts (Q, C); student_probs (Q, C); true_labels (Q,).
    """
    _check_engine_seed(seed)
    options = {"max_queries": max_queries, "half_even": half_even}
    charge = budget_charge(budget, "aggregate", mechanism, votes, options, seed, seed_file)
    on = _check_run(delta, max_epsilon, gate_on, max_answered, max_queries, student_confidence)
    noise = noise_source(seed, seed_file)
    kind, grid = checks.conversion(conversion), as_orders(orders)
    probs = _student_probs(student_probs, votes, mechanism)
    truth = _true_labels(true_labels, votes)
    limits = {"max_answered": max_answered, "max_queries": max_queries}
    run = _run(votes, mechanism, noise, probs, student_confidence, limits, half_even, noise_block)
    baseline = None if probs is None else probs * votes.num_teachers
    report_of = partial(
        analysis_report, votes, mechanism, grid, delta, kind, baseline=baseline, half_even=half_even
    )
    expected, realised = _accounted(report_of, run, progress, max_epsilon, on)
    result = _result(votes, mechanism, noise, run, truth, realised, expected, noise_block)
    return charged(result, budget, charge, result.noise)


def _check_engine_seed(seed: object) -> None:
    """A caller's generator draws in turn, in one process: not its blocks on an engine."""
    if isinstance(seed, np.random.Generator) and current_engine() is not None:
        raise UsageError(
            f"{option('seed')}: a Generator draws in turn, in one process; with "
            f"{given('engine', 'dask')} give a number, a seed file or neither (OS entropy)"
        )


def _check_run(
    delta: float,
    max_epsilon: float | None,
    gate_on: str | GateOn,
    max_answered: int | None,
    max_queries: int | None,
    student_confidence: float,
) -> GateOn:
    """Check the run's parameters before anything is read or drawn; returns the figure the
    budget gate checks."""
    checks.delta(delta)
    checks.max_epsilon(max_epsilon)
    on = as_gate_on(gate_on)
    check_gate_choice(on, releases=False, what="aggregate")
    check_parameters(
        max_answered=max_answered,
        max_queries=max_queries,
        student_confidence=student_confidence,
    )
    return on


def _accounted(
    report_of: Callable[..., AnalysisReport],
    run: AggregationResult,
    progress: Progress | None,
    max_epsilon: float | None,
    on: GateOn,
) -> tuple[AnalysisReport, AnalysisReport]:
    """The expected cost of the setting on every query, and the realised run's: composed
    over the queries it saw with the answered mask it drew, and gated on ``max_epsilon``."""
    seen = run.num_seen
    mask = run.answered[:seen]
    expected = report_of(progress=progress)
    assert expected.terms is not None
    if seen == 0:
        raise UsageError(
            f"the run saw no query ({options('max-answered', 'max-queries', joined='or')} "
            "stopped it at once)"
        )
    # The realised run reads the same queries' terms: no second pass over the votes.
    realised = report_of(answered=mask, terms=expected.terms.rows(0, seen))
    realised = replace(
        realised,
        gate=apply_gate(analysis_epsilons(realised), max_epsilon, on),
        warnings=realised.warnings + gate_warnings(on, realised.mechanism, max_epsilon),
    )
    return expected, realised


def _result(
    votes: Votes,
    mechanism: Mechanism,
    noise: Noise,
    run: AggregationResult,
    truth: NDArray[np.int64] | None,
    realised: AnalysisReport,
    expected: AnalysisReport,
    noise_block: int | None,
) -> AggregateResult:
    """The run's result: its labels and the answered mask of the queries it saw, how often
    the released labels agree with the plurality vote (and with ``truth``), and its costs.
    Over candidate token ids, a class is a position among the query's candidates: the
    labels (and the plurality) are its token id."""
    seen = run.num_seen
    all_labels = run.labels
    plurality = compact.plurality(read_rows(votes.counts, 0, seen))
    if votes.candidate_ids is not None:
        all_labels = votes.candidate_ids.token_ids(all_labels)
        all_labels.flags.writeable = False
        plurality = votes.candidate_ids.token_ids(plurality)
    labels = all_labels[:seen]
    released = labels >= 0
    agreement = float(np.mean(labels[released] == plurality[released])) if released.any() else None
    accuracy = (
        float(np.mean(labels[released] == truth[:seen][released]))
        if truth is not None and released.any()
        else None
    )
    return AggregateResult(
        mechanism=mechanism,
        noise=noise,
        labels=all_labels,
        answered=run.answered[:seen],
        student_labelled=run.num_student,
        agreement_with_plurality=agreement,
        accuracy=accuracy,
        privacy=realised,
        expected_privacy=expected,
        noise_block=noise_block,
    )

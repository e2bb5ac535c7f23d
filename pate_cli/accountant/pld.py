"""The data-dependent epsilon from privacy-loss distributions (``analyze --pld``).

Each query of a fixed list is one Gaussian noisy max (with its threshold step, for
Confident-GNMax), a pair dominated by its q-bound pair or, with ``exact``, by the
maximum of its exact worst-neighbour profiles (``pate_cli.core.pld``,
``pate_cli.core.pld_exact``); the run's pairs are composed exactly and both directions
read. Like every data-dependent figure it is a function of the votes: private, never
released. Interactive-GNMax chooses its queries from earlier answers and LNMax's noise is
Laplace: both stay on Renyi DP.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray

from pate_cli.accountant.terms import QueryTerms
from pate_cli.core import pld
from pate_cli.core.compact import Compact, Counts, read_rows
from pate_cli.core.pld_exact import TooManyClassesError
from pate_cli.core.theorem6 import NumericalRangeError
from pate_cli.errors import UnsupportedError, UsageError
from pate_cli.mechanisms import Mechanism
from pate_cli.mechanisms.steps import (
    GaussianPart,
    GaussianThreshold,
    PldAnswer,
    PurePart,
    PureParts,
    gaussian_threshold,
    joined,
    pld_answer,
)

FloatArray = NDArray[np.float64]

METHODS = {"q-bound": "q-bound", "exact": "exact-pairs"}
"""The accepted choices (``--pld [exact]``, ``pld=True | "exact"``) and their JSON names."""
_CHUNK = 1 << 16


@dataclass(frozen=True)
class PldFigure:
    """A run's data-dependent epsilon from privacy-loss distributions, both directions."""

    epsilon: float
    delta: float
    method: str
    """"q-bound" (each query's pair from its q and its neighbours') or "exact-pairs"."""
    grid: float
    """The losses' grid step (1e-3, or finer for less noisy pairs)."""
    queries: int
    groups: int
    """Kinds of query composed (cells of the q-bounds, or distinct histograms)."""
    remove: float
    add: float

    def to_json_dict(self) -> dict[str, object]:
        return {
            "epsilon": self.epsilon,
            "delta": self.delta,
            "method": self.method,
            "grid": self.grid,
            "queries": self.queries,
            "groups": self.groups,
            "epsilon_remove": self.remove,
            "epsilon_add": self.add,
        }


class _Mu:
    """Reads a step's share of an exact account as its mu (Gaussian steps only)."""

    def __init__(self, name: str) -> None:
        self.name = name

    def gaussian(self, part: GaussianPart) -> float:
        return part.root_mu

    def pure_parts(self, part: PureParts) -> float:
        return self.pure(part.shares[0])

    def pure(self, part: PurePart) -> float:
        raise UnsupportedError(
            f"{self.name}: the privacy-loss-distribution account (--pld) covers Gaussian "
            "noise (GNMax, Confident-GNMax); its noise is not, and it stays on Renyi DP"
        )


@dataclass(frozen=True)
class PldPlan:
    """What :func:`check_pld` accepted, before any work: the method, and the mechanism's
    steps as the account reads them (the answer step with the members of the method, the
    Gaussian threshold its threshold step is), checked once for every pass after."""

    method: str
    answer: PldAnswer
    threshold: GaussianThreshold | None

    @property
    def neighbour(self) -> Callable[[Counts], FloatArray] | None:
        """The column the q-bound pairs read besides log q (log q of every neighbour,
        ``QueryTerms.logq_neighbour``), for the accounting pass to read alongside; None for
        the exact pairs."""
        return self.answer.logq_neighbour if self.method == "q-bound" else None


def check_pld(mechanism: Mechanism, method: str) -> PldPlan:
    """Refuse, before any work, a method or a mechanism the account does not cover: queries
    chosen from earlier answers, noise that is not Gaussian, a threshold step that is not a
    Gaussian threshold (no ``gaussian`` member), an answer step without the members
    ``method`` reads (a plugin's, made before the account asked for them); what it accepts
    is the plan of the figure."""
    if method not in METHODS:
        raise UsageError(f"pld={method!r}: expected one of {', '.join(METHODS)}")
    if mechanism.adaptive_queries:
        raise UnsupportedError(
            f"{mechanism.name} chooses its queries from earlier answers: its data-dependent "
            "account stays on Renyi DP (--pld composes a fixed list of queries)"
        )
    _check_range(_query_mu(mechanism, 1), mechanism.name)
    step = mechanism.threshold_step
    threshold = None if step is None else gaussian_threshold(step, f"{mechanism.name}: --pld")
    member = "outcome_bounds" if method == "exact" else "logq_neighbour"
    answer = pld_answer(mechanism.answer_step, mechanism.name, member)
    return PldPlan(method, answer, threshold)


def _query_mu(mechanism: Mechanism, moves: int, *, answer_only: bool = False) -> float:
    """One query's mu: its answer step's and, unless ``answer_only``, its threshold step's
    (the statistic moving by ``moves``) composed (Corollary 3.3)."""
    step, answer = mechanism.threshold_step, mechanism.answer_step.part(1.0)
    parts = [] if step is None or answer_only else [step.part(1.0, moves)]
    reader = _Mu(mechanism.name)
    answer.read(reader)  # a pure answer step is refused first, in its own words
    joint = joined([*parts, answer])
    if joint is None:
        return reader.pure(PurePart(0.0, 0))
    return joint.read(reader)


def _check_range(mu: float, name: str) -> None:
    """Refuse a query whose privacy losses reach past ``pld.LARGEST_LOSS`` at every delta:
    delta_mu(mu^2 / 2) = 1/2 - e^(mu^2/2) Phi(-mu) > 0.1 for mu >= 1 (Corollary 2.13), so its
    grid would have to reach beyond mu^2 / 2."""
    if not mu * mu / 2 <= pld.LARGEST_LOSS:
        raise _too_little_noise(name, mu)


def _too_little_noise(name: str, mu: float) -> UnsupportedError:
    return UnsupportedError(
        f"{name}: too little noise for the privacy-loss-distribution account (--pld): each "
        f"query is {mu:.3g}-Gaussian DP, whose privacy losses reach past "
        f"{pld.LARGEST_LOSS:g} (beyond the double range of e^loss) before its delta is "
        "negligible; its Renyi-DP figures stand"
    )


def pld_figure(
    votes: object,
    mechanism: Mechanism,
    terms: QueryTerms,
    delta: float,
    method: str = "q-bound",
    *,
    grid: float | None = None,
    advance: Callable[[int], None] | None = None,
) -> PldFigure:
    """The data-dependent epsilon of the queries seen (``terms``) from privacy-loss
    distributions, by ``method`` ("q-bound" or "exact"), on a loss grid of step ``grid``
    (None: :func:`~pate_cli.core.pld.auto_grid` of the answer's noise). ``votes``: the
    run's counts. ``advance(n)``: told of the work as it is done, in queries (``n`` summing
    to the queries seen), a progress bar's."""
    plan = check_pld(mechanism, method)
    return planned_pld_figure(votes, mechanism, plan, terms, delta, grid=grid, advance=advance)


def planned_pld_figure(
    votes: object,
    mechanism: Mechanism,
    plan: PldPlan,
    terms: QueryTerms,
    delta: float,
    *,
    grid: float | None = None,
    advance: Callable[[int], None] | None = None,
) -> PldFigure:
    """:func:`pld_figure` of ``mechanism`` by the plan ``check_pld`` made of it."""
    answer_mu = _query_mu(mechanism, 1, answer_only=True)
    mu = _query_mu(mechanism, terms.threshold_sensitivity)
    _check_range(mu, mechanism.name)
    seen = terms.num_seen
    if grid is None:  # fine enough for the answer's own spread of losses
        grid = pld.auto_grid(answer_mu, mu)
    shown = _Shown(seen, advance)
    try:
        if plan.method == "exact":
            found = _exact(votes, mechanism, plan, seen, mu, delta, grid, shown)
        else:
            found = _qbound(votes, plan, terms, answer_mu, mu, delta, grid, shown)
    except NumericalRangeError:  # the grid's ends past LARGEST_LOSS at this delta
        raise _too_little_noise(mechanism.name, mu) from None
    shown.finish()
    return PldFigure(
        found.epsilon,
        delta,
        METHODS[plan.method],
        found.grid,
        seen,
        found.groups,
        found.remove,
        found.add,
    )


def _qbound(
    votes: object,
    plan: PldPlan,
    terms: QueryTerms,
    mu_answer: float,
    mu_joint: float,
    delta: float,
    grid: float,
    shown: _Shown,
) -> pld.PldEpsilon:
    """The q-bound pairs: per query, log a >= log P(o != i*) (Prop. 7) and log b the same
    for every neighbour (every gap less 2) of the answer step; with a threshold step, its
    margin z = (h - T) / sigma1 and the most a neighbour moves it, moves / sigma1."""
    seen = terms.num_seen
    assert terms.logq is not None
    neighbour = terms.logq_neighbour
    if neighbour is None:  # terms made without it (compare's, a library caller's)
        neighbour = np.empty(seen)
        for start in range(0, seen, _CHUNK):
            stop = min(start + _CHUNK, seen)
            neighbour[start:stop] = plan.answer.logq_neighbour(read_rows(votes, start, stop))
    if plan.threshold is None:
        return pld.qbound_epsilon(
            terms.logq, neighbour, mu_answer, delta, grid=grid, advance=shown.share
        )
    assert terms.margins is not None
    shift = terms.threshold_sensitivity / plan.threshold.sigma1
    return pld.confident_epsilon(
        terms.margins,
        shift,
        terms.logq,
        neighbour,
        mu_answer,
        mu_joint,
        delta,
        grid=grid,
        advance=shown.share,
    )


class _Shown:
    """The core's shares of a run's work, shown as whole queries (``total`` in all)."""

    def __init__(self, total: int, advance: Callable[[int], None] | None) -> None:
        self.total, self.advance = total, advance
        self.done = 0.0  # the shares told so far
        self.shown = 0  # the queries shown so far

    def share(self, part: float) -> None:
        self.done = min(self.done + part, 1.0)
        self._show(min(int(self.done * self.total), self.total))

    def finish(self) -> None:
        self._show(self.total)

    def _show(self, upto: int) -> None:
        if self.advance is not None and upto > self.shown:
            self.advance(upto - self.shown)
        self.shown = max(self.shown, upto)


def _exact(
    votes: object,
    mechanism: Mechanism,
    plan: PldPlan,
    seen: int,
    mu: float,
    delta: float,
    grid: float,
    shown: _Shown,
) -> pld.PldEpsilon:
    """The exact pairs: each distinct histogram's worst-neighbour profiles, composed."""
    from pate_cli.core.pld_exact import worst_neighbour_profiles_many

    bounds = plan.answer.outcome_bounds(mechanism.threshold_step)
    rows = []
    for start in range(0, seen, _CHUNK):
        block = read_rows(votes, start, min(start + _CHUNK, seen))
        if isinstance(block, Compact):
            raise UsageError("--pld exact reads dense votes of at most 20 classes")
        rows.append(-np.sort(-np.asarray(block, dtype=np.float64), axis=1))
    # GNMax and its threshold step treat the classes alike: sorted rows stand for their kind.
    hists = np.concatenate(rows) if rows else np.zeros((0, 1))
    kinds, counts = np.unique(hists, axis=0, return_counts=True)
    eps = pld.loss_grid(mu, grid, delta, seen)
    try:
        remove, add = worst_neighbour_profiles_many(kinds, eps, log_prob_bounds=bounds)
    except TooManyClassesError as error:
        raise UsageError(f"--pld exact: {error}") from None
    first = -(eps.size // 2)
    shown.share(1 - pld.PROFILED)  # the profiles: then the hulls and compositions
    found = pld.epsilon_from_profiles(
        first, remove, add, counts.astype(np.int64), grid, delta, shown.share
    )
    return pld.PldEpsilon(max(found), found[0], found[1], grid, seen, int(kinds.shape[0]))

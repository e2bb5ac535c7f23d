"""The steps a mechanism is made of, and what each gives the accountant and the release.

An answer step labels a query by a noisy argmax of its votes; a threshold step decides
whether the query is answered at all. Each gives, from its own parameters: the per-query
scalar its data-dependent cost depends on, that cost, its data-independent cost, and its
share of an exact account (a :class:`Part`); an answer step also brings its
smooth-sensitivity release (``release``, a value of ``pate_cli.mechanisms.releases``, or
None). The formulas live in ``pate_cli.core``; a step only says which one is its own.
docs/mechanisms.md documents both protocols, which members are optional and what each
switches on.

Everything above this package asks a step or a part, never its type: a part says how it
composes (``joined``) and what it is (``read``), a step what it is called (``name``, the
key of its entry in a release's JSON), which release it brings (``release``) and, for a
threshold step, whether it is the Gaussian threshold the Gaussian-only features read
(``gaussian``). Steps are frozen dataclasses: hashable, and equal only to a step of their
class with the same fields, so a step is its own key wherever terms or costs are shared.
"""

from __future__ import annotations

import math
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import partial
from typing import TYPE_CHECKING, ClassVar, Protocol, TypeVar, cast

from pate_cli.errors import UnsupportedError
from pate_cli.mechanisms.releases import GaussianRelease, StepRelease

if TYPE_CHECKING:
    import numpy as np
    from numpy.typing import NDArray

    from pate_cli.core.compact import Counts

    FloatArray = NDArray[np.float64]
    BoolArray = NDArray[np.bool_]

CostKey = tuple[object, ...]
"""Names a per-query cost function at the caller's orders, for callers that cache: the step
itself (a frozen dataclass equals only a step of its own class and fields) and what else
the function depends on, never a subset of the step's numbers."""
OutcomeBounds = Callable[["FloatArray"], tuple["FloatArray", "FloatArray"]]
"""histograms (K, C) -> lower and upper bounds on the log-probabilities of the outcomes."""
T = TypeVar("T")
T_co = TypeVar("T_co", covariant=True)


class PartReader(Protocol[T_co]):
    """What reads a part (``Part.read``): one method per exact form, each given the part."""

    def gaussian(self, part: GaussianPart) -> T_co:
        """A share of mu-Gaussian DP (Dong, Roth and Su 2022): its ``mu`` (composed by
        ``math.hypot``: the exact figure's) or its ``mu_squared`` (summed: a budget's)."""

    def pure(self, part: PurePart) -> T_co:
        """A share of pure DP: ``part.count`` mechanisms, each ``part.epsilon0``-DP."""

    def pure_parts(self, part: PureParts) -> T_co:
        """A share of pure DP of several epsilon0: ``part.shares``, each a :class:`PurePart`
        of its own epsilon0 (their optimal composition: ``core.exact_pure``)."""


class Part(Protocol):
    """A share of an exact account, no Renyi DP in between: what the exact figure and a
    budget's account ask of a step's share, never its type."""

    def joined(self, other: Part) -> Part | None:
        """This share and ``other`` composed exactly, as one; None where no exact
        composition covers the two (Gaussian and pure DP together)."""

    def read(self, reader: PartReader[T]) -> T:
        """What ``reader`` makes of this share's form and figures."""


@dataclass(frozen=True)
class GaussianPart:
    """A share of a mu-Gaussian DP account: per step, Gaussian noise of std ``sigma`` on a
    statistic whose squared sensitivity summed over the step's runs is ``squares`` (the pairs
    ``(squares, sigma)`` of ``shares``, in the order the steps were joined). Gaussian
    mechanisms compose into one (Dong, Roth and Su 2022, Corollary 3.3): ``mu`` serves the
    exact figure (composed by ``math.hypot``), ``mu_squared`` a budget's (summed, then the
    root)."""

    shares: tuple[tuple[float, float], ...]

    @classmethod
    def of(cls, squares: float, sigma: float) -> GaussianPart:
        """One step's share: noise of std ``sigma``, squared sensitivities summing to
        ``squares``."""
        return cls(((squares, sigma),))

    @property
    def mu(self) -> float:
        return math.hypot(*(math.sqrt(squares) / sigma for squares, sigma in self.shares))

    @property
    def mu_squared(self) -> float:
        """The sum of squares / sigma^2: inf past the float range, 0 below it (never an
        error; ``mu`` is the figure that stays in range)."""
        return sum(_over_squared(squares, sigma) for squares, sigma in self.shares)

    @property
    def root_mu(self) -> float:
        """mu as a budget and the privacy-loss distributions take it: the root of
        ``mu_squared``, as ever; where mu^2 leaves the double range (mu does not), ``mu``
        moved above its roundings, so that a positive mu is never 0 nor an error."""
        squared = self.mu_squared
        if sys.float_info.min <= squared < math.inf:
            return math.sqrt(squared)
        mu = self.mu
        return mu if mu == 0 or math.isinf(mu) else math.nextafter(mu * (1 + 1e-15), math.inf)

    def joined(self, other: Part) -> Part | None:
        # Gaussian with Gaussian: mu^2 adds up (Corollary 3.3).
        return GaussianPart(self.shares + other.shares) if isinstance(other, GaussianPart) else None

    def read(self, reader: PartReader[T]) -> T:
        return reader.gaussian(self)


# sigma^2 is a normal double strictly between these (a smaller sigma's square underflows, a
# larger one's overflows).
_SQUARE_FLOOR, _SQUARE_CEILING = 1e-154, 1e154


def _over_squared(squares: float, sigma: float) -> float:
    """squares / sigma^2, rounded as ever where sigma^2 is a normal double; past that, the
    root's quotient squared, which overflows to inf or underflows to 0 without an error."""
    if _SQUARE_FLOOR < sigma < _SQUARE_CEILING:
        return squares / sigma**2
    root = math.sqrt(squares) / sigma
    return root * root


@dataclass(frozen=True)
class PurePart:
    """A share of a pure-DP account: ``count`` mechanisms, each ``epsilon0``-DP."""

    epsilon0: float
    count: int

    def joined(self, other: Part) -> Part | None:
        # Pure with pure: of one epsilon0, more of the same mechanisms (Kairouz, Oh and
        # Viswanath 2015, Theorem 3.5); of several, their optimal composition (Murtagh and
        # Vadhan 2016, Theorem 1.5). Pure with Gaussian: none.
        if isinstance(other, PurePart | PureParts):
            return PureParts.of((self, *_pure_shares(other)))
        return None

    def read(self, reader: PartReader[T]) -> T:
        return reader.pure(self)


@dataclass(frozen=True)
class PureParts:
    """A share of a pure-DP account of several epsilon0: each of ``shares`` is ``count``
    mechanisms of its own ``epsilon0`` (no two alike, in the order they were joined)."""

    shares: tuple[PurePart, ...]

    @staticmethod
    def of(parts: Sequence[PurePart]) -> PurePart | PureParts:
        """``parts`` as one share: those of one epsilon0 added up, those of no mechanism
        (count 0) left out; a :class:`PurePart` where one epsilon0 is left."""
        counts: dict[float, int] = {}
        for part in parts:
            if part.count:
                counts[part.epsilon0] = counts.get(part.epsilon0, 0) + part.count
        shares = tuple(PurePart(epsilon0, count) for epsilon0, count in counts.items())
        if not shares:
            return parts[0]
        return shares[0] if len(shares) == 1 else PureParts(shares)

    def joined(self, other: Part) -> Part | None:
        # As PurePart's: pure with pure, never with Gaussian.
        if isinstance(other, PurePart | PureParts):
            return PureParts.of((*self.shares, *_pure_shares(other)))
        return None

    def read(self, reader: PartReader[T]) -> T:
        return reader.pure_parts(self)


def _pure_shares(part: PurePart | PureParts) -> tuple[PurePart, ...]:
    return part.shares if isinstance(part, PureParts) else (part,)


def joined(parts: Sequence[Part]) -> Part | None:
    """``parts`` (at least one) composed exactly, as one, in their order; None where no exact
    composition covers them all. A share of no mechanism (no step run: a count of 0, or no
    sensitivity) joins any other: it is left out."""
    kept = [part for part in parts if not _empty(part)] or [parts[0]]
    found: Part | None = kept[0]
    for part in kept[1:]:
        found = None if found is None else found.joined(part)
    return found


def _empty(part: Part) -> bool:
    """Whether ``part`` is a share of no mechanism (it changes no account)."""
    if isinstance(part, PurePart):
        return part.count == 0
    if isinstance(part, GaussianPart):
        return all(squares == 0 for squares, _ in part.shares)
    return False


def step_names(threshold: ThresholdStep | None, answer: AnswerStep) -> tuple[str, str]:
    """The names of a mechanism's (threshold, answer) steps, its release's keys for them: a
    mechanism without a threshold step keeps that entry, under the name "threshold"."""
    return ("threshold" if threshold is None else threshold.name), answer.name


class AnswerStep(Protocol):
    """What the accountant, the release and ``pate_cli.testing`` ask of an answer step, the
    noisy argmax that labels an answered query. The members below; and, each optional and
    switching on one feature (docs/mechanisms.md), ``logq_neighbour`` and ``outcome_bounds``
    (:class:`PldAnswer`: the privacy-loss-distribution account, ``--pld`` and ``--pld
    exact``) and ``log_probabilities(counts)`` (per histogram, the log-probability of each
    label, (Q, C), exact to rounding: the test kit's checks of the sampler and the RDP)."""

    @property
    def name(self) -> str:
        """What the step is called: its key in a release's ``data_independent_steps``."""

    @property
    def release(self) -> StepRelease | None:
        """Its smooth-sensitivity release (``releases.GaussianRelease(sigma)``,
        ``releases.LaplaceRelease(gamma)``); None (or no such member): none, and the
        release says so in one line."""

    def logq(self, counts: Counts) -> FloatArray:
        """log q per query: the probability of not releasing the plurality label, bounded."""

    def cost(self, orders: FloatArray) -> Callable[[FloatArray], FloatArray]:
        """RDP of one answer as a function of log q, at ``orders``."""

    def data_independent(self, orders: FloatArray) -> FloatArray:
        """RDP of one answer whatever the votes, at ``orders``."""

    def part(self, answered: float) -> Part:
        """The share of ``answered`` answers in an exact account."""

    def agreement(self, counts: Counts) -> FloatArray:
        """Per query, the probability that the noisy label is the plurality label."""


class PldAnswer(AnswerStep, Protocol):
    """An answer step with the members of the privacy-loss-distribution account."""

    def logq_neighbour(self, counts: Counts) -> FloatArray:
        """(``--pld``) log of a bound on the probability of not releasing the plurality label
        for every neighbour of the votes (the same plurality label)."""

    def outcome_bounds(self, threshold: ThresholdStep | None) -> OutcomeBounds:
        """(``--pld exact``) bounds on the log-probabilities of one query's outcomes (after
        ``threshold``'s abstention, when given) as a function of its histograms."""


def pld_answer(step: AnswerStep, name: str, member: str) -> PldAnswer:
    """``step`` as the privacy-loss-distribution account reads it, once it has ``member``
    ("logq_neighbour" or "outcome_bounds").

    Raises:
        UnsupportedError: it has no such member (a plugin's), in one line naming ``name``.
    """
    if not hasattr(step, member):
        raise UnsupportedError(f"{name}: its answer step has no {member} (--pld)")
    return cast("PldAnswer", step)


class ThresholdStep(Protocol):
    """What the accountant, a run and ``pate_cli.testing`` ask of a threshold step: whether
    a query is answered, drawn from a noisy statistic of its votes. Every threshold step has
    a ``name``, its sampler (``sample``), its per-query scalars (``terms``, ``moves``), its
    RDP (``cost``, ``data_independent``, ``joint``) and its share of an exact account
    (``part``). ``gaussian`` (optional) is the :class:`GaussianThreshold` it is, which the
    Gaussian-only features read (:func:`gaussian_threshold`): ``--pld``, and the Gaussian
    release's threshold part, made for the rounded top count plus N(0, sigma1^2) against a
    threshold; without it, those refuse the mechanism in one line."""

    @property
    def name(self) -> str:
        """What the step is called: its key in a release's ``data_independent_steps``."""

    def sample(self, values: FloatArray, rng: np.random.Generator, half_even: bool) -> BoolArray:
        """Which queries are answered (Q,), drawn from ``rng`` (the run's
        ``noise.generator("aggregate-threshold")``), for ``values`` (votes, or votes -
        baseline), (Q, C)."""

    def terms(self, values: FloatArray, half_even: bool) -> ThresholdTerms:
        """The per-query scalars of ``values`` (votes, or votes - baseline)."""

    def moves(self, values: FloatArray, half_even: bool) -> int:
        """How far a neighbour moves the statistic of ``values`` (1 or 2)."""

    def cost(self, orders: FloatArray, moves: int) -> ThresholdCost:
        """RDP of one step as a function of one of its scalars, at ``orders``."""

    def data_independent(self, orders: FloatArray, moves: int) -> FloatArray:
        """RDP of one step whatever the votes, at ``orders``."""

    def joint(
        self, margins: FloatArray, orders: FloatArray, answer: FloatArray, moves: int
    ) -> FloatArray:
        """RDP of the joint (outcome, label), the answer costing ``answer`` when given."""

    def part(self, queries: float, moves: float) -> Part:
        """The share of ``queries`` steps in an exact account."""


@dataclass(frozen=True)
class GaussianAnswer:
    """GNMax's answer: argmax of the counts plus N(0, sigma^2) per class (2018, Sec. 4.1)."""

    sigma: float
    name: ClassVar[str] = "gnmax"

    @property
    def release(self) -> GaussianRelease:
        # Algorithms 4-5 of 2018 (core.ls_gnmax), at the noise of the answer.
        return GaussianRelease(self.sigma)

    def logq(self, counts: Counts) -> FloatArray:
        from pate_cli.core import gnmax

        return gnmax.logq_gnmax(counts, self.sigma)  # Prop. 7 of 2018

    def logq_neighbour(self, counts: Counts) -> FloatArray:
        from pate_cli.core import gnmax

        return gnmax.logq_gnmax_neighbour(counts, self.sigma)  # Prop. 7, gaps less 2

    def outcome_bounds(self, threshold: ThresholdStep | None) -> OutcomeBounds:
        from pate_cli.core import pld_exact

        if threshold is None:
            return partial(pld_exact.gnmax_log_prob_bounds, sigma=self.sigma)
        gaussian = gaussian_threshold(threshold, "--pld exact")
        return partial(
            pld_exact.confident_log_prob_bounds,
            threshold=gaussian.threshold,
            sigma1=gaussian.sigma1,
            sigma=self.sigma,
        )

    def log_probabilities(self, counts: FloatArray) -> FloatArray:
        from pate_cli.core import outcomes

        return outcomes.gaussian_log_probabilities(counts, self.sigma)  # by quadrature

    def cost(self, orders: FloatArray) -> Callable[[FloatArray], FloatArray]:
        from pate_cli.core import gnmax

        return partial(gnmax.rdp_gnmax, sigma=self.sigma, orders=orders)  # Theorem 6

    def data_independent(self, orders: FloatArray) -> FloatArray:
        from pate_cli.core import gnmax

        return gnmax.rdp_gnmax_data_independent(self.sigma, orders)  # Prop. 8

    def part(self, answered: float) -> Part:
        # A histogram moves by sqrt(2) in L2 (Dong, Roth and Su 2022, Corollary 3.3).
        return GaussianPart.of(2.0 * answered, self.sigma)

    def agreement(self, counts: Counts) -> FloatArray:
        from pate_cli.core import agreement

        return agreement.gaussian_agreement(counts, self.sigma)  # by quadrature


@dataclass(frozen=True)
class ThresholdTerms:
    """A threshold step's per-query scalars (Q,): its statistic as its ``cost`` and ``joint``
    read it (the Gaussian threshold's: (h - T) / sigma1, in noise units), log Pr[answered]
    (the exact probability: the expected accounting's weight, and what ``pate_cli.testing``
    checks the sampler against) and log of the less likely outcome, each from its own tail;
    and how far a neighbour moves the statistic (1, or 2 under half to even at an exact
    half)."""

    margins: FloatArray
    log_pr_answered: FloatArray
    logq: FloatArray
    moves: int


@dataclass(frozen=True)
class ThresholdCost:
    """A threshold step's per-query cost: which of its scalars it reads ("margins": the
    terms' ``margins``; "logq_threshold": their ``logq``; fields of the accountant's
    terms), what it depends on besides them (its name and numbers, for the reader: the step
    itself keys every cache), and the function (Q,) -> (Q, K)."""

    statistic: str
    key: CostKey
    function: Callable[[FloatArray], FloatArray]


@dataclass(frozen=True)
class GaussianThreshold:
    """Confident-GNMax's threshold step (2018, Algorithm 1): answer when the top vote plus
    N(0, sigma1^2) reaches ``threshold``; ``bound`` is how its data-dependent RDP is bounded
    ("theorem6", or "exact": the divergence of its two outcomes)."""

    threshold: float
    sigma1: float
    bound: str = "theorem6"
    name: ClassVar[str] = "threshold"

    @property
    def gaussian(self) -> GaussianThreshold:
        return self

    def sample(self, values: FloatArray, rng: np.random.Generator, half_even: bool) -> BoolArray:
        """round(max values) + N(0, sigma1^2) >= threshold, per query (Algorithm 1, step 1)."""
        from pate_cli.mechanisms.samplers import Gaussian, noisy_threshold

        return noisy_threshold(
            values, self.threshold, Gaussian(self.sigma1), rng, half_even=half_even
        )

    def terms(self, values: FloatArray, half_even: bool) -> ThresholdTerms:
        """The per-query scalars of ``values`` (votes, or votes - baseline), (Q, C)."""
        from pate_cli.core import threshold

        margins = threshold.threshold_margins(
            values, self.threshold, self.sigma1, half_even=half_even
        )
        log_pr, logq = threshold.outcomes_from_margins(margins)  # each tail from its own function
        return ThresholdTerms(margins, log_pr, logq, self.moves(values, half_even))

    def moves(self, values: FloatArray, half_even: bool) -> int:
        """How far a neighbour moves the rounded statistic of ``values``: 1, or 2 under half
        to even where a value is an exact half."""
        from pate_cli.core import threshold

        return threshold.statistic_sensitivity(values, half_even=half_even)

    def cost(self, orders: FloatArray, moves: int) -> ThresholdCost:
        """RDP of one threshold step as a function of its statistic, at ``orders``: Theorem 6
        on the less likely outcome (sigma -> sqrt(2) sigma1) of log q, or ("exact") the
        divergence of its two outcomes from the margin; the statistic moves by ``moves``."""
        from pate_cli.core import threshold

        if self.bound == "exact":
            joint = partial(
                threshold.rdp_threshold_joint, sigma1=self.sigma1, orders=orders, shift=float(moves)
            )
            return ThresholdCost("margins", ("threshold-exact", self.sigma1, moves), joint)
        theorem6 = partial(
            threshold.rdp_threshold, sigma1=self.sigma1, orders=orders, sensitivity=moves
        )
        return ThresholdCost("logq_threshold", ("threshold", self.sigma1, moves), theorem6)

    def data_independent(self, orders: FloatArray, moves: int) -> FloatArray:
        """RDP of one threshold step whatever the votes (Prop. 8, the statistic moving by
        ``moves``)."""
        from pate_cli.core import threshold

        return threshold.rdp_threshold_data_independent(self.sigma1, orders, sensitivity=moves)

    def joint(
        self, margins: FloatArray, orders: FloatArray, answer: FloatArray, moves: int
    ) -> FloatArray:
        """RDP of the joint (outcome, label) by the chain rule, the answer costing ``answer``
        (Q, K) when the query is answered. Shapes: margins (Q,) -> (Q, K)."""
        from pate_cli.core import threshold

        return threshold.rdp_threshold_joint(
            margins, self.sigma1, orders, answer, shift=float(moves)
        )

    def part(self, queries: float, moves: float) -> Part:
        # The rounded top count moves by ``moves`` (1, or 2 under half to even).
        return GaussianPart.of(queries * moves**2, self.sigma1)


def gaussian_threshold(step: ThresholdStep, feature: str) -> GaussianThreshold:
    """The Gaussian threshold ``step`` is (its ``gaussian`` member), which ``feature`` reads.

    Raises:
        UnsupportedError: a step without one, in one line.
    """
    found: GaussianThreshold | None = getattr(step, "gaussian", None)
    if found is None:
        raise UnsupportedError(
            f"{feature} reads a Gaussian threshold step (rounded top count plus N(0, sigma1^2)); "
            f"the threshold step {step.name!r} is not one"
        )
    return found

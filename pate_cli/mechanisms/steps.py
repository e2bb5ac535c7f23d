"""The steps a mechanism is made of, and what each gives the accountant and the release.

An answer step labels a query by a noisy argmax of its votes; a threshold step decides
whether the query is answered at all. Each gives, from its own parameters: the per-query
scalar its data-dependent cost depends on, that cost, its data-independent cost, its share
of an exact account (Gaussian DP or pure DP) and of a budget's account. The formulas live in
``pate_cli.core``; a step only says which one is its own.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from functools import partial
from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    import numpy as np
    from numpy.typing import NDArray

    from pate_cli.core.compact import Counts

    FloatArray = NDArray[np.float64]

CostKey = tuple[object, ...]


@dataclass(frozen=True)
class GaussianPart:
    """A step's share of a mu-Gaussian DP account: Gaussian noise of std ``sigma`` on a
    statistic whose squared sensitivity summed over the steps is ``squares`` (Dong, Roth and
    Su 2022, Corollary 3.3). ``mu`` serves the exact figure (composed by ``math.hypot``),
    ``mu_squared`` a budget's (summed, then the root)."""

    squares: float
    sigma: float

    @property
    def mu(self) -> float:
        return math.sqrt(self.squares) / self.sigma

    @property
    def mu_squared(self) -> float:
        return self.squares / self.sigma**2


@dataclass(frozen=True)
class PurePart:
    """A step's share of a pure-DP account: ``count`` mechanisms, each ``epsilon0``-DP."""

    epsilon0: float
    count: int


Part = GaussianPart | PurePart


class AnswerStep(Protocol):
    """What the accountant and the release ask of an answer step."""

    @property
    def key(self) -> CostKey:
        """What the per-query cost depends on besides log q (runs sharing it share terms)."""

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


class ThresholdStep(Protocol):
    """What the accountant and the release ask of a threshold step: answer a query when its
    noisy statistic reaches ``threshold``."""

    @property
    def threshold(self) -> float:
        """The threshold T the noisy statistic is compared with."""

    @property
    def sigma1(self) -> float:
        """The standard deviation of the statistic's noise."""

    @property
    def bound(self) -> str:
        """How its data-dependent RDP is bounded: "theorem6" or "exact"."""

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

    @property
    def key(self) -> CostKey:
        return ("gnmax", self.sigma)

    def logq(self, counts: Counts) -> FloatArray:
        from pate_cli.core import gnmax

        return gnmax.logq_gnmax(counts, self.sigma)  # Prop. 7 of 2018

    def cost(self, orders: FloatArray) -> Callable[[FloatArray], FloatArray]:
        from pate_cli.core import gnmax

        return partial(gnmax.rdp_gnmax, sigma=self.sigma, orders=orders)  # Theorem 6

    def data_independent(self, orders: FloatArray) -> FloatArray:
        from pate_cli.core import gnmax

        return gnmax.rdp_gnmax_data_independent(self.sigma, orders)  # Prop. 8

    def part(self, answered: float) -> Part:
        # A histogram moves by sqrt(2) in L2 (Dong, Roth and Su 2022, Corollary 3.3).
        return GaussianPart(2.0 * answered, self.sigma)

    def agreement(self, counts: Counts) -> FloatArray:
        from pate_cli.core import agreement

        return agreement.gaussian_agreement(counts, self.sigma)  # by quadrature


@dataclass(frozen=True)
class LaplaceAnswer:
    """LNMax's answer (2017): argmax of the counts plus Laplace noise of scale 1/gamma."""

    gamma: float

    @property
    def key(self) -> CostKey:
        return ("lnmax", self.gamma)

    def logq(self, counts: Counts) -> FloatArray:
        from pate_cli.core import lnmax

        return lnmax.logq_lnmax(counts, self.gamma)  # Lemma 4 of 2017

    def cost(self, orders: FloatArray) -> Callable[[FloatArray], FloatArray]:
        from pate_cli.core import lnmax

        return partial(lnmax.rdp_lnmax, gamma=self.gamma, orders=orders)  # Theorem 3 of 2017

    def data_independent(self, orders: FloatArray) -> FloatArray:
        from pate_cli.core import lnmax

        return lnmax.rdp_lnmax_data_independent(self.gamma, orders)  # pure 2 gamma-DP

    def part(self, answered: float) -> Part:
        # Laplace noise on counts of L1 sensitivity 2: each answer is (2 gamma)-DP.
        return PurePart(2.0 * self.gamma, int(answered))

    def agreement(self, counts: Counts) -> FloatArray:
        from pate_cli.core import agreement

        return agreement.laplace_agreement(counts, self.gamma)  # by quadrature


@dataclass(frozen=True)
class ThresholdTerms:
    """A threshold step's per-query scalars: its statistic in noise units, (h - T) / sigma1,
    log Pr[answered] and log of the less likely outcome (Q,), and how far a neighbour moves
    the rounded statistic (1, or 2 under half to even at an exact half)."""

    margins: FloatArray
    log_pr_answered: FloatArray
    logq: FloatArray
    moves: int


@dataclass(frozen=True)
class ThresholdCost:
    """A threshold step's per-query cost: which of its scalars it reads ("margins" or
    "logq_threshold", fields of the accountant's terms), what it depends on besides them,
    and the function."""

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
        return GaussianPart(queries * moves**2, self.sigma1)

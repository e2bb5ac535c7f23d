"""Confident-GNMax (2018, Algorithm 1): answer only where the teachers' consensus, seen
through Gaussian noise, reaches a threshold; then GNMax."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, ClassVar

from pate_cli.choices import ThresholdBound
from pate_cli.common import checks
from pate_cli.mechanisms.base import Mechanism, Run
from pate_cli.mechanisms.gnmax import SIGMA
from pate_cli.mechanisms.parameters import FINITE, Cost, Parameter
from pate_cli.mechanisms.steps import GaussianAnswer, GaussianThreshold

if TYPE_CHECKING:
    import numpy as np

    from pate_cli.files.seeds import Noise
    from pate_cli.mechanisms.samplers import AggregationResult


THRESHOLD = Parameter(
    "threshold",
    "Confident-GNMax threshold T.",
    symbol="T",
    domain=FINITE,
    cost=Cost.FIXED,
)
SIGMA1 = Parameter("sigma1", "Noise std of the threshold step.", symbol="S1")


@dataclass(frozen=True)
class ConfidentGNMax(Mechanism):
    """Algorithm 1 of 2018: answer with GNMax(sigma) when max vote + N(0, sigma1^2) >= threshold."""

    name: ClassVar[str] = "confident-gnmax"
    short: ClassVar[str] = "confident"
    parameters: ClassVar[tuple[Parameter, ...]] = (THRESHOLD, SIGMA1, SIGMA)
    source: ClassVar[str] = "Algorithm 1, 2018"
    answers_every_query: ClassVar[bool] = False
    defaults_in_json: ClassVar[dict[str, Any]] = {"threshold_bound": "theorem6"}

    threshold: float
    sigma1: float
    sigma: float
    threshold_bound: str = "theorem6"
    """How the threshold step's data-dependent RDP is bounded: "theorem6" (the 2018 paper)
    or "exact" (the divergence of its two outcomes, maximised over the neighbours)."""

    def __post_init__(self) -> None:
        super().__post_init__()
        bound = checks.choice(ThresholdBound, self.threshold_bound, "threshold-bound")
        object.__setattr__(self, "threshold_bound", bound.value)  # plain text in the JSON

    @property
    def threshold_step(self) -> GaussianThreshold:
        return GaussianThreshold(self.threshold, self.sigma1, self.threshold_bound)

    @property
    def answer_step(self) -> GaussianAnswer:
        return GaussianAnswer(self.sigma)

    def run(self, counts: np.ndarray, noise: Noise, run: Run) -> AggregationResult:
        from pate_cli.mechanisms.aggregators import aggregate_confident_gnmax

        # Each step its own stream (seeds.PURPOSES): the threshold noise and the answer
        # noise share no draw, with each other or with a later release.
        return aggregate_confident_gnmax(
            counts,
            self.threshold,
            self.sigma1,
            self.sigma,
            noise.generator("aggregate-answer"),
            half_even=run.half_even,
            threshold_rng=noise.generator("aggregate-threshold"),
            **run.limits,
        )

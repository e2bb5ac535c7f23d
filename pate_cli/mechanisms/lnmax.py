"""LNMax (2017): the plurality label plus Laplace noise on every count."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, ClassVar

from pate_cli.mechanisms.base import Mechanism, Run
from pate_cli.mechanisms.parameters import Cost, Parameter
from pate_cli.mechanisms.steps import LaplaceAnswer

if TYPE_CHECKING:
    import numpy as np

    from pate_cli.files.seeds import Noise
    from pate_cli.mechanisms.samplers import AggregationResult


GAMMA = Parameter(
    "gamma",
    "LNMax: Laplace noise of scale 1/gamma (2017 noise_eps).",
    symbol="G",
    unit="1/votes",
    cost=Cost.RISES,
)


@dataclass(frozen=True)
class LNMax(Mechanism):
    """Laplace noisy max of 2017: noise of scale 1/gamma, (2 gamma)-DP per answer."""

    name: ClassVar[str] = "lnmax"
    short: ClassVar[str] = "lnmax"
    parameters: ClassVar[tuple[Parameter, ...]] = (GAMMA,)
    source: ClassVar[str] = "LNMax, 2017"

    gamma: float

    @property
    def answer_step(self) -> LaplaceAnswer:
        return LaplaceAnswer(self.gamma)

    def run(self, counts: np.ndarray, noise: Noise, run: Run) -> AggregationResult:
        from pate_cli.mechanisms.aggregators import aggregate_lnmax

        rng = noise.generator("aggregate-answer")
        return aggregate_lnmax(counts, self.gamma, rng, **run.limits)

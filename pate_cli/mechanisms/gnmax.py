"""GNMax (2018, Section 4.1): the plurality label plus Gaussian noise on every count."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, ClassVar

from pate_cli.mechanisms.base import Mechanism, Run
from pate_cli.mechanisms.parameters import Parameter
from pate_cli.mechanisms.steps import GaussianAnswer

if TYPE_CHECKING:
    import numpy as np

    from pate_cli.files.seeds import Noise
    from pate_cli.mechanisms.samplers import AggregationResult


SIGMA = Parameter(
    "sigma",
    "GNMax noise std (sigma2 of Confident-GNMax).",
    symbol="S",
    aliases=("--sigma2",),
)


@dataclass(frozen=True)
class GNMax(Mechanism):
    """Gaussian noisy max with noise N(0, sigma^2) on every class (2018, Section 4.1)."""

    name: ClassVar[str] = "gnmax"
    short: ClassVar[str] = "gnmax"
    parameters: ClassVar[tuple[Parameter, ...]] = (SIGMA,)
    source: ClassVar[str] = "GNMax, 2018"

    sigma: float

    @property
    def answer_step(self) -> GaussianAnswer:
        return GaussianAnswer(self.sigma)

    def run(self, counts: np.ndarray, noise: Noise, run: Run) -> AggregationResult:
        from pate_cli.mechanisms.aggregators import aggregate_gnmax

        rng = noise.generator("aggregate-answer")
        return aggregate_gnmax(counts, self.sigma, rng, **run.limits)

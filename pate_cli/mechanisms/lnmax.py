"""LNMax (2017): the plurality label plus Laplace noise on every count.

Written as a plugin is (docs/mechanisms.md): every name it reads is one the docs document,
its answer step's formulas from ``pate_cli.core``, its release the one it brings, its labels
from the public samplers. It stays built in and registered as ever.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from functools import partial
from typing import TYPE_CHECKING, ClassVar

from pate_cli.mechanisms.base import Mechanism
from pate_cli.mechanisms.parameters import Cost, Parameter
from pate_cli.mechanisms.releases import LaplaceRelease
from pate_cli.mechanisms.steps import PurePart

if TYPE_CHECKING:
    import numpy as np
    from numpy.typing import NDArray

    from pate_cli.core.compact import Counts
    from pate_cli.files.seeds import Noise
    from pate_cli.mechanisms.base import Run
    from pate_cli.mechanisms.samplers import AggregationResult

    FloatArray = NDArray[np.float64]


GAMMA = Parameter(
    "gamma",
    "LNMax: Laplace noise of scale 1/gamma (2017 noise_eps).",
    symbol="G",
    unit="1/votes",
    cost=Cost.RISES,
)


@dataclass(frozen=True)
class LaplaceAnswer:
    """LNMax's answer (2017): argmax of the counts plus Laplace noise of scale 1/gamma."""

    gamma: float
    name: ClassVar[str] = "lnmax"

    @property
    def release(self) -> LaplaceRelease:
        # F(q) of Theorem 3 of 2017 over the ball of q (core.ls_lnmax), at gamma.
        return LaplaceRelease(self.gamma)

    # The formulas are imported where they are used: a mechanism's module is loaded by every
    # command, --version and --help too, which need no numpy.
    def logq(self, counts: Counts) -> FloatArray:
        from pate_cli.core.lnmax import logq_lnmax

        return logq_lnmax(counts, self.gamma)  # Lemma 4 of 2017

    def cost(self, orders: FloatArray) -> Callable[[FloatArray], FloatArray]:
        from pate_cli.core.lnmax import rdp_lnmax

        return partial(rdp_lnmax, gamma=self.gamma, orders=orders)  # Theorem 3 of 2017

    def data_independent(self, orders: FloatArray) -> FloatArray:
        from pate_cli.core.lnmax import rdp_lnmax_data_independent

        return rdp_lnmax_data_independent(self.gamma, orders)  # pure 2 gamma-DP

    def part(self, answered: float) -> PurePart:
        # Laplace noise on counts of L1 sensitivity 2: each answer is (2 gamma)-DP.
        return PurePart(2.0 * self.gamma, int(answered))

    def agreement(self, counts: Counts) -> FloatArray:
        from pate_cli.core.agreement import laplace_agreement

        return laplace_agreement(counts, self.gamma)  # by quadrature

    def log_probabilities(self, counts: FloatArray) -> FloatArray:
        from pate_cli.core.outcomes import laplace_log_probabilities

        return laplace_log_probabilities(counts, self.gamma)  # by quadrature


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
        from pate_cli.mechanisms.samplers import Laplace, answer_every_query, noisy_max

        # Laplace.of_rate: a subnormal gamma's scale overflows to inf, and the noise decides.
        noise_of = Laplace.of_rate(self.gamma)
        labels = noisy_max(counts, noise_of, noise.generator("aggregate-answer"))
        return answer_every_query(labels, **run.limits)

"""Interactive-GNMax (2018, Algorithm 2): Confident-GNMax whose threshold step sees the
teachers' votes minus the student's own (the baseline)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, ClassVar

from pate_cli.errors import UsageError
from pate_cli.mechanisms.base import Run
from pate_cli.mechanisms.confident import ConfidentGNMax

if TYPE_CHECKING:
    import numpy as np

    from pate_cli.files.seeds import Noise
    from pate_cli.mechanisms.samplers import AggregationResult


@dataclass(frozen=True)
class InteractiveGNMax(ConfidentGNMax):
    """Algorithm 2 of 2018: the threshold step sees votes minus the student's baseline."""

    name: ClassVar[str] = "interactive-gnmax"
    short: ClassVar[str] = "interactive"
    needs_baseline: ClassVar[bool] = True
    adaptive_queries: ClassVar[bool] = True
    source: ClassVar[str] = "Algorithm 2, 2018"

    def run(self, counts: np.ndarray, noise: Noise, run: Run) -> AggregationResult:
        from pate_cli.mechanisms.aggregators import aggregate_interactive_gnmax

        if run.student_probs is None:  # aggregate checks them before any draw
            raise UsageError("interactive-gnmax needs the student's probabilities")
        return aggregate_interactive_gnmax(
            counts,
            run.student_probs,
            self.threshold,
            self.sigma1,
            self.sigma,
            run.student_confidence,
            noise.generator("aggregate-answer"),
            num_teachers=run.num_teachers,
            half_even=run.half_even,
            threshold_rng=noise.generator("aggregate-threshold"),
            **run.limits,
        )

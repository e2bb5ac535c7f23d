"""Laplace-threshold for pate: a Laplace noisy max that answers only where the teachers'
consensus, seen through Laplace noise, reaches a threshold (Confident-GNMax's shape with
Laplace noise in both steps). Its two steps are pure DP of different epsilon0. Beside it,
Confident-GNMax's Gaussian threshold with LNMax's answer: a Gaussian part and a pure one.

- Threshold step: answer when the rounded top count plus Laplace noise of scale b1 reaches
  T. The top count moves by 1 between neighbours (2 under half to even at exact halves), so
  each query is (1 / b1)-DP (the Laplace mechanism, Dwork, McSherry, Nissim and Smith 2006).
- Answer step: the argmax of the counts plus Laplace noise of scale b on every class. A
  teacher's change moves two counts by one, so each answer is (2 / b)-DP (LNMax, Papernot et
  al. 2017).

Both steps' Renyi DP is pure DP's: an eps-DP mechanism is (a, min(eps, a eps^2 / 2))-RDP at
every order a (Mironov 2017, Prop. 3; Bun and Steinke 2016, Prop. 1.4), and Theorem 3 of
Papernot et al. 2017 bounds it from a bound q on not giving one outcome
(``rdp_pure_answer``): the less likely of the threshold's two outcomes, Lemma 4's q of the
answer.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import partial
from typing import ClassVar

import numpy as np

from pate_cli.core.agreement import laplace_agreement
from pate_cli.core.lnmax import logq_lnmax, rdp_pure_answer, rdp_pure_data_independent
from pate_cli.core.threshold import round_votes, statistic_sensitivity
from pate_cli.mechanisms import Mechanism, Parameter
from pate_cli.mechanisms.confident import THRESHOLD
from pate_cli.mechanisms.lnmax import GAMMA, LaplaceAnswer
from pate_cli.mechanisms.samplers import Laplace, answer_where, noisy_max, noisy_threshold
from pate_cli.mechanisms.steps import GaussianThreshold, PurePart, ThresholdCost, ThresholdTerms

THRESHOLD_SCALE = Parameter(
    "threshold_scale",
    "Laplace-threshold: Laplace noise of scale B1 on the top count ((1/B1)-DP per query).",
    symbol="B1",
)
ANSWER_SCALE = Parameter(
    "answer_scale",
    "Laplace-threshold: Laplace noise of scale B on every count ((2/B)-DP per answer).",
    symbol="B",
)
THRESHOLD_SIGMA = Parameter(
    "threshold_sigma",
    "Gaussian-threshold LNMax: Gaussian noise of std S on the top count.",
    symbol="S",
)
_LOG_HALF = float(np.log(0.5))


def _up(logq: np.ndarray) -> np.ndarray:
    """A computed log-probability moved above its few roundings, never above log 1/2 (the
    less likely of two outcomes)."""
    return np.minimum(logq + 1e-12 * (1.0 + np.abs(logq)), _LOG_HALF)


@dataclass(frozen=True)
class LaplaceThresholdStep:
    """Answer when round(max votes) + Laplace(b1) >= T: each query (moves / b1)-DP, the
    rounded top count moving by ``moves``."""

    threshold: float
    scale: float
    name: ClassVar[str] = "threshold"

    def sample(self, values, rng, half_even):
        return noisy_threshold(
            values, self.threshold, Laplace(self.scale), rng, half_even=half_even
        )

    def terms(self, values, half_even):
        top = round_votes(np.asarray(values, dtype=np.float64).max(axis=1), half_even=half_even)
        margins = (top - self.threshold) / self.scale
        # Pr[top + Lap(b1) >= T] = 1 - e^-z / 2 above the threshold (z >= 0), e^z / 2 below.
        log_pr = np.where(
            margins >= 0, np.log1p(-0.5 * np.exp(-np.abs(margins))), _LOG_HALF + margins
        )
        logq = _up(_LOG_HALF - np.abs(margins))  # the less likely outcome, e^-|z| / 2
        return ThresholdTerms(margins, log_pr, logq, self.moves(values, half_even))

    def moves(self, values, half_even):
        return statistic_sensitivity(values, half_even=half_even)

    def cost(self, orders, moves):
        # Theorem 3 of 2017 on the less likely outcome: the step is (moves / b1)-DP.
        function = partial(rdp_pure_answer, epsilon0=moves / self.scale, orders=orders)
        return ThresholdCost("logq_threshold", ("laplace-threshold", self.scale, moves), function)

    def data_independent(self, orders, moves):
        return rdp_pure_data_independent(moves / self.scale, orders)

    def joint(self, margins, orders, answer, moves):
        # The joint (outcome, label): at most the outcome's divergence plus the label's
        # (the label's term of the joint's sum is at most e^((a - 1) D_label) >= 1).
        logq = _up(_LOG_HALF - np.abs(np.asarray(margins, dtype=np.float64)))
        return self.cost(orders, moves).function(logq) + answer

    def part(self, queries, moves):
        return PurePart(moves / self.scale, int(queries))


@dataclass(frozen=True)
class LaplaceMaxAnswer:
    """The argmax of the counts plus Laplace noise of scale b: (2 / b)-DP per answer."""

    scale: float
    name: ClassVar[str] = "laplace-max"
    local_sensitivity: ClassVar[None] = None  # no smooth-sensitivity table: no release

    @property
    def epsilon0(self) -> float:
        return 2.0 / self.scale

    def logq(self, counts):
        return logq_lnmax(counts, 1.0 / self.scale)  # Lemma 4 of 2017, gamma = 1 / b

    def cost(self, orders):
        return partial(rdp_pure_answer, epsilon0=self.epsilon0, orders=orders)  # Thm 3, 2017

    def data_independent(self, orders):
        return rdp_pure_data_independent(self.epsilon0, orders)

    def part(self, answered):
        return PurePart(self.epsilon0, int(answered))

    def agreement(self, counts):
        return laplace_agreement(counts, 1.0 / self.scale)


@dataclass(frozen=True)
class LaplaceThreshold(Mechanism):
    """Answer with a Laplace noisy max of scale ``answer_scale`` where the top count plus
    Laplace noise of scale ``threshold_scale`` reaches ``threshold``."""

    name: ClassVar[str] = "laplace-threshold"
    short: ClassVar[str] = "lap-thr"
    parameters: ClassVar[tuple[Parameter, ...]] = (THRESHOLD, THRESHOLD_SCALE, ANSWER_SCALE)
    source: ClassVar[str] = "Confident-GNMax's threshold (2018) with LNMax's noise (2017)"
    answers_every_query: ClassVar[bool] = False

    threshold: float
    threshold_scale: float
    answer_scale: float

    @property
    def threshold_step(self) -> LaplaceThresholdStep:
        return LaplaceThresholdStep(self.threshold, self.threshold_scale)

    @property
    def answer_step(self) -> LaplaceMaxAnswer:
        return LaplaceMaxAnswer(self.answer_scale)

    def run(self, counts, noise, run):
        rng = noise.generator("aggregate-threshold")
        answered = self.threshold_step.sample(counts, rng, run.half_even)
        labels = noisy_max(counts, Laplace(self.answer_scale), noise.generator("aggregate-answer"))
        return answer_where(answered, labels, **run.limits)


@dataclass(frozen=True)
class GaussianThresholdLNMax(Mechanism):
    """Confident-GNMax's Gaussian threshold beside LNMax's Laplace answer: a Gaussian part and
    a pure-DP part, which no exact account joins."""

    name: ClassVar[str] = "gaussian-threshold-lnmax"
    short: ClassVar[str] = "gau-thr-ln"
    parameters: ClassVar[tuple[Parameter, ...]] = (THRESHOLD, THRESHOLD_SIGMA, GAMMA)
    source: ClassVar[str] = "Confident-GNMax's threshold (2018) with LNMax's answer (2017)"
    answers_every_query: ClassVar[bool] = False

    threshold: float
    threshold_sigma: float
    gamma: float

    @property
    def threshold_step(self) -> GaussianThreshold:
        return GaussianThreshold(self.threshold, self.threshold_sigma)

    @property
    def answer_step(self) -> LaplaceAnswer:
        return LaplaceAnswer(self.gamma)

    def run(self, counts, noise, run):
        rng = noise.generator("aggregate-threshold")
        answered = self.threshold_step.sample(counts, rng, run.half_even)
        labels = noisy_max(counts, Laplace.of_rate(self.gamma), noise.generator("aggregate-answer"))
        return answer_where(answered, labels, **run.limits)

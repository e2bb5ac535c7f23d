"""A mechanism plugin that fails on purpose, one way for each value of ``--fault``: a Laplace
noisy max (noise of scale ``--fault-scale`` on every count, (2 / scale)-DP per answer) that
raises, returns NaN or labels out of range, exits or hangs where asked. The tests install it
(``tests.plugin_site``) to see every failure said as the plugin's."""

from __future__ import annotations

import math
import os
import time
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import ClassVar

import numpy as np

from pate_cli.core.lnmax import logq_lnmax, rdp_pure_answer, rdp_pure_data_independent
from pate_cli.mechanisms import Mechanism, Parameter
from pate_cli.mechanisms.parameters import FINITE, Cost
from pate_cli.mechanisms.samplers import (
    AggregationResult,
    Laplace,
    answer_every_query,
    noisy_max,
)
from pate_cli.mechanisms.steps import PurePart

RUN_RAISES = 1
NAN_LABELS = 2
NAN_LOGQ = 3
NAN_EPSILON0 = 4
RUN_EXITS = 5
LOGQ_INTERRUPTS = 6
NEGATIVE_RDP = 7
LABEL_OUT_OF_RANGE = 8
CONSTRUCTION_RAISES = 9
RUN_HANGS = 10
NEGATIVE_EPSILON0 = 11
LOGQ_EXITS = 12
AGREEMENT_ABOVE_ONE = 13

SCALE = Parameter("fault_scale", "Faulty: Laplace noise of scale B on every count.", symbol="B")
FAULT = Parameter(
    "fault", "Faulty: which failure.", symbol="F", domain=FINITE, listable=False, cost=Cost.FIXED
)


@dataclass(frozen=True)
class FaultyAnswer:
    """LNMax's answer at noise of scale ``scale``, failing as ``fault`` says."""

    scale: float
    fault: int
    name: ClassVar[str] = "faulty"
    local_sensitivity: ClassVar[None] = None

    @property
    def epsilon0(self) -> float:
        if self.fault == NAN_EPSILON0:
            return math.nan
        return -1.0 if self.fault == NEGATIVE_EPSILON0 else 2.0 / self.scale

    @property
    def key(self) -> tuple[object, ...]:
        return ("faulty", self.scale, self.fault)

    def logq(self, counts: np.ndarray) -> np.ndarray:
        if self.fault == LOGQ_INTERRUPTS:
            raise KeyboardInterrupt  # not a signal: the plugin's own doing
        if self.fault == LOGQ_EXITS:
            raise SystemExit(0)
        logq = logq_lnmax(np.asarray(counts, dtype=np.float64), 1.0 / self.scale)
        if self.fault == NAN_LOGQ:
            logq[3] = math.nan
        return logq

    def cost(self, orders: np.ndarray):  # noqa: ANN201 (the docs' plugin's shape)
        return partial(rdp_pure_answer, epsilon0=self.epsilon0, orders=orders)

    def data_independent(self, orders: np.ndarray) -> np.ndarray:
        if self.fault == NEGATIVE_RDP:
            return np.full(np.shape(orders), -0.25)
        return rdp_pure_data_independent(self.epsilon0, orders)

    def part(self, answered: float) -> PurePart:
        return PurePart(self.epsilon0, int(answered))

    def agreement(self, counts: np.ndarray) -> np.ndarray:
        agree = 1.0 - np.exp(self.logq(counts))
        return np.full_like(agree, 1.5) if self.fault == AGREEMENT_ABOVE_ONE else agree


@dataclass(frozen=True)
class Faulty(Mechanism):
    """A Laplace noisy max that fails as ``fault`` says."""

    name: ClassVar[str] = "faulty"
    short: ClassVar[str] = "faulty"
    parameters: ClassVar[tuple[Parameter, ...]] = (SCALE, FAULT)
    source: ClassVar[str] = "the tests"

    fault_scale: float
    fault: float

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.fault == CONSTRUCTION_RAISES:
            raise RuntimeError("cannot build")

    @property
    def answer_step(self) -> FaultyAnswer:
        return FaultyAnswer(self.fault_scale, int(self.fault))

    def run(self, counts, noise, run):  # noqa: ANN001, ANN201 (the docs' plugin's shape)
        fault = int(self.fault)
        if fault == RUN_RAISES:
            return 1 / 0
        if fault == RUN_EXITS:
            raise SystemExit(0)
        if fault == RUN_HANGS:  # says so in the file FAULTY_MARKER names, then hangs
            Path(os.environ["FAULTY_MARKER"]).write_text("running")
            time.sleep(600)
        labels = noisy_max(counts, Laplace(self.fault_scale), noise.generator("aggregate-answer"))
        result = answer_every_query(labels, **run.limits)
        if fault == LABEL_OUT_OF_RANGE:
            labels = result.labels.copy()
            labels[5] = np.shape(counts)[1]
            return AggregationResult(labels, result.answered, result.seen, result.branch)
        if fault == NAN_LABELS:
            labels = result.labels.astype(np.float64)
            labels[2] = math.nan
            return AggregationResult(labels, result.answered, result.seen, result.branch)  # type: ignore[arg-type]
        return result

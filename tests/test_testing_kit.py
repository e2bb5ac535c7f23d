"""``pate_cli.testing``, the test kit for mechanism authors: it passes the built-ins (and,
in tests/test_gated_plugin.py, both examples of docs/mechanisms.md), and it fails, naming
what and where, a mechanism whose RDP is half its own, whose data-independent figure is half
its own, whose sampler does not draw its stated law, which states no law, or which breaks
its registration's promises. Its Renyi divergence against definitions evaluated in
high precision."""

from __future__ import annotations

import itertools
import math
import re
from collections.abc import Iterator
from dataclasses import dataclass, make_dataclass
from typing import ClassVar

import mpmath
import numpy as np
import pytest

import pate_cli as pate
from pate_cli.mechanisms import Mechanism, Parameter, register
from pate_cli.mechanisms.aggregators import aggregate_gnmax
from pate_cli.mechanisms.registry import unregister
from pate_cli.mechanisms.steps import GaussianAnswer
from pate_cli.testing import (
    CASES,
    ORDERS,
    Checked,
    CheckFailed,
    check_data_independent,
    check_mechanism,
    check_rdp,
    check_registration,
    check_sampler,
    histograms,
    renyi_divergence,
)

BUILT_INS = [
    pate.GNMax(2.0),
    pate.GNMax(0.7),
    pate.LNMax(0.5),
    pate.LNMax(2.0),
    pate.ConfidentGNMax(5, 2, 1.5),
    pate.ConfidentGNMax(5, 2, 1.5, threshold_bound="exact"),
    pate.InteractiveGNMax(5, 2, 1.5),
]


def _pairs(teachers: int, classes: int) -> int:
    """(histogram, neighbour) pairs by counting: each voted class of a histogram can give a
    teacher to any of the C - 1 others."""
    return sum(
        sum(1 for n in counts if n) * (classes - 1)
        for counts in itertools.product(range(teachers + 1), repeat=classes)
        if sum(counts) == teachers
    )


@pytest.mark.parametrize("mechanism", BUILT_INS, ids=repr)
def test_the_built_ins_pass(mechanism):
    checked = check_mechanism(mechanism)
    tests = 15 * (1 if mechanism.threshold_step is None else 2)  # 5 histograms a case
    assert checked == Checked(142, 912, ORDERS, tests, 20_000, 200_000)
    assert checked.pairs == sum(_pairs(*case) for case in CASES)
    assert checked.histograms == sum(math.comb(t + c - 1, c - 1) for t, c in CASES)


# ---------------------------------------------------------------------------
# Mechanisms that are wrong in one way each.

HALVED_SIGMA = Parameter("halved_sigma", "GNMax's noise, its RDP halved.", symbol="HS")


@dataclass(frozen=True)
class HalvedAnswer(GaussianAnswer):
    """GNMax's answer whose data-dependent RDP is half its own: below the truth."""

    def cost(self, orders):  # type: ignore[no-untyped-def]
        full = super().cost(orders)
        return lambda logq: full(logq) / 2


@dataclass(frozen=True)
class HalvedGNMax(Mechanism):
    name: ClassVar[str] = "halved-gnmax"
    short: ClassVar[str] = "halved"
    parameters: ClassVar[tuple[Parameter, ...]] = (HALVED_SIGMA,)

    halved_sigma: float

    @property
    def answer_step(self) -> HalvedAnswer:
        return HalvedAnswer(self.halved_sigma)

    def run(self, counts, noise, run):  # type: ignore[no-untyped-def]
        rng = noise.generator("aggregate-answer")
        return aggregate_gnmax(counts, self.halved_sigma, rng, **run.limits)


@pytest.fixture(scope="module", autouse=True)
def registered() -> Iterator[None]:
    register(HalvedGNMax)
    yield
    unregister(HalvedGNMax.name)


def test_half_the_true_rdp_fails():
    mechanism = HalvedGNMax(1.0)
    check_registration(mechanism)  # everything else about it is right
    check_sampler(mechanism)
    with pytest.raises(CheckFailed) as failed:
        check_mechanism(mechanism)
    assert str(failed.value).startswith(
        "halved-gnmax: answer step's data-dependent RDP: below the exact Renyi divergence at order "
    )
    assert re.search(
        r"on the histogram \[\d+(, \d+)+\] \(\d+ teachers, \d classes\): ", str(failed.value)
    )


@dataclass(frozen=True)
class HalvedThreshold(pate.ConfidentGNMax):
    """Confident-GNMax whose threshold step's data-dependent RDP is half its own."""

    @property
    def threshold_step(self):  # type: ignore[no-untyped-def]
        step = super().threshold_step

        @dataclass(frozen=True)
        class Halved(type(step)):  # type: ignore[misc]
            def cost(self, orders, moves):  # type: ignore[no-untyped-def]
                full = super().cost(orders, moves)
                return type(full)(full.statistic, full.key, lambda s: full.function(s) / 2)

        return Halved(step.threshold, step.sigma1, step.bound)


@pytest.mark.parametrize("bound", ["theorem6", "exact"])
def test_half_the_threshold_steps_rdp_fails(bound):
    with pytest.raises(CheckFailed, match=r"^confident-gnmax: threshold step's data-dependent "
                       r"RDP: below the exact Renyi divergence at order "):  # fmt: skip
        check_rdp(HalvedThreshold(5, 1.0, 1.5, threshold_bound=bound))


@dataclass(frozen=True)
class HalvedIndependent(GaussianAnswer):
    def data_independent(self, orders):  # type: ignore[no-untyped-def]
        return super().data_independent(orders) / 2


@dataclass(frozen=True)
class HalvedIndependentGNMax(pate.GNMax):
    @property
    def answer_step(self) -> HalvedIndependent:
        return HalvedIndependent(self.sigma)


def test_half_the_data_independent_rdp_fails():
    check_rdp(HalvedIndependentGNMax(1.0))  # its data-dependent figure is GNMax's
    with pytest.raises(CheckFailed, match=r"^gnmax: answer step: its data-independent RDP is "
                       r"below its data-dependent RDP at order "):  # fmt: skip
        check_data_independent(HalvedIndependentGNMax(1.0))


@dataclass(frozen=True)
class SkewedAnswer(GaussianAnswer):
    """GNMax's answer stating the law of a noise a quarter wider than it draws."""

    def log_probabilities(self, counts):  # type: ignore[no-untyped-def]
        return GaussianAnswer(self.sigma * 1.25).log_probabilities(counts)


@dataclass(frozen=True)
class SkewedGNMax(pate.GNMax):
    @property
    def answer_step(self) -> SkewedAnswer:
        return SkewedAnswer(self.sigma)


def test_a_sampler_that_does_not_draw_its_stated_law_fails():
    with pytest.raises(CheckFailed) as failed:
        check_sampler(SkewedGNMax(2.0))
    said = str(failed.value)
    assert said.startswith("gnmax: run: its draws on the histogram [")
    assert "do not follow its stated probabilities: frequencies [" in said
    assert re.search(r"\(chi-square p = \S+ < 6\.67e-08\)$", said)  # 1e-6 over 15 tests


@dataclass(frozen=True)
class CertainAnswer(GaussianAnswer):
    """States that the plurality label is certain (it is not)."""

    def log_probabilities(self, counts):  # type: ignore[no-untyped-def]
        counts = np.asarray(counts, dtype=np.float64)
        out = np.full(counts.shape, -np.inf)
        out[np.arange(len(counts)), counts.argmax(axis=1)] = 0.0
        return out


@dataclass(frozen=True)
class CertainGNMax(pate.GNMax):
    @property
    def answer_step(self) -> CertainAnswer:
        return CertainAnswer(self.sigma)


def test_an_outcome_stated_impossible_fails_at_once():
    with pytest.raises(CheckFailed, match=r"^gnmax: run: it drew an outcome its stated "
                       r"probabilities make impossible on the histogram \[0, 4\]"):  # fmt: skip
        check_sampler(CertainGNMax(2.0), cases=((4, 2),))


@dataclass(frozen=True)
class LawlessAnswer(GaussianAnswer):
    log_probabilities: ClassVar[None] = None  # type: ignore[assignment]


@dataclass(frozen=True)
class LawlessGNMax(pate.GNMax):
    @property
    def answer_step(self) -> LawlessAnswer:
        return LawlessAnswer(self.sigma)


def test_a_mechanism_that_states_no_law_fails_naming_the_member():
    for check in (check_rdp, check_sampler):
        with pytest.raises(CheckFailed, match=r"^gnmax: answer step: it has no "
                           r"log_probabilities\(counts\)"):  # fmt: skip
            check(LawlessGNMax(2.0))


# ---------------------------------------------------------------------------
# Registration and flags.


@dataclass
class OpenAnswer:
    """An answer step that is no frozen dataclass: it cannot be hashed, so it is nobody's
    key (registration asks nothing else of it)."""

    sigma: float
    name: ClassVar[str] = "open"


def _gnmax_like(name: str, **members: object) -> type[Mechanism]:
    """A GNMax of one parameter named after it (its flags its own), with ``members``."""
    parameter = Parameter(name.replace("-", "_"), f"{name}: GNMax's noise.", symbol="X")

    def answer_step(self: Mechanism) -> GaussianAnswer:
        return GaussianAnswer(getattr(self, parameter.name))

    namespace = {"name": name, "short": name, "parameters": (parameter,),
                 "answer_step": property(answer_step), **members}  # fmt: skip
    return make_dataclass(
        name.title().replace("-", ""),
        [(parameter.name, float)],
        bases=(Mechanism,),
        frozen=True,
        namespace=namespace,
    )


def _open_step(self: Mechanism) -> OpenAnswer:
    return OpenAnswer(self.open_gnmax)  # type: ignore[attr-defined]


@pytest.mark.parametrize(
    ("kind", "failure"),
    [
        (
            _gnmax_like("unregistered-gnmax"),
            "unregistered-gnmax: registration: it is not registered",
        ),
        (
            _gnmax_like("hidden-gnmax", defaults_in_json={"hidden_gnmax": 40.0}),
            "hidden-gnmax: registration: its report block {'name': 'hidden-gnmax'} does not "
            "build it: UsageError: mechanism {'name': 'hidden-gnmax'}: parameters that do not "
            "fit it",
        ),
        (
            _gnmax_like("abstaining-gnmax", answers_every_query=False),
            "abstaining-gnmax: flags: answers_every_query is False; it has no threshold step",
        ),
        (
            _gnmax_like("open-gnmax", answer_step=property(_open_step)),
            "open-gnmax: answer step: it cannot be hashed (declare it @dataclass(frozen=True))",
        ),
    ],
    ids=["unregistered", "json", "flags", "unhashable"],
)
def test_registration_and_flags_are_checked(kind, failure):
    if kind.name != "unregistered-gnmax":
        register(kind)
    try:
        with pytest.raises(CheckFailed) as failed:
            check_registration(kind(40.0))
        assert str(failed.value).startswith(failure), str(failed.value)
    finally:
        unregister(kind.name)


def test_the_built_ins_registration_holds():
    for mechanism in BUILT_INS:
        check_registration(mechanism)
    check_registration(HalvedGNMax(40.0))


# ---------------------------------------------------------------------------
# The divergence and the histograms.


def _renyi(p: list[float], q: list[float], order: float) -> float:
    """D_order(P || Q) by its definition, at 60 digits."""
    with mpmath.workdps(60):
        total = mpmath.fsum(
            mpmath.mpf(a) ** order * mpmath.mpf(b) ** (1 - order) for a, b in zip(p, q, strict=True)
        )
        return float(mpmath.log(total) / (order - 1))


def test_the_divergence_is_its_definition():
    orders = [1.25, 2.0, 8.0, 64.0]
    for p, q in (([0.3, 0.7], [0.6, 0.4]), ([0.2, 0.3, 0.5], [0.25, 0.25, 0.5])):
        found = renyi_divergence(np.log([p]), np.log([q]), orders)[0]
        assert found == pytest.approx([_renyi(p, q, a) for a in orders], rel=1e-13)
    # Two near-equal laws: D ~ 2 order e^2, within the logs' own roundings.
    e = 1e-6
    p, q = [0.5 + e, 0.5 - e], [0.5, 0.5]
    found = renyi_divergence(np.log([p]), np.log([q]), orders)[0]
    assert found == pytest.approx([_renyi(p, q, a) for a in orders], rel=0, abs=1e-15)
    assert 2e-12 < found[0] < 3e-12
    # An outcome Q never shows: infinite; one P never shows: no term; never NaN.
    assert np.isinf(renyi_divergence(np.log([[0.5, 0.5]]), [[0.0, -np.inf]], orders)).all()
    with np.errstate(divide="ignore"):
        same = renyi_divergence(np.log([[1.0, 0.0]]), np.log([[1.0, 0.0]]), orders)
    assert (same == 0).all()


def test_histograms_are_every_vote_of_the_teachers():
    for teachers, classes in ((1, 2), (5, 3), (6, 4)):
        found = histograms(teachers, classes)
        assert len(found) == math.comb(teachers + classes - 1, classes - 1)
        assert (found.sum(axis=1) == teachers).all() and (found >= 0).all()
        assert len({tuple(row) for row in found.tolist()}) == len(found)

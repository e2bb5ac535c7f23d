"""A step brings its release, and a release covers only the threshold steps it can: LNMax's
answer behind a threshold is refused in one line (it was released as if every query were
answered, the threshold data-independent), as is GNMax's behind a threshold step that is no
Gaussian threshold (for the release and for --pld). LNMax is written from what
docs/mechanisms.md documents, and a copy of it made here from those names alone gives its
figures, its release and its labels."""

from __future__ import annotations

import ast
import importlib
import re
from collections.abc import Iterator
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import ClassVar

import numpy as np
import pytest

import pate_cli as pate
from pate_cli.core.agreement import laplace_agreement
from pate_cli.core.lnmax import logq_lnmax, rdp_lnmax, rdp_lnmax_data_independent
from pate_cli.errors import ExitCode, UnsupportedError
from pate_cli.mechanisms import Mechanism, Parameter, register
from pate_cli.mechanisms.confident import THRESHOLD
from pate_cli.mechanisms.lnmax import GAMMA, LaplaceAnswer
from pate_cli.mechanisms.registry import unregister
from pate_cli.mechanisms.releases import LaplaceRelease
from pate_cli.mechanisms.samplers import Laplace, answer_every_query, noisy_max
from pate_cli.mechanisms.steps import GaussianThreshold, PurePart
from tests.conftest import MNIST, run_cli

ROOT = Path(__file__).resolve().parent.parent
QUERIES = 300
GATE_SIGMA = Parameter("gate_sigma", "The Gaussian gate's noise std.", symbol="GS")
GATE_NOISE = Parameter("gate_noise", "The plain gate's noise std.", symbol="GN")
PLAIN_SIGMA = Parameter("plain_sigma", "The plain gate's answer noise std.", symbol="PS")
SPREAD = ["--threshold", 200, "--delta", 1e-5, "--queries", QUERIES]


@dataclass(frozen=True)
class GatedLNMax(Mechanism):
    """LNMax's answer behind Confident-GNMax's threshold step."""

    name: ClassVar[str] = "gated-lnmax"
    short: ClassVar[str] = "gated-ln"
    parameters: ClassVar[tuple[Parameter, ...]] = (THRESHOLD, GATE_SIGMA, GAMMA)
    answers_every_query: ClassVar[bool] = False

    threshold: float
    gate_sigma: float
    gamma: float

    @property
    def threshold_step(self) -> GaussianThreshold:
        return GaussianThreshold(self.threshold, self.gate_sigma)

    @property
    def answer_step(self) -> LaplaceAnswer:
        return LaplaceAnswer(self.gamma)


@dataclass(frozen=True)
class PlainThreshold(GaussianThreshold):
    """Confident-GNMax's threshold step, saying it is no Gaussian threshold."""

    gaussian: ClassVar[None] = None  # type: ignore[assignment]
    name: ClassVar[str] = "plain-threshold"


@dataclass(frozen=True)
class PlainConfident(Mechanism):
    """GNMax's answer behind a threshold step the Gaussian-only features may not read."""

    name: ClassVar[str] = "plain-confident"
    short: ClassVar[str] = "plain"
    parameters: ClassVar[tuple[Parameter, ...]] = (THRESHOLD, GATE_NOISE, PLAIN_SIGMA)
    answers_every_query: ClassVar[bool] = False

    threshold: float
    gate_noise: float
    plain_sigma: float

    @property
    def threshold_step(self) -> PlainThreshold:
        return PlainThreshold(self.threshold, self.gate_noise)

    @property
    def answer_step(self):  # type: ignore[no-untyped-def]
        return pate.GNMax(self.plain_sigma).answer_step


@pytest.fixture(scope="module", autouse=True)
def registered() -> Iterator[None]:
    for kind in (GatedLNMax, PlainConfident, CopyLNMax):
        register(kind)
    yield
    for kind in (GatedLNMax, PlainConfident, CopyLNMax):
        unregister(kind.name)


@pytest.fixture(scope="module")
def votes():
    return pate.load_votes(MNIST, queries=QUERIES)


def _one_line(args: list[object]) -> str:
    result = run_cli(["smooth-sensitivity", MNIST, *args], expect=ExitCode.BAD_INPUT)
    (line,) = result.stderr.strip().splitlines()
    return line


def test_lnmaxs_release_refuses_a_threshold_step(votes):
    said = (
        "gated-lnmax: the smooth-sensitivity release of a Laplace answer step covers a "
        "mechanism that answers every query, and this one has a threshold step ('threshold'): "
        "its data-dependent epsilon has no smooth-sensitivity release"
    )
    assert _one_line([*SPREAD, "--gate-sigma", 150, "--gamma", 0.05]) == f"pate: error: {said}"
    with pytest.raises(UnsupportedError, match=re.escape(said)):
        pate.smooth_sensitivity(votes, GatedLNMax(200, 150, 0.05), delta=1e-5)
    # analyze says so in its release block; its figures stand.
    report = pate.analyze(votes, GatedLNMax(200, 150, 0.05), delta=1e-5).to_dict()
    assert report["release"] == {"released": False, "reason": said}
    assert 0 < report["data_dependent"]["epsilon"] <= report["data_independent"]["epsilon"]


def test_a_threshold_step_no_gaussian_one_is_refused_by_the_gaussian_features(votes):
    said = (
        "reads a Gaussian threshold step (rounded top count plus N(0, sigma1^2)); the "
        "threshold step 'plain-threshold' is not one"
    )
    flags = [*SPREAD, "--gate-noise", 150, "--plain-sigma", 40]
    release = "plain-confident: the smooth-sensitivity release of a Gaussian answer step"
    assert _one_line(flags) == f"pate: error: {release} {said}"
    for pld in ("", "exact"):
        args = ["analyze", MNIST, *flags, "--no-release", "--pld", *([pld] if pld else [])]
        result = run_cli(args, expect=ExitCode.BAD_INPUT)
        (line,) = result.stderr.strip().splitlines()
        assert line == f"pate: error: plain-confident: --pld {said}"
    # Its Renyi-DP figures are Confident-GNMax's: they need none of it.
    mine = pate.analyze(votes, PlainConfident(200, 150, 40), delta=1e-5, release=False)
    same = pate.analyze(votes, pate.ConfidentGNMax(200, 150, 40), delta=1e-5, release=False)
    assert mine.to_dict()["data_dependent"] == same.to_dict()["data_dependent"]


# ---------------------------------------------------------------------------
# LNMax through the public interface.


def _documented(name: str, doc: str) -> bool:
    return f"`{name}" in doc or re.search(rf"`[\w.]*\b{name}\b[^`]*`", doc) is not None


def _reachable(module: str, name: str, doc: str) -> bool:
    """Whether the docs name a module that gives ``name``: ``module`` itself, or the
    package ``pate_cli.mechanisms`` re-exporting the same object (a built-in cannot import
    the package it is part of)."""
    found = getattr(importlib.import_module(module), name)
    package = importlib.import_module("pate_cli.mechanisms")
    return f"`{module}" in doc or getattr(package, name, None) is found


def test_lnmax_imports_only_what_the_docs_document():
    doc = (ROOT / "docs" / "mechanisms.md").read_text()
    source = (ROOT / "pate_cli" / "mechanisms" / "lnmax.py").read_text()
    imported = [
        (node.module, alias.name)
        for node in ast.walk(ast.parse(source))
        if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("pate_cli")
        for alias in node.names
    ]
    assert ("pate_cli.mechanisms.releases", "LaplaceRelease") in imported
    undocumented = [
        f"{module}.{name}"
        for module, name in imported
        if name.startswith("_") or not _documented(name, doc) or not _reachable(module, name, doc)
    ]
    assert undocumented == []
    assert not _documented("_noisy_argmax", doc)  # the check finds what is missing


COPY_GAMMA = Parameter("copy_gamma", "LNMax's gamma, in a copy.", symbol="CG", unit="1/votes")


@dataclass(frozen=True)
class CopyAnswer:
    """LNMax's answer step from the documented names alone."""

    gamma: float
    name: ClassVar[str] = "lnmax"

    @property
    def release(self) -> LaplaceRelease:
        return LaplaceRelease(self.gamma)

    def logq(self, counts):  # type: ignore[no-untyped-def]
        return logq_lnmax(counts, self.gamma)

    def cost(self, orders):  # type: ignore[no-untyped-def]
        return partial(rdp_lnmax, gamma=self.gamma, orders=orders)

    def data_independent(self, orders):  # type: ignore[no-untyped-def]
        return rdp_lnmax_data_independent(self.gamma, orders)

    def part(self, answered):  # type: ignore[no-untyped-def]
        return PurePart(2.0 * self.gamma, int(answered))

    def agreement(self, counts):  # type: ignore[no-untyped-def]
        return laplace_agreement(counts, self.gamma)


@dataclass(frozen=True)
class CopyLNMax(Mechanism):
    name: ClassVar[str] = "copy-lnmax"
    short: ClassVar[str] = "copy"
    parameters: ClassVar[tuple[Parameter, ...]] = (COPY_GAMMA,)

    copy_gamma: float

    @property
    def answer_step(self) -> CopyAnswer:
        return CopyAnswer(self.copy_gamma)

    def run(self, counts, noise, run):  # type: ignore[no-untyped-def]
        rng = noise.generator("aggregate-answer")
        labels = noisy_max(counts, Laplace.of_rate(self.copy_gamma), rng)
        return answer_every_query(labels, **run.limits)


def _without_mechanism(report: dict) -> dict:
    return {key: value for key, value in report.items() if key != "mechanism"}


@pytest.mark.parametrize("gamma", [0.05, 1e-310])
def test_a_copy_of_lnmax_from_public_names_is_lnmax(votes, tmp_path, gamma):
    release = {"order": 20, "beta": 0.01, "sigma_ss": 10, "delta": 1e-5, "seed": 7}
    copy = pate.smooth_sensitivity(votes, CopyLNMax(gamma), **release).to_dict()
    lnmax = pate.smooth_sensitivity(votes, pate.LNMax(gamma), **release).to_dict()
    assert _without_mechanism(copy) == _without_mechanism(lnmax)
    assert copy["released"] and copy["local_sensitivity_bound"] == "tabulated"
    assert copy["smooth_sensitivity"] > 0 and copy["epsilon_released"] is not None
    rows = pate.compare(votes, [CopyLNMax(gamma), pate.LNMax(gamma)], delta=1e-5).to_dict()
    assert _without_mechanism(rows["rows"][0]) == _without_mechanism(rows["rows"][1])
    labels = []
    for flags in (["--copy-gamma", gamma], ["--gamma", gamma]):
        out = tmp_path / f"{flags[0][2:]}.npy"
        run_cli(["aggregate", MNIST, *flags, "--queries", QUERIES, "--delta", 1e-5,
                 "--seed", 11, "--output", out, "--json"])  # fmt: skip
        labels.append(np.load(out))
    assert np.array_equal(*labels) and (labels[0] >= 0).all()

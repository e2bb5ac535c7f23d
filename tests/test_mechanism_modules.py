"""A mechanism is one module: the accountant asks the steps for their formulas (what the
rest asks of a mechanism is held by ``tests/test_dispatch.py``), and a new mechanism defined
here, registered and nowhere else, runs through analyze, compare, plan, aggregate, --record
and verify (command line and library)."""

from __future__ import annotations

import ast
import json
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import ClassVar

import numpy as np
import pytest

import pate_cli as pate
from pate_cli.errors import ExitCode, UnsupportedError
from pate_cli.mechanisms import Mechanism, Parameter, register
from pate_cli.mechanisms.aggregators import aggregate_gnmax
from pate_cli.mechanisms.lnmax import LaplaceAnswer
from pate_cli.mechanisms.registry import unregister
from pate_cli.mechanisms.steps import GaussianAnswer
from tests.conftest import MNIST, run_cli

PACKAGE = Path(pate.__file__).parent
CLASSES = {"GNMax", "LNMax", "ConfidentGNMax", "InteractiveGNMax"}
NAMES = {"gnmax", "lnmax", "confident-gnmax", "interactive-gnmax"}


STEP_FORMULAS = {"threshold", "gnmax", "lnmax", "agreement"}


def step_formulas(source: str) -> list[str]:
    """Imports of a step's formulas from ``pate_cli.core``: what the steps alone may read."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.ImportFrom) and node.module is not None:
            modules = {node.module.rsplit(".", 1)[-1]} | {alias.name for alias in node.names}
            if node.module.startswith("pate_cli.core") and modules & STEP_FORMULAS:
                found.append(f"line {node.lineno}: {node.module} {sorted(modules & STEP_FORMULAS)}")
    return found


def test_the_accountant_asks_the_steps_for_their_formulas():
    found = {
        path.name: imports
        for path in sorted((PACKAGE / "accountant").glob("*.py"))
        if (imports := step_formulas(path.read_text()))
    }
    assert not found
    assert step_formulas("from pate_cli.core import conversion, threshold")
    assert step_formulas("from pate_cli.core.threshold import rdp_threshold")


# ---------------------------------------------------------------------------
# A new mechanism, in this file only.


@dataclass(frozen=True)
class TwiceGNMax(Mechanism):
    """GNMax whose noise is twice its ``half_sigma``: so it must cost exactly GNMax(2 sigma)."""

    name: ClassVar[str] = "twice-gnmax"
    short: ClassVar[str] = "twice"
    parameters: ClassVar[tuple[Parameter, ...]] = (
        Parameter("half_sigma", "Half the noise std.", symbol="H"),
    )

    half_sigma: float

    @property
    def answer_step(self) -> GaussianAnswer:
        return GaussianAnswer(2 * self.half_sigma)

    def run(self, counts, noise, run):  # type: ignore[no-untyped-def]
        return aggregate_gnmax(
            counts, 2 * self.half_sigma, noise.generator("aggregate-answer"), **run.limits
        )


@dataclass(frozen=True)
class OddAnswer:
    """An answer step of a kind no release has a local-sensitivity table for."""

    gamma: float
    release: ClassVar[None] = None  # it says it has none (LNMax's costs otherwise)

    def __getattr__(self, name: str):  # type: ignore[no-untyped-def]
        return getattr(LaplaceAnswer(self.gamma), name)


@dataclass(frozen=True)
class OddLNMax(Mechanism):
    """LNMax's costs through an answer step the release does not know."""

    name: ClassVar[str] = "odd-lnmax"
    short: ClassVar[str] = "odd"
    parameters: ClassVar[tuple[Parameter, ...]] = (
        Parameter("odd_gamma", "LNMax's gamma, by another name.", symbol="G", unit="1/votes"),
    )

    odd_gamma: float

    @property
    def answer_step(self) -> OddAnswer:  # type: ignore[override]
        return OddAnswer(self.odd_gamma)


@pytest.fixture(scope="module", autouse=True)
def registered() -> Iterator[None]:
    register(TwiceGNMax)
    register(OddLNMax)
    yield
    unregister(TwiceGNMax.name)
    unregister(OddLNMax.name)


@pytest.fixture(scope="module")
def votes():
    return pate.load_votes(MNIST, queries=300)


def figures(block: dict) -> tuple:
    return (
        block["data_dependent"]["epsilon"],
        block["data_independent"]["epsilon"],
        [f["epsilon"] for f in block["publishable"]],
    )


def test_the_library_analyzes_and_compares_it(votes):
    mine = pate.analyze(votes, TwiceGNMax(20), delta=1e-5, release=False).to_dict()
    same = pate.analyze(votes, pate.GNMax(40), delta=1e-5, release=False).to_dict()
    assert figures(mine) == figures(same) and mine["mechanism"] == {
        "name": "twice-gnmax",
        "half_sigma": 20.0,
    }
    rows = pate.compare(votes, [TwiceGNMax(20), pate.GNMax(40)], delta=1e-5).to_dict()["rows"]
    assert rows[0]["data_dependent"] == rows[1]["data_dependent"]
    assert rows[0]["agreement"] == rows[1]["agreement"]
    released = pate.smooth_sensitivity(
        votes, TwiceGNMax(20), delta=1e-5, order=20, beta=0.01, sigma_ss=10
    )
    reference = pate.smooth_sensitivity(
        votes, pate.GNMax(40), delta=1e-5, order=20, beta=0.01, sigma_ss=10
    )
    assert released.release.smooth_sensitivity == reference.release.smooth_sensitivity


def test_the_command_line_runs_it_end_to_end(tmp_path):
    base = ["--queries", 300, "--delta", 1e-5, "--json"]
    mine = run_cli(["analyze", MNIST, "--half-sigma", 20, "--no-release", *base]).json
    same = run_cli(["analyze", MNIST, "--sigma", 40, "--no-release", *base]).json
    assert figures(mine) == figures(same)
    compared = run_cli(["compare", MNIST, "--half-sigma", "10,20", *base]).json
    assert [row["mechanism"]["half_sigma"] for row in compared["rows"]] == [20.0, 10.0]
    planned = run_cli(
        [
            "plan",
            "--mechanism",
            "twice-gnmax",
            "--delta",
            1e-5,
            "--epsilon",
            2,
            "--queries",
            640,
            "--json",
        ]
    ).json
    gnmax = run_cli(["plan", "--delta", 1e-5, "--epsilon", 2, "--queries", 640, "--json"]).json
    assert planned["value"] == pytest.approx(gnmax["value"] / 2, rel=1e-6)
    labels, record = tmp_path / "labels.npy", tmp_path / "run.record.json"
    args = ["aggregate", MNIST, "--half-sigma", 20, "--queries", 300]
    run_cli(
        [
            *args,
            "--delta",
            1e-5,
            "--seed-file",
            tmp_path / "run.seed",
            "--output",
            labels,
            "--record",
            record,
        ]
    )
    same_labels = tmp_path / "same.npy"
    run_cli(
        [
            "aggregate",
            MNIST,
            "--sigma",
            40,
            "--queries",
            300,
            "--delta",
            1e-5,
            "--seed-file",
            tmp_path / "run.seed",
            "--output",
            same_labels,
            "--force",
        ]
    )
    assert np.array_equal(np.load(labels), np.load(same_labels))
    assert json.loads(record.read_text())["call"]["mechanism"] == {
        "name": "twice-gnmax",
        "half_sigma": 20.0,
    }
    verified = run_cli(["verify", record, "--seed-file", tmp_path / "run.seed", "--json"]).json
    assert verified["verdict"] == "verified", verified["summary"]
    assert pate.verify(record, seed_file=tmp_path / "run.seed").differing == ()


def test_a_release_it_cannot_make_fails_in_one_line(votes):
    with pytest.raises(UnsupportedError, match="no local-sensitivity table"):
        pate.smooth_sensitivity(votes, OddLNMax(0.1), delta=1e-5)
    result = run_cli(
        [
            "smooth-sensitivity",
            MNIST,
            "--odd-gamma",
            0.1,
            "--queries",
            300,
            "--delta",
            1e-5,
        ],
        expect=ExitCode.BAD_INPUT,
    )
    (line,) = result.stderr.strip().splitlines()
    assert line == (
        "pate: error: odd-lnmax: its answer step has no local-sensitivity table, so its "
        "data-dependent epsilon has no smooth-sensitivity release"
    )
    # analyze says so in its release block instead of failing the analysis
    analysis = pate.analyze(votes, OddLNMax(0.1), delta=1e-5).to_dict()
    assert analysis["release"]["released"] is False
    assert "no local-sensitivity table" in analysis["release"]["reason"]
    lnmax = pate.analyze(votes, pate.LNMax(0.1), delta=1e-5, release=False).to_dict()
    assert figures(analysis) == figures(lnmax)


def test_a_mechanism_that_cannot_aggregate_says_so(votes):
    with pytest.raises(UnsupportedError, match="odd-lnmax: no aggregator to run"):
        pate.aggregate(votes, OddLNMax(0.1), delta=1e-5, seed=0)


def test_an_unknown_mechanism_name_is_refused_in_one_line(tmp_path):
    record = tmp_path / "run.record.json"
    args = ["analyze", MNIST, "--mechanism", "gmax", "--sigma", 40, "--delta", 1e-5]
    result = run_cli([*args, "--record", record], expect=ExitCode.BAD_INPUT)
    (line,) = result.stderr.strip().splitlines()
    assert line.startswith("pate: error: --mechanism 'gmax': expected one of gnmax, ")
    assert "twice-gnmax" in line  # the registry's names, registered ones included
    assert not any(tmp_path.iterdir())

"""``compare`` shares per-query terms between rows of the same step only: every built-in and
two plugins side by side, in every order, each row what ``analyze`` says of it alone; and a
column for every parameter that varies across the rows (text, JSON, CSV).

The plugins, registered in-process: docs/mechanisms.md's Gumbel-max, and a threshold plugin
whose step has a Confident-GNMax row's very numbers (T, sigma1) but another statistic (the
gap between the two largest counts), so that terms shared by parameter values alone would
give one row the other's.
"""

from __future__ import annotations

import csv
import math
import re
import sys
import types
from collections.abc import Iterator
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import ClassVar

import numpy as np
import pytest

from pate_cli.choices import Conversion
from pate_cli.core import threshold as threshold_core
from pate_cli.jobs import compare_columns, comparison
from pate_cli.jobs.analysis import analysis_report
from pate_cli.mechanisms import (
    FINITE,
    ConfidentGNMax,
    Cost,
    GNMax,
    InteractiveGNMax,
    LNMax,
    Mechanism,
    Parameter,
    register,
)
from pate_cli.mechanisms.gnmax import SIGMA
from pate_cli.mechanisms.registry import unregister
from pate_cli.mechanisms.steps import (
    GaussianAnswer,
    GaussianPart,
    ThresholdCost,
    ThresholdTerms,
)
from pate_cli.orders import parse_orders
from pate_cli.votes import load_votes
from tests.conftest import MNIST, run_cli
from tests.plugins.laplace_threshold import GaussianThresholdLNMax, LaplaceThreshold

ROOT = Path(__file__).resolve().parent.parent
ORDERS = parse_orders(None)
DELTA = 1e-5
QUERIES = 1000

# ---------------------------------------------------------------------------
# The plugins.

GAP_THRESHOLD = Parameter(
    "gap_threshold",
    "Gap threshold: the gap between the two largest counts it answers from.",
    symbol="GT",
    domain=FINITE,
    cost=Cost.FIXED,
)
GAP_SIGMA = Parameter(
    "gap_sigma",
    "Gap threshold: the std of the Gaussian noise on the gap between the two largest counts.",
    symbol="G1",
)


@dataclass(frozen=True)
class GapThreshold:
    """Answer when the gap between the two largest counts plus N(0, sigma1^2) reaches
    ``threshold``. A teacher's change moves that gap by up to 2 (one count down, another
    up), so every bound is the Gaussian threshold's at a statistic moving by 2."""

    threshold: float
    sigma1: float
    bound: ClassVar[str] = "theorem6"
    name: ClassVar[str] = "gap-threshold"

    def terms(self, values, half_even):  # type: ignore[no-untyped-def]
        ordered = np.sort(np.asarray(values, dtype=np.float64), axis=1)
        margins = (ordered[:, -1] - ordered[:, -2] - self.threshold) / self.sigma1
        log_pr, logq = threshold_core.outcomes_from_margins(margins)
        return ThresholdTerms(margins, log_pr, logq, 2)

    def moves(self, values, half_even):  # type: ignore[no-untyped-def]
        return 2

    def cost(self, orders, moves):  # type: ignore[no-untyped-def]
        function = partial(
            threshold_core.rdp_threshold, sigma1=self.sigma1, orders=orders, sensitivity=moves
        )
        # The built-in threshold's own words: what a plugin copying it would name its cost.
        return ThresholdCost("logq_threshold", ("threshold", self.sigma1, moves), function)

    def data_independent(self, orders, moves):  # type: ignore[no-untyped-def]
        return threshold_core.rdp_threshold_data_independent(self.sigma1, orders, sensitivity=moves)

    def joint(self, margins, orders, answer, moves):  # type: ignore[no-untyped-def]
        return threshold_core.rdp_threshold_joint(
            margins, self.sigma1, orders, answer, shift=float(moves)
        )

    def part(self, queries, moves):  # type: ignore[no-untyped-def]
        return GaussianPart.of(queries * moves**2, self.sigma1)


@dataclass(frozen=True)
class GapConfident(Mechanism):
    """Confident-GNMax's answer behind a threshold on the top-two gap."""

    name: ClassVar[str] = "gap-confident"
    short: ClassVar[str] = "gap"
    parameters: ClassVar[tuple[Parameter, ...]] = (GAP_THRESHOLD, GAP_SIGMA, SIGMA)
    answers_every_query: ClassVar[bool] = False

    gap_threshold: float
    gap_sigma: float
    sigma: float

    @property
    def threshold_step(self) -> GapThreshold:  # type: ignore[override]
        return GapThreshold(self.gap_threshold, self.gap_sigma)

    @property
    def answer_step(self) -> GaussianAnswer:
        return GaussianAnswer(self.sigma)


LOOSE_SIGMA = Parameter(
    "loose_sigma", "Loose GNMax: its noise std (log q bounded twice Prop. 7's).", symbol="LS"
)


@dataclass(frozen=True)
class LooseAnswer(GaussianAnswer):
    """GNMax's answer with q bounded by twice Prop. 7's bound (above it, so still a bound):
    the built-in's numbers (and whatever else it inherits), another log q."""

    def logq(self, counts):  # type: ignore[no-untyped-def]
        return np.minimum(super().logq(counts) + np.log(2.0), 0.0)


@dataclass(frozen=True)
class LooseGNMax(Mechanism):
    """GNMax through ``LooseAnswer``."""

    name: ClassVar[str] = "loose-gnmax"
    short: ClassVar[str] = "loose"
    parameters: ClassVar[tuple[Parameter, ...]] = (LOOSE_SIGMA,)

    loose_sigma: float

    @property
    def answer_step(self) -> LooseAnswer:
        return LooseAnswer(self.loose_sigma)


def _gumbel_module() -> types.ModuleType:
    """docs/mechanisms.md's whole Gumbel-max plugin, as a module of its own."""
    section = (ROOT / "docs" / "mechanisms.md").read_text().split("## Gumbel-max", 1)[1]
    (code,) = re.findall(r"```python\n(.*?)```", section, flags=re.S)
    module = types.ModuleType("gumbel_max_of_the_docs")
    sys.modules[module.__name__] = module  # dataclasses read their module's names
    exec(compile(code, "docs/mechanisms.md", "exec"), module.__dict__)
    return module


GUMBEL = _gumbel_module()
GumbelMax = GUMBEL.GumbelMax


@pytest.fixture(scope="module", autouse=True)
def plugins() -> Iterator[None]:
    kinds = (GapConfident, LooseGNMax, GumbelMax, LaplaceThreshold, GaussianThresholdLNMax)
    for kind in kinds:
        register(kind)
    yield
    for kind in kinds:
        unregister(kind.name)


# ---------------------------------------------------------------------------
# Every row equals its own analysis, in any order.


@pytest.fixture(scope="module")
def votes():
    return load_votes(MNIST, queries=QUERIES)


@pytest.fixture(scope="module")
def baseline(votes):
    # A fractional baseline on the votes' scale (Interactive-GNMax's threshold reads votes -
    # baseline).
    rng = np.random.default_rng(3)
    return np.round(rng.dirichlet(np.ones(10), size=votes.num_queries) * 250) / 2


# One row of each kind. The Confident, Interactive and gap rows share T and sigma1, and the
# Laplace threshold's noise has sigma1's std (scale sigma1 / sqrt 2); the gap row's answer step
# is theirs and GNMax's (sigma 40), the loose row's has their numbers. The Gaussian threshold
# beside LNMax's answer is Confident's threshold step and LNMax's answer step: its terms are
# theirs, shared.
SETTINGS = (
    GNMax(40.0),
    ConfidentGNMax(200.0, 150.0, 40.0),
    InteractiveGNMax(200.0, 150.0, 40.0),
    LNMax(0.05),
    GapConfident(200.0, 150.0, 40.0),
    LooseGNMax(40.0),
    GumbelMax(temperature=4.0),
    LaplaceThreshold(200.0, 150.0 / np.sqrt(2.0), 10.0),
    GaussianThresholdLNMax(200.0, 150.0, 0.05),
)


def _orders() -> list[tuple[int, ...]]:
    """Every rotation of the settings and of their reverse: each setting comes first once and
    every two come in both orders."""
    n = len(SETTINGS)
    ahead = [tuple((i + k) % n for i in range(n)) for k in range(n)]
    return ahead + [tuple(reversed(order)) for order in ahead]


@pytest.fixture(scope="module")
def alone(votes, baseline):
    """Each setting's analysis alone, and its compare row alone (for the agreement)."""
    found = {}
    for mechanism in SETTINGS:
        base = baseline if mechanism.needs_baseline else None
        report = analysis_report(votes, mechanism, ORDERS, DELTA, Conversion.CLASSIC, baseline=base)
        (row,) = comparison.compare_rows(
            votes.counts, [mechanism], ORDERS, DELTA, Conversion.CLASSIC, baseline=base
        )
        found[mechanism] = (report, row)
    return found


def _assert_is_its_own(row, report, single) -> None:
    """A compare row equal to ``analyze`` of its setting alone, and to its row alone."""
    for name in ("data_dependent", "data_independent", "worst_case"):
        mine, theirs = getattr(row, name), getattr(report, name)
        assert mine.order == theirs.order, (row.mechanism, name)
        np.testing.assert_allclose(mine.epsilon, theirs.epsilon, rtol=1e-12)
        np.testing.assert_allclose(mine.rdp, theirs.rdp, rtol=1e-12)
    np.testing.assert_allclose(row.expected_answered, report.expected_answered, rtol=1e-12)
    assert row.exact == report.exact_worst_case
    assert row.agreement == single.agreement


@pytest.mark.parametrize("order", _orders(), ids=lambda o: "".join(map(str, o)))
def test_every_row_is_its_own_analysis_in_any_order(votes, baseline, alone, order):
    grid = [SETTINGS[i] for i in order]
    rows = comparison.compare_rows(
        votes.counts, grid, ORDERS, DELTA, Conversion.CLASSIC, baseline=baseline
    )
    for mechanism, row in zip(grid, rows, strict=True):
        assert row.mechanism == mechanism
        _assert_is_its_own(row, *alone[mechanism])


def test_the_steps_of_the_same_numbers_cost_differently(alone):
    """The gap and the Confident threshold, the loose and the GNMax answer: the same numbers,
    other figures; terms shared by the numbers would give one row the other's."""
    confident, gap = alone[SETTINGS[1]][0], alone[SETTINGS[4]][0]
    assert gap.expected_answered < 0.9 * confident.expected_answered
    assert gap.data_dependent.epsilon > confident.data_dependent.epsilon
    gnmax, loose = alone[SETTINGS[0]][0], alone[SETTINGS[5]][0]
    assert loose.data_dependent.epsilon > gnmax.data_dependent.epsilon
    laplace = alone[SETTINGS[7]][0]
    assert laplace.expected_answered < 0.99 * confident.expected_answered


def test_one_compare_of_the_command_line_is_each_analyze():
    """Through the CLI, the plugins beside the built-ins: each JSON row is ``analyze --json``
    of its setting."""
    common = [MNIST, "--queries", QUERIES, "--delta", DELTA]
    flags = {
        "--threshold": 200,
        "--sigma1": 150,
        "--gap-threshold": 200,
        "--gap-sigma": 150,
        "--sigma": 40,
        "--loose-sigma": 40,
        "--gamma": 0.05,
        "--temperature": 4,
        "--threshold-scale": repr(150.0 / math.sqrt(2.0)),
        "--answer-scale": 10,
        "--threshold-sigma": 150,
    }
    given = [str(item) for pair in flags.items() for item in pair]
    rows = run_cli(["compare", *common, *given, "--json"]).json["rows"]
    names = {"gnmax", "confident-gnmax", "gap-confident", "loose-gnmax", "lnmax", "gumbel-max"}
    names |= {"laplace-threshold", "gaussian-threshold-lnmax"}
    assert {row["mechanism"]["name"] for row in rows} == names
    for row in rows:
        spec = dict(row["mechanism"])
        del spec["name"]
        mine = [str(item) for key, value in spec.items() for item in (_flag(key), value)]
        analyzed = run_cli(["analyze", *common, *mine, "--no-release", "--json"]).json
        assert analyzed["mechanism"] == row["mechanism"]
        for block in ("data_dependent", "data_independent"):
            assert row[block]["order"] == analyzed[block]["order"]
            assert row[block]["epsilon"] == pytest.approx(analyzed[block]["epsilon"], rel=1e-12)
        assert row["expected_answered"] == pytest.approx(analyzed["expected_answered"], rel=1e-12)


def _flag(name: str) -> str:
    return "--" + name.replace("_", "-")


# ---------------------------------------------------------------------------
# A column for every parameter that varies.

GUMBELS = ["compare", MNIST, "--temperature", "2,4,8", "--queries", 400, "--delta", DELTA]


def _table_rows(text: str, label: str) -> list[list[str]]:
    """The table's lines of rows labelled ``label``, split into cells."""
    return [line.split() for line in text.splitlines() if re.match(rf"\d+ {label} ", line)]


def test_three_gumbel_rows_are_told_apart_in_the_table(monkeypatch):
    monkeypatch.setenv("COLUMNS", "100")
    out = run_cli(GUMBELS).stdout
    header = next(line for line in out.splitlines() if line.startswith("# mechanism"))
    assert header.split()[:3] == ["#", "mechanism", "temperature"]
    rows = _table_rows(out, "gumbel")
    assert sorted(float(cells[2]) for cells in rows) == [2.0, 4.0, 8.0]
    assert "in every row" not in out
    # Too narrow for the table: a block per row, its setting named.
    monkeypatch.setenv("COLUMNS", "40")
    narrow = " ".join(run_cli(GUMBELS).stdout.split())
    for value in ("2", "4", "8"):
        assert f"gumbel temperature={value}:" in narrow


def test_three_gumbel_rows_are_told_apart_in_json_and_csv(tmp_path):
    out = tmp_path / "gumbel.csv"
    rows = run_cli([*GUMBELS, "--csv", out, "--json"]).json["rows"]
    assert sorted(row["mechanism"]["temperature"] for row in rows) == [2.0, 4.0, 8.0]
    with open(out, newline="") as f:
        lines = list(csv.DictReader(f))
    assert [line["temperature"] for line in lines] == [
        repr(row["mechanism"]["temperature"]) for row in rows
    ]
    header = out.read_text().splitlines()[0].split(",")
    assert header == [
        "mechanism",
        *comparison.PARAMETERS,
        "temperature",
        "expected_answered",
        "epsilon",
        "order",
        "data_independent_epsilon",
        "data_independent_order",
        "agreement",
    ]
    assert all(line["sigma"] == "" and line["mechanism"] == "gumbel-max" for line in lines)
    assert [float(line["epsilon"]) for line in lines] == [
        row["data_dependent"]["epsilon"] for row in rows
    ]


def test_a_parameter_every_row_has_at_one_value_is_said_once(monkeypatch):
    monkeypatch.setenv("COLUMNS", "100")
    out = run_cli(
        ["compare", MNIST, "--queries", 400, "--delta", DELTA, "--mechanism", "confident-gnmax",
         "--threshold", 200, "--sigma1", 150, "--sigma", "20,40"]
    ).stdout  # fmt: skip
    assert "in every row: T 200, sigma1 150" in out
    header = next(line for line in out.splitlines() if line.startswith("# mechanism"))
    assert header.split()[:3] == ["#", "mechanism", "sigma"]
    assert sorted(float(cells[2]) for cells in _table_rows(out, "confident")) == [20.0, 40.0]


def test_the_columns_of_a_mixed_grid(alone):
    """Every parameter some rows lack varies (a column, "-" where a row has none); one every
    row has at one value is said once; a field away from its default is a parameter too."""
    rows = [single for _, single in alone.values()]
    columns = compare_columns.ParameterColumns.of([row.mechanism for row in rows])
    assert columns.varying == (
        "threshold", "sigma1", "sigma", "gamma", "gap_threshold", "gap_sigma", "loose_sigma",
        "temperature", "threshold_scale", "answer_scale", "threshold_sigma",
    )  # fmt: skip
    assert columns.fixed == ()
    kinds = [ConfidentGNMax(200.0, 150.0, 40.0, threshold_bound=b) for b in ("theorem6", "exact")]
    both = comparison.compare_rows(
        load_votes(MNIST, queries=50).counts, kinds, ORDERS, DELTA, Conversion.CLASSIC
    )
    found = compare_columns.ParameterColumns.of([row.mechanism for row in both])
    assert found.varying == ("threshold_bound",)
    assert found.fixed == (("threshold", 200.0), ("sigma1", 150.0), ("sigma", 40.0))


def test_three_gumbel_rows_are_told_apart_in_the_plot():
    pytest.importorskip("matplotlib")
    from pate_cli import plots

    rows = run_cli([*GUMBELS, "--json"]).json["rows"]
    _, key = plots.plot_compare(rows).axes
    (text,) = key.texts
    lines = [line.split(None, 1)[1] for line in text.get_text().splitlines()]
    assert lines == [f"gumbel-max temperature={row['mechanism']['temperature']:g}" for row in rows]
    assert sorted(lines) == [f"gumbel-max temperature={t}" for t in (2, 4, 8)]


@pytest.mark.parametrize("order", [(0, 1, 2, 3, 4, 5, 6, 7, 8), (4, 3, 2, 1, 0, 8, 7, 6, 5)])
def test_the_privacy_loss_distribution_of_each_row_is_its_own(votes, baseline, order):
    """compare --pld reads the shared terms: each row's figure (or why it has none) is the
    one of its setting alone, the gap row (whose own --pld is refused) before or after the
    Confident row of its numbers."""
    grid = [SETTINGS[i] for i in order]
    rows = comparison.compare_rows(
        votes.counts, grid, ORDERS, DELTA, Conversion.CLASSIC, baseline=baseline, pld="q-bound"
    )
    figures = 0
    for mechanism, row in zip(grid, rows, strict=True):
        base = baseline if mechanism.needs_baseline else None
        (single,) = comparison.compare_rows(
            votes.counts, [mechanism], ORDERS, DELTA, Conversion.CLASSIC, baseline=base,
            pld="q-bound",
        )  # fmt: skip
        assert (row.data_dependent_pld, row.pld_note) == (
            single.data_dependent_pld,
            single.pld_note,
        )
        figures += row.data_dependent_pld is not None
    assert figures >= 3  # GNMax, Confident-GNMax and the loose GNMax have one

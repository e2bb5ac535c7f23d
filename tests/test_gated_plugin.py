"""docs/mechanisms.md's thresholded example, Gated Gumbel-max, installed as a plugin beside its
Gumbel-max (two modules and their dist-infos with entry points in the group
``pate_cli.mechanisms``, on the path of a fresh interpreter): its own threshold step, written
from the threshold step's members alone, runs through analyze, compare, plan, aggregate,
--record and verify; what it has no member for (a release, --pld) is one line; and the test
kit passes both examples."""

from __future__ import annotations

import json
import math
import os
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from tests.conftest import MNIST

ROOT = Path(__file__).resolve().parent.parent
DOC = (ROOT / "docs" / "mechanisms.md").read_text()
QUERIES = 400
GATE = ["--threshold", 200, "--gate-epsilon", 1, "--temperature", 4]


def _code(heading: str, fence: str) -> str:
    """The one code block of a section of docs/mechanisms.md."""
    section = DOC.split(heading, 1)[1].split("\n## ", 1)[0]
    (code,) = re.findall(rf"```{fence}\n(.*?)```", section, flags=re.S)
    return code


def _dist(site: Path, name: str, point: str) -> None:
    info = site / f"{name.replace('-', '_')}-1.0.dist-info"
    info.mkdir()
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {name}\nVersion: 1.0\n")
    (info / "entry_points.txt").write_text(f"[pate_cli.mechanisms]\n{point}\n")


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Path:
    site = tmp_path_factory.mktemp("site")
    (site / "gumbel_max.py").write_text(_code("## Gumbel-max, the whole plugin", "python"))
    (site / "gated_gumbel.py").write_text(_code("## Gated Gumbel-max", "py"))
    _dist(site, "gumbel-max", "gumbel-max = gumbel_max:GumbelMax")
    _dist(site, "gated-gumbel", "gated-gumbel = gated_gumbel:GatedGumbel")
    return site


def _python(site: Path, *args: str, expect: int = 0) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(site), str(ROOT)])}
    env.pop("PATE_DEBUG", None)
    done = subprocess.run(
        [sys.executable, *args], env=env, capture_output=True, text=True, timeout=300
    )
    assert done.returncode == expect, (args, done.returncode, done.stderr[-3000:])
    return done


def pate(site: Path, *args: object, expect: int = 0) -> subprocess.CompletedProcess[str]:
    return _python(site, "-m", "pate_cli", *map(str, args), expect=expect)


def analysis(site: Path, *flags: object) -> dict:
    args = ["analyze", MNIST, *flags, "--queries", QUERIES, "--delta", 1e-5, "--json"]
    return json.loads(pate(site, *args).stdout)


def test_help_lists_both_plugins(site):
    out = pate(site, "--help").stdout
    assert re.search(r"\n  gated-gumbel\s+plugin\b.*\bgated_gumbel:GatedGumbel\b", out)
    assert re.search(r"\n  gumbel-max\s+plugin\b.*\bgumbel_max:GumbelMax\b", out)


def test_analyze_gives_its_figures_and_says_what_it_has_none_of(site):
    report = analysis(site, *GATE)
    assert report["mechanism"] == {
        "name": "gated-gumbel",
        "threshold": 200.0,
        "gate_epsilon": 1.0,
        "temperature": 4.0,
    }
    dependent, independent = report["data_dependent"], report["data_independent"]
    assert 0 < dependent["epsilon"] <= independent["epsilon"]
    # The guaranteed figure, from its joint member, never below the expected one.
    assert dependent["epsilon"] <= report["guaranteed"]["epsilon"] < math.inf
    # Randomized response answers a query with probability 1/(1 + e) or e/(1 + e).
    rho = 1 / (1 + math.e)
    assert QUERIES * rho <= report["expected_answered"] <= QUERIES * (1 - rho)
    assert report["release"] == {
        "released": False,
        "reason": "gated-gumbel: its answer step has no local-sensitivity table, so its "
        "data-dependent epsilon has no smooth-sensitivity release",
    }
    refused = pate(site, "analyze", MNIST, *GATE, "--queries", 50, "--delta", 1e-5, "--pld",
                   expect=2)  # fmt: skip
    (line,) = refused.stderr.strip().splitlines()
    assert line.startswith("pate: error: gated-gumbel: the privacy-loss-distribution account")


def test_a_gate_far_below_every_top_count_costs_nothing(site):
    """Threshold -1000: every top count is more than a move above it, so no neighbour changes
    the gate's law: its data-dependent RDP is 0, every query is answered with probability
    e / (1 + e), and the whole data-dependent RDP is that times Gumbel-max's, order by
    order; the data-independent one pays the gate's E-DP randomized response on every query."""
    gated = analysis(site, "--threshold", -1000, "--gate-epsilon", 1, "--temperature", 4)
    alone = analysis(site, "--temperature", 4)
    truth = math.e / (1 + math.e)
    assert gated["expected_answered"] == pytest.approx(QUERIES * truth, rel=1e-12)
    want = truth * np.array(alone["data_dependent"]["rdp"])
    assert np.allclose(gated["data_dependent"]["rdp"], want, rtol=1e-12, atol=0)
    orders = np.array(gated["orders"])
    # D_order(Bern(e/(1+e)) || Bern(1/(1+e))) by its definition, per query.
    p, q = truth, 1 - truth
    flip = np.log(p**orders * q ** (1 - orders) + q**orders * p ** (1 - orders)) / (orders - 1)
    gumbel_independent = np.array(alone["data_independent"]["rdp"]) / QUERIES
    independent = QUERIES * flip + QUERIES * truth * gumbel_independent
    assert np.allclose(gated["data_independent"]["rdp"], independent, rtol=1e-9)


def test_the_library_gives_the_command_lines_figures(site):
    done = pate(site, "analyze", MNIST, *GATE, "--queries", QUERIES, "--delta", 1e-5,
                "--no-release", "--json")  # fmt: skip
    library = _python(site, "-c", (
        "import json, pate_cli as pate; from gated_gumbel import GatedGumbel; "
        f"v = pate.load_votes({str(MNIST)!r}, queries={QUERIES}); "
        "r = pate.analyze(v, GatedGumbel(threshold=200, gate_epsilon=1, temperature=4), "
        "delta=1e-5, release=False); print(json.dumps(r.to_dict()))"
    )).stdout  # fmt: skip
    assert json.loads(library)["data_dependent"] == json.loads(done.stdout)["data_dependent"]


def test_compare_gives_each_row_its_own_analysis(site):
    args = ["compare", MNIST, "--threshold", 200, "--gate-epsilon", "0.5,1", "--temperature", 4]
    rows = json.loads(pate(site, *args, "--queries", QUERIES, "--delta", 1e-5, "--json").stdout)
    found = {tuple(sorted(r["mechanism"].items())): r for r in rows["rows"]}
    assert sorted(row["mechanism"]["name"] for row in rows["rows"]) == [
        "gated-gumbel",
        "gated-gumbel",
        "gumbel-max",  # --temperature alone is Gumbel-max's: its row too
    ]
    for gate in (0.5, 1.0):
        flags = ["--threshold", 200, "--gate-epsilon", gate, "--temperature", 4]
        mechanism = {"name": "gated-gumbel", "threshold": 200.0, "gate_epsilon": gate,
                     "temperature": 4.0}  # fmt: skip
        row = found[tuple(sorted(mechanism.items()))]
        assert (
            row["data_dependent"]["epsilon"] == analysis(site, *flags)["data_dependent"]["epsilon"]
        )


def test_plan_solves_for_its_parameters_but_never_the_threshold(site):
    base = ["plan", "--mechanism", "gated-gumbel", "--queries", 640, "--epsilon", 8,
            "--delta", 1e-5, "--json"]  # fmt: skip
    plan = json.loads(pate(site, *base, "--threshold", 200, "--temperature", 40).stdout)
    assert plan["solve_for"] == "gate_epsilon"
    assert 8 * (1 - 1e-7) <= plan["epsilon"] <= 8
    again = json.loads(
        pate(site, *base, "--threshold", 200, "--gate-epsilon", plan["value"]).stdout
    )
    assert again["solve_for"] == "temperature"
    assert again["value"] == pytest.approx(40, rel=1e-6)


def test_aggregate_records_and_verify_replays_it(site, tmp_path):
    labels, record, seed = tmp_path / "labels.npy", tmp_path / "run.json", tmp_path / "seed"
    answered = tmp_path / "answered.npy"
    done = pate(site, "aggregate", MNIST, *GATE, "--queries", QUERIES, "--delta", 1e-5,
                "--seed-file", seed, "--output", labels, "--answered-output", answered,
                "--record", record, "--json")  # fmt: skip
    drawn, mask = np.load(labels), np.load(answered)
    assert drawn.shape == mask.shape == (QUERIES,)
    assert (drawn[~mask] == -1).all() and (drawn[mask] >= 0).all() and drawn.max() < 10
    expected = analysis(site, *GATE)["expected_answered"]
    assert abs(mask.sum() - expected) <= 5 * math.sqrt(QUERIES / 4)
    report = json.loads(done.stdout)
    assert json.loads(record.read_text())["call"]["mechanism"]["name"] == "gated-gumbel"
    assert report["mechanism"]["name"] == "gated-gumbel"
    verified = json.loads(pate(site, "verify", record, "--seed-file", seed, "--json").stdout)
    assert verified["verdict"] == "verified", verified


def test_the_test_kit_passes_both_examples_and_fails_half_their_rdp(site):
    code = r"""
import json
from dataclasses import dataclass
from pate_cli.testing import CheckFailed, check_mechanism, check_rdp
from gumbel_max import GumbelAnswer, GumbelMax
from gated_gumbel import GatedGumbel, RandomizedGate

checked = [
    check_mechanism(GumbelMax(temperature=2.0)).pairs,
    check_mechanism(GatedGumbel(threshold=6, gate_epsilon=1.0, temperature=2.0)).pairs,
    check_mechanism(GatedGumbel(threshold=2.5, gate_epsilon=3.0, temperature=0.5)).pairs,
]

@dataclass(frozen=True)
class HalfGate(RandomizedGate):
    def cost(self, orders, moves):
        full = super().cost(orders, moves)
        return type(full)(full.statistic, full.key, lambda m: full.function(m) / 2)

@dataclass(frozen=True)
class HalfGated(GatedGumbel):
    name = "half-gated"
    short = "half-gated"
    @property
    def threshold_step(self):
        return HalfGate(self.threshold, self.gate_epsilon)

failed = []
try:
    check_rdp(HalfGated(threshold=6, gate_epsilon=1.0, temperature=2.0))
except CheckFailed as error:
    failed.append(str(error))
print(json.dumps({"checked": checked, "failed": failed}))
"""
    out = json.loads(_python(site, "-c", code).stdout)
    assert out["checked"] == [912, 912, 912]
    (failure,) = out["failed"]
    assert failure.startswith(
        "half-gated: threshold step's data-dependent RDP: below the exact Renyi divergence "
        "at order 1.25 on the histogram"
    )

"""A mechanism from another package: docs/mechanisms.md's Gumbel-max, installed as a plugin
(a module and a dist-info with an entry point in the group ``pate_cli.mechanisms``, on the
path of a fresh interpreter), runs through analyze, compare, plan, aggregate, --record and
verify with a parameter of its own; nothing in the project names it. A plugin that fails to
load is one warning line, and ``import pate_cli`` loads none."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from tests.conftest import MNIST
from tests.plugin_site import distribution, install_gumbel

ROOT = Path(__file__).resolve().parent.parent
QUERIES = 400


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return install_gumbel(tmp_path_factory.mktemp("site"))


def _python(site: Path | str, *args: str, expect: int = 0) -> subprocess.CompletedProcess[str]:
    """A fresh interpreter with ``site`` (one folder, or several joined) on its path."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(site), str(ROOT)])}
    env.pop("PATE_DEBUG", None)
    done = subprocess.run(
        [sys.executable, *args], env=env, capture_output=True, text=True, timeout=120
    )
    assert done.returncode == expect, (args, done.returncode, done.stderr[-3000:])
    return done


def pate(site: Path | str, *args: object, expect: int = 0) -> subprocess.CompletedProcess[str]:
    return _python(site, "-m", "pate_cli", *map(str, args), expect=expect)


def test_help_lists_it_as_a_plugin(site):
    out = pate(site, "--help").stdout
    found = r"gumbel-max\s+plugin gumbel-max 1\.0, gumbel_max:GumbelMax\n"
    assert re.search(found, out), out
    # One command's help here (each process costs a second); every command's options are
    # the registry's, checked in-process in tests/test_parameters.py.
    assert "--temperature FLOAT" in pate(site, "plan", "--help").stdout


def test_audit_runs_its_sampler(site):
    done = pate(site, "audit", "--temperature", 2, "--delta", 1e-5, "--runs", 100_000,
                "--seed", 1, "--json")  # fmt: skip
    report = json.loads(done.stdout)
    assert report["mechanism"] == {"name": "gumbel-max", "temperature": 2.0}
    assert report["test_from"] == "stated law"
    assert 0.5 < report["epsilon_lower_bound"] < report["claimed"]["stated_law"]
    assert report["exceeds"] == []


def test_analyze_and_the_library_give_its_figures(site):
    done = pate(site, "analyze", MNIST, "--temperature", 4, "--queries", QUERIES,
                "--delta", 1e-5, "--json")  # fmt: skip
    report = json.loads(done.stdout)
    assert report["mechanism"] == {"name": "gumbel-max", "temperature": 4.0}
    dependent, independent = report["data_dependent"], report["data_independent"]
    assert 0 < dependent["epsilon"] <= independent["epsilon"]
    # No local-sensitivity table: the release says so in one line, the analysis stands.
    assert report["release"] == {
        "released": False,
        "reason": "gumbel-max: its answer step has no local-sensitivity table, so its "
        "data-dependent epsilon has no smooth-sensitivity release",
    }
    text = pate(site, "analyze", MNIST, "--temperature", 4, "--queries", QUERIES,
                "--delta", 1e-5)  # fmt: skip
    assert (text.stdout + text.stderr).count("no local-sensitivity table") == 1
    library = _python(site, "-c", (
        "import json, pate_cli as pate; from gumbel_max import GumbelMax; "
        f"v = pate.load_votes({str(MNIST)!r}, queries={QUERIES}); "
        "r = pate.analyze(v, GumbelMax(temperature=4), "
        "delta=1e-5, release=False); print(json.dumps(r.to_dict()))"
    )).stdout  # fmt: skip
    assert json.loads(library)["data_dependent"] == dependent


def test_its_figures_hold_against_the_exact_mechanism(site):
    """The exponential mechanism's label distribution is known exactly: on tiny histograms
    its data-dependent RDP (Theorem 3 of 2017 on the plugin's q) is never below the exact
    Renyi divergence to any neighbour, brute force over every teacher's change."""
    code = r"""
import itertools, json, numpy as np
from scipy.special import logsumexp
from gumbel_max import GumbelAnswer
orders = np.array([1.5, 2.0, 4.0, 8.0, 32.0])
worst = []
for temperature in (0.5, 1.0, 3.0):
    step = GumbelAnswer(temperature)
    for counts in itertools.product(range(6), repeat=3):
        if sum(counts) != 5:
            continue
        n = np.array(counts, dtype=float)
        bound = step.cost(orders)(step.logq(n[None, :]))[0]
        p = np.exp(n / temperature - logsumexp(n / temperature))
        for a, b in itertools.permutations(range(3), 2):
            if n[a] == 0:
                continue
            m = n.copy(); m[a] -= 1; m[b] += 1
            r = np.exp(m / temperature - logsumexp(m / temperature))
            # D_lambda(M(d) || M(d')), the divergence the data-dependent RDP bounds at d
            exact = np.log(np.sum(p**orders[:, None] * r**(1 - orders[:, None]), axis=1))
            worst.append(float(np.max(exact / (orders - 1) - bound)))
print(json.dumps(max(worst)))
"""
    assert json.loads(_python(site, "-c", code).stdout) <= 1e-12


def test_compare_takes_its_list_beside_the_built_ins(site):
    done = pate(site, "compare", MNIST, "--temperature", "2,4", "--sigma", 40,
                "--queries", QUERIES, "--delta", 1e-5, "--json")  # fmt: skip
    rows = json.loads(done.stdout)["rows"]
    assert sorted(tuple(sorted(r["mechanism"].items())) for r in rows) == [
        (("name", "gnmax"), ("sigma", 40.0)),
        (("name", "gumbel-max"), ("temperature", 2.0)),
        (("name", "gumbel-max"), ("temperature", 4.0)),
    ]


def test_plan_solves_for_its_parameter(site):
    done = pate(site, "plan", "--mechanism", "gumbel-max", "--queries", 640, "--epsilon", 2,
                "--delta", 1e-5, "--json")  # fmt: skip
    plan = json.loads(done.stdout)
    assert plan["solve_for"] == "temperature"
    assert 2 * (1 - 1e-7) <= plan["epsilon"] <= 2
    assert plan["mechanism"] == {"name": "gumbel-max", "temperature": plan["value"]}
    # The other way round: that temperature fits 640 queries, and no more.
    again = json.loads(pate(site, "plan", "--temperature", plan["value"], "--epsilon", 2,
                            "--delta", 1e-5, "--json").stdout)  # fmt: skip
    assert (again["solve_for"], again["value"]) == ("queries", 640)


def test_aggregate_records_and_verify_replays_it(site, tmp_path):
    labels, record, seed = tmp_path / "labels.npy", tmp_path / "run.json", tmp_path / "seed"
    done = pate(site, "aggregate", MNIST, "--temperature", 4, "--queries", QUERIES,
                "--delta", 1e-5, "--seed-file", seed, "--output", labels, "--record", record,
                "--json")  # fmt: skip
    report = json.loads(done.stdout)
    drawn = np.load(labels)
    assert drawn.shape == (QUERIES,) and drawn.min() >= 0 and drawn.max() < 10
    written = json.loads(record.read_text())
    assert written["call"]["mechanism"]["name"] == "gumbel-max"
    # The plugin's distribution and version beside pate's, numpy's, scipy's and Python's.
    assert written["versions"]["plugins"] == {"gumbel-max": "1.0"}
    assert set(written["versions"]) == {"pate", "numpy", "scipy", "python", "plugins"}
    verified = json.loads(pate(site, "verify", record, "--seed-file", seed, "--json").stdout)
    assert verified["verdict"] == "verified", verified
    # The plugin uninstalled, or another version of it: the record cannot be checked (3),
    # which is not a difference (1).
    other = install_gumbel(tmp_path / "other")
    info = other / "gumbel_max-1.0.dist-info" / "METADATA"
    info.write_text(info.read_text().replace("Version: 1.0", "Version: 1.1"))
    for where, said in (
        (tmp_path / "nothing", "cannot be checked: gumbel-max 1.0 is not installed"),
        (other, "cannot be checked: gumbel-max 1.0 is not installed (gumbel-max 1.1 is)"),
    ):
        done = pate(where, "verify", record, "--seed-file", seed, "--json", expect=3)
        checked = json.loads(done.stdout)
        assert checked["verdict"] == "incomplete" and checked["differs"] == []
        assert checked["checks"] == [{"name": "mechanism", "status": "not-checked", "detail": said}]
        text = pate(where, "verify", record, expect=3).stdout
        assert text.rstrip().endswith("nothing differs, but the record is not fully verified; "
                                      "not checked: mechanism")  # fmt: skip
    # The labels follow the exponential mechanism: agreement with the plurality as expected.
    (row,) = json.loads(pate(site, "compare", MNIST, "--temperature", 4, "--queries", QUERIES,
                             "--delta", 1e-5, "--json").stdout)["rows"]  # fmt: skip
    assert report["agreement_with_plurality"] == pytest.approx(
        row["agreement"], abs=4 * np.sqrt(0.25 / QUERIES)
    )


def test_a_plugin_that_fails_is_one_warning_line(tmp_path, site):
    broken = tmp_path / "broken"
    broken.mkdir()
    distribution(broken, "broken-plugin", "broken = no_such_module:Missing")
    path = os.pathsep.join([str(broken), str(site)])
    done = pate(path, "analyze", MNIST, "--temperature", 4, "--queries", 50,
                "--delta", 1e-5, "--no-release", "--json")  # fmt: skip
    lines = [line for line in done.stderr.splitlines() if "broken" in line]
    assert lines == [
        "pate: warning: the mechanism plugin 'broken' (no_such_module:Missing) was not "
        "loaded: ModuleNotFoundError: No module named 'no_such_module'"
    ]
    assert json.loads(done.stdout)["mechanism"]["name"] == "gumbel-max"
    quiet = pate(path, "inspect", MNIST, "--queries", 5, "--quiet")
    assert quiet.stderr == ""  # --quiet: no warning, as everywhere


def test_import_loads_no_plugin_until_a_mechanism_is_looked_up(site):
    code = (
        "import sys, pate_cli, pate_cli.mechanisms as m; "
        "before = 'gumbel_max' in sys.modules; m.by_name(); "
        "print(before, 'gumbel_max' in sys.modules)"
    )
    assert _python(site, "-c", code).stdout.split() == ["False", "True"]


CONFIDENT_LNMAX = """
from dataclasses import dataclass
from typing import ClassVar

from pate_cli.mechanisms import Mechanism, Parameter
from pate_cli.mechanisms.confident import SIGMA1, THRESHOLD
from pate_cli.mechanisms.lnmax import GAMMA


@dataclass(frozen=True)
class ConfidentLNMax(Mechanism):
    name: ClassVar[str] = "confident-lnmax"
    short: ClassVar[str] = "confident-ln"
    parameters: ClassVar[tuple[Parameter, ...]] = (THRESHOLD, SIGMA1, GAMMA)

    threshold: float
    sigma1: float
    gamma: float
"""


def test_a_plugin_that_would_make_the_readme_ambiguous_is_not_loaded(tmp_path, site):
    """Confident-LNMax installed: the README's plan --threshold 200 --sigma1 150 still plans
    Confident-GNMax's sigma; the plugin is one warning line, never the command's ambiguity."""
    (tmp_path / "confident_lnmax.py").write_text(CONFIDENT_LNMAX)
    distribution(tmp_path, "confident-lnmax", "confident-lnmax = confident_lnmax:ConfidentLNMax")
    done = pate(os.pathsep.join([str(tmp_path), str(site)]), "plan", "--delta", 1e-5,
                "--epsilon", 2, "--queries", 640, "--threshold", 200, "--sigma1", 150,
                "--json")  # fmt: skip
    planned = json.loads(done.stdout)
    assert (planned["mechanism"]["name"], planned["solve_for"]) == ("confident-gnmax", "sigma")
    assert done.stderr.splitlines() == [
        "pate: warning: the mechanism plugin 'confident-lnmax' "
        "(confident_lnmax:ConfidentLNMax) was not loaded: UsageError: mechanism "
        "'confident-lnmax' (plugin confident-lnmax 1.0, confident_lnmax:ConfidentLNMax): its "
        "flags would make --threshold --sigma1, which mean "
        "confident-gnmax, mean confident-gnmax or confident-lnmax (a plugin may not change "
        "what a built-in's flags mean)"
    ]


def test_a_budget_whose_records_need_a_plugin_not_installed_is_not_checked(site, tmp_path):
    """verify BUDGET of a charge recorded by a plugin's run: recomputed with the plugin;
    without it, neither recomputed nor replayed, and said so (3), never a difference (1)."""
    budget, records, seed = tmp_path / "b.jsonl", tmp_path / "records", tmp_path / "seed"
    records.mkdir()
    pate(site, "budget", "init", budget, "--delta", 1e-5, "--max-epsilon", 100)
    pate(site, "aggregate", MNIST, "--temperature", 4, "--queries", 50, "--delta", 1e-5,
         "--seed-file", seed, "--output", records / "labels.npy", "--record",
         records / "run.json", "--budget", budget)  # fmt: skip
    checks = {
        check["name"]: check
        for check in json.loads(
            pate(site, "verify", budget, "--records", records, "--json", expect=3).stdout
        )["checks"]
    }
    assert checks["charges and their records"]["status"] == "verified"
    gone = pate(tmp_path / "nothing", "verify", budget, "--records", records, "--votes", MNIST,
                "--json", expect=3)  # fmt: skip
    report = json.loads(gone.stdout)
    assert report["differs"] == [] and report["verdict"] == "incomplete"
    checks = {check["name"]: check for check in report["checks"]}
    said = "cannot be checked: gumbel-max 1.0 is not installed"
    where = records / "run.json"
    assert checks["charges whose mechanism is not installed"] == {
        "name": "charges whose mechanism is not installed",
        "status": "not-checked",
        "detail": f"charge 1 ({where}): {said}",
    }
    assert checks["records not replayed"]["detail"] == (
        f"charge 1: charge 1: {where}: {said}; their records are taken as written"
    )
    assert checks["accounts of mechanisms not installed"]["detail"] == (
        "charge 1 (gumbel-max): their mechanisms are not installed: their accounts are taken "
        "as written"
    )
    assert checks["chain"]["status"] == "verified"

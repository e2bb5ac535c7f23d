"""A plugin's failure is the plugin's: a mechanism installed from another distribution that
raises (anything, SystemExit and KeyboardInterrupt included), returns NaN or labels out of
range, or a negative Renyi DP, is one line naming it, its distribution and its version and
what it did, exit 6, nothing written or charged; never a traceback, exit 70 or exit 0. A
plugin whose import hangs stops on SIGINT, SIGTERM and SIGHUP in one line. Each case runs the
real command line in a fresh interpreter (``tests/faulty_plugin.py`` installed as the
distribution faulty-plugin 2.5)."""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from subprocess import Popen

import pytest

from pate_cli.errors import ExitCode
from pate_cli.mechanisms import register
from pate_cli.mechanisms.registry import unregister
from tests import faulty_plugin as faulty
from tests.conftest import MNIST
from tests.plugin_site import distribution

ROOT = Path(__file__).resolve().parent.parent
WHO = "pate: error: the mechanism 'faulty' of the plugin faulty-plugin 2.5 failed: "
BLAME = "; the failure is the mechanism's, not pate's: report it to its authors"


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Path:
    site = tmp_path_factory.mktemp("faulty-site")
    shutil.copy(Path(faulty.__file__), site / "faulty_plugin.py")
    distribution(site, "faulty-plugin", "faulty = faulty_plugin:Faulty", version="2.5")
    return site


@pytest.fixture(scope="module")
def fresh_budget(site: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A budget file as ``budget init`` makes it (each test charges a copy)."""
    budget = tmp_path_factory.mktemp("budget") / "b.jsonl"
    made = pate(site, "budget", "init", budget, "--delta", 1e-5, "--max-epsilon", 100)
    assert made.returncode == 0, made.stderr
    return budget


def _env(site: Path, **more: str) -> dict[str, str]:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(site), str(ROOT)]), **more}
    env.pop("PATE_DEBUG", None)
    return env


def pate(site: Path, *args: object) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "pate_cli", *map(str, args)],
        env=_env(site),
        capture_output=True,
        text=True,
        timeout=120,
    )


ANALYZE = ("analyze", MNIST, "--fault-scale", 20, "--queries", 40, "--delta", 1e-5)


@pytest.mark.parametrize(
    ("fault", "command", "did"),
    [
        (faulty.RUN_RAISES, "aggregate", "its run raised ZeroDivisionError: division by zero"),
        (
            faulty.NAN_LABELS,
            "aggregate",
            "its run returned the label nan for query 2 (the votes have 10 classes; -1 where "
            "nothing is released, never where the teachers answered)",
        ),
        (
            faulty.LABEL_OUT_OF_RANGE,
            "aggregate",
            "its run returned the label 10 for query 5 (the votes have 10 classes; -1 where "
            "nothing is released, never where the teachers answered)",
        ),
        (faulty.RUN_EXITS, "aggregate", "its run raised SystemExit: 0"),
        (faulty.NAN_LOGQ, "analyze", "its answer step's logq returned NaN at [3]"),
        (faulty.LOGQ_INTERRUPTS, "analyze", "its answer step's logq raised KeyboardInterrupt"),
        (faulty.LOGQ_EXITS, "analyze", "its answer step's logq raised SystemExit: 0"),
        (faulty.CONSTRUCTION_RAISES, "analyze", "its construction raised RuntimeError: cannot build"),
        (
            faulty.NEGATIVE_RDP,
            "analyze",
            "its answer step's data_independent returned -0.25 at [0], not a Renyi DP",
        ),
        (
            faulty.NAN_EPSILON0,
            "analyze",
            "its answer step's part returned a PurePart whose epsilon0 is NaN",
        ),
        (
            faulty.AGREEMENT_ABOVE_ONE,
            "compare",
            "its answer step's agreement returned 1.5 at [0], not a probability",
        ),
    ],
)  # fmt: skip
def test_a_failing_plugin_is_one_line_exit_6_nothing_written_or_charged(
    site, fresh_budget, tmp_path, fault, command, did
):
    budget = Path(shutil.copy(fresh_budget, tmp_path / "b.jsonl"))
    before = budget.read_bytes()
    out = tmp_path / "out"
    out.mkdir()
    files = {
        "aggregate": ("--output", out / "labels.npy", "--record", out / "run.json"),
        "analyze": ("--record", out / "run.json", "--no-release"),
        "compare": (),
    }[command]
    charged = ("--budget", budget) if command != "compare" else ()
    done = pate(site, command, *ANALYZE[1:], "--fault", fault, *files, *charged)
    assert done.returncode == ExitCode.PLUGIN_FAILED, (done.returncode, done.stderr)
    assert done.stderr.splitlines() == [WHO + did + BLAME]
    assert done.stdout == ""
    assert list(out.iterdir()) == []  # nothing written, not even a temporary
    assert budget.read_bytes() == before  # nothing charged


def test_the_same_plugin_working_runs_and_is_charged(site, fresh_budget, tmp_path):
    """The faulty plugin with no fault runs, is written and charged: the failures above are
    the faults', not the plugin's being a plugin."""
    budget = Path(shutil.copy(fresh_budget, tmp_path / "b.jsonl"))
    before = budget.read_bytes()
    labels = tmp_path / "labels.npy"
    done = pate(
        site, "aggregate", *ANALYZE[1:], "--fault", 0, "--output", labels, "--budget", budget
    )
    assert done.returncode == 0, done.stderr
    assert labels.exists() and budget.read_bytes() != before


SLOW = """
import os, time
from pathlib import Path
Path(os.environ["SLOW_MARKER"]).write_text("importing")
time.sleep(600)
"""


@contextlib.contextmanager
def _started(command: list[str], env: dict[str, str], marker: Path) -> Iterator[Popen[str]]:
    """``command`` running, once ``marker`` shows it reached the plugin's slow part; killed
    on the way out if it is still running (a test that failed leaves no process behind)."""
    process = Popen(command, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 60
        while not marker.exists():
            assert process.poll() is None, process.communicate()
            assert time.monotonic() < deadline, "the plugin was never reached"
            time.sleep(0.05)
        yield process
    finally:
        if process.poll() is None:
            process.kill()
            process.communicate()


@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM, signal.SIGHUP])
def test_a_plugin_hung_in_its_import_stops_on_a_signal_in_one_line(tmp_path, signum):
    site = tmp_path / "site"
    site.mkdir()
    (site / "slow_plugin.py").write_text(SLOW)
    distribution(site, "slow-plugin", "slow = slow_plugin:Slow")
    marker = tmp_path / "importing"
    env = _env(site, SLOW_MARKER=str(marker))
    command = [sys.executable, "-m", "pate_cli", "inspect", str(MNIST), "--queries", "5"]
    with _started(command, env, marker) as process:
        process.send_signal(signum)
        out, err = process.communicate(timeout=30)
    assert process.returncode == 128 + signum, err
    name = signal.Signals(signum).name
    assert err.splitlines() == [
        f"pate: interrupted ({name}) while the mechanism plugin 'slow' (slow_plugin:Slow) was "
        "loading"
    ]
    assert out == ""


def test_a_signal_in_a_plugins_run_is_an_interrupt_not_its_failure(site, tmp_path):
    """Ctrl-C while a plugin's run hangs: the run is interrupted as any (130, one line,
    nothing written), never blamed on the plugin."""
    marker = tmp_path / "running"
    labels = tmp_path / "labels.npy"
    command = [sys.executable, "-m", "pate_cli", "aggregate", *map(str, ANALYZE[1:])]
    command += ["--fault", str(faulty.RUN_HANGS), "--output", str(labels)]
    with _started(command, _env(site, FAULTY_MARKER=str(marker)), marker) as process:
        process.send_signal(signal.SIGINT)
        out, err = process.communicate(timeout=30)
    assert (process.returncode, err.splitlines(), out) == (130, ["pate: interrupted (SIGINT)"], "")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["running"]


def test_in_python_a_plugins_failure_is_a_plugin_error():
    """The library raises the same failure as a PluginError (not a ValueError, which a
    caller catching bad input would take for its own), naming a mechanism registered in code
    by its module; the same mechanism working runs."""
    import pate_cli as pate

    votes = pate.load_votes(MNIST, queries=40)
    named = "the mechanism 'faulty' (registered in code, module tests.faulty_plugin) failed: "
    register(faulty.Faulty)
    try:
        with pytest.raises(pate.PluginError) as raised:
            pate.analyze(votes, faulty.Faulty(20, faulty.NAN_LOGQ), delta=1e-5, release=False)
        assert not isinstance(raised.value, ValueError)
        assert raised.value.message == named + "its answer step's logq returned NaN at [3]" + BLAME
        with pytest.raises(pate.PluginError) as raised:
            pate.aggregate(votes, faulty.Faulty(20, faulty.RUN_EXITS), delta=1e-5, seed=1)
        assert raised.value.message == named + "its run raised SystemExit: 0" + BLAME
        working = pate.analyze(votes, faulty.Faulty(20, 0), delta=1e-5, release=False)
    finally:
        unregister("faulty")
    assert 0 < working.data_dependent.epsilon <= working.data_independent.epsilon

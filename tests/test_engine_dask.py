"""``--engine dask``: the passes over the queries on a Dask cluster give the single-process
figures to the last bit and the same labels for any number of workers; a worker killed
mid-run changes nothing; a run that cannot finish publishes nothing; without the extra,
one line and exit 2."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import pate_cli as pate
from pate_cli import engines
from pate_cli.accountant import compose, figures, terms
from pate_cli.errors import ExitCode, UsageError
from tests.conftest import MNIST, MNIST_LABELS, ROOT, SAMPLE, run_cli

distributed = pytest.importorskip("distributed")

NEXT_TOKEN = SAMPLE / "next_token_votes.npz"
GLYPH = Path(__file__).parent / "data" / "reference" / "glyph_like.npy"
DELTA = ["--delta", 1e-5]
CONFIDENT = ["--threshold", 200, "--sigma1", 150, "--sigma", 40]


@pytest.fixture(scope="module")
def cluster() -> Iterator[Any]:
    """Two local workers, shared by the tests that name its scheduler."""
    with distributed.LocalCluster(
        n_workers=2, threads_per_worker=1, dashboard_address=":0", silence_logs=50
    ) as running:
        yield running


@pytest.fixture(scope="module", params=[1, 2, 4], ids=lambda n: f"{n}-workers")
def sized_cluster(request: pytest.FixtureRequest) -> Iterator[Any]:
    """One, two and four local workers, in turn."""
    with distributed.LocalCluster(
        n_workers=request.param, threads_per_worker=1, dashboard_address=":0", silence_logs=50
    ) as running:
        yield running


@pytest.fixture
def small_blocks(monkeypatch: pytest.MonkeyPatch) -> None:
    """Blocks of a few hundred queries and values, so that a sample file is many tasks."""
    monkeypatch.setattr(terms, "DEFAULT_CHUNK_SIZE", 997)
    monkeypatch.setattr(compose, "_COST_BLOCK", 64)
    monkeypatch.setattr(figures, "_PAIR_BLOCK", 64)


@pytest.fixture(scope="module")
def shards(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The MNIST counts in three shards."""
    folder = tmp_path_factory.mktemp("shards") / "votes"
    folder.mkdir()
    for i, part in enumerate(np.split(np.load(MNIST), [2000, 5000])):
        np.save(folder / f"s{i}.npy", part)
    return folder


def _without_engine(payload: dict[str, Any]) -> dict[str, Any]:
    return {key: value for key, value in payload.items() if key != "engine"}


def _both(args: list[Any], scheduler: str) -> tuple[dict[str, Any], dict[str, Any]]:
    """The command's JSON in this process and on the cluster at ``scheduler``."""
    here = run_cli([*args, "--json"]).json
    there = run_cli([*args, "--engine", "dask", "--scheduler", scheduler, "--json"]).json
    return here, there


INPUTS = [
    pytest.param([MNIST], id="mnist-counts"),
    pytest.param([MNIST_LABELS], id="labels-2017"),
    pytest.param([NEXT_TOKEN], id="next-token-sparse"),
    pytest.param([GLYPH], id="glyph-like"),
]
COMMANDS = [
    pytest.param(["analyze", *CONFIDENT, *DELTA, "--seed", 3], id="analyze"),
    pytest.param(["analyze", "--sigma", 40, *DELTA, "--no-release"], id="analyze-gnmax"),
    pytest.param(["smooth-sensitivity", *CONFIDENT, *DELTA, "--seed", 3], id="smooth"),
    pytest.param(
        ["compare", "--threshold", "150,200", "--sigma1", 150, "--sigma", "20,40", *DELTA],
        id="compare",
    ),
]


@pytest.mark.parametrize("command", COMMANDS)
@pytest.mark.parametrize("votes", INPUTS)
def test_figures_on_the_cluster_are_the_single_process_figures(
    command, votes, sized_cluster, small_blocks
):
    address = sized_cluster.scheduler_address
    here, there = _both([command[0], *votes, *command[1:]], address)
    assert _without_engine(there) == here
    workers = len(sized_cluster.workers)
    assert there["engine"] == {"name": "dask", "workers": workers, "scheduler": address}


@pytest.mark.parametrize("command", COMMANDS[:2] + COMMANDS[3:])
def test_a_folder_of_shards_on_the_cluster(command, sized_cluster, small_blocks, shards):
    here, there = _both([command[0], shards, *command[1:]], sized_cluster.scheduler_address)
    assert _without_engine(there) == here
    single = run_cli([command[0], MNIST, *command[1:], "--json"]).json
    assert {k: v for k, v in here.items() if k != "input"} == {
        k: v for k, v in single.items() if k != "input"
    }


@pytest.mark.parametrize("workers", [1, 2, 4])
def test_one_two_and_four_local_workers(workers, small_blocks):
    mechanism = pate.ConfidentGNMax(threshold=200, sigma1=150, sigma=40)
    here = pate.analyze(MNIST, mechanism, delta=1e-5, release="expected").to_dict()
    there = pate.analyze(
        MNIST, mechanism, delta=1e-5, release="expected", engine="dask", workers=workers
    ).to_dict()
    assert there.pop("engine") == {"name": "dask", "workers": workers, "scheduler": None}
    assert there == here


def test_aggregate_labels_do_not_depend_on_the_workers(cluster, tmp_path):
    """Ten noise blocks of 997 queries: the same labels from one seed file here, on one
    worker and on two."""
    mechanism = pate.ConfidentGNMax(threshold=200, sigma1=150, sigma=40)
    seed_file = tmp_path / "run.seed"
    runs = [
        pate.aggregate(MNIST, mechanism, delta=1e-5, seed_file=seed_file, noise_block=997, **engine)
        for engine in (
            {},
            {"engine": "dask", "workers": 1},
            {"scheduler": cluster.scheduler_address, "engine": "dask"},
        )
    ]
    for run in runs[1:]:
        np.testing.assert_array_equal(run.labels, runs[0].labels)
        np.testing.assert_array_equal(run.answered, runs[0].answered)
        assert run.engine is not None and runs[0].engine is None
        assert _without_engine(run.to_dict()) == runs[0].to_dict()
    assert len(set(runs[0].labels[:997].tolist())) > 1  # not one label drawn over and over


def test_an_aggregate_record_made_on_the_cluster_verifies(tmp_path, cluster, small_blocks):
    seed_file = tmp_path / "run.seed"
    labels, records = [], []
    for name, engine in (
        ("here", []),
        ("there", ["--engine", "dask", "--scheduler", cluster.scheduler_address]),
    ):
        out, record = tmp_path / f"{name}.npy", tmp_path / f"{name}.record.json"
        args = ["aggregate", MNIST, *CONFIDENT, *DELTA, "--seed-file", seed_file]
        shown = run_cli([*args, "--output", out, "--record", record, *engine, "--json"]).json
        labels.append(np.load(out))
        records.append(json.loads(record.read_text()))
        assert ("engine" in shown) == bool(engine)
    np.testing.assert_array_equal(labels[0], labels[1])
    assert "engine" not in records[1]["report"]
    assert records[1]["report"]["privacy"] == records[0]["report"]["privacy"]
    verified = run_cli(
        [
            "verify",
            tmp_path / "there.record.json",
            "--votes",
            MNIST,
            "--seed-file",
            seed_file,
            "--json",
        ]
    ).json
    assert verified["verdict"] == "verified", verified


def test_a_generator_is_refused_on_the_engine(cluster):
    with pytest.raises(UsageError, match="seed: a Generator draws in turn"):
        pate.aggregate(
            MNIST,
            pate.GNMax(sigma=40),
            delta=1e-5,
            seed=np.random.default_rng(0),
            engine="dask",
            scheduler=cluster.scheduler_address,
        )


@contextmanager
def _killing(cluster: Any) -> Iterator[list[int]]:
    """A progress whose first advance kills one worker's process outright (SIGKILL)."""
    killed: list[int] = []

    def progress(description: str, total: int):
        @contextmanager
        def bar():
            def advance(done: int) -> None:
                if not killed:
                    with distributed.Client(cluster.scheduler_address) as client:
                        pids = client.run(os.getpid)
                    pid = pids[sorted(pids)[0]]
                    os.kill(pid, signal.SIGKILL)
                    killed.append(pid)

            yield advance

        return bar()

    yield killed, progress  # type: ignore[misc]


def test_a_worker_killed_mid_run_changes_nothing(small_blocks):
    mechanism = pate.ConfidentGNMax(threshold=200, sigma1=150, sigma=40)
    here = pate.analyze(MNIST, mechanism, delta=1e-5, release=False).to_dict()
    with distributed.LocalCluster(
        n_workers=2, threads_per_worker=1, dashboard_address=":0", silence_logs=50
    ) as cluster:
        before = set(cluster.scheduler_info["workers"])
        with _killing(cluster) as (killed, progress):
            there = pate.analyze(
                MNIST,
                mechanism,
                delta=1e-5,
                release=False,
                engine="dask",
                scheduler=cluster.scheduler_address,
                progress=progress,
            ).to_dict()
        assert killed and set(cluster.scheduler_info["workers"]) != before  # one replaced
    there.pop("engine")
    assert there == here


def test_a_cluster_that_goes_away_publishes_nothing(tmp_path, monkeypatch):
    from pate_cli.engines import cluster as engine_cluster

    monkeypatch.setattr(engine_cluster, "_CONNECT_TIMEOUT", 1)
    out = tmp_path / "labels.npy"
    with distributed.LocalCluster(
        n_workers=1, threads_per_worker=1, dashboard_address=":0", silence_logs=50
    ) as gone:
        address = gone.scheduler_address
    result = run_cli(
        ["aggregate", MNIST, *CONFIDENT, *DELTA, "--output", out]
        + ["--engine", "dask", "--scheduler", address],
        expect=ExitCode.BAD_INPUT,
    )
    assert result.stderr.count("\n") == 1 and "--scheduler" in result.stderr
    assert list(tmp_path.iterdir()) == []


def test_a_scheduler_without_workers_is_refused(tmp_path):
    with distributed.LocalCluster(n_workers=0, dashboard_address=":0", silence_logs=50) as empty:
        result = run_cli(
            ["analyze", MNIST, "--sigma", 40, *DELTA, "--engine", "dask"]
            + ["--scheduler", empty.scheduler_address],
            expect=ExitCode.BAD_INPUT,
        )
    assert result.stderr.endswith("it has no workers\n") and result.stderr.count("\n") == 1


@pytest.fixture(scope="module")
def faulty_site(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The suite's failing mechanism installed as a plugin, with 140,000 queries to run."""
    from tests import faulty_plugin
    from tests.plugin_site import distribution

    site = tmp_path_factory.mktemp("faulty-engine")
    shutil.copy(Path(faulty_plugin.__file__), site / "faulty_plugin.py")
    distribution(site, "faulty-plugin", "faulty = faulty_plugin:Faulty", version="2.5")
    rng = np.random.default_rng(3)
    votes = rng.multinomial(250, rng.dirichlet(np.ones(10), size=140_000)).astype(np.int16)
    np.save(site / "votes.npy", votes)
    return site


@pytest.mark.parametrize(
    ("command", "fault", "did"),
    [
        ("analyze", 3, "its answer step's logq returned NaN at [3]"),
        ("aggregate", 1, "its run raised ZeroDivisionError: division by zero"),
    ],
)
def test_a_plugins_failure_on_a_worker_is_one_line_exit_6(
    faulty_site, tmp_path, command, fault, did
):
    """Three blocks of queries, so the plugin's code runs on the workers: its failure comes
    back as the one line it is in one process, and no worker's log reaches stderr."""
    out = tmp_path / "labels.npy"
    args = [command, faulty_site / "votes.npy", "--fault-scale", 20, "--fault", fault, *DELTA]
    args += ["--engine", "dask", "--workers", 2]
    args += ["--output", out] if command == "aggregate" else ["--no-release"]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(faulty_site), str(ROOT)])}
    done = subprocess.run(
        [sys.executable, "-m", "pate_cli", *map(str, args)],
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    who = "pate: error: the mechanism 'faulty' of the plugin faulty-plugin 2.5 failed: "
    blame = "; the failure is the mechanism's, not pate's: report it to its authors"
    assert (done.returncode, done.stderr.splitlines()) == (6, [who + did + blame])
    assert done.stdout == "" and list(tmp_path.iterdir()) == []


def test_without_the_extra_one_line_and_exit_2(monkeypatch, tmp_path):
    found = engines.importlib.util.find_spec
    monkeypatch.setattr(
        engines.importlib.util,
        "find_spec",
        lambda name, *a: None if name == "distributed" else found(name, *a),
    )
    for command in (["analyze", MNIST, "--sigma", 40], ["compare", MNIST, "--sigma", "20,40"]):
        result = run_cli([*command, *DELTA, "--engine", "dask"], expect=ExitCode.BAD_INPUT)
        assert result.stderr == (
            "pate: error: --engine dask needs Dask, an optional extra: "
            "pip install 'pate-cli[dask]'\n"
        )
    with pytest.raises(UsageError, match=r"^engine='dask' needs Dask"):
        pate.analyze(MNIST, pate.GNMax(sigma=40), delta=1e-5, engine="dask")


@pytest.mark.parametrize(
    ("flags", "message"),
    [
        (["--workers", 2], "--workers needs --engine dask"),
        (["--scheduler", "tcp://127.0.0.1:1"], "--scheduler needs --engine dask"),
        (
            ["--engine", "dask", "--workers", 0],
            "--workers 0: expected a whole number from 1 to 256",
        ),
        (
            ["--engine", "dask", "--workers", 2, "--scheduler", "tcp://127.0.0.1:1"],
            "--workers sizes a local cluster: not with --scheduler",
        ),
        (["--engine", "spark"], "'spark' is not one of"),
    ],
)
def test_engine_flags_refused_in_one_line(flags, message):
    result = run_cli(["analyze", MNIST, "--sigma", 40, *DELTA, *flags], expect=ExitCode.BAD_INPUT)
    assert message in result.stderr and result.stderr.count("\n") == 1

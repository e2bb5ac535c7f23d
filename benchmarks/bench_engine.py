"""``--engine dask`` on one machine: 1e7 next-token queries on one local worker, on all of them,
and in one process, with the figures compared.

A plain script, not a test (it needs the ``dask`` extra). It generates a next-token run
reproducibly (``sample_data/make_samples.py``'s recipe, seeded), saves it sparse outside the
repository, and measures in one run:

    python benchmarks/bench_engine.py                 # 1e7 queries
    python benchmarks/bench_engine.py --queries 1e6   # smaller
    python benchmarks/bench_engine.py --json          # one JSON object on stdout
    python benchmarks/bench_engine.py --sharded 1e8   # the library's pair on 1e8 queries

Rows
    command: ``pate analyze FILE --threshold 190 --sigma1 60 --sigma 20 --delta 1e-8
        --no-release --json`` in a fresh interpreter (start-up, the file's reading and the
        cluster's start included: what a user waits for): in one process, then with
        ``--engine dask --workers 1`` and ``--workers N`` (N: this machine's CPUs). Peak memory
        is the pate process's own (``VmHWM``); the workers are other processes.
    library: the same analysis through ``pate.analyze`` on a cluster the script starts (its
        start not timed), the votes read once before: the time of the passes alone, and each
        worker's peak memory (``VmHWM``, read from the workers after the run), which a block
        of queries bounds.
    speed-up: the one-worker time over each row's; ``same``: the row's JSON equals the
        one-process JSON but its ``engine`` block.

Sharded (``--sharded Q``): Q queries generated a shard of 1e6 at a time on the workers of a
local cluster (one a CPU), each shard written to its own file and read back by
``pate.partial_account`` on the worker that wrote it; the calling process merges the parts
(``merge_partials``) and finishes (``finish_account``): it never holds a vote, only the
per-query terms. Printed: the total time, the finish's, each worker's and the caller's peak
memory, and the figures.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np
import scipy.sparse

HERE = Path(__file__).resolve().parent
sys.path[:0] = [str(HERE), str(HERE.parent / "sample_data")]
from bench_scale import run_pate  # noqa: E402
from make_samples import next_token_votes  # noqa: E402

SEED = 50257
FLAGS = ["--threshold", "190", "--sigma1", "60", "--sigma", "20", "--delta", "1e-8"]


def write_votes(workdir: Path, num_queries: int) -> Path:
    path = workdir / "votes.npz"
    scipy.sparse.save_npz(
        path, next_token_votes(num_queries, np.random.default_rng(SEED)), compressed=False
    )
    return path


def _hwm_mb() -> float:
    """This process's peak resident memory (VmHWM), in MB."""
    with open("/proc/self/status") as status:
        for line in status:
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024
    return float("nan")


def _figures(payload: dict[str, Any]) -> dict[str, Any]:
    return {key: value for key, value in payload.items() if key != "engine"}


def command_rows(path: Path, cpus: int, timeout: float) -> list[dict[str, Any]]:
    rows, base = [], None
    for name, extra in [
        ("one process", []),
        ("dask, 1 worker", ["--engine", "dask", "--workers", "1"]),
        (f"dask, {cpus} workers", ["--engine", "dask", "--workers", str(cpus)]),
    ]:
        measured = run_pate(
            ["analyze", str(path), *FLAGS, "--no-release", "--json", *extra], timeout
        )
        payload = json.loads(measured.stdout) if measured.ok else None
        if base is None:
            base = payload
        rows.append(
            {
                "run": f"command, {name}",
                "ok": measured.ok,
                "wall_s": round(measured.wall_s, 2),
                "client_peak_mb": None if measured.peak_mb is None else round(measured.peak_mb),
                "same": payload is not None and base is not None and _figures(payload) == base,
                "error": measured.error,
            }
        )
    return rows


def library_rows(path: Path, cpus: int) -> list[dict[str, Any]]:
    import distributed

    import pate_cli as pate

    mechanism = pate.ConfidentGNMax(threshold=190, sigma1=60, sigma=20)
    votes = pate.load_votes(path)
    started = time.perf_counter()
    here = pate.analyze(votes, mechanism, delta=1e-8, release=False).to_dict()
    rows = [
        {
            "run": "library, one process",
            "ok": True,
            "wall_s": round(time.perf_counter() - started, 2),
            "client_peak_mb": round(_hwm_mb()),
            "same": True,
        }
    ]
    for workers in (1, cpus):
        with distributed.LocalCluster(
            n_workers=workers, threads_per_worker=1, dashboard_address=":0", silence_logs=50
        ) as cluster:
            started = time.perf_counter()
            there = pate.analyze(
                votes,
                mechanism,
                delta=1e-8,
                release=False,
                engine="dask",
                scheduler=cluster.scheduler_address,
            ).to_dict()
            wall = time.perf_counter() - started
            with distributed.Client(cluster.scheduler_address) as client:
                peaks = client.run(_hwm_mb)
        rows.append(
            {
                "run": f"library, dask, {workers} worker{'s' if workers > 1 else ''}",
                "ok": True,
                "wall_s": round(wall, 2),
                "client_peak_mb": round(_hwm_mb()),
                "worker_peak_mb": round(max(peaks.values())),
                "same": _figures(there) == here,
            }
        )
    return rows


SHARD = 1_000_000


def _shard_part(index: int, folder: str) -> Any:
    """On a worker: shard ``index`` generated, written, read back and accounted."""
    import pate_cli as pate

    path = Path(folder) / f"shard{index:05d}.npz"
    matrix = next_token_votes(SHARD, np.random.default_rng([SEED, index]))
    scipy.sparse.save_npz(path, matrix, compressed=False)
    mechanism = pate.ConfidentGNMax(threshold=190, sigma1=60, sigma=20)
    part = pate.partial_account(path, mechanism, start=index * SHARD)
    path.unlink()  # the disk holds a few shards at a time, not the run
    return part


def sharded(num_queries: int, cpus: int, workdir: Path) -> dict[str, Any]:
    import distributed

    import pate_cli as pate

    shards = -(-num_queries // SHARD)
    started = time.perf_counter()
    with (
        distributed.LocalCluster(
            n_workers=cpus, threads_per_worker=1, dashboard_address=":0", silence_logs=50
        ) as cluster,
        distributed.Client(cluster) as client,
    ):
        futures = client.map(_shard_part, range(shards), folder=str(workdir), pure=False)
        parts = []
        for future in distributed.as_completed(futures):  # a worker keeps no part it made
            parts.append(future.result())
            future.release()
        del futures
        peaks = client.run(_hwm_mb)
    mapped = time.perf_counter() - started
    mechanism = pate.ConfidentGNMax(threshold=190, sigma1=60, sigma=20)
    merged = pate.merge_partials(parts)
    del parts
    account = pate.finish_account(merged, mechanism, delta=1e-9)
    total = time.perf_counter() - started
    return {
        "queries": shards * SHARD,
        "shards": shards,
        "workers": cpus,
        "wall_s": round(total, 1),
        "map_s": round(mapped, 1),
        "finish_s": round(total - mapped, 1),
        "worker_peak_mb": round(max(peaks.values())),
        "client_peak_mb": round(_hwm_mb()),
        "data_dependent": account.data_dependent.epsilon,
        "guaranteed": None if account.guaranteed is None else account.guaranteed.epsilon,
        "worst_case": account.worst_case.epsilon,
    }


def speed_ups(rows: list[dict[str, Any]]) -> None:
    """Each row's speed-up over its kind's one-worker row."""
    for kind in ("command", "library"):
        one = next(r for r in rows if r["run"] == f"{kind}, dask, 1 worker")
        for row in rows:
            if row["run"].startswith(kind) and row["ok"] and one["ok"]:
                row["speed_up"] = round(one["wall_s"] / row["wall_s"], 2)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--queries", type=float, default=1e7)
    parser.add_argument("--timeout", type=float, default=1800.0)
    parser.add_argument("--json", action="store_true")
    parser.add_argument("--sharded", type=float, default=None)
    args = parser.parse_args()
    cpus = os.cpu_count() or 1
    workdir = Path(tempfile.mkdtemp(prefix="pate-engine-"))
    if args.sharded is not None:
        try:
            print(json.dumps(sharded(int(args.sharded), cpus, workdir)))
        finally:
            shutil.rmtree(workdir, ignore_errors=True)
        return
    try:
        started = time.perf_counter()
        path = write_votes(workdir, int(args.queries))
        generated = time.perf_counter() - started
        rows = command_rows(path, cpus, args.timeout) + library_rows(path, cpus)
        speed_ups(rows)
        size_mb = path.stat().st_size / 2**20
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
    if args.json:
        print(json.dumps({"queries": int(args.queries), "cpus": cpus, "rows": rows}))
        return
    print(
        f"next-token run: {int(args.queries):,} queries (sparse file {size_mb:.0f} MB, generated "
        f"in {generated:.0f} s), {cpus} CPUs"
    )
    print(f"{'run':<28}{'wall s':>8}{'speed-up':>10}{'client MB':>11}{'worker MB':>11}  same")
    for row in rows:
        worker = row.get("worker_peak_mb")
        client = row.get("client_peak_mb")
        print(
            f"{row['run']:<28}{row['wall_s']:>8.2f}{row.get('speed_up', ''):>10}"
            f"{'' if client is None else client:>11}{'' if worker is None else worker:>11}"
            f"  {'yes' if row['same'] else 'NO'}"
            + ("" if row["ok"] else f"  FAILED: {row.get('error')}")
        )


if __name__ == "__main__":
    main()

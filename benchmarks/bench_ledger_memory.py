"""Benchmark what ``--ledger`` adds to a run: peak RSS and wall time of ``pate analyze``.

Builds vote files of N queries (rows drawn from the 2018 paper's MNIST votes, float64, in a
temporary folder or ``--dir``), then runs, each in a fresh process,

    pate analyze VOTES --sigma 40 --delta 1e-5 --no-release            (and with --ledger L.csv)
    pate analyze VOTES --threshold 200 --sigma1 150 --sigma 40 ...      (and with --ledger L.json)

and prints one table: the peak resident memory of each run (``os.wait4``'s ``ru_maxrss``), the
ledger's addition to it and its ratio to the run without it, and the wall times, all measured
in this one run. The ledger is computed and written block by block; up to 2**21 rows its
running epsilons are kept (3 floats a row) so that the file is written without computing
them again. It is not a test.

    python benchmarks/bench_ledger_memory.py
    python benchmarks/bench_ledger_memory.py --queries 500000,2000000,4000000 --json
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[1]
MNIST = REPO / "sample_data" / "mnist_250_teachers.npy"
SETTINGS = {
    "gnmax": (["--sigma", "40"], ".csv"),
    "confident": (["--threshold", "200", "--sigma1", "150", "--sigma", "40"], ".json"),
}


def run(args: list[str]) -> tuple[float, float, int]:
    """Peak RSS (MB), wall time (s) and exit code of ``pate`` with ``args`` in a new process."""
    start = time.perf_counter()
    child = subprocess.Popen(
        [sys.executable, "-m", "pate_cli", *args],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    _, status, usage = os.wait4(child.pid, 0)
    return usage.ru_maxrss / 1024, time.perf_counter() - start, os.waitstatus_to_exitcode(status)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--queries", default="500000,2000000", help="comma-separated N")
    parser.add_argument("--dir", help="keep the vote files here (outside the repository)")
    parser.add_argument("--json", action="store_true", help="print the rows as JSON")
    options = parser.parse_args()
    folder = Path(options.dir or tempfile.mkdtemp(prefix="pate-ledger-"))
    folder.mkdir(parents=True, exist_ok=True)
    counts = np.load(MNIST, allow_pickle=False)
    rows = []
    for queries in (int(q) for q in options.queries.split(",")):
        votes = folder / f"votes-{queries}.npy"
        if not votes.exists():
            rng = np.random.default_rng(queries)
            np.save(votes, counts[rng.integers(0, counts.shape[0], queries)])
        for name, (flags, suffix) in SETTINGS.items():
            base = ["analyze", str(votes), *flags, "--delta", "1e-5", "--no-release", "-q"]
            ledger = folder / f"ledger-{queries}-{name}{suffix}"
            without = run(base)
            with_ledger = run([*base, "--ledger", str(ledger), "--force"])
            rows.append(
                {
                    "queries": queries,
                    "mechanism": name,
                    "peak_mb": round(without[0], 1),
                    "peak_with_ledger_mb": round(with_ledger[0], 1),
                    "ledger_adds_mb": round(with_ledger[0] - without[0], 1),
                    "ratio": round(with_ledger[0] / without[0], 2),
                    "seconds": round(without[1], 2),
                    "seconds_with_ledger": round(with_ledger[1], 2),
                    "ledger_mb": round(ledger.stat().st_size / 1e6, 1),
                    "exit": [without[2], with_ledger[2]],
                }
            )
            ledger.unlink()
    if options.json:
        print(json.dumps(rows, indent=1))
        return
    print(
        "| queries | mechanism | peak | with --ledger | added | ratio | time | with --ledger "
        "| file |\n|---|---|---|---|---|---|---|---|---|"
    )
    for r in rows:
        print(
            f"| {r['queries']:,} | {r['mechanism']} | {r['peak_mb']} MB | "
            f"{r['peak_with_ledger_mb']} MB | {r['ledger_adds_mb']} MB | {r['ratio']}x | "
            f"{r['seconds']} s | {r['seconds_with_ledger']} s | {r['ledger_mb']} MB |"
        )


if __name__ == "__main__":
    main()

"""The privacy-loss-distribution figure (``analyze --pld``): time and memory by run size.

    python benchmarks/bench_pld.py            # 1e3, 1e5 and 1e6 queries
    python benchmarks/bench_pld.py --quick    # 1e3 and 1e5

Each row is one process (``pate analyze --no-release --json``, interpreter start-up
included) on votes of 250 teachers over 10 classes, 90% of the queries confident (top count
150 to 249, the rest 60 to 119), GNMax sigma 40 at delta 1e-5: the run with ``--pld``
against the same run without it, in this run, and the peak resident memory of each. The
issue's target: 1e5 queries with ``--pld`` under 5 s.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np


def votes(queries: int, seed: int = 0) -> np.ndarray:
    rng = np.random.default_rng(seed)
    confident = rng.random(queries) < 0.9
    top = np.where(confident, rng.integers(150, 250, queries), rng.integers(60, 120, queries))
    out = np.zeros((queries, 10), dtype=np.int32)
    for start in range(0, queries, 1 << 16):
        rows = slice(start, start + (1 << 16))
        n = top[rows].size
        shares = rng.dirichlet(np.ones(9), n)
        rest = rng.multinomial(250 - top[rows], shares)
        block = np.concatenate([top[rows, None], rest], axis=1)
        out[rows] = rng.permuted(block, axis=1)
    return out


# The child reports its own peak resident memory when it exits (ru_maxrss, in KB on Linux).
_CHILD = (
    "import atexit, resource, sys\n"
    "atexit.register(lambda: sys.stderr.write("
    "'MAXRSS %d\\n' % resource.getrusage(resource.RUSAGE_SELF).ru_maxrss))\n"
    "sys.argv = ['pate', *sys.argv[1:]]\n"
    "from pate_cli.cli.entry import main\n"
    "main()\n"
)


def run(path: Path, *flags: str) -> tuple[float, float, dict]:
    """Wall seconds, the child's peak resident memory in MB, and its JSON."""
    command = [sys.executable, "-c", _CHILD, "analyze", str(path), "--sigma", "40"]
    command += ["--delta", "1e-5", "--no-release", "--json", *flags]
    start = time.perf_counter()
    done = subprocess.run(command, capture_output=True, text=True, check=True)
    seconds = time.perf_counter() - start
    peak = next(
        int(line.split()[1]) for line in done.stderr.splitlines() if line.startswith("MAXRSS")
    )
    return seconds, peak / 1024, json.loads(done.stdout)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true")
    args = parser.parse_args()
    sizes = [1_000, 100_000] if args.quick else [1_000, 100_000, 1_000_000]
    print(
        "| queries | --pld s | without s | ratio | --pld MB | without MB | groups "
        "| PLD eps | RDP eps |"
    )
    print("|---|---|---|---|---|---|---|---|---|")
    with tempfile.TemporaryDirectory() as folder:
        for size in sizes:
            path = Path(folder) / f"votes_{size}.npy"
            np.save(path, votes(size))
            plain, plain_peak, _ = run(path)
            seconds, peak, report = run(path, "--pld")
            figure = report["data_dependent_pld"]
            print(
                f"| {size:,} | {seconds:.2f} | {plain:.2f} | {seconds / plain:.2f} | "
                f"{peak:.0f} | {plain_peak:.0f} | {figure['groups']} | "
                f"{figure['epsilon']:.4f} | {report['data_dependent']['epsilon']:.4f} |"
            )


if __name__ == "__main__":
    main()

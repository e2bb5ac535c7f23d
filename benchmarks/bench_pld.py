"""The privacy-loss-distribution figure (``analyze --pld``): time and memory by run size.

    python benchmarks/bench_pld.py            # 1e3, 1e5 and 1e6 queries; candidates
    python benchmarks/bench_pld.py --quick    # 1e3 and 1e5; candidates

Each row is one process (``pate analyze --no-release --json``, interpreter start-up
included) on votes of 250 teachers over 10 classes, 90% of the queries confident (top count
150 to 249, the rest 60 to 119), GNMax sigma 40 at delta 1e-5: the run with ``--pld``
against the same run without it, in this run, and the peak resident memory of each. The
issue's target: 1e5 queries with ``--pld`` under 5 s.

The last row, "candidates": 50,000 next-token queries of 128 teachers over a GPT-2
vocabulary, 16 candidate token ids per query (``--candidates``), Confident-GNMax
(threshold 90, sigma1 30, sigma 10) at delta 1e-5, where each query's q depends on all its
counts and the cells of (log a, log b) run to thousands. Time is the child's CPU seconds
(user and system: the machine may be shared), both runs measured in this run, alternated,
the best of ``--repeat``. The target: at most 3x the time and 2x the memory without --pld.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import NamedTuple

import numpy as np
import scipy.sparse

VOCABULARY = 50_257


def next_token_run(queries: int, seed: int = 54) -> tuple[scipy.sparse.csr_matrix, np.ndarray]:
    """(votes, candidate ids): 128 teachers, 16 distinct candidate token ids per query; the
    teachers vote on a Zipf(1.6)-distributed number of them (at most 16), the first taking a
    share from a mixture (80% Beta(8, 2), a contested 20% Beta(2, 2); a plurality at least),
    the rest of the votes falling uniformly on the others used."""
    rng = np.random.default_rng(seed)
    teachers, k = 128, 16
    ids = rng.integers(0, VOCABULARY, (queries, 2 * k))
    candidates = np.stack([rng.permutation(np.unique(row)[:k]) for row in ids])
    used = np.minimum(rng.zipf(1.6, queries), k)
    share = np.where(rng.random(queries) < 0.8, rng.beta(8, 2, queries), rng.beta(2, 2, queries))
    top = np.where(used == 1, teachers, np.round(share * teachers).astype(np.int64))
    top = np.maximum(top, np.ceil(teachers / used).astype(np.int64))
    counts = np.zeros((queries, k), dtype=np.int64)
    counts[:, 0] = top
    spread = np.repeat(np.arange(queries), teachers - top)
    slot = 1 + (rng.random(spread.size) * np.maximum(used[spread] - 1, 1)).astype(np.int64)
    np.add.at(counts, (spread, np.minimum(slot, k - 1)), 1)
    rows = np.repeat(np.arange(queries), k)
    matrix = scipy.sparse.csr_matrix(
        (counts.ravel().astype(np.int32), (rows, candidates.ravel())),
        shape=(queries, VOCABULARY),
    )
    matrix.eliminate_zeros()
    return matrix, candidates


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
    "import atexit, os, resource, sys\n"
    "atexit.register(lambda: sys.stderr.write("
    "'MAXRSS %d\\n' % resource.getrusage(resource.RUSAGE_SELF).ru_maxrss))\n"
    "atexit.register(lambda: sys.stderr.write('CPU %r\\n' % sum(os.times()[:2])))\n"
    "sys.argv = ['pate', *sys.argv[1:]]\n"
    "from pate_cli.cli.entry import main\n"
    "main()\n"
)


def run(path: Path, *flags: str, mechanism: tuple[str, ...] = ("--sigma", "40")) -> Child:
    """Wall seconds, the child's peak resident memory in MB, its JSON and CPU seconds."""
    command = [sys.executable, "-c", _CHILD, "analyze", str(path), *mechanism]
    command += ["--delta", "1e-5", "--no-release", "--json", *flags]
    start = time.perf_counter()
    done = subprocess.run(command, capture_output=True, text=True, check=True)
    seconds = time.perf_counter() - start
    said = dict(
        line.split()[:2]
        for line in done.stderr.splitlines()
        if line.startswith(("MAXRSS ", "CPU "))
    )
    return Child(seconds, int(said["MAXRSS"]) / 1024, json.loads(done.stdout), float(said["CPU"]))


class Child(NamedTuple):
    seconds: float
    peak: float
    report: dict
    cpu: float


def candidates_row(folder: Path, repeat: int) -> None:
    """The next-token run with candidate sets and a threshold, with and without --pld."""
    matrix, candidates = next_token_run(50_000)
    path, ids = folder / "next_token.npz", folder / "candidates.npy"
    scipy.sparse.save_npz(path, matrix, compressed=False)
    np.save(ids, candidates)
    mechanism = ("--threshold", "90", "--sigma1", "30", "--sigma", "10")
    flags = ("--candidates", str(ids))
    plain, with_pld = [], []
    for _ in range(repeat):  # alternated, so that a busy spell weighs on both
        plain.append(run(path, *flags, mechanism=mechanism))
        with_pld.append(run(path, *flags, "--pld", mechanism=mechanism))
    best, best_plain = min(with_pld, key=lambda c: c.cpu), min(plain, key=lambda c: c.cpu)
    peak, plain_peak = min(c.peak for c in with_pld), min(c.peak for c in plain)
    figure = best.report["data_dependent_pld"]
    print()
    print(
        "| candidates (5e4 x 16 ids, threshold) | --pld CPU s | without CPU s | ratio "
        "| --pld MB | without MB | ratio | groups | PLD eps | RDP eps |"
    )
    print("|---|---|---|---|---|---|---|---|---|---|")
    print(
        f"| 50,000 | {best.cpu:.2f} | {best_plain.cpu:.2f} | {best.cpu / best_plain.cpu:.2f} | "
        f"{peak:.0f} | {plain_peak:.0f} | {peak / plain_peak:.2f} | {figure['groups']} | "
        f"{figure['epsilon']:.4f} | {best.report['data_dependent']['epsilon']:.4f} |"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--repeat", type=int, default=2, help="runs of the candidates row")
    parser.add_argument("--candidates-only", action="store_true", help="the last row alone")
    args = parser.parse_args()
    sizes = [1_000, 100_000] if args.quick else [1_000, 100_000, 1_000_000]
    print(
        "| queries | --pld s | without s | ratio | --pld MB | without MB | groups "
        "| PLD eps | RDP eps |"
    )
    print("|---|---|---|---|---|---|---|---|---|")
    with tempfile.TemporaryDirectory() as folder:
        for size in [] if args.candidates_only else sizes:
            path = Path(folder) / f"votes_{size}.npy"
            np.save(path, votes(size))
            plain, plain_peak, _, _ = run(path)
            seconds, peak, report, _ = run(path, "--pld")
            figure = report["data_dependent_pld"]
            print(
                f"| {size:,} | {seconds:.2f} | {plain:.2f} | {seconds / plain:.2f} | "
                f"{peak:.0f} | {plain_peak:.0f} | {figure['groups']} | "
                f"{figure['epsilon']:.4f} | {report['data_dependent']['epsilon']:.4f} |"
            )
        candidates_row(Path(folder), args.repeat)


if __name__ == "__main__":
    main()

"""Counts held by distinct row against the same analysis row by row, and the numpy.load floor.

A plain script, not a test. It writes a (N, 10) float64 counts file (250 teachers) into a
work directory outside the repository and times, in this process (CPU seconds, the best of
``--repeat``; wall seconds beside them), ``numpy.load`` of the file and
``load_votes`` + ``analyze(release=False)`` (Confident-GNMax T=200, sigma1=150, sigma=40,
delta 1e-8), once as read (grouped by distinct row where it repeats) and once row by row
(the grouping switched off), and checks that both give the same report:

    python benchmarks/bench_distinct_rows.py                    # 1e6 rows, 11,340 distinct
    python benchmarks/bench_distinct_rows.py --rows 1e7         # the 800 MB file
    python benchmarks/bench_distinct_rows.py --diverse          # Dirichlet shares: distinct
    python benchmarks/bench_distinct_rows.py --workdir /tmp/d --keep

"repetitive": 11,340 distinct histograms (multinomial draws of Dirichlet(0.3) shares), rows
drawn uniformly from them; "diverse": every row its own draw of Dirichlet(1) shares.
"""

from __future__ import annotations

import argparse
import shutil
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

import pate_cli as pate
from pate_cli.votes import grouping

CLASSES, TEACHERS, DISTINCT = 10, 250, 11_340
MECHANISM = pate.ConfidentGNMax(200, 150, 40)


def write_file(path: Path, rows: int, diverse: bool) -> None:
    rng = np.random.default_rng(54)
    pool = None
    if not diverse:
        found: dict[bytes, np.ndarray] = {}
        while len(found) < DISTINCT:
            shares = rng.dirichlet(np.full(CLASSES, 0.3), size=20_000)
            for row in rng.multinomial(TEACHERS, shares).astype(np.float64):
                found.setdefault(row.tobytes(), row)
        pool = np.array(list(found.values())[:DISTINCT])
    out = np.lib.format.open_memmap(path, mode="w+", dtype=np.float64, shape=(rows, CLASSES))
    for start in range(0, rows, 10**6):
        num = min(10**6, rows - start)
        if pool is None:
            shares = rng.dirichlet(np.ones(CLASSES), size=num)
            out[start : start + num] = rng.multinomial(TEACHERS, shares)
        else:
            out[start : start + num] = pool[rng.integers(0, len(pool), num)]
    out.flush()
    del out


def timed(run: Callable[[], Any], repeat: int) -> tuple[float, float, Any]:
    """(best CPU seconds, best wall seconds, the last result)."""
    cpu, wall, result = [], [], None
    for _ in range(repeat):
        start_cpu, start_wall = time.process_time(), time.perf_counter()
        result = run()
        cpu.append(time.process_time() - start_cpu)
        wall.append(time.perf_counter() - start_wall)
    return min(cpu), min(wall), result


def analysis(path: Path) -> Any:
    votes = pate.load_votes(path)
    report = pate.analyze(votes, MECHANISM, delta=1e-8, release=False)
    return votes.distinct is not None, report.to_dict()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=float, default=1e6)
    parser.add_argument("--diverse", action="store_true")
    parser.add_argument("--repeat", type=int, default=2)
    parser.add_argument("--workdir", type=Path)
    parser.add_argument("--keep", action="store_true")
    args = parser.parse_args()
    workdir = args.workdir or Path(tempfile.mkdtemp(prefix="pate-distinct-"))
    workdir.mkdir(parents=True, exist_ok=True)
    kind = "diverse" if args.diverse else "repetitive"
    path = workdir / f"{kind}_{int(args.rows)}.npy"
    try:
        if not path.exists():
            write_file(path, int(args.rows), args.diverse)
        load_cpu, load_wall, _ = timed(lambda: np.load(path).shape, args.repeat)
        grouped = timed(lambda: analysis(path), args.repeat)
        cells = grouping.CELLS
        grouping.CELLS = 0
        try:
            rows = timed(lambda: analysis(path), args.repeat)
        finally:
            grouping.CELLS = cells
        print(
            f"{kind}, {int(args.rows):,} rows x {CLASSES} classes (CPU s / wall s, best of "
            f"{args.repeat})"
        )
        print(f"  numpy.load            {load_cpu:7.2f} / {load_wall:6.2f}")
        for name, (cpu, wall, (is_grouped, _)) in (("as read", grouped), ("row by row", rows)):
            print(
                f"  analyze {name:<13} {cpu:7.2f} / {wall:6.2f}   {cpu / load_cpu:5.1f}x "
                f"numpy.load's CPU, {wall / load_wall:5.1f}x its wall"
                + ("  (grouped)" if is_grouped else "")
            )
        print(f"  same report: {grouped[2][1] == rows[2][1]}")
    finally:
        if not args.keep:
            if args.workdir is None:
                shutil.rmtree(workdir, ignore_errors=True)
            else:
                path.unlink(missing_ok=True)


if __name__ == "__main__":
    main()

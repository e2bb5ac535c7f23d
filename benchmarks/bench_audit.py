"""``pate audit``: how fast it draws, how long a whole audit takes, how near the bound lands.

Rows, measured in one run of this script (it is not a test):
    sampling: outcomes of one 10-class GNMax query drawn by the mechanism's own ``run`` (what
        ``pate audit`` and ``aggregate`` run), in blocks of 2^18, per second of CPU, against
        the goal of 1e6 a second on one core.
    whole process: ``pate audit --sigma 1 --delta 1e-5`` (1e6 runs a side, the pair
        searched), the best of 3 fresh processes in wall time, against the goal of 5 s; and
        the same on ten classes (``--classes 10``).
    bound: the lower bound of seeds 0 to 9 against its exact expectation (GNMax sigma 1,
        1e6 runs a side): the largest distance, against the goal of 0.2.

    python benchmarks/bench_audit.py
"""

from __future__ import annotations

import json
import subprocess
import sys
import time

import numpy as np

import pate_cli as pate
from pate_cli.audits.draws import block_noise, outcome_kinds

BLOCK = 1 << 18


def sampling_rate() -> float:
    """Outcomes a CPU second of one 10-class GNMax query."""
    mechanism, row = pate.GNMax(sigma=1.0), np.array([5.0, 3, 1, 1, 0, 0, 0, 0, 0, 0])
    outcome_kinds(mechanism, row, 1000, block_noise(1, "audit", 0, 0))  # warm
    start = time.process_time()
    drawn = sum(
        outcome_kinds(mechanism, row, BLOCK, block_noise(1, "audit", 0, b)).size for b in range(8)
    )
    return drawn / (time.process_time() - start)


def whole_process(*extra: str) -> float:
    """The best of 3 fresh ``pate audit`` runs, in wall time."""
    args = [sys.executable, "-m", "pate_cli", "audit", "--sigma", "1", "--delta", "1e-5", *extra]
    best = float("inf")
    for _ in range(3):
        start = time.perf_counter()
        subprocess.run([*args, "--json"], check=True, capture_output=True)
        best = min(best, time.perf_counter() - start)
    return best


def largest_distance() -> float:
    """max over seeds 0..9 of |bound - its expectation|, GNMax sigma 1, 1e6 runs a side."""
    distances = []
    for seed in range(10):
        report = pate.audit(pate.GNMax(sigma=1.0), delta=1e-5, seed=seed)
        distances.append(abs(report.epsilon_lower_bound - report.epsilon_lower_bound_expected))
    return max(distances)


def main() -> None:
    rows = [
        ("sampling, 10 classes (draws / CPU s)", sampling_rate(), 1e6, "at least"),
        ("whole process, 2 classes (s)", whole_process(), 5.0, "at most"),
        ("whole process, 10 classes (s)", whole_process("--classes", "10"), 5.0, "at most"),
        ("|bound - expectation|, 10 seeds", largest_distance(), 0.2, "at most"),
    ]
    if "--json" in sys.argv:
        print(json.dumps({name: value for name, value, _, _ in rows}))
        return
    print("| measure | measured | goal |")
    print("|---|---|---|")
    for name, value, goal, way in rows:
        print(f"| {name} | {value:,.3g} | {way} {goal:,.3g} |")


if __name__ == "__main__":
    main()

"""Benchmark what a CI pipeline pays per call: whole-process wall time of short commands.

Each row runs in a fresh process, best of ``--repeat`` runs (the machine's noise only ever
adds time), next to ``python -c pass`` measured in the same run, and prints the ratio. The
``pate`` console script beside this interpreter is used (a shim such as pyenv's adds its
own start-up), or ``python -m pate_cli`` when there is none. It is not a test.

    python benchmarks/bench_startup.py
    python benchmarks/bench_startup.py --repeat 20 --json
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SAMPLE = str(ROOT / "sample_data" / "mnist_250_teachers.npy")
TABLE2 = ["--threshold", "200", "--sigma1", "150", "--sigma", "40", "--queries", "640"]


def pate_command() -> list[str]:
    script = Path(sys.executable).with_name("pate")
    return [str(script)] if script.exists() else [sys.executable, "-m", "pate_cli"]


def best_of(argv: list[str], repeat: int) -> float:
    """The fastest of ``repeat`` fresh runs, in seconds (the command must succeed)."""
    best = float("inf")
    for _ in range(repeat):
        start = time.perf_counter()
        subprocess.run(argv, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        best = min(best, time.perf_counter() - start)
    return best


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=10, help="runs per row (default 10)")
    parser.add_argument("--json", action="store_true", help="one JSON object on stdout")
    args = parser.parse_args()
    pate = pate_command()
    rows = [
        ("python -c pass", [sys.executable, "-c", "pass"]),
        ("pate --version", [*pate, "--version"]),
        ("pate --help", [*pate, "--help"]),
        (
            "pate analyze (Table 2, with release)",
            [*pate, "analyze", SAMPLE, *TABLE2, "--delta", "1e-5"],
        ),
        (
            "pate analyze --json --no-release",
            [*pate, "analyze", SAMPLE, *TABLE2, "--delta", "1e-5", "--json", "--no-release"],
        ),
    ]
    times = {name: best_of(argv, args.repeat) for name, argv in rows}
    base = times["python -c pass"]
    if args.json:
        print(json.dumps({"seconds": times, "cpus": os.cpu_count(), "python": sys.version}))
        return
    width = max(map(len, times))
    print(f"{'command'.ljust(width)}  seconds  x python -c pass")
    for name, seconds in times.items():
        print(f"{name.ljust(width)}  {seconds:7.3f}  {seconds / base:8.1f}")


if __name__ == "__main__":
    main()

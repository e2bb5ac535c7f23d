"""Benchmark what a CI pipeline pays per call: whole-process wall time of short commands,
each against the floor it cannot go below.

Each command is timed in fresh processes next to its floor, the imports it cannot do without,
in the same run: ``pate --version`` against ``python -c pass``, ``pate analyze --help``
against importing typer and rich, and the README's first command (Table 2 with its release)
against importing numpy, scipy.special, typer and rich. The rows take turns, one run of each
per round, so that whatever else the machine does falls on all of them alike; each row's
time is its best of ``--repeat`` rounds (the machine's noise only ever adds time), and each
ratio is of two such times: wall time, and CPU time (user and system, the child's own), which
another process on a shared machine disturbs less.

The processes compile their bytecode once, into a folder of this run's own
(``PYTHONPYCACHEPREFIX``, an untimed round first), as an installed package has it: an
environment that writes none (``PYTHONDONTWRITEBYTECODE``, an editable install) would
compile pate's modules in every run. The ``pate`` console script beside this interpreter is
used (a shim such as pyenv's adds its own start-up), or ``python -m pate_cli`` when there is
none, with ``PYTHONPATH`` naming the checkout timed (this one, or ``--root``), whichever copy
the script was installed from; every row, floors too, runs with it. It is not a test.

    python benchmarks/bench_startup.py
    python benchmarks/bench_startup.py --repeat 20 --json
    python benchmarks/bench_startup.py --root /path/to/another/checkout
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

ROOT = Path(__file__).resolve().parents[1]
SAMPLE = str(ROOT / "sample_data" / "mnist_250_teachers.npy")
TABLE2 = ["--threshold", "200", "--sigma1", "150", "--sigma", "40", "--queries", "640"]
README_FIRST = ["analyze", SAMPLE, *TABLE2, "--delta", "1e-5"]

# The floors: what a command cannot import less than.
PYTHON = "python -c pass"
TYPER = 'python -c "import typer, rich"'
NUMERIC = 'python -c "import numpy, scipy.special, typer, rich"'
# Each command, its floor, and the ratio it is held to (None: shown, not held).
COMMANDS = (
    ("pate --version", ["--version"], PYTHON, 1.5),
    ("pate analyze --help", ["analyze", "--help"], TYPER, 1.5),
    ("pate --help", ["--help"], TYPER, None),
    ("pate analyze (README's first command: Table 2, with release)", README_FIRST, NUMERIC, 2.0),
    ("pate analyze --json --no-release", [*README_FIRST, "--json", "--no-release"], NUMERIC, None),
)


def pate_command() -> list[str]:
    script = Path(sys.executable).with_name("pate")
    return [str(script)] if script.exists() else [sys.executable, "-m", "pate_cli"]


def rows() -> dict[str, list[str]]:
    """Every row's command line: the floors first, then the commands."""
    pate = pate_command()
    found = {
        PYTHON: [sys.executable, "-c", "pass"],
        TYPER: [sys.executable, "-c", "import typer, rich"],
        NUMERIC: [sys.executable, "-c", "import numpy, scipy.special, typer, rich"],
    }
    for name, args, _, _ in COMMANDS:
        found[name] = [*pate, *args]
    return found


def once(argv: list[str], env: dict[str, str]) -> tuple[float, float]:
    """One fresh run's wall time and CPU time (user and system) in seconds, in the checkout
    timed (``python -m`` puts its folder first); the command must succeed."""
    start = time.perf_counter()
    child = subprocess.Popen(
        argv,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        env=env,
        cwd=env["PYTHONPATH"],
    )
    _, status, usage = os.wait4(child.pid, 0)
    wall = time.perf_counter() - start
    child.returncode = os.waitstatus_to_exitcode(status)
    if child.returncode != 0:
        raise subprocess.CalledProcessError(child.returncode, argv)
    return wall, usage.ru_utime + usage.ru_stime


def best_times(
    argvs: dict[str, list[str]], repeat: int, cache: str, root: Path
) -> tuple[dict[str, float], dict[str, float]]:
    """Each row's best wall and best CPU time of ``repeat`` rounds, the rows taking turns
    within a round, after one untimed round that compiles the bytecode into ``cache``;
    ``root``'s ``pate_cli`` is the one run."""
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    env["PYTHONPYCACHEPREFIX"] = cache
    env["PYTHONPATH"] = str(root)
    for argv in argvs.values():
        once(argv, env)
    wall = dict.fromkeys(argvs, float("inf"))
    cpu = dict.fromkeys(argvs, float("inf"))
    for _ in range(repeat):
        for name, argv in argvs.items():
            seconds, used = once(argv, env)
            wall[name] = min(wall[name], seconds)
            cpu[name] = min(cpu[name], used)
    return wall, cpu


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=10, help="rounds (default 10)")
    parser.add_argument("--json", action="store_true", help="one JSON object on stdout")
    parser.add_argument(
        "--root", type=Path, default=ROOT, help="the checkout whose pate_cli runs (this one)"
    )
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="pate-bench-bytecode-") as cache:
        times, cpu = best_times(rows(), args.repeat, cache, args.root.resolve())
    ratios = {name: times[name] / times[floor] for name, _, floor, _ in COMMANDS}
    cpu_ratios = {name: cpu[name] / cpu[floor] for name, _, floor, _ in COMMANDS}
    if args.json:
        floors = {name: floor for name, _, floor, _ in COMMANDS}
        print(
            json.dumps(
                {
                    "seconds": times,
                    "cpu_seconds": cpu,
                    "floors": floors,
                    "ratios": ratios,
                    "cpu_ratios": cpu_ratios,
                    "cpus": os.cpu_count(),
                    "python": sys.version,
                }
            )
        )
        return
    width = max(map(len, times))
    print(f"{'command'.ljust(width)}  wall s  x floor   CPU s  x floor  (held to)  floor")
    for name in (PYTHON, TYPER, NUMERIC):
        print(f"{name.ljust(width)}  {times[name]:6.3f}  {'':7}  {cpu[name]:6.3f}")
    for name, _, floor, held in COMMANDS:
        limit = f"({held:.1f})" if held is not None else ""
        print(
            f"{name.ljust(width)}  {times[name]:6.3f}  {ratios[name]:7.2f}  "
            f"{cpu[name]:6.3f}  {cpu_ratios[name]:7.2f}  {limit:>9}  {floor}"
        )


if __name__ == "__main__":
    main()

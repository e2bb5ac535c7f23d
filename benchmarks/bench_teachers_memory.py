"""Peak memory of the release against the number of teachers, not the size of the file.

A two-row counts file with 1e7 teachers is 200 bytes; the release's local-sensitivity
tables run over the teacher distances d = 0 .. M-1, and every pass over them is made in
blocks, so the peak stays bounded. Each case runs ``pate analyze`` (with the release) in a
fresh process and reads its peak resident set size from the kernel.

    python benchmarks/bench_teachers_memory.py [--teachers 1e7]
"""

from __future__ import annotations

import argparse
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

CASES = {
    "GNMax": ["--sigma", "40"],
    "Confident-GNMax": ["--threshold", "{t}", "--sigma1", "{s1}", "--sigma", "40"],
    "LNMax": ["--gamma", "0.001"],
}


def peak_of(args: list[str]) -> tuple[float, float]:
    """(wall seconds, peak RSS in MB) of one child process."""
    start = time.perf_counter()
    subprocess.run(args, check=True, stdout=subprocess.DEVNULL)
    wall = time.perf_counter() - start
    return wall, resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--teachers", type=float, default=1e7)
    teachers = int(parser.parse_args().teachers)
    with tempfile.TemporaryDirectory() as folder:
        votes = Path(folder) / "votes.npy"
        rows = [[0.9, 0.1, 0.0], [0.5, 0.4, 0.1]]
        np.save(votes, np.round(np.array(rows) * teachers))
        shape = f"2 queries x 3 classes x {teachers:.0e} teachers"
        print(f"| case (fresh process, {shape}) | wall s | peak MB |")
        print("|---|---|---|")
        for name, flags in CASES.items():
            flags = [f.format(t=0.6 * teachers, s1=0.01 * teachers) for f in flags]
            command = [sys.executable, "-m", "pate_cli", "analyze", str(votes), *flags]
            # Each case in its own interpreter, so that ru_maxrss is that case's alone.
            wrapper = [sys.executable, __file__, "--child", *command]
            wall, peak = _child(wrapper)
            print(f"| analyze with the release, {name} | {wall:.1f} | {peak:.0f} |")


def _child(wrapper: list[str]) -> tuple[float, float]:
    out = subprocess.run(wrapper, check=True, capture_output=True, text=True).stdout.split()
    return float(out[0]), float(out[1])


if __name__ == "__main__":
    if len(sys.argv) > 1 and sys.argv[1] == "--child":
        wall, peak = peak_of([*sys.argv[2:], "--delta", "1e-5", "--json"])
        print(wall, peak)
    else:
        main()

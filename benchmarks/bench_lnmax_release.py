"""Benchmark LNMax's GNSS release against GNMax's on the same 9,000 MNIST queries.

Times ``pate_cli.api.smooth_sensitivity`` (what ``pate smooth-sensitivity`` computes, start-up
and reading excluded: the analysis over the default orders, the local sensitivity at every
distance summed over queries, the beta search and one release) on
``sample_data/mnist_250_teachers.npy`` (9000 queries, 250 teachers, 10 classes) with GNMax and
with LNMax, and the summed local sensitivity alone, in one run. The first call of each is
timed cold, then the best of three more; the ratios are LNMax's time over GNMax's. Prints a
table; it is not a test.

    python benchmarks/bench_lnmax_release.py
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np

from pate_cli import api
from pate_cli.core import ls_lnmax
from pate_cli.core import smooth as smooth_core
from pate_cli.mechanisms import GNMax, LNMax, Mechanism

ROOT = Path(__file__).resolve().parents[1]
VOTES = ROOT / "sample_data" / "mnist_250_teachers.npy"


def timed(call: Callable[[], object], repeat: int) -> tuple[float, float]:
    """(first, best of ``repeat`` more) wall-clock seconds of ``call``."""
    times = []
    for _ in range(1 + repeat):
        start = time.perf_counter()
        call()
        times.append(time.perf_counter() - start)
    return times[0], min(times[1:])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sigma", type=float, default=40.0, help="GNMax's sigma")
    parser.add_argument("--gamma", type=float, default=0.05, help="LNMax's gamma")
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    votes = api.load_votes(VOTES, fmt="counts")
    counts, teachers = votes.counts, votes.num_teachers
    cases: list[tuple[str, Mechanism]] = [
        (f"GNMax sigma={args.sigma:g}", GNMax(args.sigma)),
        (f"LNMax gamma={args.gamma:g}", LNMax(args.gamma)),
    ]
    rows = []
    for name, mechanism in cases:
        report = api.smooth_sensitivity(votes, mechanism, delta=1e-5, seed=np.random.default_rng(0))
        order = report.release.order
        whole = timed(
            lambda m=mechanism: api.smooth_sensitivity(
                votes, m, delta=1e-5, seed=np.random.default_rng(0)
            ),
            args.repeat,
        )
        if isinstance(mechanism, LNMax):
            sensitivity = timed(
                lambda o=order: ls_lnmax.local_sensitivity_total_lnmax(
                    counts, teachers, args.gamma, o
                ),
                args.repeat,
            )
        else:
            sensitivity = timed(
                lambda o=order: smooth_core.local_sensitivity_total(
                    counts, teachers, o, args.sigma
                ),
                args.repeat,
            )
        rows.append((name, order, whole, sensitivity, report.release.epsilon_expected_release))
    gnmax, lnmax = rows
    print(
        f"{'case':<22}{'order':>7}{'whole first s':>15}{'whole best s':>14}"
        f"{'LS first s':>12}{'LS best s':>11}{'released eps':>14}"
    )
    for name, order, whole, sensitivity, released in rows:
        print(
            f"{name:<22}{order:>7.2f}{whole[0]:>15.3f}{whole[1]:>14.3f}"
            f"{sensitivity[0]:>12.3f}{sensitivity[1]:>11.3f}{released:>14.4f}"
        )
    print(
        f"LNMax / GNMax: whole first {lnmax[2][0] / gnmax[2][0]:.2f}x, "
        f"whole best {lnmax[2][1] / gnmax[2][1]:.2f}x, "
        f"local sensitivity best {lnmax[3][1] / gnmax[3][1]:.2f}x"
    )


if __name__ == "__main__":
    main()

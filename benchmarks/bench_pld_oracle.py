"""The independent privacy-profile oracle (tests/oracle/pld_oracle.py): its largest run.

    python benchmarks/bench_pld_oracle.py              # cold, then the best of 5
    python benchmarks/bench_pld_oracle.py --repeat 20

The largest run the oracle's tiny runs reach: k = 3 queries of Confident-GNMax (threshold 9,
sigma1 2, sigma 1.5) on C = 4 classes and M = 14 teachers, every one of its 13^3 neighbouring
runs a product distribution over 5^3 outcomes, both directions. Cold: the rows of each
histogram and neighbour integrated again (the oracle's cache cleared); warm: those rows
cached, the products and the epsilons only. tests/oracle/test_pld_oracle.py holds the
figure (test_largest_run); the property tests run many such runs, so their time follows
this one's. Prints a table; it is not a test.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from tests.oracle import pld_oracle as po  # noqa: E402

MECHANISM = po.ConfidentGNMax(threshold=9.0, sigma1=2.0, sigma=1.5)
HISTS = np.array([[10, 2, 1, 1], [5, 5, 2, 2], [4, 4, 3, 3]])
DELTA = 1e-5


def timed(cold: bool) -> tuple[float, float]:
    """Seconds of one run_epsilon of the largest run, and its epsilon."""
    if cold:
        po._query_rows.cache_clear()
    start = time.perf_counter()
    epsilon = po.run_epsilon(HISTS, MECHANISM, DELTA)
    return time.perf_counter() - start, epsilon


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()
    cold = [timed(cold=True) for _ in range(args.repeat)]
    warm = [timed(cold=False) for _ in range(args.repeat)]
    epsilon = cold[0][1]
    print(f"| run | cold s (best of {args.repeat}) | warm s (best of {args.repeat}) | epsilon |")
    print("|---|---|---|---|")
    print(
        f"| k = 3, C = 4, M = 14, Confident-GNMax | {min(t for t, _ in cold):.3f} | "
        f"{min(t for t, _ in warm):.3f} | {epsilon:.6f} |"
    )


if __name__ == "__main__":
    main()

"""Benchmark the smooth-sensitivity core against the reference's timings.

Times the whole GNSS parameter search that ``smooth_sensitivity_table.main()``
performs once the order is known: the data-independence shortcuts, the C5/C6
check, the expected local sensitivity summed over queries and the beta grid
search. Prints a table; it is not a test.

    python benchmarks/bench_smooth_sensitivity.py            # reference files + Glyph scale
    python benchmarks/bench_smooth_sensitivity.py --quick    # reference files only

The Glyph-scale votes (12000 queries, 5000 teachers, 150 classes) are drawn
reproducibly from a seeded Dirichlet-multinomial with varied consensus.
"""

from __future__ import annotations

import argparse
import json
import resource
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from numpy.typing import NDArray

from pate_cli.core.gnmax import logq_gnmax, rdp_gnmax
from pate_cli.core.smooth_sensitivity import (
    check_conditions,
    is_data_independent_always_opt_gnmax,
    is_data_independent_always_opt_threshold,
    local_sensitivity_total,
    optimal_gnss_parameters,
)
from pate_cli.core.threshold import log_pr_answered_threshold, rdp_threshold
from pate_cli.orders import DEFAULT_ORDERS

REFERENCE = Path(__file__).resolve().parents[1] / "tests" / "data" / "reference"


@dataclass
class Case:
    name: str
    votes: NDArray[np.float64]
    baseline: NDArray[np.float64] | None
    num_teachers: int
    threshold: float
    sigma1: float
    sigma2: float
    delta: float
    reference_s: float | None = None
    order: float | None = None


def glyph_scale_votes(
    num_queries: int = 12000, num_teachers: int = 5000, num_classes: int = 150, seed: int = 2018
) -> NDArray[np.int64]:
    """Dirichlet-multinomial votes with Zipf classes and varied consensus (seeded)."""
    rng = np.random.default_rng(seed)
    prior = 1.0 / np.arange(1, num_classes + 1) ** 1.1
    prior /= prior.sum()
    labels = rng.choice(num_classes, size=num_queries, p=prior)
    kind = rng.choice(4, size=num_queries, p=[0.55, 0.25, 0.15, 0.05])
    # easy, contested, ambiguous, mislabeled: the share of the plurality class.
    a = np.array([18.0, 6.0, 3.0, 2.0])[kind]
    b = np.array([2.0, 4.0, 5.0, 6.0])[kind]
    share = rng.beta(a, b)
    others = rng.dirichlet(np.full(num_classes, 0.08), size=num_queries) + 1e-12 * prior
    others[np.arange(num_queries), labels] = 0.0
    others /= others.sum(axis=1, keepdims=True)
    probs = (1 - share)[:, None] * others
    probs[np.arange(num_queries), labels] += share
    # Dirichlet-multinomial: teachers disagree beyond the per-query probabilities.
    probs = np.array([rng.dirichlet(200 * p + 1e-3) for p in probs])
    return rng.multinomial(num_teachers, probs)


def optimal_order(case: Case) -> float:
    """The data-dependent analysis's best order, as ``_compute_rdp`` chooses it."""
    orders = DEFAULT_ORDERS
    step1 = case.votes if case.baseline is None else case.votes - case.baseline
    log_pr = log_pr_answered_threshold(step1, case.threshold, case.sigma1)
    rdp = rdp_threshold(log_pr, case.sigma1, orders) + np.exp(log_pr)[:, None] * rdp_gnmax(
        logq_gnmax(case.votes, case.sigma2), case.sigma2, orders
    )
    eps = rdp.sum(axis=0) + np.log(1 / case.delta) / (orders - 1)
    return float(orders[int(np.argmin(eps))])


def run(case: Case) -> dict[str, float | str]:
    order = case.order if case.order is not None else optimal_order(case)
    step1 = case.votes if case.baseline is None else case.votes - case.baseline
    num_classes = case.votes.shape[1]
    rdp_at_order = 0.0  # the search's cost only shifts by this constant
    start = time.perf_counter()
    ind1 = is_data_independent_always_opt_threshold(
        case.num_teachers, case.threshold, case.sigma1, order
    )
    ind2 = is_data_independent_always_opt_gnmax(case.num_teachers, num_classes, case.sigma2, order)
    conditions = check_conditions(case.sigma2, num_classes, order)
    weights = np.exp(log_pr_answered_threshold(step1, case.threshold, case.sigma1))
    ls = local_sensitivity_total(
        case.votes,
        case.num_teachers,
        order,
        case.sigma2,
        threshold=case.threshold,
        sigma1=case.sigma1,
        step1_votes=step1,
        step2_weights=weights,
        data_independent_step1=ind1,
        data_independent_step2=ind2,
    )
    beta, ss, sigma_ss = optimal_gnss_parameters(ls, rdp_at_order, order)
    elapsed = time.perf_counter() - start
    ratio = f"{case.reference_s / elapsed:8.0f}x" if case.reference_s else "       -"
    return {
        "case": case.name,
        "shape": "x".join(map(str, case.votes.shape)) + f"x{case.num_teachers}",
        "order": f"{order:.2f}",
        "steps": f"{'ind' if ind1 else 'dep'}/{'ind' if ind2 else 'dep'}",
        "C5/C6": "/".join("T" if c else "F" for c in conditions),
        "time": f"{elapsed:8.3f}",
        "reference": f"{case.reference_s:8.2f}" if case.reference_s else "       -",
        "speed-up": ratio,
        "beta/ss": f"{beta:.4f}/{ss:.3g}/{sigma_ss:.1f}",
    }


def reference_case(stem: str) -> Case:
    data = json.loads((REFERENCE / f"{stem}.expected.json").read_text())
    (ss_case,) = [c for c in data["cases"] if c["kind"] == "smooth_sensitivity"]
    params, result = ss_case["params"], ss_case["result"]
    votes = np.load(REFERENCE / data["votes_file"]).astype(np.float64)
    baseline = np.load(REFERENCE / data["baseline_file"]) if params["baseline"] else None
    return Case(
        stem,
        votes,
        baseline,
        params["teachers"] or int(votes.sum(axis=1).max()),
        params["threshold"],
        params["sigma1"],
        params["sigma2"],
        params["delta"],
        reference_s=result["timing_s"],
        order=result["order"],
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="skip the Glyph-scale cases")
    args = parser.parse_args()
    cases = [
        reference_case(stem)
        for stem in (
            "mnist_like",
            "svhn_like",
            "adult_like",
            "glyph_like",
            "interactive_glyph_like",
        )
    ]
    if not args.quick:
        votes = glyph_scale_votes().astype(np.float64)
        cases.append(Case("glyph_scale T1000/500/100", votes, None, 5000, 1000, 500, 100, 1e-8))
        cases.append(Case("glyph_scale T3500/2000/200", votes, None, 5000, 3500, 2000, 200, 1e-8))
    rows = []
    for case in cases:
        rows.append(run(case))  # cold: the log q0 memo starts empty for each new (sigma, order)
    columns = list(rows[0])
    widths = {c: max(len(c), *(len(str(r[c])) for r in rows)) for c in columns}
    print("  ".join(c.ljust(widths[c]) for c in columns))
    for row in rows:
        print("  ".join(str(row[c]).ljust(widths[c]) for c in columns))
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(f"peak RSS of this process: {peak:.0f} MB (includes all inputs)", file=sys.stderr)


if __name__ == "__main__":
    main()

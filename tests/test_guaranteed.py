"""The exact threshold bound and the guaranteed figure, against the independent oracle
(exact outcome probabilities, Renyi divergences maximised over every neighbour)."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import pate_cli as pate
from pate_cli.core import gnmax, threshold
from tests.conftest import MNIST, REFERENCE, TABLE2, reference_json, reference_votes, run_cli
from tests.oracle import exact as oracle

ORDERS = np.array([1.1, 1.25, 1.5, 1.75, 2.0, 5.0, 14.0, 60.0])  # the default grid's low ones too


@settings(max_examples=60, deadline=None)
@given(
    hist=st.lists(st.integers(0, 12), min_size=2, max_size=4).filter(lambda h: sum(h) >= 2),
    threshold_value=st.floats(0, 14),
    sigma1=st.floats(0.3, 8),
    order_index=st.integers(0, ORDERS.size - 1),
)
def test_the_exact_threshold_bound_is_the_largest_divergence(
    hist, threshold_value, sigma1, order_index
):
    """Exactly the oracle's maximum over every neighbour where the top vote can move both
    ways, and never below it anywhere."""
    order = ORDERS[order_index]
    counts = np.array(hist, dtype=np.float64)
    margin = threshold.threshold_margins(counts[None, :], threshold_value, sigma1)
    mine = threshold.rdp_threshold_joint(margin, sigma1, np.array([order]))[0, 0]

    def outcomes(hists):
        return oracle.threshold_log_probs(hists, threshold_value, sigma1)

    truth, _ = oracle.max_over_neighbours(counts.astype(np.int64), outcomes, order)
    assert mine >= truth * (1 - 1e-9) - 1e-300
    # Where a neighbour can move the top vote down (the runner-up two below it) and up (a
    # vote outside the top class), both of the bound's neighbours exist: it is exact.
    ordered = np.sort(counts)[::-1]
    if ordered[0] - ordered[1] >= 2 and ordered[0] < counts.sum():
        assert mine == pytest.approx(truth, rel=1e-7, abs=1e-300)


@settings(max_examples=40, deadline=None)
@given(
    hist=st.lists(st.integers(0, 9), min_size=2, max_size=3).filter(lambda h: sum(h) >= 2),
    threshold_value=st.floats(0, 10),
    sigma1=st.floats(0.5, 6),
    sigma=st.floats(0.5, 6),
    order_index=st.integers(0, ORDERS.size - 1),
)
def test_the_guaranteed_bound_covers_the_joint_divergence(
    hist, threshold_value, sigma1, sigma, order_index
):
    """The joint (threshold outcome, label) distribution of Confident-GNMax, computed by the
    oracle for the votes and every neighbour: its largest divergence is below the chain-rule
    bound with Theorem 6's answer cost."""
    order = ORDERS[order_index]
    counts = np.array(hist, dtype=np.float64)

    def joint(hists):
        gate = oracle.threshold_log_probs(hists, threshold_value, sigma1)
        labels = oracle.gnmax_log_probs(hists, sigma)
        return np.concatenate([gate[:, 1:2], gate[:, :1] + labels], axis=1)

    truth, _ = oracle.max_over_neighbours(counts.astype(np.int64), joint, order)
    margin = threshold.threshold_margins(counts[None, :], threshold_value, sigma1)
    logq = gnmax.logq_gnmax(counts[None, :], sigma)
    answer = gnmax.rdp_gnmax(logq, sigma, np.array([order]))
    mine = threshold.rdp_threshold_joint(margin, sigma1, np.array([order]), answer)[0, 0]
    assert mine >= truth * (1 - 1e-9) - 1e-300


def _confident_cases() -> list[tuple[str, dict]]:
    """Every Confident/Interactive-GNMax case of the reference files."""
    found = []
    for path in sorted(REFERENCE.glob("*.expected.json")):
        data = reference_json(path.name)
        for case in data.get("cases", []):
            if case["kind"] in ("confident", "smooth_sensitivity"):
                found.append((path.name, case["params"]))
    return found


@pytest.mark.parametrize(("name", "params"), _confident_cases())
def test_guaranteed_is_never_below_the_data_dependent_figure(name, params):
    """Acceptance: on every reference case, guaranteed >= data_dependent."""
    data = reference_json(name)
    votes = pate.load_votes(
        reference_votes(name.removesuffix(".expected.json") + ".expected.json"),
        teachers=params.get("teachers"),
    )
    baseline = REFERENCE / data["baseline_file"] if params.get("baseline") else None
    kind = pate.InteractiveGNMax if baseline is not None else pate.ConfidentGNMax
    mechanism = kind(params["threshold"], params["sigma1"], params["sigma2"])
    report = pate.analyze(votes, mechanism, delta=params["delta"], baseline=baseline, release=False)
    assert report.guaranteed.epsilon >= report.data_dependent.epsilon


def test_guaranteed_equals_data_dependent_without_a_threshold():
    for flags in (["--sigma", 40], ["--gamma", 0.1]):
        args = ["analyze", MNIST, "--queries", 640, "--delta", 1e-5, "--no-release", *flags]
        out = run_cli([*args, "--json"]).json
        assert out["guaranteed"]["epsilon"] == out["data_dependent"]["epsilon"]
        assert out["guaranteed"]["rdp"] == out["data_dependent"]["rdp"]


def test_table_2_guaranteed_and_exact_threshold():
    args = ["analyze", MNIST, *TABLE2, "--no-release", "--json"]
    theorem6 = run_cli(args).json
    exact_bound = run_cli([*args, "--threshold-bound", "exact"]).json
    assert theorem6["guaranteed"]["epsilon"] == pytest.approx(2.0244342, abs=1e-6)
    assert theorem6["guaranteed"]["epsilon"] >= theorem6["data_dependent"]["epsilon"]
    assert exact_bound["mechanism"]["threshold_bound"] == "exact"
    assert exact_bound["data_dependent"]["epsilon"] < theorem6["data_dependent"]["epsilon"]
    gated = run_cli([*args, "--gate-on", "guaranteed", "--max-epsilon", 2.0], expect=1).json
    assert gated["gate"]["on"] == "guaranteed" and gated["gate"]["passed"] is False
    # The release follows the bound: its threshold table is of the exact cost.
    released = {
        bound: run_cli(
            ["smooth-sensitivity", *args[1:-2], "--threshold-bound", bound, "--json"]
        ).json["epsilon_expected_release"]
        for bound in ("theorem6", "exact")
    }
    assert released["exact"] < released["theorem6"]


@settings(max_examples=30, deadline=None)
@given(
    num_teachers=st.integers(2, 7),
    num_classes=st.integers(2, 3),
    threshold_value=st.floats(0, 8),
    sigma1=st.floats(0.3, 5),
    order=st.floats(1.1, 40),
)
def test_the_exact_threshold_sensitivity_covers_every_histogram(
    num_teachers, num_classes, threshold_value, sigma1, order
):
    """The release's table for --threshold-bound exact, against brute force: at distance d,
    the largest change of the published cost between neighbours among every histogram
    within d of the votes (all histograms of M votes enumerated)."""
    from pate_cli.core import ls_threshold as ss

    hists = oracle.histograms(num_teachers, num_classes)
    margins = threshold.threshold_margins(hists.astype(np.float64), threshold_value, sigma1)
    cost = threshold.rdp_threshold_joint(margins, sigma1, np.array([order]))[:, 0]
    index = {tuple(h): i for i, h in enumerate(hists)}
    change = np.zeros(len(hists))  # the largest change to a neighbour, per histogram
    for i, h in enumerate(hists):
        for other in oracle.neighbours(h):
            change[i] = max(change[i], abs(cost[i] - cost[index[tuple(other)]]))
    bounds = ss.local_sensitivity_threshold(
        hists, num_teachers, threshold_value, sigma1, order, strict=True, exact=True
    )
    for i, h in enumerate(hists):
        far = oracle.distance(hists, h)
        for d in range(num_teachers):
            truth = change[far <= d].max()
            assert bounds[i, d] >= truth * (1 - 1e-9) - 1e-15, (h, d)


@pytest.mark.parametrize(
    ("args", "words"),
    [
        (["analyze", MNIST, *TABLE2, "--threshold-bound", "x"], "--threshold-bound: 'x' is not"),
        (
            ["analyze", MNIST, "--sigma", 40, "--delta", 1e-5, "--threshold-bound", "exact"],
            "--threshold-bound exact: gnmax has no threshold step",
        ),
        (
            ["aggregate", MNIST, "--gamma", 0.1, "--delta", 1e-5, "--threshold-bound", "exact"],
            "--threshold-bound exact: lnmax has no threshold step",
        ),
        (
            ["compare", MNIST, "--sigma", "40,50", "--delta", 1e-5, "--threshold-bound", "exact"],
            "--threshold-bound exact: no setting has a threshold step",
        ),
    ],
)
def test_a_threshold_bound_without_a_threshold_step_is_refused(tmp_path, args, words):
    out = tmp_path / "labels.npy"
    if args[0] == "aggregate":
        args = [*args, "--output", out]
    result = run_cli(args, expect=2)
    (line,) = result.stderr.splitlines()
    assert line.startswith("pate: error: ") and words in line
    assert not out.exists()

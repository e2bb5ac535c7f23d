"""Tests for pate_cli.core.smooth_sensitivity.

Three kinds of truth (STYLE 2.7): the reference implementation's numbers
(tests/data/reference, tolerances from its README), properties, and a
straightforward per-query loop that follows Algorithms 3-5 literally.
"""

from __future__ import annotations

import json
import math
from functools import cache
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import scipy.stats
from numpy.typing import NDArray

from pate_cli.core import conditions as cond_core
from pate_cli.core import ls_cells, ls_threshold, ls_tilde, theorem6
from pate_cli.core import smooth as smooth_core
from pate_cli.core.gnmax import logq_gnmax, rdp_gnmax
from pate_cli.core.threshold import (
    log_pr_answered_threshold,
    logq_threshold,
    rdp_threshold,
    rdp_threshold_data_independent,
)
from tests.conftest import SAMPLE

REFERENCE = Path(__file__).resolve().parents[1] / "data" / "reference"
LS_TOL = {"rtol": 1e-6, "atol": 1e-12}  # reference README: LS arrays, ss, sigma_ss, ...
EXPECTED_FILES = sorted(p.name for p in REFERENCE.glob("*.expected.json") if "2017" not in p.name)
# The only reference case whose threshold step is data-dependent: there the strict
# threshold LS (filled and running maximum) exceeds the reference's by up to 0.33%.


@cache
def load(name: str) -> Any:
    return json.loads((REFERENCE / name).read_text())


def unit(section: str) -> list[dict[str, Any]]:
    return load("unit_vectors.json")[section]


def suite(section: str) -> list[dict[str, Any]]:
    return load("reference_test_suite.json")["smooth_sensitivity_test"][section]


def per_query_entries() -> list[Any]:
    out = []
    for name in EXPECTED_FILES:
        for query in load(name).get("per_query", []):
            for entry in query["local_sensitivity"]:
                out.append(
                    pytest.param(
                        query, entry, id=f"{name}-q{query['query_index']}-{entry['order']}"
                    )
                )
    return out


def smooth_sensitivity_cases() -> list[Any]:
    out = []
    for name in EXPECTED_FILES:
        for case in load(name)["cases"]:
            if case["kind"] == "smooth_sensitivity":
                out.append(pytest.param(name, case, id=name.removesuffix(".expected.json")))
    return out


# ---------------------------------------------------------------------------
# Reference values: scalar functions
# ---------------------------------------------------------------------------


@pytest.mark.parametrize("name", [n for n in EXPECTED_FILES if "logq0_logq1_table" in load(n)])
def test_logq0_logq1_table(name: str) -> None:
    # Source: the reference's compute_logq0_gnmax and _compute_logq1 (Brent: rtol 1e-8).
    for row in load(name)["logq0_logq1_table"]:
        orders = [row["order"]]
        np.testing.assert_allclose(
            theorem6.logq0_gnmax(row["sigma"], orders), [row["logq0"]], rtol=1e-8
        )
        np.testing.assert_allclose(
            theorem6.logq1_gnmax(row["sigma"], orders, row["num_classes"]),
            [row["logq1"]],
            rtol=1e-8,
        )


@pytest.mark.parametrize("row", unit("logq0_logq1"))
def test_unit_logq0_logq1_and_local_sensitivity_at_probe(row: dict[str, Any]) -> None:
    # Source: unit_vectors.json logq0_logq1 (reference _compute_local_sens_gnmax at a probe).
    sigma, order, num_classes = row["sigma"], row["order"], row["num_classes"]
    np.testing.assert_allclose(
        theorem6.logq0_gnmax(sigma, [order]), [row["logq0"]["value"]], rtol=1e-8
    )
    np.testing.assert_allclose(
        theorem6.logq1_gnmax(sigma, [order], num_classes), [row["logq1"]["value"]], rtol=1e-8
    )
    params = ls_tilde._GnmaxSensitivity.build(sigma, order, num_classes)
    value = ls_tilde._ls_tilde(np.array([row["probe_logq"]]), params)
    np.testing.assert_allclose(value, [row["local_sens_at_probe"]["value"]], **LS_TOL)


@pytest.mark.parametrize("row", unit("bl_bu_gnmax"))
def test_unit_bl_bu(row: dict[str, Any]) -> None:
    # Source: unit_vectors.json bl_bu_gnmax (Algorithm 3's B_L, B_U in linear space).
    logq = np.log([row["q"]])
    sigma, num_classes = row["sigma"], row["num_classes"]
    np.testing.assert_allclose(
        np.exp(theorem6.log_bl_gnmax(logq, sigma, num_classes)), [row["bl"]["value"]], rtol=1e-12
    )
    np.testing.assert_allclose(
        np.exp(theorem6.log_bu_gnmax(logq, sigma, num_classes)), [row["bu"]["value"]], rtol=1e-12
    )


@pytest.mark.parametrize("row", unit("rdp_of_smooth_sensitivity_gaussian"))
def test_unit_rdp_gnss(row: dict[str, Any]) -> None:
    # Source: unit_vectors.json rdp_of_smooth_sensitivity_gaussian (Theorem 23).
    if "error" in row:
        with pytest.raises(ValueError, match="range"):
            smooth_core.rdp_gnss(row["beta"], row["sigma"], row["order"])
    else:
        assert smooth_core.rdp_gnss(row["beta"], row["sigma"], row["order"]) == pytest.approx(
            row["value"], rel=1e-12
        )


@pytest.mark.parametrize("row", unit("is_data_independent_always_opt_gaussian"))
def test_unit_is_data_independent_gnmax(row: dict[str, Any]) -> None:
    got = cond_core.is_data_independent_always_opt_gnmax(
        row["num_teachers"], row["num_classes"], row["sigma"], row["order"]
    )
    assert got is row["value"]


@pytest.mark.parametrize("row", unit("is_data_independent_always_opt_threshold"))
def test_unit_is_data_independent_threshold(row: dict[str, Any]) -> None:
    got = cond_core.is_data_independent_always_opt_threshold(
        row["num_teachers"], row["threshold"], row["sigma1"], row["order"]
    )
    assert got is row["value"]


@pytest.mark.parametrize(
    ("sigma", "num_classes", "order", "expected"),
    [(r["sigma"], r["num_classes"], r["order"], r["value"]) for r in unit("check_conditions")]
    + [
        (r["sigma"], r["num_classes"], r["order"], r["reference_now"])
        for r in suite("check_conditions")
    ],
)
def test_check_conditions(
    sigma: float, num_classes: int, order: float, expected: list[bool]
) -> None:
    # Source: unit_vectors.json check_conditions and smooth_sensitivity_test.py
    # ((20, 10, 25) -> (True, False), (30, 10, 25) -> (True, True)).
    assert cond_core.check_conditions(sigma, num_classes, order) == tuple(expected)


@pytest.mark.parametrize(("sigma", "order"), [(1e-6, 2.0), (1e-150, 2.0), (1e150, 2.0)])
def test_check_conditions_outside_the_double_range_is_an_error_not_a_verdict(
    sigma: float, order: float
) -> None:
    # sigma 1e-6: q0 = exp(-1e12) underflows, so [0, q0] cannot be searched; sigma 1e+-150:
    # lambda / sigma^2 leaves the normal range. Neither is reported as holding or failing.
    with pytest.raises(theorem6.NumericalRangeError):
        cond_core.check_conditions(sigma, 10, order)


def test_data_independent_shortcut_compares_relatively() -> None:
    # lambda / sigma^2 = 5e-9 < np.isclose's default atol: the unanimous cost (~1e-275 or 0)
    # must still not be called "close" to it.
    assert not cond_core.is_data_independent_always_opt_gnmax(10**6, 3, 2e4, 2.0)
    assert cond_core.is_data_independent_always_opt_gnmax(250, 10, 1e3, 2.0)


# ---------------------------------------------------------------------------
# Reference values: local-sensitivity arrays
# ---------------------------------------------------------------------------


@pytest.mark.parametrize("row", suite("compute_local_sensitivity_bounds_gnmax"))
def test_suite_local_sensitivity_gnmax(row: dict[str, Any]) -> None:
    # Source: smooth_sensitivity_test.py, compared with reference_now at the test's rtol.
    got = ls_cells.local_sensitivity_gnmax(
        [row["counts"]], row["num_teachers"], row["sigma"], row["order"], reference=True
    )
    np.testing.assert_allclose(got[0], row["reference_now"], rtol=1e-8, atol=1e-300)


@pytest.mark.parametrize("row", suite("compute_local_sensitivity_bounds_threshold"))
def test_suite_local_sensitivity_threshold(row: dict[str, Any]) -> None:
    got = ls_threshold.local_sensitivity_threshold(
        [row["counts"]], row["num_teachers"], row["threshold"], row["sigma"], row["order"]
    )
    np.testing.assert_allclose(got[0], row["reference_now"], rtol=1e-8, atol=1e-300)
    # Every `expected` value of the upstream test is within 1e-7 of reference_now.
    np.testing.assert_allclose(got[0], row["expected"], rtol=1e-7)


@pytest.mark.parametrize("row", unit("local_sensitivity_small"))
def test_unit_local_sensitivity_small(row: dict[str, Any]) -> None:
    counts, num_teachers, order = [row["counts"]], row["num_teachers"], row["order"]
    got = ls_cells.local_sensitivity_gnmax(
        counts, num_teachers, row["sigma2"], order, reference=True
    )
    np.testing.assert_allclose(got[0], row["ls_gnmax"]["value"], **LS_TOL)
    got = ls_threshold.local_sensitivity_threshold(
        counts, num_teachers, row["threshold"], row["sigma1"], order
    )
    np.testing.assert_allclose(got[0], row["ls_threshold"]["value"], **LS_TOL)


@pytest.mark.parametrize(("query", "entry"), per_query_entries())
def test_per_query_local_sensitivity(query: dict[str, Any], entry: dict[str, Any]) -> None:
    # Source: per_query[*].local_sensitivity of every *.expected.json.
    votes = np.array([query["votes"]], dtype=np.float64)
    step1 = votes - np.array(query["baseline"]) if "baseline" in query else votes
    num_teachers = len(entry["ls_gnmax"])
    gnmax = ls_cells.local_sensitivity_gnmax(
        votes, num_teachers, entry["sigma2"], entry["order"], reference=True
    )
    np.testing.assert_allclose(gnmax[0], entry["ls_gnmax"], **LS_TOL)
    default = ls_threshold.local_sensitivity_threshold(
        step1, num_teachers, entry["threshold"], entry["sigma1"], entry["order"]
    )
    np.testing.assert_allclose(default[0], entry["ls_threshold"], **LS_TOL)
    strict = ls_threshold.local_sensitivity_threshold(
        step1, num_teachers, entry["threshold"], entry["sigma1"], entry["order"], strict=True
    )
    assert np.all(strict >= default)
    assert np.all(np.diff(strict[0]) >= 0)


# ---------------------------------------------------------------------------
# Reference values: the smooth-sensitivity release end to end
# ---------------------------------------------------------------------------


def case_votes(name: str, case: dict[str, Any]) -> NDArray[np.float64]:
    data = load(name)
    path = REFERENCE / data["votes_file"]
    if not path.exists():  # the paper's own votes live in sample_data/
        path = SAMPLE / data["votes_file"]
    votes = np.load(path).astype(np.float64)
    queries = case["params"].get("queries")
    return votes if queries is None else votes[:queries]


@pytest.mark.parametrize(("name", "case"), smooth_sensitivity_cases())
def test_smooth_sensitivity_case(name: str, case: dict[str, Any]) -> None:
    # Source: smooth_sensitivity_table.main() and, where it stopped on a condition,
    # the reference optimiser called directly (the "forced" numbers).
    votes = case_votes(name, case)
    params, result = case["params"], case["result"]
    baseline_file = load(name).get("baseline_file")
    step1 = votes - np.load(REFERENCE / baseline_file) if params["baseline"] else votes
    num_teachers = params["teachers"] or int(votes.sum(axis=1).max())
    order, sigma2 = result["order"], params["sigma2"]
    threshold, sigma1 = params["threshold"], params["sigma1"]

    ind1 = cond_core.is_data_independent_always_opt_threshold(
        num_teachers, threshold, sigma1, order
    )
    ind2 = cond_core.is_data_independent_always_opt_gnmax(
        num_teachers, votes.shape[1], sigma2, order
    )
    assert (ind1, ind2) == (result["ind_step1"], result["ind_step2"])
    if result["cond5"] is not None:
        assert cond_core.check_conditions(sigma2, votes.shape[1], order, reference=True) == (
            result["cond5"],
            result["cond6"],
        )
    weights = np.exp(log_pr_answered_threshold(step1, threshold, sigma1))
    assert weights.sum() == pytest.approx(result["answered_expected"], rel=1e-9)
    assert result["eps_before_ss"] == pytest.approx(
        result["rdp_at_order"] + math.log(1 / params["delta"]) / (order - 1), rel=1e-9
    )
    if "expected_local_sensitivity" not in result:
        assert ind1 and ind2  # main() stopped: nothing data-dependent to release
        return

    kwargs: dict[str, Any] = {
        "threshold": threshold,
        "sigma1": sigma1,
        "step1_votes": step1,
        "step2_weights": weights,
        "data_independent_step1": ind1,
        "data_independent_step2": ind2,
    }
    ls = smooth_core.local_sensitivity_total(
        votes, num_teachers, order, sigma2, reference=True, **kwargs
    )
    np.testing.assert_allclose(ls, result["expected_local_sensitivity"], **LS_TOL)

    beta, smooth, sigma_ss = smooth_core.optimal_gnss_parameters(ls, result["rdp_at_order"], order)
    assert beta == pytest.approx(result["beta_opt"], rel=1e-12)
    assert smooth == pytest.approx(result["ss_opt"], rel=1e-6)
    assert sigma_ss == pytest.approx(result["sigma_ss_opt"], rel=1e-6)
    assert smooth * sigma_ss == pytest.approx(result["noise_std"], rel=1e-6)
    assert smooth_core.smooth_sensitivity(ls, beta) == pytest.approx(smooth, rel=1e-12)
    release = smooth_core.rdp_gnss(beta, sigma_ss, order)
    assert release == pytest.approx(result["rdp_of_ss_release"], rel=1e-6)
    assert result["eps_before_ss"] + release == pytest.approx(result["eps_with_ss"], rel=1e-6)

    # The sound bounds (the default) never fall below the reference's on its own cases.
    del kwargs["step2_weights"]
    conditions = (
        cond_core.check_conditions(sigma2, votes.shape[1], order) if not ind2 else (True, True)
    )
    sound = smooth_core.local_sensitivity_total(
        votes, num_teachers, order, sigma2, increments_verified=all(conditions), **kwargs
    )
    assert np.all(sound >= ls * (1 - 1e-12))


# ---------------------------------------------------------------------------
# A literal per-query loop (Algorithms 3-5) as an oracle for the vectorised code
# ---------------------------------------------------------------------------


def naive_beta(logq: float, sigma: float, order: float, logq0: float) -> float:
    if logq >= logq0:
        return order / sigma**2  # Prop. 8
    mu2 = sigma * math.sqrt(-logq)  # Prop. 10 / Theorem 6
    mu1 = mu2 + 1
    eps1, eps2 = mu1 / sigma**2, mu2 / sigma**2
    log1q = math.log1p(-math.exp(logq))
    log_a = (order - 1) * (log1q - math.log1p(-math.exp((logq + eps2) * (1 - 1 / mu2))))
    log_b = (order - 1) * (eps1 - logq / (mu1 - 1))
    return float(np.logaddexp(log1q + log_a, logq + log_b)) / (order - 1)


def naive_ls_tilde(logq: float, sigma: float, num_classes: int, order: float) -> float:
    logq0 = float(theorem6.logq0_gnmax(sigma, [order])[0])
    logq1 = float(theorem6.logq1_gnmax(sigma, [order], num_classes)[0])
    if logq1 <= logq <= logq0:
        logq = logq1
    beta = naive_beta(logq, sigma, order, logq0)
    up = float(theorem6.log_bu_gnmax(np.array([logq]), sigma, num_classes)[0])
    low = float(theorem6.log_bl_gnmax(np.array([logq]), sigma, num_classes)[0])
    return max(
        naive_beta(up, sigma, order, logq0) - beta, beta - naive_beta(low, sigma, order, logq0)
    )


def naive_ls_gnmax(
    votes: list[int], num_teachers: int, sigma: float, order: float
) -> NDArray[np.float64]:
    num_classes = len(votes)
    logq0 = float(theorem6.logq0_gnmax(sigma, [order])[0])
    logq1 = float(theorem6.logq1_gnmax(sigma, [order], num_classes)[0])

    def logq_of(v: list[int]) -> float:
        return float(logq_gnmax(np.array([v], dtype=np.float64), sigma)[0])

    logq = logq_of(votes)
    out = np.full(num_teachers, naive_ls_tilde(logq1, sigma, num_classes, order))
    if logq1 <= logq <= logq0:
        return out
    v = sorted(votes, reverse=True)
    out[0] = naive_ls_tilde(logq, sigma, num_classes, order)
    go_left = logq > logq0
    d = 0
    while (go_left and logq > logq0 and v[1] > 0) or (not go_left and logq < logq1):
        d += 1
        if go_left:  # one vote from the largest non-leader to the leader
            v[0] += 1
            v[1] -= 1
            i = 1
            while i < num_classes - 1 and v[i] < v[i + 1]:
                v[i], v[i + 1] = v[i + 1], v[i]
                i += 1
        else:  # one vote from the leader to the runner-up
            v[0] -= 1
            v[1] += 1
        logq = logq_of(v)
        out[d] = naive_ls_tilde(logq, sigma, num_classes, order)
    return out


def naive_ls_threshold(
    top: float, num_teachers: int, threshold: float, sigma1: float, order: float, strict: bool
) -> NDArray[np.float64]:
    rdp = [
        float(
            rdp_threshold(
                logq_threshold(np.array([[float(h)]]), threshold, sigma1),
                sigma1,
                np.array([order]),
            )[0, 0]
        )
        for h in range(num_teachers + 1)
    ]

    def thresh_ls(h: int) -> float:
        steps = [abs(rdp[h + s] - rdp[h]) for s in (-1, 1) if 0 <= h + s <= num_teachers]
        return max(steps)

    m = int(round(top))
    out = np.zeros(num_teachers)
    last = num_teachers if strict else max(m, num_teachers - m)
    for d in range(min(last, num_teachers)):
        ends = [m + d, m - d]
        out[d] = max((thresh_ls(h) for h in ends if 0 <= h <= num_teachers), default=0.0)
        if strict and d:
            out[d] = max(out[d], out[d - 1])
    return out


def random_histograms(seed: int, count: int) -> list[tuple[list[int], int, float, float]]:
    rng = np.random.default_rng(seed)
    cases = []
    for _ in range(count):
        num_teachers = int(rng.integers(5, 60))
        num_classes = int(rng.integers(2, 7))
        concentration = rng.choice([0.2, 1.0, 5.0])
        probs = rng.dirichlet(np.full(num_classes, concentration))
        votes = rng.multinomial(num_teachers, probs).tolist()
        sigma = float(rng.choice([0.7, 2.0, 5.0, 15.0]))
        order = float(rng.choice([1.5, 4.0, 12.0, 30.0]))
        cases.append((votes, num_teachers, sigma, order))
    return cases


@pytest.mark.parametrize(("votes", "num_teachers", "sigma", "order"), random_histograms(7, 40))
def test_gnmax_matches_per_query_loop(
    votes: list[int], num_teachers: int, sigma: float, order: float
) -> None:
    got = ls_cells.local_sensitivity_gnmax([votes], num_teachers, sigma, order, reference=True)[0]
    np.testing.assert_allclose(
        got, naive_ls_gnmax(votes, num_teachers, sigma, order), rtol=1e-9, atol=1e-300
    )


@pytest.mark.parametrize(
    ("votes", "sigma", "order"),
    [
        # Long right walks over many classes: exercises the table shortcut and the tail pruning.
        ([1400, 300, 120, 80, 40, 20, 20, 10, 5, 5, 0, 0], 60.0, 20.0),
        ([1700, 250, 50] + [0] * 27, 200.0, 60.0),
        # Huge gaps with small sigma: head terms below exp(-1350) take the log-space path.
        ([1980, 10, 10, 5], 6.0, 5.0),
        # Contested rows: left walks with water filling over tied non-leaders.
        ([600, 590, 590, 220], 40.0, 10.0),
        ([700, 700, 300, 200, 100], 150.0, 50.0),
    ],
)
def test_gnmax_long_walks_match_per_query_loop(
    votes: list[int], sigma: float, order: float
) -> None:
    num_teachers = sum(votes)
    got = ls_cells.local_sensitivity_gnmax([votes], num_teachers, sigma, order, reference=True)[0]
    np.testing.assert_allclose(
        got, naive_ls_gnmax(votes, num_teachers, sigma, order), rtol=1e-9, atol=1e-300
    )


@pytest.mark.parametrize("strict", [False, True])
@pytest.mark.parametrize("seed", range(4))
def test_threshold_matches_per_query_loop(seed: int, strict: bool) -> None:
    rng = np.random.default_rng(100 + seed)
    num_teachers = int(rng.integers(3, 40))
    tops = rng.uniform(0, num_teachers, size=6)
    counts = np.column_stack([tops, rng.uniform(-5, 0, size=6)])
    threshold = float(rng.uniform(0, 1.2 * num_teachers))
    sigma1, order = float(rng.choice([1.0, 4.0, 20.0])), float(rng.choice([2.0, 10.0]))
    got = ls_threshold.local_sensitivity_threshold(
        counts, num_teachers, threshold, sigma1, order, strict=strict
    )
    # The strict bounds round each difference up by four ulps of the larger RDP value.
    largest = rdp_threshold_data_independent(sigma1, np.array([order]))[0]
    slack = 4 * np.finfo(np.float64).eps * largest if strict else 0.0
    for row, top in zip(got, tops, strict=True):
        expected = naive_ls_threshold(top, num_teachers, threshold, sigma1, order, strict)
        assert np.all(row >= expected)
        np.testing.assert_allclose(row, expected, rtol=1e-12, atol=slack)


def test_total_is_the_weighted_sum_of_per_query_arrays() -> None:
    rng = np.random.default_rng(3)
    num_teachers, num_classes = 80, 5
    probs = rng.dirichlet(np.full(num_classes, 0.5), size=30)
    votes = rng.multinomial(num_teachers, probs).astype(np.float64)
    votes = np.concatenate([votes, votes[:10, ::-1]])  # duplicates up to class order
    threshold, sigma1, sigma, order = 50.0, 15.0, 6.0, 8.0
    weights = rng.uniform(0, 1, size=votes.shape[0])
    weights[::7] = 0.0
    # Fixed weights (a realised mask, or the reference's Pr[answered] at the votes).
    for reference in (True, False):
        total = smooth_core.local_sensitivity_total(
            votes,
            num_teachers,
            order,
            sigma,
            threshold=threshold,
            sigma1=sigma1,
            step2_weights=weights,
            reference=reference,
        )
        step1 = ls_threshold.local_sensitivity_threshold(
            votes, num_teachers, threshold, sigma1, order, strict=not reference
        )
        step2 = ls_cells.local_sensitivity_gnmax(
            votes, num_teachers, sigma, order, reference=reference
        )
        np.testing.assert_allclose(
            total, (step1 + weights[:, None] * step2).sum(axis=0), rtol=1e-12
        )
    plain = smooth_core.local_sensitivity_total(votes, num_teachers, order, sigma)
    np.testing.assert_allclose(plain, step2.sum(axis=0), rtol=1e-12)
    only_step1 = smooth_core.local_sensitivity_total(
        votes,
        num_teachers,
        order,
        sigma,
        threshold=threshold,
        sigma1=sigma1,
        data_independent_step2=True,
        reference=True,
    )
    np.testing.assert_allclose(
        only_step1,
        ls_threshold.local_sensitivity_threshold(votes, num_teachers, threshold, sigma1, order).sum(
            axis=0
        ),
        rtol=1e-12,
    )


# ---------------------------------------------------------------------------
# Properties and edge cases
# ---------------------------------------------------------------------------


@pytest.mark.parametrize("seed", range(3))
def test_strict_threshold_is_at_least_default_and_non_decreasing(seed: int) -> None:
    rng = np.random.default_rng(seed)
    num_teachers = 250
    counts = rng.integers(0, num_teachers + 1, size=(50, 1)).astype(np.float64)
    args = (counts, num_teachers, 200.0, 40.0, 20.0)
    default = ls_threshold.local_sensitivity_threshold(*args)
    strict = ls_threshold.local_sensitivity_threshold(*args, strict=True)
    assert np.all(strict >= default)
    assert np.all(np.diff(strict, axis=1) >= 0)


def test_smooth_sensitivity_is_non_increasing_in_beta() -> None:
    ls = load("mnist_like.expected.json")["cases"][4]["result"]["expected_local_sensitivity"]
    values = [smooth_core.smooth_sensitivity(ls, beta) for beta in np.linspace(0, 0.5, 26)]
    assert np.all(np.diff(values) <= 0)
    assert values[0] == max(ls)


def test_optimal_parameters_with_zero_sensitivity_have_no_nan() -> None:
    beta, smooth, sigma_ss = smooth_core.optimal_gnss_parameters(np.zeros(10), 0.5, 20.0)
    assert beta == pytest.approx(0.3 / 20)
    assert smooth == 0.0
    assert sigma_ss == math.inf
    assert smooth_core.rdp_gnss(beta, sigma_ss, 20.0) > 0


def test_single_class_has_zero_gnmax_sensitivity() -> None:
    np.testing.assert_array_equal(ls_cells.local_sensitivity_gnmax([[7], [3]], 7, 2.0, 5.0), 0.0)


def test_local_sensitivity_gnmax_is_order_invariant_within_a_row() -> None:
    votes = np.array([[30, 5, 10, 5], [5, 10, 5, 30]])
    got = ls_cells.local_sensitivity_gnmax(votes, 50, 3.0, 6.0)
    np.testing.assert_array_equal(got[0], got[1])


@pytest.mark.parametrize(
    ("call", "match"),
    [
        (lambda: smooth_core.rdp_gnss(0.1, 10.0, 6.0), "range"),
        (lambda: smooth_core.rdp_gnss(0.01, 10.0, 1.0), "order"),
        (lambda: smooth_core.rdp_gnss(-0.1, 10.0, 2.0), "beta"),
        (lambda: theorem6.logq0_gnmax(0.0, [2.0]), "sigma"),
        (lambda: theorem6.logq0_gnmax(10.0, [1.0]), "order"),
        (lambda: theorem6.logq1_gnmax(10.0, [2.0], 1), "num_classes"),
        (lambda: ls_cells.local_sensitivity_gnmax([[1.5, 2.5]], 4, 1.0, 2.0), "integer"),
        (lambda: ls_cells.local_sensitivity_gnmax([[-1, 5]], 4, 1.0, 2.0), "integer"),
        (lambda: ls_cells.local_sensitivity_gnmax([1, 2], 3, 1.0, 2.0), "shape"),
        (lambda: ls_cells.local_sensitivity_gnmax([[1, 2]], 0, 1.0, 2.0), "num_teachers"),
        (
            lambda: ls_threshold.local_sensitivity_threshold([[9, 1]], 5, 3.0, 1.0, 2.0),
            r"round\(max",
        ),
        (
            lambda: smooth_core.local_sensitivity_total([[1, 2]], 3, 2.0, 1.0, threshold=2.0),
            "sigma1",
        ),
        (
            lambda: smooth_core.local_sensitivity_total(
                [[1, 2]], 3, 2.0, 1.0, step2_weights=[1.0, 1.0]
            ),
            "step2_weights",
        ),
        (lambda: smooth_core.smooth_sensitivity([], 0.1), "non-empty"),
        (lambda: smooth_core.optimal_gnss_parameters([np.nan], 0.1, 2.0), "non-negative"),
        (lambda: cond_core.check_conditions(10.0, 1, 5.0), "num_classes"),
    ],
)
def test_contract_violations_raise_value_error(call: Any, match: str) -> None:
    with pytest.raises(ValueError, match=match):
        call()


# ---------------------------------------------------------------------------
# The sound analysis: its pieces against direct computations
# ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("sigma", "order", "num_classes"),
    [(0.8647, 2.0, 3), (1.0, 2.0, 4), (0.6627539642921852, 1.634, 2), (40.0, 14.0, 10)],
)
def test_sound_logq0_is_where_the_published_bound_reaches_prop8(
    sigma: float, order: float, num_classes: int
) -> None:
    # Below log q0 rdp_gnmax is under lambda / sigma^2; a hair above it, it has reached it.
    logq0 = theorem6._logq0_sound(sigma, order, num_classes)
    independent = order / sigma**2
    at = rdp_gnmax(np.array([logq0, logq0 * (1 - 1e-9)]), sigma, np.array([order]))[:, 0]
    assert at[0] < independent
    assert at[1] == pytest.approx(independent, rel=1e-12)


def test_sound_logq0_can_lie_past_the_reference_bracket() -> None:
    # sigma 0.8647, order 2: the reference's q0 is its bracket end -(1 + 1/sigma)^2, where
    # Theorem 6 is still below lambda / sigma^2; the published bound keeps rising past it.
    reference = theorem6._logq0_scalar(0.8647, 2.0)
    assert reference == pytest.approx(-((1 + 1 / 0.8647) ** 2), rel=1e-12)
    assert theorem6._logq0_sound(0.8647, 2.0, 3) > reference + 1


@pytest.mark.parametrize("seed", range(5))
def test_change_window_is_the_maximum_over_the_window(seed: int) -> None:
    rng = np.random.default_rng(seed)
    num_teachers = int(rng.integers(1, 60))
    threshold, sigma1 = float(rng.uniform(-5, num_teachers + 5)), float(rng.uniform(0.3, 20))
    pr, change = ls_threshold._pr_answered_table(num_teachers, threshold, sigma1)
    exact = np.diff(scipy.stats.norm.cdf((np.arange(num_teachers + 1) - threshold) / sigma1))
    assert np.all(change >= np.abs(exact)) and np.all(change <= np.abs(exact) + 1e-15)
    near = np.zeros(num_teachers + 1)
    near[:-1] = change
    near[1:] = np.maximum(near[1:], change)
    window = ls_threshold._ChangeWindow.build(change)
    for top in range(num_teachers + 1):
        for d in range(num_teachers):
            expected = near[max(top - d, 0) : min(top + d, num_teachers) + 1].max()
            assert window.at(np.array(top), np.array(d)) == expected


def test_pr_answered_weight_makes_the_answer_step_sensitive_when_data_independent() -> None:
    # Row (10, 2, 3, 3) of the soundness report: the answer step is data-independent at
    # order 1.712, yet its expected cost Pr[answered] lambda / sigma^2 moves with the votes.
    # The true smooth sensitivity (all 4-class histograms of 18 votes) is 2.200e-3.
    args = {"threshold": 12.222150299716327, "sigma1": 5.975880119984785}
    sigma, order, beta = 7.055760832106127, 1.712, 0.17683829846944138
    assert cond_core.is_data_independent_always_opt_gnmax(18, 4, sigma, order)
    ls = smooth_core.local_sensitivity_total(
        [[10, 2, 3, 3]], 18, order, sigma, data_independent_step2=True, **args
    )
    assert smooth_core.smooth_sensitivity(ls, beta) >= 2.200e-3
    reference = smooth_core.local_sensitivity_total(
        [[10, 2, 3, 3]], 18, order, sigma, data_independent_step2=True, reference=True, **args
    )
    assert smooth_core.smooth_sensitivity(reference, beta) < 2e-4  # 17x under the truth


def test_distinct_rows_survive_hash_collisions(monkeypatch):
    """The rows are grouped by a hash and checked; with every row colliding (multipliers
    of 1 hash a row to its sum) the exact grouping takes over, and so do equal bounds."""
    import pate_cli.core.ls_gnmax as ss

    rng = np.random.default_rng(5)
    votes = rng.multinomial(30, [0.5, 0.3, 0.15, 0.05], size=300)
    unique, inverse = ss._canonical_rows(votes)
    ordered = -np.sort(-votes, axis=1)
    assert np.array_equal(unique[inverse], ordered)
    assert len(unique) == len(np.unique(ordered, axis=0))
    expected = ls_cells.local_sensitivity_gnmax(votes, 30, 1.5, 8.0)
    monkeypatch.setattr(ss, "_HASH_MULTIPLIERS", np.ones(4096, dtype=np.uint64))
    collided, back = ss._canonical_rows(votes)
    assert np.array_equal(collided[back], ordered) and len(collided) == len(unique)
    assert np.array_equal(ls_cells.local_sensitivity_gnmax(votes, 30, 1.5, 8.0), expected)

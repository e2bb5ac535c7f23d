"""GNMax core: reference values of the 2018 code, properties, and a per-query oracle."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy.stats import norm

from pate_cli.core.gnmax import logq_gnmax, rdp_gnmax, rdp_gnmax_data_independent
from pate_cli.orders import DEFAULT_ORDERS
from tests.conftest import as_float, reference_json

UNIT = reference_json("unit_vectors.json")
SUBSET = np.array(UNIT["orders_subset"])


@pytest.mark.parametrize("case", UNIT["compute_logq_gaussian"], ids=lambda c: str(c["counts"]))
def test_logq_and_rdp_match_reference_unit_vectors(case):
    counts = np.array([case["counts"]], dtype=float)
    logq = logq_gnmax(counts, case["sigma"])
    np.testing.assert_allclose(logq, [case["logq"]], rtol=1e-12)
    rdp = rdp_gnmax(logq, case["sigma"], SUBSET)[0]
    np.testing.assert_allclose(
        rdp, as_float(case["rdp_gaussian_subset"]["value"]), rtol=1e-9, atol=1e-300
    )


@pytest.mark.parametrize(
    "case", UNIT["rdp_gaussian"], ids=lambda c: f"{c['logq']}-{c['sigma']}-{c['order']}"
)
def test_rdp_gnmax_scalar_cases(case):
    logq, sigma, order = float(case["logq"]), case["sigma"], case["order"]
    if "error" in case:
        with pytest.raises(ValueError):
            rdp_gnmax(np.array([logq]), sigma, np.array([order], dtype=float))
        return
    value = rdp_gnmax(np.array([logq]), sigma, np.array([order], dtype=float))[0, 0]
    assert value == pytest.approx(case["value"], rel=1e-9, abs=1e-300)


def test_reference_unit_test_q_dependence():
    """core_test.py: strictly decreasing below q0, constant (data-independent) above it."""
    rows = reference_json("reference_test_suite.json")["core_test"][
        "rdp_gaussian_as_function_of_q"
    ]["rows"]
    checked = 0
    for row in rows:
        orders = np.array([row["order"]])
        if "data_dependent_logq" not in row:  # rows where the reference test has no q grid
            continue
        checked += 1
        dependent = rdp_gnmax(np.array(row["data_dependent_logq"]), row["sigma"], orders)[:, 0]
        np.testing.assert_allclose(dependent, row["data_dependent_rdp"], rtol=1e-9)
        assert np.all(np.diff(dependent) < 0)
        logq_above = np.log(np.array(row["data_independent_q"]))
        flat = rdp_gnmax(logq_above, row["sigma"], orders)[:, 0]
        assert np.all(flat == row["rdp_at_q0"])
    assert checked >= 8


def test_value_errors_of_reference_tests():
    for case in reference_json("reference_test_suite.json")["core_test"][
        "rdp_gaussian_value_errors"
    ]:
        with pytest.raises(ValueError):
            rdp_gnmax(
                np.array([case["logq"]]), case["sigma"], np.array(case["orders"], dtype=float)
            )


def _logq_loop(counts: np.ndarray, sigma: float) -> np.ndarray:
    """Prop. 7 written one query at a time, as a naive oracle."""
    out = []
    for row in counts:
        top = int(np.argmax(row))
        tails = [
            norm.sf(row[top] - row[j], scale=math.sqrt(2) * sigma)
            for j in range(len(row))
            if j != top
        ]
        q = sum(tails)
        out.append(min(math.log(q) if q > 0 else -math.inf, math.log(1 - 1 / len(row))))
    return np.array(out)


def test_vectorised_logq_equals_per_query_loop():
    rng = np.random.default_rng(7)
    counts = rng.multinomial(250, rng.dirichlet(np.ones(10) * 0.3, size=200)).astype(float)
    np.testing.assert_allclose(logq_gnmax(counts, 40.0), _logq_loop(counts, 40.0), rtol=1e-9)


def test_rdp_properties_on_real_votes(mnist_counts):
    logq = logq_gnmax(mnist_counts[:500], 40.0)
    rdp = rdp_gnmax(logq, 40.0, DEFAULT_ORDERS)
    independent = rdp_gnmax_data_independent(40.0, DEFAULT_ORDERS)
    assert np.all(rdp >= 0)
    assert np.all(rdp <= independent)
    # More noise never costs more in the data-independent bound. (The data-dependent
    # total is not monotone in sigma: on these votes epsilon at sigma 50 exceeds sigma 40.)
    assert np.all(rdp_gnmax_data_independent(50.0, DEFAULT_ORDERS) < independent)


def test_unanimous_and_single_class_limits():
    counts = np.array([[250.0, 0, 0, 0], [250.0, 0, 0, 0]])
    logq = logq_gnmax(counts, 1.0)
    assert np.all(logq < -1e4)  # a huge gap: q vanishes
    np.testing.assert_array_equal(rdp_gnmax(np.array([-np.inf]), 1.0, DEFAULT_ORDERS), 0.0)
    assert logq_gnmax(np.array([[5.0]]), 1.0)[0] == -np.inf


def test_cap_at_one_minus_one_over_classes():
    counts = np.full((1, 4), 10.0)  # a four-way tie: the union bound exceeds 1
    assert logq_gnmax(counts, 40.0)[0] == pytest.approx(math.log(0.75))


@pytest.mark.parametrize(
    ("teachers", "classes", "sigma"),
    [(250, 10, 40.0), (5000, 150, 100.0), (250, 10, 0.5), (250, 10, 1e-3), (10**6, 3, 1.0)],
)
def test_integer_gap_table_equals_log_space_union_bound(teachers, classes, sigma):
    """The tabulated linear-space sum agrees with the log-space one, including underflow."""
    from pate_cli.core.gnmax import _logq_log_space

    rng = np.random.default_rng(11)
    counts = rng.multinomial(teachers, rng.dirichlet(np.full(classes, 0.3), size=3000)).astype(
        float
    )
    rows, top = np.arange(len(counts)), counts.argmax(axis=1)
    expected = np.minimum(
        _logq_log_space(counts[rows, top][:, None] - counts, rows, top, sigma),
        np.log(1 - 1 / classes),
    )
    got = logq_gnmax(counts, sigma)
    np.testing.assert_array_equal(np.isneginf(got), np.isneginf(expected))
    finite = np.isfinite(expected)
    np.testing.assert_allclose(got[finite], expected[finite], rtol=1e-14, atol=1e-14)
    half = counts.copy()
    half[:, 0] += 0.5  # not integers: the log-space path, which must give the same bound
    shifted = np.minimum(
        _logq_log_space(half[rows, half.argmax(1)][:, None] - half, rows, half.argmax(1), sigma),
        np.log(1 - 1 / classes),
    )
    np.testing.assert_array_equal(logq_gnmax(half, sigma), shifted)


def test_rdp_matrix_equals_each_query_and_order_alone():
    # Rows are evaluated in groups on the orders below their mu1 (Prop. 10), orders in any
    # sequence: every entry must be what that query alone at that order gives.
    rng = np.random.default_rng(7)
    logq = np.concatenate([-(10 ** rng.uniform(-4, 3, 60)), [0.0, -np.inf, -1e-300, -700.0, -2.5]])
    orders = rng.permutation(np.concatenate([DEFAULT_ORDERS[::7], [1.5, 1000.0, 3.25]]))
    for sigma in (0.5, 3.0, 40.0, 1e9):
        matrix = rdp_gnmax(logq, sigma, orders)
        alone = np.array(
            [[rdp_gnmax(np.array([q]), sigma, np.array([o]))[0, 0] for o in orders] for q in logq]
        )
        np.testing.assert_array_equal(matrix, alone)

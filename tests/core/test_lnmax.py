"""LNMax core: 2018 reference unit vectors and the 2017 paper's numbers."""

from __future__ import annotations

import numpy as np
import pytest

from pate_cli.core.conversion import best_order, eps_curve_classic
from pate_cli.core.lnmax import logq_lnmax, rdp_lnmax, rdp_lnmax_data_independent
from pate_cli.orders import DEFAULT_ORDERS
from tests.conftest import MNIST, MNIST_INDICES, as_float, reference_json

UNIT = reference_json("unit_vectors.json")
SUBSET = np.array(UNIT["orders_subset"])


@pytest.mark.parametrize("case", UNIT["lnmax"], ids=lambda c: f"{c['counts']}-{c['lambda']}")
def test_lnmax_matches_reference(case):
    gamma = 1 / case["lambda"]
    logq = logq_lnmax(np.array([case["counts"]], dtype=float), gamma)
    assert logq[0] == pytest.approx(case["logq"], rel=1e-12)
    rdp = rdp_lnmax(logq, gamma, SUBSET)[0]
    np.testing.assert_allclose(rdp, as_float(case["rdp_pure_eps_subset"]["value"]), rtol=1e-9)


def test_data_independent_is_pure_eps_bound():
    eps = 0.2
    np.testing.assert_allclose(
        rdp_lnmax_data_independent(0.1, DEFAULT_ORDERS),
        np.minimum(eps**2 * DEFAULT_ORDERS / 2, eps),
    )
    # q = 1 (log q = 0) is where the data-dependent bound gives nothing.
    np.testing.assert_array_equal(
        rdp_lnmax(np.array([0.0]), 0.1, DEFAULT_ORDERS)[0],
        rdp_lnmax_data_independent(0.1, DEFAULT_ORDERS),
    )


@pytest.mark.parametrize(
    "run",
    reference_json("paper_mnist_250_teachers.expected.json")["runs_2017"],
    ids=lambda r: r["id"],
)
def test_2017_moments_accountant_on_real_mnist(run):
    """The 2017 moment l is the order l + 1 with log-mgf l * RDP(l + 1)."""
    params, result = run["params"], run["result"]
    counts = np.load(MNIST)[np.load(MNIST_INDICES)]
    orders = np.arange(2.0, params["moments"] + 2)
    rdp = rdp_lnmax(logq_lnmax(counts, params["noise_eps"]), params["noise_eps"], orders).sum(
        axis=0
    )
    np.testing.assert_allclose(rdp * (orders - 1), result["total_log_mgf_per_moment"], rtol=1e-9)
    eps = eps_curve_classic(orders, rdp, params["delta"])
    np.testing.assert_allclose(eps, result["eps_per_moment"], rtol=1e-9)
    assert eps[best_order(eps)] == pytest.approx(result["eps"], rel=1e-9)
    assert orders[best_order(eps)] - 1 == result["moment_opt"]

"""Property-based tests of the accounting over random vote matrices and parameters."""

from __future__ import annotations

import numpy as np
from hypothesis import given
from hypothesis import strategies as st

from pate_cli.accountant.compose import account
from pate_cli.accountant.figures import epsilon_result
from pate_cli.choices import Conversion
from pate_cli.core import gnmax, lnmax, threshold
from pate_cli.mechanisms import ConfidentGNMax, GNMax, InteractiveGNMax, LNMax
from pate_cli.orders import DEFAULT_ORDERS

ORDERS = DEFAULT_ORDERS[::7]  # every 7th default order keeps examples fast


@st.composite
def votes(draw, max_queries: int = 12):
    """Integer vote histograms (Q, C) with a common row sum M, from a drawn seed and shape."""
    num_queries = draw(st.integers(1, max_queries))
    num_classes = draw(st.integers(1, 12))
    num_teachers = draw(st.integers(1, 6000))
    concentration = draw(st.sampled_from([0.05, 0.3, 1.0, 10.0]))
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
    probs = rng.dirichlet(np.full(num_classes, concentration), size=num_queries)
    return rng.multinomial(num_teachers, probs).astype(np.float64)


sigmas = st.floats(0.05, 5000.0)
gammas = st.floats(1e-4, 50.0)
thresholds = st.floats(-100.0, 7000.0)
deltas = st.floats(1e-300, 0.5)


@st.composite
def mechanisms(draw):
    kind = draw(st.sampled_from(["gnmax", "confident", "lnmax"]))
    if kind == "gnmax":
        return GNMax(draw(sigmas))
    if kind == "lnmax":
        return LNMax(draw(gammas))
    return ConfidentGNMax(draw(thresholds), draw(sigmas), draw(sigmas))


def _finite_non_negative(values: np.ndarray) -> bool:
    return bool(np.all(np.isfinite(values)) and np.all(values >= 0))


@given(votes(), mechanisms(), deltas)
def test_data_dependent_never_above_data_independent_and_never_nan(counts, mechanism, delta):
    result = account(counts, mechanism, ORDERS)
    assert _finite_non_negative(result.data_dependent)
    assert np.all(result.data_dependent <= result.data_independent)
    # Every query answered bounds the expectation over the threshold step's noise.
    assert np.all(result.data_independent <= result.worst_case * (1 + 1e-12))
    for kind in Conversion:
        dependent = epsilon_result(ORDERS, result.data_dependent, delta, kind)
        independent = epsilon_result(ORDERS, result.data_independent, delta, kind)
        assert _finite_non_negative(dependent.eps) and _finite_non_negative(independent.eps)
        assert dependent.epsilon <= independent.epsilon


@given(votes(), mechanisms(), deltas, deltas)
def test_epsilon_non_increasing_in_delta(counts, mechanism, delta_a, delta_b):
    small, large = sorted((delta_a, delta_b))
    rdp = account(counts, mechanism, ORDERS).data_dependent
    for kind in Conversion:
        assert (
            epsilon_result(ORDERS, rdp, large, kind).epsilon
            <= epsilon_result(ORDERS, rdp, small, kind).epsilon
        )


@given(votes(), mechanisms(), deltas)
def test_improved_conversion_never_above_classic(counts, mechanism, delta):
    rdp = account(counts, mechanism, ORDERS).data_dependent
    improved = epsilon_result(ORDERS, rdp, delta, Conversion.IMPROVED).epsilon
    assert improved <= epsilon_result(ORDERS, rdp, delta, Conversion.CLASSIC).epsilon


@given(votes(), sigmas, sigmas, deltas)
def test_data_independent_epsilon_non_increasing_in_sigma(counts, sigma_a, sigma_b, delta):
    # The data-dependent epsilon is not monotone in sigma (less noise can make confident
    # queries cheaper); the data-independent bound is.
    low, high = sorted((sigma_a, sigma_b))
    eps = [
        epsilon_result(
            ORDERS, account(counts, GNMax(s), ORDERS).data_independent, delta, Conversion.CLASSIC
        ).epsilon
        for s in (low, high)
    ]
    assert eps[1] <= eps[0]


def _per_query_loop(counts, mechanism, orders, baseline=None):
    """The shape of the reference: one query at a time, costs added in order."""
    total, answered = np.zeros(orders.size), 0.0
    for i in range(counts.shape[0]):
        row = counts[i : i + 1]
        weight = 1.0
        if isinstance(mechanism, ConfidentGNMax):
            step1 = row if baseline is None else row - baseline[i : i + 1]
            log_pr = threshold.log_pr_answered_threshold(
                step1, mechanism.threshold, mechanism.sigma1
            )
            logq_step1 = threshold.logq_threshold(step1, mechanism.threshold, mechanism.sigma1)
            total += threshold.rdp_threshold(logq_step1, mechanism.sigma1, orders)[0]
            weight = float(np.exp(log_pr[0]))
        answered += weight
        if isinstance(mechanism, LNMax):
            logq = lnmax.logq_lnmax(row, mechanism.gamma)
            total += weight * lnmax.rdp_lnmax(logq, mechanism.gamma, orders)[0]
        else:
            logq = gnmax.logq_gnmax(row, mechanism.sigma)
            total += weight * gnmax.rdp_gnmax(logq, mechanism.sigma, orders)[0]
    return total, answered


@given(votes(max_queries=30), mechanisms(), st.integers(1, 7))
def test_vectorised_accounting_equals_per_query_loop(counts, mechanism, chunk_size):
    result = account(counts, mechanism, ORDERS, chunk_size=chunk_size)
    total, answered = _per_query_loop(counts, mechanism, ORDERS)
    np.testing.assert_allclose(result.data_dependent, total, rtol=1e-12, atol=1e-300)
    assert np.isclose(result.expected_answered, answered, rtol=1e-12)


@given(votes(), sigmas, sigmas, thresholds, st.integers(0, 2**32 - 1))
def test_interactive_equals_per_query_loop(counts, sigma1, sigma, t, seed):
    num_teachers = counts[0].sum()
    rng = np.random.default_rng(seed)
    baseline = num_teachers * rng.dirichlet(np.ones(counts.shape[1]), size=counts.shape[0])
    mechanism = InteractiveGNMax(t, sigma1, sigma)
    result = account(counts, mechanism, ORDERS, baseline=baseline)
    total, answered = _per_query_loop(counts, mechanism, ORDERS, baseline)
    np.testing.assert_allclose(result.data_dependent, total, rtol=1e-12, atol=1e-300)
    assert np.all(result.data_dependent <= result.data_independent)


@given(votes(), mechanisms(), st.integers(0, 2**32 - 1))
def test_realised_mask_of_all_true_equals_plain_gnmax_cost(counts, mechanism, seed):
    mask = np.random.default_rng(seed).random(counts.shape[0]) < 0.5
    realised = account(counts, mechanism, ORDERS, answered=mask)
    assert realised.expected_answered == mask.sum()
    assert _finite_non_negative(realised.data_dependent)
    assert np.all(realised.data_dependent <= realised.data_independent)
    everything = account(counts, mechanism, ORDERS, answered=np.ones(counts.shape[0], bool))
    # A subset of the answers costs no more, up to the rounding of sums of either size.
    slack = 1e-12 * np.maximum(1.0, np.abs(everything.data_dependent))
    assert np.all(realised.data_dependent <= everything.data_dependent + slack)

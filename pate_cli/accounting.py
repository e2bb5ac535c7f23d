"""Compose the per-query costs of a mechanism into RDP totals, and convert them.

Expected accounting (the 2018 reference's ``_compute_rdp``): for
Confident/Interactive-GNMax every query pays the threshold step and pays the
GNMax step weighted by Pr[answered]. Realised accounting (``answered``, a
boolean mask from ``pate aggregate``) pays the threshold step on every query
seen and the GNMax step only where the mask is true. A mask shorter than the
votes means the run stopped early: only its prefix was seen.

A query's data-dependent cost depends on the votes only through one scalar
(log q for GNMax and LNMax, log Pr[answered] for the threshold step), so
equal scalars are evaluated once and weighted by how often they occur.
Votes are consumed in chunks of queries, so memory depends on the chunk size
and not on the number of queries.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from enum import Enum
from functools import partial

import numpy as np
from numpy.typing import NDArray

from pate_cli.core import conversion, gnmax, lnmax, threshold
from pate_cli.mechanisms import ConfidentGNMax, GNMax, LNMax, Mechanism, assert_never

DEFAULT_CHUNK_SIZE = 1 << 16

FloatArray = NDArray[np.float64]


class Conversion(str, Enum):
    """RDP to (epsilon, delta) conversions; see ``pate_cli.core.conversion``."""

    CLASSIC = "classic"
    IMPROVED = "improved"


def eps_curve(kind: Conversion, orders: FloatArray, rdp: FloatArray, delta: float) -> FloatArray:
    """Epsilon per order under the chosen conversion."""
    if kind is Conversion.CLASSIC:
        return conversion.eps_curve_classic(orders, rdp, delta)
    if kind is Conversion.IMPROVED:
        return conversion.eps_curve_improved(orders, rdp, delta)
    assert_never(kind)


@dataclass(frozen=True)
class EpsilonResult:
    """An RDP curve and the (epsilon, delta) guarantee at its best order."""

    epsilon: float
    """Smallest epsilon over the orders."""
    order: float
    """The order that attains it (the first, on ties)."""
    order_index: int
    """Its index in the order list."""
    rdp: FloatArray
    """Total RDP per order, shape (K,)."""
    eps: FloatArray
    """Epsilon per order, shape (K,)."""
    at_grid_edge: bool
    """True when the best order is the smallest or largest of the grid."""


def epsilon_result(
    orders: FloatArray, rdp: FloatArray, delta: float, kind: Conversion
) -> EpsilonResult:
    """Convert an RDP curve to epsilon at the best order."""
    raw = eps_curve(kind, orders, rdp, delta)
    index = conversion.best_order(raw)
    order = float(orders[index])
    edge = len(orders) > 1 and order in (float(orders.min()), float(orders.max()))
    # The improved bound can dip below 0; the order is chosen on the raw curve
    # (as dp_accounting) and epsilon is never reported below 0.
    eps = np.maximum(raw, 0.0)
    return EpsilonResult(float(eps[index]), order, index, rdp, eps, bool(edge))


@dataclass(frozen=True)
class RdpAccount:
    """RDP totals of a run, data-dependent and data-independent."""

    data_dependent: FloatArray
    """Total data-dependent RDP per order (K,); equal to data_independent when forced."""
    data_independent: FloatArray
    """Total data-independent RDP per order (K,)."""
    expected_answered: float
    """Expected (or, realised, actual) number of queries the teachers answered."""
    num_queries_seen: int
    """Queries accounted for (all, or the prefix a realised run saw)."""
    realized: bool
    """True when accounted from an answered mask."""


def _weighted_rdp(
    values: FloatArray, weights: FloatArray | None, cost: Callable[[FloatArray], FloatArray]
) -> FloatArray:
    """sum_q weights[q] * cost(values)[q], evaluating ``cost`` once per distinct value."""
    unique, inverse = np.unique(values, return_inverse=True)
    counts = np.bincount(inverse.ravel(), weights=weights, minlength=unique.size)
    keep = counts != 0
    return counts[keep] @ cost(unique[keep])


def account(
    votes: FloatArray,
    mechanism: Mechanism,
    orders: FloatArray,
    *,
    baseline: FloatArray | None = None,
    answered: NDArray[np.bool_] | None = None,
    data_independent: bool = False,
    half_even: bool = False,
    chunk_size: int = DEFAULT_CHUNK_SIZE,
) -> RdpAccount:
    """Total RDP of answering the queries in ``votes`` with ``mechanism``.

    Args:
        votes: vote counts (Q, C); any array-like that slices by rows (a memmap too).
        mechanism: the aggregator and its parameters.
        orders: Renyi orders (K,).
        baseline: Interactive-GNMax only: the student's baseline (Q, C), on the votes' scale.
        answered: realised run: boolean mask of the queries the teachers answered, (L,)
            with L <= Q; only the first L queries were seen.
        data_independent: use data-independent bounds for every step.
        half_even: round the threshold statistic half to even, as the reference does
            (see ``core.threshold.round_votes``).
        chunk_size: queries per chunk.

    Shapes: votes (Q, C), orders (K,) -> RdpAccount with (K,) curves.
    """
    orders = np.asarray(orders, dtype=np.float64)
    num_seen = len(votes) if answered is None else len(answered)
    dependent = np.zeros(orders.size)
    answered_total = 0.0
    for start in range(0, num_seen, chunk_size):
        stop = min(start + chunk_size, num_seen)
        counts = np.asarray(votes[start:stop], dtype=np.float64)
        mask = None if answered is None else answered[start:stop].astype(np.float64)
        weights = mask
        if isinstance(mechanism, ConfidentGNMax):
            step1 = counts if baseline is None else counts - baseline[start:stop]
            log_pr = threshold.log_pr_answered_threshold(
                step1, mechanism.threshold, mechanism.sigma1, half_even=half_even
            )
            weights = np.exp(log_pr) if mask is None else mask
            if not data_independent:
                cost = partial(threshold.rdp_threshold, sigma1=mechanism.sigma1, orders=orders)
                dependent += _weighted_rdp(log_pr, None, cost)
        answered_total += float(stop - start if weights is None else weights.sum())
        if not data_independent:
            dependent += _step2_rdp(counts, mechanism, orders, weights)

    independent = _data_independent(mechanism, orders, num_seen, answered_total)
    if data_independent:
        dependent = independent.copy()
    # Both totals bound the same composition, so their minimum does too; it also absorbs
    # last-ulp differences between summing per query and multiplying by the query count.
    dependent = np.minimum(dependent, independent)
    return RdpAccount(
        data_dependent=dependent,
        data_independent=independent,
        expected_answered=answered_total,
        num_queries_seen=num_seen,
        realized=answered is not None,
    )


def _step2_rdp(
    counts: FloatArray, mechanism: Mechanism, orders: FloatArray, weights: FloatArray | None
) -> FloatArray:
    """Data-dependent RDP of the noisy-argmax step, summed with per-query weights."""
    if isinstance(mechanism, (GNMax, ConfidentGNMax)):
        sigma = mechanism.sigma
        logq = gnmax.logq_gnmax(counts, sigma)
        return _weighted_rdp(logq, weights, lambda u: gnmax.rdp_gnmax(u, sigma, orders))
    if isinstance(mechanism, LNMax):
        gamma = mechanism.gamma
        logq = lnmax.logq_lnmax(counts, gamma)
        return _weighted_rdp(logq, weights, lambda u: lnmax.rdp_lnmax(u, gamma, orders))
    assert_never(mechanism)


def _data_independent(
    mechanism: Mechanism, orders: FloatArray, num_seen: int, num_answered: float
) -> FloatArray:
    """Data-independent totals: Prop. 8 per answer, plus the threshold step per query seen."""
    if isinstance(mechanism, ConfidentGNMax):
        return num_seen * threshold.rdp_threshold_data_independent(
            mechanism.sigma1, orders
        ) + num_answered * gnmax.rdp_gnmax_data_independent(mechanism.sigma, orders)
    if isinstance(mechanism, GNMax):
        return num_answered * gnmax.rdp_gnmax_data_independent(mechanism.sigma, orders)
    if isinstance(mechanism, LNMax):
        return num_answered * lnmax.rdp_lnmax_data_independent(mechanism.gamma, orders)
    assert_never(mechanism)

"""--round-half-even against brute force: the threshold step of Interactive-GNMax.

With half to even, a value of votes - baseline that is an exact half rounds to the even
neighbour, so one teacher changing its vote can move the rounded statistic h by 2 (3.5 -> 4,
2.5 -> 2). For every histogram of a few teachers and every neighbour, the exact Renyi
divergence of the threshold step's two outcomes (h + N(0, sigma1^2) >= T or not, each from
its own tail, rounded by ``numpy.rint``) is computed here; pate's per-query costs (Theorem 6
on the less likely outcome, the exact joint bound, Prop. 8) must never be below it, and the
same costs with the statistic's move taken as 1 must be, somewhere: the oracle sees the
difference.
"""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
from scipy.special import log_ndtr

from pate_cli.accountant.compose import compose, per_query
from pate_cli.accountant.terms import QueryTerms, query_terms
from pate_cli.mechanisms import InteractiveGNMax
from tests.oracle import exact

RTOL = 1e-9
ORDERS = np.array([1.5, 2.0, 3.0, 5.0, 10.0, 20.0, 50.0])
# (teachers, baseline): each baseline has exact halves, so that some statistic is one.
SETTINGS = [
    (4, (2.5, 1.5)),
    (7, (3.5, 3.5)),
    (6, (0.5, 2.0, 3.5)),
    (9, (4.5, 2.5, 2.0)),
]
NOISE = [(3.0, 0.7), (4.0, 1.5), (1.0, 3.0), (6.0, 0.4)]  # (threshold, sigma1)


def _outcomes(hists: np.ndarray, baseline: np.ndarray, threshold: float, sigma1: float):
    """log (Pr[answered], Pr[not]) of the threshold step, rounded half to even."""
    top = np.rint(np.max(hists - baseline, axis=1))
    z = (top - threshold) / sigma1
    return exact.normalise(np.stack([log_ndtr(z), log_ndtr(-z)], axis=1))


def _worst_neighbour(hist, baseline, threshold, sigma1) -> np.ndarray:
    """max over neighbours n' of D_lambda(T(n) || T(n')), per order."""
    others = exact.neighbours(hist)
    logp = _outcomes(np.vstack([hist[None, :], others]), baseline, threshold, sigma1)
    return np.array([exact.renyi(logp[0], logp[1:], order).max() for order in ORDERS])


def _pate_costs(hist, baseline, mechanism, *, moves: int | None = None):
    """pate's data-dependent and data-independent threshold-step cost of the one query."""
    terms = query_terms(
        hist[None, :].astype(np.float64), mechanism, baseline=baseline[None, :], half_even=True
    )
    if moves is not None:  # the weakened accounting: the statistic taken to move by `moves`
        terms = dataclasses.replace(terms, threshold_sensitivity=moves)
    steps = compose(mechanism, terms, ORDERS, weights=None, total=per_query)
    return steps.threshold[0], steps.threshold_independent[0], terms


@pytest.mark.parametrize("bound", ["theorem6", "exact"])
@pytest.mark.parametrize(("num_teachers", "baseline"), SETTINGS)
def test_the_threshold_step_is_never_below_the_exact_divergence(num_teachers, baseline, bound):
    baseline = np.array(baseline)
    worst_weakened = 0.0  # how far below the truth the move-of-1 accounting falls
    for threshold, sigma1 in NOISE:
        mechanism = InteractiveGNMax(threshold, sigma1, 1.0, threshold_bound=bound)
        truths = []
        for hist in exact.histograms(num_teachers, baseline.size):
            truth = _worst_neighbour(hist, baseline, threshold, sigma1)
            truths.append(truth)
            dependent, independent, terms = _pate_costs(hist, baseline, mechanism)
            assert np.all(dependent >= truth * (1 - RTOL)), (hist, dependent, truth)
            assert np.all(independent >= truth * (1 - RTOL)), (hist, independent, truth)
            assert isinstance(terms, QueryTerms) and terms.threshold_sensitivity == 2
            weakened, _, _ = _pate_costs(hist, baseline, mechanism, moves=1)
            worst_weakened = max(worst_weakened, float(np.max(truth - weakened)))
        # Prop. 8 with a move of 2 bounds every histogram's worst neighbour.
        assert np.all(independent >= np.max(truths, axis=0) * (1 - RTOL))
    assert worst_weakened > 1e-3  # the oracle catches an accounting of a move of 1


def test_half_up_needs_no_move_of_2():
    # Rounding half up moves the statistic by 1 at most, whatever the baseline: pate keeps
    # the move of 1 there, and so does the brute force.
    baseline = np.array([3.5, 3.5])
    mechanism = InteractiveGNMax(4.0, 1.5, 1.0)
    for hist in exact.histograms(7, 2):
        terms = query_terms(hist[None, :].astype(np.float64), mechanism, baseline=baseline[None, :])
        assert terms.threshold_sensitivity == 1
        rows = np.vstack([hist, *exact.neighbours(hist)])
        top = np.floor(np.max(rows - baseline, axis=1) + 0.5)
        assert np.all(np.abs(top - top[0]) <= 1)

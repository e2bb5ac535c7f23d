"""The default grid's orders below 2: a long run's best order is found there, and every figure
reported there is sound against the oracle (``tests/oracle/exact.py``).

RDP of the Gaussian and Laplace mechanisms holds at every order above 1, and so does each
bound pate reports: Prop. 8, Theorem 6 at the orders up to mu1 (Prop. 10), Theorem 3 of 2017
for any moment l = order - 1 > 0, the exact threshold step and its joint bound with the label.
Here each figure of ``pate.analyze`` on one query, at each order of the default grid below
2, is checked against the exact sup over neighbours of the Renyi divergence, for every
histogram of a few teachers.
"""

from __future__ import annotations

import functools
from collections.abc import Callable

import numpy as np
import pytest

import pate_cli as pate
from pate_cli.orders import DEFAULT_ORDERS
from tests.conftest import MNIST
from tests.oracle import exact

DELTA = 1e-5
RTOL = 1e-9
LOW = np.flatnonzero(DEFAULT_ORDERS < 2)  # indices into the default grid


def test_a_long_gnmax_run_finds_its_best_order_below_2():
    """100,000 GNMax answers at sigma 40: the best order is below 2, inside the grid (no edge
    warning), and its epsilon is below the epsilon at order 2, the reference's smallest."""
    counts = np.load(MNIST)
    votes = pate.load_votes(np.resize(counts, (100_000, counts.shape[1])), format="counts")
    report = pate.analyze(votes, pate.GNMax(40.0), delta=DELTA, release=False)
    at_two = int(np.flatnonzero(report.orders == 2.0)[0])
    for figure in (report.data_dependent, report.data_independent, report.worst_case):
        assert figure.order < 2 and figure.order > report.orders.min()
        assert not figure.at_grid_edge
        assert figure.epsilon == np.min(figure.eps) < figure.eps[at_two]
    # Prop. 8 and the classic conversion: lambda Q / sigma^2 + log(1/delta) / (lambda - 1) is
    # smallest at lambda = 1 + sqrt(sigma^2 log(1/delta) / Q) = 1.43; 1.5 is the grid's nearest.
    assert report.data_independent.order == 1.5
    assert not any("edge of the order grid" in warning for warning in report.warnings)


# ----------------------------------------------------------------------------- soundness

GateLabel = Callable[[np.ndarray], np.ndarray]


def _gnmax(sigma: float) -> GateLabel:
    return functools.partial(exact.gnmax_log_probs, sigma=sigma)


def _lnmax(gamma: float) -> GateLabel:
    return functools.partial(exact.lnmax_log_probs, gamma=gamma)


def _joint(threshold: float, sigma1: float, sigma: float) -> GateLabel:
    """Confident-GNMax's outcome: not answered, or answered with label i."""

    def log_probs(hists: np.ndarray) -> np.ndarray:
        gate = exact.threshold_log_probs(hists, threshold, sigma1)
        labels = exact.gnmax_log_probs(hists, sigma)
        return np.concatenate([gate[:, 1:2], gate[:, :1] + labels], axis=1)

    return log_probs


# (mechanism, the oracle's outcome distribution, M, C, the figures that bound one query's
# divergence): plain GNMax and LNMax report data-dependent and data-independent bounds of
# their one answer; Confident-GNMax's guaranteed and worst-case figures bound the joint
# (threshold outcome, label) divergence (its other figures average over the threshold noise).
CASES = [
    (pate.GNMax(1.0), _gnmax(1.0), 12, 3, ("data_dependent", "data_independent")),
    (pate.GNMax(3.0), _gnmax(3.0), 14, 2, ("data_dependent", "data_independent")),
    (pate.LNMax(1.0), _lnmax(1.0), 12, 3, ("data_dependent", "data_independent")),
    (pate.LNMax(0.3), _lnmax(0.3), 14, 2, ("data_dependent", "data_independent")),
    (
        pate.ConfidentGNMax(threshold=8.0, sigma1=2.0, sigma=1.0),
        _joint(8.0, 2.0, 1.0),
        12,
        3,
        ("guaranteed", "worst_case"),
    ),
]


@pytest.mark.parametrize(("mechanism", "log_probs", "teachers", "classes", "figures"), CASES)
def test_every_figure_below_order_2_is_sound(mechanism, log_probs, teachers, classes, figures):
    """Each figure's RDP at the default grid's orders below 2, for every histogram of M
    teachers over C classes, is never below the exact divergence (1e-9 relative)."""
    assert LOW.size >= 4  # the grid reaches below 2
    orders = DEFAULT_ORDERS[LOW]
    tighter = False
    for hist in exact.histograms(teachers, classes):
        votes = pate.load_votes(hist[None, :].astype(np.float64), format="counts")
        report = pate.analyze(votes, mechanism, delta=DELTA, release=False)
        truth = np.array([exact.max_over_neighbours(hist, log_probs, o)[0] for o in orders])
        for name in figures:
            ours = getattr(report, name).rdp[LOW]
            low = np.flatnonzero(~(ours >= truth * (1 - RTOL)))
            assert low.size == 0, (
                f"{name} of {hist.tolist()} at orders {orders[low].tolist()}: "
                f"pate {ours[low].tolist()} < exact {truth[low].tolist()}"
            )
        dependent, independent = report.data_dependent.rdp[LOW], report.data_independent.rdp[LOW]
        tighter |= bool(np.any(dependent < independent))
    # The data-dependent bounds are in force below 2 (not Prop. 8's value everywhere).
    assert tighter

"""The privacy-loss-distribution figure (``analyze --pld``) against exact oracles.

Per query: every pessimistic distribution's profile is at or above the exact worst-neighbour
profile (``tests/oracle/pld_oracle.py``: numerical integration, no formula shared). Whole
runs of up to three queries: both methods are at or above the exact two-directional epsilon
of the run, and ``exact`` is pinned close to it (the tightness a silent fall back to a looser
bound would lose).
"""

from __future__ import annotations

import math
from functools import cache

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pate_cli.accountant.pld import pld_figure
from pate_cli.accountant.terms import query_terms
from pate_cli.core import pld
from pate_cli.mechanisms import ConfidentGNMax, GNMax
from tests.oracle import pld_oracle
from tests.oracle.strategies import EXAMPLES

DELTA = 1e-5
# A coarser loss grid than the default keeps the tiny runs' long grids quick: every grid is
# sound, and the pinned ratio is measured on this one.
GRID = 5e-3


def _ours(run: pld_oracle.Run) -> GNMax | ConfidentGNMax:
    hists, mechanism = run
    if isinstance(mechanism, pld_oracle.ConfidentGNMax):
        return ConfidentGNMax(
            threshold=mechanism.threshold, sigma1=mechanism.sigma1, sigma=mechanism.sigma
        )
    assert isinstance(mechanism, pld_oracle.GNMax)
    return GNMax(sigma=mechanism.sigma)


def figure(run: pld_oracle.Run, method: str, delta: float = DELTA) -> float:
    hists = np.asarray(run[0], dtype=np.float64)
    mechanism = _ours(run)
    terms = query_terms(hists, mechanism)
    return pld_figure(hists, mechanism, terms, delta, method, grid=GRID).epsilon


def profile_of(pmf: pld.Pessimistic, row: int, grid: float, eps: np.ndarray) -> np.ndarray:
    """delta(eps) = infinity + sum_j w_j (1 - e^(eps - loss_j))_+ of one row, directly."""
    losses = (pmf.lo + np.arange(pmf.masses.shape[1])) * grid
    terms = pmf.masses[row][None, :] * np.maximum(-np.expm1(eps[:, None] - losses[None, :]), 0)
    return pmf.infinity[row] + terms.sum(axis=1)


@cache
def _corpus() -> list[tuple[float, float, float]]:
    """(oracle, exact pairs, q-bound) epsilons of the pinned corpus."""
    out = []
    for run in pld_oracle.tiny_runs(seed=20261129, count=24):
        truth = pld_oracle.run_epsilon(run[0], run[1], DELTA)
        out.append((truth, figure(run, "exact"), figure(run, "q-bound")))
    return out


@given(run=pld_oracle.tiny_run())
@settings(max_examples=max(10, EXAMPLES // 10))
def test_whole_runs_are_never_below_the_exact_epsilon(run: pld_oracle.Run) -> None:
    truth = pld_oracle.run_epsilon(run[0], run[1], DELTA)
    for method in ("q-bound", "exact"):
        assert figure(run, method) >= truth * (1 - 1e-9) - 1e-12, method


def test_the_exact_pairs_are_pinned_close_to_the_exact_epsilon() -> None:
    """The median ratio to the truth over the corpus (positive truths): the issue's target is
    1.15 for the exact pairs, which measure 1.0013 (pinned at 1.01); the q-bound pairs 1.91
    (pinned at 2: their per-query bound, Prop. 7's q, is what they lose)."""
    ratios = np.array([(e, q) for t, e, q in _corpus() if t > 1e-3]) / np.array(
        [[t, t] for t, _, _ in _corpus() if t > 1e-3]
    )
    assert ratios.min() >= 1 - 1e-9
    exact, qbound = np.median(ratios, axis=0)
    assert exact <= 1.01
    assert exact <= qbound <= 2.0


@st.composite
def query(draw: st.DrawFn) -> tuple[np.ndarray, pld_oracle.Mechanism]:
    hists, mechanism = draw(pld_oracle.tiny_run())
    return np.asarray(hists[0]), mechanism


@given(case=query())
@settings(max_examples=max(10, EXAMPLES // 10))
def test_each_pessimistic_pair_is_above_the_exact_worst_neighbour_profile(
    case: tuple[np.ndarray, pld_oracle.Mechanism],
) -> None:
    """Both directions, at 400 losses on both sides of 0, for both methods."""
    hist, oracle_mechanism = case
    run = (hist[None, :], oracle_mechanism)
    mechanism = _ours(run)
    counts = hist[None, :].astype(np.float64)
    terms = query_terms(counts, mechanism)
    eps = np.linspace(-3, 3, 401)
    truth = pld_oracle.query_profiles(hist, oracle_mechanism, eps)
    for method in ("q-bound", "exact"):
        pmfs = _pmfs(counts, mechanism, terms, method)
        for pmf, exact_profile in zip(pmfs, truth, strict=True):
            ours = profile_of(pmf, 0, GRID, eps)
            assert np.all(ours >= exact_profile - 1e-12), method


def _pmfs(counts, mechanism, terms, method):
    """The remove and add distributions ``pld_figure`` composes for one query."""
    found = {}

    def keep(first, remove, add, kinds, grid, delta, advance=None):
        found["pmfs"] = [pld.connect_the_dots(first, p, grid) for p in (remove, add)]
        return (0.0, 0.0)

    original = pld.epsilon_from_profiles
    pld.epsilon_from_profiles = keep
    try:
        pld_figure(counts, mechanism, terms, DELTA, method, grid=GRID)
    finally:
        pld.epsilon_from_profiles = original
    return found["pmfs"]


def test_lnmax_and_interactive_are_refused() -> None:
    from pate_cli.errors import UnsupportedError
    from pate_cli.mechanisms import InteractiveGNMax, LNMax

    counts = np.array([[5.0, 1.0, 0.0]])
    for mechanism in (LNMax(gamma=0.1), InteractiveGNMax(threshold=3, sigma1=1, sigma=1)):
        terms = query_terms(counts, mechanism, baseline=np.zeros((1, 3)))
        with pytest.raises(UnsupportedError, match="Renyi DP"):
            pld_figure(counts, mechanism, terms, DELTA)


def test_more_than_twenty_classes_are_refused_for_the_exact_pairs() -> None:
    from pate_cli.errors import UsageError

    counts = np.zeros((1, 21))
    counts[0, 0] = 5
    mechanism = GNMax(sigma=2.0)
    with pytest.raises(UsageError, match="20 classes"):
        pld_figure(counts, mechanism, query_terms(counts, mechanism), DELTA, "exact")
    assert math.isfinite(
        pld_figure(counts, mechanism, query_terms(counts, mechanism), DELTA).epsilon
    )

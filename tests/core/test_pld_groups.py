"""The cells of a privacy-loss-distribution run merged within a work budget
(``pate_cli.core.pld_groups``): every query's pair only raised, checked against each query's
own q-bound profiles and against the exact epsilon of tiny runs (``tests/oracle``); the
work's progress; the composition's decaying sums without scipy.signal."""

from __future__ import annotations

import math
import subprocess
import sys

import numpy as np
import pytest
from scipy.special import log_ndtr

from pate_cli.accountant.pld import check_pld, pld_figure
from pate_cli.accountant.terms import query_terms
from pate_cli.core import pld, pld_compose, pld_groups
from pate_cli.core.pld_compose import TAIL_SHARE
from pate_cli.mechanisms import ConfidentGNMax, GNMax
from tests.oracle import pld_oracle

DELTA = 1e-5
SIGMA1, SIGMA, THRESHOLD, TEACHERS = 30.0, 10.0, 90.0, 128


def candidate_votes(queries: int, classes: int, seed: int) -> np.ndarray:
    """Histograms of 128 teachers over a few candidates whose q depends on every count: a
    plurality share from Beta(8, 2) or Beta(2, 2), the rest spread by Dirichlet shares."""
    rng = np.random.default_rng(seed)
    share = np.where(rng.random(queries) < 0.8, rng.beta(8, 2, queries), rng.beta(2, 2, queries))
    top = np.maximum(np.round(share * TEACHERS), math.ceil(TEACHERS / classes)).astype(int)
    rest = rng.multinomial(TEACHERS - top, rng.dirichlet(np.ones(classes - 1), queries))
    return np.concatenate([top[:, None], rest], axis=1).astype(np.float64)


def run_cells(queries: int, seed: int, classes: int = 16):
    """A Confident-GNMax run's per-query (log a, log b, margin), its cells as
    ``confident_epsilon`` makes them, mu, mu_joint, the margins' shift and the loss grid."""
    counts = candidate_votes(queries, classes, seed)
    mechanism = ConfidentGNMax(threshold=THRESHOLD, sigma1=SIGMA1, sigma=SIGMA)
    terms = query_terms(counts, mechanism, neighbour=check_pld(mechanism, "q-bound").neighbour)
    log_a, log_b, margins = terms.logq, terms.logq_neighbour, terms.margins
    floor = math.log(DELTA * TAIL_SHARE / queries)
    cells = pld.cells(log_a, log_b, pld.DEFAULT_CELL, floor, margins)
    mu = math.sqrt(2) / SIGMA
    mu_joint = math.sqrt(mu * mu + (terms.threshold_sensitivity / SIGMA1) ** 2)
    eps = pld.loss_grid(mu_joint, 1e-2, DELTA, queries)
    shift = terms.threshold_sensitivity / SIGMA1
    return (log_a, log_b, margins), cells, floor, mu, mu_joint, shift, eps


def force(monkeypatch: pytest.MonkeyPatch, most: int) -> None:
    """At most ``most`` cells per grid point's budget, whatever the run's size."""
    monkeypatch.setattr(pld_groups, "MOST_WORK", most)
    monkeypatch.setattr(pld_groups, "_FEWEST", 1)


@pytest.mark.parametrize("seed", range(6))
def test_every_cell_goes_into_one_of_its_margin_with_a_and_b_at_least_its_own(seed, monkeypatch):
    """The merged cells hold every query once (their counts the members' summed), each cell
    in one of its own margin whose log a and log b are at least its own; they are within the
    budget wherever the margins leave neighbours to merge."""
    _, (a, b, counts, z), _, mu, _, _, eps = run_cells(4000, seed)
    force(monkeypatch, 40 * eps.size)
    weight = np.exp(log_ndtr(z))
    out_a, out_b, out_n, out_z, of_cell = pld_groups.merged(a, b, counts, z, mu, eps.size, weight)
    assert counts.size > 200 and out_n.size <= max(40, np.unique(z).size)
    assert of_cell.shape == counts.shape and of_cell.min() == 0 and of_cell.max() == out_n.size - 1
    assert np.all(out_a[of_cell] >= a) and np.all(out_b[of_cell] >= b)
    assert np.array_equal(out_z[of_cell], z)
    assert np.array_equal(np.bincount(of_cell, weights=counts, minlength=out_n.size), out_n)
    # Each merged cell's values are those of one of its members (the largest), not above.
    for cell in range(out_n.size):
        members = of_cell == cell
        assert out_a[cell] == a[members].max() and out_b[cell] == b[members].max()
    budget = pld_groups.within_budget(a, b, counts, z, mu, eps.size, weight)
    assert all(
        np.array_equal(x, y) for x, y in zip(budget, (out_a, out_b, out_n, out_z), strict=True)
    )


def test_each_query_s_merged_pair_is_at_or_above_its_own_q_bound_pair(monkeypatch):
    """On a run of 16 candidates merged from some 500 cells down to 12: the profiles of every
    query's merged cell are at or above those of the query's own (log a, log b, margin),
    unrounded, in both directions at every loss of the grid."""
    (log_a, log_b, margins), cells, floor, mu, mu_joint, shift, eps = run_cells(1500, 7)
    a, b, counts, z = cells
    force(monkeypatch, 12 * eps.size)
    out_a, out_b, _, out_z, of_cell = pld_groups.merged(
        a, b, counts, z, mu, eps.size, np.exp(log_ndtr(z))
    )
    assert a.size > 300 and out_a.size <= max(12, np.unique(z).size) < a.size / 5
    cell_index = {
        key: g for g, key in enumerate(zip(a.tolist(), b.tolist(), z.tolist(), strict=True))
    }
    group = np.empty(log_a.size, dtype=np.int64)
    for query in range(log_a.size):
        own = pld.cells(log_a[query : query + 1], log_b[query : query + 1], 0.01, floor,
                        margins[query : query + 1])  # fmt: skip
        group[query] = of_cell[cell_index[(own[0][0], own[1][0], own[3][0])]]

    def profiles(la, lb, zz):
        low, high = log_ndtr(zz - shift), log_ndtr(zz + shift)
        return pld.confident_profiles(log_ndtr(zz), low, high, la, lb, mu, mu_joint, eps)

    own_remove, own_add = profiles(log_a, log_b, margins)
    merged_remove, merged_add = profiles(out_a[group], out_b[group], out_z[group])
    assert np.all(merged_remove >= own_remove) and np.all(merged_add >= own_add)
    # Raised where the merges moved a or b past the query's own cell.
    assert np.any(merged_remove > own_remove * (1 + 1e-6))


@pytest.mark.parametrize("seed", [20261202, 54])
def test_tiny_runs_merged_into_one_cell_a_margin_stay_above_the_exact_epsilon(seed, monkeypatch):
    """Every tiny run of the oracle's corpus (C = 2 to 4, a few queries), its cells merged
    as far as their margins allow: the q-bound figure at or above the exact epsilon."""
    force(monkeypatch, 1)
    merges = []
    original = pld_groups.merged

    def counting(*args, **kwargs):
        found = original(*args, **kwargs)
        merges.append(args[2].size - found[2].size)
        return found

    monkeypatch.setattr(pld_groups, "merged", counting)
    for hists, oracle_mechanism in pld_oracle.tiny_runs(seed=seed, count=24):
        counts = np.asarray(hists, dtype=np.float64)
        if isinstance(oracle_mechanism, pld_oracle.ConfidentGNMax):
            mechanism: GNMax | ConfidentGNMax = ConfidentGNMax(
                threshold=oracle_mechanism.threshold,
                sigma1=oracle_mechanism.sigma1,
                sigma=oracle_mechanism.sigma,
            )
        else:
            mechanism = GNMax(sigma=oracle_mechanism.sigma)
        terms = query_terms(counts, mechanism)
        ours = pld_figure(counts, mechanism, terms, DELTA, grid=5e-3).epsilon
        truth = pld_oracle.run_epsilon(hists, oracle_mechanism, DELTA)
        assert ours >= truth * (1 - 1e-9) - 1e-12
    assert sum(merges) >= 4  # the corpus did merge


def test_the_work_is_shown_as_it_is_done_in_queries(monkeypatch):
    """advance(n) is called as the profiles, hulls and compositions proceed (a block of
    kinds at a time), with n > 0 summing to the queries seen."""
    monkeypatch.setattr(pld, "_ROWS", 8)
    counts = candidate_votes(3000, 16, 3)
    mechanism = ConfidentGNMax(threshold=THRESHOLD, sigma1=SIGMA1, sigma=SIGMA)
    terms = query_terms(counts, mechanism, neighbour=check_pld(mechanism, "q-bound").neighbour)
    shown: list[int] = []
    found = pld_figure(counts, mechanism, terms, DELTA, advance=shown.append)
    assert found.groups > 40
    assert len(shown) >= 2 * found.groups // 8 and min(shown) > 0 and sum(shown) == 3000
    # Without a hook, the same figure.
    assert pld_figure(counts, mechanism, terms, DELTA).epsilon == found.epsilon


def test_the_decaying_sums_are_lfilter_s_bit_for_bit():
    from scipy.signal import lfilter

    rng = np.random.default_rng(5)
    for size, grid in ((1, 1e-3), (17, 1e-2), (70_000, 1e-3), (5000, 1e-7)):
        values = rng.random(size) * np.exp(-40 * rng.random(size))
        ratio = math.exp(-grid)
        ours = pld_compose._decaying_sums(values, ratio)
        assert np.array_equal(ours, lfilter([ratio], [1.0, -ratio], values))


def test_a_pld_figure_imports_no_scipy_signal():
    code = (
        "import sys, numpy as np\n"
        "from pate_cli.core import pld\n"
        "z = np.full(50, -3.0)\n"
        "print(pld.qbound_epsilon(z, z, 0.1, 1e-5).epsilon > 0, 'scipy.signal' in sys.modules)\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert done.stdout.split() == ["True", "False"], done.stderr


def test_the_exact_pairs_show_their_work_too(monkeypatch):
    """``--pld exact``: a step once the worst-neighbour profiles are made, then one per block
    of hulls and per composition, summing to the queries seen."""
    monkeypatch.setattr(pld, "_ROWS", 16)
    counts = candidate_votes(300, 5, 8)
    mechanism = ConfidentGNMax(threshold=THRESHOLD, sigma1=SIGMA1, sigma=SIGMA)
    terms = query_terms(counts, mechanism)
    shown: list[int] = []
    found = pld_figure(counts, mechanism, terms, DELTA, "exact", advance=shown.append)
    assert found.groups > 100
    assert shown[0] == int(300 * (1 - pld.PROFILED)) and sum(shown) == 300
    assert len(shown) >= 2 * found.groups // 16 and min(shown) > 0

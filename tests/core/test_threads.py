"""The release's walks run on threads: the sums must not depend on how many."""

from __future__ import annotations

import numpy as np
import pytest

from pate_cli.core import _common, ls_gnmax
from pate_cli.core.smooth import local_sensitivity_total


def _votes(num_queries: int, seed: int = 3) -> np.ndarray:
    rng = np.random.default_rng(seed)
    probs = rng.dirichlet(np.full(10, 0.3), size=num_queries)
    return np.array([rng.multinomial(250, p) for p in probs], dtype=np.float64)


@pytest.mark.parametrize("threshold", [None, 200.0])
def test_the_totals_are_the_same_on_one_thread_and_on_three(monkeypatch, threshold):
    votes = _votes(6000)  # walks of several chunks of pairs, and several row blocks
    monkeypatch.setattr(ls_gnmax, "_PAIR_CHUNK", 1 << 14)
    monkeypatch.setattr(ls_gnmax, "_ROW_BLOCK", 1 << 10)
    options = {"threshold": threshold, "sigma1": None if threshold is None else 150.0}
    alone = []
    for threads in (1, 3):
        monkeypatch.setattr(_common._ordered_map, "__defaults__", (threads,))
        alone.append(local_sensitivity_total(votes, 250, 14.0, 40.0, **options))
    np.testing.assert_array_equal(alone[0], alone[1])
    assert np.all(alone[0] > 0)


def test_ordered_map_keeps_the_order_and_few_items_in_flight():
    started: list[int] = []

    def work(item: int) -> int:
        started.append(item)
        return item * item

    results = _common._ordered_map(work, range(50), threads=2)
    assert next(results) == 0
    assert len(started) <= 4  # the first result waits for at most threads + 1 submitted
    assert list(results) == [i * i for i in range(1, 50)]


@pytest.mark.parametrize("reach", [0, 1])
def test_the_threshold_total_is_the_same_on_one_thread_and_on_three(monkeypatch, reach):
    from pate_cli.core import ls_threshold

    rng = np.random.default_rng(5)
    tops = rng.integers(0, 2001, size=5000)  # more distinct tops than a block holds
    table = ls_threshold._threshold_ls_table(2000, 1200.0, 300.0, 20.0, rounded_up=True)
    totals = []
    for threads in (1, 3):
        monkeypatch.setattr(ls_threshold, "_THREADS", threads)
        totals.append(ls_threshold._threshold_total(tops, table, True, reach))
    np.testing.assert_array_equal(totals[0], totals[1])
    assert totals[0][-1] > 0

"""The smooth-sensitivity release of counts held by distinct row: the row path's figures, bit
for bit.

Where the votes are held by distinct row (``Votes.distinct``) the release walks each
distinct row once, its terms weighted by how many queries hold it (``release.common.
HeldRows``); every weight is a whole number, so each term and each sum is the one the queries
give row by row. Compared with ``==`` against the same release made row by row (the grouping
switched off: ``votes.grouping.CELLS`` 0): the smooth sensitivity, beta, sigma_ss, the GNSS
cost, the expected released epsilon and the local-sensitivity array, for every built-in
mechanism, with and without a baseline and an answered mask, on repetitive and all-distinct
votes, by the tabulated bound and the exact walk. The files hold fewer queries than a chunk,
so the row path sums them in one block, as the grouped path does.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

import pate_cli as pate
from pate_cli.choices import Conversion
from pate_cli.core import smooth
from pate_cli.core.distinct import DistinctRows
from pate_cli.release import common, gnss, laplace
from pate_cli.votes import grouping

TEACHERS = 250
CLASSES = 10
DELTA = 1e-5

MECHANISMS: dict[str, Any] = {
    "gnmax": pate.GNMax(40),
    "confident-gnmax": pate.ConfidentGNMax(200, 150, 40),
    "interactive-gnmax": pate.InteractiveGNMax(200, 150, 40),
    "lnmax": pate.LNMax(0.05),
}

FIELDS = (
    "smooth_sensitivity",
    "beta",
    "sigma_ss",
    "gnss_cost",
    "epsilon_expected_release",
    "local_sensitivity_past_walk",
    "rdp_at_order",
    "expected_answered",
)


def _files(kind: str, num: int = 3000, seed: int = 5) -> np.ndarray:
    """Histograms of 250 teachers, from strong to split agreement: 40 rows repeated, or
    ``num`` mostly distinct ones."""
    rng = np.random.default_rng(seed)
    pool = rng.multinomial(TEACHERS, rng.dirichlet(np.full(CLASSES, 0.3), size=num))
    if kind == "repetitive":
        pool = pool[:40][rng.integers(0, 40, num)]
    return pool.astype(np.float64)


def _options(name: str, counts: np.ndarray, answered: bool) -> dict[str, Any]:
    options: dict[str, Any] = {}
    if MECHANISMS[name].needs_baseline:
        rng = np.random.default_rng(9)
        # a baseline that repeats with the votes (and one that splits a row in two)
        options["baseline"] = np.round(counts * rng.choice([0.5, 0.25], size=(len(counts), 1)))
    if answered:
        options["answered"] = np.random.default_rng(3).random(len(counts) - 17) < 0.6
    return options


def _release(counts: np.ndarray, name: str, walk: bool, **options: Any) -> Any:
    report = pate.analyze(
        counts,
        MECHANISMS[name],
        delta=DELTA,
        release="expected",
        walk_local_sensitivity=walk,
        **options,
    )
    return report


@pytest.mark.parametrize("walk", [False, True], ids=["tabulated", "walk"])
@pytest.mark.parametrize("answered", [False, True], ids=["expected", "answered-mask"])
@pytest.mark.parametrize("kind", ["repetitive", "distinct"])
@pytest.mark.parametrize("name", MECHANISMS)
def test_release_by_distinct_row_equals_row_by_row(
    name: str, kind: str, answered: bool, walk: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    if walk and name == "lnmax":
        pytest.skip("LNMax has its one tabulated bound")
    counts = _files(kind)
    options = _options(name, counts, answered)
    monkeypatch.setattr(grouping, "SHARE", 1.0)  # all-distinct votes held by row too
    assert pate.load_votes(counts).distinct is not None
    grouped_report = _release(counts, name, walk, **options)
    monkeypatch.setattr(grouping, "CELLS", 0)
    assert pate.load_votes(counts).distinct is None
    sorted_report = _release(counts, name, walk, **options)  # grouped by sorted row
    monkeypatch.setattr(common, "SORTED_CELLS", 0)
    rows_report = _release(counts, name, walk, **options)  # row by row, chunk by chunk
    rows = rows_report.release
    assert rows.released
    assert rows.smooth_sensitivity > 0
    for report in (grouped_report, sorted_report):
        assert report.to_dict() == rows_report.to_dict()
        grouped = report.release
        for field in FIELDS:
            assert getattr(grouped, field) == getattr(rows, field), field
        assert grouped.local_sensitivity.size == rows.local_sensitivity.size
        assert np.array_equal(grouped.local_sensitivity, rows.local_sensitivity)


def _expanded(rows: np.ndarray, counts: np.ndarray) -> np.ndarray:
    return np.repeat(rows, counts.astype(np.int64), axis=0)


@pytest.mark.parametrize("threshold", [None, 200.0], ids=["gnmax", "confident-gnmax"])
@pytest.mark.parametrize("mask", [False, True], ids=["expected", "answered-mask"])
def test_local_sensitivity_total_of_counted_rows_is_the_queries(
    threshold: float | None, mask: bool
) -> None:
    """``row_counts`` weight every part (the threshold step's, Pr[answered]'s and the answer
    step's) as that many copies of the row: the same total, bit for bit."""
    rng = np.random.default_rng(7)
    rows = _files("distinct", num=60, seed=11)
    counts = rng.integers(1, 9, size=60).astype(np.float64)
    queries = _expanded(rows, counts)
    options: dict[str, Any] = {"threshold": threshold, "sigma1": 150.0, "threshold_sensitivity": 1}
    weights = None
    if mask:
        answered = rng.random(queries.shape[0]) < 0.5
        options["step2_weights"] = answered.astype(np.float64)
        owner = np.repeat(np.arange(60), counts.astype(np.int64))
        weights = np.bincount(owner, weights=answered.astype(np.float64), minlength=60)
    by_query = smooth.local_sensitivity_total(queries, TEACHERS, 8.0, 40.0, **options)
    options["step2_weights"] = weights
    by_row = smooth.local_sensitivity_total(rows, TEACHERS, 8.0, 40.0, row_counts=counts, **options)
    assert np.all(by_query > 0)
    assert np.array_equal(by_row, by_query)


def test_row_counts_are_whole_and_at_least_one() -> None:
    rows = _files("distinct", num=4)
    for bad in ([1, 2, 0, 1], [1, 2.5, 1, 1], [1, 1, 1]):
        with pytest.raises(ValueError, match="row_counts"):
            smooth.local_sensitivity_total(rows, TEACHERS, 8.0, 40.0, row_counts=bad)


def _held_blocks(counts: Any, chunk: int, name: str) -> Any:
    """gnss_release of ``counts`` (rows, or held by distinct row), ``chunk`` rows a block."""
    mechanism = MECHANISMS[name]
    return gnss.gnss_release(
        counts, TEACHERS, mechanism, 8.0, DELTA, Conversion.CLASSIC,
        epsilon_data_independent=1.0, epsilon_worst_case=1.0, chunk_size=chunk,
        noise=None, skip_conditions=True,
    )  # fmt: skip


@pytest.mark.parametrize("name", ["gnmax", "confident-gnmax", "lnmax"])
@pytest.mark.parametrize("held", ["distinct", "sorted"])
def test_held_rows_in_blocks_stop_where_nothing_can_change(
    name: str, held: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Distinct rows walked 8 at a time, each block bounding the queries still to come by
    their count: the figures of the same blocks walked over every distance. Contested rows come first (alone they would stop at
    once), then confident ones, whose local sensitivity is tiny until late."""
    rng = np.random.default_rng(4)
    contested = rng.multinomial(TEACHERS, np.full(CLASSES, 1 / CLASSES), size=8)
    confident = rng.multinomial(TEACHERS, [0.9] + [0.1 / (CLASSES - 1)] * (CLASSES - 1), size=32)
    pool = np.vstack([contested, confident]).astype(np.float64)
    counts = pool[np.concatenate([np.arange(40), rng.integers(8, 40, 560)])]
    votes = DistinctRows.of(counts) if held == "distinct" else counts
    walked = _held_blocks(votes, 8, name)
    whole = _held_blocks(votes, 1 << 16, name)
    monkeypatch.setattr(gnss, "smallest_beta", lambda draw, order: 0.0)
    monkeypatch.setattr(laplace, "smallest_beta", lambda draw, order: 0.0)
    full = _held_blocks(votes, 8, name)
    size = walked.local_sensitivity.size
    assert size < TEACHERS == full.local_sensitivity.size
    np.testing.assert_array_equal(walked.local_sensitivity, full.local_sensitivity[:size])
    figures = ("smooth_sensitivity", "beta", "sigma_ss", "gnss_cost", "epsilon_expected_release")
    assert [getattr(walked, f) for f in figures] == [getattr(full, f) for f in figures]
    assert walked.smooth_sensitivity > 0
    # The tabulated bound's cells follow each block's rows: blocks of 8 rows give their own.
    assert walked.smooth_sensitivity == pytest.approx(whole.smooth_sensitivity, rel=1e-3)


def test_held_blocks_count_their_queries() -> None:
    """Each block of held rows leaves the horizon the queries of the blocks still to come:
    the counts of their rows, not their number of rows."""
    rows = _files("distinct", num=20, seed=3)
    counts = np.arange(1.0, 21.0)
    held = common.HeldRows(rows, counts, None, None)
    left: list[int] = []

    def bound(block: common.HeldRows, horizon: Any) -> Any:
        out = smooth.local_sensitivity_walked(
            block.rows, TEACHERS, 8.0, 40.0, horizon, row_counts=block.counts
        )
        left.append(out.queries_left)
        return out

    walk = common.Walk(TEACHERS, 6, None)
    walk.held_local_sensitivity(held, int(counts.sum()), bound, 0.04)
    assert left == [210 - 21, 210 - 21 - 57, 210 - 21 - 57 - 93, 0]

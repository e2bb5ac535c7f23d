"""Counts held by distinct row: every figure what the rows give, to the last bit.

A (Q, C) counts file whose rows repeat is grouped once where it is read
(``pate_cli.core.distinct``), validated once per distinct row, and the accounting passes
take the distinct rows with their counts. Every figure below is compared with the same
analysis made row by row (the grouping switched off: ``votes.grouping.CELLS`` 0), with
``==`` on the floats: the RDP vectors, each epsilon, the guaranteed figure, every ledger
column (in the queries' order) and compare's rows; for every built-in mechanism, with and
without a baseline and an answered mask, on repetitive and all-distinct votes, in memory
and streamed; and a property over random files (Hypothesis).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import pate_cli as pate
from pate_cli import votes as votes_module
from pate_cli.core import distinct
from pate_cli.core.distinct import DistinctRows, RowTable, group_rows
from pate_cli.errors import InputError
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


def _histograms(rng: np.random.Generator, num: int, teachers: int = TEACHERS) -> np.ndarray:
    """``num`` vote histograms of ``teachers`` teachers, from strong to split agreement."""
    shares = rng.dirichlet(np.full(CLASSES, 0.3), size=num)
    return rng.multinomial(teachers, shares).astype(np.float64)


def _files(kind: str, num: int = 3000, seed: int = 5) -> np.ndarray:
    rng = np.random.default_rng(seed)
    if kind == "repetitive":
        pool = _histograms(rng, 40)
        return pool[rng.integers(0, len(pool), num)]
    return _histograms(rng, num)


@pytest.fixture
def row_by_row(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    monkeypatch.setattr(grouping, "CELLS", 0)
    yield


def _ledger(report: Any) -> dict[str, np.ndarray]:
    blocks = list(report.ledger.blocks())
    return {key: np.concatenate([b[key] for b in blocks]) for key in blocks[0]}


def _same_reports(grouped: Any, rows: Any) -> None:
    """Every figure equal (to the last bit), every ledger column equal in query order."""
    assert grouped.to_dict() == rows.to_dict()
    for name in ("data_dependent", "data_independent", "worst_case"):
        assert np.array_equal(getattr(grouped.account, name), getattr(rows.account, name))
    assert grouped.data_dependent.epsilon == rows.data_dependent.epsilon
    if rows.guaranteed is not None:
        assert np.array_equal(grouped.guaranteed.rdp, rows.guaranteed.rdp)
    by_groups, by_rows = _ledger(grouped), _ledger(rows)
    assert by_groups.keys() == by_rows.keys()
    for key in by_rows:
        assert np.array_equal(by_groups[key], by_rows[key], equal_nan=True), key


def _analyze(counts: np.ndarray, name: str, **options: Any) -> Any:
    return pate.analyze(
        counts, MECHANISMS[name], delta=DELTA, release=False, breakdown=True, **options
    )


# ---------------------------------------------------------------------------
# Where the file is read: grouped once, validated once per distinct row.


def test_repetitive_counts_are_held_by_distinct_row() -> None:
    counts = _files("repetitive")
    votes = pate.load_votes(counts)
    assert votes.distinct is not None
    assert votes.distinct.num_rows == 40
    assert np.array_equal(np.asarray(votes.distinct), counts)
    held = [int((counts == row).all(axis=1).sum()) for row in votes.distinct.rows]
    assert votes.distinct.counts.tolist() == held
    first = [int(np.flatnonzero((counts == row).all(axis=1))[0]) for row in votes.distinct.rows]
    assert first == sorted(first)  # the rows come in the order of their first query


def test_all_distinct_counts_are_read_as_rows() -> None:
    assert pate.load_votes(_files("distinct")).distinct is None


def test_a_bad_value_is_named_at_its_first_query() -> None:
    counts = _files("repetitive")
    bad = counts[7].copy()
    bad[3] = -2.0
    counts[[1500, 2900]] = bad  # one distinct row, held by two queries
    with pytest.raises(InputError, match="1500"):
        pate.load_votes(counts)


def test_group_rows_is_numpy_unique() -> None:
    counts = _files("repetitive")
    first, inverse = group_rows(counts)
    unique, first_np, inverse_np = np.unique(counts, axis=0, return_index=True, return_inverse=True)
    assert np.array_equal(np.sort(first), np.sort(first_np))
    assert np.array_equal(counts[first][inverse], counts)
    assert np.array_equal(first, np.sort(first))


def test_a_hash_collision_still_groups_exactly(monkeypatch: pytest.MonkeyPatch) -> None:
    """Every row hashed alike: the grouping is still by bytes, and the table gives up."""
    counts = _files("repetitive", num=500)
    monkeypatch.setattr(distinct, "row_keys", lambda words: np.zeros(len(words), np.uint64))
    first, inverse = group_rows(counts)
    assert len(first) == len(np.unique(counts, axis=0))
    assert np.array_equal(counts[first][inverse], counts)
    assert not RowTable(1000).add(counts)


def test_the_table_gives_up_past_its_limit() -> None:
    counts = _files("repetitive")
    table = RowTable(39)
    assert not all(table.add(counts[start : start + 256]) for start in range(0, 3000, 256))
    table = RowTable(40)
    assert all(table.add(counts[start : start + 256]) for start in range(0, 3000, 256))
    rows, inverse = table.distinct()
    assert rows.shape == (40, CLASSES)
    assert np.array_equal(rows[inverse], counts)


def test_a_file_with_more_distinct_rows_than_the_limit_is_read_as_rows(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(grouping, "CELLS", 39 * CLASSES)
    assert pate.load_votes(_files("repetitive")).distinct is None
    monkeypatch.setattr(grouping, "CELLS", 40 * CLASSES)
    assert pate.load_votes(_files("repetitive")).distinct is not None


# ---------------------------------------------------------------------------
# The accounting passes: the same figures as row by row.


def _options(name: str, counts: np.ndarray, answered: bool) -> dict[str, Any]:
    options: dict[str, Any] = {}
    if MECHANISMS[name].needs_baseline:
        rng = np.random.default_rng(9)
        # a baseline that repeats with the votes (and one that splits a row in two)
        options["baseline"] = np.round(counts * rng.choice([0.5, 0.25], size=(len(counts), 1)))
    if answered:
        options["answered"] = np.random.default_rng(3).random(len(counts) - 17) < 0.6
    return options


@pytest.mark.parametrize("answered", [False, True], ids=["expected", "answered-mask"])
@pytest.mark.parametrize("kind", ["repetitive", "distinct"])
@pytest.mark.parametrize("name", MECHANISMS)
def test_analysis_by_distinct_row_equals_row_by_row(
    name: str, kind: str, answered: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    counts = _files(kind)
    options = _options(name, counts, answered)
    grouped = _analyze(counts, name, **options)
    if kind == "repetitive":
        assert grouped.terms.distinct is not None
    monkeypatch.setattr(grouping, "CELLS", 0)
    rows = _analyze(counts, name, **options)
    assert rows.terms.distinct is None
    _same_reports(grouped, rows)


@pytest.mark.parametrize("name", ["confident-gnmax", "interactive-gnmax"])
def test_half_even_and_guaranteed_by_distinct_row(
    name: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    counts = _files("repetitive")
    options = _options(name, counts, answered=True)
    grouped = _analyze(counts, name, half_even=True, **options)
    monkeypatch.setattr(grouping, "CELLS", 0)
    _same_reports(grouped, _analyze(counts, name, half_even=True, **options))


def test_a_streamed_file_by_distinct_row_equals_row_by_row(
    tmp_path: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "votes.npy"
    np.save(path, _files("repetitive", num=5000))
    monkeypatch.setattr(votes_module, "STREAM_MIN_ROWS", 1000)
    monkeypatch.setattr(votes_module, "_BLOCK_ROWS", 700)
    votes = pate.load_votes(path)
    assert votes.distinct is not None
    assert not isinstance(votes.counts, np.ndarray)  # streamed: the release reads the rows
    grouped = _analyze(path, "confident-gnmax", answered=np.ones(4000, bool))
    monkeypatch.setattr(grouping, "CELLS", 0)
    _same_reports(grouped, _analyze(path, "confident-gnmax", answered=np.ones(4000, bool)))


@pytest.mark.parametrize("kind", ["repetitive", "distinct"])
def test_compare_by_distinct_row_equals_row_by_row(
    kind: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    counts = _files(kind)
    settings_ = [
        pate.GNMax(40),
        pate.GNMax(60),
        pate.ConfidentGNMax(200, 150, 40),
        pate.ConfidentGNMax(180, 150, 40),
        pate.LNMax(0.05),
    ]
    grouped = pate.compare(counts, settings_, delta=DELTA)
    monkeypatch.setattr(grouping, "CELLS", 0)
    assert grouped.to_dict() == pate.compare(counts, settings_, delta=DELTA).to_dict()


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    seed=st.integers(0, 2**32 - 1),
    pool=st.integers(1, 30),
    num=st.integers(1, 400),
    teachers=st.integers(1, 300),
    name=st.sampled_from(sorted(MECHANISMS)),
    answered=st.booleans(),
)
def test_property_distinct_rows_give_the_rows_figures(
    seed: int, pool: int, num: int, teachers: int, name: str, answered: bool
) -> None:
    rng = np.random.default_rng(seed)
    rows = _histograms(rng, pool, teachers)
    counts = rows[rng.integers(0, pool, num)]
    options: dict[str, Any] = {}
    if MECHANISMS[name].needs_baseline:
        options["baseline"] = np.floor(counts / 2)
    if answered:
        options["answered"] = rng.random(int(rng.integers(1, num + 1))) < 0.5
    grouped = _analyze(counts, name, **options)
    previous = grouping.CELLS
    grouping.CELLS = 0
    try:
        rows_report = _analyze(counts, name, **options)
    finally:
        grouping.CELLS = previous
    _same_reports(grouped, rows_report)


def test_distinct_rows_stand_for_the_counts() -> None:
    counts = _files("repetitive", num=100)
    held = DistinctRows.of(counts)
    assert held.shape == counts.shape and len(held) == 100
    assert np.array_equal(held[5:9], counts[5:9])
    assert np.array_equal(held[np.array([3, 1])], counts[[3, 1]])
    assert held.prefix(10).counts.sum() == 10
    assert np.array_equal(np.asarray(held.prefix(10)), counts[:10])


def test_an_exact_half_past_the_mask_still_moves_the_statistic_by_two(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A realised run's threshold sensitivity covers the rows of the queries it did not see:
    here the only exact halves of votes - baseline lie past the answered mask."""
    counts = _files("repetitive")
    baseline = np.floor(counts / 2)
    baseline[-100:] += 0.5
    options = {"baseline": baseline, "answered": np.ones(2500, bool), "half_even": True}
    grouped = _analyze(counts, "interactive-gnmax", **options)
    assert grouped.terms.distinct is not None
    assert grouped.terms.threshold_sensitivity == 2
    monkeypatch.setattr(grouping, "CELLS", 0)
    _same_reports(grouped, _analyze(counts, "interactive-gnmax", **options))


def test_mostly_distinct_rows_are_given_up_on_at_the_second_block(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """An array of distinct rows is hashed two blocks deep, not whole, then read as rows."""
    from pate_cli.votes import formats

    hashed: list[int] = []
    add = RowTable.add

    def counted(self: RowTable, block: np.ndarray) -> bool:
        hashed.append(len(block))
        return add(self, block)

    monkeypatch.setattr(RowTable, "add", counted)
    votes = pate.load_votes(_files("distinct", num=300_000))
    assert votes.distinct is None
    assert sum(hashed) == 2 * formats._GROUP_ROWS < 300_000


@pytest.mark.parametrize("classes", [2, 10, 100])
def test_a_rows_log_q_is_its_own_alone_or_among_others(classes: int) -> None:
    """Prop. 7's sum for one query has the same bits alone as beside others (a distinct row
    can be a chunk's only row): numpy sums a single column pairwise, many row after row."""
    from pate_cli.core.gnmax import logq_gnmax

    rng = np.random.default_rng(classes)
    counts = rng.multinomial(250, rng.dirichlet(np.full(classes, 0.3), size=2000)).astype(float)
    together = logq_gnmax(counts, 40.0)
    alone = np.array([logq_gnmax(counts[q : q + 1], 40.0)[0] for q in range(len(counts))])
    assert np.array_equal(alone, together)


def test_compare_with_a_baseline_by_distinct_row_equals_row_by_row(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    counts = _files("repetitive")
    settings_ = [pate.InteractiveGNMax(200, 150, 40), pate.InteractiveGNMax(180, 150, 40)]
    baseline = np.floor(counts / 2)
    grouped = pate.compare(counts, settings_, delta=DELTA, baseline=baseline)
    monkeypatch.setattr(grouping, "CELLS", 0)
    rows = pate.compare(counts, settings_, delta=DELTA, baseline=baseline)
    assert grouped.to_dict() == rows.to_dict()


@pytest.mark.parametrize("pld", [True, "exact"])
@pytest.mark.parametrize("name", ["gnmax", "confident-gnmax"])
def test_pld_figures_by_distinct_row_equal_row_by_row(
    name: str, pld: bool | str, monkeypatch: pytest.MonkeyPatch
) -> None:
    counts = _files("repetitive")
    grouped = _analyze(counts, name, pld=pld)
    assert grouped.data_dependent_pld is not None
    monkeypatch.setattr(grouping, "CELLS", 0)
    _same_reports(grouped, _analyze(counts, name, pld=pld))


@pytest.mark.parametrize("streamed", [False, True])
def test_each_distinct_row_is_validated_once(
    streamed: bool, tmp_path: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The counts rule reads the 40 distinct rows of a 5,000-row file, not its rows."""
    from pate_cli.votes import formats

    scanned: list[int] = []
    scan_blocks = formats.scan_blocks

    def counted(blocks: Any, *args: Any, **kwargs: Any) -> Any:
        def each() -> Any:
            for start, block in blocks:
                scanned.append(len(block))
                yield start, block

        return scan_blocks(each(), *args, **kwargs)

    monkeypatch.setattr(formats, "scan_blocks", counted)
    counts = _files("repetitive", num=5000)
    source: Any = counts
    if streamed:
        source = tmp_path / "votes.npy"
        np.save(source, counts)
        monkeypatch.setattr(votes_module, "STREAM_MIN_ROWS", 1000)
    votes = pate.load_votes(source)
    assert votes.distinct is not None and votes.distinct.num_rows == 40
    assert sum(scanned) == 40

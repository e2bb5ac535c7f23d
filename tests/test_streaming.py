"""Large files are read block by block; the results equal the in-memory path exactly."""

from __future__ import annotations

import json

import numpy as np
import pytest

import pate_cli.votes as votes_module
from tests.conftest import MNIST_LABELS, REFERENCE, reference_json, run_cli

CASES = [
    ("mnist_like", ["--threshold", 200, "--sigma1", 150, "--sigma", 40, "--delta", 1e-5]),
    ("svhn_like", ["--threshold", 300, "--sigma1", 200, "--sigma", 40, "--delta", 1e-6]),
    ("glyph_like", ["--threshold", 1000, "--sigma1", 500, "--sigma", 100, "--delta", 1e-8]),
    ("edge_ties_top2", ["--sigma", 40, "--delta", 1e-5]),
]


def _outputs(stem: str, flags: list, extra: list) -> dict[str, dict]:
    path = REFERENCE / f"{stem}.npy"
    return {
        "analyze": run_cli(["analyze", path, *flags, *extra, "--seed", 0, "--json"]).json,
        "inspect": run_cli(["inspect", path, *extra, "--json"]).json,
        "compare": run_cli(["compare", path, *flags, *extra, "--json"]).json,
    }


@pytest.mark.parametrize(("stem", "flags"), CASES, ids=[c[0] for c in CASES])
def test_chunked_equals_in_memory_on_reference_files(stem, flags, monkeypatch):
    in_memory = _outputs(stem, flags, [])
    monkeypatch.setattr(votes_module, "STREAM_MIN_ROWS", 1)
    monkeypatch.setattr(votes_module, "_BLOCK_ROWS", 97)  # many small, ragged blocks
    streamed = _outputs(stem, flags, [])
    assert json.dumps(streamed, sort_keys=True) == json.dumps(in_memory, sort_keys=True)
    # A prefix (--queries) streams too.
    queries = reference_json(f"{stem}.expected.json")["shape"][0] // 2 or 1
    prefix = _outputs(stem, flags, ["--queries", queries])
    monkeypatch.setattr(votes_module, "STREAM_MIN_ROWS", 10**9)
    assert json.dumps(prefix, sort_keys=True) == json.dumps(
        _outputs(stem, flags, ["--queries", queries]), sort_keys=True
    )


def test_streamed_source_reads_blocks_and_arrays(tmp_path, monkeypatch):
    counts = np.random.default_rng(0).multinomial(50, np.full(4, 0.25), size=1000).astype(np.int32)
    path = tmp_path / "votes.npy"
    np.save(path, counts)
    monkeypatch.setattr(votes_module, "STREAM_MIN_ROWS", 10)
    monkeypatch.setattr(votes_module, "_BLOCK_ROWS", 64)
    votes = votes_module.load_votes(path, queries=900)
    source = votes.counts
    assert isinstance(source, votes_module.ChunkedCounts)
    assert source.shape == (900, 4) and len(source) == 900
    np.testing.assert_array_equal(source[10:20], counts[10:20].astype(float))
    np.testing.assert_array_equal(np.asarray(source), counts[:900].astype(float))
    assert sum(len(block) for _, block in source.blocks()) == 900
    bad = counts.astype(float)
    bad[777, 2] = -2  # not -1: a whole-number array holding -1 may be labels (ambiguous)
    np.save(path, bad)
    with pytest.raises(votes_module.InputError, match="row 777, column 2 is -2; expected finite"):
        votes_module.load_votes(path)


def test_streamed_float64_checks_only_the_rows_analysed(tmp_path, monkeypatch):
    counts = np.random.default_rng(1).multinomial(30, np.full(3, 1 / 3), size=500).astype(float)
    counts[400, 1] = np.nan
    path = tmp_path / "votes.npy"
    np.save(path, counts)
    monkeypatch.setattr(votes_module, "STREAM_MIN_ROWS", 10)
    monkeypatch.setattr(votes_module, "_BLOCK_ROWS", 64)
    kept = votes_module.load_votes(path, queries=400, fmt="counts")  # the NaN is past the prefix
    np.testing.assert_array_equal(np.asarray(kept.counts), counts[:400])
    assert kept.num_teachers == 30
    with pytest.raises(votes_module.InputError, match="row 400, column 1 is nan"):
        votes_module.load_votes(path, fmt="counts")


def test_query_terms_and_costs_do_not_depend_on_threads_or_blocks(monkeypatch):
    import pate_cli.accounting as accounting
    from pate_cli.core.gnmax import rdp_gnmax
    from pate_cli.mechanisms import ConfidentGNMax

    rng = np.random.default_rng(2)
    counts = rng.multinomial(250, rng.dirichlet(np.full(10, 0.3), size=20_000)).astype(float)
    mechanism = ConfidentGNMax(threshold=200.0, sigma1=150.0, sigma=40.0)
    one = accounting.query_terms(counts, mechanism, chunk_size=999, workers=1)
    two = accounting.query_terms(counts, mechanism, chunk_size=999, workers=2)
    whole = accounting.query_terms(counts, mechanism, chunk_size=10**6, workers=1)
    for terms in (two, whole):
        assert terms.logq.tobytes() == one.logq.tobytes()
        assert terms.log_pr_answered.tobytes() == one.log_pr_answered.tobytes()

    orders = np.array([2.0, 14.0, 100.0])
    weights = [None, np.exp(one.log_pr_answered)]

    def cost(logq):
        return rdp_gnmax(logq, 40.0, orders)

    direct = accounting.weighted_costs(one.logq, weights, cost, workers=1)
    monkeypatch.setattr(accounting, "_DISTINCT_BLOCK", 1000)  # two stages, 20 blocks
    staged = [accounting.weighted_costs(one.logq, weights, cost, workers=w) for w in (1, 3)]
    assert staged[0].tobytes() == staged[1].tobytes()
    assert staged[0][0].tobytes() == direct[0].tobytes()  # integer weights: exact
    np.testing.assert_allclose(staged[0][1], direct[1], rtol=1e-13)


LABELS_CASES = [
    ["--gamma", 0.1, "--delta", 1e-5],
    ["--threshold", 200, "--sigma1", 150, "--sigma", 40, "--delta", 1e-5],
]


@pytest.mark.parametrize("flags", LABELS_CASES, ids=["lnmax", "confident"])
def test_streamed_labels_equal_in_memory(flags, monkeypatch):
    """(M, Q) labels stream by blocks of queries: M reads per block, counted block by block."""
    path = MNIST_LABELS
    extra = ["--queries", 5000]
    in_memory = _outputs_of(path, flags, [])
    prefix = _outputs_of(path, flags, extra)
    monkeypatch.setattr(votes_module, "STREAM_MIN_ROWS", 1)
    monkeypatch.setattr(votes_module, "_BLOCK_ROWS", 97)
    monkeypatch.setattr(votes_module, "_BLOCK_CELLS", 250 * 41)  # sub-blocks of 41 queries
    loaded = votes_module.load_votes(path)
    assert isinstance(loaded.counts, votes_module.ChunkedLabels)
    assert loaded.format is votes_module.VoteFormat.LABELS and loaded.detected
    assert json.dumps(_outputs_of(path, flags, []), sort_keys=True) == json.dumps(
        in_memory, sort_keys=True
    )
    assert json.dumps(_outputs_of(path, flags, extra), sort_keys=True) == json.dumps(
        prefix, sort_keys=True
    )


def _outputs_of(path, flags: list, extra: list) -> dict[str, dict]:
    return {
        "analyze": run_cli(["analyze", path, *flags, *extra, "--no-release", "--json"]).json,
        "inspect": run_cli(["inspect", path, *extra, "--json"]).json,
    }


@pytest.mark.parametrize(
    ("value", "fmt", "num_classes", "message"),
    [
        (
            7,
            "labels",
            5,
            r"teacher 3 for query 700 is 7; expected integer class labels in \[0, 5\)",
        ),
        (2.5, "auto", None, r"votes rows sum to different totals .*detected --format counts"),
        (np.nan, "labels", None, r"teacher 3 for query 700 is nan; expected integer class labels"),
        (-2, "labels", None, r"teacher 3 for query 700 is -2; expected integer class labels"),
        # C = 1e300 + 1 rounds to 1e300 as a float, so the label is not below it; the
        # streamed path once named the class count instead.
        (1e300, "labels", None, r"teacher 3 for query 700 is 1e\+300; expected integer class"),
    ],
)
def test_streamed_labels_are_validated(tmp_path, monkeypatch, value, fmt, num_classes, message):
    labels = np.random.default_rng(3).integers(0, 5, size=(6, 1000)).astype(float)
    labels[3, 700] = value
    labels[5, 900] = value  # only the first is named
    path = tmp_path / "labels.npy"
    np.save(path, labels)
    with pytest.raises(votes_module.InputError, match=message) as in_memory:
        votes_module.load_votes(path, fmt=fmt, num_classes=num_classes)
    monkeypatch.setattr(votes_module, "STREAM_MIN_ROWS", 10)
    monkeypatch.setattr(votes_module, "_BLOCK_ROWS", 64)
    with pytest.raises(votes_module.InputError) as streamed:
        votes_module.load_votes(path, fmt=fmt, num_classes=num_classes)
    assert streamed.value.message == in_memory.value.message


def test_streamed_labels_check_num_classes_on_the_selected_queries_only(tmp_path, monkeypatch):
    """As in memory: --num-classes bounds the queries kept; a label past the prefix is fine."""
    labels = np.zeros((3, 500), dtype=np.uint8)
    labels[1, 300] = 4  # outside [0, 2), but past --queries 200
    path = tmp_path / "labels.npy"
    np.save(path, labels)
    expected = votes_module.load_votes(path, fmt="labels", num_classes=2, queries=200)
    monkeypatch.setattr(votes_module, "STREAM_MIN_ROWS", 10)
    monkeypatch.setattr(votes_module, "_BLOCK_ROWS", 64)
    streamed = votes_module.load_votes(path, fmt="labels", num_classes=2, queries=200)
    assert isinstance(streamed.counts, votes_module.ChunkedLabels)
    np.testing.assert_array_equal(np.asarray(streamed.counts), expected.counts)
    with pytest.raises(votes_module.InputError, match="teacher 1 for query 300 is 4"):
        votes_module.load_votes(path, fmt="labels", num_classes=2)

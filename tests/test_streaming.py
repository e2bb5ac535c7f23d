"""Large files (.npy, and the array of an .npz) are read block by block; the results equal the
in-memory path exactly."""

from __future__ import annotations

import json

import numpy as np
import pytest

import pate_cli.votes as votes_module
from pate_cli.votes import stream
from pate_cli.votes.reader import open_array
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
    import pate_cli.accountant.compose as accounting
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


LABELS_READING = ["--teachers", 250]  # 250 x 9000 labels read both ways: 250 teachers
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
    loaded = votes_module.load_votes(path, teachers=250)
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
        "analyze": run_cli(
            ["analyze", path, *LABELS_READING, *flags, *extra, "--no-release", "--json"]
        ).json,
        "inspect": run_cli(["inspect", path, *LABELS_READING, *extra, "--json"]).json,
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
        (
            2.5,
            "auto",
            None,
            r"votes rows sum to different totals .*read as counts, the format detected",
        ),
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


# --- .npz: the array of an archive streams like a .npy ---------------------------------------


def _npz_cases(rng: np.random.Generator) -> dict[str, np.ndarray]:
    return {
        "counts": rng.multinomial(50, np.full(4, 0.25), size=1000).astype(np.int32),
        "labels": rng.integers(0, 5, size=(6, 1000)).astype(np.uint8),
        "soft": rng.multinomial(200, np.full(3, 1 / 3), size=1000) / 4,
    }


@pytest.mark.parametrize("saver", [np.savez, np.savez_compressed], ids=["stored", "deflated"])
@pytest.mark.parametrize("kind", ["counts", "labels", "soft"])
def test_streamed_npz_equals_in_memory(tmp_path, monkeypatch, saver, kind):
    array = _npz_cases(np.random.default_rng(5))[kind]
    path = tmp_path / "votes.npz"
    saver(path, votes=array)
    # Labels read both ways (6 teachers x 1000 queries, or 1000 x 6): --teachers picks.
    reading = {"teachers": 6} if kind == "labels" else {}
    in_memory = votes_module.load_votes(path, **reading)
    assert isinstance(in_memory.counts, np.ndarray)
    monkeypatch.setattr(votes_module, "STREAM_MIN_ROWS", 10)
    monkeypatch.setattr(votes_module, "_BLOCK_ROWS", 64)
    monkeypatch.setattr(votes_module, "_BLOCK_CELLS", 6 * 41)  # labels: blocks of 41 queries
    streamed = votes_module.load_votes(path, **reading)
    expected_type = votes_module.ChunkedLabels if kind == "labels" else votes_module.ChunkedCounts
    assert type(streamed.counts) is expected_type
    assert isinstance(streamed.counts._source, stream.InflatedTiles)
    np.testing.assert_array_equal(np.asarray(streamed.counts), in_memory.counts)
    np.testing.assert_array_equal(streamed.counts[37:501], in_memory.counts[37:501])  # ragged
    for name in ("format", "detected", "num_teachers", "num_classes", "warnings", "layout"):
        assert getattr(streamed, name) == getattr(in_memory, name), name
    if kind == "soft":
        assert "votes hold fractional values (soft votes" in streamed.warnings[0]
    prefix = votes_module.load_votes(path, queries=700, **reading)
    np.testing.assert_array_equal(np.asarray(prefix.counts), in_memory.counts[:700])
    # A .npy of the same array, streamed, reads the same.
    np.save(tmp_path / "votes.npy", array)
    npy = votes_module.load_votes(tmp_path / "votes.npy", **reading)
    np.testing.assert_array_equal(np.asarray(npy.counts), in_memory.counts)


def test_streamed_npz_gives_the_reports_of_the_npy(tmp_path, monkeypatch):
    """A reference file, saved as a compressed .npz and streamed in ragged blocks: every
    number of analyze, inspect and compare is the in-memory .npy's."""
    stem, flags = CASES[0]
    path = tmp_path / f"{stem}.npz"
    np.savez_compressed(path, votes=np.load(REFERENCE / f"{stem}.npy"))
    in_memory = _outputs(stem, flags, [])
    monkeypatch.setattr(votes_module, "STREAM_MIN_ROWS", 1)
    monkeypatch.setattr(votes_module, "_BLOCK_ROWS", 97)
    streamed = {
        "analyze": run_cli(["analyze", path, *flags, "--seed", 0, "--json"]).json,
        "inspect": run_cli(["inspect", path, "--json"]).json,
        "compare": run_cli(["compare", path, *flags, "--json"]).json,
    }
    for report in (*in_memory.values(), *streamed.values()):
        report["input"].pop("path")
        report["input"].pop("sha256")
    assert json.dumps(streamed, sort_keys=True) == json.dumps(in_memory, sort_keys=True)


def test_inflated_tiles_read_any_window(tmp_path):
    array = np.random.default_rng(6).integers(-1, 9, size=(53, 71)).astype(np.int16)
    path = tmp_path / "votes.npz"
    np.savez_compressed(path, votes=array)
    tiles = stream.InflatedTiles(open_array(path, "votes"), band_rows=7, tile_columns=11)
    assert (tiles.band_rows, tiles.tile_columns, tiles.shape) == (7, 11, (53, 71))
    rng = np.random.default_rng(7)
    for _ in range(50):
        r0, r1 = sorted(int(n) for n in rng.integers(0, 54, size=2))
        c0, c1 = sorted(int(n) for n in rng.integers(0, 72, size=2))
        np.testing.assert_array_equal(tiles.read(slice(r0, r1), slice(c0, c1)), array[r0:r1, c0:c1])
    np.testing.assert_array_equal(tiles.rows(3, 40), array[3:40].astype(float))
    np.testing.assert_array_equal(tiles.columns(60, 71), array[:, 60:71])


def test_inflated_tiles_hold_about_the_archive(tmp_path):
    """Counts compress: the tiles of 1.6 MB of int64 counts hold about what the archive does."""
    counts = np.random.default_rng(8).multinomial(250, np.full(10, 0.1), size=20_000)
    path = tmp_path / "votes.npz"
    np.savez_compressed(path, votes=counts)
    tiles = stream.InflatedTiles(open_array(path, "votes"), band_rows=4096, tile_columns=10)
    archive = path.stat().st_size
    assert counts.nbytes == 1_600_000 and archive < 400_000
    assert tiles.nbytes < 1.5 * archive


@pytest.mark.parametrize("stream_min_rows", [10**9, 10], ids=["in memory", "streamed"])
def test_a_damaged_npz_is_refused_on_both_paths(tmp_path, monkeypatch, stream_min_rows):
    counts = np.random.default_rng(9).multinomial(50, np.full(4, 0.25), size=1000)
    path = tmp_path / "votes.npz"
    np.savez(path, votes=counts)  # stored: a flipped byte shows only in the CRC-32
    data = bytearray(path.read_bytes())
    data[len(data) // 2] ^= 0xFF
    path.write_bytes(bytes(data))
    monkeypatch.setattr(votes_module, "STREAM_MIN_ROWS", stream_min_rows)
    with pytest.raises(votes_module.InputError, match=r"corrupt \.npz archive \(Bad CRC-32"):
        votes_module.load_votes(path)

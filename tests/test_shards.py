"""VOTES as a folder of shards: read as the concatenation of its shards' queries, in
file-name order, with every figure of the single file; bad folders refused in one line;
the folder's digest, records, verify and budgets as with a file."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import scipy.sparse

import pate_cli.votes as votes_module
from pate_cli.errors import ExitCode
from pate_cli.votes import file_sha256, load_votes
from tests.conftest import MNIST, MNIST_LABELS, SAMPLE, run_cli

NEXT_TOKEN = SAMPLE / "next_token_votes.npz"
DELTA = ["--delta", 1e-5]
CONFIDENT = ["--threshold", 200, "--sigma1", 150, "--sigma", 40]


def _split(array: np.ndarray, folder: Path, cuts: list[int], axis: int = 0) -> Path:
    """Save ``array`` cut along ``axis`` at ``cuts`` as shards s0.npy, s1.npy, ..."""
    folder.mkdir()
    for i, part in enumerate(np.split(array, cuts, axis=axis)):
        np.save(folder / f"s{i}.npy", part)
    return folder


@pytest.fixture
def counts_folder(tmp_path: Path) -> Path:
    """The MNIST counts in three shards of unequal size."""
    return _split(np.load(MNIST), tmp_path / "counts", [200, 5000])


def _figures(payload: dict) -> dict:
    """Everything a report says but what it read (the ``input`` block)."""
    return {key: value for key, value in payload.items() if key != "input"}


def _same_figures(command: list, folder: Path, single: Path, *extra) -> dict:
    """The command's JSON on the folder and on the single file: every figure equal."""
    on_folder = run_cli([command[0], folder, *command[1:], *extra, "--json"]).json
    on_file = run_cli([command[0], single, *command[1:], *extra, "--json"]).json
    assert _figures(on_folder) == _figures(on_file)
    return on_folder


COMMANDS = [
    pytest.param(["analyze", "--sigma", 40, *DELTA, "--seed", 3], id="analyze"),
    pytest.param(
        ["smooth-sensitivity", *CONFIDENT, "--queries", 640, *DELTA, "--seed", 3], id="smooth"
    ),
    pytest.param(
        ["compare", "--threshold", "150,200", "--sigma1", 150, "--sigma", 40, *DELTA],
        id="compare",
    ),
    pytest.param(["inspect"], id="inspect"),
]


@pytest.mark.parametrize("command", COMMANDS)
def test_counts_folder_reads_as_the_single_file(command, counts_folder):
    out = _same_figures(command, counts_folder, MNIST)
    summary = out["input"]
    assert summary["source"] == "folder" and summary["shards"] == 3
    assert summary["path"] == str(counts_folder) and summary["num_file_queries"] == 9000
    assert summary["sha256"] == file_sha256(counts_folder) != file_sha256(MNIST)


def test_aggregate_on_a_folder_writes_the_single_file_labels(counts_folder, tmp_path):
    outputs = []
    for i, votes in enumerate((counts_folder, MNIST)):
        out = tmp_path / f"labels{i}.npy"
        args = ["aggregate", votes, *CONFIDENT, *DELTA, "--queries", 640, "--seed", 7]
        outputs.append(run_cli([*args, "--output", out, "--json"]).json)
        outputs[-1]["labels"] = np.load(out).tolist()
        del outputs[-1]["output"]  # where each run wrote its labels
    assert _figures(outputs[0]) == _figures(outputs[1])


def test_plan_on_a_folder_of_pilot_votes(counts_folder):
    args = ["plan", *DELTA, "--epsilon", 4, "--threshold", 200, "--sigma1", 150]
    on_folder = run_cli([*args, "--votes", counts_folder, "--json"]).json
    on_file = run_cli([*args, "--votes", MNIST, "--json"]).json
    assert on_folder.pop("votes_looked_at") == str(counts_folder)
    on_file.pop("votes_looked_at")
    assert json.dumps(on_folder).replace(str(counts_folder), "") == json.dumps(on_file).replace(
        str(MNIST), ""
    )


def test_labels_folder_split_along_queries(tmp_path):
    folder = _split(np.load(MNIST_LABELS), tmp_path / "labels", [3000, 5500], axis=1)
    out = _same_figures(["analyze", "--sigma", 40, *DELTA, "--no-release"], folder, MNIST_LABELS)
    assert out["input"]["format"] == "labels" and out["input"]["num_teachers"] == 250


def test_sparse_folder_reads_as_the_sparse_file(tmp_path):
    matrix = scipy.sparse.load_npz(NEXT_TOKEN).tocsr()
    folder = tmp_path / "sparse"
    folder.mkdir()
    for i, (a, b) in enumerate([(0, 1000), (1000, 1001), (1001, matrix.shape[0])]):
        scipy.sparse.save_npz(folder / f"part{i}.npz", matrix[a:b])
    command = ["analyze", "--sigma", 40, *DELTA, "--no-release", "--queries", 1500]
    out = _same_figures(command, folder, NEXT_TOKEN)
    assert out["input"]["shards"] == 3 and out["input"]["num_classes"] == matrix.shape[1]


@pytest.mark.parametrize("selection", [["--queries", 201], ["--queries", 5001]])
def test_queries_across_shard_boundaries(selection, counts_folder):
    _same_figures(
        ["analyze", "--sigma", 40, *DELTA, "--no-release"], counts_folder, MNIST, *selection
    )


def test_indices_across_shard_boundaries(counts_folder, tmp_path):
    indices = tmp_path / "indices.npy"
    np.save(indices, np.array([8999, 0, 199, 200, 4999, 5000, 17, 6000]))
    command = ["analyze", "--sigma", 40, *DELTA, "--no-release", "--indices", indices]
    out = _same_figures(command, counts_folder, MNIST)
    assert out["input"]["num_queries"] == 8


def test_library_reads_the_folder_as_the_concatenation(counts_folder):
    votes = load_votes(counts_folder, queries=5003)
    assert votes.shards == 3 and votes.path == str(counts_folder)
    np.testing.assert_array_equal(np.asarray(votes.counts), np.load(MNIST)[:5003])


@pytest.mark.parametrize("stem", ["counts", "labels"])
def test_streamed_folder_gives_the_same_figures(stem, tmp_path, monkeypatch):
    if stem == "counts":
        single, folder = MNIST, _split(np.load(MNIST), tmp_path / stem, [200, 5000])
    else:
        single, folder = MNIST_LABELS, _split(np.load(MNIST_LABELS), tmp_path / stem, [4000], 1)
    command = ["analyze", "--sigma", 40, *DELTA, "--no-release"]
    in_memory = run_cli([command[0], folder, *command[1:], "--json"]).json
    monkeypatch.setattr(votes_module, "STREAM_MIN_ROWS", 100)
    monkeypatch.setattr(votes_module, "_BLOCK_ROWS", 97)  # blocks that straddle the shards
    streamed = _same_figures(command, folder, single)
    assert _figures(streamed) == _figures(in_memory)
    assert streamed["input"] == in_memory["input"]


def test_streamed_folder_is_read_by_blocks_across_shards(counts_folder, monkeypatch):
    monkeypatch.setattr(votes_module, "STREAM_MIN_ROWS", 100)
    monkeypatch.setattr(votes_module, "_BLOCK_ROWS", 97)
    votes = load_votes(counts_folder, queries=5100)
    assert isinstance(votes.counts, votes_module.ChunkedCounts)
    np.testing.assert_array_equal(votes.counts[150:260], np.load(MNIST)[150:260])
    np.testing.assert_array_equal(np.asarray(votes.counts), np.load(MNIST)[:5100])


def _refused(folder: Path, *words: str) -> str:
    result = run_cli(["analyze", folder, "--sigma", 40, *DELTA], expect=ExitCode.BAD_INPUT)
    message = result.stderr.strip()
    assert len(message.splitlines()) == 1 and "Traceback" not in result.stderr
    assert message.startswith(f"pate: error: {folder}")
    for word in words:
        assert word in message
    return message


def test_bad_folders_are_one_line(counts_folder, tmp_path):
    empty = tmp_path / "empty"
    empty.mkdir()
    _refused(empty, "empty folder")
    (counts_folder / "notes.txt").write_text("hello")
    _refused(counts_folder, "notes.txt is not a .npy or .npz file", "holds only its shards")
    (counts_folder / "notes.txt").unlink()
    np.save(counts_folder / "s3.npy", np.load(MNIST)[:10])  # votes, but not named a shard
    (counts_folder / "s3.npy").rename(counts_folder / "s3.npy.old")
    _refused(counts_folder, "s3.npy.old is not a .npy or .npz file")
    (counts_folder / "s3.npy.old").unlink()
    (counts_folder / "more").mkdir()
    _refused(counts_folder, "more", "sub-folder")


def test_shards_that_read_otherwise_are_named(counts_folder):
    counts = np.load(MNIST)
    np.save(counts_folder / "s3.npy", np.hstack([counts[:300], counts[:300, :1] * 0]))
    _refused(counts_folder, "shard s3.npy has classes 11", "shard s0.npy 10")
    np.save(counts_folder / "s3.npy", np.load(MNIST_LABELS)[:, :3000])  # labels
    _refused(counts_folder, "shard s3.npy reads as labels", "shard s0.npy as counts")
    np.save(counts_folder / "s3.npy", counts[:300].astype(np.int64))
    _refused(counts_folder, "shard s3.npy is stored as int64", "as float64")
    (counts_folder / "s3.npy").unlink()
    scipy.sparse.save_npz(counts_folder / "s3.npz", scipy.sparse.csr_matrix(counts[:300]))
    _refused(counts_folder, "shard s3.npz reads as sparse counts")


def test_dense_shard_among_sparse_ones_is_named(tmp_path):
    folder = tmp_path / "sparse"
    folder.mkdir()
    counts = np.load(MNIST)[:300]
    scipy.sparse.save_npz(folder / "a.npz", scipy.sparse.csr_matrix(counts))
    np.save(folder / "b.npy", counts)
    _refused(folder, "shard b.npy reads as dense", "shard a.npz as sparse counts")


def test_digest_follows_bytes_names_and_order(counts_folder):
    before = file_sha256(counts_folder)
    shard = counts_folder / "s1.npy"
    data = np.load(shard)
    data[0, [0, 1]] = data[0, [1, 0]]  # the same sums, other votes
    np.save(shard, data)
    edited = file_sha256(counts_folder)
    assert edited != before
    (counts_folder / "s1.npy").rename(counts_folder / "s1b.npy")  # same order, other name
    renamed = file_sha256(counts_folder)
    assert renamed not in (before, edited)
    (counts_folder / "s0.npy").rename(counts_folder / "s9.npy")  # same names' bytes, reordered
    assert file_sha256(counts_folder) not in (before, edited, renamed)


def test_record_then_verify_with_the_folder(counts_folder, tmp_path):
    record = tmp_path / "run.record.json"
    args = ["aggregate", counts_folder, *CONFIDENT, *DELTA, "--queries", 640, "--seed", 1]
    run_cli([*args, "--output", tmp_path / "labels.npy", "--record", record, "--json"])
    saved = json.loads(record.read_text())
    assert saved["inputs"]["votes"]["sha256"] == file_sha256(counts_folder)
    passed = run_cli(["verify", record, "--votes", counts_folder, "--json"]).json
    assert not passed["differs"]
    shard = counts_folder / "s2.npy"
    data = np.load(shard)
    data[-1, [0, 1]] = data[-1, [1, 0]]  # a query the run did not read: only the digest
    np.save(shard, data)
    differs = ExitCode.BUDGET_EXCEEDED  # verify: something differs
    failed = run_cli(["verify", record, "--votes", counts_folder, "--json"], expect=differs).json
    assert "sha256 of votes" in failed["differs"]


def test_budget_charges_and_replays_a_folder(counts_folder, tmp_path):
    budget = tmp_path / "budget.jsonl"
    run_cli(["budget", "init", budget, *DELTA, "--max-epsilon", 100, "--json"])
    releases = tmp_path / "releases"
    releases.mkdir()
    args = ["analyze", counts_folder, "--sigma", 40, *DELTA, "--queries", 20, "--no-release"]
    run_cli([*args, "--record", releases / "record.json", "--budget", budget, "--json"])
    check = ["verify", budget, "--records", releases, "--votes", counts_folder, "--json"]
    report = run_cli(check).json
    replayed = {c["name"]: c for c in report["checks"]}["records replayed"]
    assert replayed["status"] == "verified" and replayed["detail"].startswith("charge 1 recomputed")
    (counts_folder / "s0.npy").rename(counts_folder / "t0.npy")  # same bytes, another order
    report = run_cli(check, expect=ExitCode.NOT_CHECKED).json
    unplayed = {c["name"]: c for c in report["checks"]}["records not replayed"]
    assert "none of the votes given is the file they read" in unplayed["detail"]

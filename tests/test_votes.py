"""Tests for ``pate_cli.votes``: formats, detection, selection, baselines, masks, rejections."""

from __future__ import annotations

import builtins
import hashlib
import itertools
import os
import stat
import zipfile
from pathlib import Path

import numpy as np
import pytest

from pate_cli.errors import InputError, PateError, UsageError
from pate_cli.votes import (
    VoteFormat,
    Votes,
    file_sha256,
    load_answered_mask,
    load_array,
    load_baseline,
    load_votes,
    save_npy_atomic,
)
from pate_cli.votes import reader as votes_reader
from pate_cli.votes.formats import QUERY_AXIS, BlockScan, scan_blocks
from tests.conftest import deadline

ROOT = Path(__file__).resolve().parents[1]
SAMPLE_COUNTS = ROOT / "sample_data" / "mnist_250_teachers.npy"
SAMPLE_INDICES = ROOT / "sample_data" / "mnist_250_teachers_100_indices_used_by_student.npy"
REFERENCE = ROOT / "tests" / "data" / "reference"

COUNTS = np.array([[3.0, 1.0, 0.0], [0.0, 4.0, 0.0], [2.0, 1.0, 1.0], [1.0, 1.0, 2.0]])  # M = 4
LABELS = np.array([[0, 1, 2, 1, 0], [1, 1, 2, 0, 0], [0, 2, 2, 1, 1]], dtype=np.int32)  # 3 x 5


# These tests pin the command line's words (tests/test_spelling.py checks Python's).
pytestmark = pytest.mark.usefixtures("on_the_command_line")


def save(tmp_path: Path, name: str, array: object) -> str:
    """Save ``array`` as ``tmp_path/name`` and return the path as a user would type it."""
    path = str(tmp_path / name)
    np.save(path, np.asarray(array), allow_pickle=False)
    return path


def write_bytes(tmp_path: Path, name: str, data: bytes) -> str:
    path = tmp_path / name
    path.write_bytes(data)
    return str(path)


def npy_bytes(array: np.ndarray) -> bytes:
    from io import BytesIO

    buffer = BytesIO()
    np.save(buffer, array, allow_pickle=False)
    return buffer.getvalue()


def huge_header(shape: tuple[int, ...]) -> bytes:
    """A valid .npy header declaring ``shape`` of float64, followed by 16 bytes of data."""
    from io import BytesIO

    buffer = BytesIO()
    header = {"descr": "<f8", "fortran_order": False, "shape": shape}
    np.lib.format.write_array_header_1_0(buffer, header)
    return buffer.getvalue() + b"\0" * 16


def naive_counts(labels: np.ndarray, num_classes: int) -> np.ndarray:
    counts = np.zeros((labels.shape[1], num_classes))
    for teacher in range(labels.shape[0]):
        for query in range(labels.shape[1]):
            counts[query, int(labels[teacher, query])] += 1
    return counts


def check_error(excinfo: pytest.ExceptionInfo[PateError], path: str) -> str:
    """The contract of every message: one line, starting with the path as given."""
    message = str(excinfo.value)
    assert "\n" not in message and "\r" not in message
    assert message.startswith(f"{path}:"), message
    assert path in message
    return message


# --- formats and detection ------------------------------------------------------------------


@pytest.mark.parametrize("dtype", [np.float64, np.int64, np.float32, np.uint16])
def test_counts_detected(tmp_path: Path, dtype: type) -> None:
    path = save(tmp_path, "votes.npy", COUNTS.astype(dtype))
    votes = load_votes(path)
    assert (votes.format, votes.detected) == (VoteFormat.COUNTS, True)
    assert (votes.num_teachers, votes.num_classes, votes.num_queries) == (4, 3, 4)
    assert votes.num_file_queries == 4 and votes.selection is None and votes.warnings == ()
    assert votes.counts.dtype == np.float64 and votes.counts.flags.c_contiguous
    np.testing.assert_array_equal(votes.counts, COUNTS)
    assert votes.path == path


def test_forced_format_is_not_detected(tmp_path: Path) -> None:
    votes = load_votes(save(tmp_path, "votes.npy", COUNTS), fmt=VoteFormat.COUNTS)
    assert (votes.format, votes.detected) == (VoteFormat.COUNTS, False)
    votes = load_votes(save(tmp_path, "labels.npy", LABELS), fmt="labels")
    assert (votes.format, votes.detected) == (VoteFormat.LABELS, False)


def test_labels_detected_and_converted(tmp_path: Path) -> None:
    # Labels read both ways (3 teachers x 5 queries, or 5 x 3 saved queries x teachers):
    # --teachers picks the layout (tests/test_labels_layout.py).
    votes = load_votes(save(tmp_path, "labels.npy", LABELS), teachers=3)
    assert (votes.format, votes.detected) == (VoteFormat.LABELS, True)
    assert (votes.num_teachers, votes.num_classes, votes.num_queries) == (3, 3, 5)
    np.testing.assert_array_equal(votes.counts, naive_counts(LABELS, 3))


@pytest.mark.parametrize("seed", range(5))
def test_labels_conversion_equals_naive_loop(tmp_path: Path, seed: int) -> None:
    rng = np.random.default_rng(seed)
    labels = rng.integers(0, 7, size=(int(rng.integers(1, 12)), int(rng.integers(1, 30))))
    votes = load_votes(save(tmp_path, "labels.npy", labels), fmt="labels", num_classes=9)
    assert votes.num_classes == 9
    np.testing.assert_array_equal(votes.counts, naive_counts(labels, 9))


def test_labels_as_integral_floats(tmp_path: Path) -> None:
    votes = load_votes(save(tmp_path, "labels.npy", LABELS.astype(np.float64)), fmt="labels")
    np.testing.assert_array_equal(votes.counts, naive_counts(LABELS, 3))


def test_labels_with_equal_row_sums_are_counts(tmp_path: Path) -> None:
    # README, "Inputs": a 2-D integer array whose rows share a positive sum is counts.
    array = np.array([[1, 2, 0], [0, 0, 3]])
    assert load_votes(save(tmp_path, "votes.npy", array)).format is VoteFormat.COUNTS


# Twelve labels say nothing about their layout: no agreement shows above chance.
UNDECIDED = "the labels do not decide it: they agree by column 0.000 (chance 1.000) and by row"


def test_integer_rows_with_different_sums_are_labels(tmp_path: Path) -> None:
    # Labels as long as they imply no more classes than teachers and queries (README); they
    # read both ways whatever the shape (it was labels of 3 teachers, the fewer rows than
    # columns), twelve labels do not decide it, and --teachers picks the layout.
    array = np.array([[1, 2, 0, 2], [0, 0, 2, 1], [2, 1, 1, 2]])
    path = save(tmp_path, "votes.npy", array)
    with pytest.raises(InputError) as excinfo:
        load_votes(path)
    assert check_error(excinfo, path) == (
        f"{path}: cannot tell the format: it could be labels of 3 teachers x 4 queries (3 "
        "classes; pass --format labels), or labels of 4 teachers x 3 queries saved as queries "
        f"x teachers (3 classes; pass --format labels --teachers 4); {UNDECIDED} 0.143 (chance "
        "1.000)"
    )
    votes = load_votes(path, teachers=3)
    assert votes.format is VoteFormat.LABELS and votes.num_classes == 3
    assert (votes.num_teachers, votes.num_queries, votes.layout) == (3, 4, "teachers x queries")
    np.testing.assert_array_equal(votes.counts, naive_counts(array, 3))


def test_square_labels_are_ambiguous_in_orientation(tmp_path: Path) -> None:
    array = np.array([[1, 2, 0], [0, 0, 2], [2, 1, 1]])
    path = save(tmp_path, "votes.npy", array)
    with pytest.raises(InputError) as excinfo:
        load_votes(path)
    assert check_error(excinfo, path) == (
        f"{path}: cannot tell the format: it could be labels of 3 teachers x 3 queries (3 "
        "classes; pass --format labels), or labels of 3 teachers x 3 queries saved as queries "
        "x teachers (3 classes; save the array transposed, as (teachers, queries)); "
        f"{UNDECIDED} 0.333 (chance 1.000)"
    )
    votes = load_votes(path, fmt="labels")
    np.testing.assert_array_equal(votes.counts, naive_counts(array, 3))


def test_integer_rows_with_different_sums_and_many_classes_are_ambiguous(tmp_path: Path) -> None:
    path = save(tmp_path, "votes.npy", np.array([[1, 2, 0], [0, 0, 4]]))  # 5 classes, 2 rows
    with pytest.raises(InputError) as excinfo:
        load_votes(path)
    assert check_error(excinfo, path) == (
        f"{path}: cannot tell the format: it could be labels (2 teachers, 3 queries, 5 classes: "
        "more classes than teachers or queries; pass --format labels), or counts of 2 queries x "
        "3 classes with abstaining teachers (rows summing to 3 to 4; pass --format counts "
        "--teachers M, M at least 4)"
    )


def test_probs_detected_and_argmax_first_maximum(tmp_path: Path) -> None:
    scores = np.array(
        [
            [[0.1, 0.7, 0.2], [0.5, 0.5, 0.0]],  # the tie votes for class 0
            [[0.6, 0.3, 0.1], [0.0, 0.2, 0.8]],
        ]
    )
    votes = load_votes(save(tmp_path, "probs.npy", scores))
    assert (votes.format, votes.detected) == (VoteFormat.PROBS, True)
    assert (votes.num_teachers, votes.num_classes, votes.num_queries) == (2, 3, 2)
    np.testing.assert_array_equal(votes.counts, [[1, 1, 0], [1, 0, 1]])


def test_probs_random_equals_naive_argmax(tmp_path: Path) -> None:
    scores = np.random.default_rng(1).normal(size=(6, 8, 4))
    votes = load_votes(save(tmp_path, "probs.npy", scores), fmt="probs", num_classes=4)
    np.testing.assert_array_equal(votes.counts, naive_counts(scores.argmax(axis=2), 4))


@pytest.mark.parametrize("saver", [np.savez, np.savez_compressed])
def test_npz_with_one_array(tmp_path: Path, saver: object) -> None:
    path = str(tmp_path / "votes.npz")
    saver(path, votes=COUNTS)  # type: ignore[operator]
    votes = load_votes(path)
    np.testing.assert_array_equal(votes.counts, COUNTS)
    assert votes.format is VoteFormat.COUNTS


def test_format_by_magic_not_extension(tmp_path: Path) -> None:
    path = write_bytes(tmp_path, "votes.dat", npy_bytes(COUNTS))
    np.testing.assert_array_equal(load_votes(path).counts, COUNTS)


def test_fortran_order_and_big_endian(tmp_path: Path) -> None:
    path = save(tmp_path, "f.npy", np.asfortranarray(COUNTS).astype(">f8"))
    votes = load_votes(path)
    np.testing.assert_array_equal(votes.counts, COUNTS)
    assert votes.counts.flags.c_contiguous


def test_path_object_and_sha256(tmp_path: Path) -> None:
    path = Path(save(tmp_path, "votes.npy", COUNTS))
    votes = load_votes(path)
    expected = hashlib.sha256(path.read_bytes()).hexdigest()
    assert votes.sha256 == expected == file_sha256(path)
    assert votes.path == str(path)


def test_teachers_override_warns_on_disagreeing_rows(tmp_path: Path) -> None:
    array = COUNTS.copy()
    array[1, 1] = 3.5
    path = save(tmp_path, "votes.npy", array)
    votes = load_votes(path, teachers=4)
    assert votes.format is VoteFormat.COUNTS and votes.num_teachers == 4
    assert len(votes.warnings) == 2 and "1 of 4" in votes.warnings[0]
    assert votes.warnings[1] == (
        f"{path}: votes hold fractional values (soft votes; row 1, column 1 is 3.5): they are "
        "analysed as counts, as they are; the smooth-sensitivity release needs whole counts"
    )


def test_teachers_override_keeps_integer_counts_as_counts(tmp_path: Path) -> None:
    array = np.array([[1, 2, 0], [0, 0, 4]])  # labels-like without --teachers
    votes = load_votes(save(tmp_path, "votes.npy", array), teachers=4)
    assert (votes.format, votes.num_teachers, votes.num_classes) == (VoteFormat.COUNTS, 4, 3)
    assert len(votes.warnings) == 1 and votes.warnings[0].startswith(votes.path)


def test_counts_are_read_only(tmp_path: Path) -> None:
    votes = load_votes(save(tmp_path, "votes.npy", COUNTS))
    with pytest.raises(ValueError):
        votes.counts[0, 0] = 1.0


def test_teachers_picks_the_layout_of_labels(tmp_path: Path) -> None:
    # --teachers of labels picks a layout; one of neither is an error (it was a note).
    path = save(tmp_path, "labels.npy", LABELS)
    votes = load_votes(path, fmt="labels", teachers=5)
    assert (votes.num_teachers, votes.num_queries, votes.layout) == (5, 3, "queries x teachers")
    np.testing.assert_array_equal(votes.counts, naive_counts(LABELS.T, 3))
    with pytest.raises(InputError) as excinfo:
        load_votes(path, fmt="labels", teachers=10)
    assert check_error(excinfo, path) == (
        f"{path}: --teachers 10 matches neither layout of the labels: 3 teachers x 5 queries as "
        "saved (--teachers 3), or 5 teachers x 3 queries saved as queries x teachers (--teachers 5)"
    )


# --- selection ------------------------------------------------------------------------------


def test_queries_keeps_first_n(tmp_path: Path) -> None:
    votes = load_votes(save(tmp_path, "votes.npy", COUNTS), queries=2)
    np.testing.assert_array_equal(votes.counts, COUNTS[:2])
    np.testing.assert_array_equal(votes.selection, [0, 1])
    assert (votes.num_queries, votes.num_file_queries) == (2, 4)


def test_indices_then_queries_keeps_order(tmp_path: Path) -> None:
    path = save(tmp_path, "votes.npy", COUNTS)
    indices = save(tmp_path, "idx.npy", np.array([3, 0, 2], dtype=np.int64))
    votes = load_votes(path, indices=indices)
    np.testing.assert_array_equal(votes.counts, COUNTS[[3, 0, 2]])
    votes = load_votes(path, indices=indices, queries=2)
    np.testing.assert_array_equal(votes.counts, COUNTS[[3, 0]])
    np.testing.assert_array_equal(votes.selection, [3, 0])
    assert votes.selection is not None and votes.selection.dtype == np.int64


def test_integral_float_indices(tmp_path: Path) -> None:
    indices = save(tmp_path, "idx.npy", np.array([2.0, 1.0]))
    votes = load_votes(save(tmp_path, "votes.npy", COUNTS), indices=indices)
    np.testing.assert_array_equal(votes.counts, COUNTS[[2, 1]])


def test_selection_applies_to_label_columns(tmp_path: Path) -> None:
    indices = save(tmp_path, "idx.npy", np.array([4, 1, 2]))
    votes = load_votes(save(tmp_path, "labels.npy", LABELS), indices=indices, queries=2, teachers=3)
    assert (votes.num_file_queries, votes.num_queries, votes.num_classes) == (5, 2, 3)
    np.testing.assert_array_equal(votes.counts, naive_counts(LABELS[:, [4, 1]], 3))


def test_label_class_count_comes_from_the_whole_file(tmp_path: Path) -> None:
    # Queries 3 and 4 have labels 0 and 1 only; selecting them must not drop class 2.
    indices = save(tmp_path, "idx.npy", [3, 4])
    votes = load_votes(save(tmp_path, "labels.npy", LABELS), indices=indices, fmt="labels")
    assert votes.num_classes == 3
    np.testing.assert_array_equal(votes.counts, naive_counts(LABELS, 3)[[3, 4]])


def test_selection_applies_to_probs_axis_1(tmp_path: Path) -> None:
    scores = np.random.default_rng(2).random((4, 6, 3))
    indices = save(tmp_path, "idx.npy", np.array([5, 0]))
    votes = load_votes(save(tmp_path, "probs.npy", scores), indices=indices)
    np.testing.assert_array_equal(votes.counts, naive_counts(scores[:, [5, 0]].argmax(2), 3))


# --- real data ------------------------------------------------------------------------------


def test_sample_counts_file() -> None:
    votes = load_votes(str(SAMPLE_COUNTS))
    assert (votes.format, votes.detected) == (VoteFormat.COUNTS, True)
    assert votes.counts.shape == (9000, 10)
    assert (votes.num_teachers, votes.num_classes, votes.num_queries) == (250, 10, 9000)


def test_sample_counts_with_student_indices() -> None:
    raw = np.load(SAMPLE_COUNTS)
    indices = np.load(SAMPLE_INDICES)
    votes = load_votes(str(SAMPLE_COUNTS), indices=str(SAMPLE_INDICES), queries=40)
    np.testing.assert_array_equal(votes.counts, raw[indices[:40]])


def test_reference_labels2017_file() -> None:
    votes = load_votes(str(REFERENCE / "labels2017_mnist_like.npy"), teachers=250)
    assert (votes.format, votes.detected) == (VoteFormat.LABELS, True)
    assert (votes.num_queries, votes.num_teachers, votes.num_classes) == (1000, 250, 10)
    np.testing.assert_array_equal(votes.counts.sum(axis=1), 250)


def test_reference_baseline() -> None:
    votes = load_votes(str(REFERENCE / "interactive_glyph_like.npy"), queries=10)
    baseline = load_baseline(str(REFERENCE / "interactive_glyph_like_baseline.npy"), votes)
    expected = np.load(REFERENCE / "interactive_glyph_like_baseline.npy")[:10]
    np.testing.assert_array_equal(baseline, expected)  # rows sum to M = 5000: counts, kept


# --- baseline and mask ----------------------------------------------------------------------


def test_baseline_probabilities_scaled_by_m(tmp_path: Path) -> None:
    votes = load_votes(save(tmp_path, "votes.npy", COUNTS))
    probs = COUNTS / 4.0 * 0.5 + 0.5 / 3.0
    baseline = load_baseline(save(tmp_path, "base.npy", probs), votes)
    np.testing.assert_allclose(baseline, probs * 4.0)


def test_baseline_counts_kept(tmp_path: Path) -> None:
    votes = load_votes(save(tmp_path, "votes.npy", COUNTS))
    counts = COUNTS * 0.5 + 1.0
    np.testing.assert_array_equal(load_baseline(save(tmp_path, "b.npy", counts), votes), counts)


def test_baseline_selection(tmp_path: Path) -> None:
    path = save(tmp_path, "votes.npy", COUNTS)
    votes = load_votes(path, indices=save(tmp_path, "idx.npy", [3, 1]))
    full = COUNTS + 0.25
    np.testing.assert_array_equal(load_baseline(save(tmp_path, "b.npy", full), votes), full[[3, 1]])
    selected = full[:2]
    np.testing.assert_array_equal(load_baseline(save(tmp_path, "s.npy", selected), votes), selected)


@pytest.mark.parametrize("mask", [[True, False, True], [1, 0, 1], np.array([1, 0, 1], np.uint8)])
def test_answered_mask(tmp_path: Path, mask: object) -> None:
    loaded = load_answered_mask(save(tmp_path, "mask.npy", mask), 3)
    assert loaded.dtype == np.bool_
    np.testing.assert_array_equal(loaded, [True, False, True])


def test_load_array_reads_npy_and_npz(tmp_path: Path) -> None:
    np.testing.assert_array_equal(load_array(save(tmp_path, "a.npy", LABELS), "labels"), LABELS)
    np.savez(tmp_path / "a.npz", LABELS)
    np.testing.assert_array_equal(load_array(str(tmp_path / "a.npz"), "labels"), LABELS)


def test_load_array_allows_empty_arrays(tmp_path: Path) -> None:
    assert load_array(save(tmp_path, "e.npy", np.zeros((0, 3))), "x").shape == (0, 3)


# --- atomic save ----------------------------------------------------------------------------


def test_save_npy_atomic_round_trip_and_overwrite(tmp_path: Path) -> None:
    path = str(tmp_path / "out.npy")
    save_npy_atomic(path, np.array([1, -1, 2]))
    save_npy_atomic(path, np.array([3, 4]))
    np.testing.assert_array_equal(np.load(path), [3, 4])
    assert os.listdir(tmp_path) == ["out.npy"]
    assert stat.S_IMODE(os.stat(path).st_mode) & 0o400


def test_save_npy_atomic_missing_directory(tmp_path: Path) -> None:
    path = str(tmp_path / "missing" / "out.npy")
    with pytest.raises(InputError) as excinfo:
        save_npy_atomic(path, np.arange(3))
    check_error(excinfo, path)


def test_save_npy_atomic_failure_leaves_nothing(tmp_path: Path) -> None:
    path = str(tmp_path / "out.npy")
    with pytest.raises(ValueError):  # object arrays are never pickled, not even on output
        save_npy_atomic(path, np.array([object()], dtype=object))
    assert os.listdir(tmp_path) == []


def test_save_npy_atomic_keeps_old_file_on_failure(tmp_path: Path) -> None:
    path = str(tmp_path / "out.npy")
    save_npy_atomic(path, np.arange(3))
    with pytest.raises(ValueError):
        save_npy_atomic(path, np.array([object()], dtype=object))
    np.testing.assert_array_equal(np.load(path), np.arange(3))
    assert os.listdir(tmp_path) == ["out.npy"]


# --- rejections: the file itself ------------------------------------------------------------


class _CreatesFile:
    """Unpickling this runs ``builtins.open(marker, "w")``."""

    def __init__(self, marker: str) -> None:
        self.marker = marker

    def __reduce__(self) -> tuple[object, tuple[str, str]]:
        return (builtins.open, (self.marker, "w"))


def test_pickle_payload_is_live(tmp_path: Path) -> None:
    # Sanity check of the attack used below: an unsafe load really creates the file.
    marker = tmp_path / "proof"
    array = np.empty(1, dtype=object)
    array[0] = _CreatesFile(str(marker))
    np.save(tmp_path / "evil.npy", array, allow_pickle=True)
    np.load(tmp_path / "evil.npy", allow_pickle=True)[0].close()
    assert marker.exists()


@pytest.mark.parametrize("container", ["npy", "npz"])
@pytest.mark.parametrize("loader", ["votes", "array", "baseline", "mask", "indices"])
def test_pickled_object_array_never_unpickled(tmp_path: Path, container: str, loader: str) -> None:
    marker = tmp_path / "pwned"
    array = np.empty(4, dtype=object)
    array[:] = [_CreatesFile(str(marker)) for _ in range(4)]
    path = str(tmp_path / f"evil.{container}")
    if container == "npy":
        np.save(path, array, allow_pickle=True)
    else:
        np.savez(path, array)
    good = save(tmp_path, "votes.npy", COUNTS)
    with pytest.raises(InputError) as excinfo:
        if loader == "votes":
            load_votes(path)
        elif loader == "array":
            load_array(path, "votes")
        elif loader == "baseline":
            load_baseline(path, load_votes(good))
        elif loader == "mask":
            load_answered_mask(path, 4)
        else:
            load_votes(good, indices=path)
    assert "object" in check_error(excinfo, path)
    assert not marker.exists()


def test_missing_file(tmp_path: Path) -> None:
    path = str(tmp_path / "nope.npy")
    with pytest.raises(InputError) as excinfo:
        load_votes(path)
    assert "no such file" in check_error(excinfo, path)


def test_missing_file_sha256(tmp_path: Path) -> None:
    path = str(tmp_path / "nope.npy")
    with pytest.raises(InputError) as excinfo:
        file_sha256(path)
    check_error(excinfo, path)


def test_directory(tmp_path: Path) -> None:
    with pytest.raises(InputError) as excinfo:
        load_votes(str(tmp_path))
    assert "directory" in check_error(excinfo, str(tmp_path))


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="needs os.mkfifo")
def test_fifo_does_not_hang(tmp_path: Path) -> None:
    path = str(tmp_path / "votes.npy")
    os.mkfifo(path)
    with deadline(10), pytest.raises(InputError) as excinfo:
        load_votes(path)
    assert "regular file" in check_error(excinfo, path)


@pytest.mark.skipif(os.name != "posix" or os.geteuid() == 0, reason="root can read anything")
def test_unreadable_file(tmp_path: Path) -> None:
    path = save(tmp_path, "votes.npy", COUNTS)
    os.chmod(path, 0)
    try:
        with pytest.raises(InputError) as excinfo:
            load_votes(path)
    finally:
        os.chmod(path, 0o600)
    assert "permission" in check_error(excinfo, path)


def test_permission_error_on_open(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    def refuse(*args: object, **kwargs: object) -> None:
        raise PermissionError(13, "Permission denied")

    path = save(tmp_path, "votes.npy", COUNTS)
    monkeypatch.setattr(votes_reader, "open", refuse, raising=False)
    with pytest.raises(InputError) as excinfo:
        load_votes(path)
    assert "permission" in check_error(excinfo, path)


@pytest.mark.parametrize(
    "data",
    [b"", b"queries,classes\n1,2\n", b"\x93NUMP", b"PK\x01\x02garbage"],
    ids=["empty", "csv", "short-magic", "not-zip"],
)
def test_not_npy_or_npz(tmp_path: Path, data: bytes) -> None:
    path = write_bytes(tmp_path, "votes.npy", data)
    with pytest.raises(InputError) as excinfo:
        load_votes(path)
    message = check_error(excinfo, path)
    assert ("the file is empty" if not data else "not a .npy or .npz file") in message


@pytest.mark.parametrize("cut", [12, 60, -8], ids=["in-header", "after-header", "in-data"])
def test_truncated_npy(tmp_path: Path, cut: int) -> None:
    path = write_bytes(tmp_path, "votes.npy", npy_bytes(COUNTS)[:cut])
    for load in (load_votes, lambda p: load_array(p, "votes")):
        with pytest.raises(InputError) as excinfo:
            load(path)
        check_error(excinfo, path)


@pytest.mark.parametrize(
    "header",
    [
        b"{'descr': '<f8', 'fortran_order': False}",
        b"{'descr': 'nonsense', 'fortran_order': False, 'shape': (2,)}",
        b"{'descr': '<f8', 'fortran_order': False, 'shape': (-2,)}",
        b"{'descr': '<f8', 'fortran_order': 0, 'shape': (2,)}",
        b"__import__('os').system('true')",
        b"{'descr': '<f8', 'fortran_order': False, 'shape': (2.5,)}",
    ],
)
def test_corrupt_header(tmp_path: Path, header: bytes) -> None:
    padded = header.ljust(118) + b"\n"
    data = b"\x93NUMPY\x01\x00" + len(padded).to_bytes(2, "little") + padded + b"\0" * 64
    path = write_bytes(tmp_path, "votes.npy", data)
    with pytest.raises(InputError) as excinfo:
        load_votes(path)
    assert "header" in check_error(excinfo, path)


@pytest.mark.parametrize("shape", [(10**12, 10), (2**40, 2**20)])
def test_huge_shape_header_is_not_allocated(tmp_path: Path, shape: tuple[int, int]) -> None:
    path = write_bytes(tmp_path, "votes.npy", huge_header(shape))
    for load in (load_votes, lambda p: load_array(p, "votes")):
        with pytest.raises(InputError) as excinfo:
            load(path)
        assert "truncated" in check_error(excinfo, path)


def test_huge_shape_header_in_npz(tmp_path: Path) -> None:
    path = str(tmp_path / "votes.npz")
    with zipfile.ZipFile(path, "w") as archive:
        archive.writestr("votes.npy", huge_header((10**12, 10)))
    with pytest.raises(InputError) as excinfo:
        load_votes(path)
    assert "more than the" in check_error(excinfo, path)  # than an .npz array may hold
    with zipfile.ZipFile(path, "w") as archive:
        archive.writestr("votes.npy", huge_header((10**6, 10)))  # 80 MB: within the limit
    with pytest.raises(InputError) as excinfo:
        load_votes(path)
    assert "truncated" in check_error(excinfo, path)


def test_npz_member_not_npy(tmp_path: Path) -> None:
    path = str(tmp_path / "votes.npz")
    with zipfile.ZipFile(path, "w") as archive:
        archive.writestr("votes.npy", b"hello")
    with pytest.raises(InputError) as excinfo:
        load_votes(path)
    check_error(excinfo, path)


def test_truncated_npz(tmp_path: Path) -> None:
    np.savez_compressed(tmp_path / "full.npz", votes=np.random.default_rng(0).random((50, 10)))
    data = (tmp_path / "full.npz").read_bytes()
    path = write_bytes(tmp_path, "votes.npz", data[: len(data) // 2])
    with pytest.raises(InputError) as excinfo:
        load_votes(path)
    check_error(excinfo, path)


@pytest.mark.parametrize("arrays", [{}, {"a": COUNTS, "b": COUNTS}])
def test_npz_needs_exactly_one_array(tmp_path: Path, arrays: dict[str, np.ndarray]) -> None:
    path = str(tmp_path / "votes.npz")
    np.savez(path, **arrays)  # type: ignore[arg-type]
    with pytest.raises(InputError) as excinfo:
        load_votes(path)
    message = check_error(excinfo, path)
    assert f"holds {len(arrays)} arrays" in message
    assert all(repr(key) in message for key in arrays)


@pytest.mark.parametrize(
    "array",
    [
        np.zeros(3, dtype=[("a", "<f8"), ("b", "<i4")]),
        np.ones((2, 3), dtype=np.complex128),
        np.array([["1", "2"], ["3", "4"]]),
        np.array([[b"1", b"2"]]),
        np.array(["2024-01-01"], dtype="datetime64[D]"),
    ],
    ids=["structured", "complex", "unicode", "bytes", "datetime"],
)
def test_non_numeric_dtype(tmp_path: Path, array: np.ndarray) -> None:
    path = save(tmp_path, "votes.npy", array)
    with pytest.raises(InputError) as excinfo:
        load_votes(path)
    assert "dtype" in check_error(excinfo, path)


def test_bool_votes(tmp_path: Path) -> None:
    path = save(tmp_path, "votes.npy", COUNTS > 0)
    with pytest.raises(InputError) as excinfo:
        load_votes(path)
    assert "bool" in check_error(excinfo, path)


# --- rejections: votes content --------------------------------------------------------------


def _bad_counts(row: int, column: int, value: float) -> np.ndarray:
    array = COUNTS.copy()
    array[row, column] = value
    return array


@pytest.mark.parametrize("value", [np.nan, np.inf, -np.inf, -1.0])
@pytest.mark.parametrize("fmt", ["auto", "counts"])
def test_bad_count_values(tmp_path: Path, value: float, fmt: str) -> None:
    path = save(tmp_path, "votes.npy", _bad_counts(2, 1, value))
    with pytest.raises(InputError) as excinfo:
        load_votes(path, fmt=fmt, teachers=4)
    assert "row 2, column 1" in check_error(excinfo, path)


def test_bad_count_reports_file_row_after_selection(tmp_path: Path) -> None:
    path = save(tmp_path, "votes.npy", _bad_counts(3, 0, -1.0))
    with pytest.raises(InputError) as excinfo:
        load_votes(path, indices=save(tmp_path, "idx.npy", [1, 3]), teachers=4)
    assert "row 3, column 0" in check_error(excinfo, path)


def test_huge_counts_do_not_warn(tmp_path: Path) -> None:
    path = save(tmp_path, "votes.npy", np.full((2, 3), 1e308))
    with pytest.raises(InputError) as excinfo:
        load_votes(path)
    check_error(excinfo, path)


@pytest.mark.parametrize(
    ("array", "fmt", "expected"),
    [
        (np.arange(5.0), "auto", "1 dimensions (5,)"),
        (np.ones((2, 2, 2, 2)), "auto", "--format auto expects"),
        (np.ones((2, 5, 10)), "counts", "array has 3 dimensions (2, 5, 10) but --format counts"),
        (np.ones((2, 5)), "probs", "--format probs expects (teachers, queries, classes)"),
        (np.ones((2, 5, 3), dtype=np.int64), "labels", "--format labels expects"),
        (np.float64(3.0), "auto", "0 dimensions"),
    ],
)
def test_wrong_ndim(tmp_path: Path, array: np.ndarray, fmt: str, expected: str) -> None:
    path = save(tmp_path, "votes.npy", array)
    with pytest.raises(InputError) as excinfo:
        load_votes(path, fmt=fmt)
    assert expected in check_error(excinfo, path)


@pytest.mark.parametrize(
    ("shape", "fmt"),
    [
        ((0, 10), "auto"),
        ((5, 0), "auto"),
        ((0, 4), "labels"),
        ((3, 0, 2), "auto"),
        ((0, 0), "counts"),
    ],
)
def test_empty_votes(tmp_path: Path, shape: tuple[int, ...], fmt: str) -> None:
    path = save(tmp_path, "votes.npy", np.zeros(shape))
    with pytest.raises(InputError) as excinfo:
        load_votes(path, fmt=fmt)
    assert "empty" in check_error(excinfo, path)


@pytest.mark.parametrize("teachers", [None, 4])
def test_all_rows_zero(tmp_path: Path, teachers: int | None) -> None:
    path = save(tmp_path, "votes.npy", np.zeros((3, 4)))
    with pytest.raises(InputError) as excinfo:
        load_votes(path, fmt="counts", teachers=teachers)
    assert "sums to 0" in check_error(excinfo, path)


@pytest.mark.parametrize("fmt", ["auto", "counts"])
def test_rows_disagree_without_teachers(tmp_path: Path, fmt: str) -> None:
    path = save(tmp_path, "votes.npy", _bad_counts(1, 1, 3.5))  # not integral: not labels
    with pytest.raises(InputError) as excinfo:
        load_votes(path, fmt=fmt)
    message = check_error(excinfo, path)
    assert "different totals" in message and "--teachers" in message
    assert ("read as counts, the format detected" in message) == (fmt == "auto")


def test_rows_disagree_forced_counts_integers(tmp_path: Path) -> None:
    path = save(tmp_path, "votes.npy", np.array([[1, 2, 0], [0, 0, 4]]))
    with pytest.raises(InputError) as excinfo:
        load_votes(path, fmt="counts")
    assert "row 0: 3, row 1: 4" in check_error(excinfo, path)


def test_fractional_shared_sum(tmp_path: Path) -> None:
    path = save(tmp_path, "votes.npy", np.array([[1.5, 1.0], [0.5, 2.0]]))
    with pytest.raises(InputError) as excinfo:
        load_votes(path)
    assert "whole number" in check_error(excinfo, path)


@pytest.mark.parametrize(
    ("array", "fmt"), [(COUNTS, "auto"), (COUNTS, "counts"), (np.ones((2, 3, 4)), "probs")]
)
def test_num_classes_mismatch(tmp_path: Path, array: np.ndarray, fmt: str) -> None:
    path = save(tmp_path, "votes.npy", array)
    with pytest.raises(InputError) as excinfo:
        load_votes(path, fmt=fmt, num_classes=7)
    assert "--num-classes is 7" in check_error(excinfo, path)


@pytest.mark.parametrize(
    ("value", "num_classes", "expected"),
    [
        (3, 3, "is 3; expected integer class labels in [0, 3)"),
        (-2, None, "is -2"),  # -1 is an abstaining teacher
        (1.5, None, "is 1.5"),
        (np.nan, None, "is nan"),
    ],
)
def test_bad_labels(tmp_path: Path, value: float, num_classes: int | None, expected: str) -> None:
    labels = LABELS.astype(np.float64)
    labels[2, 4] = value
    path = save(tmp_path, "labels.npy", labels)
    with pytest.raises(InputError) as excinfo:
        load_votes(path, fmt="labels", num_classes=num_classes)
    message = check_error(excinfo, path)
    assert "teacher 2 for query 4" in message and expected in message


def test_absurd_label_values(tmp_path: Path) -> None:
    path = save(tmp_path, "labels.npy", np.array([[0, 10**12], [1, 2]]))
    with pytest.raises(InputError) as excinfo:
        load_votes(path, fmt="labels")
    assert "classes" in check_error(excinfo, path)


@pytest.mark.parametrize("value", [np.nan, np.inf])
def test_bad_probs(tmp_path: Path, value: float) -> None:
    scores = np.random.default_rng(3).random((3, 4, 2))
    scores[1, 2, 0] = value
    path = save(tmp_path, "probs.npy", scores)
    with pytest.raises(InputError) as excinfo:
        load_votes(path)
    assert "teacher 1 for query 2, class 0" in check_error(excinfo, path)


# --- rejections: selection ------------------------------------------------------------------


def test_too_many_queries(tmp_path: Path) -> None:
    path = save(tmp_path, "votes.npy", COUNTS)
    with pytest.raises(InputError) as excinfo:
        load_votes(path, queries=5)
    assert "has only 4 queries, --queries asks for 5" in check_error(excinfo, path)


def test_too_many_queries_for_indices(tmp_path: Path) -> None:
    indices = save(tmp_path, "idx.npy", [0, 1])
    with pytest.raises(InputError) as excinfo:
        load_votes(save(tmp_path, "votes.npy", COUNTS), indices=indices, queries=3)
    assert "has only 2 queries, --queries asks for 3" in check_error(excinfo, indices)


@pytest.mark.parametrize(
    "indices",
    [
        np.array([[0, 1]]),
        np.array([], dtype=np.int64),
        np.array([0, -1]),
        np.array([0, 4]),
        np.array([1, 2, 1]),
        np.array([0.5, 1.0]),
        np.array([True, False]),
        np.array([0, 2**63 + 5], dtype=np.uint64),
    ],
    ids=["2d", "empty", "negative", "too-large", "duplicate", "fractional", "bool", "uint64"],
)
def test_bad_indices(tmp_path: Path, indices: np.ndarray) -> None:
    path = save(tmp_path, "idx.npy", indices)
    with pytest.raises(InputError) as excinfo:
        load_votes(save(tmp_path, "votes.npy", COUNTS), indices=path)
    check_error(excinfo, path)


def test_indices_bounds_use_query_axis_of_labels(tmp_path: Path) -> None:
    path = save(tmp_path, "idx.npy", [4, 5])  # 5 queries in LABELS: 5 is out of range
    with pytest.raises(InputError) as excinfo:
        load_votes(save(tmp_path, "labels.npy", LABELS), indices=path, fmt="labels")
    assert "[0, 5)" in check_error(excinfo, path)


@pytest.mark.parametrize(
    "kwargs",
    [{"queries": 0}, {"queries": -3}, {"teachers": 0}, {"num_classes": 0}, {"fmt": "csv"}],
)
def test_bad_flag_values_are_usage_errors(tmp_path: Path, kwargs: dict[str, object]) -> None:
    path = save(tmp_path, "votes.npy", COUNTS)
    with pytest.raises(UsageError) as excinfo:
        load_votes(path, **kwargs)  # type: ignore[arg-type]
    assert "\n" not in str(excinfo.value) and str(excinfo.value).startswith("--")


# --- rejections: baseline and mask ----------------------------------------------------------


@pytest.fixture
def small_votes(tmp_path: Path) -> Votes:
    return load_votes(save(tmp_path, "votes.npy", COUNTS), queries=3)


@pytest.mark.parametrize(
    "array",
    [
        np.ones((2, 3)),
        np.ones((4, 2)),
        np.ones(12),
        np.ones((4, 3, 1)),
        np.ones((4, 3), dtype=bool),
        _bad_counts(1, 2, -0.5),
        _bad_counts(0, 0, np.nan),
        _bad_counts(2, 2, np.inf),
    ],
    ids=["rows", "classes", "1d", "3d", "bool", "negative", "nan", "inf"],
)
def test_bad_baseline(tmp_path: Path, small_votes: Votes, array: np.ndarray) -> None:
    path = save(tmp_path, "baseline.npy", array)
    with pytest.raises(InputError) as excinfo:
        load_baseline(path, small_votes)
    check_error(excinfo, path)


@pytest.mark.parametrize(
    "mask",
    [
        np.array([True, False, True, False]),
        np.array([], dtype=bool),
        np.array([[True, False, True]]),
        np.array([1.0, 0.0, 1.0]),
        np.array([1, 2, 0]),
        np.array([0, -1, 1]),
    ],
    ids=["long", "empty", "2d", "float", "two", "negative"],
)
def test_bad_mask(tmp_path: Path, mask: np.ndarray) -> None:
    path = save(tmp_path, "mask.npy", mask)
    with pytest.raises(InputError) as excinfo:
        load_answered_mask(path, 3)
    check_error(excinfo, path)


def test_load_array_names_what(tmp_path: Path) -> None:
    path = str(tmp_path / "missing.npy")
    with pytest.raises(InputError) as excinfo:
        load_array(path, "answered mask")
    assert "answered mask" in check_error(excinfo, path)


def _splits(rng: np.random.Generator, num_queries: int) -> list[tuple[int, int]]:
    """Random consecutive [start, stop) ranges covering range(num_queries)."""
    cuts = np.sort(
        rng.choice(np.arange(1, num_queries), size=rng.integers(0, num_queries), replace=False)
    )
    edges = [0, *cuts.tolist(), num_queries]
    return list(itertools.pairwise(edges))


@pytest.mark.parametrize("seed", range(40))
def test_the_block_validator_does_not_depend_on_the_blocks(seed: int) -> None:
    """scan_blocks names the same first bad value, sums and largest label however the
    queries are split: the in-memory path (one block) and the streamed one agree."""
    rng = np.random.default_rng(seed)
    fmt = [VoteFormat.COUNTS, VoteFormat.LABELS, VoteFormat.PROBS][seed % 3]
    num_classes = None if fmt is not VoteFormat.LABELS or seed % 2 else 4
    shape = {
        VoteFormat.COUNTS: (9, 3),
        VoteFormat.LABELS: (3, 9),
        VoteFormat.PROBS: (3, 9, 2),
    }[fmt]
    array = rng.integers(0, 4, size=shape).astype(float)
    for _ in range(rng.integers(0, 3)):
        index = tuple(int(rng.integers(0, n)) for n in shape)
        array[index] = rng.choice([np.nan, np.inf, -np.inf, -1.0, 2.5, 7.0])
    axis = QUERY_AXIS[fmt]
    rows = None if fmt is VoteFormat.PROBS else shape[0]
    whole = scan_blocks([(0, array)], fmt, num_classes=num_classes, num_rows=rows)
    blocks = [
        (start, np.take(array, np.arange(start, stop), axis=axis))
        for start, stop in _splits(rng, shape[axis])
    ]
    split = scan_blocks(blocks, fmt, num_classes=num_classes, num_rows=rows)
    assert split.bad == whole.bad
    assert str(split.bad_value) == str(whole.bad_value)
    np.testing.assert_array_equal(split.row_sums, whole.row_sums)
    if whole.bad is None:
        assert split.largest == whole.largest
    assert _error_of(split) == _error_of(whole)
    assert (_error_of(whole) is None) == (whole.bad is None)


def _error_of(scan: BlockScan) -> str | None:
    try:
        scan.check("votes.npy")
    except InputError as exc:
        return exc.message
    return None


def test_output_helpers_live_in_outputs_and_are_reexported() -> None:
    from pate_cli import votes
    from pate_cli.files import outputs

    for name in ("write_atomic", "check_output_path", "save_npy_atomic"):
        assert getattr(votes, name) is getattr(outputs, name)


def test_whole_numbers_are_checked_a_piece_at_a_time(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Wholeness is tested in pieces (a temporary of a piece, not of the block): pieces of 7
    values find the soft vote of row 15 and the first -1 (row 12) where a single piece does."""
    from pate_cli.votes import formats

    counts = np.tile(COUNTS, (5, 1))  # 20 rows summing to 4
    counts[15, 0], counts[15, 1] = 0.5, 1.5  # was 1, 1
    labels = np.zeros((20, 30))
    labels[12, 29] = labels[19, 0] = -1  # 20 x 30: C = 1, no second orientation
    outcomes = []
    for chunk in (formats._CHUNK, 7):
        monkeypatch.setattr(formats, "_CHUNK", chunk)
        votes = load_votes(save(tmp_path, "soft.npy", counts))
        scan = scan_blocks([(0, labels)], VoteFormat.LABELS, num_rows=20)
        outcomes.append((votes.warnings, scan.minus_one, formats._integral(counts)))
    assert outcomes[0] == outcomes[1]
    warnings, minus_one, whole = outcomes[1]
    assert "(soft votes; row 15, column 0 is 0.5)" in warnings[0]
    assert (minus_one, whole) == ((12, 29), False)

"""Strict reading: never a guess that changes the numbers (README, "Inputs").

- ``--format auto`` takes a 2-D array with unequal row sums as labels only when the class
  count it implies is at most its number of teachers and of queries, and such labels read
  both ways, whatever the shape (teachers x queries, or saved queries x teachers:
  tests/test_labels_layout.py); past the class count it is exit 2 asking for ``--format``,
  and an array that reads two ways (counts with an abstaining teacher that could be labels,
  labels that could be saved queries x teachers) is exit 2 naming both, never a pick;
- ``--teachers M`` below the largest counts row sum, or below the teachers of a scores
  file, or of neither layout of labels, is exit 2; under auto it keeps the readings it does
  not refute;
- a label -1 is a teacher that abstains: counted in no class;
- soft votes (fractional counts) are analysed with a warning; every report states its layout;
- an ``.npz`` member is refused, before anything is inflated, when its header declares more
  than the reader's limit, the zip directory disagrees with its header, or it inflates more
  than any vote file does; read whole, it is inflated into the array itself.

Each case goes through :func:`pate_cli.load_votes` and the CLI, and, where a file can be
streamed, through both reading paths, which must give the same result or the same error.
"""

from __future__ import annotations

import io
import tracemalloc
import zipfile
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import pate_cli
import pate_cli.votes as votes_module
from pate_cli.errors import ExitCode, InputError
from pate_cli.votes import reader as votes_reader
from pate_cli.votes.formats import VoteFormat
from tests.conftest import MNIST, MNIST_LABELS, deadline, run_cli

ANALYZE = ["--sigma", 40, "--delta", 1e-5, "--json"]
# Labels too few to show their layout: the refusal ends with what their agreement is.
UNDECIDED = "; the labels do not decide it: they agree by column "


# These tests pin the command line's words (tests/test_spelling.py checks Python's).
pytestmark = pytest.mark.usefixtures("on_the_command_line")


def save(tmp_path: Path, name: str, array: Any) -> str:
    path = str(tmp_path / name)
    np.save(path, np.asarray(array), allow_pickle=False)
    return path


def counts_of(rng: np.random.Generator, teachers: int, queries: int, classes: int) -> np.ndarray:
    """Random (Q, C) vote counts, every row summing to ``teachers``."""
    return rng.multinomial(teachers, np.full(classes, 1 / classes), size=queries)


def naive_counts(labels: np.ndarray, num_classes: int) -> np.ndarray:
    """The histogram of each query's labels, one vote at a time; -1 votes for nothing."""
    counts = np.zeros((labels.shape[1], num_classes))
    for teacher in range(labels.shape[0]):
        for query in range(labels.shape[1]):
            if labels[teacher, query] != -1:
                counts[query, int(labels[teacher, query])] += 1
    return counts


def message_of(excinfo: pytest.ExceptionInfo[InputError], path: str) -> str:
    """The contract of every message: one line, starting with the path as given."""
    message = str(excinfo.value)
    assert "\n" not in message and message.startswith(f"{path}: "), message
    return message


def cli_error(args: list[Any], path: str) -> str:
    """Run ``pate``; expect exit 2 and one stderr line naming ``path``; return that line."""
    result = run_cli(args, expect=ExitCode.BAD_INPUT)
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    assert lines[0].startswith(f"pate: error: {path}: "), lines[0]
    assert "Traceback" not in result.stderr and result.stdout == ""
    return lines[0]


# --- both reading paths ---------------------------------------------------------------------


def _outcome(path: str, kwargs: dict[str, Any]) -> votes_module.Votes | InputError:
    try:
        return pate_cli.load_votes(path, **kwargs)
    except InputError as exc:
        return exc


def load_both(
    path: str,
    monkeypatch: pytest.MonkeyPatch,
    block_rows: int = 3,
    min_rows: int = 2,
    **kwargs: Any,
) -> votes_module.Votes:
    """``pate_cli.load_votes`` in memory, then streamed (blocks of ``block_rows`` queries).

    ``min_rows``: an axis this long is streamed (rows as counts, columns as labels).

    The two must give the same result or the same error; returns the in-memory result or
    raises its error.
    """
    in_memory = _outcome(path, kwargs)
    opened: list[tuple[Any, Any]] = []
    real_open_streams = votes_module.open_streams

    def spy(*args: Any, **kw: Any) -> tuple[Any, Any]:
        opened.append(real_open_streams(*args, **kw))
        return opened[-1]

    with monkeypatch.context() as patch:
        patch.setattr(votes_module, "STREAM_MIN_ROWS", min_rows)
        patch.setattr(votes_module, "_BLOCK_ROWS", block_rows)
        patch.setattr(votes_module, "open_streams", spy)
        streamed = _outcome(path, kwargs)
    assert opened and opened[-1] != (None, None), "the file was not streamed"
    if isinstance(in_memory, InputError):
        assert isinstance(streamed, InputError), f"streamed read {path}; in memory: {in_memory}"
        assert streamed.message == in_memory.message
        raise in_memory
    assert not isinstance(streamed, InputError), f"streamed: {streamed}"
    assert isinstance(streamed.counts, votes_module.ChunkedCounts)
    np.testing.assert_array_equal(np.asarray(streamed.counts), in_memory.counts)
    for name in ("format", "detected", "num_teachers", "num_classes", "warnings"):
        assert getattr(streamed, name) == getattr(in_memory, name), name
    return in_memory


# --- 1. ambiguous auto-detection ------------------------------------------------------------


def _ambiguous_cases() -> dict[str, np.ndarray]:
    rng = np.random.default_rng(15)
    missing = counts_of(rng, 250, 40, 10)
    missing[17, int(np.argmax(missing[17]))] -= 1  # one vote missing: the row sums to 249
    return {
        "two rows": np.array([[240, 10], [100, 100]]),
        "transposed counts": counts_of(rng, 250, 50, 10).T.copy(),  # (10, 50)
        "one vote missing": missing,
    }


AMBIGUOUS = _ambiguous_cases()


@pytest.mark.parametrize("name", sorted(AMBIGUOUS))
def test_counts_that_read_as_labels_with_many_classes_are_ambiguous(
    name: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    array = AMBIGUOUS[name]
    path = save(tmp_path, "votes.npy", array)
    rows, columns = array.shape
    with pytest.raises(InputError) as excinfo:
        load_both(path, monkeypatch)
    message = message_of(excinfo, path)
    classes = int(array.max()) + 1
    assert classes > min(rows, columns)
    assert f"could be labels ({rows} teachers, {columns} queries, {classes} classes" in message
    assert f"or counts of {rows} queries x {columns} classes with abstaining teachers" in message
    largest = int(array.sum(axis=1).max())
    assert message.endswith(f"pass --format counts --teachers M, M at least {largest})")
    assert cli_error(["analyze", path, *ANALYZE], path).endswith(message)


def test_the_two_row_example_names_both_readings(tmp_path: Path) -> None:
    path = save(tmp_path, "votes.npy", AMBIGUOUS["two rows"])
    with pytest.raises(InputError) as excinfo:
        pate_cli.load_votes(path)
    assert message_of(excinfo, path) == (
        f"{path}: cannot tell the format: it could be labels (2 teachers, 2 queries, 241 "
        "classes: more classes than teachers or queries; pass --format labels), or counts of 2 "
        "queries x 2 classes with abstaining teachers (rows summing to 200 to 250; pass --format "
        "counts --teachers M, M at least 250)"
    )


@pytest.mark.parametrize("name", sorted(AMBIGUOUS))
def test_the_flags_the_message_asks_for_settle_it(
    name: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    array = AMBIGUOUS[name]
    path = save(tmp_path, "votes.npy", array)
    labels = load_both(path, monkeypatch, fmt="labels")
    assert (labels.format, labels.detected) == (VoteFormat.LABELS, False)
    assert (labels.num_teachers, labels.num_classes) == (array.shape[0], int(array.max()) + 1)
    np.testing.assert_array_equal(labels.counts, naive_counts(array, int(array.max()) + 1))
    teachers = int(array.sum(axis=1).max())  # 250, but about 1300 for the transposed file
    counts = load_both(path, monkeypatch, fmt="counts", teachers=teachers)
    assert (counts.format, counts.num_teachers) == (VoteFormat.COUNTS, teachers)
    np.testing.assert_array_equal(counts.counts, array)
    assert len(counts.warnings) == 1
    assert f"do not sum to --teachers {teachers}" in counts.warnings[0]
    # --teachers alone keeps the rule of old: counts, rows below M with a note.
    auto = load_both(path, monkeypatch, teachers=teachers)
    assert (auto.format, auto.detected, auto.num_teachers) == (VoteFormat.COUNTS, True, teachers)
    result = run_cli(["analyze", path, "--format", "labels", *ANALYZE])
    assert result.json["input"]["format"] == "labels"
    assert result.json["input"]["num_classes"] == int(array.max()) + 1


@pytest.mark.parametrize(
    ("shape", "largest", "expected"),
    [
        ((3, 5), 2, "orientation"),  # C = 3 = teachers, but 3 x 5 may be saved queries x teachers
        ((3, 5), 3, "classes"),  # C = 4 > 3 teachers
        ((5, 3), 2, "orientation"),  # C = 3 = queries, but 5 x 3 may be saved queries x teachers
        ((5, 3), 3, "classes"),  # C = 4 > 3 queries
        ((4, 4), 3, "orientation"),  # square: either way
        ((4, 4), 4, "classes"),
    ],
)
def test_labels_may_imply_no_more_classes_than_teachers_and_queries(
    shape: tuple[int, int],
    largest: int,
    expected: VoteFormat | str,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    labels = np.zeros(shape, dtype=np.int64)
    labels[0, 0] = largest
    labels[-1, -1] = 1  # rows sum to different totals
    path = save(tmp_path, "labels.npy", labels)
    rows, columns = shape
    if expected == "classes":
        with pytest.raises(InputError) as excinfo:
            load_both(path, monkeypatch)
        message = message_of(excinfo, path)
        assert f"{largest + 1} classes: more classes than teachers or queries" in message
        assert message.endswith(f"pass --format counts --teachers M, M at least {largest})")
        return
    if expected == "orientation":
        with pytest.raises(InputError) as excinfo:
            load_both(path, monkeypatch)
        pick = (
            f"pass --format labels --teachers {columns}"
            if rows != columns
            else "save the array transposed, as (teachers, queries)"
        )
        assert message_of(excinfo, path).startswith(
            f"{path}: cannot tell the format: it could be labels of {rows} teachers x "
            f"{columns} queries ({largest + 1} classes; pass --format labels), or labels of "
            f"{columns} teachers x {rows} queries saved as queries x teachers ({largest + 1} "
            f"classes; {pick}){UNDECIDED}"
        )
        labels_given = load_both(path, monkeypatch, fmt="labels")  # the documented layout
        assert (labels_given.num_teachers, labels_given.num_queries) == (rows, columns)
        np.testing.assert_array_equal(labels_given.counts, naive_counts(labels, largest + 1))
        return
    votes = load_both(path, monkeypatch)
    assert (votes.format, votes.detected, votes.num_classes) == (expected, True, largest + 1)
    np.testing.assert_array_equal(votes.counts, naive_counts(labels, largest + 1))


def test_labels_of_a_single_class_read_both_ways_too(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """One class: the two layouts give other teachers and queries all the same, and no label
    tells them apart, so auto names both (it read 5 teachers x 4 queries), and --teachers
    picks one."""
    labels = np.zeros((5, 4), dtype=np.int64)
    labels[1, 2] = -1
    path = save(tmp_path, "labels.npy", labels)
    with pytest.raises(InputError) as excinfo:
        load_both(path, monkeypatch)
    assert message_of(excinfo, path) == (
        f"{path}: cannot tell the format: it could be labels of 5 teachers x 4 queries (1 "
        "class; pass --format labels), or labels of 4 teachers x 5 queries saved as queries x "
        f"teachers (1 class; pass --format labels --teachers 4){UNDECIDED}0.000 (chance 1.000) "
        "and by row 0.000 (chance 1.000)"
    )
    votes = load_both(path, monkeypatch, teachers=5)
    assert (votes.format, votes.num_teachers, votes.num_queries, votes.num_classes) == (
        VoteFormat.LABELS,
        5,
        4,
        1,
    )
    np.testing.assert_array_equal(votes.counts, [[5], [5], [4], [5]])
    labels[0, 0] = 1  # two classes: 5 x 4 may be saved queries x teachers
    with pytest.raises(InputError) as excinfo:
        load_both(save(tmp_path, "labels.npy", labels), monkeypatch)
    assert "or labels of 4 teachers x 5 queries saved as queries x teachers" in str(excinfo.value)


def test_the_sample_counts_are_still_counts(monkeypatch: pytest.MonkeyPatch) -> None:
    votes = load_both(str(MNIST), monkeypatch, block_rows=997)
    assert (votes.format, votes.detected) == (VoteFormat.COUNTS, True)
    assert (votes.num_queries, votes.num_classes, votes.num_teachers) == (9000, 10, 250)
    assert votes.warnings == ()


def test_the_2017_labels_are_labels_of_their_teachers(monkeypatch: pytest.MonkeyPatch) -> None:
    """250 x 9000 could as well be 9000 teachers x 250 queries by its sizes; its labels agree
    by query (by column), so it reads as 250 teachers without a flag, read whole or streamed,
    and --teachers 250 says the same."""
    monkeypatch.setattr(votes_module, "_BLOCK_CELLS", 250 * 97)
    for teachers in (None, 250):
        votes = load_both(str(MNIST_LABELS), monkeypatch, block_rows=97, teachers=teachers)
        assert (votes.format, votes.detected, votes.layout) == (
            VoteFormat.LABELS,
            True,
            "teachers x queries",
        )
        assert (votes.num_teachers, votes.num_queries, votes.num_classes) == (250, 9000, 10)
        assert votes.counts.sum(axis=1).tolist() == [250.0] * votes.num_queries
        assert votes.warnings == ()


# --- 2. counts rows and --teachers M --------------------------------------------------------


def test_teachers_below_the_row_sums_is_an_error(monkeypatch: pytest.MonkeyPatch) -> None:
    path = str(MNIST)
    expected = (
        f"{path}: votes row 0 sums to 250, more than --teachers 100; --teachers must be at "
        "least the largest row sum (250)"
    )
    detected = " (read as counts, the format detected)"
    for kwargs, suffix in (({"fmt": "counts"}, ""), ({}, detected), ({"queries": 640}, detected)):
        with pytest.raises(InputError) as excinfo:
            load_both(path, monkeypatch, block_rows=997, teachers=100, **kwargs)
        assert message_of(excinfo, path) == expected + suffix
    args = ["analyze", path, "--format", "counts", "--teachers", 100, *ANALYZE]
    assert cli_error(args, path).endswith(expected)


@pytest.mark.parametrize(
    ("array", "row", "total"),
    [
        (np.array([[1, 1], [0, 5], [2, 0]]), 1, "5"),  # a single vote above M = 4
        (np.array([[1.0, 1.0], [2.0, 2.0], [2.5, 2.0]]), 2, "4.5"),
        (np.array([[4, 0], [3, 1], [2, 3]]), 2, "5"),  # the largest is named too
    ],
)
def test_a_row_above_teachers_is_named(
    array: np.ndarray, row: int, total: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = save(tmp_path, "votes.npy", array)
    with pytest.raises(InputError) as excinfo:
        load_both(path, monkeypatch, fmt="counts", teachers=4)
    message = message_of(excinfo, path)
    assert f"votes row {row} sums to {total}, more than --teachers 4" in message
    assert f"at least the largest row sum ({show(array.sum(axis=1).max())})" in message
    args = ["analyze", path, "--format", "counts", "--teachers", 4, *ANALYZE]
    assert cli_error(args, path).endswith(message)


def show(value: float) -> str:
    return str(int(value)) if float(value).is_integer() else str(value)


def test_a_row_above_teachers_is_named_by_its_file_index(tmp_path: Path) -> None:
    array = np.array([[2, 2], [1, 3], [0, 4], [5, 0]])
    path = save(tmp_path, "votes.npy", array)
    indices = save(tmp_path, "idx.npy", np.array([1, 3]))
    with pytest.raises(InputError) as excinfo:
        pate_cli.load_votes(path, teachers=4, indices=indices)
    assert "votes row 3 sums to 5, more than --teachers 4" in message_of(excinfo, path)
    # Only the queries kept are checked, as every rule of the counts.
    votes = pate_cli.load_votes(path, teachers=4, queries=3)
    assert votes.num_teachers == 4 and votes.warnings == ()


def test_rows_below_teachers_and_within_tolerance_are_accepted(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    array = counts_of(np.random.default_rng(2), 250, 30, 10).astype(np.float64)
    array[3] *= 1 + 1e-12  # sums to 250 up to rounding: not above M
    array[5, 0] -= 2  # two abstaining teachers
    path = save(tmp_path, "votes.npy", array)
    votes = load_both(path, monkeypatch, teachers=250)
    assert (votes.format, votes.num_teachers) == (VoteFormat.COUNTS, 250)
    np.testing.assert_array_equal(votes.counts, array)
    assert len(votes.warnings) == 2 and "1 of 30 votes rows do not sum" in votes.warnings[0]
    # Off by rounding is off all the same: the values are not whole votes (row 3 of 30).
    assert (
        f"{path}: votes hold fractional values (soft votes; row 3, column 0 is"
        in (votes.warnings[1])
    )
    array[3, 0] += 1e-6  # beyond the tolerance
    np.save(path, array)
    with pytest.raises(InputError) as excinfo:
        load_both(path, monkeypatch, teachers=250)
    assert "votes row 3 sums to 250.000001" in message_of(excinfo, path)


def test_rows_that_disagree_without_teachers_stay_an_error(tmp_path: Path) -> None:
    path = save(tmp_path, "votes.npy", np.array([[3.0, 1.0], [2.0, 1.5]]))
    with pytest.raises(InputError) as excinfo:
        pate_cli.load_votes(path)
    assert "rows sum to different totals" in message_of(excinfo, path)


LABELS = np.array([[0, 1, 2, 1, 0], [1, 1, 2, 0, 0], [0, 2, 2, 1, 1]])  # 3 teachers, 5 queries


def test_teachers_below_the_file_teachers_is_an_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = save(tmp_path, "votes.npy", np.eye(3)[LABELS])  # probs: one-hot scores
    with pytest.raises(InputError) as excinfo:
        _load_in_memory(path, monkeypatch, fmt="probs", teachers=2)
    message = message_of(excinfo, path)
    assert "the file has 3 teachers but --teachers is 2; --teachers must be at least" in message
    args = ["analyze", path, "--format", "probs", "--teachers", 2, *ANALYZE]
    assert cli_error(args, path).endswith(message)
    assert _load_in_memory(path, monkeypatch, fmt="probs", teachers=3).warnings == ()
    above = _load_in_memory(path, monkeypatch, fmt="probs", teachers=5)
    assert above.num_teachers == 5 and len(above.warnings) == 1
    np.testing.assert_array_equal(above.counts, naive_counts(LABELS, 3))


def test_teachers_of_neither_layout_of_labels_is_an_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Labels: --teachers picks a layout (3 or 5 teachers); 2, or 6 (a note before), is exit 2."""
    path = save(tmp_path, "votes.npy", LABELS)
    for teachers in (2, 6):
        with pytest.raises(InputError) as excinfo:  # refused before either reader opens
            pate_cli.load_votes(path, fmt="labels", teachers=teachers)
        message = message_of(excinfo, path)
        assert message == (
            f"{path}: --teachers {teachers} matches neither layout of the labels: 3 teachers x "
            "5 queries as saved (--teachers 3), or 5 teachers x 3 queries saved as queries x "
            "teachers (--teachers 5)"
        )
        args = ["analyze", path, "--format", "labels", "--teachers", teachers, *ANALYZE]
        assert cli_error(args, path).endswith(message)
    assert load_both(path, monkeypatch, fmt="labels", teachers=3).warnings == ()
    other = pate_cli.load_votes(path, fmt="labels", teachers=5)
    assert (other.num_teachers, other.num_queries) == (5, 3)
    np.testing.assert_array_equal(other.counts, naive_counts(LABELS.T, 3))


def _load_in_memory(
    path: str, monkeypatch: pytest.MonkeyPatch, **kwargs: Any
) -> votes_module.Votes:
    return pate_cli.load_votes(path, **kwargs)  # scores are never streamed


# --- 3. -1: an abstaining teacher -----------------------------------------------------------


ABSTAINING = np.array(
    [
        [0, 1, 2, -1, 0, 1],
        [-1, 1, 2, 0, 0, -1],  # -1 of query 0 must not land in a class of any query
        [0, 2, -1, 1, 1, -1],
        [2, 1, 2, 1, -1, -1],
    ]
)  # 4 teachers, 6 queries, largest label 2: C = 3


@pytest.mark.parametrize("dtype", [np.int8, np.int64, np.float64])
@pytest.mark.parametrize("fmt", ["auto", "labels"])
def test_abstaining_teachers_are_counted_in_no_class(
    dtype: type, fmt: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = save(tmp_path, "labels.npy", ABSTAINING.astype(dtype))
    # --teachers 4 picks the layout auto cannot tell (4 teachers x 6 queries, or 6 x 4).
    votes = load_both(path, monkeypatch, fmt=fmt, teachers=4)
    assert (votes.format, votes.detected) == (VoteFormat.LABELS, fmt == "auto")
    assert (votes.num_teachers, votes.num_classes, votes.num_queries) == (4, 3, 6)
    expected = [
        [2, 0, 1],
        [0, 3, 1],
        [0, 0, 3],
        [1, 2, 0],
        [2, 1, 0],
        [0, 1, 0],
    ]
    np.testing.assert_array_equal(votes.counts, expected)
    np.testing.assert_array_equal(votes.counts, naive_counts(ABSTAINING, 3))
    # Each query's histogram sums to M less the teachers that abstained on it.
    np.testing.assert_array_equal(votes.counts.sum(axis=1), 4 - (ABSTAINING == -1).sum(axis=0))


def test_abstentions_do_not_change_the_class_count(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = save(tmp_path, "labels.npy", ABSTAINING)
    votes = load_both(path, monkeypatch, fmt="labels", num_classes=5)
    assert votes.num_classes == 5
    np.testing.assert_array_equal(votes.counts, naive_counts(ABSTAINING, 5))
    prefix = load_both(path, monkeypatch, fmt="labels", queries=2)
    assert prefix.num_classes == 3  # from the whole file, -1 aside
    np.testing.assert_array_equal(prefix.counts, naive_counts(ABSTAINING, 3)[:2])
    everyone_abstains = np.full((3, 4), -1)
    everyone_abstains[0, 1] = 1
    path = save(tmp_path, "quiet.npy", everyone_abstains)
    votes = load_both(path, monkeypatch, fmt="labels")
    assert (votes.num_teachers, votes.num_classes) == (3, 2)
    np.testing.assert_array_equal(votes.counts, [[0, 0], [0, 1], [0, 0], [0, 0]])


@pytest.mark.parametrize("min_rows", [2, 5], ids=["rows and columns", "columns"])
def test_abstaining_labels_with_equal_row_sums_are_labels(
    min_rows: int, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Counts cannot be negative, so a shared row sum does not make -1 labels counts."""
    labels = np.array(
        [[0, 1, 2, -1, 0, 1], [1, -1, 2, 0, 0, 1], [2, 1, -1, 0, 1, 0]]
    )  # every row sums to 3
    path = save(tmp_path, "labels.npy", labels)
    votes = load_both(path, monkeypatch, min_rows=min_rows, teachers=3)
    assert (votes.format, votes.detected, votes.num_classes) == (VoteFormat.LABELS, True, 3)
    np.testing.assert_array_equal(votes.counts, naive_counts(labels, 3))
    result = run_cli(["analyze", path, "--teachers", 3, *ANALYZE])
    assert result.json["input"]["format"] == "labels"
    assert result.json["input"]["num_teachers"] == 3


def test_minus_one_with_many_classes_is_ambiguous(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A counts file with a -1 in it is no counts file, and labels only with 251 classes."""
    array = counts_of(np.random.default_rng(4), 250, 20, 10)
    array[7, 3] = -1
    path = save(tmp_path, "votes.npy", array)
    with pytest.raises(InputError) as excinfo:
        load_both(path, monkeypatch)
    message = message_of(excinfo, path)
    assert f"could be labels (20 teachers, 10 queries, {array.max() + 1} classes" in message
    assert "or counts with a bad value (row 7, column 3 is -1); pass --format labels" in message
    assert cli_error(["analyze", path, *ANALYZE], path).endswith(message)
    with pytest.raises(InputError) as excinfo:
        load_both(path, monkeypatch, fmt="counts")
    assert "row 7, column 3 is -1; expected finite non-negative" in message_of(excinfo, path)


@pytest.mark.parametrize("value", [-2, -1.5, -np.inf])
def test_other_negative_labels_stay_an_error(
    value: float, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    labels = ABSTAINING.astype(np.float64)
    labels[2, 4] = value
    path = save(tmp_path, "labels.npy", labels)
    with pytest.raises(InputError) as excinfo:
        load_both(path, monkeypatch, fmt="labels")
    message = message_of(excinfo, path)
    assert f"label of teacher 2 for query 4 is {show_value(value)}; expected integer" in message
    assert message.endswith("or -1 for a teacher that abstains")
    args = ["analyze", path, "--format", "labels", *ANALYZE]
    assert cli_error(args, path).endswith(message)
    with pytest.raises(InputError) as excinfo:  # auto: not labels, so counts, which fail
        load_both(path, monkeypatch)
    assert "expected finite non-negative vote counts" in message_of(excinfo, path)


def show_value(value: float) -> str:
    return str(int(value)) if np.isfinite(value) and float(value).is_integer() else str(value)


def test_the_first_bad_label_is_the_same_on_both_paths(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The "first" bad value is by query: blocks of queries find the one a whole array does."""
    labels = np.zeros((3, 9))
    labels[0, 8] = np.nan
    labels[2, 0] = -2
    path = save(tmp_path, "labels.npy", labels)
    with pytest.raises(InputError) as excinfo:
        load_both(path, monkeypatch, fmt="labels")
    assert "label of teacher 2 for query 0 is -2" in message_of(excinfo, path)


def test_abstaining_labels_through_the_cli(tmp_path: Path) -> None:
    path = save(tmp_path, "labels.npy", ABSTAINING)
    inspect = run_cli(["inspect", path, "--teachers", 4, "--json"]).json["input"]
    assert (inspect["format"], inspect["format_detected"]) == ("labels", True)
    assert (inspect["num_teachers"], inspect["num_classes"], inspect["num_queries"]) == (4, 3, 6)
    analyze = run_cli(["analyze", path, "--format", "labels", *ANALYZE]).json["input"]
    assert analyze["num_teachers"] == 4


# --- 4. readings that are as plausible: auto never picks one ------------------------------------


def issue_counts() -> tuple[np.ndarray, np.ndarray]:
    """The issue's counts (3,000 queries x 100 classes, 50 teachers), and the same with one
    vote abstaining (row 17 sums to 49)."""
    counts = counts_of(np.random.default_rng(15), 50, 3000, 100)
    abstaining = counts.copy()
    abstaining[17, int(np.argmax(abstaining[17]))] -= 1
    return counts, abstaining


ISSUE = ["--delta", 1e-5, "--no-release", "--json"]


def publishable(result: Any) -> float:
    return float(result.json["publishable"][0]["epsilon"])


def test_counts_with_an_abstaining_teacher_are_never_read_as_labels(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    counts, abstaining = issue_counts()
    path = save(tmp_path, "votes.npy", abstaining)
    classes = int(abstaining.max()) + 1
    with pytest.raises(InputError) as excinfo:
        load_both(path, monkeypatch, block_rows=997)
    assert message_of(excinfo, path) == (
        f"{path}: cannot tell the format: it could be counts of 3000 queries x 100 classes "
        "with abstaining teachers (1 of 3000 rows sums to 49, the others to 50; pass --format "
        "counts --teachers M, M at least 50), or labels of 3000 teachers x 100 queries "
        f"({classes} classes; pass --format labels), or labels of 100 teachers x 3000 "
        f"queries saved as queries x teachers ({classes} classes; pass --format labels "
        "--teachers 100)"
    )
    assert cli_error(["analyze", path, "--sigma", 10, *ISSUE], path).endswith(
        message_of(excinfo, path)
    )
    # The flags it names settle it. Read as counts, the publishable epsilon is ten times
    # what the labels reading (100 queries) gave when auto took it.
    as_counts = run_cli(
        ["analyze", path, "--format", "counts", "--teachers", 50, "--sigma", 10, *ISSUE]
    )
    source = as_counts.json["input"]
    assert (source["format"], source["num_queries"], source["num_teachers"]) == ("counts", 3000, 50)
    assert publishable(as_counts) == pytest.approx(62.241, abs=5e-4)
    as_labels = run_cli(["analyze", path, "--format", "labels", "--sigma", 10, *ISSUE])
    assert as_labels.json["input"]["num_queries"] == 100
    assert publishable(as_labels) == pytest.approx(6.573, abs=5e-4)
    # --teachers 50 leaves counts the only reading (3,000 labels teachers are more than 50).
    auto = load_both(path, monkeypatch, block_rows=997, teachers=50)
    assert (auto.format, auto.detected, auto.num_teachers) == (VoteFormat.COUNTS, True, 50)
    np.testing.assert_array_equal(auto.counts, abstaining)
    assert auto.warnings == (
        f"{path}: 1 of 3000 votes rows do not sum to --teachers 50 (sums range from 49 to 50)",
    )
    # Every row at 50: counts outright.
    np.save(path, counts)
    full = load_both(path, monkeypatch, block_rows=997)
    assert (full.format, full.detected, full.num_teachers) == (VoteFormat.COUNTS, True, 50)


def test_labels_saved_queries_x_teachers_are_never_read_as_teachers_x_queries(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Labels that agree on nothing (uniform noise): the data do not decide the layout.
    labels = np.random.default_rng(15).integers(0, 10, size=(100, 5000))
    path = save(tmp_path, "votes.npy", np.ascontiguousarray(labels.T))  # C order: streamed
    with pytest.raises(InputError) as excinfo:
        load_both(path, monkeypatch, block_rows=997)
    assert message_of(excinfo, path).startswith(
        f"{path}: cannot tell the format: it could be labels of 5000 teachers x 100 queries "
        "(10 classes; pass --format labels), or labels of 100 teachers x 5000 queries saved "
        f"as queries x teachers (10 classes; pass --format labels --teachers 100){UNDECIDED}"
    )
    assert cli_error(["analyze", path, "--sigma", 40, *ISSUE], path).endswith(
        message_of(excinfo, path)
    )
    # --format labels reads the documented layout, and the report says which it read.
    given = run_cli(["analyze", path, "--format", "labels", "--sigma", 40, *ISSUE])
    source = given.json["input"]
    assert (source["layout"], source["num_teachers"], source["num_queries"]) == (
        "teachers x queries",
        5000,
        100,
    )
    assert publishable(given) == pytest.approx(1.3565, abs=5e-5)
    table = run_cli(["analyze", path, "--format", "labels", "--sigma", 40, "--delta", 1e-5])
    assert "format labels (given, 5000 teachers x 100 queries)" in " ".join(table.stdout.split())
    # Saved as (teachers, queries), --teachers 100 reads it so: 5,000 queries, ten times the
    # cost. (Without a flag it reads both ways too: 100 x 5000 could be 5,000 teachers.)
    np.save(path, labels)
    detected = run_cli(["analyze", path, "--teachers", 100, "--sigma", 40, *ISSUE])
    source = detected.json["input"]
    assert (source["format"], source["format_detected"], source["layout"]) == (
        "labels",
        True,
        "teachers x queries",
    )
    assert (source["num_teachers"], source["num_queries"]) == (100, 5000)
    assert publishable(detected) == pytest.approx(13.2067, abs=5e-5)


def test_teachers_leaves_the_reading_it_does_not_refute(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """--teachers M under auto: counts with no row above M, labels in the layout of M
    teachers."""
    monkeypatch.setattr(votes_module, "_BLOCK_CELLS", 250 * 97)
    labels = load_both(str(MNIST_LABELS), monkeypatch, block_rows=97, teachers=250)
    assert (labels.format, labels.detected, labels.num_teachers) == (VoteFormat.LABELS, True, 250)
    assert labels.warnings == ()
    binary = np.array([[0, 1, 1, 0], [1, 1, 0, 0], [0, 0, 1, 1], [1, 0, 1, 0], [0, 1, 0, 0]])
    path = save(tmp_path, "votes.npy", binary)  # 5 x 4: two plausible readings under 5
    with pytest.raises(InputError) as excinfo:
        load_both(path, monkeypatch, teachers=5)
    assert message_of(excinfo, path) == (
        f"{path}: cannot tell the format: it could be counts of 5 queries x 4 classes from 5 "
        "teachers (1 of 5 rows sums to 1, the others to 2; pass --format counts), or labels "
        "of 5 teachers x 4 queries (2 classes; pass --format labels)"
    )
    with pytest.raises(InputError) as excinfo:  # 4 teachers: counts, or the transposed labels
        load_both(path, monkeypatch, teachers=4, fmt="auto")
    assert "could be counts of 5 queries x 4 classes from 4 teachers" in message_of(excinfo, path)
    assert load_both(path, monkeypatch, teachers=3).format is VoteFormat.COUNTS
    # 100 x 20 labels of 10 classes saved queries x teachers, and --teachers 20: rows sum
    # to more than 20 and 100 rows are not 20 teachers; the transposed reading is left, and
    # read (it was an error: auto never transposed).
    labels = np.random.default_rng(7).integers(0, 10, size=(20, 100))
    path = save(tmp_path, "transposed.npy", np.ascontiguousarray(labels.T))
    picked = pate_cli.load_votes(path, teachers=20)
    assert (picked.format, picked.detected, picked.layout) == (
        VoteFormat.LABELS,
        True,
        "queries x teachers",
    )
    assert (picked.num_teachers, picked.num_queries) == (20, 100)
    np.testing.assert_array_equal(picked.counts, naive_counts(labels, 10))


def test_soft_votes_are_reported(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    soft = counts_of(np.random.default_rng(6), 1000, 20, 4) / 4  # quarters of 250 teachers
    path = save(tmp_path, "votes.npy", soft)
    votes = load_both(path, monkeypatch)
    assert (votes.format, votes.num_teachers) == (VoteFormat.COUNTS, 250)
    np.testing.assert_array_equal(votes.counts, soft)
    q, c = np.argwhere(soft != np.floor(soft))[0]
    note = (
        f"{path}: votes hold fractional values (soft votes; row {q}, column {c} is "
        f"{soft[q, c]}): they are analysed as counts, as they are; the smooth-sensitivity "
        "release needs whole counts"
    )
    assert votes.warnings == (note,)
    assert note in run_cli(["analyze", path, *ANALYZE]).json["warnings"]
    whole = load_both(save(tmp_path, "whole.npy", soft * 4), monkeypatch)
    assert (whole.num_teachers, whole.warnings) == (1000, ())


@pytest.mark.parametrize(
    ("array", "layout"),
    [
        (np.load(MNIST)[:50], "queries x classes"),
        (np.load(MNIST_LABELS)[:20, :50], "teachers x queries"),
        (np.eye(3)[LABELS], "teachers x queries x classes"),
    ],
    ids=["counts", "labels", "probs"],
)
def test_every_report_states_the_layout(array: np.ndarray, layout: str, tmp_path: Path) -> None:
    path = save(tmp_path, "votes.npy", array)
    teachers = ["--teachers", 20] if layout == "teachers x queries" else []  # labels: a layout
    for command in (["analyze", path, *teachers, *ANALYZE], ["inspect", path, *teachers, "--json"]):
        assert run_cli(command).json["input"]["layout"] == layout


# --- 5. .npz members ------------------------------------------------------------------------


def npy_bytes(array: np.ndarray) -> bytes:
    buffer = io.BytesIO()
    np.save(buffer, array, allow_pickle=False)
    return buffer.getvalue()


def header_bytes(shape: tuple[int, ...], descr: str = "<f8") -> bytes:
    buffer = io.BytesIO()
    header = {"descr": descr, "fortran_order": False, "shape": shape}
    np.lib.format.write_array_header_1_0(buffer, header)
    return buffer.getvalue()


def write_npz(path: Path, member: bytes) -> str:
    with zipfile.ZipFile(path, "w", compression=zipfile.ZIP_DEFLATED) as archive:
        archive.writestr("votes.npy", member)
    return str(path)


@pytest.fixture
def member_reads(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """The sizes the reader asks of an archive member (what it lets the archive inflate)."""
    sizes: list[int] = []
    real_read = zipfile.ZipExtFile.read

    def read(self: zipfile.ZipExtFile, n: int = -1) -> bytes:
        sizes.append(n)
        return real_read(self, n)

    monkeypatch.setattr(zipfile.ZipExtFile, "read", read)
    return sizes


def test_an_npz_member_declaring_more_than_the_limit_is_refused_at_once(
    tmp_path: Path, member_reads: list[int]
) -> None:
    shape = (10**6, 10**4)  # 80 GB of float64, in an archive of a few kB of zeros
    path = write_npz(tmp_path / "votes.npz", header_bytes(shape) + bytes(1 << 20))
    assert (tmp_path / "votes.npz").stat().st_size < 10_000
    with deadline(10), pytest.raises(InputError) as excinfo:
        pate_cli.load_votes(path)
    message = message_of(excinfo, path)
    assert message.startswith(
        f"{path}: array 'votes': the header declares shape {shape} of float64 (80000000000 "
        "bytes), more than the"
    )
    assert f"{votes_reader.MAX_ARRAY_BYTES} bytes an .npz array may inflate to" in message
    assert max(member_reads) < 1000  # the header only
    with deadline(10):
        assert cli_error(["analyze", path, *ANALYZE], path).endswith(message)


def test_an_npz_member_within_the_archive_but_over_the_limit_is_not_inflated(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, member_reads: list[int]
) -> None:
    zeros = np.zeros((300, 100))  # 240,000 bytes, consistent with the zip directory
    path = write_npz(tmp_path / "votes.npz", npy_bytes(zeros))
    monkeypatch.setattr(votes_reader, "MAX_ARRAY_BYTES", 1 << 16)  # read at call time
    with pytest.raises(InputError) as excinfo:
        pate_cli.load_votes(path)
    message = message_of(excinfo, path)
    assert message.startswith(f"{path}: array 'votes': the header declares shape (300, 100)")
    assert "(240000 bytes), more than the 65536 bytes" in message
    assert max(member_reads) < 1000
    monkeypatch.setattr(votes_reader, "MAX_ARRAY_BYTES", 240_000)  # exactly the limit: read
    np.testing.assert_array_equal(votes_reader.load_array(path, "votes"), zeros)


def test_an_npz_member_with_trailing_data_is_refused(
    tmp_path: Path, member_reads: list[int]
) -> None:
    counts = np.array([[3.0, 1.0], [2.0, 2.0]])
    member = npy_bytes(counts)
    path = write_npz(tmp_path / "votes.npz", member + bytes(64))
    with pytest.raises(InputError) as excinfo:
        pate_cli.load_votes(path)
    message = message_of(excinfo, path)
    assert message.startswith(
        f"{path}: array 'votes': corrupt .npz archive: the header declares shape (2, 2) of "
        "float64 (32 bytes)"
    )
    assert "but the archive stores 96 bytes after it" in message
    assert max(member_reads) < 1000  # refused from the zip directory, before the data
    assert cli_error(["analyze", path, *ANALYZE], path).endswith(message)
    path = write_npz(tmp_path / "short.npz", member[:-8])
    with pytest.raises(InputError) as excinfo:
        pate_cli.load_votes(path)
    assert message_of(excinfo, path).startswith(f"{path}: array 'votes': votes file is truncated")


def test_an_npz_member_is_read_no_further_than_its_header_claims(
    tmp_path: Path, member_reads: list[int]
) -> None:
    counts = np.array([[3.0, 1.0], [2.0, 2.0]])
    member = npy_bytes(counts)
    path = write_npz(tmp_path / "votes.npz", member)
    header = len(member) - counts.nbytes
    # The header is checked (the archive opened once), then read again with the data.
    np.testing.assert_array_equal(votes_reader.load_array(path, "votes"), counts)
    assert all(n >= 0 for n in member_reads) and sum(member_reads) == header + len(member)
    member_reads.clear()
    votes = pate_cli.load_votes(path)
    np.testing.assert_array_equal(votes.counts, counts)
    assert all(n >= 0 for n in member_reads) and sum(member_reads) == header + len(member)


def test_an_npz_member_inflating_beyond_any_vote_file_is_refused_at_once(
    tmp_path: Path, member_reads: list[int]
) -> None:
    """8 MiB of zeros deflate 1018:1 into 8 kB: no array of votes compresses so far."""
    path = write_npz(tmp_path / "votes.npz", npy_bytes(np.zeros((1024, 1024))))
    with zipfile.ZipFile(path) as archive:
        info = archive.infolist()[0]
    assert (tmp_path / "votes.npz").stat().st_size < 10_000
    ratio = info.file_size / info.compress_size
    assert info.file_size == (8 << 20) + 128 and 1000 < ratio < 1033  # deflate's ceiling
    expected = (
        f"{path}: array 'votes': the archive inflates {info.compress_size} bytes to "
        f"{info.file_size} (ratio {ratio:.0f}:1), more than the 1000:1 of any votes array "
        "(nearly all of it is one value); expected the votes saved with numpy.save or "
        "numpy.savez"
    )
    for load in (pate_cli.load_votes, lambda p: votes_reader.load_array(p, "votes")):
        with deadline(10), pytest.raises(InputError) as excinfo:
            load(path)
        assert message_of(excinfo, path) == expected
    assert max(member_reads) < 1000  # the header only: nothing inflated
    assert cli_error(["analyze", path, *ANALYZE], path).endswith(expected)
    # The same size of counts, which compress 6:1, reads.
    counts = counts_of(np.random.default_rng(3), 250, 100_000, 10).astype(np.float64)
    path = write_npz(tmp_path / "counts.npz", npy_bytes(counts))
    np.testing.assert_array_equal(pate_cli.load_votes(path).counts, counts)


def test_an_npz_array_is_inflated_into_itself(tmp_path: Path) -> None:
    """Read whole, an .npz array is inflated block by block into the array: the reader holds
    one copy of the data (it once held the inflated bytes and a copy of them)."""
    counts = counts_of(np.random.default_rng(4), 250, 200_000, 10)  # 16 MB of int64
    path = write_npz(tmp_path / "votes.npz", npy_bytes(counts))
    tracemalloc.start()
    try:
        array = votes_reader.load_array(path, "votes")
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    np.testing.assert_array_equal(array, counts)
    assert counts.nbytes == 16_000_000 and peak < 1.25 * counts.nbytes


def test_teachers_picks_the_axis_of_labels_saved_queries_x_teachers(tmp_path):
    from pate_cli.votes import load_votes

    # 5,000 queries x 100 teachers of 10 classes, saved queries x teachers: auto reads it so
    # (the teachers agree on each query), --format labels alone reads 5,000 teachers x 100
    # queries (the documented layout), and --teachers 100 picks the other axis: the same
    # counts as the file saved transposed.
    rng = np.random.default_rng(7)
    truth = rng.integers(0, 10, size=5000)
    labels = np.where(rng.random((100, 5000)) < 0.7, truth, rng.integers(0, 10, (100, 5000)))
    saved = tmp_path / "queries_x_teachers.npy"
    np.save(saved, labels.T)
    upright = tmp_path / "teachers_x_queries.npy"
    np.save(upright, labels)
    auto = load_votes(saved)
    assert (auto.num_teachers, auto.num_queries, auto.layout) == (100, 5000, "queries x teachers")
    assert load_votes(saved, fmt="labels").num_teachers == 5000
    picked = load_votes(saved, fmt="labels", teachers=100)
    plain = load_votes(upright, fmt="labels")
    assert picked.num_teachers == 100 and picked.num_queries == 5000
    np.testing.assert_array_equal(np.asarray(picked.counts), np.asarray(plain.counts))
    np.testing.assert_array_equal(np.asarray(auto.counts), np.asarray(plain.counts))
    assert picked.layout == "queries x teachers" and plain.layout == "teachers x queries"
    assert any("read as labels saved queries x teachers" in w for w in picked.warnings)
    # The selection counts queries along the picked axis.
    first = load_votes(saved, fmt="labels", teachers=100, queries=10)
    np.testing.assert_array_equal(np.asarray(first.counts), np.asarray(plain.counts)[:10])
    out = run_cli(
        ["analyze", saved, "--format", "labels", "--teachers", 100, "--sigma", 40]
        + ["--delta", 1e-5, "--no-release"]
    )
    assert "100 queries x 5000 teachers" not in out.stdout
    assert "5000 queries x 100 teachers" in " ".join(out.stdout.split())

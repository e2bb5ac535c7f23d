"""Side inputs that go with a votes file: query indices, baselines, masks, labels, scores.

Each is read with the safe reader (:func:`~pate_cli.votes.reader.load_array`), or taken as
an array in memory (:func:`~pate_cli.votes.memory.read_input`), and checked
against the votes it goes with: its shape (that of the file, or of the selected queries, to
which the votes' selection is then applied), its dtype and its values. ``--indices`` is
read before the votes are converted, because it chooses the queries
(:func:`query_selection`); the others are read afterwards, from the loaded
:class:`~pate_cli.votes.model.Votes`. Every problem is an :class:`~pate_cli.errors.InputError`
whose one-line message starts with the side input's path (``<baseline array>`` and the like
for an array) and names the votes file where that helps.

Each side input has one check, whatever it came from: the array, read from its file or
given in memory, goes through the same function (:func:`check_student_probs`,
:func:`check_true_labels`), so a file and the same array in memory give the same result
or the same error, whose message differs only in how it names the input: the path, or
the ``<student_probs array>`` placeholder.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np
from numpy.typing import ArrayLike, NDArray

from pate_cli.common.spelling import option
from pate_cli.core.compact import Compact
from pate_cli.errors import InputError, UnsupportedError
from pate_cli.votes.formats import first_index, is_whole, show_value, sum_rows
from pate_cli.votes.memory import read_input, where_of
from pate_cli.votes.reader import StrPath

if TYPE_CHECKING:  # pragma: no cover - typing only
    from pate_cli.votes.model import Votes

#: A side input: a path to its file, or the array itself (``pate_cli.votes.memory``).
Input = StrPath | ArrayLike


def _load_indices(path: Input, votes_where: str, num_file_queries: int) -> NDArray[np.int64]:
    """Read ``--indices``: distinct integer query indices of the votes file, in their order."""
    a, where = read_input(path, "indices")
    if a.ndim != 1 or a.size == 0:
        raise InputError(
            f"{where}: indices array has shape {a.shape}; expected a non-empty 1-D "
            "array of query indices"
        )
    if a.dtype.kind == "b":
        raise InputError(f"{where}: indices array has dtype bool; expected integer query indices")
    bad = ~is_whole(a) | (a < 0) | (a >= num_file_queries)
    if bad.any():
        (i,) = first_index(bad)
        raise InputError(
            f"{where}: index at position {i} is {show_value(a[i])}; expected integer "
            f"query indices in [0, {num_file_queries}) for {votes_where}"
        )
    selection = a.astype(np.int64)
    values, counts = np.unique(selection, return_counts=True)
    if (counts > 1).any():
        j = int(np.argmax(counts > 1))
        raise InputError(
            f"{where}: query index {values[j]} appears {counts[j]} times; expected "
            "each index at most once"
        )
    return selection


def query_selection(
    where: str, num_file_queries: int, queries: int | None, indices: Input | None
) -> NDArray[np.int64] | None:
    """The file queries to keep: ``--indices`` first, then the first ``--queries`` of them.

    Args:
        where: The votes file, as the user gave it.
        num_file_queries: Queries in the votes file.
        queries: ``--queries``.
        indices: ``--indices``, a file (or an array) of query indices.

    Returns:
        File query indices, in order; None means all, in file order.

    Raises:
        InputError: A bad indices file, or fewer queries than ``--queries`` asks for.
    """
    if indices is None:
        if queries is None:
            return None
        if queries > num_file_queries:
            raise InputError(
                f"{where}: has only {num_file_queries} queries, {option('queries')} asks for "
                f"{queries}"
            )
        return np.arange(queries, dtype=np.int64)
    selection = _load_indices(indices, where, num_file_queries)
    if queries is not None:
        if queries > selection.size:
            raise InputError(
                f"{where_of(indices, 'indices')}: has only {selection.size} queries, "
                f"{option('queries')} asks for {queries}"
            )
        selection = selection[:queries]
    return selection


#: Rows of probabilities (a baseline, the student's) sum to 1 within this.
PROBABILITY_TOLERANCE = 1e-6

#: How messages name the student's probabilities and the true labels: as the keywords of
#: ``aggregate`` (and the roles of a record's inputs), ``<student_probs array>`` for an array.
STUDENT_PROBS = "student_probs"
TRUE_LABELS = "true_labels"


def _rows_of(votes: Votes, length: int) -> NDArray[np.int64] | None:
    """The rows of a side input of ``length`` rows that go with the selected queries: the
    votes' selection for one row per query of the file, None (all) for one per selected query.
    """
    if length == votes.num_file_queries and votes.selection is not None:
        return votes.selection
    return None


def _row(rows: NDArray[np.int64] | None, q: int) -> int:
    """The row of the array as given that holds selected query ``q`` (messages name it)."""
    return q if rows is None else int(rows[q])


def _per_query(
    a: np.ndarray, where: str, votes: Votes, what: str
) -> tuple[NDArray[np.float64], NDArray[np.int64] | None]:
    """A (queries, classes) array that goes with the votes, selected like them, as float64.

    Accepts the file's shape (the selection is applied) or the selected shape.

    Returns:
        The selected rows (a copy), and which rows of ``a`` they are (None: all, in order).
    """
    file_shape = (votes.num_file_queries, votes.num_classes)
    selected_shape = (votes.num_queries, votes.num_classes)
    if a.dtype.kind == "b" or a.shape not in (file_shape, selected_shape):
        selected = (
            ""
            if selected_shape == file_shape
            else f", or {selected_shape} for the selected queries"
        )
        raise InputError(
            f"{where}: {what} has shape {a.shape} and dtype {a.dtype!s}; expected "
            f"numbers of shape {file_shape} like {votes.path}{selected}"
        )
    rows = _rows_of(votes, a.shape[0])
    values = np.array(a if rows is None else a[rows], dtype=np.float64, order="C")
    return values, rows


def _load_per_query(path: Input, votes: Votes, what: str, expected: str) -> NDArray[np.float64]:
    """A (queries, classes) array of finite non-negative numbers that goes with the votes."""
    a, where = read_input(path, what)
    values, rows = _per_query(a, where, votes, what)
    bad = ~np.isfinite(values) | (values < 0)
    if bad.any():
        q, c = first_index(bad)
        raise InputError(
            f"{where}: {what} row {_row(rows, q)}, column {c} is {show_value(values[q, c])}; "
            f"expected {expected}"
        )
    return values


def _dense_votes(votes: Votes, flag: str) -> None:
    """Interactive-GNMax's inputs are per class: they need votes held dense."""
    if isinstance(votes.counts, Compact):
        raise UnsupportedError(
            f"{option(flag)}: Interactive-GNMax over votes held by query (a vocabulary, or "
            "candidate sets) is not available; Confident-GNMax is"
        )


def load_baseline(path: Input, votes: Votes) -> NDArray[np.float64]:
    """Read an Interactive-GNMax baseline on the votes' scale, selected like the votes.

    A baseline whose rows each sum to 1 (within 1e-6) is probabilities and is
    scaled by M; otherwise it is taken as counts on the votes' scale.

    Args:
        path: The baseline file, or the baseline as an array.
        votes: The votes it goes with (for C, M and the selection).

    Returns:
        The baseline. Shapes: (Q, C).

    Raises:
        InputError: Wrong shape, a non-finite or negative entry, or an unreadable file.
    """
    _dense_votes(votes, "baseline")
    baseline = _load_per_query(
        path, votes, "baseline", "finite non-negative probabilities or counts"
    )
    if np.all(np.abs(sum_rows(baseline) - 1.0) <= PROBABILITY_TOLERANCE):
        baseline *= votes.num_teachers
    return baseline


def check_student_probs(a: np.ndarray, where: str, votes: Votes) -> NDArray[np.float64]:
    """The one check of the student's class probabilities (Interactive-GNMax), however they
    came: read from a file (:func:`load_student_probs`) or given as an array.

    The rule is the documented one of ``--baseline``/``--student-probs``: every row sums to
    1 within 1e-6, or every row sums to M within M * 1e-6 (M times probabilities, a
    baseline on the votes' scale, as :func:`load_baseline` reads it), and is then divided
    by M. One row per query of the votes' file (the votes' selection is applied) or of the
    selected queries; queries in messages are rows of ``a`` as given.

    Args:
        a: The array, as read (numeric: the reader and ``memory_array`` refuse the rest).
        where: How messages name it: the file's path, or ``<student_probs array>``.
        votes: The votes they go with (for C, M and the selection).

    Returns:
        The probabilities, rows summing to 1 (a copy). Shapes: (Q, C).

    Raises:
        InputError: Wrong shape, a negative or non-finite entry, a row not summing to 1
            (or every row to M); the one-line message starts with ``where``.
    """
    _dense_votes(votes, "student-probs")
    probs, rows = _per_query(a, where, votes, STUDENT_PROBS)
    bad = ~np.isfinite(probs) | (probs < 0)
    if bad.any():
        q, c = first_index(bad)
        raise InputError(
            f"{where}: {STUDENT_PROBS} of query {_row(rows, q)}, class {c} is "
            f"{show_value(probs[q, c])}; expected finite non-negative probabilities"
        )
    m = votes.num_teachers
    if np.all(np.abs(sum_rows(probs) - m) <= PROBABILITY_TOLERANCE * m):
        probs /= m
    sums = sum_rows(probs)
    off = np.abs(sums - 1.0) > PROBABILITY_TOLERANCE
    if off.any():
        (q,) = first_index(off)
        # The sum to the tolerance's precision: 250, not 249.99999999999997.
        raise InputError(
            f"{where}: {STUDENT_PROBS} of query {_row(rows, q)} sum to {sums[q]:.7g}; "
            f"expected every row to sum to 1 (or every row to the number of teachers, {m})"
        )
    return probs


def load_student_probs(path: Input, votes: Votes) -> NDArray[np.float64]:
    """Read the student's class probabilities from a file (or take them as an array), and
    check them with :func:`check_student_probs`: rows summing to 1, or M times them.

    Returns:
        The probabilities. Shapes: (Q, C).

    Raises:
        InputError: An unreadable file, or what :func:`check_student_probs` refuses.
    """
    a, where = read_input(path, STUDENT_PROBS)
    return check_student_probs(a, where, votes)


def check_true_labels(a: np.ndarray, where: str, votes: Votes) -> NDArray[np.int64]:
    """The one check of true class labels, however they came: read from a file
    (:func:`load_true_labels`) or given as an array.

    One integer (of any numeric dtype, but not bool) in [0, C) per query of the votes' file
    (the votes' selection is applied) or of the selected queries; queries in messages are
    entries of ``a`` as given.

    Args:
        a: The array, as read (numeric: the reader and ``memory_array`` refuse the rest).
        where: How messages name it: the file's path, or ``<true_labels array>``.
        votes: The votes they go with (for C and the selection).

    Returns:
        The labels. Shapes: (Q,).

    Raises:
        InputError: Wrong shape or dtype, a label that is not a whole number in [0, C);
            the one-line message starts with ``where``.
    """
    lengths = dict.fromkeys((votes.num_file_queries, votes.num_queries))
    if a.ndim != 1 or a.shape[0] not in lengths or a.dtype.kind not in "iuf":
        expected = " or ".join(f"({n},)" for n in lengths)
        raise InputError(
            f"{where}: {TRUE_LABELS} has shape {a.shape} and dtype {a.dtype!s}; expected "
            f"integer labels of shape {expected}, one per query of {votes.path}"
        )
    rows = _rows_of(votes, a.shape[0])
    labels = a if rows is None else a[rows]
    bad = ~is_whole(labels) | (labels < 0) | (labels >= votes.num_classes)
    if bad.any():
        (q,) = first_index(bad)
        raise InputError(
            f"{where}: {TRUE_LABELS} of query {_row(rows, q)} is {show_value(labels[q])}; "
            f"expected an integer in [0, {votes.num_classes})"
        )
    return labels.astype(np.int64)


def load_true_labels(path: Input, votes: Votes) -> NDArray[np.int64]:
    """Read true class labels from a file (or take them as an array), and check them with
    :func:`check_true_labels`: one integer in [0, C) per query.

    Returns:
        The labels. Shapes: (Q,).

    Raises:
        InputError: An unreadable file, or what :func:`check_true_labels` refuses.
    """
    a, where = read_input(path, TRUE_LABELS)
    return check_true_labels(a, where, votes)


def load_answered_mask(path: Input, num_queries: int) -> NDArray[np.bool_]:
    """Read the answered mask written by ``aggregate``: bool, or integers 0/1.

    A mask shorter than the queries comes from a run that stopped early
    (``--max-answered``/``--max-queries``): it covers the queries seen, a prefix.

    Returns:
        The mask. Shapes: (L,) with 1 <= L <= Q.

    Raises:
        InputError: Wrong shape, a dtype other than bool/integer, a value other than 0/1.
    """
    a, where = read_input(path, "answered mask")
    if a.ndim != 1 or not 1 <= a.shape[0] <= num_queries:
        raise InputError(
            f"{where}: answered mask has shape {a.shape}; expected ({num_queries},), "
            "one entry per query (or fewer, for a run that stopped early)"
        )
    if a.dtype.kind not in "biu":
        raise InputError(
            f"{where}: answered mask has dtype {a.dtype!s}; expected bool or integer 0/1 values"
        )
    bad = (a != 0) & (a != 1)
    if bad.any():
        (i,) = first_index(bad)
        raise InputError(
            f"{where}: answered mask entry {i} is {show_value(a[i])}; expected bool or "
            "integer 0/1 values"
        )
    return a.astype(np.bool_)

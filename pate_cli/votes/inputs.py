"""Side inputs that go with a votes file: query indices, baselines, masks, labels, scores.

Each is read with the safe reader (:func:`~pate_cli.votes.reader.load_array`), or taken as
an array in memory (:func:`~pate_cli.votes.memory.read_input`), and checked
against the votes it goes with: its shape (that of the file, or of the selected queries, to
which the votes' selection is then applied), its dtype and its values. ``--indices`` is
read before the votes are converted, because it chooses the queries
(:func:`query_selection`); the others are read afterwards, from the loaded
:class:`~pate_cli.votes.model.Votes`. Every problem is an :class:`~pate_cli.errors.InputError`
whose one-line message starts with the side input's path and names the votes file where
that helps.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np
from numpy.typing import ArrayLike, NDArray

from pate_cli.errors import InputError
from pate_cli.spelling import option
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


def _load_per_query(path: Input, votes: Votes, what: str, expected: str) -> NDArray[np.float64]:
    """A (queries, classes) array that goes with the votes, selected like them.

    Accepts the file's shape (the selection is applied) or the selected shape.
    """
    a, where = read_input(path, what)
    file_shape = (votes.num_file_queries, votes.num_classes)
    selected_shape = (votes.num_queries, votes.num_classes)
    if a.dtype.kind == "b" or a.shape not in (file_shape, selected_shape):
        raise InputError(
            f"{where}: {what} has shape {a.shape} and dtype {a.dtype!s}; expected "
            f"numbers of shape {file_shape} like {votes.path}, or {selected_shape} "
            "for the selected queries"
        )
    is_file_rows = a.shape == file_shape and votes.selection is not None
    values = np.array(a[votes.selection] if is_file_rows else a, dtype=np.float64, order="C")
    bad = ~np.isfinite(values) | (values < 0)
    if bad.any():
        q, c = first_index(bad)
        row = int(votes.selection[q]) if is_file_rows and votes.selection is not None else q
        raise InputError(
            f"{where}: {what} row {row}, column {c} is {show_value(values[q, c])}; "
            f"expected {expected}"
        )
    return values


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
    baseline = _load_per_query(
        path, votes, "baseline", "finite non-negative probabilities or counts"
    )
    if np.all(np.abs(sum_rows(baseline) - 1.0) <= 1e-6):
        baseline *= votes.num_teachers
    return baseline


def load_student_probs(path: Input, votes: Votes) -> NDArray[np.float64]:
    """Read the student's class probabilities: rows summing to 1 within 1e-6, or M times
    them (a baseline on the votes' scale, as ``load_baseline`` reads it).

    Returns:
        The probabilities. Shapes: (Q, C).

    Raises:
        InputError: Wrong shape, a negative or non-finite entry, a row not summing to 1
            (or to M).
    """
    probs = _load_per_query(path, votes, "student probabilities", "finite probabilities")
    sums = sum_rows(probs)
    if np.all(np.abs(sums - votes.num_teachers) <= 1e-6 * votes.num_teachers):
        probs /= votes.num_teachers
    off = np.abs(sum_rows(probs) - 1.0) > 1e-6
    if off.any():
        (q,) = first_index(off)
        raise InputError(
            f"{where_of(path, 'student probabilities')}: student probabilities of query {q} sum to "
            f"{show_value(sum_rows(probs)[q])}; expected every row to sum to 1 (or to the "
            f"number of teachers, {votes.num_teachers})"
        )
    return probs


def load_true_labels(path: Input, votes: Votes) -> NDArray[np.int64]:
    """Read true class labels, one per query of the file or of the selection.

    Returns:
        The labels. Shapes: (Q,).

    Raises:
        InputError: Wrong shape, non-integer values, labels outside [0, C).
    """
    a, where = read_input(path, "true labels")
    lengths = (votes.num_file_queries, votes.num_queries)
    if a.ndim != 1 or a.shape[0] not in lengths or a.dtype.kind not in "iuf":
        raise InputError(
            f"{where}: true labels have shape {a.shape} and dtype {a.dtype!s}; expected "
            f"integer labels of shape ({votes.num_file_queries},) or ({votes.num_queries},)"
        )
    if a.shape[0] == votes.num_file_queries and votes.selection is not None:
        a = a[votes.selection]
    bad = ~is_whole(a) | (a < 0) | (a >= votes.num_classes)
    if bad.any():
        (q,) = first_index(bad)
        raise InputError(
            f"{where}: true label of query {q} is {show_value(a[q])}; expected an integer "
            f"in [0, {votes.num_classes})"
        )
    return a.astype(np.int64)


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

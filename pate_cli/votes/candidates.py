"""Candidate sets (``--candidates``): each query's classes, chosen without the private votes.

A next-token run narrows each query to the few tokens a public model proposes (SeqPATE's
top-k candidate sets). ``--candidates`` takes them in one of two forms, told apart by the
array alone, never by its values:

- **counts**: a 1-D array, one whole count n in [1, C] per file query. The query's classes
  are 0 .. n - 1, its votes numbered so; a vote outside them is an error.
- **token ids**: a 2-D array (file queries x k, -1 padding a shorter row wherever it
  stands), or a sparse file queries x vocabulary matrix (a ``scipy.sparse.save_npz`` file or
  a ``scipy.sparse`` matrix) whose non-zeros mark each query's candidates: a value other
  than 0, negative too, as ``count_nonzero`` counts them (an entry stored as 0 marks
  nothing; entries stored twice at one place are summed first). A query's classes are then
  its candidates in increasing token id order: the same classes in every form, and ties
  broken toward the smaller id, as without candidates. Its votes for other tokens are
  dropped and counted once in a note (:func:`dropped_note`); the teachers stay the file's;
  the labels ``aggregate`` releases are mapped back to token ids
  (:meth:`CandidateIds.token_ids`). The figures are those of the same votes renumbered by
  hand and read with counts: the renumbered histogram is as wide as the largest set.

Every input is read one way or refused in one line, an :class:`~pate_cli.errors.InputError`
naming the candidates' file (or ``<candidates array>``): token ids outside [0, V) (or
below -1), not whole or in a bool array; a token id twice in a row; a row of only -1 (a
sparse row without a non-zero); a sparse entry that is NaN or not a number; a row count,
or a sparse shape, other than the votes file's queries (x its vocabulary); an array of 0 or
3 dimensions; and a 2-D array of one column, which could be counts saved as a column as
well as one candidate per query (save counts as a 1-D array; a single candidate fixes the
query's answer anyway).

Memory is the candidates' and the votes' entries: the ids are held query by query (CSR:
``starts`` and ``ids``) and each vote is found among its query's candidates by a binary
search on the key ``query * V + token id``; nothing is ever a dense queries x vocabulary
array.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray

from pate_cli.core.compact import Compact
from pate_cli.errors import InputError
from pate_cli.votes.formats import first_index, is_whole, show_value

IntArray = NDArray[np.int64]
Entries = Iterable[tuple[IntArray, IntArray, NDArray[np.float64]]]
"""Non-zero votes, a block of queries at a time: (query, class, count), sorted by query."""


@dataclass(frozen=True)
class CandidateIds:
    """Each query's candidate token ids, in increasing order, query by query (CSR): query
    q's are ``ids[starts[q]:starts[q + 1]]``, and its class j is ``ids[starts[q] + j]``.

    Shapes: starts (Q + 1,), ids (N,) int64; ``vocabulary`` V (the votes' classes);
    ``width`` the most candidates of a file query (the classes of the renumbered counts).
    """

    starts: IntArray
    ids: IntArray
    vocabulary: int
    width: int

    def __len__(self) -> int:
        return int(self.starts.size - 1)

    @property
    def sizes(self) -> IntArray:
        """Each query's number of candidates."""
        sizes: IntArray = np.diff(self.starts)
        return sizes

    @classmethod
    def from_sizes(cls, sizes: IntArray, ids: IntArray, vocabulary: int) -> CandidateIds:
        """From each query's number of candidates and their ids, query by query."""
        starts = np.zeros(sizes.size + 1, dtype=np.int64)
        np.cumsum(sizes, out=starts[1:])
        width = int(sizes.max()) if sizes.size else 0
        return cls(starts, ids.astype(np.int64, copy=False), vocabulary, width)

    def take(self, selection: IntArray | None, count: int) -> CandidateIds:
        """The candidates of the selected file queries (None: the first ``count``)."""
        if selection is None:
            selection = np.arange(count, dtype=np.int64)
        sizes = self.sizes[selection]
        chosen = CandidateIds.from_sizes(sizes, self.ids[:0], self.vocabulary)
        # Entry i of the selection's ids is file entry i - (its new start - its old start).
        shift = np.repeat(self.starts[selection] - chosen.starts[:-1], sizes)
        ids = self.ids[np.arange(shift.size, dtype=np.int64) + shift]
        return CandidateIds(chosen.starts, ids, self.vocabulary, self.width)

    def token_ids(self, classes: NDArray[np.integer]) -> IntArray:
        """The token id of the class of each of the queries 0 .. L - 1 (a class is a
        position in the query's candidates); -1 (nothing released) stays -1."""
        classes = np.asarray(classes, dtype=np.int64)
        released = classes >= 0
        at = self.starts[: classes.size] + np.where(released, classes, 0)
        tokens: IntArray = np.where(released, self.ids[np.minimum(at, self.ids.size - 1)], -1)
        return tokens

    def keys(self) -> IntArray:
        """``query * V + token id`` of every candidate: sorted, as the ids are by query."""
        rows = np.repeat(np.arange(len(self), dtype=np.int64), self.sizes)
        keys: IntArray = rows * self.vocabulary + self.ids
        return keys


Candidates = IntArray | CandidateIds
"""``--candidates`` as read: a count per file query, or token ids."""


def candidates_of_array(
    a: np.ndarray, where: str, votes_where: str, num_file_queries: int, vocabulary: int
) -> Candidates:
    """``--candidates`` given as an array (a file's, or in memory): a 1-D array is counts,
    a 2-D array token ids (module docstring).

    Raises:
        InputError: anything the module docstring says is refused; one line, from ``where``.
    """
    if a.dtype.kind == "b":
        raise InputError(
            f"{where}: candidates array has dtype bool; expected integer counts (one per "
            "query) or token ids (a row per query)"
        )
    if a.ndim == 1:
        return _counts(a, where, votes_where, num_file_queries, vocabulary)
    if a.ndim != 2:
        raise InputError(
            f"{where}: candidates array has shape {a.shape}; expected one count per query of "
            f"{votes_where} ({num_file_queries},) or candidate token ids per query "
            f"({num_file_queries}, k)"
        )
    if a.shape[0] != num_file_queries:
        raise InputError(
            f"{where}: candidates array has shape {a.shape}; expected one row of candidate "
            f"token ids per query of {votes_where} ({num_file_queries}, k), -1 padding"
        )
    if a.shape[1] == 1:
        raise InputError(
            f"{where}: candidates array has shape {a.shape}: one candidate per query, or "
            f"counts saved as a column? expected counts as a 1-D array ({num_file_queries},) "
            "or token ids in rows of at least 2 columns"
        )
    return _padded_ids(a, where, votes_where, vocabulary)


def _counts(
    a: np.ndarray, where: str, votes_where: str, num_file_queries: int, vocabulary: int
) -> IntArray:
    """Each file query's number of classes, in [1, C] (its classes are 0 .. n - 1)."""
    if a.size != num_file_queries:
        raise InputError(
            f"{where}: candidates array has shape {a.shape}; expected one count per query of "
            f"{votes_where} ({num_file_queries},)"
        )
    bad = ~is_whole(a) | (a < 1) | (a > vocabulary)
    if bad.any():
        (i,) = first_index(bad)
        raise InputError(
            f"{where}: candidate count of query {i} is {show_value(a[i])}; expected a whole "
            f"number of classes in [1, {vocabulary}]"
        )
    return a.astype(np.int64)


def _padded_ids(a: np.ndarray, where: str, votes_where: str, vocabulary: int) -> CandidateIds:
    """Token ids, a row per file query, -1 padding: distinct, at least one per row."""
    bad = ~is_whole(a) | (a < -1) | (a >= vocabulary)
    if bad.any():
        q, j = first_index(bad)
        raise InputError(
            f"{where}: token id of query {q} is {show_value(a[q, j])}; expected token ids in "
            f"[0, {vocabulary}) of {votes_where}, or -1 (padding)"
        )
    ids = np.sort(a.astype(np.int64), axis=1)  # the padding first
    listed = ids >= 0
    sizes = np.count_nonzero(listed, axis=1)
    if np.any(sizes == 0):
        q = int(np.argmax(sizes == 0))
        raise InputError(
            f"{where}: query {q} has no candidates (a row of only -1); expected at least one "
            "token id per query"
        )
    twice = (ids[:, 1:] == ids[:, :-1]) & listed[:, 1:]
    if twice.any():
        q, j = first_index(twice)
        raise InputError(
            f"{where}: query {q} lists token id {ids[q, j + 1]} twice; expected distinct "
            "token ids in a row"
        )
    return CandidateIds.from_sizes(sizes, ids[listed], vocabulary)


def ids_of_marks(
    entries: tuple[np.ndarray, np.ndarray, np.ndarray],
    where: str,
    shape: tuple[int, int],
) -> CandidateIds:
    """Token ids from a sparse matrix's entries (row, column, value), of the votes' shape
    (checked by the caller): the non-zeros of row q are query q's candidates.

    A non-zero is an entry of the matrix whose value is not zero, whatever its sign (-1.0
    marks as 1.0 does): what ``count_nonzero`` counts, not what is stored. An entry stored
    as 0 marks nothing; the entries a COO matrix stores more than once at one place are
    summed first, as scipy reads them (1.0 and -1.0 there mark nothing).

    Raises:
        InputError: an entry outside the shape, a value that is not a number or is NaN, or
            a row without a non-zero.
    """
    row, column, value = (np.asarray(part) for part in entries)
    num_queries, vocabulary = shape
    if value.dtype.kind not in "biufc":
        raise InputError(
            f"{where}: a candidates matrix of dtype {value.dtype}; expected numbers, a "
            "non-zero marking a candidate"
        )
    if value.dtype.kind in "fc" and np.isnan(value).any():
        raise InputError(
            f"{where}: a candidates matrix entry is nan; expected numbers, a non-zero "
            "marking a candidate and 0 none"
        )
    row, column = row.astype(np.int64, copy=False), column.astype(np.int64, copy=False)
    if row.size and (
        row.min() < 0 or row.max() >= num_queries or column.min() < 0 or column.max() >= vocabulary
    ):
        raise InputError(f"{where}: a candidates matrix entry lies outside its shape {shape}")
    keys = _marked(row * vocabulary + column, value)
    sizes = np.bincount(keys // vocabulary, minlength=num_queries).astype(np.int64)
    if np.any(sizes == 0):
        q = int(np.argmax(sizes == 0))
        raise InputError(
            f"{where}: query {q} has no candidates (no non-zero in its row of the candidates "
            "matrix); expected at least one per query"
        )
    return CandidateIds.from_sizes(sizes, keys % vocabulary, vocabulary)


def _marked(keys: IntArray, value: np.ndarray) -> IntArray:
    """The sorted distinct keys whose value, the sum of the entries stored at the key, is
    not zero."""
    order = np.argsort(keys, kind="stable")
    keys, value = keys[order], value[order]
    if not keys.size:
        return keys
    starts = np.flatnonzero(np.r_[True, keys[1:] != keys[:-1]])
    totals = np.add.reduceat(value, starts)
    marked: IntArray = keys[starts][totals != 0]
    return marked


def compact_entries(counts: Compact) -> Entries:
    """The non-zero votes of compact counts, as one block."""
    rows, columns = np.nonzero((counts.classes >= 0) & (counts.values != 0))
    yield rows.astype(np.int64), counts.classes[rows, columns], counts.values[rows, columns]


def dense_entries(blocks: Iterable[tuple[int, np.ndarray]]) -> Entries:
    """The non-zero votes of dense counts, a block of queries (first query, rows) at a time."""
    for start, block in blocks:
        rows, columns = np.nonzero(block)
        values = np.asarray(block[rows, columns], dtype=np.float64)
        yield rows.astype(np.int64) + start, columns.astype(np.int64), values


def over_candidate_ids(entries: Entries, ids: CandidateIds) -> tuple[Compact, float, int]:
    """The votes over each query's candidates, renumbered (class j: its j-th token id); the
    votes for other tokens are dropped.

    Args:
        entries: the selected queries' non-zero votes (:func:`compact_entries`,
            :func:`dense_entries`), sorted by query, blocks of disjoint queries.
        ids: the selected queries' candidates.

    Returns:
        The renumbered counts (as wide as the file's largest candidate set), the number of
        votes dropped and the number of queries they were cast in.
    """
    keys = ids.keys()
    rows, classes, values = [], [], []
    dropped_votes, dropped_queries = 0.0, 0
    for row, column, value in entries:
        key = row * ids.vocabulary + column
        at = np.searchsorted(keys, key)
        found = keys[np.minimum(at, max(keys.size - 1, 0))] == key if keys.size else at < 0
        dropped_votes += float(value[~found].sum())
        dropped_queries += int(np.unique(row[~found]).size)
        rows.append(row[found])
        classes.append(at[found] - ids.starts[row[found]])
        values.append(value[found])
    row = np.concatenate(rows) if rows else np.zeros(0, np.int64)
    position = np.concatenate(classes) if classes else np.zeros(0, np.int64)
    value = np.concatenate(values) if values else np.zeros(0)
    order = np.lexsort((position, row))
    compact = Compact.from_sorted_entries(
        row[order], position[order], value[order], len(ids), ids.sizes, ids.width
    )
    return compact, dropped_votes, dropped_queries


def candidates_note(votes_where: str, where: str, candidates: Candidates) -> str:
    """What a report says of candidate sets: where they came from, and that they must be
    chosen without the private votes."""
    sizes = candidates.sizes if isinstance(candidates, CandidateIds) else candidates
    low, high = (int(sizes.min()), int(sizes.max())) if sizes.size else (0, 0)
    what = "candidate token ids" if isinstance(candidates, CandidateIds) else "candidates"
    return (
        f"{votes_where}: each query's classes are its {what}, {low} to {high} per query "
        f"(from {where}); the analysis is sound only if they were chosen without the private "
        "votes (by a public model, say)"
    )


def dropped_note(votes_where: str, votes: float, queries: int, teachers: int) -> Iterator[str]:
    """The one note of the votes dropped outside their query's candidate token ids (none
    when nothing was)."""
    if queries:
        yield (
            f"{votes_where}: {show_value(votes)} votes of {queries} queries lie outside their "
            f"query's candidate token ids and were dropped; the teachers stay {teachers}"
        )

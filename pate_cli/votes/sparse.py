"""Votes over a vocabulary, never formed as a dense queries x vocabulary array.

Three inputs are read into :class:`~pate_cli.core.compact.Compact` histograms, with memory
proportional to the non-zero counts:

- counts saved with ``scipy.sparse.save_npz`` (CSR, CSC or COO; queries x classes, the
  vocabulary being the matrix's column count), or a ``scipy.sparse`` matrix in memory;
- labels (teachers x queries) whose values are token ids of a vocabulary given with
  ``--num-classes``, counted a block of queries at a time;
- dense counts with many classes (at least :data:`COMPACT_MIN_CLASSES`), read a block of
  queries at a time.

A sparse archive is recognised by its members (``format``, ``shape``, ``data`` and
``indices``/``indptr`` or ``row``/``col``), each read by the safe reader; its ``format``
member (a short string) is read alone, within a size limit.

``--candidates`` is read here too (:func:`read_candidates`), since one of its forms is such
a matrix (``pate_cli.votes.candidates``); a ``candidates`` member beside the matrix of a
votes archive is read as the flag would read its array.
"""

from __future__ import annotations

import hashlib
import os
import zipfile
from collections.abc import Iterable
from concurrent.futures import Future
from dataclasses import dataclass

import numpy as np
import scipy.sparse
from numpy.typing import NDArray

from pate_cli.choices import VoteFormat
from pate_cli.common.spelling import given, option
from pate_cli.core.compact import Compact, row_sums
from pate_cli.errors import InputError, UsageError
from pate_cli.votes.candidates import (
    CandidateIds,
    Candidates,
    candidates_note,
    candidates_of_array,
    compact_entries,
    dropped_note,
    ids_of_marks,
    over_candidate_ids,
)
from pate_cli.votes.conversion import teachers_from_sums
from pate_cli.votes.folder import is_folder, shard_differs, shard_paths
from pate_cli.votes.inputs import query_selection
from pate_cli.votes.memory import read_input, where_of
from pate_cli.votes.model import Votes
from pate_cli.votes.reader import StrPath, hash_in_background, npz_errors, open_array

#: Counts with at least this many classes are held compact (per query, its voted classes).
COMPACT_MIN_CLASSES = 4096

_COMPRESSED = (
    {"format", "shape", "data", "indices", "indptr"},
    {"format", "shape", "data", "row", "col"},
)
_BESIDE = {"candidates"}  # a member a sparse archive may hold besides its matrix
_MAX_FORMAT_BYTES = 1024


def sparse_members(path: StrPath) -> set[str] | None:
    """The members of a ``save_npz`` archive at ``path`` (without ``.npy``), or None when
    the file is no such archive."""
    try:
        if not zipfile.is_zipfile(path):
            return None
        with zipfile.ZipFile(path) as archive:
            names = {name.removesuffix(".npy") for name in archive.namelist()}
    except (zipfile.BadZipFile, OSError, ValueError, EOFError, IndexError, RuntimeError):
        return None  # a damaged archive: the array reader says what is wrong with it
    return names if names - _BESIDE in _COMPRESSED else None


def _format_member(path: StrPath, where: str) -> str:
    with npz_errors(where, "sparse votes"), zipfile.ZipFile(path) as archive:
        (info,) = (i for i in archive.infolist() if i.filename.removesuffix(".npy") == "format")
        if info.file_size > _MAX_FORMAT_BYTES:
            raise InputError(f"{where}: the sparse matrix's format member is too large")
        with archive.open(info) as member:
            value = np.lib.format.read_array(member, allow_pickle=False)
    if value.dtype.kind not in "US" or value.ndim != 0:
        raise InputError(f"{where}: the sparse matrix's format member is not a name")
    text = value.item()
    return text.decode("ascii", "replace") if isinstance(text, bytes) else str(text)


def _member(path: StrPath, name: str, where: str) -> np.ndarray:
    array = open_array(path, f"sparse votes ({name})", name).array(mmap=False)
    if name != "data" and array.dtype.kind not in "iu":
        raise InputError(f"{where}: the sparse matrix's {name} are not integers")
    return array


def read_sparse(path: StrPath, where: str) -> tuple[Compact, tuple[int, int], str]:
    """The counts of a ``save_npz`` archive, compact; with the matrix's shape and dtype.

    Raises:
        InputError: not a 2-D CSR, CSC or COO matrix, or entries that do not fit it.
    """
    kind, shape = _sparse_header(path, where)
    row, column, data = _sparse_entries(path, where, kind, shape)
    _check_extent(shape, data.size, where)
    compact = compact_from_entries(row, column, data, shape, where)
    return compact, shape, str(data.dtype)


def _sparse_header(path: StrPath, where: str) -> tuple[str, tuple[int, int]]:
    """The format and the shape of a ``save_npz`` archive's matrix (2-D CSR, CSC or COO)."""
    kind = _format_member(path, where)
    if kind not in ("csr", "csc", "coo"):
        raise InputError(f"{where}: a sparse matrix in {kind} format; expected csr, csc or coo")
    shape = tuple(int(n) for n in _member(path, "shape", where))
    if len(shape) != 2:
        raise InputError(f"{where}: a sparse matrix of shape {shape}; expected queries x classes")
    return kind, (shape[0], shape[1])


def _sparse_entries(
    path: StrPath, where: str, kind: str, shape: tuple[int, int]
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The (row, column, value) entries of a ``save_npz`` archive's matrix, as stored."""
    data = _member(path, "data", where)
    if kind == "coo":
        row, column = _member(path, "row", where), _member(path, "col", where)
    else:
        indptr, indices = _member(path, "indptr", where), _member(path, "indices", where)
        major = shape[0] if kind == "csr" else shape[1]
        if indptr.shape != (major + 1,) or indptr[0] != 0 or np.any(np.diff(indptr) < 0):
            raise InputError(f"{where}: the sparse matrix's indptr does not fit its shape")
        if indptr[-1] != data.size or indices.size != data.size:
            raise InputError(f"{where}: the sparse matrix's indices do not fit its data")
        outer = np.repeat(np.arange(major, dtype=np.int64), np.diff(indptr))
        row, column = (outer, indices) if kind == "csr" else (indices, outer)
    return row, column, data


def read_candidates(
    value: object, votes_where: str, num_file_queries: int, vocabulary: int
) -> tuple[Candidates, str]:
    """``--candidates`` in either form (``pate_cli.votes.candidates``): a sparse matrix (a
    ``save_npz`` file or in memory) marking token ids, else an array (a 1-D array of counts,
    a 2-D array of token ids); and where they came from.

    Raises:
        InputError: what ``pate_cli.votes.candidates`` refuses, or an unreadable file.
    """
    where = where_of(value, "candidates")
    if not is_sparse_input(value, None):
        a, where = read_input(value, "candidates")
        return candidates_of_array(a, where, votes_where, num_file_queries, vocabulary), where
    if isinstance(value, (str, os.PathLike)):
        kind, shape = _sparse_header(value, where)
        _check_marks_shape(shape, where, votes_where, (num_file_queries, vocabulary))
        entries = _sparse_entries(value, where, kind, shape)
    else:
        matrix = scipy.sparse.coo_matrix(value)
        shape = (int(matrix.shape[0]), int(matrix.shape[1]))
        _check_marks_shape(shape, where, votes_where, (num_file_queries, vocabulary))
        entries = (matrix.row, matrix.col, matrix.data)
    return ids_of_marks(entries, where, shape), where


def _check_marks_shape(
    shape: tuple[int, int], where: str, votes_where: str, expected: tuple[int, int]
) -> None:
    """A sparse matrix of candidates has the votes' queries and vocabulary."""
    if shape != expected:
        raise InputError(
            f"{where}: candidates matrix has shape {shape}; expected file queries x "
            f"vocabulary {expected} like {votes_where}, its non-zeros marking the candidates"
        )


#: Queries without a single vote a sparse matrix may hold beyond its entries, and the
#: largest vocabulary (a plurality count per class: 128 MB at most; tokenizers stop near
#: 2^18): the shape is a number inside the file, memory is the entries'.
MAX_EMPTY_QUERIES = 1 << 20
MAX_VOCABULARY = 1 << 24


def _check_extent(shape: tuple[int, ...], entries: int, where: str) -> None:
    """Refuse a shape whose queries far outnumber the entries (rows without votes cost
    memory the entries do not account for), or a vocabulary beyond any tokenizer's."""
    if shape[0] > entries + MAX_EMPTY_QUERIES:
        raise InputError(
            f"{where}: a sparse matrix of {shape[0]} queries holds {entries} votes; expected "
            "votes for most queries"
        )
    check_vocabulary(shape[1], f"{where}: a sparse matrix of {shape[1]} classes")


def check_vocabulary(num_classes: int, what: str) -> None:
    """Refuse a vocabulary above :data:`MAX_VOCABULARY` (``what`` names it, one line)."""
    if num_classes > MAX_VOCABULARY:
        raise InputError(f"{what}; expected a vocabulary of at most {MAX_VOCABULARY} classes")


def compact_from_entries(
    row: np.ndarray,
    column: np.ndarray,
    data: np.ndarray,
    shape: tuple[int, int],
    where: str,
) -> Compact:
    """Counts from (row, column, value) entries, in any order, duplicates summed (as
    ``scipy.sparse`` sums them); explicit zeros dropped.

    Raises:
        InputError: entries outside the shape (or a query's classes), values not finite or
            negative.
    """
    if not (row.shape == column.shape == data.shape) or data.ndim != 1:
        raise InputError(f"{where}: the sparse matrix's entries do not line up")
    if data.dtype.kind not in "iuf":
        raise InputError(f"{where}: sparse votes of dtype {data.dtype}; expected numeric counts")
    num_rows, width = shape
    row, column = row.astype(np.int64, copy=False), column.astype(np.int64, copy=False)
    if row.size and (
        row.min() < 0 or row.max() >= num_rows or column.min() < 0 or column.max() >= width
    ):
        raise InputError(f"{where}: a sparse matrix entry lies outside its shape {shape}")
    values = data.astype(np.float64)
    bad = ~np.isfinite(values) | (values < 0)
    if bad.any():
        i = int(np.argmax(bad))
        raise InputError(
            f"{where}: votes row {row[i]}, column {column[i]} is {data[i]}; expected "
            "non-negative counts"
        )
    key = row * width + column
    order = np.argsort(key, kind="stable")
    key, values = key[order], values[order]
    starts = np.flatnonzero(np.r_[True, key[1:] != key[:-1]]) if key.size else np.zeros(0, int)
    summed = np.add.reduceat(values, starts) if key.size else values
    key = key[starts] if key.size else key
    kept = summed != 0
    key, summed = key[kept], summed[kept]
    return Compact.from_sorted_entries(key // width, key % width, summed, num_rows, width)


def compact_from_label_blocks(
    blocks: Iterable[tuple[int, np.ndarray]],
    num_queries: int,
    num_classes: int,
    candidates: NDArray[np.int64] | None = None,
) -> Compact:
    """Counts of labels, one block of queries at a time: ``(start, labels (M, q))`` with
    labels in [0, C) or -1 (an abstention), already checked."""
    keys, counts = [], []
    for start, labels in blocks:
        block = np.asarray(labels, dtype=np.int64)
        voted = block >= 0
        rows = np.broadcast_to(
            np.arange(start, start + block.shape[1], dtype=np.int64), block.shape
        )
        found, times = np.unique(rows[voted] * num_classes + block[voted], return_counts=True)
        keys.append(found)
        counts.append(times.astype(np.float64))
    key: NDArray[np.int64] = np.concatenate(keys) if keys else np.zeros(0, np.int64)
    count: NDArray[np.float64] = np.concatenate(counts) if counts else np.zeros(0)
    classes = num_classes if candidates is None else candidates
    return Compact.from_sorted_entries(
        key // num_classes, key % num_classes, count, num_queries, classes
    )


def compact_from_row_blocks(
    blocks: Iterable[tuple[int, np.ndarray]],
    num_queries: int,
    num_classes: int | NDArray[np.int64],
    vocabulary: int | None = None,
) -> Compact:
    """Dense counts (checked), one block of queries at a time, held compact.

    Raises:
        ValueError: a vote outside its query's classes (``num_classes`` per query).
    """
    rows, columns, values = [], [], []
    for start, block in blocks:
        r, c = np.nonzero(block)
        rows.append(r.astype(np.int64) + start)
        columns.append(c.astype(np.int64))
        values.append(np.asarray(block[r, c], dtype=np.float64))
    if not rows:
        empty = np.zeros(0, np.int64)
        return Compact.from_sorted_entries(
            empty, empty, np.zeros(0), num_queries, num_classes, vocabulary
        )
    return Compact.from_sorted_entries(
        np.concatenate(rows),
        np.concatenate(columns),
        np.concatenate(values),
        num_queries,
        num_classes,
        vocabulary,
    )


def is_sparse_input(path: object, member: str | None) -> bool:
    """A ``save_npz`` archive or a ``scipy.sparse`` matrix (the member of an archive named
    with ``member`` is read as an array instead)."""
    if member is not None:
        return False
    if is_folder(path):  # a folder of shards: sparse if its first shard is
        return is_sparse_input(shard_paths(path)[0], member)
    if isinstance(path, (str, os.PathLike)):
        return os.path.isfile(path) and sparse_members(path) is not None
    return bool(scipy.sparse.issparse(path))


def sparse_votes(
    path: object,
    member: str | None,
    fmt: VoteFormat,
    num_classes: int | None,
    teachers: int | None,
    queries: int | None,
    indices: object,
    candidates: object = None,
) -> Votes | None:
    """The votes of a sparse matrix (a ``save_npz`` file, with a ``candidates`` member or
    not, or a matrix in memory), or None for any other input.

    Raises:
        UsageError: ``--format`` other than counts or auto; candidates given twice.
        InputError: a bad matrix, or ``--num-classes`` that is not its column count.
    """
    if not is_sparse_input(path, member):
        return None
    read = _read_sparse_input(path)
    where, shape = read.where, read.shape
    _check_reading(where, shape, fmt, num_classes)
    notes: list[str] = []
    compact = read.compact
    sets = _given_candidates(read, candidates, notes)
    if isinstance(sets, np.ndarray):  # counts: every vote within its query's classes
        compact = with_candidates(compact, sets, shape[1], where)
    selection = query_selection(where, shape[0], queries, indices)  # type: ignore[arg-type]
    if selection is not None:
        compact = compact.take(selection)

    def file_query(q: int) -> int:
        return q if selection is None else int(selection[q])

    # The teachers are the file's: counted before the votes outside token ids are dropped.
    num_teachers = teachers_from_sums(row_sums(compact), where, teachers, notes, file_query)
    ids = sets.take(selection, len(compact)) if isinstance(sets, CandidateIds) else None
    if ids is not None:
        compact, dropped, queries_dropped = over_candidate_ids(compact_entries(compact), ids)
        notes.extend(dropped_note(where, dropped, queries_dropped, num_teachers))
    return Votes(
        counts=compact,  # type: ignore[arg-type]
        path=where,
        digest=read.digest,
        format=VoteFormat.COUNTS,
        detected=fmt is VoteFormat.AUTO,
        num_teachers=num_teachers,
        num_classes=shape[1],
        num_file_queries=shape[0],
        selection=selection,
        warnings=tuple(notes),
        file_shape=shape,
        stored_dtype=read.dtype,
        source=read.source,
        candidate_ids=ids,
        classes_from="given" if num_classes is not None else "shape",
        shards=read.shards,
    )


def _given_candidates(
    read: _SparseInput, candidates: object, notes: list[str]
) -> Candidates | None:
    """The candidates of a sparse matrix: ``--candidates``, or the archive's member (not
    both), noted in ``notes``; None without."""
    where, (num_queries, vocabulary) = read.where, read.shape
    if read.candidates is None:
        if candidates is None:
            return None
        sets, source = read_candidates(candidates, where, num_queries, vocabulary)
    else:
        if candidates is not None:
            raise UsageError(
                f"{where}: the archive holds its candidates, and {option('candidates')} names "
                "others; give one"
            )
        source = "its candidates member"
        member = f"{where} (its candidates member)"
        sets = candidates_of_array(read.candidates, member, where, num_queries, vocabulary)
    notes.append(candidates_note(where, source, sets))
    return sets


@dataclass(frozen=True)
class _SparseInput:
    """A sparse matrix as read: where it is, its counts, shape, dtype, digest, and the
    candidates an archive holds beside it."""

    where: str
    compact: Compact
    shape: tuple[int, int]
    dtype: str
    digest: Future[str]
    source: str
    candidates: np.ndarray | None = None
    shards: int = 0


def _read_sparse_input(path: object) -> _SparseInput:
    if is_folder(path):
        return _read_sparse_folder(os.fspath(path))
    if isinstance(path, (str, os.PathLike)):
        where = os.fspath(path)
        compact, shape, dtype = read_sparse(path, where)
        held = None
        if "candidates" in (sparse_members(path) or ()):
            held = _member(path, "candidates", where)
        return _SparseInput(where, compact, shape, dtype, hash_in_background(path), "file", held)
    where = "<array>"
    matrix = scipy.sparse.coo_matrix(path)
    shape = (int(matrix.shape[0]), int(matrix.shape[1]))
    _check_extent(shape, matrix.nnz, where)
    compact = compact_from_entries(matrix.row, matrix.col, matrix.data, shape, where)
    return _SparseInput(where, compact, shape, str(matrix.dtype), _sparse_digest(matrix), "memory")


def _read_sparse_folder(where: str) -> _SparseInput:
    """The sparse shards of a folder as one matrix: their rows (queries) in order. Every
    shard must be a sparse matrix of the first's classes (columns) and dtype, without a
    candidates member (``--candidates`` gives the folder's)."""
    shards = shard_paths(where)
    entries, offset, first = [], 0, None
    for shard in shards:
        if sparse_members(shard) is None:
            raise shard_differs(where, shard, shards[0], "reads as", "dense", "as sparse counts")
        if "candidates" in (sparse_members(shard) or ()):
            raise InputError(
                f"{where}: shard {os.path.basename(shard)} holds candidates; a folder's "
                f"are given with {option('candidates')}"
            )
        kind, shape = _sparse_header(shard, shard)
        row, column, data = _sparse_entries(shard, shard, kind, shape)
        _check_extent(shape, data.size, shard)
        if first is None:
            first = (shape[1], str(data.dtype))
        elif (shape[1], str(data.dtype)) != first:
            how, value, other = (
                ("has classes", shape[1], first[0])
                if shape[1] != first[0]
                else ("is stored as", data.dtype, f"as {first[1]}")
            )
            raise shard_differs(where, shard, shards[0], how, value, other)
        entries.append((np.asarray(row, dtype=np.int64) + offset, column, data))
        offset += shape[0]
    assert first is not None
    rows, columns, values = (np.concatenate(part) for part in zip(*entries, strict=True))
    whole = (offset, first[0])
    compact = compact_from_entries(rows, columns, values, whole, where)
    digest = hash_in_background(where)
    return _SparseInput(where, compact, whole, first[1], digest, "file", shards=len(shards))


def _check_reading(
    where: str, shape: tuple[int, int], fmt: VoteFormat, num_classes: int | None
) -> None:
    """A sparse matrix is read as counts, and its columns are the classes."""
    if fmt not in (VoteFormat.AUTO, VoteFormat.COUNTS):
        raise UsageError(
            f"{where}: a sparse matrix holds counts (queries x classes); "
            f"{given('format', fmt.value)} reads it no other way"
        )
    if num_classes is not None and num_classes != shape[1]:
        raise InputError(
            f"{where}: the sparse matrix has {shape[1]} classes (columns) but "
            f"{given('num-classes', num_classes)}"
        )


def _sparse_digest(matrix: scipy.sparse.coo_matrix) -> Future[str]:
    """SHA-256 of a matrix in memory: its shape, dtype and canonical (CSR) entries."""
    csr = matrix.tocsr()
    csr.sum_duplicates()
    digest = hashlib.sha256(f"sparse {csr.shape} {csr.dtype}".encode())
    for part in (csr.indptr, csr.indices, csr.data):
        digest.update(np.ascontiguousarray(part).tobytes())
    done: Future[str] = Future()
    done.set_result(digest.hexdigest())
    return done


def with_candidates(
    counts: Compact | NDArray[np.float64] | Iterable[tuple[int, np.ndarray]],
    candidates: NDArray[np.int64],
    vocabulary: int,
    where: str,
) -> Compact:
    """Counts (compact, dense, or dense blocks of rows) over per-query candidate sets.

    Raises:
        InputError: a vote outside its query's candidates.
    """
    try:
        if isinstance(counts, Compact):
            listed = (counts.classes >= 0) & (counts.values != 0)
            rows, columns = np.nonzero(listed)
            return Compact.from_sorted_entries(
                rows.astype(np.int64),
                counts.classes[rows, columns],
                counts.values[rows, columns],
                len(counts),
                candidates,
                vocabulary,
            )
        blocks = [(0, counts)] if isinstance(counts, np.ndarray) else counts
        return compact_from_row_blocks(blocks, candidates.size, candidates, vocabulary)
    except ValueError as error:
        raise InputError(
            f"{where}: {error} ({option('candidates')} counts: each query's classes are "
            "0 .. n - 1; candidate token ids, a (queries, k) array, drop the votes outside)"
        ) from None

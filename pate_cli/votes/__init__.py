"""Vote files: safe reading, validation, format detection and query selection.

:func:`load_votes` turns a votes file of any of the three formats (README, "Inputs") into one
float64 ``(Q, C)`` counts array, wrapped in :class:`Votes` with where it came from. The
work is split by job:

- ``reader``: the safe ``.npy``/``.npz`` reader (never unpickles) and file hashing;
- ``formats``: format detection, the rules each format's values obey (written once, for a
  block of queries) and conversion to counts;
- ``stream``: large files read a block of queries at a time;
- ``memory``: votes and side inputs given as arrays in memory, read as files are;
- ``candidates``: ``--candidates``, a count per query or candidate token ids;
- ``inputs``: what goes with the votes: ``--indices``, baselines, the answered mask,
  true labels and student probabilities;
- :mod:`pate_cli.files.outputs` (re-exported here): atomic writes and output-path checks.

Loading goes: check the file's header (an ``.npz`` against its zip directory too), start
hashing the file on a thread, detect the format (``--format auto``), check the shape,
choose the queries (``--indices`` first, then the first ``--queries``) and only then
convert, so that a memory-mapped file reads only the queries kept. The selection is
recorded in :class:`Votes` so that a baseline can be selected the same way. A large 2-D
array (``.npy``, or the array of an ``.npz``) analysed whole or by a prefix is streamed
instead: never read whole, never mapped; its values pass through the same validator as an
array in memory, block by block, and give the same result or the same error.

Reading is strict: a file that ``--format auto`` could read two ways, or that contradicts
``--teachers``, is an error naming the readings and the flag that settles it, never a
guess that changes the numbers (the rules are in ``formats``). The layout read is part of
:class:`Votes` (``layout``), and of every report.

Every problem is an :class:`~pate_cli.errors.InputError` (a bad file) or a
:class:`~pate_cli.errors.UsageError` (a bad flag value) whose one-line message starts
with the path as the user gave it. Shape letters: Q queries, C classes, M teachers.
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from concurrent.futures import Future
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np
from numpy.typing import NDArray

from pate_cli.choices import VoteFormat
from pate_cli.common.spelling import given
from pate_cli.core.compact import Compact
from pate_cli.core.distinct import DistinctRows
from pate_cli.errors import InputError, UsageError
from pate_cli.files.outputs import (
    check_distinct_files,
    check_output_path,
    save_npy_atomic,
    write_atomic,
)
from pate_cli.votes import grouping
from pate_cli.votes.candidates import (
    CandidateIds,
    candidates_note,
    compact_entries,
    dense_entries,
    dropped_note,
    over_candidate_ids,
)
from pate_cli.votes.conversion import (
    check_shape,
    classes_of_labels,
    counts_by_rows,
    teachers_of_counts,
    teachers_of_labels,
    to_counts,
)
from pate_cli.votes.detection import AmbiguousFormatError, detect_format, labels_transposed
from pate_cli.votes.flags import as_vote_format, check_flags, vote_format
from pate_cli.votes.folder import is_folder
from pate_cli.votes.formats import QUERY_AXIS, BlockScan, Distinct
from pate_cli.votes.inputs import (
    Input,
    load_answered_mask,
    load_baseline,
    load_student_probs,
    load_true_labels,
    query_selection,
)
from pate_cli.votes.layout import LayoutEvidence, layout_evidence
from pate_cli.votes.memory import MemoryArray, is_path, memory_array, sha256_now
from pate_cli.votes.model import Votes
from pate_cli.votes.reader import (
    ArrayFile,
    file_sha256,
    hash_in_background,
    load_array,
    open_array,
)
from pate_cli.votes.shards import ShardedFile, open_shards
from pate_cli.votes.sparse import (
    COMPACT_MIN_CLASSES,
    check_vocabulary,
    compact_from_label_blocks,
    compact_from_row_blocks,
    read_candidates,
    sparse_votes,
    with_candidates,
)
from pate_cli.votes.stream import BlockSize, ChunkedCounts, ChunkedLabels, open_streams

__all__ = [
    "STREAM_MIN_ROWS",
    "AmbiguousFormatError",
    "ChunkedCounts",
    "ChunkedLabels",
    "Input",
    "InputError",
    "UsageError",
    "VoteFormat",
    "Votes",
    "as_vote_format",
    "check_distinct_files",
    "check_output_path",
    "file_sha256",
    "is_folder",
    "load_answered_mask",
    "load_array",
    "load_baseline",
    "load_student_probs",
    "load_true_labels",
    "load_votes",
    "save_npy_atomic",
    "write_atomic",
]

# The loader's memory limits. load_votes reads them from this module when it is called, so
# setting them here (as the tests do, to stream small files) takes effect.
#: Files of at least this many queries are read a block at a time, never whole.
STREAM_MIN_ROWS = 1 << 18
_BLOCK_ROWS = 1 << 16  # queries per streamed block at most
_BLOCK_CELLS = 1 << 22  # values per streamed block at most: 32 MB of float64
_MAX_LABEL_COUNT_CELLS = 10**8  # Q * C of a labels file's counts; beyond this C is implausible
# What an .npz member may inflate to, and by how much, are the reader's limits
# (reader.MAX_ARRAY_BYTES, reader.MAX_INFLATION_RATIO): they apply to every array read from
# an archive, votes or not.


def load_votes(
    path: Input,
    *,
    fmt: VoteFormat | str = VoteFormat.AUTO,
    num_classes: int | None = None,
    teachers: int | None = None,
    queries: int | None = None,
    indices: Input | None = None,
    member: str | None = None,
    candidates: Input | None = None,
) -> Votes:
    """Read, validate and select a votes file, returning ``(Q, C)`` counts.

    Votes given as an array (``pate_cli.votes.memory``) take the same path, but for the
    reading: no streaming, no hashing thread, ``"<array>"`` where the path would stand.

    Args:
        path: The votes file (.npy, or .npz holding one array), or the votes as an array
            (or nested lists) in memory.
        fmt: ``--format``; ``auto`` detects it (see ``pate_cli.votes.detection``).
        num_classes: ``--num-classes``: C for labels; must match the file otherwise.
        teachers: ``--teachers``: overrides M. Counts rows may then sum to less than M (a
            warning), never to more; labels are read in the layout of M teachers (saved
            queries x teachers when M is their number of columns), and M must be the teachers
            of one layout; scores must not have more teachers than M.
        queries: ``--queries``: keep the first N queries (after ``indices``).
        indices: ``--indices``: an .npy (or an array) of file query indices to keep, in
            its order.
        member: ``--member``: the array of an .npz to read, by its ``numpy.savez`` keyword
            (needed when the .npz holds several).
        candidates: ``--candidates``: each file query's number of classes (a 1-D array),
            or its candidate token ids (a 2-D array, or a sparse matrix marking them; see
            ``pate_cli.votes.candidates``); the counts are then held by query.

    Returns:
        The validated :class:`Votes`.

    Raises:
        InputError: Any problem with the votes or indices file.
        UsageError: A flag value outside its domain (``--queries 0``, ``--format x``).
    """
    fmt = vote_format(fmt)
    check_flags(num_classes, teachers, queries)
    sparse = sparse_votes(path, member, fmt, num_classes, teachers, queries, indices, candidates)
    if sparse is not None:
        return sparse
    reading = _open_reading(path, member, fmt, (teachers, num_classes), indices is None)
    detected = fmt is VoteFormat.AUTO
    reading, fmt, scans = _format_and_scans(reading, fmt, teachers, num_classes)
    check_shape(reading.shape, reading.where, fmt, num_classes)
    num_file_queries = int(reading.shape[QUERY_AXIS[fmt]])
    selection = query_selection(reading.where, num_file_queries, queries, indices)
    notes = reading.notes(teachers)
    try:
        counts, num_teachers, distinct = _counts(
            reading, fmt, scans, selection, num_classes, teachers, notes, candidates is None
        )
        over = _Over(candidates, reading.where, num_file_queries, selection, num_teachers)
        counts, ids = _over_candidates(counts, over, notes)
    except InputError as exc:
        if not detected:
            raise
        # Say how the file was read (detected): a wrong guess is then plain to see, and
        # --format names another reading where one would fit.
        raise InputError(f"{exc.message} (read as {fmt.value}, the format detected)") from None
    return Votes(
        counts=counts,  # type: ignore[arg-type]
        format=fmt,
        detected=detected,
        num_teachers=num_teachers,
        num_classes=int(counts.shape[1]) if ids is None else ids.vocabulary,
        num_file_queries=num_file_queries,
        selection=selection,
        warnings=tuple(notes),
        candidate_ids=ids,
        classes_from=_classes_from(fmt, num_classes),
        distinct=distinct,
        **reading.described(),
    )


def _classes_from(fmt: VoteFormat, num_classes: int | None) -> str:
    """Where C came from (``Votes.classes_from``)."""
    if num_classes is not None:
        return "given"
    return "largest label" if fmt is VoteFormat.LABELS else "shape"


@dataclass
class _Reading:
    """A votes file (or array) opened for reading: where it is, its digest (being computed),
    the shape read (transposed for labels saved queries x teachers), the block readers of a
    large 2-D array (rows as counts, columns as labels), and its array in memory, read once
    when needed."""

    file: ArrayFile | MemoryArray
    where: str
    digest: Future[str]
    transposed: bool
    rows: ChunkedCounts | None
    columns: ChunkedLabels | None
    evidence: LayoutEvidence | None = None
    """How the labels agree by row and by column, when that decided their layout."""
    distinct: Distinct | None = None
    """The distinct rows of the file and the row of each, when its scan found them."""
    _in_memory: list[np.ndarray] = field(default_factory=list, repr=False)

    @property
    def file_shape(self) -> tuple[int, ...]:
        """The shape of the array as stored."""
        return tuple(int(n) for n in self.file.shape)

    @property
    def shape(self) -> tuple[int, ...]:
        """The shape of the array as read."""
        return self.file_shape[::-1] if self.transposed else self.file_shape

    def whole_array(self) -> np.ndarray:
        """The file's array in memory (a .npy memory-mapped), read once when needed."""
        if not self._in_memory:
            array = self.file.array(mmap=True)
            self._in_memory.append(array.T if self.transposed else array)
        return self._in_memory[0]

    def described(self) -> dict[str, Any]:
        """What :class:`Votes` says of the file read: where it is, its digest, shape and
        dtype as saved, the layout read and what decided it."""
        return {
            "path": self.where,
            "digest": self.digest,
            "file_shape": self.file_shape,
            "stored_dtype": str(self.file.dtype),
            "transposed": self.transposed,
            "source": "file" if isinstance(self.file, ArrayFile) else "memory",
            "layout_evidence": self.evidence,
            "shards": len(self.file.parts) if isinstance(self.file, ShardedFile) else 0,
        }

    def read_transposed(self) -> _Reading:
        """The same file read as labels saved queries x teachers: in memory, not streamed."""
        held = [array.T for array in self._in_memory]
        return replace(self, transposed=True, rows=None, columns=None, _in_memory=held)

    def blocks(self, axis: int) -> Iterator[np.ndarray]:
        """The file's 2-D array in blocks of whole rows (``axis`` 0) or of whole columns (1,
        each R x columns as saved), of a block's cells at most: read from the file where it
        is streamed, else from the array in memory (or mapped)."""
        stream = self.rows if self.rows is not None else self.columns
        array = None if stream is not None else self.whole_array()
        length, across = self.file_shape[axis], self.file_shape[1 - axis]
        step = max(1, _BLOCK_CELLS // max(across, 1))
        for start in range(0, length, step):
            stop = min(start + step, length)
            if stream is not None:
                source = stream.source
                yield source.rows(start, stop) if axis == 0 else source.columns(start, stop)
            else:
                assert array is not None
                yield array[start:stop] if axis == 0 else array[:, start:stop]

    def layout_evidence(self, num_classes: int) -> LayoutEvidence:
        """How the file's labels agree by row and by column (one more pass over it)."""
        return layout_evidence(self.blocks(0), self.blocks(1), num_classes)

    def notes(self, teachers: int | None) -> list[str]:
        """The notes of the reading: a labels file read transposed says so, and why."""
        if not self.transposed:
            return []
        shape = self.shape
        read = (
            f"{self.where}: read as labels saved queries x teachers ({shape[1]} queries x "
            f"{shape[0]} teachers)"
        )
        if self.evidence is None:
            return [f"{read}, the axis {given('teachers', teachers)} names"]
        by_query, by_teacher = self.evidence.axes(True)
        return [
            f"{read}: their teachers agree on each query (lambda {by_query.lam:.3f}, chance "
            f"{by_query.chance:.3f}), not across one teacher's queries ({by_teacher.lam:.3f})"
        ]


def _open_reading(
    path: Input,
    member: str | None,
    fmt: VoteFormat,
    flags: tuple[int | None, int | None],
    streamable: bool,
) -> _Reading:
    """Open the votes: check the file's header (nothing read or inflated yet) and start
    hashing it on a thread, or check the array in memory; then choose how to read it.
    A folder's shards are each read and checked alike first (``shards``); ``flags`` are
    ``--teachers`` and ``--num-classes``."""
    file: ArrayFile | MemoryArray
    teachers, num_classes = flags
    if is_path(path):
        if is_folder(path):
            shards = {"num_classes": num_classes, "teachers": teachers}
            file = open_shards(path, load_votes, fmt=fmt, member=member, **shards)
        else:
            file = open_array(path, "votes", member)  # checked; nothing read or inflated yet
        where, digest = file.where, hash_in_background(path)
    else:
        if member is not None:
            raise UsageError(
                f"{given('member', member, quote=True)}: names an array of an .npz file; "
                "the votes are an array already"
            )
        file = memory_array(path, "votes")
        where, digest = file.where, sha256_now(file.data)
    if file.dtype.kind == "b":
        raise InputError(
            f"{where}: votes array has dtype bool; expected numeric counts, integer "
            "labels or float scores"
        )
    file_shape = tuple(int(n) for n in file.shape)
    # Labels saved queries x teachers: --format labels with --teachers N, where N is the
    # file's number of columns and not of rows, picks that axis (read transposed, said so);
    # an N of neither axis is an error (``detection``). Auto picks it in detection.
    transposed = fmt is VoteFormat.LABELS and labels_transposed(file_shape, where, teachers)
    # A large 2-D array is read block by block, as rows of counts or columns of labels.
    # Only a prefix (--queries) can be selected when streaming: indices disable it, and so
    # does a transposed reading (it is read in memory).
    rows, columns = (None, None)
    if streamable and not transposed and isinstance(file, ArrayFile):
        block = BlockSize(rows=_BLOCK_ROWS, cells=_BLOCK_CELLS)
        rows, columns = open_streams(file, fmt, STREAM_MIN_ROWS, block)
        if rows is None and _wide(file_shape, fmt):  # counts over a vocabulary: by rows
            rows, _ = open_streams(file, VoteFormat.COUNTS, 1, block)
    return _Reading(file, where, digest, transposed, rows, columns)


_Scans = tuple[BlockScan | None, BlockScan | None]
"""The scans made while detecting the format: (rows of the whole file, columns of labels)."""


def _format_and_scans(
    reading: _Reading, fmt: VoteFormat, teachers: int | None, num_classes: int | None
) -> tuple[_Reading, VoteFormat, _Scans]:
    """The reading, the format (detected when ``fmt`` is auto) and the scans made on the way.

    Labels detected saved queries x teachers (by ``--teachers``, or by their agreement) are
    then read transposed, in memory, as ``--format labels`` reads them (the scans, of the
    file's rows, are dropped).
    """
    size = math.prod(reading.shape)
    # The scans that detect the format also validate it below: the file is read once.
    label_scan = reading.columns.scan() if reading.columns is not None and size else None
    row_scan, found = None, None
    if fmt is VoteFormat.AUTO:
        if reading.rows is not None and size:
            limit = grouping.limit(reading.shape, _wide(reading.shape, VoteFormat.COUNTS))
            row_scan, found = reading.rows.scan_distinct(limit, grouping.SHARE)
        elif label_scan is None and len(reading.shape) == 2 and size:
            row_scan, found = _scan_rows(reading.whole_array())
        whole: BlockScan | None = row_scan if row_scan is not None else label_scan
        try:
            detected = detect_format(
                reading.shape, reading.where, teachers, whole, num_classes, reading.layout_evidence
            )
        except AmbiguousFormatError as error:
            # What describes the file without a reading (``inspect`` lists its readings).
            error.shape, error.dtype = reading.file_shape, str(reading.file.dtype)
            error.digest = reading.digest
            raise
        fmt, reading = detected.format, replace(reading, evidence=detected.evidence, distinct=found)
        if isinstance(reading.file, ShardedFile):  # the whole reads as its shards did
            reading.file.check_reading(fmt, detected.transposed)
        if detected.transposed:
            return reading.read_transposed(), fmt, (None, None)
    return reading, fmt, (row_scan, label_scan)


def _counts(
    reading: _Reading,
    fmt: VoteFormat,
    scans: _Scans,
    selection: NDArray[np.int64] | None,
    num_classes: int | None,
    teachers: int | None,
    notes: list[str],
    group: bool,
) -> tuple[NDArray[np.float64] | ChunkedCounts | Compact, int, DistinctRows | None]:
    """The selected queries as counts, M, and the counts by distinct row (``group``: when
    worth it, ``grouping``): streamed (counts by rows, labels by columns) where the file
    is, else converted in memory. Notes are appended to ``notes``."""
    where, (row_scan, label_scan) = reading.where, scans
    axis = QUERY_AXIS[fmt]
    num_selected = int(reading.shape[axis]) if selection is None else len(selection)
    if reading.rows is not None and fmt is VoteFormat.COUNTS:
        counts = reading.rows.prefix(num_selected)
        limit = grouping.limit(reading.shape, _wide(reading.shape, fmt)) if group else 0
        # row_scan: the whole file's (a prefix of its rows is analysed)
        found = (row_scan, reading.distinct) if row_scan is not None else None
        scan, rows = found or counts.scan_distinct(limit, grouping.SHARE)
        num_teachers = teachers_of_counts(scan, where, teachers, notes, num_queries=num_selected)
        if _wide(reading.shape, fmt):
            compact = compact_from_row_blocks(counts.blocks(), num_selected, counts.shape[1])
            return compact, num_teachers, None
        return counts, num_teachers, grouping.grouped(rows, num_selected)
    if fmt is VoteFormat.LABELS and num_classes is not None and _wide((0, num_classes), fmt):
        by_query = _compact_labels(reading, label_scan, selection, num_classes, teachers, notes)
        return (*by_query, None)
    if reading.columns is not None and label_scan is not None and fmt is VoteFormat.LABELS:
        chunked = reading.columns.counts(
            where, label_scan, num_classes, num_selected, _MAX_LABEL_COUNT_CELLS
        )
        return chunked, teachers_of_labels(reading.shape[0], teachers, where, notes), None
    # Select before converting: a memory-mapped file then reads only the queries kept.
    raw = reading.whole_array()
    data = np.asarray(raw if selection is None else np.take(raw, selection, axis=axis))

    def file_query(q: int) -> int:
        return q if selection is None else int(selection[q])

    distinct = None
    if fmt is VoteFormat.COUNTS:
        # The scan made to detect the format is this one where every row is analysed.
        same = row_scan is not None and selection is None and raw.dtype == np.float64
        found = (row_scan, reading.distinct) if same and row_scan is not None else None
        limit = grouping.limit(data.shape, _wide(data.shape, fmt)) if group else 0
        in_memory, num_teachers, rows = counts_by_rows(
            data, where, teachers, file_query, notes, limit=limit, found=found
        )
        distinct = grouping.grouped(rows, len(in_memory))
    else:
        in_memory, num_teachers = to_counts(
            raw,
            data,
            fmt,
            where,
            num_classes,
            teachers,
            file_query,
            notes,
            max_label_cells=_MAX_LABEL_COUNT_CELLS,
        )
    if _wide(in_memory.shape, VoteFormat.COUNTS):
        return compact_from_row_blocks([(0, in_memory)], *in_memory.shape), num_teachers, None
    in_memory.flags.writeable = False
    return in_memory, num_teachers, distinct


@dataclass(frozen=True)
class _Over:
    """``--candidates`` (None: not given) and what reading them needs of the votes."""

    candidates: Input | None
    where: str
    num_file_queries: int
    selection: NDArray[np.int64] | None
    num_teachers: int


def _over_candidates(
    counts: NDArray[np.float64] | ChunkedCounts | Compact, over: _Over, notes: list[str]
) -> tuple[NDArray[np.float64] | ChunkedCounts | Compact, CandidateIds | None]:
    """The selected counts over each query's candidates (``--candidates``, selected as the
    queries are), and the selected queries' candidate token ids (None for counts). The
    votes dropped outside token ids are noted once in ``notes``. Without candidates, the
    counts as they are."""
    where, selection = over.where, over.selection
    if over.candidates is None:
        return counts, None
    sets, source = read_candidates(over.candidates, where, over.num_file_queries, counts.shape[1])
    notes.append(candidates_note(where, source, sets))
    blocks = counts.blocks() if isinstance(counts, ChunkedCounts) else counts
    if isinstance(sets, CandidateIds):
        ids = sets.take(selection, len(counts))
        if isinstance(blocks, Compact):
            entries = compact_entries(blocks)
        else:
            entries = dense_entries([(0, blocks)] if isinstance(blocks, np.ndarray) else blocks)
        compact, votes, queries = over_candidate_ids(entries, ids)
        notes.extend(dropped_note(where, votes, queries, over.num_teachers))
        return compact, ids
    chosen = sets[: len(counts)] if selection is None else sets[selection]
    return with_candidates(blocks, chosen, int(counts.shape[1]), where), None


def _wide(shape: tuple[int, ...], fmt: VoteFormat) -> bool:
    """Counts over a vocabulary (many classes): held compact, read by blocks of queries."""
    return len(shape) == 2 and shape[1] >= COMPACT_MIN_CLASSES and fmt is not VoteFormat.PROBS


def _compact_labels(
    reading: _Reading,
    label_scan: BlockScan | None,
    selection: NDArray[np.int64] | None,
    num_classes: int,
    teachers: int | None,
    notes: list[str],
) -> tuple[Compact, int]:
    """Labels over a vocabulary of ``num_classes`` token ids, counted compact: streamed by
    blocks of queries where the file is, else from the selected labels in memory."""
    where = reading.where
    check_vocabulary(num_classes, f"{where}: {given('num-classes', num_classes)}")
    num_selected = int(reading.shape[1]) if selection is None else len(selection)
    columns = reading.columns
    if columns is not None and label_scan is not None:
        classes_of_labels(
            where, num_classes, label_scan, lambda: columns.label_blocks(0, num_selected)
        )
        compact = compact_from_label_blocks(
            columns.label_blocks(0, num_selected), num_selected, num_classes
        )
    else:
        raw = reading.whole_array()
        data = np.asarray(raw if selection is None else np.take(raw, selection, axis=1))

        def file_query(q: int) -> int:
            return q if selection is None else int(selection[q])

        step = max(1, _BLOCK_CELLS // max(data.shape[0], 1))

        def blocks() -> Iterator[tuple[int, np.ndarray]]:
            return (
                (start, data[:, start : start + step]) for start in range(0, data.shape[1], step)
            )

        classes_of_labels(where, num_classes, None, blocks, file_query)
        compact = compact_from_label_blocks(blocks(), num_selected, num_classes)
    return compact, teachers_of_labels(int(reading.shape[0]), teachers, where, notes)


def _scan_rows(raw: np.ndarray) -> tuple[BlockScan, Distinct | None]:
    """What detection needs of a 2-D array in memory (or memory-mapped), gathered a block of
    rows at a time, so that its temporaries are a block's, not the array's: the counts
    rule's scan, of each distinct row once, and the distinct rows (``grouping.scan_rows``)."""
    step = max(1, _BLOCK_CELLS // max(raw.shape[1], 1))
    return grouping.scan_rows(raw, step, _wide(raw.shape, VoteFormat.COUNTS))

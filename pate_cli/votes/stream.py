"""Large vote files, read a block of queries at a time.

A 2-D ``.npy`` of many queries is never read whole, nor memory-mapped (resident pages of a
map count as the process's memory): :class:`ChunkedCounts` reads rows of a counts file and
:class:`ChunkedLabels` columns of an (M, Q) labels file, each into a fresh buffer of at
most one block, on demand. They stand in for the float64 ``(Q, C)`` counts array: the
analysis slices them by queries or asks for their blocks.

Validation does not live here: a streamed file is checked by the same
:func:`~pate_cli.votes.formats.scan_blocks` as an array in memory, fed with the blocks read
here. The loader streams only a whole file or a prefix of it (``--queries``); ``--indices``
reads the file in memory. How large a file must be to be streamed, and how large a block
is, are the loader's choice (``pate_cli.votes``), passed in as a :class:`BlockSize`.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any, cast

import numpy as np
from numpy.typing import NDArray

from pate_cli.errors import InputError
from pate_cli.votes.formats import (
    BlockScan,
    VoteFormat,
    classes_of_labels,
    counts_from_labels,
    scan_blocks,
)
from pate_cli.votes.reader import NpyHeader, StrPath, read_npy_header

_MAYBE_COUNTS = (VoteFormat.AUTO, VoteFormat.COUNTS)
_MAYBE_LABELS = (VoteFormat.AUTO, VoteFormat.LABELS)


@dataclass(frozen=True)
class BlockSize:
    """How much one block holds: at most ``rows`` queries and at most ``cells`` values."""

    rows: int
    cells: int

    def rows_of(self, width: int) -> int:
        """Queries per block when each query has ``width`` values (at least one)."""
        return max(1, min(self.rows, self.cells // max(width, 1)))


class ChunkedCounts:
    """The (Q, C) counts of an .npy file, read as float64 a block of rows at a time.

    It behaves like a read-only float64 array for what the analysis needs: ``len``,
    ``shape``, row slices ``[a:b]`` (read from the file on demand into a fresh
    buffer: no memory map, so resident memory stays at one block) and
    ``np.asarray`` (reads everything). Used for large counts files that are
    analysed whole or by a prefix (``--queries``).
    """

    ndim = 2
    dtype = np.dtype(np.float64)

    def __init__(
        self,
        path: StrPath,
        header: NpyHeader,
        num_rows: int,
        block: BlockSize,
        width: int | None = None,
    ) -> None:
        self._path = os.fspath(path)
        self._header = header
        self.block = block
        self.shape = (num_rows, int(header.shape[1]) if width is None else width)

    def __len__(self) -> int:
        return self.shape[0]

    def __getitem__(self, key: object) -> NDArray[np.float64]:
        if isinstance(key, slice) and key.step in (None, 1):
            start, stop, _ = key.indices(self.shape[0])
            return self._read(start, max(start, stop))
        return np.asarray(self)[cast(Any, key)]

    def __array__(self, dtype: object = None, copy: object = None) -> NDArray[np.float64]:
        out = self._read(0, self.shape[0])
        return out if dtype is None else out.astype(dtype)  # type: ignore[call-overload]

    def _read(self, start: int, stop: int) -> NDArray[np.float64]:
        header, width = self._header, self.shape[1]
        itemsize = header.dtype.itemsize
        size = (stop - start) * width * itemsize
        with open(self._path, "rb") as f:
            f.seek(header.offset + start * width * itemsize)
            if header.dtype == np.float64:  # native float64: straight into the result
                out = np.empty((stop - start, width))
                complete = f.readinto(out.data.cast("B")) == size
            else:
                data = f.read(size)
                complete = len(data) == size
                if complete:
                    raw = np.frombuffer(data, dtype=header.dtype).reshape(stop - start, width)
                    out = raw.astype(np.float64)
        if not complete:
            raise InputError(f"{self._path}: the file changed while it was read")
        return out

    def blocks(self) -> Iterator[tuple[int, NDArray[np.float64]]]:
        """(first row, rows) for consecutive blocks of at most ``block.cells`` values."""
        step = self.block.rows_of(self.shape[1])
        for start in range(0, self.shape[0], step):
            yield start, self[start : start + step]

    def prefix(self, num_rows: int) -> ChunkedCounts:
        """The first ``num_rows`` rows (``--queries``), read the same way."""
        return ChunkedCounts(self._path, self._header, num_rows, self.block)

    def scan(self) -> BlockScan:
        """One pass over the rows with the counts rule, summing each row on the way."""
        return scan_blocks(self.blocks(), VoteFormat.COUNTS, num_rows=len(self))


class ChunkedLabels(ChunkedCounts):
    """The (Q, C) counts of a large (M, Q) labels .npy, histogrammed a block of queries at a time.

    Each block reads its columns of every teacher's row (M reads, no memory map) and
    counts them; the labels are validated first, by a scan of the same blocks.
    """

    def __init__(
        self, path: StrPath, header: NpyHeader, num_queries: int, num_classes: int, block: BlockSize
    ) -> None:
        super().__init__(path, header, num_queries, block, num_classes)

    @property
    def num_file_teachers(self) -> int:
        """M, the rows of the file."""
        return int(self._header.shape[0])

    def labels(self, start: int, stop: int) -> np.ndarray:
        """The file's labels of queries [start, stop): (M, stop - start), in the file's dtype."""
        header = self._header
        teachers, file_queries = (int(n) for n in header.shape)
        itemsize = header.dtype.itemsize
        raw = np.empty((teachers, (stop - start) * itemsize), dtype=np.uint8)
        with open(self._path, "rb") as f:
            for t in range(teachers):
                f.seek(header.offset + (t * file_queries + start) * itemsize)
                if f.readinto(memoryview(raw[t])) != raw.shape[1]:
                    raise InputError(f"{self._path}: the file changed while it was read")
        return raw.view(header.dtype)

    def label_blocks(self, start: int, stop: int) -> Iterator[tuple[int, np.ndarray]]:
        """(first query, labels) for queries [start, stop), M labels a query, in blocks."""
        step = self.block.rows_of(self.num_file_teachers)
        for first in range(start, stop, step):
            yield first, self.labels(first, min(first + step, stop))

    def _read(self, start: int, stop: int) -> NDArray[np.float64]:
        out = np.empty((stop - start, self.shape[1]))
        for first, block in self.label_blocks(start, stop):
            out[first - start : first - start + block.shape[1]] = counts_from_labels(
                block, self.shape[1]
            )
        return out

    def scan(self) -> BlockScan:
        """One pass over all the file's labels with the labels rule (C unbounded), summing
        each teacher's row on the way (what detection needs)."""
        return scan_blocks(
            self.label_blocks(0, self.shape[0]),
            VoteFormat.LABELS,
            num_rows=self.num_file_teachers,
        )

    def counts(
        self, where: str, whole: BlockScan, num_classes: int | None, num_queries: int
    ) -> ChunkedLabels:
        """Check the labels and return the counts of the first ``num_queries`` queries.

        ``whole`` is :meth:`scan`; C is chosen and checked as in memory
        (:func:`~pate_cli.votes.formats.classes_of_labels`).

        Raises:
            InputError: A value that is not a label, or more classes than a block holds.
        """
        classes = classes_of_labels(
            where, num_classes, whole, lambda: self.label_blocks(0, num_queries)
        )
        if classes > self.block.cells:
            raise InputError(
                f"{where}: labels imply {classes} classes; expected small class labels "
                "(or pass --num-classes)"
            )
        return ChunkedLabels(self._path, self._header, num_queries, classes, self.block)


def open_streams(
    path: StrPath, shape: tuple[int, ...], fmt: VoteFormat, min_rows: int, block: BlockSize
) -> tuple[ChunkedCounts | None, ChunkedLabels | None]:
    """The block readers of a large 2-D .npy: (rows as counts, columns as labels).

    Which axis is the queries' depends on the format, so a file of at least ``min_rows``
    rows may be read as counts, and one of at least ``min_rows`` columns as labels; each
    is None when the file is smaller, ``fmt`` rules it out, or the file is an .npz or
    Fortran-ordered (read in memory instead).
    """
    if len(shape) != 2 or max(shape) < min_rows:
        return None, None
    header = read_npy_header(path, "votes")
    if header is None or header.fortran_order:
        return None, None
    rows = None
    if shape[0] >= min_rows and fmt in _MAYBE_COUNTS:
        rows = ChunkedCounts(path, header, shape[0], block)
    columns = None
    if shape[1] >= min_rows and fmt in _MAYBE_LABELS:
        columns = ChunkedLabels(path, header, shape[1], 0, block)
    return rows, columns

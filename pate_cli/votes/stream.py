"""Large vote files, read a block of queries at a time.

A 2-D ``.npy`` of many queries is never read whole, nor memory-mapped (resident pages of a
map count as the process's memory): :class:`ChunkedCounts` reads rows of a counts file and
:class:`ChunkedLabels` columns of an (M, Q) labels file, each into a fresh buffer of at
most one block, on demand. They stand in for the float64 ``(Q, C)`` counts array: the
analysis slices them by queries or asks for their blocks.

The array of a large ``.npz`` is streamed the same way. Its member cannot be read at an
offset (a deflated stream is read from its start), so :class:`InflatedTiles` inflates it
once, a block of rows at a time through zipfile's streaming decompressor, and keeps it in
memory as tiles compressed again with zlib (level 1), cut so that a block of rows, or of
columns of a labels file, inflates only its own tiles: memory is about the archive's size
(at most the array's, when nothing compresses), plus a block or two.

Validation does not live here: a streamed file is checked by the same
:func:`~pate_cli.votes.formats.scan_blocks` as an array in memory, fed with the blocks read
here. The loader streams only a whole file or a prefix of it (``--queries``); ``--indices``
reads the file in memory. How large a file must be to be streamed, and how large a block
is, are the loader's choice (``pate_cli.votes``), passed in as a :class:`BlockSize`.
"""

from __future__ import annotations

import math
import os
import threading
import zlib
from collections import OrderedDict
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any, Protocol, cast

import numpy as np
from numpy.typing import NDArray

from pate_cli.common.spelling import option
from pate_cli.errors import InputError
from pate_cli.votes.conversion import check_label_cells, classes_of_labels, counts_from_labels
from pate_cli.votes.formats import (
    BlockScan,
    Distinct,
    VoteFormat,
    scan_blocks,
    scan_rows_distinct,
)
from pate_cli.votes.reader import ArrayFile, NpyHeader, StrPath

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


class Source(Protocol):
    """A 2-D C-order array that can be read by blocks of rows or of columns."""

    shape: tuple[int, int]

    def rows(self, start: int, stop: int) -> NDArray[np.float64]:
        """Rows [start, stop), as float64."""

    def columns(self, start: int, stop: int) -> np.ndarray:
        """Columns [start, stop) of every row, in the file's dtype."""


class NpySource:
    """A 2-D C-order array in a plain .npy: plain reads at offsets, no memory map."""

    def __init__(self, path: StrPath, header: NpyHeader) -> None:
        self._path = os.fspath(path)
        self._header = header
        self.shape = (int(header.shape[0]), int(header.shape[1]))

    def _changed(self) -> InputError:
        return InputError(f"{self._path}: the file changed while it was read")

    def rows(self, start: int, stop: int) -> NDArray[np.float64]:
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
            raise self._changed()
        return out

    def columns(self, start: int, stop: int) -> np.ndarray:
        header = self._header
        teachers, file_queries = self.shape
        itemsize = header.dtype.itemsize
        raw = np.empty((teachers, (stop - start) * itemsize), dtype=np.uint8)
        with open(self._path, "rb") as f:
            for t in range(teachers):
                f.seek(header.offset + (t * file_queries + start) * itemsize)
                if f.readinto(memoryview(raw[t])) != raw.shape[1]:
                    raise self._changed()
        return raw.view(header.dtype)


class InflatedTiles:
    """The 2-D C-order array of an .npz, inflated once and kept as zlib tiles.

    The member is read in bands of ``band_rows`` rows (one pass of the streaming
    decompressor); each band is cut into tiles of ``tile_columns`` columns, each compressed
    again on its own (kept as it is when that does not make it smaller). Reading rows or
    columns inflates the tiles they cross; the last two are kept, so that blocks that do not
    line up with the bands inflate a tile once.
    """

    _CACHED = 2

    def __init__(self, file: ArrayFile, band_rows: int, tile_columns: int) -> None:
        self.shape = (int(file.shape[0]), int(file.shape[1]))
        self.dtype = file.dtype
        self.band_rows, self.tile_columns = band_rows, tile_columns
        self._bands = [self._pack(band) for _, band in file.row_blocks(band_rows)]
        self._cache: OrderedDict[tuple[int, int], np.ndarray] = OrderedDict()
        self._lock = threading.Lock()

    def _pack(self, band: np.ndarray) -> list[tuple[bool, bytes]]:
        tiles = []
        for first in range(0, self.shape[1], self.tile_columns):
            data = np.ascontiguousarray(band[:, first : first + self.tile_columns]).tobytes()
            packed = zlib.compress(data, 1)
            tiles.append((True, packed) if len(packed) < len(data) else (False, data))
        return tiles

    @property
    def nbytes(self) -> int:
        """Bytes held by the tiles."""
        return sum(len(data) for band in self._bands for _, data in band)

    def _tile(self, band: int, tile: int) -> np.ndarray:
        key = (band, tile)
        with self._lock:
            cached = self._cache.get(key)
            if cached is not None:
                self._cache.move_to_end(key)
                return cached
        packed, data = self._bands[band][tile]
        rows = min(self.band_rows, self.shape[0] - band * self.band_rows)
        columns = min(self.tile_columns, self.shape[1] - tile * self.tile_columns)
        raw = zlib.decompress(data) if packed else data
        out = np.frombuffer(raw, dtype=self.dtype).reshape(rows, columns)
        with self._lock:
            self._cache[key] = out
            while len(self._cache) > self._CACHED:
                self._cache.popitem(last=False)
        return out

    def read(self, rows: slice, columns: slice) -> np.ndarray:
        """The array's ``[rows, columns]`` (steps of 1), in the file's dtype."""
        r0, r1, _ = rows.indices(self.shape[0])
        c0, c1, _ = columns.indices(self.shape[1])
        out = np.empty((max(r1 - r0, 0), max(c1 - c0, 0)), dtype=self.dtype)
        for band in range(r0 // self.band_rows, math.ceil(r1 / self.band_rows)):
            top = band * self.band_rows
            a, b = max(r0, top), min(r1, top + self.band_rows)
            for tile in range(c0 // self.tile_columns, math.ceil(c1 / self.tile_columns)):
                left = tile * self.tile_columns
                c, d = max(c0, left), min(c1, left + self.tile_columns)
                out[a - r0 : b - r0, c - c0 : d - c0] = self._tile(band, tile)[
                    a - top : b - top, c - left : d - left
                ]
        return out

    def rows(self, start: int, stop: int) -> NDArray[np.float64]:
        return self.read(slice(start, stop), slice(None)).astype(np.float64)

    def columns(self, start: int, stop: int) -> np.ndarray:
        return self.read(slice(None), slice(start, stop))


class ChunkedCounts:
    """The (Q, C) counts of a large file, read as float64 a block of rows at a time.

    It behaves like a read-only float64 array for what the analysis needs: ``len``,
    ``shape``, row slices ``[a:b]`` (read from the file on demand into a fresh
    buffer: no memory map, so resident memory stays at one block) and
    ``np.asarray`` (reads everything). Used for large counts files that are
    analysed whole or by a prefix (``--queries``).
    """

    ndim = 2
    dtype = np.dtype(np.float64)

    def __init__(
        self, source: Source, num_rows: int, block: BlockSize, width: int | None = None
    ) -> None:
        self._source = source
        self.block = block
        self.shape = (num_rows, source.shape[1] if width is None else width)

    def __len__(self) -> int:
        return self.shape[0]

    @property
    def source(self) -> Source:
        """The file it reads: by rows, or by columns."""
        return self._source

    def __getitem__(self, key: object) -> NDArray[np.float64]:
        if isinstance(key, slice) and key.step in (None, 1):
            start, stop, _ = key.indices(self.shape[0])
            return self._read(start, max(start, stop))
        return np.asarray(self)[cast(Any, key)]

    def __array__(self, dtype: object = None, copy: object = None) -> NDArray[np.float64]:
        out = self._read(0, self.shape[0])
        return out if dtype is None else out.astype(dtype)  # type: ignore[call-overload]

    def _read(self, start: int, stop: int) -> NDArray[np.float64]:
        return self._source.rows(start, stop)

    def blocks(self) -> Iterator[tuple[int, NDArray[np.float64]]]:
        """(first row, rows) for consecutive blocks of at most ``block.cells`` values."""
        step = self.block.rows_of(self.shape[1])
        for start in range(0, self.shape[0], step):
            yield start, self[start : start + step]

    def prefix(self, num_rows: int) -> ChunkedCounts:
        """The first ``num_rows`` rows (``--queries``), read the same way."""
        return ChunkedCounts(self._source, num_rows, self.block)

    def scan(self) -> BlockScan:
        """One pass over the rows with the counts rule, summing each row on the way."""
        return scan_blocks(self.blocks(), VoteFormat.COUNTS, num_rows=len(self))

    def scan_distinct(self, limit: int, share: float) -> tuple[BlockScan, Distinct | None]:
        """:meth:`scan` from the distinct rows, and the distinct rows (at most ``limit``, at
        most ``share`` of the rows; else None, the rows scanned one by one):
        ``formats.scan_rows_distinct``."""
        return scan_rows_distinct(self.blocks, len(self), limit, share)


class ChunkedLabels(ChunkedCounts):
    """The (Q, C) counts of a large (M, Q) labels file, histogrammed a block of queries at a
    time.

    Each block reads its columns of every teacher's row (M reads of a .npy, no memory map;
    the tiles of those columns of an .npz) and counts them; the labels are validated first,
    by a scan of the same blocks.
    """

    def __init__(
        self, source: Source, num_queries: int, num_classes: int, block: BlockSize
    ) -> None:
        super().__init__(source, num_queries, block, num_classes)

    @property
    def num_file_teachers(self) -> int:
        """M, the rows of the file."""
        return int(self._source.shape[0])

    def labels(self, start: int, stop: int) -> np.ndarray:
        """The file's labels of queries [start, stop): (M, stop - start), in the file's dtype."""
        return self._source.columns(start, stop)

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
        self,
        where: str,
        whole: BlockScan,
        num_classes: int | None,
        num_queries: int,
        max_cells: int,
    ) -> ChunkedLabels:
        """Check the labels and return the counts of the first ``num_queries`` queries.

        ``whole`` is :meth:`scan`; C is chosen and checked as in memory
        (:func:`~pate_cli.votes.conversion.classes_of_labels` and ``check_label_cells``
        with ``max_cells``).

        Raises:
            InputError: A value that is not a label, or more classes than a block holds.
        """
        classes = classes_of_labels(
            where, num_classes, whole, lambda: self.label_blocks(0, num_queries)
        )
        check_label_cells(where, classes, num_queries, max_cells)
        if classes > self.block.cells:
            raise InputError(
                f"{where}: labels imply {classes} classes; expected small class labels "
                f"(or pass {option('num-classes')})"
            )
        return ChunkedLabels(self._source, num_queries, classes, self.block)


def open_streams(
    file: ArrayFile, fmt: VoteFormat, min_rows: int, block: BlockSize
) -> tuple[ChunkedCounts | None, ChunkedLabels | None]:
    """The block readers of a large 2-D array: (rows as counts, columns as labels).

    Which axis is the queries' depends on the format, so a file of at least ``min_rows``
    rows may be read as counts, and one of at least ``min_rows`` columns as labels; each
    is None when the file is smaller, ``fmt`` rules it out, or the array is
    Fortran-ordered (read in memory instead). A .npy is read where it lies; the array of an
    .npz is inflated once, here, into :class:`InflatedTiles`; the shards of a folder (its
    ``parts``) are each read so, one after the other (:class:`ShardSource`).
    """
    shape = file.shape
    parts: tuple[ArrayFile, ...] = getattr(file, "parts", ())  # a folder of shards
    fortran = any(part.header.fortran_order for part in (*parts, file))
    if len(shape) != 2 or max(shape) < min_rows or fortran:
        return None, None
    num_rows, num_columns = (int(n) for n in shape)
    by_rows = num_rows >= min_rows and fmt in _MAYBE_COUNTS
    by_columns = num_columns >= min_rows and fmt in _MAYBE_LABELS
    if not (by_rows or by_columns):
        return None, None
    source = _source(file, by_rows, by_columns, block)
    rows = ChunkedCounts(source, num_rows, block) if by_rows else None
    columns = ChunkedLabels(source, num_columns, 0, block) if by_columns else None
    return rows, columns


def _source(file: ArrayFile, by_rows: bool, by_columns: bool, block: BlockSize) -> Source:
    """How a 2-D array is read by blocks: a .npy where it lies, an .npz's array inflated into
    tiles, a folder's shards (``parts``, concatenated along ``axis``) each so."""
    parts: tuple[ArrayFile, ...] = getattr(file, "parts", ())
    if parts:
        sources = [_source(part, by_rows, by_columns, block) for part in parts]
        return ShardSource(sources, int(getattr(file, "axis", 0)))
    if not file.npz:
        return NpySource(file.path, file.header)
    num_rows, num_columns = (int(n) for n in file.shape)
    # Bands of a block of rows; tiles as wide as a block of labels' queries when the file is
    # to be read by columns (labels, or a wide file under auto), else whole rows.
    by_tiles = by_columns and not (by_rows and num_rows >= num_columns)
    tile_columns = block.rows_of(num_rows) if by_tiles else max(num_columns, 1)
    return InflatedTiles(file, block.rows_of(num_columns), tile_columns)


class ShardSource:
    """The 2-D arrays of a folder's shards as one, concatenated along ``axis`` (0: rows,
    1: columns) in order; a block read crosses from one shard into the next, and never
    holds more than itself."""

    def __init__(self, parts: list[Source], axis: int) -> None:
        self._parts, self._axis = parts, axis
        lengths = [part.shape[axis] for part in parts]
        self._starts = [sum(lengths[:i]) for i in range(len(parts) + 1)]
        across = parts[0].shape[1 - axis]
        total = self._starts[-1]
        self.shape = (total, across) if axis == 0 else (across, total)

    def _read(self, axis: int, start: int, stop: int) -> np.ndarray:
        """Rows (``axis`` 0) or columns (1) [start, stop) of the whole."""

        def part(source: Source, a: int, b: int) -> np.ndarray:
            return source.rows(a, b) if axis == 0 else source.columns(a, b)

        if axis != self._axis:  # across the shards: every shard's piece, side by side
            pieces = [part(source, start, stop) for source in self._parts]
            return np.concatenate(pieces, axis=1 - axis)
        pieces = []
        for source, first, end in zip(self._parts, self._starts, self._starts[1:], strict=False):
            a, b = max(start, first), min(stop, end)
            if a < b:
                pieces.append(part(source, a - first, b - first))
        if not pieces:
            return part(self._parts[0], 0, 0)
        return pieces[0] if len(pieces) == 1 else np.concatenate(pieces, axis=axis)

    def rows(self, start: int, stop: int) -> NDArray[np.float64]:
        return self._read(0, start, stop)

    def columns(self, start: int, stop: int) -> np.ndarray:
        return self._read(1, start, stop)

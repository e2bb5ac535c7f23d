"""Vote files: safe reading, validation, format detection and query selection.

Every array the CLI reads goes through :func:`load_array`, which never unpickles:
it checks that the path is a regular file *before* opening it (a FIFO would
block), tells ``.npy`` from ``.npz`` by the magic bytes rather than the
extension, parses the ``.npy`` header itself, rejects non-numeric dtypes, and
compares the size the header declares with the bytes actually present, so a
forged header cannot make us allocate gigabytes. Only then is the data read
(``np.load(..., allow_pickle=False)``, memory-mapped for votes so that a query
selection reads only the rows it needs).

:func:`load_votes` turns any of the three formats of CLI.md into one float64
``(Q, C)`` counts array. Detection (``--format auto``) looks at the whole file:
3-D is ``probs``; 2-D is ``counts`` when every row has the same positive sum,
else ``labels`` when the values are non-negative integers and ``--teachers``
was not given, else ``counts`` (which then fails, or warns under
``--teachers``). The selection (``--indices`` first, then the first
``--queries``) is applied along the query axis before labels or scores are
converted, and is recorded in :class:`Votes` so that a baseline can be
selected the same way.

Every problem is an :class:`~pate_cli.errors.InputError` (a bad file) or a
:class:`~pate_cli.errors.UsageError` (a bad flag value) whose one-line message
starts with the path as the user gave it. Shape letters: Q queries, C classes,
M teachers.
"""

from __future__ import annotations

import ast
import contextlib
import functools
import hashlib
import math
import os
import stat
import tempfile
import warnings as _warnings
import zipfile
import zlib
from collections.abc import Callable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from typing import IO, Any, cast

import numpy as np
from numpy.typing import NDArray

from pate_cli.choices import VoteFormat
from pate_cli.errors import InputError, UsageError

StrPath = str | os.PathLike[str]  # the CLI passes the text the user typed

_NPY_MAGIC = b"\x93NUMPY"
_ZIP_MAGICS = (b"PK\x03\x04", b"PK\x05\x06")  # a local file header, or an empty archive
_MAX_DIMENSION = np.iinfo(np.intp).max  # numpy's limit on one dimension of an array
_MAX_HEADER_BYTES = 10_000  # numpy's own default limit for a header before literal_eval
_MAX_LABEL_COUNT_CELLS = 10**8  # Q * C of a labels file's counts; beyond this C is implausible
_NUMERIC_KINDS = "biuf"
_LAYOUTS = {
    "counts": "(queries, classes)",
    "labels": "(teachers, queries)",
    "probs": "(teachers, queries, classes)",
}


@dataclass(frozen=True)
class Votes:
    """Validated votes as a float64 ``(Q, C)`` histogram, plus where they came from.

    Attributes:
        counts: Per-query vote histogram after the selection; read-only, C-contiguous.
        path: The path as the user gave it.
        digest: Hex SHA-256 of the file's bytes, computed on a thread while the votes are
            analysed (hashlib releases the GIL); read it as ``sha256``.
        format: The format used; never ``AUTO``.
        detected: True when ``format`` came from auto-detection.
        num_teachers: M.
        num_classes: C.
        num_file_queries: Queries in the file before selection.
        selection: File query indices kept, in order; None means all, in file order.
        warnings: One-line notes for the user, e.g. rows that do not sum to ``--teachers``.
    """

    counts: NDArray[np.float64]
    path: str
    digest: Future[str]
    format: VoteFormat
    detected: bool
    num_teachers: int
    num_classes: int
    num_file_queries: int
    selection: NDArray[np.int64] | None
    warnings: tuple[str, ...]

    @property
    def sha256(self) -> str:
        """Hex SHA-256 of the file's bytes (waits for the hashing thread)."""
        return self.digest.result()

    @property
    def num_queries(self) -> int:
        """Q, the number of queries after selection."""
        return int(self.counts.shape[0])


@dataclass(frozen=True)
class _Header:
    shape: tuple[int, ...]
    dtype: np.dtype
    fortran_order: bool
    offset: int  # bytes before the data

    @property
    def nbytes(self) -> int:
        return math.prod(self.shape) * self.dtype.itemsize


def _show(value: object) -> str:
    """A numpy scalar as plain text: ``nan``, ``-1``, ``2.5``, and ``3`` for 3.0."""
    item = np.asarray(value).item()
    if isinstance(item, float) and item.is_integer() and abs(item) < 2**53:
        return str(int(item))
    return str(item)


def _first(mask: NDArray[np.bool_]) -> tuple[int, ...]:
    """Index of the first True entry (C order) of a mask known to have one."""
    return tuple(int(i) for i in np.unravel_index(int(np.argmax(mask)), mask.shape))


def _row_sums(a: np.ndarray) -> NDArray[np.float64]:
    # Overflow to inf (values near 1e308) is a bad-input case reported by the caller.
    with np.errstate(over="ignore", invalid="ignore"):
        return np.asarray(a.sum(axis=1, dtype=np.float64))


def _all_near(sums: NDArray[np.float64], total: float) -> bool:
    """np.allclose(sums, total, rtol=1e-9, atol=0), from two reductions (NaN fails)."""
    tolerance = 1e-9 * abs(total)
    if sums.size == 0:
        return True
    return bool(total - sums.min() <= tolerance and sums.max() - total <= tolerance)


def _is_whole(a: np.ndarray) -> NDArray[np.bool_]:
    """Elementwise: finite and integral (always True for integer dtypes)."""
    if a.dtype.kind in "iub":
        return np.ones(a.shape, dtype=bool)
    whole: NDArray[np.bool_] = np.isfinite(a) & (a == np.floor(a))
    return whole


def _open_regular(path: StrPath, where: str, what: str) -> IO[bytes]:
    """Open a regular file for reading; stat first so that a FIFO never blocks."""
    expected = f"expected the {what} as a .npy or .npz file"
    try:
        mode = os.stat(path).st_mode
        if stat.S_ISDIR(mode):
            raise InputError(f"{where}: is a directory; {expected}")
        if not stat.S_ISREG(mode):
            raise InputError(f"{where}: is not a regular file (FIFO, device or socket); {expected}")
        return open(path, "rb")
    except FileNotFoundError:
        raise InputError(f"{where}: no such file; {expected}") from None
    except PermissionError:
        raise InputError(f"{where}: permission denied; {expected} readable by you") from None
    except (OSError, ValueError) as exc:
        reason = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
        raise InputError(f"{where}: cannot open ({reason}); {expected}") from None


def _read_header(f: IO[bytes], where: str, what: str) -> _Header:
    """Parse and check a .npy header without numpy's loader; raises InputError."""
    corrupt = f"{where}: corrupt .npy header; expected the {what} saved with numpy.save"
    prefix = f.read(8)
    if len(prefix) < 8 or not prefix.startswith(_NPY_MAGIC) or prefix[6] not in (1, 2, 3):
        raise InputError(corrupt)
    size_bytes = 2 if prefix[6] == 1 else 4
    encoding = "utf8" if prefix[6] == 3 else "latin1"
    length = int.from_bytes(f.read(size_bytes), "little")
    text = f.read(length) if length <= _MAX_HEADER_BYTES else b""
    try:
        if len(text) != length or length == 0:
            raise ValueError
        fields = ast.literal_eval(text.decode(encoding))
        with _warnings.catch_warnings():
            _warnings.simplefilter("error")  # a dtype numpy warns about is a corrupt header here
            dtype = np.lib.format.descr_to_dtype(fields["descr"])
        shape, fortran_order = fields["shape"], fields["fortran_order"]
    except (
        ValueError,
        TypeError,
        KeyError,
        IndexError,  # descr_to_dtype(("<f8",)) indexes a missing subarray shape
        OverflowError,
        SyntaxError,
        MemoryError,
        RecursionError,
        Warning,
    ):
        raise InputError(corrupt) from None
    if (
        not isinstance(shape, tuple)
        # A dimension must fit numpy's index type: (0, 10**30) declares 0 bytes but
        # makes numpy raise OverflowError instead of reading an empty array.
        or not all(
            isinstance(n, int) and not isinstance(n, bool) and 0 <= n <= _MAX_DIMENSION
            for n in shape
        )
        or not isinstance(fortran_order, bool)
    ):
        raise InputError(corrupt)
    if dtype.kind not in _NUMERIC_KINDS or dtype.names is not None or dtype.subdtype is not None:
        raise InputError(
            f"{where}: {what} array has unsupported dtype {dtype!s}; expected a numeric "
            "(bool, integer or float) array, never Python objects (pickles are not loaded)"
        )
    return _Header(shape, dtype, fortran_order, 8 + size_bytes + length)


def _truncated(where: str, what: str, header: _Header, available: int) -> InputError:
    return InputError(
        f"{where}: {what} file is truncated: the header declares shape {header.shape} of "
        f"{header.dtype!s} ({header.nbytes} bytes) but only {max(available, 0)} bytes follow"
    )


def _load_npz(path: StrPath, where: str, what: str) -> np.ndarray:
    try:
        with zipfile.ZipFile(path) as archive:
            members = [info for info in archive.infolist() if not info.is_dir()]
            keys = [info.filename.removesuffix(".npy") for info in members]
            if len(members) != 1:
                raise InputError(
                    f"{where}: .npz holds {len(members)} arrays {keys}; expected exactly one "
                    f"{what} array"
                )
            info, inner = members[0], f"{where}: array {keys[0]!r}"
            with archive.open(info) as member:
                header = _read_header(member, inner, what)
                if info.file_size - header.offset < header.nbytes:
                    raise _truncated(inner, what, header, info.file_size - header.offset)
                data = member.read(header.nbytes)
    except (
        zipfile.BadZipFile,
        zlib.error,
        EOFError,
        OSError,
        RuntimeError,
        NotImplementedError,
        ValueError,
        IndexError,  # ZipInfo.is_dir() of a name that a NUL byte cut to ""
    ) as exc:
        raise InputError(
            f"{where}: corrupt .npz archive ({exc}); expected the {what} saved with numpy.savez"
        ) from None
    if len(data) != header.nbytes:
        raise _truncated(where, what, header, len(data))
    try:
        if header.nbytes == 0:
            return np.empty(header.shape, dtype=header.dtype)
        flat = np.frombuffer(data, dtype=header.dtype)
        return flat.reshape(header.shape, order="F" if header.fortran_order else "C").copy()
    except ValueError as exc:  # e.g. more dimensions than numpy supports (65 in numpy 2)
        raise InputError(
            f"{where}: unreadable .npz array ({exc}); expected the {what} saved with numpy.savez"
        ) from None


def _load(path: StrPath, what: str, *, mmap: bool) -> np.ndarray:
    """Body of :func:`load_array`; ``mmap`` memory-maps a .npy instead of reading it."""
    where = os.fspath(path)
    with _open_regular(path, where, what) as f:
        magic = f.read(len(_NPY_MAGIC))
        if magic.startswith(_ZIP_MAGICS):
            return _load_npz(path, where, what)
        if magic != _NPY_MAGIC:
            empty = " is empty" if not magic else ""
            raise InputError(
                f"{where}:{empty} not a .npy or .npz file; expected the {what} "
                "saved with numpy.save (or a single-array numpy.savez)"
            )
        f.seek(0)
        header = _read_header(f, where, what)
        available = os.fstat(f.fileno()).st_size - header.offset
        if available < header.nbytes:
            raise _truncated(where, what, header, available)
        f.seek(0)
        # Header, dtype and size are checked, so numpy neither unpickles nor over-allocates.
        try:
            array: np.ndarray = np.load(
                path if mmap else f, mmap_mode="r" if mmap else None, allow_pickle=False
            )
            return array
        except (ValueError, OSError, EOFError) as exc:
            raise InputError(
                f"{where}: unreadable .npy ({exc}); expected the {what} saved with numpy.save"
            ) from None


def load_array(path: StrPath, what: str) -> np.ndarray:
    """Read one numeric array from a .npy or single-array .npz file, never unpickling.

    Args:
        path: The file, as the user gave it (it starts every message).
        what: What the array is ("votes", "baseline", "indices", ...), for messages.

    Returns:
        The array, in memory; its dtype is bool, integer or float.

    Raises:
        InputError: Missing, unreadable, non-regular, truncated or corrupt file; not
            .npy/.npz; an .npz without exactly one array; a non-numeric dtype.
    """
    return np.asarray(_load(path, what, mmap=False))


@functools.cache
def _hashing_thread() -> ThreadPoolExecutor:
    return ThreadPoolExecutor(max_workers=1, thread_name_prefix="pate-sha256")


def file_sha256(path: StrPath) -> str:
    """Hex SHA-256 of a file's bytes, read in chunks.

    Raises:
        InputError: The file is missing, not a regular file or unreadable.
    """
    where, digest = os.fspath(path), hashlib.sha256()
    with _open_regular(path, where, "input") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            digest.update(chunk)
    return digest.hexdigest()


def _umask() -> int:
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


def write_atomic(path: StrPath, write: Callable[[IO[bytes]], object]) -> None:
    """Write a file so that ``path`` is either complete or untouched.

    ``write`` fills a temporary file in the same directory (so ``os.replace`` is
    atomic), which is removed again if anything fails.

    Raises:
        InputError: The directory does not exist or the file cannot be written.
    """
    where = os.fspath(path)
    directory = os.path.dirname(where) or "."
    if not os.path.isdir(directory):
        raise InputError(
            f"{where}: directory {directory} does not exist; expected an existing "
            "directory for the output file"
        )
    tmp = None
    try:
        fd, tmp = tempfile.mkstemp(
            dir=directory, prefix=f".{os.path.basename(where)}.", suffix=".tmp"
        )
        with os.fdopen(fd, "wb") as f:
            write(f)
            f.flush()
            os.fsync(f.fileno())
        os.chmod(tmp, 0o666 & ~_umask())  # mkstemp creates 0600; match a plain open()
        os.replace(tmp, where)
    except OSError as exc:
        raise InputError(
            f"{where}: cannot write the output file ({exc.strerror or exc}); "
            "expected a writable path"
        ) from None
    finally:
        if tmp is not None and os.path.lexists(tmp):
            with contextlib.suppress(OSError):
                os.unlink(tmp)


def check_output_path(path: str, flag: str, suffixes: tuple[str, ...]) -> str:
    """Check that ``path`` can receive the output of ``flag``, before any work is done.

    Args:
        path: The file name the user gave.
        flag: The option it came from, for messages (``--ledger``).
        suffixes: Accepted lower-case suffixes, with the dot.

    Returns:
        The file's suffix, lower-cased (it picks the format).

    Raises:
        UsageError: The suffix is not one of ``suffixes``.
        InputError: The folder does not exist, or the path is a folder.
    """
    suffix = os.path.splitext(path)[1].lower()
    if suffix not in suffixes:
        raise UsageError(f"{flag} {path}: expected a file name ending in {' or '.join(suffixes)}")
    folder = os.path.dirname(os.path.abspath(path))
    if not os.path.isdir(folder):
        raise InputError(f"{path}: the folder {folder} does not exist; expected a path for {flag}")
    if os.path.isdir(path):
        raise InputError(f"{path}: is a directory; expected a file path for {flag}")
    return suffix


def save_npy_atomic(path: StrPath, array: np.ndarray) -> None:
    """Write ``array`` as .npy, atomically (see ``write_atomic``)."""
    write_atomic(path, lambda f: np.save(f, np.asarray(array), allow_pickle=False))


_MAYBE_COUNTS = (VoteFormat.AUTO, VoteFormat.COUNTS)
_MAYBE_LABELS = (VoteFormat.AUTO, VoteFormat.LABELS)


def _detect_format(
    raw: np.ndarray,
    where: str,
    teachers: int | None,
    sums: NDArray[np.float64] | None = None,
    *,
    label_scan: _LabelScan | None = None,
) -> VoteFormat:
    """Auto-detection rules; see the module docstring.

    ``sums``: the row sums, if known; ``label_scan``: a streamed pass over a wide file.
    """
    if raw.ndim == 3:
        return VoteFormat.PROBS
    if raw.ndim != 2:
        raise InputError(
            f"{where}: array has {raw.ndim} dimensions {raw.shape} but --format auto expects "
            f"{_LAYOUTS['counts']} counts, {_LAYOUTS['labels']} labels or "
            f"{_LAYOUTS['probs']} probs"
        )
    if raw.size == 0:
        return VoteFormat.COUNTS  # rejected as empty by the shape check
    if sums is None:
        sums = _row_sums(raw) if label_scan is None else label_scan.row_sums
    if np.isfinite(sums[0]) and sums[0] > 0 and _all_near(sums, sums[0]):
        return VoteFormat.COUNTS
    if label_scan is not None:
        labels = label_scan.first_bad is None
    else:
        labels = bool(_is_whole(raw).all() and raw.min() >= 0)
    return VoteFormat.LABELS if teachers is None and labels else VoteFormat.COUNTS


def _check_shape(raw: np.ndarray, where: str, fmt: VoteFormat, num_classes: int | None) -> None:
    ndim = 3 if fmt is VoteFormat.PROBS else 2
    if raw.ndim != ndim:
        raise InputError(
            f"{where}: array has {raw.ndim} dimensions {raw.shape} but --format "
            f"{fmt.value} expects {_LAYOUTS[fmt.value]}"
        )
    if raw.size == 0:
        raise InputError(
            f"{where}: votes array is empty, shape {raw.shape}; expected "
            f"{_LAYOUTS[fmt.value]} with at least one of each"
        )
    if num_classes is not None and fmt is not VoteFormat.LABELS and raw.shape[-1] != num_classes:
        raise InputError(
            f"{where}: votes have {raw.shape[-1]} classes (shape {raw.shape}) but "
            f"--num-classes is {num_classes}"
        )


def _load_indices(path: StrPath, votes_where: str, num_file_queries: int) -> NDArray[np.int64]:
    where = os.fspath(path)
    a = load_array(path, "indices")
    if a.ndim != 1 or a.size == 0:
        raise InputError(
            f"{where}: indices array has shape {a.shape}; expected a non-empty 1-D "
            "array of query indices"
        )
    if a.dtype.kind == "b":
        raise InputError(f"{where}: indices array has dtype bool; expected integer query indices")
    bad = ~_is_whole(a) | (a < 0) | (a >= num_file_queries)
    if bad.any():
        (i,) = _first(bad)
        raise InputError(
            f"{where}: index at position {i} is {_show(a[i])}; expected integer "
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


def _selection(
    where: str, num_file_queries: int, queries: int | None, indices: StrPath | None
) -> NDArray[np.int64] | None:
    if indices is None:
        if queries is None:
            return None
        if queries > num_file_queries:
            raise InputError(
                f"{where}: has only {num_file_queries} queries, --queries asks for {queries}"
            )
        return np.arange(queries, dtype=np.int64)
    selection = _load_indices(indices, where, num_file_queries)
    if queries is not None:
        if queries > selection.size:
            raise InputError(
                f"{os.fspath(indices)}: has only {selection.size} queries, "
                f"--queries asks for {queries}"
            )
        selection = selection[:queries]
    return selection


def _counts_from_labels(labels: np.ndarray, num_classes: int) -> NDArray[np.float64]:
    """Histogram each query's column of labels: (M, Q) -> (Q, C), one bincount."""
    num_queries = labels.shape[1]
    flat = labels.astype(np.int64) + num_classes * np.arange(num_queries, dtype=np.int64)
    counts = np.bincount(flat.ravel(), minlength=num_queries * num_classes)
    return counts.reshape(num_queries, num_classes).astype(np.float64)


def _teachers_from_sums(
    sums: NDArray[np.float64],
    where: str,
    teachers: int | None,
    notes: list[str],
    file_query: Callable[[int], int],
) -> int:
    """M from the row sums of a counts array, or ``teachers`` with a note when they differ."""
    if not sums.any():
        raise InputError(
            f"{where}: every votes row sums to 0; expected rows that sum to the "
            "number of teachers M"
        )
    if teachers is not None:
        off = ~np.isclose(sums, teachers, rtol=1e-9, atol=1e-9)
        if off.any():
            notes.append(
                f"{where}: {int(off.sum())} of {sums.size} votes rows do not sum to "
                f"--teachers {teachers} (sums range from {_show(sums.min())} to "
                f"{_show(sums.max())})"
            )
        return teachers
    if not _all_near(sums, sums[0]):
        q = int(np.argmin(np.isclose(sums, sums[0], rtol=1e-9, atol=0)))
        raise InputError(
            f"{where}: votes rows sum to different totals (row {file_query(0)}: "
            f"{_show(sums[0])}, row {file_query(q)}: {_show(sums[q])}); expected "
            "every row to sum to the number of teachers M, or pass --teachers M"
        )
    if not np.isfinite(sums[0]) or abs(sums[0] - round(sums[0])) > 1e-9 * sums[0]:
        raise InputError(
            f"{where}: votes rows sum to {_show(sums[0])}; expected a whole number "
            "of teachers M, or pass --teachers M"
        )
    return int(round(sums[0]))


def _check_flags(num_classes: int | None, teachers: int | None, queries: int | None) -> None:
    for flag, value, noun in (
        ("--num-classes", num_classes, "classes"),
        ("--teachers", teachers, "teachers"),
        ("--queries", queries, "queries"),
    ):
        if value is not None and value < 1:
            raise UsageError(f"{flag} {value}: expected a positive number of {noun}")


def _check_labels(
    labels: np.ndarray, where: str, num_classes: int | None, file_query: Callable[[int], int]
) -> int:
    """Check labels are integers in [0, C) (C unbounded when None); return the largest."""
    bad = ~_is_whole(labels) | (labels < 0)
    if num_classes is not None:
        bad |= labels >= num_classes
    if bad.any():
        t, q = _first(bad)
        limit = f"[0, {num_classes})" if num_classes is not None else "[0, classes)"
        raise InputError(
            f"{where}: label of teacher {t} for query {file_query(q)} is "
            f"{_show(labels[t, q])}; expected integer class labels in {limit}"
        )
    return int(labels.max())


def _to_counts(
    full: np.ndarray,
    data: np.ndarray,
    fmt: VoteFormat,
    where: str,
    num_classes: int | None,
    teachers: int | None,
    file_query: Callable[[int], int],
    notes: list[str],
) -> tuple[NDArray[np.float64], int]:
    """Validate selected votes of any format and histogram them; returns (counts, M).

    Shapes: ``data`` (the selected part of ``full``) is (Q, C) counts, (M, Q) labels or
    (M, Q, C) scores; counts are (Q, C).
    """
    file_teachers = int(data.shape[0])
    if fmt is VoteFormat.COUNTS:
        counts = np.array(data, dtype=np.float64, order="C")
        bad = ~np.isfinite(counts) | (counts < 0)
        if bad.any():
            q, c = _first(bad)
            raise InputError(
                f"{where}: votes row {file_query(q)}, column {c} is "
                f"{_show(counts[q, c])}; expected finite non-negative vote counts"
            )
        num_teachers = _teachers_from_sums(_row_sums(counts), where, teachers, notes, file_query)
    else:
        if fmt is VoteFormat.LABELS:
            if num_classes is None:
                # C comes from the whole file, so that a selection cannot change the class count.
                num_classes = _check_labels(full, where, None, lambda q: q) + 1
            _check_labels(data, where, num_classes, file_query)
            if data.shape[1] * num_classes > _MAX_LABEL_COUNT_CELLS:
                raise InputError(
                    f"{where}: labels imply {num_classes} classes for {data.shape[1]} queries; "
                    "expected small class labels (or pass --num-classes)"
                )
            labels = data
        else:
            finite = np.isfinite(data)
            if not finite.all():
                t, q, c = _first(~finite)
                raise InputError(
                    f"{where}: score of teacher {t} for query {file_query(q)}, class "
                    f"{c} is {_show(data[t, q, c])}; expected finite scores"
                )
            num_classes = int(data.shape[2])
            labels = np.argmax(data, axis=2)  # the first maximum wins ties
        counts = _counts_from_labels(labels, num_classes)
        num_teachers = _teachers_of_labels(file_teachers, teachers, where, notes)
    return counts, num_teachers


def _teachers_of_labels(
    file_teachers: int, teachers: int | None, where: str, notes: list[str]
) -> int:
    """M of a labels or scores file: its teacher count, or ``--teachers`` with a note."""
    num_teachers = teachers if teachers is not None else file_teachers
    if num_teachers != file_teachers:
        notes.append(
            f"{where}: the file has {file_teachers} teachers but --teachers is {num_teachers}"
        )
    return num_teachers


# Files of more queries than this are read a block at a time, never whole.
STREAM_MIN_ROWS = 1 << 18
_BLOCK_ROWS = 1 << 16
_BLOCK_CELLS = 1 << 22  # values per block at most: 32 MB of float64


def _block_rows(width: int) -> int:
    return max(1, min(_BLOCK_ROWS, _BLOCK_CELLS // max(width, 1)))


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
        self, path: StrPath, header: _Header, num_rows: int, width: int | None = None
    ) -> None:
        self._path = os.fspath(path)
        self._header = header
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
        """(first row, rows) for consecutive blocks of at most ``_BLOCK_CELLS`` values."""
        step = _block_rows(self.shape[1])
        for start in range(0, self.shape[0], step):
            yield start, self[start : start + step]


class ChunkedLabels(ChunkedCounts):
    """The (Q, C) counts of a large (M, Q) labels .npy, histogrammed a block of queries at a time.

    Each block reads its columns of every teacher's row (M reads, no memory map) and
    counts them; the labels were validated by ``_scan_labels`` first.
    """

    def __init__(self, path: StrPath, header: _Header, num_queries: int, num_classes: int) -> None:
        super().__init__(path, header, num_queries, num_classes)

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
        step = _block_rows(self.num_file_teachers)
        for first in range(start, stop, step):
            yield first, self.labels(first, min(first + step, stop))

    def _read(self, start: int, stop: int) -> NDArray[np.float64]:
        out = np.empty((stop - start, self.shape[1]))
        for first, block in self.label_blocks(start, stop):
            out[first - start : first - start + block.shape[1]] = _counts_from_labels(
                block, self.shape[1]
            )
        return out


@dataclass(frozen=True)
class _LabelScan:
    """One pass over a wide (M, Q) file: what detection and label validation need."""

    row_sums: NDArray[np.float64]  # (M,): sums of each teacher's row
    first_bad: tuple[int, int] | None  # (teacher, query) of the first non-label value
    largest: int  # the largest label (meaningful when first_bad is None)


def _scan_labels(source: ChunkedLabels) -> _LabelScan:
    sums = np.zeros(source.num_file_teachers)
    first_bad: tuple[int, int] | None = None
    largest = 0
    for start, block in source.label_blocks(0, source.shape[0]):
        if block.size == 0:
            continue
        sums += _row_sums(block)
        if first_bad is None:
            bad = ~_is_whole(block) | (block < 0)
            if bad.any():
                t, q = _first(bad)
                first_bad = (t, start + q)
            else:
                largest = max(largest, int(block.max()))
    return _LabelScan(sums, first_bad, largest)


def _stream_labels(
    source: ChunkedLabels,
    where: str,
    scan: _LabelScan,
    num_classes: int | None,
    num_selected: int,
) -> int:
    """Validate a streamed labels file from its scan; returns C, as ``_to_counts`` does.

    Without ``num_classes`` C comes from the whole file, which must hold labels only;
    with it, the selected queries (the first ``num_selected``) must lie in [0, C).
    """
    limit = f"[0, {num_classes})" if num_classes is not None else "[0, classes)"
    bad = scan.first_bad
    if num_classes is not None:
        bad = None
        if scan.first_bad is not None or scan.largest >= num_classes:  # look closer
            for start, block in source.label_blocks(0, num_selected):
                wrong = ~_is_whole(block) | (block < 0) | (block >= num_classes)
                if wrong.any():
                    t, q = _first(wrong)
                    bad = (t, start + q)
                    break
    if bad is not None:
        t, q = bad
        value = source.labels(q, q + 1)[t, 0]
        raise InputError(
            f"{where}: label of teacher {t} for query {q} is {_show(value)}; "
            f"expected integer class labels in {limit}"
        )
    classes = scan.largest + 1 if num_classes is None else num_classes
    if classes > _BLOCK_CELLS:
        raise InputError(
            f"{where}: labels imply {classes} classes; expected small class labels "
            "(or pass --num-classes)"
        )
    return classes


def _npy_header(path: StrPath) -> _Header | None:
    """The header of a plain .npy file (None for .npz); the file was checked already."""
    where = os.fspath(path)
    with _open_regular(path, where, "votes") as f:
        if f.read(len(_NPY_MAGIC)) != _NPY_MAGIC:
            return None
        f.seek(0)
        return _read_header(f, where, "votes")


def _scan_counts(source: ChunkedCounts) -> tuple[NDArray[np.float64], int | None]:
    """One pass over a streamed counts file: row sums, and the first row with a value
    that is not a finite non-negative count (None if there is none)."""
    sums = np.empty(len(source))
    first_bad = None
    for start, block in source.blocks():
        # min/max propagate NaN, so two reductions (no temporaries) check the whole block.
        if first_bad is None and block.size and not (block.min() >= 0 and block.max() < np.inf):
            first_bad = start + _first(~np.isfinite(block) | (block < 0))[0]
        sums[start : start + len(block)] = _row_sums(block)
    return sums, first_bad


def _stream_counts(
    source: ChunkedCounts,
    where: str,
    teachers: int | None,
    notes: list[str],
    scan: tuple[NDArray[np.float64], int | None] | None = None,
) -> int:
    """Validate a streamed counts file; returns M (see ``_to_counts``).

    ``scan``: ``_scan_counts`` of the whole file when auto-detection made it already
    (the file may be longer than ``source``, a prefix).
    """
    sums, first_bad = _scan_counts(source) if scan is None else scan
    sums = sums[: len(source)]
    if first_bad is not None and first_bad < len(source):
        row = source[first_bad : first_bad + 1][0]
        c = _first(~np.isfinite(row) | (row < 0))[0]
        raise InputError(
            f"{where}: votes row {first_bad}, column {c} is {_show(row[c])}; "
            "expected finite non-negative vote counts"
        )
    return _teachers_from_sums(sums, where, teachers, notes, lambda q: q)


def load_votes(
    path: StrPath,
    *,
    fmt: VoteFormat | str = VoteFormat.AUTO,
    num_classes: int | None = None,
    teachers: int | None = None,
    queries: int | None = None,
    indices: StrPath | None = None,
) -> Votes:
    """Read, validate and select a votes file, returning ``(Q, C)`` counts.

    Args:
        path: The votes file (.npy, or .npz holding one array).
        fmt: ``--format``; ``auto`` detects it (see the module docstring).
        num_classes: ``--num-classes``: C for labels; must match the file otherwise.
        teachers: ``--teachers``: overrides M; rows may then disagree on their sum (a warning).
        queries: ``--queries``: keep the first N queries (after ``indices``).
        indices: ``--indices``: an .npy of file query indices to keep, in its order.

    Returns:
        The validated :class:`Votes`.

    Raises:
        InputError: Any problem with the votes or indices file.
        UsageError: A flag value outside its domain (``--queries 0``, ``--format x``).
    """
    where = os.fspath(path)
    try:
        fmt = VoteFormat(fmt)
    except ValueError:
        raise UsageError(f"--format {fmt}: expected auto, counts, labels or probs") from None
    _check_flags(num_classes, teachers, queries)
    raw = _load(path, "votes", mmap=True)
    digest = _hashing_thread().submit(file_sha256, path)
    if raw.dtype.kind == "b":
        raise InputError(
            f"{where}: votes array has dtype bool; expected numeric counts, integer "
            "labels or float scores"
        )
    # A large 2-D .npy is read block by block: never whole, never memory-mapped. Which
    # axis is the queries' depends on the format: rows of counts, columns of labels.
    streamable = raw.ndim == 2 and indices is None and max(raw.shape) >= STREAM_MIN_ROWS
    header = _npy_header(path) if streamable else None
    if header is not None and header.fortran_order:
        header = None
    source = None
    if header is not None and raw.shape[0] >= STREAM_MIN_ROWS and fmt in _MAYBE_COUNTS:
        source = ChunkedCounts(path, header, raw.shape[0])
    wide = None
    if header is not None and raw.shape[1] >= STREAM_MIN_ROWS and fmt in _MAYBE_LABELS:
        wide = ChunkedLabels(path, header, raw.shape[1], 0)
    detected = fmt is VoteFormat.AUTO
    scan = None
    label_scan = None
    if raw.size and wide is not None:
        label_scan = _scan_labels(wide)  # reused below: the file is read once to validate
    if detected:
        if source is not None and raw.size:
            scan = _scan_counts(source)
        fmt = _detect_format(
            raw,
            where,
            teachers,
            None if scan is None else scan[0],
            label_scan=label_scan,
        )
    _check_shape(raw, where, fmt, num_classes)
    axis = 0 if fmt is VoteFormat.COUNTS else 1
    num_file_queries = int(raw.shape[axis])
    selection = _selection(where, num_file_queries, queries, indices)
    num_selected = num_file_queries if selection is None else len(selection)
    notes: list[str] = []
    counts: NDArray[np.float64] | ChunkedCounts
    try:
        # Only a prefix (--queries) can be selected when streaming: indices disable it.
        if source is not None and header is not None and fmt is VoteFormat.COUNTS:
            counts = ChunkedCounts(path, header, num_selected)
            num_teachers = _stream_counts(counts, where, teachers, notes, scan)
        elif label_scan is not None and wide is not None and fmt is VoteFormat.LABELS:
            assert header is not None
            classes = _stream_labels(wide, where, label_scan, num_classes, num_selected)
            counts = ChunkedLabels(path, header, num_selected, classes)
            num_teachers = _teachers_of_labels(int(raw.shape[0]), teachers, where, notes)
        else:
            # Select before converting: a memory-mapped file then reads only the queries kept.
            data = np.asarray(raw if selection is None else np.take(raw, selection, axis=axis))

            def file_query(q: int) -> int:
                return q if selection is None else int(selection[q])

            counts, num_teachers = _to_counts(
                raw, data, fmt, where, num_classes, teachers, file_query, notes
            )
            counts.flags.writeable = False
    except InputError as exc:
        if not detected:
            raise
        # Auto-detection can guess wrong on odd files: say what it guessed and how to override.
        raise InputError(
            f"{exc.message} (detected --format {fmt.value}; pass --format to override)"
        ) from None
    return Votes(
        counts=counts,  # type: ignore[arg-type]
        path=where,
        digest=digest,
        format=fmt,
        detected=detected,
        num_teachers=num_teachers,
        num_classes=int(counts.shape[1]),
        num_file_queries=num_file_queries,
        selection=selection,
        warnings=tuple(notes),
    )


def _load_per_query(path: StrPath, votes: Votes, what: str, expected: str) -> NDArray[np.float64]:
    """A (queries, classes) array that goes with the votes, selected like them.

    Accepts the file's shape (the selection is applied) or the selected shape.
    """
    where = os.fspath(path)
    a = load_array(path, what)
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
        q, c = _first(bad)
        row = int(votes.selection[q]) if is_file_rows and votes.selection is not None else q
        raise InputError(
            f"{where}: {what} row {row}, column {c} is {_show(values[q, c])}; expected {expected}"
        )
    return values


def load_baseline(path: StrPath, votes: Votes) -> NDArray[np.float64]:
    """Read an Interactive-GNMax baseline on the votes' scale, selected like the votes.

    A baseline whose rows each sum to 1 (within 1e-6) is probabilities and is
    scaled by M; otherwise it is taken as counts on the votes' scale.

    Args:
        path: The baseline file.
        votes: The votes it goes with (for C, M and the selection).

    Returns:
        The baseline. Shapes: (Q, C).

    Raises:
        InputError: Wrong shape, a non-finite or negative entry, or an unreadable file.
    """
    baseline = _load_per_query(
        path, votes, "baseline", "finite non-negative probabilities or counts"
    )
    if np.all(np.abs(_row_sums(baseline) - 1.0) <= 1e-6):
        baseline *= votes.num_teachers
    return baseline


def load_student_probs(path: StrPath, votes: Votes) -> NDArray[np.float64]:
    """Read the student's class probabilities (rows summing to 1 within 1e-6).

    Returns:
        The probabilities. Shapes: (Q, C).

    Raises:
        InputError: Wrong shape, a negative or non-finite entry, a row not summing to 1.
    """
    probs = _load_per_query(path, votes, "student probabilities", "finite probabilities")
    off = np.abs(_row_sums(probs) - 1.0) > 1e-6
    if off.any():
        (q,) = _first(off)
        raise InputError(
            f"{os.fspath(path)}: student probabilities of query {q} sum to "
            f"{_show(_row_sums(probs)[q])}; expected every row to sum to 1"
        )
    return probs


def load_true_labels(path: StrPath, votes: Votes) -> NDArray[np.int64]:
    """Read true class labels, one per query of the file or of the selection.

    Returns:
        The labels. Shapes: (Q,).

    Raises:
        InputError: Wrong shape, non-integer values, labels outside [0, C).
    """
    where = os.fspath(path)
    a = load_array(path, "true labels")
    lengths = (votes.num_file_queries, votes.num_queries)
    if a.ndim != 1 or a.shape[0] not in lengths or a.dtype.kind not in "iuf":
        raise InputError(
            f"{where}: true labels have shape {a.shape} and dtype {a.dtype!s}; expected "
            f"integer labels of shape ({votes.num_file_queries},) or ({votes.num_queries},)"
        )
    if a.shape[0] == votes.num_file_queries and votes.selection is not None:
        a = a[votes.selection]
    bad = ~_is_whole(a) | (a < 0) | (a >= votes.num_classes)
    if bad.any():
        (q,) = _first(bad)
        raise InputError(
            f"{where}: true label of query {q} is {_show(a[q])}; expected an integer "
            f"in [0, {votes.num_classes})"
        )
    return a.astype(np.int64)


def load_answered_mask(path: StrPath, num_queries: int) -> NDArray[np.bool_]:
    """Read the answered mask written by ``aggregate``: bool, or integers 0/1.

    A mask shorter than the queries comes from a run that stopped early
    (``--max-answered``/``--max-queries``): it covers the queries seen, a prefix.

    Returns:
        The mask. Shapes: (L,) with 1 <= L <= Q.

    Raises:
        InputError: Wrong shape, a dtype other than bool/integer, a value other than 0/1.
    """
    where = os.fspath(path)
    a = load_array(path, "answered mask")
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
        (i,) = _first(bad)
        raise InputError(
            f"{where}: answered mask entry {i} is {_show(a[i])}; expected bool or "
            "integer 0/1 values"
        )
    return a.astype(np.bool_)

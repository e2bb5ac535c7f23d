"""Reading numeric arrays from .npy and .npz files, safely, and hashing input files.

Every array pate reads goes through :func:`load_array` (or :func:`read_array`, which can
memory-map), and nothing here ever unpickles: ``allow_pickle=False`` on every numpy call.
The reader checks that the path is a regular file *before* opening it (a FIFO would
block), tells ``.npy`` from ``.npz`` by the magic bytes rather than the extension, parses
the ``.npy`` header itself, rejects non-numeric dtypes (objects, strings, structured,
complex, datetimes), and compares the size the header declares with the bytes actually
present, so a forged header cannot make it allocate gigabytes. Only then is the data read
(``np.load(..., allow_pickle=False)``, memory-mapped for votes so that a query selection
reads only the rows it needs). An ``.npz`` must hold exactly one array; its member is
parsed the same way and copied out of the archive. A member is inflated only after its
header and the zip directory agree: the member's uncompressed size (``ZipInfo.file_size``)
must be exactly the header plus the bytes the header declares (less is truncated, more is
trailing data: an inconsistent archive), and those bytes must not exceed
:data:`MAX_ARRAY_BYTES`, so a small archive cannot make the reader inflate gigabytes of
zeros. No more than the declared bytes are ever inflated.

It knows nothing about votes: ``what`` ("votes", "baseline", "indices", ...) only names
the array in messages. Every problem is an :class:`~pate_cli.errors.InputError` whose
one-line message starts with the path as the user gave it.

Digests of inputs are computed here too, from the files' bytes; for votes the hashing runs
on a thread while the votes are analysed (:func:`hash_in_background`).
"""

from __future__ import annotations

import ast
import functools
import hashlib
import math
import os
import stat
import warnings as _warnings
import zipfile
import zlib
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from typing import IO

import numpy as np

from pate_cli.errors import InputError

StrPath = str | os.PathLike[str]  # the CLI passes the text the user typed

_NPY_MAGIC = b"\x93NUMPY"
_ZIP_MAGICS = (b"PK\x03\x04", b"PK\x05\x06")  # a local file header, or an empty archive
_MAX_DIMENSION = np.iinfo(np.intp).max  # numpy's limit on one dimension of an array
_MAX_HEADER_BYTES = 10_000  # numpy's own default limit for a header before literal_eval
_NUMERIC_KINDS = "biuf"

#: The most bytes of data an .npz member may declare: it is inflated into memory whole (an
#: .npy is memory-mapped or streamed instead). Read when an archive is read, so setting it
#: here (as the tests do) takes effect.
MAX_ARRAY_BYTES = 4 << 30


@dataclass(frozen=True)
class NpyHeader:
    """What a checked .npy header declares, and where its data starts."""

    shape: tuple[int, ...]
    dtype: np.dtype
    fortran_order: bool
    offset: int  # bytes before the data

    @property
    def nbytes(self) -> int:
        """Bytes of data the header declares."""
        return math.prod(self.shape) * self.dtype.itemsize


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


def _read_header(f: IO[bytes], where: str, what: str) -> NpyHeader:
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
    return NpyHeader(shape, dtype, fortran_order, 8 + size_bytes + length)


def _truncated(where: str, what: str, header: NpyHeader, available: int) -> InputError:
    return InputError(
        f"{where}: {what} file is truncated: the header declares shape {header.shape} of "
        f"{header.dtype!s} ({header.nbytes} bytes) but only {max(available, 0)} bytes follow"
    )


def _check_member_size(where: str, what: str, header: NpyHeader, stored: int) -> None:
    """Refuse an .npz member that declares too much, or that the zip directory contradicts.

    ``stored``: the bytes after the header according to the zip directory.
    """
    if header.nbytes > MAX_ARRAY_BYTES:
        raise InputError(
            f"{where}: the header declares shape {header.shape} of {header.dtype!s} "
            f"({header.nbytes} bytes), more than the {MAX_ARRAY_BYTES} bytes an .npz array may "
            f"hold in memory; expected a smaller {what} array, or save it with numpy.save"
        )
    if stored < header.nbytes:
        raise _truncated(where, what, header, stored)
    if stored > header.nbytes:
        raise InputError(
            f"{where}: corrupt .npz archive: the header declares shape {header.shape} of "
            f"{header.dtype!s} ({header.nbytes} bytes) but the archive stores {stored} bytes "
            f"after it; expected the {what} saved with numpy.savez"
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
                # Checked before any data is inflated: the header alone says how much.
                _check_member_size(inner, what, header, info.file_size - header.offset)
                data = member.read(header.nbytes)
    except InputError:  # a ValueError, but already the one-line message
        raise
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


def read_array(path: StrPath, what: str, *, mmap: bool) -> np.ndarray:
    """:func:`load_array`, but ``mmap=True`` memory-maps a .npy (read-only) instead of reading it.

    An .npz member is always read into memory (it may be compressed).
    """
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
    return np.asarray(read_array(path, what, mmap=False))


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


def hash_in_background(path: StrPath) -> Future[str]:
    """Start :func:`file_sha256` of ``path`` on a thread (hashlib releases the GIL)."""
    return _hashing_thread().submit(file_sha256, path)


def read_npy_header(path: StrPath, what: str) -> NpyHeader | None:
    """The header of a plain .npy file (None for .npz); the file was checked already."""
    where = os.fspath(path)
    with _open_regular(path, where, what) as f:
        if f.read(len(_NPY_MAGIC)) != _NPY_MAGIC:
            return None
        f.seek(0)
        return _read_header(f, where, what)

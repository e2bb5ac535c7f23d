"""Reading numeric arrays from .npy and .npz files, safely, and hashing input files.

Every array pate reads goes through :func:`open_array` (or :func:`load_array` and
:func:`read_array`, built on it), and nothing here ever unpickles: ``allow_pickle=False``
on every numpy call. The reader checks that the path is a regular file *before* opening it
(a FIFO would block), tells ``.npy`` from ``.npz`` by the magic bytes rather than the
extension, parses the ``.npy`` header itself, rejects non-numeric dtypes (objects, strings,
structured, complex, datetimes), and compares the size the header declares with the bytes
actually present, so a forged header cannot make it allocate gigabytes. Only then is the
data read (``np.load(..., allow_pickle=False)``, memory-mapped for votes so that a query
selection reads only the rows it needs).

An ``.npz`` must hold exactly one array, or the caller names the one to read (``member``,
``--member NAME``); its member is parsed the same way, and checked
against the zip directory before anything is inflated: the member's uncompressed size
(``ZipInfo.file_size``) must be exactly the header plus the bytes the header declares (less
is truncated, more is trailing data: an inconsistent archive), those bytes must not exceed
:data:`MAX_ARRAY_BYTES`, and a member of at least a MiB must not inflate more than
:data:`MAX_INFLATION_RATIO` times its compressed size: deflate cannot pass about 1032:1,
and only data that is nearly all one value comes near it, which no vote file is, while a
4 GB array of zeros fits in a 4 MB archive. No more than the declared bytes are ever
inflated, and they are inflated a block at a time (zipfile's streaming decompressor, which
checks the member's CRC-32 as the last block comes): into the array itself when it is read
whole (one copy of the data at most in memory), or block by block of rows
(:meth:`ArrayFile.row_blocks`) for the readers of large votes (``pate_cli.votes.stream``).

It knows nothing about votes: ``what`` ("votes", "baseline", "indices", ...) only names
the array in messages. Every problem is an :class:`~pate_cli.errors.InputError` whose
one-line message starts with the path as the user gave it.

Digests of inputs are computed here too, from the files' bytes; for votes the hashing runs
on a thread while the votes are analysed (:func:`hash_in_background`).
"""

from __future__ import annotations

import ast
import hashlib
import math
import os
import stat
import threading
import warnings as _warnings
import zipfile
import zlib
from collections.abc import Iterator
from concurrent.futures import Future
from contextlib import contextmanager
from dataclasses import dataclass
from typing import IO, Literal

import numpy as np

from pate_cli.common.spelling import given, option
from pate_cli.errors import InputError
from pate_cli.votes.folder import folder_sha256, is_folder

StrPath = str | os.PathLike[str]  # the CLI passes the text the user typed

_NPY_MAGIC = b"\x93NUMPY"
_ZIP_MAGICS = (b"PK\x03\x04", b"PK\x05\x06")  # a local file header, or an empty archive
_MAX_DIMENSION = np.iinfo(np.intp).max  # numpy's limit on one dimension of an array
_MAX_HEADER_BYTES = 10_000  # numpy's own default limit for a header before literal_eval
_NUMERIC_KINDS = "biuf"

#: The most bytes of data an .npz member may declare (and so inflate to). Read when an
#: archive is read, so setting it here (as the tests do) takes effect; so is the next one.
MAX_ARRAY_BYTES = 4 << 30
#: The most times an .npz member of at least a MiB may inflate its compressed size.
MAX_INFLATION_RATIO = 1000
_RATIO_MIN_BYTES = 1 << 20  # a smaller member costs nothing to inflate, whatever its ratio
_INFLATE_BYTES = 1 << 18  # bytes inflated at a time when a member is read whole


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
    except InputError:
        raise
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
    check_dtype(dtype, where, what)
    return NpyHeader(shape, dtype, fortran_order, 8 + size_bytes + length)


def check_dtype(dtype: np.dtype, where: str, what: str) -> None:
    """Refuse a dtype that is not bool, integer or float (objects, strings, structured,
    complex, datetimes): the one check of a file's header and of an array in memory."""
    if dtype.kind not in _NUMERIC_KINDS or dtype.names is not None or dtype.subdtype is not None:
        raise InputError(
            f"{where}: {what} array has unsupported dtype {dtype!s}; expected a numeric "
            "(bool, integer or float) array, never Python objects (pickles are not loaded)"
        )


def _truncated(where: str, what: str, header: NpyHeader, available: int) -> InputError:
    return InputError(
        f"{where}: {what} file is truncated: the header declares shape {header.shape} of "
        f"{header.dtype!s} ({header.nbytes} bytes) but only {max(available, 0)} bytes follow"
    )


def _check_member_size(where: str, what: str, header: NpyHeader, info: zipfile.ZipInfo) -> None:
    """Refuse an .npz member that declares too much, that the zip directory contradicts, or
    that inflates as no array of numbers does (see the module docstring)."""
    if header.nbytes > MAX_ARRAY_BYTES:
        raise InputError(
            f"{where}: the header declares shape {header.shape} of {header.dtype!s} "
            f"({header.nbytes} bytes), more than the {MAX_ARRAY_BYTES} bytes an .npz array may "
            f"inflate to; expected a smaller {what} array, or save it with numpy.save"
        )
    stored = info.file_size - header.offset  # the bytes after the header, says the directory
    if stored < header.nbytes:
        raise _truncated(where, what, header, stored)
    if stored > header.nbytes:
        raise InputError(
            f"{where}: corrupt .npz archive: the header declares shape {header.shape} of "
            f"{header.dtype!s} ({header.nbytes} bytes) but the archive stores {stored} bytes "
            f"after it; expected the {what} saved with numpy.savez"
        )
    compressed = max(info.compress_size, 1)
    if info.file_size >= _RATIO_MIN_BYTES and info.file_size > MAX_INFLATION_RATIO * compressed:
        raise InputError(
            f"{where}: the archive inflates {info.compress_size} bytes to {info.file_size} "
            f"(ratio {info.file_size / compressed:.0f}:1), more than the "
            f"{MAX_INFLATION_RATIO}:1 of any {what} array (nearly all of it is one value); "
            f"expected the {what} saved with numpy.save or numpy.savez"
        )


@contextmanager
def npz_errors(where: str, what: str) -> Iterator[None]:
    """Turn what zipfile and zlib raise on a damaged archive into the one-line InputError."""
    try:
        yield
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


def _chosen_member(
    members: list[zipfile.ZipInfo], where: str, what: str, name: str | None
) -> tuple[zipfile.ZipInfo, str]:
    """The member of an .npz that holds the array, and its key: the one named ``name``
    (``numpy.savez``'s keyword, as ``numpy.load(...)[name]`` takes it), or the only one."""
    keys = [info.filename.removesuffix(".npy") for info in members]
    if name is not None:
        if name not in keys:
            raise InputError(
                f"{where}: the .npz holds no array {name!r}; its arrays are "
                f"{', '.join(map(repr, keys)) or 'none'}"
            )
        return members[keys.index(name)], name
    if not keys:
        raise InputError(f"{where}: the .npz holds 0 arrays; expected one {what} array")
    if len(keys) > 1:
        raise InputError(
            f"{where}: the .npz holds {len(keys)} arrays ({', '.join(map(repr, keys))}); "
            f"name the {what} array with {option('member')}"
        )
    return members[0], keys[0]


@contextmanager
def _open_member(
    path: StrPath, where: str, what: str, name: str | None = None
) -> Iterator[tuple[zipfile.ZipInfo, str, NpyHeader, IO[bytes]]]:
    """The member of an .npz that holds the array (``_chosen_member``), checked: (its zip
    entry, its name for messages, its header, the member opened just past the header).
    Raises InputError."""
    with npz_errors(where, what), zipfile.ZipFile(path) as archive:
        members = [info for info in archive.infolist() if not info.is_dir()]
        info, key = _chosen_member(members, where, what, name)
        inner = f"{where}: array {key!r}"
        with archive.open(info) as member:
            header = _read_header(member, inner, what)
            # Checked before any data is inflated: the header alone says how much.
            _check_member_size(inner, what, header, info)
            yield info, inner, header, member


@dataclass(frozen=True)
class ArrayFile:
    """A checked .npy file, or the checked array of a single-array .npz: its header, and
    ways to read its data that never hold more than the array (see the module docstring).

    Attributes:
        path: The file.
        where: The path as the user gave it.
        what: What the array is, for messages.
        header: Its checked header.
        npz: True for the member of an .npz, False for a plain .npy.
        member: The .npz member's key, when one was named.
    """

    path: StrPath
    where: str
    what: str
    header: NpyHeader
    npz: bool
    member: str | None = None

    @property
    def shape(self) -> tuple[int, ...]:
        return self.header.shape

    @property
    def dtype(self) -> np.dtype:
        return self.header.dtype

    def array(self, *, mmap: bool) -> np.ndarray:
        """The whole array: a .npy memory-mapped (read-only) when ``mmap``, else read; an
        .npz member inflated a block at a time into the array (never mapped)."""
        header = self.header
        if not self.npz:
            # Header, dtype and size are checked, so numpy neither unpickles nor over-allocates.
            try:
                with _open_regular(self.path, self.where, self.what) as f:
                    array: np.ndarray = np.load(
                        self.path if mmap else f,
                        mmap_mode="r" if mmap else None,
                        allow_pickle=False,
                    )
                return array
            except InputError:
                raise
            except (ValueError, OSError, EOFError) as exc:
                raise InputError(
                    f"{self.where}: unreadable .npy ({exc}); expected the {self.what} saved "
                    "with numpy.save"
                ) from None
        out = np.empty(header.nbytes, dtype=np.uint8)
        filled = 0
        with _open_member(self.path, self.where, self.what, self.member) as (_, inner, _, member):
            with npz_errors(self.where, self.what):
                while filled < header.nbytes:
                    chunk = member.read(min(_INFLATE_BYTES, header.nbytes - filled))
                    if not chunk:
                        break
                    out[filled : filled + len(chunk)] = np.frombuffer(chunk, dtype=np.uint8)
                    filled += len(chunk)
        if filled != header.nbytes:
            raise _truncated(inner, self.what, header, filled)
        try:
            if header.nbytes == 0:
                return np.empty(header.shape, dtype=header.dtype)
            order: Literal["C", "F"] = "F" if header.fortran_order else "C"
            return out.view(header.dtype).reshape(header.shape, order=order)
        except ValueError as exc:  # e.g. more dimensions than numpy supports (65 in numpy 2)
            raise InputError(
                f"{self.where}: unreadable .npz array ({exc}); expected the {self.what} saved "
                "with numpy.savez"
            ) from None

    def row_blocks(self, rows: int) -> Iterator[tuple[int, np.ndarray]]:
        """(first row, rows) of a 2-D C-order .npz member, in order, ``rows`` at a time: one
        pass of the streaming decompressor, a block of rows in memory (file dtype, read-only).

        Raises:
            InputError: A damaged archive (a bad CRC-32 shows with the last block).
        """
        header = self.header
        num_rows, width = header.shape
        row_bytes = width * header.dtype.itemsize
        with _open_member(self.path, self.where, self.what, self.member) as (_, inner, _, member):
            for start in range(0, num_rows, rows):
                count = min(rows, num_rows - start)
                with npz_errors(self.where, self.what):
                    data = member.read(count * row_bytes)
                if len(data) != count * row_bytes:
                    raise _truncated(inner, self.what, header, start * row_bytes + len(data))
                yield start, np.frombuffer(data, dtype=header.dtype).reshape(count, width)


def open_array(path: StrPath, what: str, member: str | None = None) -> ArrayFile:
    """Check a .npy or single-array .npz file without reading its data.

    Args:
        path: The file, as the user gave it (it starts every message).
        what: What the array is ("votes", "baseline", "indices", ...), for messages.
        member: The array of an .npz to read, by its key (an .npz of several arrays needs
            it; a .npy refuses it).

    Returns:
        The checked :class:`ArrayFile`; its dtype is bool, integer or float.

    Raises:
        InputError: Missing, unreadable, non-regular, truncated or corrupt file; not
            .npy/.npz; an .npz without exactly one array (or without ``member``), or whose
            array the archive
            contradicts or inflates too much; a non-numeric dtype.
    """
    where = os.fspath(path)
    with _open_regular(path, where, what) as f:
        magic = f.read(len(_NPY_MAGIC))
        if magic.startswith(_ZIP_MAGICS):
            with _open_member(path, where, what, member) as (_, _, header, _):
                return ArrayFile(path, where, what, header, npz=True, member=member)
        if magic == _NPY_MAGIC and member is not None:
            raise InputError(
                f"{where}: a .npy holds one array; {given('member', member, quote=True)} "
                "names an array of an .npz"
            )
        if magic != _NPY_MAGIC:
            reason = "the file is empty" if not magic else "not a .npy or .npz file"
            raise InputError(
                f"{where}: {reason}; expected the {what} saved with numpy.save (or a "
                "single-array numpy.savez)"
            )
        f.seek(0)
        header = _read_header(f, where, what)
        available = os.fstat(f.fileno()).st_size - header.offset
        if available < header.nbytes:
            raise _truncated(where, what, header, available)
    return ArrayFile(path, where, what, header, npz=False)


def read_array(path: StrPath, what: str, *, mmap: bool) -> np.ndarray:
    """:func:`load_array`, but ``mmap=True`` memory-maps a .npy (read-only) instead of reading it.

    An .npz member is always read into memory (it may be compressed).
    """
    return open_array(path, what).array(mmap=mmap)


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


def file_sha256(path: StrPath, salt: bytes = b"") -> str:
    """Hex SHA-256 of a file's bytes, read in chunks; with a ``salt``, of the salt followed by
    the bytes (a hiding commitment to the file: nobody can test a guess of its content
    without the salt). Of a folder of shards, :func:`~pate_cli.votes.folder.folder_sha256`.

    Raises:
        InputError: The file is missing, not a regular file or unreadable.
    """
    if is_folder(path):  # a folder of shards: the digest of its shards' (folder.py)
        return folder_sha256(path, salt, file_sha256)
    where, digest = os.fspath(path), hashlib.sha256(salt)
    with _open_regular(path, where, "input") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            digest.update(chunk)
    return digest.hexdigest()


def hash_in_background(path: StrPath) -> Future[str]:
    """Start :func:`file_sha256` of ``path`` on a thread (hashlib releases the GIL).

    A daemon thread of its own: an interrupted run (a signal as it starts) never waits at
    exit for a hash nobody will read, as it could for an executor's worker."""
    future: Future[str] = Future()

    def work() -> None:
        if not future.set_running_or_notify_cancel():
            return
        try:
            future.set_result(file_sha256(path))
        except BaseException as error:  # handed to whoever reads the result
            future.set_exception(error)

    threading.Thread(target=work, name="pate-sha256", daemon=True).start()
    return future

"""Votes and side inputs given as arrays in memory instead of files.

A notebook that has just computed teacher votes passes them as a numpy array (or anything
``np.asarray`` turns into a numeric array: nested lists too). Every loader of
``pate_cli.votes`` that takes a path takes such an array as well, and reads it through the
same code as a file: the same format detection, validation, selection and one-line
messages. Only the reading differs: :func:`memory_array` stands in for
:func:`~pate_cli.votes.reader.open_array` and refuses what the reader refuses (object,
string, structured, complex and datetime dtypes, by the same check: nothing is unpickled or
converted from Python objects). Messages name the array where a file's path would stand:
``<array>`` for the votes, ``<baseline array>`` and the like for a side input.

The digest of an array in memory (:func:`array_sha256`) is the SHA-256 of the ASCII text
``f"{dtype.str} {shape}\\n"`` (e.g. ``"<f8 (3, 10)\\n"``) followed by the array's bytes in C
order: two arrays have the same digest when they have the same dtype, shape and values. It
is not the digest of the same array saved to a file (that one hashes the file's bytes).
"""

from __future__ import annotations

import hashlib
import os
from concurrent.futures import Future
from dataclasses import dataclass
from typing import TypeGuard

import numpy as np

from pate_cli.errors import InputError, UsageError
from pate_cli.votes.reader import StrPath, check_dtype, load_array

#: What stands for the votes' path when they are an array in memory.
VOTES_IN_MEMORY = "<array>"


def is_path(value: object) -> TypeGuard[StrPath]:
    """Whether an input is a path (read as a file) rather than an array."""
    return isinstance(value, (str, os.PathLike))


def file_path(value: object, what: str) -> str:
    """The path of an input that must be a file (a record and its check hash files).

    Raises:
        UsageError: An array (or anything but a path) was given.
    """
    if is_path(value):
        return os.fspath(value)
    raise UsageError(
        f"{what}: expected the path of a file, not {type(value).__name__}; records and "
        "their checks need files (save the array with numpy.save)"
    )


def where_of(value: object, what: str) -> str:
    """How messages name an input: its path as the user gave it, or ``<what array>``."""
    if is_path(value):
        return os.fspath(value)
    return VOTES_IN_MEMORY if what == "votes" else f"<{what} array>"


@dataclass(frozen=True)
class MemoryArray:
    """A checked numeric array in memory, read as an
    :class:`~pate_cli.votes.reader.ArrayFile` is read.

    Attributes:
        where: How messages name it (``<array>`` for the votes).
        what: What the array is, for messages.
        data: The array itself (not copied).
    """

    where: str
    what: str
    data: np.ndarray

    @property
    def shape(self) -> tuple[int, ...]:
        return tuple(int(n) for n in self.data.shape)

    @property
    def dtype(self) -> np.dtype:
        return self.data.dtype

    def array(self, *, mmap: bool) -> np.ndarray:
        """The array (``mmap`` is for files, and changes nothing here)."""
        return self.data


def memory_array(value: object, what: str) -> MemoryArray:
    """Check an input given as an array (or nested lists) rather than a path.

    Raises:
        InputError: Not a rectangular array of numbers (ragged lists), or a dtype the file
            reader refuses too (objects, strings, complex, ...).
    """
    where = where_of(value, what)
    try:
        array = np.asarray(value)
    except (ValueError, TypeError, OverflowError):
        raise InputError(
            f"{where}: not a rectangular array of numbers; expected the {what} as a numpy "
            "array (or nested lists of numbers of equal lengths)"
        ) from None
    check_dtype(array.dtype, where, what)
    return MemoryArray(where, what, array)


def read_input(value: StrPath | object, what: str) -> tuple[np.ndarray, str]:
    """A side input, from its file or as an array: (the array, how messages name it)."""
    if is_path(value):
        return load_array(value, what), os.fspath(value)
    checked = memory_array(value, what)
    return checked.data, checked.where


def array_sha256(array: np.ndarray) -> str:
    """Hex SHA-256 of an array's dtype, shape and bytes (see the module docstring)."""
    digest = hashlib.sha256(f"{array.dtype.str} {tuple(array.shape)}\n".encode("ascii"))
    digest.update(np.ascontiguousarray(array).reshape(-1).view(np.uint8).data)
    return digest.hexdigest()


def sha256_now(array: np.ndarray) -> Future[str]:
    """:func:`array_sha256`, computed now (the array may change after the call) and held
    as a finished future, as a file's digest computed on a thread is."""
    done: Future[str] = Future()
    done.set_result(array_sha256(array))
    return done

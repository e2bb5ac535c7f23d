"""A folder of vote shards: which files it holds, in which order, and its digest.

VOTES may be a folder of shards: ``.npy`` and ``.npz`` files (``scipy.sparse.save_npz``
archives too) whose queries, concatenated in file-name order, are the votes
(``pate_cli.votes.shards`` reads them). The rules of the folder itself live here, once:

- the shards are the folder's files, sorted by name (Python's string order: by Unicode code
  point, so ``s10.npy`` comes before ``s2.npy``; pad numbers to sort them);
- every entry must be a shard: a file of another name, a sub-folder, or anything that is
  not a regular file is refused by name, so that nothing in the folder is silently
  skipped; an empty folder is refused;
- the folder's digest (:func:`folder_sha256`) is SHA-256 of one line per shard, in order:
  its name (JSON-quoted), its size in bytes and the SHA-256 of its bytes. It changes when a
  shard's bytes, name or place in the order change, or a shard is added or removed.
"""

from __future__ import annotations

import hashlib
import json
import os
import stat
from collections.abc import Callable
from typing import TypeGuard

from pate_cli.errors import InputError

#: The names a shard may have.
SHARD_SUFFIXES = (".npy", ".npz")


def is_folder(path: object) -> TypeGuard[str | os.PathLike[str]]:
    """Whether ``path`` is a path naming a folder (read as shards)."""
    return isinstance(path, (str, os.PathLike)) and os.path.isdir(path)


def shard_paths(path: str | os.PathLike[str]) -> list[str]:
    """The shards of a folder, in the order their queries are read (sorted by name).

    Raises:
        InputError: The folder is empty or unreadable, or holds anything but shards.
    """
    where = os.fspath(path)
    try:
        names = sorted(os.listdir(where))
    except OSError as exc:
        raise InputError(f"{where}: cannot list the folder ({exc.strerror})") from None
    if not names:
        raise InputError(f"{where}: an empty folder; expected .npy or .npz shards of votes")
    paths = []
    for name in names:
        full = os.path.join(where, name)
        try:
            mode = os.stat(full).st_mode
        except OSError as exc:
            raise InputError(f"{where}: {name}: cannot read it ({exc.strerror})") from None
        if stat.S_ISDIR(mode):
            raise InputError(
                f"{where}: {name} is a sub-folder; a folder of votes holds only .npy or .npz shards"
            )
        if not name.endswith(SHARD_SUFFIXES) or not stat.S_ISREG(mode):
            raise InputError(
                f"{where}: {name} is not a .npy or .npz file; a folder of votes holds only "
                "its shards (move anything else out)"
            )
        paths.append(full)
    return paths


def folder_sha256(
    path: str | os.PathLike[str], salt: bytes, file_sha256: Callable[[str], str]
) -> str:
    """Hex SHA-256 of a folder of shards, after ``salt``: of one line per shard, in order,
    ``"name" size sha256`` (``file_sha256`` hashes a shard's bytes).

    Raises:
        InputError: What :func:`shard_paths` refuses, or an unreadable shard.
    """
    digest = hashlib.sha256(salt)
    for shard in shard_paths(path):
        size = os.path.getsize(shard)
        name = json.dumps(os.path.basename(shard))
        digest.update(f"{name} {size} {file_sha256(shard)}\n".encode())
    return digest.hexdigest()


def shard_differs(
    where: str, shard: str, first: str, how: str, value: object, first_value: object
) -> InputError:
    """The error of a shard that reads otherwise than the folder's first: every shard of a
    folder must read the same way (one format, layout, dtype and size on every axis but the
    queries')."""
    return InputError(
        f"{where}: shard {os.path.basename(shard)} {how} {value}, shard "
        f"{os.path.basename(first)} {first_value}; every shard of a folder must read the same way"
    )

"""Output files: checked before any work is done, written atomically.

Every file pate writes (ledgers, plots, records, tables, aggregated labels) goes through
this module, so that two promises hold everywhere:

- A bad output path fails *before* the analysis runs: :func:`check_output_path` rejects a
  wrong suffix, a missing folder or a folder given as the file, so a long run never ends
  in "cannot write".
- A file is either complete or untouched: :func:`write_atomic` fills a temporary file in
  the same directory and renames it over the target (``os.replace`` is atomic within a
  file system); a failed or interrupted write leaves the previous file as it was and no
  temporary file behind.
- A release artefact (aggregate's labels and answered mask, every ``--record``) is never
  replaced without ``--force``: :func:`check_not_replaced` refuses an existing one before
  any work, since a second run of the same release is a second use of the private votes.

Problems are :class:`~pate_cli.errors.InputError` (the path cannot receive the file) or
:class:`~pate_cli.errors.UsageError` (the name does not say a known format), each one line
that starts with the path.
"""

from __future__ import annotations

import contextlib
import os
import tempfile
from collections.abc import Callable
from typing import IO

import numpy as np

from pate_cli.errors import InputError, UsageError, WriteError

StrPath = str | os.PathLike[str]  # the CLI passes the text the user typed

__all__ = [
    "check_distinct_files",
    "check_not_replaced",
    "check_output_path",
    "save_npy_atomic",
    "write_atomic",
]


def _umask() -> int:
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


def write_atomic(path: StrPath, write: Callable[[IO[bytes]], object]) -> None:
    """Write a file so that ``path`` is either complete or untouched.

    ``write`` fills a temporary file in the same directory (so ``os.replace`` is
    atomic), which is removed again if anything fails.

    Raises:
        InputError: The directory does not exist; ``WriteError`` (one) when the file cannot
            be written.
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
        raise WriteError(where, exc) from None
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


def _identity(path: str) -> tuple[str, object]:
    """What names one file: its device and inode when it exists (so hard links and symlinks
    to it are the same), else its resolved path."""
    try:
        stat = os.stat(path)
    except OSError:
        return ("path", os.path.realpath(path))
    return ("inode", (stat.st_dev, stat.st_ino))


def check_distinct_files(inputs: dict[str, str | None], outputs: dict[str, str | None]) -> None:
    """No output of a run may be one of its inputs, or another of its outputs.

    Checked before any work, as resolved paths and file identities (symlinks and hard links
    included): a run never replaces what it reads, and two outputs never overwrite each other.

    Args:
        inputs: flag (or argument name) -> the path given, None where not given.
        outputs: flag -> the path given, None where not given.

    Raises:
        UsageError: an output names an input or an earlier output.
    """
    seen = {_identity(path): (flag, path) for flag, path in inputs.items() if path is not None}
    for flag, path in outputs.items():
        if path is None:
            continue
        key = _identity(path)
        if key in seen:
            other_flag, other_path = seen[key]
            kind = "input" if other_flag in inputs else "output"
            raise UsageError(
                f"{flag} {path}: is the same file as the {kind} {other_flag} {other_path}; "
                "an output never replaces an input or another output: choose another path"
            )
        seen[key] = (flag, path)


#: What the warning of a release replaced with ``--force`` says (``spent_again``).
SPENT_AGAIN = "the privacy budget was spent again"


def spent_again(paths: list[str]) -> str:
    """The warning of a run that replaced earlier release artefacts with ``--force``."""
    return (
        f"--force replaced {', '.join(paths)}: {SPENT_AGAIN} on the same votes (every release "
        "of them counts, the replaced one included)"
    )


def check_not_replaced(
    targets: dict[str, str | None], *, force: bool, spends_budget: bool = True
) -> list[str]:
    """Refuse to replace an existing release artefact unless ``force``; before any work.

    Args:
        targets: flag -> the path given, None where not given.
        force: ``--force`` was given: existing files are replaced (atomically, when written).
        spends_budget: the run draws new noise from the votes, so replacing its artefacts
            would hide that the budget was spent twice (the message says so).

    Returns:
        The targets that exist and will be replaced (``force`` only); the run warns with
        :func:`spent_again` when it spends the budget.

    Raises:
        UsageError: a target exists and ``force`` is false.
    """
    existing = [path for path in targets.values() if path is not None and os.path.lexists(path)]
    if existing and not force:
        why = ": a second run spends the privacy budget again;" if spends_budget else ";"
        raise UsageError(f"{existing[0]} exists{why} pass --force to replace it")
    return existing


Identity = tuple[int, int, int, int, int]
"""A file's device, inode, size, and modification and change times in ns."""


def _identity_of(path: str) -> Identity | None:
    try:
        info = os.stat(path)
    except OSError:
        return None
    return (info.st_dev, info.st_ino, info.st_size, info.st_mtime_ns, info.st_ctime_ns)


def identities(files: dict[str, str | None]) -> dict[str, tuple[str, Identity | None]]:
    """Each input's identity before it is read (flag -> (path, identity)), for
    :func:`check_unchanged`."""
    return {flag: (path, _identity_of(path)) for flag, path in files.items() if path is not None}


def check_unchanged(before: dict[str, tuple[str, Identity | None]]) -> None:
    """Refuse to write anything when an input changed since it was read: the numbers would
    be one file's and a record's hash another's.

    Raises:
        InputError: a file was replaced, written, truncated or removed during the run.
    """
    for flag, (path, identity) in before.items():
        if _identity_of(path) != identity:
            raise InputError(
                f"{flag} {path}: the file changed while pate read it (replaced, written or "
                "removed during the run); nothing was written: run again on a file that stays"
            )


def save_npy_atomic(path: StrPath, array: np.ndarray) -> None:
    """Write ``array`` as .npy, atomically (see ``write_atomic``)."""
    write_atomic(path, lambda f: np.save(f, np.asarray(array), allow_pickle=False))

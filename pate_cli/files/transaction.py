"""A run's files, written all or nothing.

A release is a set of files (labels, answered mask, ledger, plot, record and its opening) that
only make sense together: a record binds its numbers to the others' hashes. A
:class:`Transaction` makes the set visible at once, or not at all:

1. **Stage.** Each file is written in full to a temporary file beside its target (same
   directory, so the final step is a link or a rename within one file system), and its
   SHA-256 is taken from the bytes written.
2. **Commit.** With the targets' directories locked (``flock`` on the directory, so two pate
   runs never commit into one directory at once) and SIGINT, SIGTERM and SIGHUP held back, a
   journal listing every step is written beside the files, then each file is made visible:
   a target that must not be replaced is *linked* into place (``os.link`` fails if the
   target exists, so of two runs racing for one name exactly one publishes, and the other
   rolls back); a target that may be replaced is first hard-linked to a backup, then
   renamed over. The record comes last. Then the backups, temporaries and journal go.
3. **Roll back.** Any failure (a full disk, a target that appeared meanwhile) undoes the
   steps made: created targets are removed (only when they are still the file this run
   linked), replaced ones are restored from their backups, temporaries are removed.

A process killed outright (SIGKILL, power loss) cannot roll back; it leaves its journal and
temporaries, named ``.pate-<pid>-<token>.*``. The next transaction in that directory, holding
its lock, finds them: a journal is rolled back as above, and every other ``.pate-`` file of a
process that is no longer alive is removed. So the directory holds the complete previous set
or the complete new one, and nothing hidden accumulates.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import hashlib
import json
import os
import re
import secrets
import signal
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import IO, Any

from pate_cli.errors import InputError, UsageError, WriteError

__all__ = ["Transaction", "recover"]

PREFIX = ".pate-"
_STALE = re.compile(r"\A\.+pate-(\d+)-[0-9a-f]+\.")
_HELD = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)


class _HashingWriter:
    """A binary stream that hashes what goes through it."""

    def __init__(self, stream: IO[bytes]) -> None:
        self._stream = stream
        self.digest = hashlib.sha256()

    def write(self, data: Any) -> int:
        view = memoryview(data).cast("B")
        self.digest.update(view)
        return self._stream.write(view)

    def flush(self) -> None:
        self._stream.flush()


@dataclass
class _Staged:
    target: str
    temporary: str
    replace: bool
    """True: the target may be replaced; False: it must not exist (``os.link``)."""
    sha256: str
    backup: str | None = None
    inode: tuple[int, int] | None = None
    done: bool = False


def _umask() -> int:
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


def _alive(pid: int) -> bool:
    if pid == os.getpid():
        return True
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _write_error(path: str, error: OSError) -> InputError:
    return InputError(
        f"{path}: cannot write the output file ({error.strerror or error}); nothing was written"
    )


class Transaction:
    """Files staged beside their targets and made visible together (module docstring).

    Use as a context manager: leaving it without :meth:`commit` (an exception, a signal)
    removes everything staged.
    """

    def __init__(self) -> None:
        self._token = f"{os.getpid()}-{secrets.token_hex(4)}"
        self._staged: list[_Staged] = []
        self.committed = False
        """True once every file is visible (a signal held during the commit may still be
        raised by ``commit`` after that)."""
        self.targets: list[str] = []
        """The files the commit made visible, as given to :meth:`stage`, in the order staged."""

    def __enter__(self) -> Transaction:
        return self

    def __exit__(self, *exc: object) -> None:
        self._discard()

    def _name(self, target: str, what: str) -> str:
        folder = os.path.dirname(os.path.abspath(target))
        return os.path.join(folder, f"{PREFIX}{self._token}.{what}.{os.path.basename(target)}")

    def stage(
        self,
        target: str,
        write: Callable[[IO[bytes]], object],
        *,
        replace: bool,
        mode: int | None = None,
    ) -> str:
        """Write ``target``'s content to a temporary file beside it; returns the SHA-256 of
        the bytes written. ``replace``: whether an existing target may be replaced."""
        temporary = self._name(target, f"tmp{len(self._staged)}")
        staged = _Staged(target, temporary, replace, "")
        try:
            fd = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
            self._staged.append(staged)
            with os.fdopen(fd, "wb") as stream:
                hashing = _HashingWriter(stream)
                write(hashing)  # type: ignore[arg-type]
                stream.flush()
                os.fsync(stream.fileno())
            os.chmod(temporary, 0o666 & ~_umask() if mode is None else mode)
        except OSError as error:
            raise _write_error(target, error) from None
        staged.sha256 = hashing.digest.hexdigest()
        return staged.sha256

    def stage_path(self, target: str, write: Callable[[str], object], *, replace: bool) -> str:
        """Like :meth:`stage` for a writer that takes a path (``write_atomic``'s callers): it
        writes the temporary file, which keeps the target's suffix; returns its SHA-256. An
        error of the writer names the target, never the temporary file."""
        temporary = self._name(target, f"tmp{len(self._staged)}")
        staged = _Staged(target, temporary, replace, "")
        self._staged.append(staged)
        try:
            write(temporary)
            digest = hashlib.sha256()
            with open(temporary, "rb") as stream:
                for chunk in iter(lambda: stream.read(1 << 20), b""):
                    digest.update(chunk)
        except WriteError as error:  # the temporary (or one of the writer's own) not written
            raise _write_error(target, error.error) from None
        except OSError as error:
            raise _write_error(target, error) from None
        staged.sha256 = digest.hexdigest()
        return staged.sha256

    def commit(
        self,
        check: Callable[[], object] | None = None,
        before_publish: Callable[[list[str]], object] | None = None,
    ) -> None:
        """Make every staged file visible, in the order staged, or none of them; ``check``
        runs under the folders' locks just before (an input that changed, say, fails it),
        and ``before_publish`` once the journals are written (given their paths), before any
        file is visible (a budget's charge is appended there: it fails the commit, or the
        release is charged before anything is out).

        Raises:
            UsageError: a target that must not be replaced exists (another run published
                it meanwhile); nothing of this run is left.
            InputError: a file system error; nothing of this run is left.
        """
        folders = sorted({os.path.dirname(os.path.abspath(s.target)) for s in self._staged})
        with _held_signals(), _locked(folders):
            for folder in folders:
                recover(folder, locked=True)
            if check is not None:
                check()
            journals = self._journals(folders)
            try:
                if before_publish is not None:
                    before_publish(journals)
                for staged in self._staged:
                    self._publish(staged)
            except BaseException:
                self._roll_back()
                raise
            finally:
                for journal in journals:
                    with contextlib.suppress(OSError):
                        os.unlink(journal)
            self.committed = True
            self.targets = [staged.target for staged in self._staged]
            self._tidy()

    def _journals(self, folders: list[str]) -> list[str]:
        """One journal per folder, listing its steps, written before any step is made."""
        for staged in self._staged:
            staged.backup = self._name(staged.target, "old") if staged.replace else None
            info = os.stat(staged.temporary)
            staged.inode = (info.st_dev, info.st_ino)
        paths: list[str] = []
        for folder in folders:
            entries = [
                {
                    "target": s.target,
                    "temporary": s.temporary,
                    "backup": s.backup,
                    "inode": s.inode,
                }
                for s in self._staged
                if os.path.dirname(os.path.abspath(s.target)) == folder
            ]
            path = os.path.join(folder, f"{PREFIX}{self._token}.journal")
            paths.append(path)
            try:
                with open(path, "x", encoding="utf-8") as stream:
                    json.dump({"pid": os.getpid(), "entries": entries}, stream)
                    stream.flush()
                    os.fsync(stream.fileno())
            except OSError as error:
                for done in paths:
                    with contextlib.suppress(OSError):
                        os.unlink(done)
                raise _write_error(str(entries[0]["target"]), error) from None  # not the journal
        return paths

    def _publish(self, staged: _Staged) -> None:
        try:
            if not staged.replace:
                try:
                    os.link(staged.temporary, staged.target)
                except FileExistsError:
                    raise UsageError(
                        f"{staged.target} exists: another run released it while this one ran "
                        "(a second run spends the privacy budget again); nothing of this run "
                        "was written"
                    ) from None
                staged.done = True
                os.unlink(staged.temporary)
                return
            assert staged.backup is not None
            if os.path.lexists(staged.target):
                os.link(staged.target, staged.backup)
            else:
                staged.backup = None
            os.replace(staged.temporary, staged.target)
            staged.done = True
        except OSError as error:
            raise _write_error(staged.target, error) from None

    def _roll_back(self) -> None:
        for staged in reversed(self._staged):
            _undo(staged.target, staged.backup, staged.inode, staged.done)

    def _tidy(self) -> None:
        for staged in self._staged:
            for path in (staged.backup, staged.temporary):
                if path is not None:
                    with contextlib.suppress(FileNotFoundError):
                        os.unlink(path)
        self._staged = []

    def _discard(self) -> None:
        for staged in self._staged:
            with contextlib.suppress(OSError):
                os.unlink(staged.temporary)
        self._staged = []


def _undo(target: str, backup: str | None, inode: tuple[int, int] | None, done: bool) -> None:
    """Undo one step of a commit: restore the backup, or remove the target this run made."""
    with contextlib.suppress(OSError):
        if backup is not None and os.path.lexists(backup):
            # rename() between two links of one file does nothing: the target is then still
            # the old file, and the backup link only has to go.
            os.replace(backup, target)
            if os.path.lexists(backup):
                os.unlink(backup)
        elif done or inode is not None:
            info = os.lstat(target)
            if inode is not None and (info.st_dev, info.st_ino) == inode:
                os.unlink(target)


@contextlib.contextmanager
def _held_signals() -> Iterator[None]:
    """SIGINT, SIGTERM and SIGHUP held back until the block is done, then delivered to the
    handlers they had: a handler that only notes the signal (whatever thread the signal
    lands on, Python runs handlers in the main thread, so no exception can cut the block)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    received: list[int] = []
    previous = {signum: signal.signal(signum, lambda s, f: received.append(s)) for signum in _HELD}
    try:
        yield
    finally:
        for signum, handler in previous.items():
            signal.signal(signum, signal.SIG_DFL if handler is None else handler)
        if received:
            signal.raise_signal(received[0])


@contextlib.contextmanager
def _locked(folders: list[str]) -> Iterator[None]:
    """Exclusive locks on the folders, taken in sorted order (no two runs deadlock)."""
    with contextlib.ExitStack() as stack:
        for folder in folders:
            try:
                fd = os.open(folder, os.O_RDONLY | os.O_DIRECTORY)
            except OSError as error:
                raise _write_error(folder, error) from None
            stack.callback(os.close, fd)
            fcntl.flock(fd, fcntl.LOCK_EX)
        yield


def recover(folder: str, *, locked: bool = False) -> list[str]:
    """Roll back what a killed pate run left in ``folder`` (its journal) and remove the
    temporaries of runs no longer alive; returns the paths removed or restored.

    Takes the folder's lock unless ``locked`` (the caller holds it)."""
    if not locked:
        with _locked([folder]):
            return recover(folder, locked=True)
    cleaned: list[str] = []
    try:
        names = os.listdir(folder)
    except OSError:
        return cleaned
    stale = [n for n in names if (m := _STALE.match(n)) and not _alive(int(m.group(1)))]
    for name in sorted(stale, key=lambda n: not n.endswith(".journal")):
        path = os.path.join(folder, name)
        if name.endswith(".journal"):
            cleaned += _replay_journal(path)
        with contextlib.suppress(FileNotFoundError):
            os.unlink(path)
            cleaned.append(path)
    return cleaned


def _replay_journal(path: str) -> list[str]:
    try:
        with open(path, encoding="utf-8") as stream:
            entries = json.load(stream)["entries"]
    except (OSError, ValueError, KeyError, TypeError):
        return []
    undone = []
    for entry in reversed(entries):
        with contextlib.suppress(KeyError, TypeError, ValueError):
            inode = entry.get("inode")
            _undo(
                entry["target"],
                entry.get("backup"),
                None if inode is None else (int(inode[0]), int(inode[1])),
                True,
            )
            undone.append(entry["target"])
    return undone


def probe_writable(folder: str, flag: str) -> None:
    """Fail before any work when ``folder`` cannot take a new file (read-only, full)."""
    name = os.path.join(folder, f"{PREFIX}{os.getpid()}-{secrets.token_hex(4)}.probe")
    try:
        fd = os.open(name, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        os.close(fd)
        os.unlink(name)
    except OSError as error:
        reason = (
            "read-only"
            if error.errno in (errno.EROFS, errno.EACCES, errno.EPERM)
            else (error.strerror or str(error))
        )
        raise InputError(
            f"{flag}: cannot write in {folder} ({reason}); expected a writable folder"
        ) from None

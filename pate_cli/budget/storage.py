"""A budget file on disk: opened once, read whole, appended to by whole lines, started again
without losing the old one, and a charge cut short settled by the next one.

A charge in progress leaves a marker beside the budget (``BUDGET.charging``: the size before
its line, the line itself and the journals of its run's files) from just before its append
to its release. A run that finds the marker holds the budget's lock, so the run that left it
has ended: a line cut short is removed (it never got in, and nothing is released before it
is whole); a whole line whose run's files were never all committed has them rolled back
(``pate_cli.files.transaction.recover``) and a ``no-release`` note appended (spent, nothing out).
The charge itself always stays: taking it back could leave a release that no budget counts.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import json
import os
from datetime import UTC, datetime
from typing import Any

from pate_cli.budget.lines import MAX_BYTES, NO_RELEASE, SCHEMA, LineError, line_bytes, parse
from pate_cli.common.spelling import option
from pate_cli.errors import InputError, UsageError
from pate_cli.files.outputs import write_atomic

MARKER_SCHEMA = "pate-budget-charging"
_MAX_MARKER_BYTES = 1 << 20


def now() -> str:
    """A line's ``created``: the time in UTC, to the second."""
    return datetime.now(UTC).isoformat(timespec="seconds")


def open_budget(path: str, flags: int) -> int:
    if not os.path.isfile(path):
        raise InputError(f"{path}: no such budget file; create it with 'pate budget init'")
    try:
        return os.open(path, flags | os.O_CLOEXEC)
    except OSError as error:
        raise InputError(f"{path}: cannot open the budget ({error.strerror})") from None


def read_all(path: str, fd: int, *, hashed: bool = False) -> Any:
    """The bytes of the file behind ``fd`` (at most ``MAX_BYTES``), or their SHA-256."""
    size = os.fstat(fd).st_size
    if size > MAX_BYTES:
        raise InputError(f"{path}: larger than {MAX_BYTES >> 20} MiB; not a budget file")
    chunks, offset, digest = [], 0, hashlib.sha256()
    while True:
        chunk = os.pread(fd, 1 << 20, offset)
        if not chunk:
            break
        offset += len(chunk)
        if offset > MAX_BYTES:
            raise InputError(f"{path}: larger than {MAX_BYTES >> 20} MiB; not a budget file")
        digest.update(chunk)
        if not hashed:
            chunks.append(chunk)
    return digest.hexdigest() if hashed else b"".join(chunks)


def parsed(path: str, data: bytes) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    try:
        return parse(data)
    except LineError as error:
        raise InputError(f"{path}: {error}; run 'pate verify {path}'") from None


def write_whole(fd: int, data: bytes, offset: int) -> None:
    """Write all of ``data`` at ``offset``, a short write continued where it stopped."""
    view = memoryview(data)
    while view:
        written = os.pwrite(fd, view, offset)
        if written <= 0:
            raise OSError(0, "nothing written")
        view, offset = view[written:], offset + written


def create(path: str, content: bytes) -> None:
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
    except FileExistsError:
        raise UsageError(
            f"{path} exists: a budget is never replaced, its charges would be lost (a restart "
            f"keeps it beside the new one); pass {option('force')} to start it again"
        ) from None
    except OSError as error:
        raise InputError(f"{path}: cannot create the budget ({error.strerror})") from None
    try:
        write_whole(fd, content, 0)
        os.fsync(fd)
    except OSError as error:
        os.close(fd)
        os.unlink(path)
        raise InputError(f"{path}: cannot write the budget ({error.strerror})") from None
    os.close(fd)


def start_again(path: str, header: dict[str, Any]) -> str | None:
    """A new budget at ``path`` with ``header`` (its digest added here); an existing file there
    is kept beside it, named by its head (``BUDGET.<head12>.jsonl``), never replaced, and the
    new header says so: ``"replaces": {"id", "head", "kept"}`` (an audit then knows the
    records of the old budget at this place for its own). Returns where it was kept."""
    if not os.path.lexists(path):
        create(path, line_bytes(header)[0])
        return None
    fd = open_budget(path, os.O_RDONLY)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)  # no charge is half made while it is set aside
        old = read_all(path, fd)
        replaces = None
        try:
            first, lines = parse(old)
            head = str((lines[-1] if lines else first)["digest"])
            replaces = {"id": first["digest"], "head": head}
        except LineError:
            head = hashlib.sha256(old).hexdigest()
        root, ext = os.path.splitext(path)
        kept = f"{root}.{head[:12]}{ext or '.jsonl'}"
        if replaces is not None:
            header = {**header, "replaces": {**replaces, "kept": os.path.basename(kept)}}
        content = line_bytes(header)[0]
        try:
            os.link(path, kept)
        except FileExistsError:
            with open(kept, "rb") as stream:
                if stream.read(MAX_BYTES + 1) != old:
                    raise UsageError(
                        f"{kept} exists and is not {path}: move it away to start the budget again"
                    ) from None
        except OSError as error:
            raise InputError(f"{kept}: cannot keep the old budget ({error.strerror})") from None
        write_atomic(path, lambda stream: stream.write(content))
        return kept
    finally:
        os.close(fd)


# ----------------------------------------------------------------------------- a charge cut short


def marker_path(path: str) -> str:
    return f"{path}.charging"


def write_marker(path: str, marker: dict[str, Any]) -> None:
    """Write the marker of a charge in progress (atomically: a temporary file renamed)."""
    content = json.dumps(marker).encode()
    try:
        write_atomic(marker_path(path), lambda stream: stream.write(content))
    except InputError as error:
        raise InputError(f"{error.message}; nothing was released or charged") from None


def remove_marker(path: str) -> None:
    with contextlib.suppress(FileNotFoundError):
        os.unlink(marker_path(path))


def _read_marker(path: str) -> dict[str, Any] | None:
    target = marker_path(path)
    try:
        with open(target, "rb") as stream:
            data = stream.read(_MAX_MARKER_BYTES + 1)
    except FileNotFoundError:
        return None
    except OSError as error:
        raise InputError(f"{target}: cannot read ({error.strerror})") from None
    try:
        marker = json.loads(data)
        ok = isinstance(marker, dict) and marker.get("schema") == MARKER_SCHEMA
        ok = ok and isinstance(marker.get("size"), int) and isinstance(marker.get("line"), str)
        ok = ok and isinstance(marker.get("journals"), list)
    except (ValueError, RecursionError):
        ok = False
    if not ok:
        raise InputError(
            f"{target}: not the marker of a charge pate writes; move it away to charge {path} again"
        )
    return dict(marker)


def settle(path: str, fd: int) -> None:
    """Under the budget's lock: settle the charge of a run cut short (module docstring). The
    lock is this run's, so the run that left the marker has ended."""
    from pate_cli.files.transaction import recover

    marker = _read_marker(path)
    if marker is None:
        return
    data = read_all(path, fd)
    size, line = marker["size"], marker["line"].encode()
    tail = data[size:]
    if tail == line:
        journals = [str(j) for j in marker["journals"]]
        unfinished = [j for j in journals if os.path.exists(j)]
        if not journals or unfinished:
            # Its files were never all committed: roll them back; the charge stays.
            for folder in sorted({os.path.dirname(j) for j in unfinished}):
                recover(folder)
            if not any(os.path.exists(j) for j in unfinished):  # all rolled back: nothing out
                _append_note(path, fd, data, json.loads(line)["digest"])
    elif len(tail) < len(line) and line.startswith(tail):
        # Its line was cut short: it was never charged, and nothing was released.
        os.ftruncate(fd, size)
        os.fsync(fd)
    elif tail:
        raise InputError(
            f"{path}: a run was cut short while charging it, and the file does not end as it "
            f"left it; run 'pate verify {path}'"
        )
    remove_marker(path)


def _append_note(path: str, fd: int, data: bytes, charge: str) -> None:
    """Append a no-release note about the charge whose digest is ``charge``."""
    _, lines = parsed(path, data)
    content = {
        "note": NO_RELEASE,
        "charge": charge,
        "detail": "its run was cut short before its release, whose files were rolled back: "
        "spent, nothing out",
        "created": now(),
        "prev": lines[-1]["digest"],
    }
    note, _ = line_bytes(content)
    write_whole(fd, note, len(data))
    os.fsync(fd)


def is_budget(path: str) -> bool:
    """Whether ``path`` starts like a budget file (its first line's schema, or a charge where
    the header was removed). Only a regular file is opened: a FIFO or a device never is."""
    if not os.path.isfile(path):
        return False
    try:
        with open(path, "rb") as stream:
            first = stream.readline(1 << 16)
        # Bytes that are not UTF-8 still make a budget (a damaged one, for verify to name).
        line = json.loads(first.decode("utf-8", errors="replace"))
        charge = isinstance(line, dict) and {"prev", "digest"} <= set(line)
        return bool(line.get("schema") == SCHEMA or charge)
    except (OSError, ValueError, AttributeError, RecursionError):
        return False

"""Faults while a run charges a budget: never a release whose charge is lost.

Every fault ends one of two ways. Either the run is refused before any noise is drawn (one
``pate: error:`` line, exit 2, or 4 over the limit), with no file written and the budget's
bytes as they were; or it is released with a whole charge that ``pate verify BUDGET
--records DIR`` accepts. A run that fails after its append releases nothing, and a run cut
short there is settled by the next charge (a line cut short removed, a charge whose files
were rolled back noted ``no-release``, which verify reports as charged with no release).

Faults are injected in-process (``run_cli``, with ``os.pwrite``, ``os.fsync`` or
``os.ftruncate`` made to write short or fail, or the budget file replaced, truncated or
swapped for a symbolic link right after the append) and in a subprocess running ``python -m
pate_cli`` behind ``KILLER``, which kills itself with SIGKILL at a chosen point.
"""

from __future__ import annotations

import errno
import hashlib
import json
import os
import shutil
import signal
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from pate_cli.budget import book
from pate_cli.errors import ExitCode
from tests.conftest import CliResult, run_cli

DELTA = 1e-5
GNMAX = ["--sigma", 40, "--delta", DELTA]
DIFFERS = 1  # pate verify: a check differs (the code a failed gate shares, never a refusal)
TIMEOUT = 60  # seconds a killed run may take before the test fails

# ``python -m pate_cli ARGS`` killed with SIGKILL at argv[1]: "pwrite" (part of the charge's
# line written), "append" (the line appended and synced, nothing published: the check in
# place is next) or "keep" (every file published, the marker not yet removed).
KILLER = textwrap.dedent(
    """
    import os, runpy, signal, sys
    from pate_cli.budget import book

    def die(*args, **kwargs):
        os.kill(os.getpid(), signal.SIGKILL)

    point = sys.argv[1]
    if point == "pwrite":
        write = os.pwrite

        def cut(fd, data, offset):
            write(fd, bytes(data)[:16], offset)
            die()

        os.pwrite = cut
    elif point == "append":
        book.Pending.check_in_place = die
    else:
        book.Pending.keep = die
    sys.argv = ["pate", *sys.argv[2:]]
    runpy.run_module("pate_cli", run_name="__main__", alter_sys=True)
    """
)


# ----------------------------------------------------------------------------- helpers


@pytest.fixture
def votes(tmp_path: Path) -> Path:
    """20 queries x 10 classes of 250 teachers' votes."""
    counts = np.random.default_rng(0).multinomial(250, np.full(10, 0.1), size=20)
    path = tmp_path / "votes.npy"
    np.save(path, counts)
    return path


@pytest.fixture
def out(tmp_path: Path) -> Path:
    folder = tmp_path / "out"
    folder.mkdir()
    return folder


@pytest.fixture
def budget(tmp_path: Path) -> Path:
    path = tmp_path / "b.jsonl"
    run_cli(["budget", "init", path, "--max-epsilon", 50, "--delta", DELTA, "--json"])
    return path


def _never(*args: Any, **kwargs: Any) -> Any:
    raise AssertionError("noise was drawn")


@pytest.fixture
def no_noise(monkeypatch: pytest.MonkeyPatch) -> None:
    """Any noise drawn fails the run as a bug (exit 70): a refusal must come before. Every
    run below draws through ``Noise.generator`` (aggregate, and analyze and
    smooth-sensitivity releasing the GNSS epsilon)."""
    monkeypatch.setattr("pate_cli.files.seeds.Noise.generator", _never)


def aggregate(votes: Path, out: Path, budget: Path, *extra: Any, name: str = "labels") -> list:
    """``pate aggregate`` writing ``NAME.npy`` and its record ``NAME.json`` into ``out``."""
    files = ["--output", out / f"{name}.npy", "--record", out / f"{name}.json"]
    return ["aggregate", votes, *GNMAX, *files, "--budget", budget, "--json", *extra]


def one_error(result: CliResult) -> str:
    """The run's one stderr line, a ``pate: error:`` line (no traceback, no panel)."""
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("pate: error: "), result.stderr
    return lines[0]


def lines_of(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_bytes().splitlines()]


def marker(budget: Path) -> Path:
    return budget.with_name(f"{budget.name}.charging")


def assert_refused(result: CliResult, out: Path, budget: Path, before: bytes, *named: str) -> None:
    """One error line naming ``named``, no file in ``out`` (none hidden), no marker, and the
    budget's bytes as they were."""
    line = one_error(result)
    assert all(word in line for word in named), line
    assert os.listdir(out) == []
    assert not marker(budget).exists()
    assert budget.read_bytes() == before


def verify(budget: Path, *folders: Path, expect: int = ExitCode.OK) -> dict:
    """``pate verify`` of the budget with its records and its head as it stands: what its
    owner published after the last charge (these tests check what a fault leaves, not what
    pins it)."""
    records = [arg for folder in folders for arg in ("--records", folder)]
    try:
        head = ["--head", json.loads(budget.read_text().splitlines()[-1])["digest"]]
    except (ValueError, KeyError, IndexError, TypeError, OSError):
        head = []  # a file a fault left unreadable: no head to give
    return run_cli(["verify", budget, *records, *head, "--json"], expect=expect).json


def statuses(report: dict) -> dict[str, str]:
    return {check["name"]: check["status"] for check in report["checks"]}


def assert_verified(budget: Path, out: Path, charges: int) -> None:
    """``pate verify BUDGET --records OUT`` accepts: every check made and holding, each of
    ``charges`` recomputed from its record."""
    report = verify(budget, out)
    assert report["verdict"] == "verified" and report["differs"] == [], report
    found = {c["name"]: c["detail"] for c in report["checks"]}
    assert f"{charges} charges recomputed" in found["charges and their records"]


def released(out: Path, name: str = "labels") -> bool:
    return (out / f"{name}.npy").is_file() and (out / f"{name}.json").is_file()


def kill_at(point: str, args: list) -> None:
    """Run pate in a subprocess that kills itself with SIGKILL at ``point`` (``KILLER``)."""
    env = {k: v for k, v in os.environ.items() if k != "PATE_DEBUG"}
    command = [sys.executable, "-c", KILLER, point, *map(str, args)]
    done = subprocess.run(command, capture_output=True, text=True, timeout=TIMEOUT, env=env)
    assert done.returncode == -signal.SIGKILL, done.stderr


def canonical_digest(line: dict) -> str:
    """SHA-256 of a line's canonical JSON without its digest, written out here."""
    content = {key: value for key, value in line.items() if key != "digest"}
    text = json.dumps(content, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(text.encode()).hexdigest()


# ----------------------------------------------------------------------------- failed writes


def test_a_short_write_is_continued_to_the_whole_line(votes, out, budget, monkeypatch):
    """``os.pwrite`` writing 7 bytes a call: the loop writes the whole line, which verifies."""
    write, calls = os.pwrite, []

    def short(fd: int, data: Any, offset: int) -> int:
        calls.append(len(data))
        return write(fd, bytes(data)[:7], offset)

    monkeypatch.setattr(os, "pwrite", short)
    before = budget.read_bytes()
    run_cli(aggregate(votes, out, budget))
    assert len(calls) > 10 and released(out)
    content = budget.read_bytes()
    assert content.startswith(before) and content.endswith(b"\n")
    header, charge = lines_of(budget)
    assert charge["prev"] == header["digest"] and charge["digest"] == canonical_digest(charge)
    assert not marker(budget).exists()
    assert_verified(budget, out, 1)


def _failing_write(monkeypatch: pytest.MonkeyPatch, fault: str) -> None:
    """The append fails: ``enospc`` (part of the line written, then a full disk), ``zero``
    (a write that writes nothing, for ever) or ``fsync`` (the whole line written, its sync
    failing on a full disk)."""
    write = os.pwrite
    sync = os.fsync
    budget_fds: set[int] = set()
    nothing: list[int] = []

    def pwrite(fd: int, data: Any, offset: int) -> int:
        budget_fds.add(fd)
        if fault == "zero":
            nothing.append(fd)
            assert len(nothing) < 1000, "a write of nothing retried for ever"
            return 0
        if fault == "enospc" and len(data) > 10:
            return write(fd, bytes(data)[:10], offset)
        if fault == "enospc":
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
        return write(fd, data, offset)

    def fsync(fd: int) -> None:
        if fault == "fsync" and fd in budget_fds:
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
        sync(fd)

    monkeypatch.setattr(os, "pwrite", pwrite)
    monkeypatch.setattr(os, "fsync", fsync)


@pytest.mark.parametrize("fault", ["enospc", "zero", "fsync"])
def test_a_failed_append_releases_nothing_and_the_next_run_works(
    votes, out, budget, monkeypatch, fault
):
    """The line taken back: exit 2, nothing published, the budget's bytes as they were and
    no marker; the next run charges and releases."""
    before = budget.read_bytes()
    with monkeypatch.context() as patched:
        _failing_write(patched, fault)
        result = run_cli(aggregate(votes, out, budget), expect=ExitCode.BAD_INPUT)
    assert_refused(result, out, budget, before, "cannot append the charge", "nothing was released")
    run_cli(aggregate(votes, out, budget))
    assert released(out) and len(lines_of(budget)) == 2
    assert_verified(budget, out, 1)


@pytest.mark.parametrize("fault", ["enospc", "fsync"])
def test_a_failed_append_that_cannot_be_taken_back_is_settled(
    votes, out, budget, monkeypatch, fault
):
    """The append fails and so does its truncation: nothing is published, and the next run
    settles the line left (a cut one removed; a whole one kept and noted no-release)."""
    before = budget.read_bytes()

    def cannot(*args: Any) -> None:
        raise OSError(errno.EIO, os.strerror(errno.EIO))

    with monkeypatch.context() as patched:
        _failing_write(patched, fault)
        patched.setattr(os, "ftruncate", cannot)
        result = run_cli(aggregate(votes, out, budget, name="first"), expect=ExitCode.BAD_INPUT)
    assert "cannot append the charge" in one_error(result)
    assert os.listdir(out) == [] and marker(budget).exists()
    left = budget.read_bytes()
    assert left != before  # what the failed append left: a cut line, or a whole one
    run_cli(aggregate(votes, out, budget))
    assert released(out) and not marker(budget).exists()
    lines = lines_of(budget)
    if fault == "enospc":  # the cut line removed; the new charge follows the header
        assert budget.read_bytes().startswith(before) and len(lines) == 2
        assert_verified(budget, out, 1)
        return
    # The whole line stays (nothing of it came out): charged, no release.
    header, cut_short, note, charge = lines
    assert note["note"] == "no-release" and note["charge"] == cut_short["digest"]
    assert charge["prev"] == note["digest"]
    report = verify(budget, out, expect=ExitCode.NOT_CHECKED)
    assert report["differs"] == [] and statuses(report)["charged, no release"] == "not-checked"


# ----------------------------------------------------------------------------- the file read


def test_a_last_line_without_its_newline_is_refused_before_noise(votes, out, budget, monkeypatch):
    run_cli(aggregate(votes, out, budget, name="first"))
    kept = {name: (out / name).read_bytes() for name in os.listdir(out)}
    budget.write_bytes(budget.read_bytes().rstrip(b"\n"))
    before = budget.read_bytes()
    monkeypatch.setattr("pate_cli.files.seeds.Noise.generator", _never)
    result = run_cli(aggregate(votes, out, budget), expect=ExitCode.BAD_INPUT)
    assert "ends without a newline" in one_error(result)
    assert {name: (out / name).read_bytes() for name in os.listdir(out)} == kept
    assert budget.read_bytes() == before and not marker(budget).exists()


def _header(budget: Path) -> dict:
    return json.loads(budget.read_bytes().splitlines()[0])


def _with(header: dict, **changes: Any) -> bytes:
    """The header changed and its digest recomputed: only the change is wrong."""
    content = {key: value for key, value in header.items() if key != "digest"} | changes
    return json.dumps({**content, "digest": canonical_digest(content)}).encode() + b"\n"


HOSTILE = {
    "1e999": lambda h: _with(h).replace(b'"max_epsilon": 50.0', b'"max_epsilon": 1e999'),
    "nan": lambda h: _with(h).replace(b'"delta": 1e-05', b'"delta": NaN'),
    "non-utf8-name": lambda h: _with(h, name="caf?").replace(b"caf?", b"caf\xe9"),
    "no-digest": lambda h: (
        json.dumps({k: v for k, v in h.items() if k != "digest"}).encode() + b"\n"
    ),
    "version-2": lambda h: _with(h, version=2),
    "unknown-conversion": lambda h: _with(h, conversion="fancy"),
}
RUNS = {
    "aggregate": lambda votes, out: ["aggregate", votes, *GNMAX, "--output", out / "l.npy"],
    "analyze": lambda votes, out: [
        *("analyze", votes, *GNMAX, "--orders", 20, "--beta", 0.01, "--sigma-ss", 10),
        *("--ledger", out / "ledger.csv"),
    ],
    "smooth-sensitivity": lambda votes, out: [
        *("smooth-sensitivity", votes, *GNMAX, "--order", 20, "--beta", 0.01),
        *("--sigma-ss", 10, "--record", out / "r.json"),
    ],
}


@pytest.mark.parametrize("hostile", list(HOSTILE))
def test_a_hostile_header_is_refused_by_every_run_and_verify_differs(
    votes, out, budget, no_noise, hostile
):
    """Every charging command refuses it before noise in one line (exit 2, nothing written,
    the bytes as they were); ``pate verify BUDGET`` says it differs (exit 1), no crash."""
    content = HOSTILE[hostile](_header(budget))
    assert content.endswith(b"\n") and content.count(b"\n") == 1
    budget.write_bytes(content)
    for command, args in RUNS.items():
        result = run_cli([*args(votes, out), "--budget", budget], expect=ExitCode.BAD_INPUT)
        assert_refused(result, out, budget, content, str(budget))
        assert "line 1" in result.stderr or "not UTF-8" in result.stderr, command
    report = verify(budget, expect=DIFFERS)
    assert report["verdict"] == "differs" and report["differs"], report
    assert budget.read_bytes() == content


# ----------------------------------------------------------------------------- the budget swapped


def _replace_with_copy(budget: Path, before: bytes) -> None:
    copy = budget.with_name("copy.jsonl")
    copy.write_bytes(before)
    os.replace(copy, budget)


def _truncate(budget: Path, before: bytes) -> None:
    os.truncate(budget, len(before))


def _truncate_to_header(budget: Path, before: bytes) -> None:
    os.truncate(budget, len(before.splitlines(keepends=True)[0]))


def _symlink_to_copy(budget: Path, before: bytes) -> None:
    copy = budget.with_name("copy.jsonl")
    copy.write_bytes(before)
    os.rename(budget, budget.with_name("moved.jsonl"))
    os.symlink(copy, budget)


SWAPS = {
    "replaced": _replace_with_copy,
    "truncated": _truncate,
    "truncated-to-its-header": _truncate_to_header,
    "symlink-to-a-copy": _symlink_to_copy,
}


@pytest.mark.parametrize("swap", list(SWAPS))
def test_a_budget_swapped_after_the_append_fails_the_run(
    votes, out, budget, monkeypatch, swap, tmp_path
):
    """Between the append and the release, the budget at its path is replaced, truncated or
    made a symbolic link to another file: exit 2, nothing published, no marker left, and
    pate writes nothing more into the file now at the path."""
    first = tmp_path / "first"
    first.mkdir()
    run_cli(aggregate(votes, first, budget))  # one earlier charge, kept through the swap
    before = budget.read_bytes()
    append = book.Pending.append

    def swapped(self: book.Pending, *args: Any, **kwargs: Any) -> None:
        append(self, *args, **kwargs)
        assert budget.read_bytes() != before  # appended
        SWAPS[swap](budget, before)

    monkeypatch.setattr(book.Pending, "append", swapped)
    at_path = None

    def seen(*args: Any) -> None:
        nonlocal at_path
        at_path = budget.read_bytes()

    monkeypatch.setattr(book.Pending, "check_in_place", _after(book.Pending.check_in_place, seen))
    result = run_cli(aggregate(votes, out, budget), expect=ExitCode.BAD_INPUT)
    line = one_error(result)
    assert "nothing was released" in line and str(budget) in line
    assert os.listdir(out) == [] and not marker(budget).exists()
    assert at_path is not None and budget.read_bytes() == at_path  # nothing more written
    assert b"\0" not in budget.read_bytes()


def _after(method: Any, hook: Any) -> Any:
    """``method`` with ``hook`` called first (with the same arguments)."""

    def hooked(*args: Any, **kwargs: Any) -> Any:
        hook(*args)
        return method(*args, **kwargs)

    return hooked


def test_a_budget_linked_to_itself_is_the_same_file(votes, out, budget, monkeypatch):
    """A symbolic link to the very file appended to is that file: released, and verified."""
    append = book.Pending.append

    def linked(self: book.Pending, *args: Any, **kwargs: Any) -> None:
        append(self, *args, **kwargs)
        moved = budget.with_name("moved.jsonl")
        os.rename(budget, moved)
        os.symlink(moved, budget)

    monkeypatch.setattr(book.Pending, "append", linked)
    run_cli(aggregate(votes, out, budget))
    assert budget.is_symlink() and released(out)
    assert_verified(budget, out, 1)


# ----------------------------------------------------------------------------- SIGKILL


def test_sigkill_after_the_append_is_noted_no_release(votes, out, budget):
    """Killed with its line appended and nothing published: the next run into the same
    folder rolls the files back and notes the charge no-release; verify reports it charged
    with no release (exit 3: not a pass, not a crash)."""
    kill_at("append", aggregate(votes, out, budget, name="killed"))
    assert marker(budget).exists() and not released(out, "killed")
    killed = lines_of(budget)[-1]
    run_cli(aggregate(votes, out, budget))
    assert released(out) and not released(out, "killed") and not marker(budget).exists()
    assert not [name for name in os.listdir(out) if ".pate-" in name]
    header, charge, note, after = lines_of(budget)
    assert charge == killed and after["prev"] == note["digest"]
    assert note["note"] == "no-release" and note["charge"] == killed["digest"]
    report = verify(budget, out, expect=ExitCode.NOT_CHECKED)
    assert report["verdict"] == "incomplete" and report["differs"] == [], report
    checks = statuses(report)
    assert checks["charged, no release"] == "not-checked"
    assert checks["charges and their records"] == "verified"
    assert "charges whose record is not given" not in checks


def test_sigkill_inside_keep_adds_no_note(votes, out, budget):
    """Killed once its files were published, before its marker went: the release is out,
    its charge stays, and the next run adds no note; verify accepts both charges."""
    kill_at("keep", aggregate(votes, out, budget, name="killed"))
    assert marker(budget).exists() and released(out, "killed")
    run_cli(aggregate(votes, out, budget))
    assert not marker(budget).exists()
    assert not any("note" in line for line in lines_of(budget))
    assert len(lines_of(budget)) == 3
    assert_verified(budget, out, 2)


def test_sigkill_while_writing_the_line_is_settled_by_the_next_run(votes, out, budget):
    """Killed with part of its line written: the budget ends in a cut line, which the next
    run removes before reading the budget; the budget is then the old one plus its line."""
    before = budget.read_bytes()
    kill_at("pwrite", aggregate(votes, out, budget, name="killed"))
    assert marker(budget).exists() and not budget.read_bytes().endswith(b"\n")
    run_cli(aggregate(votes, out, budget))
    assert budget.read_bytes().startswith(before) and len(lines_of(budget)) == 2
    assert not released(out, "killed") and not marker(budget).exists()
    assert_verified(budget, out, 1)


# ----------------------------------------------------------------------------- refusals


def test_a_read_only_budget_is_refused_before_noise(votes, out, budget, no_noise):
    """No write permission bit, whoever runs (root included): refused in one line."""
    before = budget.read_bytes()
    budget.chmod(0o444)
    try:
        result = run_cli(aggregate(votes, out, budget), expect=ExitCode.BAD_INPUT)
    finally:
        budget.chmod(0o644)
    assert_refused(result, out, budget, before, "read-only")


def test_a_budget_whose_folder_takes_no_file_is_refused_before_noise(
    votes, out, budget, no_noise, monkeypatch
):
    """The folder cannot take the marker of a charge (read-only, simulated so that root sees
    it too): refused in one line."""
    opened = os.open

    def read_only(path: Any, flags: int, *args: Any, **kwargs: Any) -> int:
        if ".charging." in os.fspath(path):
            raise OSError(errno.EROFS, os.strerror(errno.EROFS))
        return opened(path, flags, *args, **kwargs)

    monkeypatch.setattr(os, "open", read_only)
    before = budget.read_bytes()
    result = run_cli(aggregate(votes, out, budget), expect=ExitCode.BAD_INPUT)
    assert_refused(result, out, budget, before, "cannot take a new file")


def test_budget_given_twice_is_refused(votes, out, budget, tmp_path, no_noise):
    other = tmp_path / "other.jsonl"
    shutil.copy(budget, other)
    before = budget.read_bytes()
    result = run_cli(aggregate(votes, out, budget, "--budget", other), expect=ExitCode.BAD_INPUT)
    assert_refused(result, out, budget, before, "--budget")
    assert other.read_bytes() == before


def test_a_refusal_over_the_limit_with_json_is_one_object(votes, out, tmp_path, no_noise):
    """Over the limit: exit 4, the run's object as one JSON object on stdout (what the run
    would have computed null, its budget block the refusal), one error line."""
    budget = tmp_path / "small.jsonl"
    run_cli(["budget", "init", budget, "--max-epsilon", 0.1, "--delta", DELTA, "--json"])
    before = budget.read_bytes()
    result = run_cli(aggregate(votes, out, budget), expect=ExitCode.CHARGE_REFUSED)
    assert_refused(result, out, budget, before, "over the limit")
    assert result.stdout.endswith("}\n")
    refusal = json.loads(result.stdout)
    assert refusal["command"] == "aggregate" and refusal["delta"] == DELTA
    assert refusal["answered"] is None and refusal["privacy"] is None
    block = refusal["budget"]
    assert block["refused"] is True and block["limit"] == 0.1 and block["delta"] == DELTA
    assert {"refused", "path", "would_spend", "limit", "delta", "method"} <= set(block)
    assert block["would_spend"] > 0.1 and block["path"] == str(budget)
    assert block["spent"] == 0.0 and block["charge_index"] is None

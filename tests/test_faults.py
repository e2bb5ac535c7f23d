"""Fault injection: a run cut short leaves the folders it writes holding the complete
previous set of files or the complete new one, never a mix and never a hidden temporary
file; and the environment (encodings, full or closed streams, COLUMNS, a memory limit)
never turns a run into a traceback.

Faults are injected four ways:

- in-process (``run_cli``), by making one OS call of ``pate_cli.files.transaction`` fail on one
  file (a full disk: ENOSPC), or by replacing the votes right after pate read them;
- in a subprocess running pate's ``main()`` behind ``HOOK``, which stops the run at a chosen
  point (before the library call, after the N-th file is staged, after the journal is
  written, after the N-th file is published, before the journal is removed, before the
  tidy-up, as the hashing thread starts) and either waits there for a real signal from
  the test or kills itself with SIGKILL: deterministic moments;
- on ``python -m pate_cli`` itself: signals sent once the run has its votes mapped
  (``/proc/PID/maps``) or is staging (a ``.pate-`` file appears), environment variables,
  ``/dev/full``, a closed stderr and ``RLIMIT_AS``;
- races: pairs of pate processes forked from one warm interpreter (``RACE``), released
  together, so that they meet at the commit.

After every fault: the folder is as before or holds the complete new set (file by file),
no ``.pate-`` file is left (after a recovery, for SIGKILL) and any record present verifies
against the files present (``pate verify --allow-unchecked``: exit 0).
"""

from __future__ import annotations

import errno
import json
import os
import re
import resource
import signal
import subprocess
import sys
import textwrap
import time
from collections.abc import Callable, Iterable
from functools import cache
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from pate_cli.cli import run as cli_run
from pate_cli.errors import ExitCode
from pate_cli.files import transaction
from tests.conftest import MNIST, ROOT, CliResult, run_cli

PATE = [sys.executable, "-m", "pate_cli"]
TIMEOUT = 60  # seconds any one subprocess may take before the test fails
POLL = 0.002
# A fast run: GNMax on a prefix of the MNIST votes (about half a second with start-up).
FAST = ["--sigma", "40", "--delta", "1e-5", "--queries", "2000"]
# A slow one on the big votes: Confident-GNMax on every query (about a second of work).
SLOW = ["--threshold", "200", "--sigma1", "150", "--sigma", "40", "--delta", "1e-6"]
RELEASE = {"labels.npy", "mask.npy", "rec.json"}
SIGNALS = [signal.SIGINT, signal.SIGTERM, signal.SIGHUP]
BIG_ROWS = 250_000  # below the streaming threshold: the votes are memory-mapped
STREAMED_ROWS = 300_000  # above it: read block by block, by path


def _environment(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("COLUMNS", "LINES", "PATE_DEBUG")}
    env.update(extra)
    return env


ENV = _environment()


# ---------------------------------------------------------------------------------------
# Helpers: files, folders, records, processes
# ---------------------------------------------------------------------------------------


def snapshot(folder: Path) -> dict[str, bytes]:
    """Every regular file of ``folder`` (hidden ones included), by name, with its bytes."""
    return {p.name: p.read_bytes() for p in sorted(folder.iterdir()) if p.is_file()}


def leftovers(folder: Path) -> list[str]:
    """pate's temporary files, backups, journals and probes left in ``folder``."""
    return sorted(name for name in os.listdir(folder) if ".pate-" in name)


def cli(args: list[Any], expect: int = ExitCode.OK) -> CliResult:
    """``run_cli`` (pate in-process) with paths and numbers as they come."""
    return run_cli([str(a) for a in args], expect=expect)


def verifies(record: Path) -> None:
    """``pate verify RECORD --allow-unchecked`` exits 0: nothing differs (3, "not all
    checked", counts as 0; 1, "differs", fails)."""
    cli(["verify", record, "--allow-unchecked"])


def assert_before_or_after(
    folder: Path, before: dict[str, bytes], new: Iterable[str], records: Iterable[str] = ()
) -> str:
    """The folder holds exactly its previous files, or the previous ones with the complete
    set ``new`` of the run (added or replaced); no pate temporary; every record present
    verifies. Returns "before" or "after"."""
    assert not leftovers(folder), f"pate files left in {folder}: {leftovers(folder)}"
    after = snapshot(folder)
    new = set(new)
    for name in records:
        if name in after:
            verifies(folder / name)
    if after == before:
        return "before"
    missing = new - after.keys()
    assert not missing, f"a partial set in {folder}: {sorted(after)}, missing {sorted(missing)}"
    assert after.keys() == before.keys() | new, f"unexpected files: {sorted(after)}"
    for name in before.keys() - new:
        assert after[name] == before[name], f"{name} changed but is not the run's"
    changed_records = [n for n in records if n in before and after[n] != before[n]]
    fresh_records = [n for n in records if n not in before and n in after]
    assert changed_records or fresh_records or not records, "new files, but not a new record"
    return "after"


def aggregate_args(votes: Any, folder: Path, *extra: Any, flags: list[str] = FAST) -> list[str]:
    """``pate aggregate`` writing labels.npy, mask.npy and rec.json into ``folder``."""
    return [
        "aggregate",
        str(votes),
        *flags,
        "--output",
        str(folder / "labels.npy"),
        "--answered-output",
        str(folder / "mask.npy"),
        "--record",
        str(folder / "rec.json"),
        *map(str, extra),
    ]


def old_release(folder: Path) -> dict[str, bytes]:
    """A complete earlier release in ``folder`` (labels, mask, record) and a bystander file;
    returns the folder's snapshot."""
    (folder / "notes.txt").write_text("not pate's\n")
    cli(aggregate_args(MNIST, folder))
    verifies(folder / "rec.json")
    return snapshot(folder)


def bystander(folder: Path) -> dict[str, bytes]:
    """A folder holding one file that is not pate's; returns its snapshot."""
    folder.mkdir(exist_ok=True)
    (folder / "notes.txt").write_text("not pate's\n")
    return snapshot(folder)


def one_line(stderr: str) -> str:
    """stderr is exactly one line, without a traceback; returns it."""
    assert "Traceback" not in stderr, stderr
    lines = stderr.strip().splitlines()
    assert len(lines) == 1, f"expected one line on stderr, got:\n{stderr}"
    return lines[0]


def finish(proc: subprocess.Popen[str], timeout: float = TIMEOUT) -> tuple[int, str, str]:
    """Wait for ``proc`` (killing it after ``timeout``); its exit code, stdout and stderr."""
    try:
        out, err = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        proc.kill()
        out, err = proc.communicate()
        pytest.fail(f"still running after {timeout} s; stderr:\n{err[-2000:]}")
    return proc.returncode, out, err


def pate(args: list[Any], timeout: float = TIMEOUT, **kwargs: Any) -> subprocess.CompletedProcess:
    """``python -m pate_cli ARGS``, waited for (at most ``timeout``)."""
    kwargs.setdefault("env", ENV)
    kwargs.setdefault("cwd", ROOT)
    kwargs.setdefault("capture_output", True)
    kwargs.setdefault("text", True)
    return subprocess.run([*PATE, *map(str, args)], timeout=timeout, check=False, **kwargs)


def start(command: list[str], **kwargs: Any) -> subprocess.Popen[str]:
    kwargs.setdefault("env", ENV)
    kwargs.setdefault("cwd", ROOT)
    return subprocess.Popen(
        command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, **kwargs
    )


def wait_until(condition: Callable[[], bool], proc: subprocess.Popen[str], what: str) -> None:
    """Poll ``condition`` while ``proc`` runs; fail when it ended first or took too long."""
    deadline = time.monotonic() + TIMEOUT
    while not condition():
        if proc.poll() is not None:
            out, err = proc.communicate()
            pytest.fail(f"the run ended (exit {proc.returncode}) before {what}:\n{err[-2000:]}")
        if time.monotonic() > deadline:
            proc.kill()
            proc.communicate()
            pytest.fail(f"no {what} after {TIMEOUT} s")
        time.sleep(POLL)


def maps_file(pid: int, path: Path) -> bool:
    """Whether process ``pid`` has ``path`` memory-mapped (pate maps votes below the
    streaming size once it has checked the file and started hashing it)."""
    try:
        return str(path) in Path(f"/proc/{pid}/maps").read_text()
    except OSError:
        return False


def opens_file(pid: int, path: Path) -> bool:
    """Whether process ``pid`` has ``path`` memory-mapped or open."""
    target = str(path)
    try:
        if maps_file(pid, path):
            return True
        for fd in os.listdir(f"/proc/{pid}/fd"):
            try:
                if os.readlink(f"/proc/{pid}/fd/{fd}") == target:
                    return True
            except OSError:
                continue
    except OSError:
        return False
    return False


# The run stopped at a chosen point. argv[1] is a JSON spec: the point and which occurrence
# of it ("nth"), a marker file written when it is reached, and what then happens: "wait"
# (sleep, for the test's signal), "pause" (sleep briefly, then go on) or "kill" (SIGKILL).
HOOK = textwrap.dedent(
    """
    import json, os, signal, sys, time
    spec = json.loads(sys.argv[1])
    from pate_cli.files import transaction
    from pate_cli.cli import run
    from pate_cli.cli.app import main

    seen = {}

    def reached(point):
        seen[point] = seen.get(point, 0) + 1
        if point != spec["point"] or seen[point] != spec.get("nth", 1):
            return
        with open(spec["marker"], "w") as stream:
            stream.write(point)
        if spec["then"] == "kill":
            os.kill(os.getpid(), signal.SIGKILL)
        time.sleep(spec.get("seconds", 60))

    def hook(owner, name, point, when):
        original = getattr(owner, name)

        def hooked(*args, **kwargs):
            if when == "before":
                reached(point)
            result = original(*args, **kwargs)
            if when == "after":
                reached(point)
            return result

        setattr(owner, name, hooked)

    hook(run.Call, "__call__", "compute", "before")
    hook(transaction.Transaction, "stage", "staged", "after")
    hook(transaction.Transaction, "stage_path", "staged", "after")
    hook(transaction.Transaction, "_journals", "journal", "after")
    hook(transaction.Transaction, "_publish", "published", "after")
    hook(transaction.Transaction, "_tidy", "tidy", "before")
    unlink = os.unlink

    def unlinked(path, *args, **kwargs):
        if str(path).endswith(".journal"):
            reached("unlink-journal")
        return unlink(path, *args, **kwargs)

    os.unlink = unlinked
    import threading
    start_thread = threading.Thread.start

    def started(self, *args, **kwargs):
        start_thread(self, *args, **kwargs)
        if self.name.startswith("pate-sha256"):
            reached("hash-thread")

    threading.Thread.start = started
    sys.argv = ["pate", *sys.argv[2:]]
    main()
    """
)


def start_hooked(
    tmp_path: Path, args: list[str], point: str, then: str, nth: int = 1, seconds: float = 60
) -> tuple[subprocess.Popen[str], Path]:
    """pate ``args`` in a subprocess stopped at ``point`` (see HOOK); and its marker."""
    marker = tmp_path / f"reached-{point}-{nth}"
    spec = {"point": point, "nth": nth, "then": then, "marker": str(marker), "seconds": seconds}
    return start([sys.executable, "-c", HOOK, json.dumps(spec), *args]), marker


def exit_of(signum: int) -> int:
    return 128 + int(signum)


@cache
def _sampled(rows: int, seed: int) -> np.ndarray:
    """``rows`` queries drawn from the MNIST votes (a big votes file, made once)."""
    votes = np.load(MNIST, allow_pickle=False)
    return votes[np.random.default_rng(seed).integers(0, len(votes), rows)]


def big_votes(folder: Path, name: str = "big.npy", rows: int = BIG_ROWS, seed: int = 0) -> Path:
    path = folder / name
    np.save(path, _sampled(rows, seed))
    return path


# ---------------------------------------------------------------------------------------
# 1. A file that cannot be written: exit 2, the folder as before, a rerun succeeds
# ---------------------------------------------------------------------------------------


def _fd_name(fd: int) -> str:
    return os.path.basename(os.readlink(f"/proc/self/fd/{fd}"))


def _disk_full(*args: Any) -> OSError:
    return OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), *args[:1])


def _temporary_of(target: str) -> Callable[..., bool]:
    """Whether a link or rename moves this run's temporary of ``target`` into place."""
    return lambda src, dst, *a, **k: _is_temporary_of(os.path.basename(src), target)


def _is_temporary_of(name: str, target: str) -> bool:
    return re.fullmatch(r"\.pate-\d+-[0-9a-f]+\.tmp\d+\." + re.escape(target), name) is not None


FAILURES: dict[str, tuple[str, Callable[..., bool]]] = {
    # the record's temporary file cannot be synced (staging)
    "fsync-record": ("fsync", lambda fd: _is_temporary_of(_fd_name(fd), "rec.json")),
    # the journal cannot be synced (commit, before any file is made visible)
    "fsync-journal": ("fsync", lambda fd: _fd_name(fd).endswith(".journal")),
    # the labels cannot be linked into place (the first step of the commit)
    "link-labels": ("link", _temporary_of("labels.npy")),
    # the record cannot be linked into place: labels and mask are visible already
    "link-record": ("link", _temporary_of("rec.json")),
    # --force: the record cannot be renamed over the old one; labels and mask replaced
    "replace-record": ("replace", _temporary_of("rec.json")),
    # --force: the mask cannot be renamed over the old one; the labels replaced
    "replace-mask": ("replace", _temporary_of("mask.npy")),
}


@pytest.mark.parametrize("failure", sorted(FAILURES))
def test_a_file_that_cannot_be_written_leaves_the_folder_as_it_was(
    failure: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    call, matches = FAILURES[failure]
    folder = tmp_path / "out"
    folder.mkdir()
    force = call == "replace"
    before = old_release(folder) if force else bystander(folder)
    original = getattr(os, call)
    failed = []

    def broken(*args: Any, **kwargs: Any) -> Any:
        if matches(*args, **kwargs):
            failed.append(args)
            raise _disk_full(*args)
        return original(*args, **kwargs)

    monkeypatch.setattr(transaction.os, call, broken)  # transaction.os is os
    args = aggregate_args(MNIST, folder, *(["--force"] if force else []))
    result = cli(args, expect=ExitCode.BAD_INPUT)
    assert failed, f"os.{call} was never asked for the faulty file"
    line = one_line(result.stderr)
    assert "cannot write" in line and "nothing was written" in line, line
    assert snapshot(folder) == before
    assert not leftovers(folder)
    if force:
        verifies(folder / "rec.json")  # the old record still verifies against the old files

    monkeypatch.undo()
    cli(args)  # without --force when there was nothing: the failed run left nothing
    assert assert_before_or_after(folder, before, RELEASE, ["rec.json"]) == "after"


# A full disk, a quota or a read-only file system where a writer of its own fills a file
# (the labels, the ledger: write_atomic's temporary, inside the transaction's) or where the
# commit writes its journal: the line names the output as the user gave it, never a hidden
# temporary.
HIDDEN = [
    ("aggregate", "labels.npy", errno.ENOSPC),
    ("aggregate", "labels.npy", errno.EDQUOT),
    ("aggregate", ".journal", errno.EROFS),
    ("analyze", "ledger.csv", errno.ENOSPC),
]


@pytest.mark.parametrize(("command", "hidden", "code"), HIDDEN)
def test_a_full_disk_names_the_output_never_a_temporary(
    command: str, hidden: str, code: int, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "out").mkdir()
    original = os.fsync
    failed = []

    def broken(fd: int) -> None:
        if ".pate-" in (name := _fd_name(fd)) and hidden in name:
            failed.append(name)
            raise OSError(code, os.strerror(code))
        original(fd)

    monkeypatch.setattr(transaction.os, "fsync", broken)  # transaction.os is os
    if command == "aggregate":
        target = "out/labels.npy"
        args = ["aggregate", MNIST, *FAST, "--output", target, "--record", "out/rec.json"]
    else:
        target = "out/ledger.csv"
        args = ["analyze", MNIST, *FAST, "--no-release", "--ledger", target]
    result = cli(args, expect=ExitCode.BAD_INPUT)
    assert failed, f"no {hidden} was written"
    assert one_line(result.stderr) == (
        f"pate: error: {target}: cannot write the output file ({os.strerror(code)}); "
        "nothing was written"
    )
    assert os.listdir(tmp_path / "out") == []


# ---------------------------------------------------------------------------------------
# 2. SIGINT, SIGTERM, SIGHUP: exit 128 + the signal, nothing of the run left
# ---------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("point", "nth", "signum"),
    [
        ("compute", 1, signal.SIGINT),
        ("compute", 1, signal.SIGTERM),
        ("compute", 1, signal.SIGHUP),
        ("staged", 1, signal.SIGHUP),
        ("staged", 2, signal.SIGTERM),
        ("staged", 3, signal.SIGINT),
    ],
    ids=lambda value: getattr(value, "name", str(value)),
)
def test_a_signal_before_the_commit_leaves_nothing(
    signum: signal.Signals, point: str, nth: int, tmp_path: Path
) -> None:
    """Stopped before the library call, or with 1, 2 or 3 files staged (temporaries beside
    the targets), the run is signalled: it exits 128 + the signal and removes them."""
    folder = tmp_path / "out"
    before = bystander(folder)
    proc, marker = start_hooked(tmp_path, aggregate_args(MNIST, folder), point, "wait", nth)
    wait_until(marker.exists, proc, f"the point {point} #{nth}")
    if point == "staged":
        assert len(leftovers(folder)) == nth, leftovers(folder)  # the staged temporaries
    proc.send_signal(signum)
    code, out, err = finish(proc)
    assert code == exit_of(signum), err
    assert one_line(err) == f"pate: interrupted ({signum.name})"
    assert out == ""
    assert snapshot(folder) == before
    assert not leftovers(folder)


@pytest.mark.parametrize("signum", SIGNALS, ids=lambda s: s.name)
def test_a_signal_while_the_run_reads_its_votes_leaves_nothing(
    signum: signal.Signals, tmp_path: Path
) -> None:
    """``python -m pate_cli aggregate`` on a big votes file, signalled once it has the
    votes mapped (the work then takes most of a second more)."""
    folder = tmp_path / "out"
    before = bystander(folder)
    votes = big_votes(tmp_path)
    proc = start([*PATE, *aggregate_args(votes, folder, flags=SLOW)])
    wait_until(lambda: maps_file(proc.pid, votes), proc, "the votes mapped")
    proc.send_signal(signum)
    code, out, err = finish(proc)
    assert code == exit_of(signum), err
    assert one_line(err) == f"pate: interrupted ({signum.name})"
    assert snapshot(folder) == before
    assert not leftovers(folder)


def test_a_signal_as_the_hashing_thread_starts_still_exits(tmp_path: Path) -> None:
    """The signal lands right after the votes' sha256 thread was started (the hook waits
    there): the run must still exit 143, within seconds."""
    folder = tmp_path / "out"
    before = bystander(folder)
    proc, marker = start_hooked(tmp_path, aggregate_args(MNIST, folder), "hash-thread", "wait")
    wait_until(marker.exists, proc, "the hashing thread started")
    proc.send_signal(signal.SIGTERM)
    code, _, err = finish(proc, timeout=5)
    assert code == exit_of(signal.SIGTERM), err
    assert snapshot(folder) == before
    assert not leftovers(folder)


def stands(code: int, err: str, signum: signal.Signals = signal.SIGTERM) -> None:
    """A signal held during a commit that succeeded: the release stands, and the run says so
    (exit 5, its last line) unless the signal came after all its output (exit 0, nothing
    said)."""
    assert code in (0, ExitCode.INTERRUPTED_COMMITTED), err
    if code:
        said = f"pate: interrupted ({signum.name}) after the release was committed: "
        assert err.strip().splitlines()[-1].startswith(said), err


def test_a_signal_during_the_commit_is_held_back(tmp_path: Path) -> None:
    """Signalled after the first file was made visible: the signal waits until the set is
    complete (the module docstring of pate_cli.files.transaction); the release then stands
    and the run says so; the new set is whole."""
    folder = tmp_path / "out"
    before = bystander(folder)
    args = aggregate_args(MNIST, folder)
    proc, marker = start_hooked(tmp_path, args, "published", "pause", 1, seconds=0.25)
    wait_until(marker.exists, proc, "the first file published")
    proc.send_signal(signal.SIGTERM)
    code, _, err = finish(proc)
    stands(code, err)
    assert assert_before_or_after(folder, before, RELEASE, ["rec.json"]) == "after"


def test_a_signal_held_during_the_commit_keeps_the_budget_charge(tmp_path: Path) -> None:
    """The release is out when the held signal is delivered: its charge stays in the budget
    (taking it back would leave a release that no budget counts)."""
    folder = tmp_path / "out"
    before = bystander(folder)
    budget = tmp_path / "b.jsonl"
    init = pate(["budget", "init", budget, "--delta", "1e-5", "--max-epsilon", "100"])
    assert init.returncode == 0, init.stderr
    args = aggregate_args(MNIST, folder, "--budget", budget)
    proc, marker = start_hooked(tmp_path, args, "published", "pause", 1, seconds=0.25)
    wait_until(marker.exists, proc, "the first file published")
    proc.send_signal(signal.SIGTERM)
    code, _, err = finish(proc)
    stands(code, err)
    assert assert_before_or_after(folder, before, RELEASE, ["rec.json"]) == "after"
    assert len(budget.read_text().splitlines()) == 2  # the header and this run's charge
    head = json.loads(budget.read_text().splitlines()[-1])["digest"]  # published after it
    audit = pate(["verify", budget, "--records", folder, "--head", head])
    assert audit.returncode == 0, audit.stdout + audit.stderr


@pytest.mark.parametrize(
    ("point", "nth", "force", "signum"),
    [
        ("published", 1, False, signal.SIGINT),
        ("published", 2, True, signal.SIGHUP),
        ("published", 3, True, signal.SIGTERM),
        ("tidy", 1, True, signal.SIGTERM),
        ("unlink-journal", 1, True, signal.SIGINT),
    ],
    ids=lambda value: getattr(value, "name", str(value)),
)
def test_a_signal_during_the_commit_leaves_a_whole_set_and_no_pate_file(
    point: str, nth: int, force: bool, signum: signal.Signals, tmp_path: Path
) -> None:
    """Signalled while the commit is at ``point`` (paused there a quarter of a second): the folder
    holds the whole new set (the signal held to the end of the commit), and no pate file."""
    folder = tmp_path / "out"
    folder.mkdir()
    before = old_release(folder) if force else bystander(folder)
    args = aggregate_args(MNIST, folder, *(["--force"] if force else []))
    proc, marker = start_hooked(tmp_path, args, point, "pause", nth, seconds=0.25)
    wait_until(marker.exists, proc, f"the point {point} #{nth}")
    proc.send_signal(signum)
    code, _, err = finish(proc)
    stands(code, err, signum)
    assert "Traceback" not in err
    assert assert_before_or_after(folder, before, RELEASE, ["rec.json"]) == "after"


# ---------------------------------------------------------------------------------------
# 3. SIGKILL: whatever is left is rolled back or removed by the next commit (or recover)
# ---------------------------------------------------------------------------------------

KILL_POINTS = [
    # (point, nth, --force, what the folder holds after recovery: "before", "after", "either")
    ("journal", 1, False, "before"),  # the journal written, nothing visible
    ("published", 1, False, "before"),  # the labels linked into place
    ("published", 3, False, "either"),  # all linked, the journal not yet removed
    ("tidy", 1, False, "after"),  # the journal removed
    ("staged", 3, True, "before"),  # every file staged, nothing visible
    ("journal", 1, True, "before"),
    ("published", 1, True, "before"),  # the labels replaced (the old ones backed up)
    ("published", 2, True, "before"),  # labels and mask replaced, not the record
    ("published", 3, True, "either"),
    ("tidy", 1, True, "after"),  # the journal removed, the backups left
]


@pytest.mark.parametrize(
    ("point", "nth", "force", "expected"),
    KILL_POINTS,
    ids=[f"{p}-{n}-{'force' if f else 'new'}" for p, n, f, _ in KILL_POINTS],
)
def test_sigkill_then_recover(
    point: str, nth: int, force: bool, expected: str, tmp_path: Path
) -> None:
    """Killed at ``point``; the folder holds the old or the new set after
    ``pate_cli.files.transaction.recover`` (as the next commit there would do first)."""
    folder = tmp_path / "out"
    folder.mkdir()
    before = old_release(folder) if force else bystander(folder)
    args = aggregate_args(MNIST, folder, *(["--force"] if force else []))
    proc, marker = start_hooked(tmp_path, args, point, "kill", nth)
    code, _, err = finish(proc)
    assert code == -signal.SIGKILL, err
    assert marker.exists()
    left = leftovers(folder)
    if point in ("published", "journal"):
        assert any(name.endswith(".journal") for name in left), left
    if point in ("staged", "published") or (point == "tidy" and force):
        assert left, "a killed run leaves its temporaries (or backups)"

    transaction.recover(str(folder))
    state = assert_before_or_after(folder, before, RELEASE, ["rec.json"])
    assert expected in ("either", state), f"{state}, expected {expected}"


def test_sigkill_is_recovered_by_the_next_pate_commit(tmp_path: Path) -> None:
    """Killed mid-commit with --force over an old release (labels already replaced): the
    next pate run committing into that folder (other names) restores the old files."""
    folder = tmp_path / "out"
    folder.mkdir()
    before = old_release(folder)
    args = aggregate_args(MNIST, folder, "--force")
    proc, _ = start_hooked(tmp_path, args, "published", "kill", 1)
    assert finish(proc)[0] == -signal.SIGKILL
    assert (folder / "labels.npy").read_bytes() != before["labels.npy"]  # half a release
    assert leftovers(folder)

    other = [
        "aggregate",
        MNIST,
        *FAST,
        "--output",
        folder / "labels2.npy",
        "--record",
        folder / "rec2.json",
    ]
    result = pate(other)
    assert result.returncode == 0, result.stderr
    assert not leftovers(folder)
    after = snapshot(folder)
    assert {k: after[k] for k in before} == before  # the old release, restored
    assert set(after) == set(before) | {"labels2.npy", "rec2.json"}
    verifies(folder / "rec.json")
    verifies(folder / "rec2.json")


def test_sigkill_when_the_first_temporary_appears(tmp_path: Path) -> None:
    """``python -m pate_cli aggregate --force --public`` over an old release, killed with
    SIGKILL as soon as a staged file shows in the folder (not the write probe, which
    comes before any work): recover() removes what it left, the old release stays."""
    folder = tmp_path / "out"
    folder.mkdir()
    before = old_release(folder)
    votes = big_votes(tmp_path)
    proc = start([*PATE, *aggregate_args(votes, folder, "--force", "--public", flags=SLOW)])

    def staging() -> bool:
        return any(not name.endswith(".probe") for name in leftovers(folder))

    wait_until(staging, proc, "a staged .pate- file")
    proc.kill()
    assert finish(proc)[0] == -signal.SIGKILL
    assert leftovers(folder)
    transaction.recover(str(folder))
    new = RELEASE | {"rec.opening.json"}
    assert_before_or_after(folder, before, new, ["rec.json"])


# ---------------------------------------------------------------------------------------
# 4. --force interrupted: the old release stays byte for byte
# ---------------------------------------------------------------------------------------


@pytest.mark.parametrize(("point", "nth"), [("compute", 1), ("staged", 1), ("staged", 3)])
def test_an_interrupted_force_keeps_the_old_release(point: str, nth: int, tmp_path: Path) -> None:
    folder = tmp_path / "out"
    folder.mkdir()
    before = old_release(folder)
    args = aggregate_args(MNIST, folder, "--force")
    proc, marker = start_hooked(tmp_path, args, point, "wait", nth)
    wait_until(marker.exists, proc, f"the point {point} #{nth}")
    proc.send_signal(signal.SIGINT)
    code, _, err = finish(proc)
    assert code == ExitCode.INTERRUPTED, err
    assert snapshot(folder) == before
    assert not leftovers(folder)
    verifies(folder / "rec.json")


def test_an_interrupted_force_of_python_m_pate_keeps_the_old_release(tmp_path: Path) -> None:
    folder = tmp_path / "out"
    folder.mkdir()
    before = old_release(folder)
    votes = big_votes(tmp_path)
    proc = start([*PATE, *aggregate_args(votes, folder, "--force", flags=SLOW)])
    wait_until(lambda: maps_file(proc.pid, votes), proc, "the votes mapped")
    proc.send_signal(signal.SIGINT)
    code, _, err = finish(proc)
    assert code == ExitCode.INTERRUPTED, err
    assert snapshot(folder) == before
    assert not leftovers(folder)
    verifies(folder / "rec.json")


# ---------------------------------------------------------------------------------------
# 5. Two runs racing for one release
# ---------------------------------------------------------------------------------------


# Races without paying an interpreter start-up per run: the driver imports pate once, then
# for each folder forks two children that wait on one pipe and run pate's main() together.
# argv[1]: JSON {"folders": [...], "logs": folder}; argv[2:]: the command line, where
# "{folder}" stands for each folder. Prints the exit codes, one pair per folder.
RACE = textwrap.dedent(
    """
    import importlib, json, os, pkgutil, sys
    import pate_cli
    modules = [m.name for m in pkgutil.walk_packages(pate_cli.__path__, "pate_cli.")]
    # and what the parser loads on first use (typer's pydantic adapters)
    for name in [*modules, "pydantic", "typer._adapters", "zoneinfo"]:
        if not name.endswith("__main__"):
            try:
                importlib.import_module(name)
            except ImportError:
                pass
    from pate_cli.cli.app import main

    spec = json.loads(sys.argv[1])
    template = sys.argv[2:]
    results = []
    for attempt, folder in enumerate(spec["folders"]):
        go, ready = os.pipe()
        children = []
        sys.stdout.flush()
        sys.stderr.flush()
        for racer in range(2):
            pid = os.fork()
            if pid == 0:
                os.close(ready)
                log = os.path.join(spec["logs"], f"{attempt}-{racer}.err")
                os.dup2(os.open(log, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644), 2)
                os.dup2(os.open(os.devnull, os.O_WRONLY), 1)
                os.read(go, 1)
                sys.argv = ["pate", *(a.replace("{folder}", folder) for a in template)]
                code = 70
                try:
                    main()
                    code = 0
                except SystemExit as stop:
                    code = stop.code if isinstance(stop.code, int) else int(stop.code is not None)
                finally:
                    os._exit(code)
            children.append(pid)
        os.close(go)
        os.write(ready, b"go")
        os.close(ready)
        results.append([os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1]) for pid in children])
    print(json.dumps(results))
    """
)


def _check_race(folder: Path, codes: list[int], errors: list[str]) -> str:
    """Exactly one racer published; the other left nothing of its own. Returns where the
    loser was stopped."""
    assert sorted(codes) == [0, 2], list(zip(codes, errors, strict=True))
    loser = errors[codes.index(2)]
    assert "exists" in one_line(loser)
    assert not leftovers(folder)
    assert set(os.listdir(folder)) == RELEASE
    verifies(folder / "rec.json")
    return "at the commit" if "another run" in loser else "before any work"


RACE_FLAGS = ["--sigma", "40", "--delta", "1e-5", "--queries", "300"]


def test_twenty_races_publish_exactly_one_release_each(tmp_path: Path) -> None:
    """20 pairs of runs without --force racing for one --output and --record: exactly one
    exits 0, its record verifies, the other exits 2 and leaves nothing."""
    folders = [tmp_path / f"try{attempt}" for attempt in range(20)]
    for folder in folders:
        folder.mkdir()
    logs = tmp_path / "logs"
    logs.mkdir()
    spec = {"folders": [str(f) for f in folders], "logs": str(logs)}
    template = aggregate_args(MNIST, Path("{folder}"), flags=RACE_FLAGS)
    driver = start([sys.executable, "-c", RACE, json.dumps(spec), *template])
    code, out, err = finish(driver)
    assert code == 0, err
    results = json.loads(out)
    where = []
    for attempt, (folder, codes) in enumerate(zip(folders, results, strict=True)):
        errors = [(logs / f"{attempt}-{racer}.err").read_text() for racer in range(2)]
        where.append(_check_race(folder, codes, errors))
    assert "at the commit" in where  # the runs did race for the folder, not only start


def test_two_racing_python_m_pate_runs_publish_exactly_one_release(tmp_path: Path) -> None:
    """The same with two ``python -m pate_cli`` processes (start-up included)."""
    folder = tmp_path / "out"
    folder.mkdir()
    args = [*PATE, *aggregate_args(MNIST, folder, flags=RACE_FLAGS)]
    results = [finish(proc) for proc in [start(args) for _ in range(2)]]
    _check_race(folder, [r[0] for r in results], [r[2] for r in results])


# ---------------------------------------------------------------------------------------
# 6. An input replaced or truncated while pate reads it
# ---------------------------------------------------------------------------------------


def _after_loading(monkeypatch: pytest.MonkeyPatch, then: Callable[[], object]) -> list[int]:
    """Make the run do ``then`` right after it read the votes; returns the call count."""
    original = cli_run.Selection.load
    calls: list[int] = []

    def load(self: cli_run.Selection) -> Any:
        votes = original(self)
        calls.append(1)
        then()
        return votes

    monkeypatch.setattr(cli_run.Selection, "load", load)
    return calls


@pytest.mark.parametrize("change", ["replace", "truncate", "rewrite"])
@pytest.mark.parametrize("command", ["aggregate", "analyze"])
def test_votes_changed_after_reading_write_nothing(
    change: str, command: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    votes = tmp_path / "votes.npy"
    np.save(votes, np.load(MNIST))
    other = tmp_path / "other.npy"
    np.save(other, np.load(MNIST)[::-1])
    folder = tmp_path / "out"
    before = bystander(folder)

    def meddle() -> None:
        if change == "replace":
            os.replace(other, votes)
        elif change == "truncate":
            os.truncate(votes, 128)
        else:  # the same bytes written again in place: a new mtime
            data = votes.read_bytes()
            time.sleep(0.01)
            votes.write_bytes(data)

    calls = _after_loading(monkeypatch, meddle)
    args: list[Any] = aggregate_args(votes, folder)
    if command == "analyze":
        args = ["analyze", votes, *FAST, "--ledger", folder / "L.csv"]
        args += ["--record", folder / "rec.json"]
    result = cli(args, expect=ExitCode.BAD_INPUT)
    assert calls == [1]
    assert "the file changed while pate read it" in one_line(result.stderr)
    assert snapshot(folder) == before
    assert not leftovers(folder)


def test_streamed_votes_replaced_between_blocks_write_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A big file is read block by block, reopened by path: replaced after the first block,
    the rest would come from another file."""
    from pate_cli.votes import stream

    votes = big_votes(tmp_path, "votes.npy", STREAMED_ROWS, seed=1)
    other = big_votes(tmp_path, "other.npy", STREAMED_ROWS, seed=2)
    folder = tmp_path / "out"
    before = bystander(folder)
    original = stream.NpySource.rows
    reads: list[int] = []

    def rows(self: Any, start: int, stop: int) -> Any:
        block = original(self, start, stop)
        reads.append(start)
        if len(reads) == 1:
            os.replace(other, votes)
        return block

    monkeypatch.setattr(stream.NpySource, "rows", rows)
    result = cli(aggregate_args(votes, folder, flags=["--sigma", "40", "--delta", "1e-7"]), 2)
    assert len(reads) > 1
    assert "changed while" in one_line(result.stderr)
    assert snapshot(folder) == before
    assert not leftovers(folder)


def test_votes_replaced_during_a_real_analyze(tmp_path: Path) -> None:
    """``python -m pate_cli analyze`` on a streamed file, replaced (os.replace) as soon as
    the run has it open: exit 2 and no record, or (replaced before pate looked at it) a
    record of the new file that verifies."""
    votes = big_votes(tmp_path, "votes.npy", STREAMED_ROWS, seed=1)
    other = big_votes(tmp_path, "other.npy", STREAMED_ROWS, seed=2)
    folder = tmp_path / "out"
    before = bystander(folder)
    args = ["analyze", votes, *SLOW, "--no-release", "--record", folder / "rec.json"]
    proc = start([*PATE, *map(str, args)])
    wait_until(lambda: opens_file(proc.pid, votes), proc, "the votes open")
    os.replace(other, votes)
    code, _, err = finish(proc)
    if code == ExitCode.BAD_INPUT:
        assert "changed while" in one_line(err), err
        assert snapshot(folder) == before
    else:
        assert code == 0, err
        assert assert_before_or_after(folder, before, {"rec.json"}, ["rec.json"]) == "after"
    assert not leftovers(folder)


# ---------------------------------------------------------------------------------------
# 7. The environment
# ---------------------------------------------------------------------------------------


def test_an_ascii_terminal_gets_the_file_name_escaped(tmp_path: Path) -> None:
    name = "stimmen-\u00fc.npy"
    np.save(tmp_path / name, np.load(MNIST)[:500])
    result = pate(
        ["analyze", name, "--sigma", "40", "--delta", "1e-5", "--no-release"],
        cwd=tmp_path,
        env=_environment(PYTHONIOENCODING="ascii", LC_ALL="C"),
        text=False,
    )
    assert result.returncode == 0, result.stderr.decode(errors="replace")
    assert b"Traceback" not in result.stderr
    stdout = result.stdout.decode("ascii")  # nothing but ASCII
    assert re.search(r"stimmen-\\(xfc|u00fc|xc3\\xbc)\.npy", stdout), stdout


@pytest.mark.parametrize(
    "command",
    [
        "analyze",
        "aggregate",
        "json",
    ],
)
def test_a_full_stdout_is_one_line_and_exit_74(command: str, tmp_path: Path) -> None:
    folder = tmp_path / "out"
    before = bystander(folder)
    args: list[Any] = aggregate_args(MNIST, folder)
    if command != "aggregate":
        args = ["analyze", MNIST, *FAST, "--no-release", *(["--json"] if command == "json" else [])]
    with open("/dev/full", "w") as full:
        result = pate(args, stdout=full, stderr=subprocess.PIPE, capture_output=False)
    assert result.returncode == ExitCode.STREAM, result.stderr
    assert "stdout" in one_line(result.stderr)
    # Whether the report fails before or after the commit, the files are whole.
    new = RELEASE if command == "aggregate" else set()
    assert_before_or_after(folder, before, new, ["rec.json"])


def _close_stderr() -> None:
    os.close(2)


def test_a_closed_stderr_changes_nothing(tmp_path: Path) -> None:
    """``2>&-``: a release with its record is written and verifies, the report is on
    stdout; a run that warns (--delta above 1/queries) still exits 0; a failing run still
    exits 2."""
    folder = tmp_path / "out"
    before = bystander(folder)
    closed: dict[str, Any] = {
        "stderr": None,
        "capture_output": False,
        "stdout": subprocess.PIPE,
        "preexec_fn": _close_stderr,
    }
    result = pate(aggregate_args(MNIST, folder), **closed)
    assert result.returncode == 0
    assert "labels written to" in result.stdout and "Privacy cost" in result.stdout
    assert assert_before_or_after(folder, before, RELEASE, ["rec.json"]) == "after"
    assert np.load(folder / "labels.npy").shape == (2000,)
    warning = ["analyze", MNIST, "--queries", "500", "--sigma", "40", "--delta", "1e-2"]
    warns = pate([*warning, "--no-release", "--ledger", folder / "L.csv"], **closed)
    assert warns.returncode == 0
    assert "publishable" in warns.stdout
    assert (folder / "L.csv").stat().st_size > 0
    failing = pate(["analyze", tmp_path / "missing.npy", *FAST], **closed)
    assert failing.returncode == ExitCode.BAD_INPUT
    assert failing.stdout == ""


def test_a_record_whose_run_warned_verifies(tmp_path: Path) -> None:
    folder = tmp_path / "out"
    folder.mkdir()
    flags = ["--sigma", "40", "--delta", "1e-2", "--queries", "2000"]
    result = cli(aggregate_args(MNIST, folder, flags=flags))
    assert "above 1/num_queries" in result.stderr
    verifies(folder / "rec.json")


COLUMN_COMMANDS = {
    "inspect": ["inspect", MNIST, "--queries", "500"],
    "analyze": [
        "analyze",
        MNIST,
        "--queries",
        "500",
        "--sigma",
        "40",
        "--delta",
        "1e-5",
        "--no-release",
    ],
    "aggregate": [
        "aggregate",
        MNIST,
        "--queries",
        "500",
        "--sigma",
        "40",
        "--delta",
        "1e-5",
        "--seed",
        "1",
        "--output",
        "labels.npy",
    ],
}


def test_columns_zero_or_nonsense_give_the_normal_tables(tmp_path: Path) -> None:
    """COLUMNS=0 and COLUMNS=abc: ignored, so the same report either way and the same as
    without COLUMNS (off a terminal: natural width, nothing wrapped), for analyze, aggregate
    and inspect."""
    procs = {}
    runs = [("inspect", "0"), ("analyze", "abc"), ("aggregate", "0"), ("aggregate", "abc")]
    for command, columns in runs:
        where = tmp_path / f"{command}-{columns}"
        where.mkdir()
        env = _environment(COLUMNS=columns)
        procs[command, columns] = start(
            [*PATE, *map(str, COLUMN_COMMANDS[command])], env=env, cwd=where
        )
    results = {key: finish(proc) for key, proc in procs.items()}
    for (command, columns), (code, out, err) in results.items():
        assert code == 0, (command, columns, err)
        assert "Traceback" not in err
        lines = out.splitlines()
        assert len(lines) > 5 and "\u2501" in out, (command, columns, out)  # a table's rule
        assert max(map(len, lines)) >= 60, (command, columns, out)
        assert all(line == line.rstrip() for line in lines)
    assert results["aggregate", "0"][1] == results["aggregate", "abc"][1]


def _vm_peak_kib(args: list[Any], cwd: Path) -> int:
    """The peak virtual memory of a pate run (its main() in a fresh interpreter)."""
    report = cwd / "vmpeak"
    script = textwrap.dedent(
        f"""
        import atexit, re, sys
        def peak():
            status = open("/proc/self/status").read()
            open({str(report)!r}, "w").write(re.search(r"VmPeak:\\s+(\\d+)", status).group(1))
        atexit.register(peak)
        sys.argv = ["pate", *sys.argv[1:]]
        from pate_cli.cli.app import main
        main()
        """
    )
    result = subprocess.run(
        [sys.executable, "-c", script, *map(str, args)],
        cwd=cwd,
        env=ENV,
        capture_output=True,
        text=True,
        timeout=TIMEOUT,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    return int(report.read_text())


def _limited(megabytes: int, args: list[Any], cwd: Path) -> tuple[int | str, str]:
    """``python -m pate_cli ARGS`` with RLIMIT_AS at ``megabytes``: exit code (or "hang")
    and stderr."""
    limit = megabytes << 20

    def preexec() -> None:
        resource.setrlimit(resource.RLIMIT_AS, (limit, limit))

    proc = start([*PATE, *map(str, args)], cwd=cwd, preexec_fn=preexec)
    try:
        _, err = proc.communicate(timeout=20)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.communicate()
        return "hang", ""
    return proc.returncode, err


OPENBLAS_GIVES_UP = "OpenBLAS error: Memory allocation still failed"


def _out_of_memory(outcome: tuple[int | str, str]) -> bool:
    code, err = outcome
    return code == ExitCode.BAD_INPUT and "out of memory" in err


def test_out_of_memory_is_one_line_and_writes_nothing(tmp_path: Path) -> None:
    """RLIMIT_AS a little above what a small run of the same command needs (so Python,
    numpy and scipy load): 100,000 Renyi orders need 3 GB of work arrays, which fail."""
    folder = tmp_path / "out"
    before = bystander(folder)
    orders = ["--sigma", "40", "--delta", "1e-5", "--orders"]
    small = _vm_peak_kib(
        ["aggregate", MNIST, *orders, "2:100:1", "--queries", "10", "--output", tmp_path / "s.npy"],
        tmp_path,
    )
    args = aggregate_args(MNIST, folder, flags=[*orders, "2:100000:1", "--queries", "2000"])
    seen = []
    for megabytes in range(small // 1024 + 100, small // 1024 + 1100, 250):
        outcome = _limited(megabytes, args, tmp_path)
        seen.append((megabytes, outcome[0], outcome[1][-300:]))
        if _out_of_memory(outcome) or outcome[0] == 0:
            break
    code, err = outcome
    assert _out_of_memory(outcome), seen
    line = one_line(err)
    assert line.startswith("pate: error: out of memory (") and "--queries" in line
    assert snapshot(folder) == before
    assert not leftovers(folder)


def test_no_memory_limit_turns_analyze_into_a_traceback(tmp_path: Path) -> None:
    """Lower RLIMIT_AS from what ``pate analyze`` on the MNIST votes needs, 25 MB at a time
    over 175 MB: each run passes, or fails as out of memory (exit 2, one line)."""
    args = ["analyze", MNIST, "--sigma", "40", "--delta", "1e-5"]
    peak = _vm_peak_kib(args, tmp_path) // 1024
    for megabytes in range(peak - 25, peak - 200, -25):
        code, err = outcome = _limited(megabytes, args, tmp_path)
        if code == 0 or OPENBLAS_GIVES_UP in err:
            # OpenBLAS, out of memory for its buffers, ends the process itself (exit 1, its
            # own message) in native code, where pate cannot intercept it (README, "Files").
            continue
        assert "Traceback" not in err, f"at {megabytes} MB: exit {code}\n{err[-1500:]}"
        assert _out_of_memory(outcome), f"at {megabytes} MB: exit {code}\n{err[-1500:]}"
        one_line(err)


# ---------------------------------------------------------------------------------------
# 8. An output that cannot be written is refused before any work
# ---------------------------------------------------------------------------------------


def _spy_on_loading(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    return _after_loading(monkeypatch, lambda: None)


@pytest.mark.skipif(os.geteuid() == 0, reason="root writes into a read-only folder")
def test_a_read_only_folder_is_refused_before_the_votes_are_read(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    folder = tmp_path / "out"
    before = bystander(folder)
    seed_file = tmp_path / "seed"
    calls = _spy_on_loading(monkeypatch)
    folder.chmod(0o555)
    try:
        args = aggregate_args(MNIST, folder, "--seed-file", seed_file)
        result = cli(args, expect=ExitCode.BAD_INPUT)
    finally:
        folder.chmod(0o755)
    assert "read-only" in one_line(result.stderr)
    assert calls == []
    assert not seed_file.exists()
    assert snapshot(folder) == before


def test_a_folder_that_takes_no_new_file_is_refused_before_the_votes_are_read(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The folder refuses every new file (EACCES from os.open, as a read-only folder does
    for a user other than root): refused before the votes are read and any noise drawn:
    no seed file, no labels, nothing in the folder."""
    folder = tmp_path / "out"
    before = bystander(folder)
    seed_file = tmp_path / "seed"
    calls = _spy_on_loading(monkeypatch)
    real_open = os.open

    def refuse(path: Any, flags: int, *args: Any, **kwargs: Any) -> int:
        if flags & os.O_CREAT and os.path.dirname(os.path.abspath(path)) == str(folder):
            raise PermissionError(errno.EACCES, os.strerror(errno.EACCES), path)
        return real_open(path, flags, *args, **kwargs)

    monkeypatch.setattr(os, "open", refuse)
    for args in (
        aggregate_args(MNIST, folder, "--seed-file", seed_file),
        ["analyze", MNIST, *FAST, "--seed-file", seed_file, "--ledger", folder / "L.csv"],
    ):
        result = cli(args, expect=ExitCode.BAD_INPUT)
        line = one_line(result.stderr)
        assert "cannot write in" in line and str(folder) in line, line
    assert calls == []
    assert not seed_file.exists()
    assert snapshot(folder) == before


@pytest.mark.parametrize("flag", ["--output", "--answered-output", "--record"])
def test_an_output_below_a_regular_file_is_refused_before_any_work(
    flag: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    folder = tmp_path / "out"
    before = bystander(folder)
    plain = tmp_path / "plain.txt"
    plain.write_text("a file, not a folder\n")
    seed_file = tmp_path / "seed"
    calls = _spy_on_loading(monkeypatch)
    args = aggregate_args(MNIST, folder, "--seed-file", seed_file)
    args[args.index(flag) + 1] = str(plain / ("rec.json" if flag == "--record" else "x.npy"))
    result = cli(args, expect=ExitCode.BAD_INPUT)
    assert str(plain) in one_line(result.stderr)
    assert calls == []
    assert not seed_file.exists()
    assert snapshot(folder) == before
    assert plain.read_text() == "a file, not a folder\n"


# ---------------------------------------------------------------------------------------
# 9. What a killed run left is cleaned by the next commit
# ---------------------------------------------------------------------------------------


def _dead_pid() -> int:
    for pid in range(999_999, 0, -1):
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return pid
        except PermissionError:
            continue
    raise AssertionError("no free pid")


def test_the_next_commit_removes_stale_files_and_rolls_back_their_journal(
    tmp_path: Path,
) -> None:
    """A dead run's temporary, probe, backup and journal: the journal says it linked
    half.npy (still its file: removed) and replaced kept.npy (its backup: restored); a
    live process's temporary is left alone."""
    folder = tmp_path / "out"
    folder.mkdir()
    pid = _dead_pid()
    token = f"{pid}-abcd"
    stale_tmp = folder / f".pate-{token}.tmp0.labels.npy"
    stale_tmp.write_bytes(b"half a file")
    (folder / f".pate-{token}.probe").write_bytes(b"")
    (folder / f"..pate-{token}.tmp1.mask.npy.x1y2.tmp").write_bytes(b"inner")
    # half.npy: linked by the dead run from its temporary (same inode)
    linked = folder / f".pate-{token}.tmp2.half.npy"
    linked.write_bytes(b"the dead run's half")
    os.link(linked, folder / "half.npy")
    # kept.npy: replaced by the dead run; its backup holds the previous content
    (folder / "kept.npy").write_bytes(b"the dead run's new content")
    backup = folder / f".pate-{token}.old.kept.npy"
    backup.write_bytes(b"previous content")
    entries = [
        {
            "target": str(folder / "half.npy"),
            "temporary": str(linked),
            "backup": None,
            "inode": [linked.stat().st_dev, linked.stat().st_ino],
        },
        {
            "target": str(folder / "kept.npy"),
            "temporary": str(folder / f".pate-{token}.tmp3.kept.npy"),
            "backup": str(backup),
            "inode": [0, 0],
        },
    ]
    (folder / f".pate-{token}.journal").write_text(json.dumps({"pid": pid, "entries": entries}))
    live = folder / f".pate-{os.getpid()}-beef.tmp0.other.npy"
    live.write_bytes(b"a live run's")

    result = pate(aggregate_args(MNIST, folder))
    assert result.returncode == 0, result.stderr
    assert leftovers(folder) == [live.name]
    assert not (folder / "half.npy").exists()
    assert (folder / "kept.npy").read_bytes() == b"previous content"
    assert set(os.listdir(folder)) == RELEASE | {"kept.npy", live.name}
    verifies(folder / "rec.json")


def test_recover_removes_the_files_of_dead_runs_only(tmp_path: Path) -> None:
    folder = tmp_path / "out"
    before = bystander(folder)
    pid = _dead_pid()
    (folder / f".pate-{pid}-abcd.tmp0.labels.npy").write_bytes(b"x")
    (folder / f".pate-{pid}-abcd.journal").write_text("{not json")
    live = folder / f".pate-{os.getpid()}-abcd.tmp0.labels.npy"
    live.write_bytes(b"y")
    transaction.recover(str(folder))
    assert leftovers(folder) == [live.name]
    live.unlink()
    assert snapshot(folder) == before

"""SIGINT, SIGTERM or SIGHUP at any moment of a run is one line and its documented code,
never a traceback (``pate_cli.cli.interrupts``, ``pate_cli.cli.standing``).

The moments are counted from the point where pate's entry point has run (the signals show
blocked, then caught, in ``/proc/PID/status``): before that Python itself is starting
(``site``, the environment's ``.pth`` files), and a signal there is the interpreter's, as for
any Python program. From there on: during the imports of numpy, scipy, typer and rich (held,
then raised as the work starts) and during the work, before the commit point: 128 + the
signal, nothing written or charged; from the commit point (the charge appended, the files
made visible) to the end of the work: the report printed, then one line saying what stands,
exit 5; after the work, while the interpreter shuts down: ignored (exit 0, nothing printed
about the signal).
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
import tomllib
from pathlib import Path

import pytest

from pate_cli.errors import ExitCode
from tests.conftest import MNIST, ROOT

pytestmark = pytest.mark.skipif(
    not os.path.exists(f"/proc/{os.getpid()}/status"), reason="needs /proc (Linux)"
)

ANALYZE = ["analyze", str(MNIST), "--sigma", "40", "--delta", "1e-5"]
ENV = {k: v for k, v in os.environ.items() if k not in ("COLUMNS", "LINES", "PATE_DEBUG")}


def _console_script(tmp_path: Path) -> list[str]:
    """The console script ``pate`` as an installer writes it, from pyproject.toml's entry."""
    scripts = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["scripts"]
    module, function = scripts["pate"].split(":")
    script = tmp_path / "pate"
    script.write_text(
        f"import sys\nfrom {module} import {function}\n"
        f"if __name__ == '__main__':\n    sys.exit({function}())\n"
    )
    return [sys.executable, str(script)]


def _sigint_default() -> None:
    signal.signal(signal.SIGINT, signal.SIG_DFL)  # as from a shell, not pytest's handler


def _start(command: list[str]) -> subprocess.Popen[str]:
    return subprocess.Popen(
        command,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        cwd=ROOT,
        env=ENV,
        preexec_fn=_sigint_default,
    )


def _mask(pid: int, field: str) -> int:
    """A signal mask of ``/proc/PID/status`` (SigCgt: caught, SigIgn: ignored); 0 once the
    process is gone."""
    try:
        with open(f"/proc/{pid}/status") as status:
            for line in status:
                if line.startswith(field + ":"):
                    return int(line.split()[1], 16)
    except FileNotFoundError:
        pass
    return 0


def _has(mask: int, signum: int) -> bool:
    return bool(mask >> (signum - 1) & 1)


def _wait_for(proc: subprocess.Popen[str], field: str, signum: int) -> None:
    """Until ``signum`` is in the process's ``field`` mask (polled every half millisecond).
    A blocked mask that holds SIGUSR1 too is not pate's: glibc blocks every signal for a
    moment as a thread starts."""
    deadline = time.monotonic() + 30
    while not _has(mask := _mask(proc.pid, field), signum) or _has(mask, signal.SIGUSR1):
        assert proc.poll() is None, "pate ended before the moment awaited"
        assert time.monotonic() < deadline, f"{signum!r} never in {field}"
        time.sleep(0.0005)


def _interrupted_lines(err: str) -> list[str]:
    return [line for line in err.splitlines() if line.startswith("pate: interrupted")]


@pytest.mark.parametrize(
    ("launcher", "delay"),
    [
        *(("python -m", d) for d in (0, 0.02, 0.08, 0.16)),
        ("console script", 0.04),
    ],
)
def test_sigint_after_pate_starts_is_one_line_and_130(
    launcher: str, delay: float, tmp_path: Path
) -> None:
    """SIGINT ``delay`` seconds after the entry point installed its handler (in the imports,
    or in the work): exit 130, one ``pate: interrupted (SIGINT)`` line, no traceback."""
    command = [sys.executable, "-m", "pate_cli"]
    if launcher == "console script":
        command = _console_script(tmp_path)
    proc = _start([*command, *ANALYZE])
    _wait_for(proc, "SigCgt", signal.SIGTERM)  # the entry point's handler is in place
    time.sleep(delay)
    proc.send_signal(signal.SIGINT)
    out, err = proc.communicate(timeout=60)
    assert "Traceback" not in err, err
    assert proc.returncode == 130, err
    # With a mechanism plugin installed the signal may come while it loads: the line says so.
    (line,) = err.strip().splitlines()
    assert line == "pate: interrupted (SIGINT)" or (
        line.startswith("pate: interrupted (SIGINT) while the mechanism plugin ")
        and line.endswith(" was loading")
    ), err
    assert _interrupted_lines(err) == [line], err


def _aggregate_into(folder: Path) -> list[str]:
    folder.mkdir()
    return ["aggregate", str(MNIST), *QUICK, "--output", str(folder / "labels.npy")]


@pytest.mark.parametrize(
    ("launcher", "signum"),
    [("python -m", signal.SIGTERM), ("console script", signal.SIGHUP)],
    ids=lambda value: getattr(value, "name", value),
)
def test_a_signal_from_pates_first_line_is_one_line_and_its_code(
    launcher: str, signum: signal.Signals, tmp_path: Path
) -> None:
    """Sent as soon as the entry point holds the signals (the first thing it does: they show
    blocked), so in the imports that follow: exit 128 + the signal and one line, as the
    work starts; nothing written."""
    command = [sys.executable, "-m", "pate_cli"]
    if launcher == "console script":
        command = _console_script(tmp_path)
    proc = _start([*command, *_aggregate_into(tmp_path / "out")])
    _wait_for(proc, "SigBlk", signum)
    proc.send_signal(signum)
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 128 + signum, err
    assert err.strip().splitlines() == [f"pate: interrupted ({signum.name})"], err
    assert out == ""
    assert os.listdir(tmp_path / "out") == []


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGHUP], ids=lambda s: s.name)
def test_a_signal_before_pates_first_line_is_the_interpreters(
    signum: signal.Signals, tmp_path: Path
) -> None:
    """Sent as the process starts, before Python has run any of pate (the interpreter, site
    and the environment's .pth files start first): the signal's default action ends the
    process, as for any program (a shell shows 128 + the signal, pate's code for it, with no
    line; subprocess shows -signal), and nothing was read or written. The only other outcome
    is pate's own line, had the entry point held the signals by then."""
    proc = _start([sys.executable, "-m", "pate_cli", *_aggregate_into(tmp_path / "out")])
    proc.send_signal(signum)
    out, err = proc.communicate(timeout=60)
    if proc.returncode == -signum:
        assert (out, err) == ("", "")
    else:
        assert proc.returncode == 128 + signum, err
        assert err.strip().splitlines() == [f"pate: interrupted ({signum.name})"], err
    assert os.listdir(tmp_path / "out") == []


# ``pate aggregate`` with a pause at the interpreter's exit (an atexit hook, registered before
# pate runs, so called after it is done), to signal it while it shuts down.
_SHUTDOWN = """
import atexit, pathlib, sys, time
marker = pathlib.Path(sys.argv[1])
atexit.register(lambda: (marker.write_text("exiting"), time.sleep(0.3)))
sys.argv = ["pate", *sys.argv[2:]]
from pate_cli.cli.entry import main
main()
"""


def test_sigint_after_a_successful_commit_changes_nothing(tmp_path: Path) -> None:
    """Signalled as the interpreter shuts down after a committed release: exit 0, the
    report whole, no line about the signal, no traceback (the choice documented in
    pate_cli.cli.interrupts: once the work is done a signal changes nothing)."""
    marker, out_dir = tmp_path / "exiting", tmp_path / "out"
    args = ["aggregate", str(MNIST), "--sigma", "40", "--delta", "1e-5", "--queries", "500"]
    args += ["--output", str(out_dir / "labels.npy"), "--record", str(out_dir / "rec.json")]
    out_dir.mkdir()
    proc = _start([sys.executable, "-c", _SHUTDOWN, str(marker), *args])
    deadline = time.monotonic() + 60
    while not marker.exists():
        assert proc.poll() is None and time.monotonic() < deadline, proc.communicate()
        time.sleep(0.001)
    assert _has(_mask(proc.pid, "SigIgn"), signal.SIGINT)
    proc.send_signal(signal.SIGINT)
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 0, err
    assert "Traceback" not in err and not _interrupted_lines(err), err
    assert "labels written to" in out
    assert {p.name for p in out_dir.iterdir()} == {"labels.npy", "rec.json"}


@pytest.mark.parametrize("launcher", ["python -m", "console script"])
def test_the_entry_point_holds_the_signals_before_the_heavy_imports(
    launcher: str, tmp_path: Path
) -> None:
    """What runs before the signals are held imports none of numpy, scipy, typer or rich."""
    scripts = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["scripts"]
    module = "pate_cli.__main__" if launcher == "python -m" else scripts["pate"].split(":")[0]
    source = (ROOT / "pate_cli" / "__main__.py").read_text()
    if launcher == "python -m":  # what __main__ imports before it calls the entry point
        module = source.split("import")[0].removeprefix("from").strip()
    probe = f"import sys, {module}; print(sorted({{'numpy', 'scipy', 'typer', 'rich'}} & set(sys.modules)))"
    result = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, cwd=ROOT, check=True
    )
    assert result.stdout.strip() == "[]", result.stdout


# ---------------------------------------------------------------------------------------
# Every moment of a run, every signal: the commit point decides what the signal says
# ---------------------------------------------------------------------------------------

# Runs pate once per case without an interpreter start-up each: the driver imports pate,
# then forks a child per case (stdin: a JSON list of cases; stdout: their exit codes, as
# subprocess gives them). The child hooks the point of its case, where it sends itself its
# signal (a real signal, at a chosen moment: no sleep, no race), and runs pate's entry
# point in the case's folder, stdout and stderr to files. "exit": the signal once the entry
# point has returned (after all output); "full": a file whose link into place fails as on
# a full disk.
MOMENTS = """
import errno, importlib, json, os, pkgutil, sys
import pate_cli
for module in pkgutil.walk_packages(pate_cli.__path__, "pate_cli."):
    if not module.name.endswith("__main__"):
        importlib.import_module(module.name)
from pate_cli.budget import book
from pate_cli.cli import entry, run
from pate_cli.files import transaction

POINTS = {
    "held": (entry, "hold_signals", "after"),  # pate's first line: the signals held
    "compute": (run.Call, "__call__", "before"),  # the work: the library call
    "staged": (transaction.Transaction, "stage_path", "after"),  # a file staged
    "appended": (book.Pending, "append", "after"),  # the budget line appended
    "committed": (transaction.Transaction, "commit", "after"),  # the commit done
    "shown": (run, "show", "after"),  # the report printed, the work not yet over
}


def hook(owner, name, when, act):
    original = getattr(owner, name)

    def hooked(*args, **kwargs):
        if when == "before":
            act()
        result = original(*args, **kwargs)
        if when == "after":
            act()
        return result

    setattr(owner, name, hooked)


def case(spec):
    os.chdir(spec["cwd"])
    for fd, name in ((1, "stdout"), (2, "stderr")):
        os.dup2(os.open(name, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644), fd)
    send = lambda: os.kill(os.getpid(), spec["signal"])
    if spec["point"] in POINTS:
        hook(*POINTS[spec["point"]], send)
    if spec.get("full"):
        link = os.link

        def full(source, target, *args, **kwargs):
            if str(target).endswith(spec["full"]):
                raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
            return link(source, target, *args, **kwargs)

        os.link = full
    sys.argv = ["pate", *spec["args"]]
    code = 70
    try:
        entry.main()
        code = 0
    except SystemExit as stop:
        code = stop.code if isinstance(stop.code, int) else int(stop.code is not None)
    if spec["point"] == "exit":
        send()
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)


codes = []
for spec in json.load(sys.stdin):
    sys.stdout.flush()
    pid = os.fork()
    if pid == 0:
        try:
            case(spec)
        finally:
            os._exit(70)  # the case's own exit, or 70 for what escaped it
    codes.append(os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1]))
print(json.dumps(codes))
"""

SIGNALS = [signal.SIGINT, signal.SIGTERM, signal.SIGHUP]
BEFORE_THE_COMMIT = ["held", "compute", "staged"]
AFTER_THE_COMMIT = ["appended", "committed", "shown"]
QUICK = ["--sigma", "40", "--delta", "1e-5", "--queries", "200"]
# aggregate, run in its case's folder: the paths as a user types them
AGGREGATE = ["aggregate", str(MNIST), *QUICK, "--output", "out/labels.npy", "--record"]
AGGREGATE += ["out/rec.json", "--budget", "b.jsonl"]
SMOOTH = ["smooth-sensitivity", str(MNIST), "--threshold", "200", "--sigma1", "150"]
SMOOTH += [*QUICK, "--order", "14", "--beta", "0.03", "--sigma-ss", "6", "--budget", "b.jsonl"]
LEDGER = ["analyze", str(MNIST), *QUICK, "--no-release", "--ledger", "out/ledger.csv"]


def _cases() -> dict[str, tuple[str, int, list[str], str | None]]:
    """Case name -> (point, signal, arguments, the file whose link fails or None)."""
    cases: dict[str, tuple[str, int, list[str], str | None]] = {}
    for signum in SIGNALS:
        for point in [*BEFORE_THE_COMMIT, *AFTER_THE_COMMIT, "exit"]:
            cases[f"{point}-{signum.name}"] = (point, signum, AGGREGATE, None)
    cases["smooth-appended"] = ("appended", signal.SIGTERM, SMOOTH, None)
    cases["nothing-written"] = ("committed", signal.SIGINT, ANALYZE, None)
    cases["failed-commit"] = ("appended", signal.SIGHUP, AGGREGATE, "labels.npy")
    cases["ledger"] = ("committed", signal.SIGTERM, LEDGER, None)
    cases["ledger-gate"] = ("committed", signal.SIGINT, [*LEDGER, "--max-epsilon", "0.1"], None)
    return cases


class Moment:
    """One case's run: its exit code, stdout, stderr and folder."""

    def __init__(self, folder: Path, code: int) -> None:
        self.folder, self.code = folder, code
        self.out = (folder / "stdout").read_text()
        self.err = (folder / "stderr").read_text()

    @property
    def written(self) -> list[str]:
        """What the run's output folder holds (pate's temporaries included)."""
        return sorted(os.listdir(self.folder / "out"))

    @property
    def charges(self) -> list[dict]:
        """The budget's lines after its header; the budget must have no charge half made."""
        assert not (self.folder / "b.jsonl.charging").exists(), "a charge left unsettled"
        return [json.loads(line) for line in (self.folder / "b.jsonl").read_text().splitlines()[1:]]


@pytest.fixture(scope="module")
def moments(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Moment]:
    """Every case of ``_cases``, run once (a few seconds in all)."""
    from tests.conftest import run_cli

    base = tmp_path_factory.mktemp("moments")
    run_cli(["budget", "init", base / "b.jsonl", "--delta", "1e-5", "--max-epsilon", "100"])
    specs = []
    for name, (point, signum, args, full) in _cases().items():
        (base / name / "out").mkdir(parents=True)
        (base / name / "b.jsonl").write_bytes((base / "b.jsonl").read_bytes())
        spec = {"cwd": str(base / name), "point": point, "signal": int(signum), "args": args}
        specs.append({**spec, "full": full})
    driver = subprocess.run(
        [sys.executable, "-c", MOMENTS],
        input=json.dumps(specs),
        capture_output=True,
        text=True,
        cwd=ROOT,
        env=ENV,
        timeout=120,
        check=False,
    )
    assert driver.returncode == 0, driver.stderr
    codes = json.loads(driver.stdout)
    return {name: Moment(base / name, code) for name, code in zip(_cases(), codes, strict=True)}


def _one_line(err: str) -> str:
    assert "Traceback" not in err, err
    lines = err.strip().splitlines()
    assert len(lines) == 1, err
    return lines[0]


@pytest.mark.parametrize("signum", SIGNALS, ids=lambda s: s.name)
@pytest.mark.parametrize("point", BEFORE_THE_COMMIT)
def test_a_signal_before_the_commit_point_leaves_nothing(
    moments: dict[str, Moment], point: str, signum: signal.Signals
) -> None:
    """As pate starts (its first line), during the work, with a file staged: one line, exit
    128 + the signal, nothing written and nothing charged."""
    run = moments[f"{point}-{signum.name}"]
    assert run.code == 128 + signum, run.err
    assert _one_line(run.err) == f"pate: interrupted ({signum.name})"
    assert run.out == ""
    assert run.written == []
    assert run.charges == []


@pytest.mark.parametrize("signum", SIGNALS, ids=lambda s: s.name)
@pytest.mark.parametrize("point", AFTER_THE_COMMIT)
def test_a_signal_after_the_commit_point_says_the_release_stands(
    moments: dict[str, Moment], point: str, signum: signal.Signals
) -> None:
    """Right after the budget line is appended (the signal held until the files are in
    place), after the commit, after the report: the run finishes, its report whole, and one
    line says what stands; exit 5. The files are there, and the charge naming their record."""
    run = moments[f"{point}-{signum.name}"]
    assert run.code == ExitCode.INTERRUPTED_COMMITTED == 5, run.err
    assert _one_line(run.err) == (
        f"pate: interrupted ({signum.name}) after the release was committed: out/labels.npy, "
        "out/rec.json and its charge (charge 1 of b.jsonl) stand"
    )
    assert "labels written to out/labels.npy" in run.out
    assert run.out.splitlines()[-1].startswith("charged b.jsonl: epsilon ")
    assert run.written == ["labels.npy", "rec.json"]
    record = json.loads((run.folder / "out" / "rec.json").read_text())
    assert [line["record_digest"] for line in run.charges] == [record["digest"]]


@pytest.mark.parametrize("signum", SIGNALS, ids=lambda s: s.name)
def test_a_signal_after_all_output_changes_nothing(
    moments: dict[str, Moment], signum: signal.Signals
) -> None:
    """Once the work is over (the report printed, the exit code decided): exit 0, nothing
    said about the signal (``pate_cli.cli.interrupts``)."""
    run = moments[f"exit-{signum.name}"]
    assert (run.code, run.err) == (0, "")
    assert "labels written to out/labels.npy" in run.out
    assert run.written == ["labels.npy", "rec.json"]
    assert len(run.charges) == 1


def test_a_release_without_files_stands_as_printed(moments: dict[str, Moment]) -> None:
    """smooth-sensitivity --budget releases its report: signalled right after its charge is
    appended, it prints the report (the release) and says so."""
    run = moments["smooth-appended"]
    assert run.code == 5, run.err
    assert _one_line(run.err) == (
        "pate: interrupted (SIGTERM) after the release was committed: the release printed and "
        "its charge (charge 1 of b.jsonl) stand"
    )
    assert "released epsilon" in run.out
    assert [line["command"] for line in run.charges] == ["smooth-sensitivity"]


def test_a_commit_of_nothing_is_a_plain_interrupt(moments: dict[str, Moment]) -> None:
    """analyze with no file and no budget commits nothing: a signal after that commit is an
    interrupt like any other (130), the report cut short."""
    run = moments["nothing-written"]
    assert (run.code, _one_line(run.err), run.out) == (130, "pate: interrupted (SIGINT)", "")


def test_a_commit_that_fails_after_the_append_is_a_plain_interrupt(
    moments: dict[str, Moment],
) -> None:
    """The charge appended, then the labels cannot be linked into place (a full disk): the
    commit rolls back and takes the charge back, so the signal noted meanwhile is a plain
    interrupt (129), nothing of the run left."""
    run = moments["failed-commit"]
    assert (run.code, _one_line(run.err), run.out) == (129, "pate: interrupted (SIGHUP)", "")
    assert run.written == []
    assert run.charges == []


def test_files_that_release_nothing_stand_as_files(moments: dict[str, Moment]) -> None:
    """analyze --no-release --ledger draws no noise: its files stand, not a release."""
    run = moments["ledger"]
    assert run.code == 5, run.err
    assert _one_line(run.err) == (
        "pate: interrupted (SIGTERM) after its files were committed: out/ledger.csv stands"
    )
    assert run.written == ["ledger.csv"]


def test_a_run_that_fails_after_its_commit_keeps_its_code(moments: dict[str, Moment]) -> None:
    """A gate that fails after the ledger is written exits 1, its line first, then the line
    of what stands."""
    run = moments["ledger-gate"]
    assert run.code == 1, run.err
    assert run.err.strip().splitlines() == [
        "pate: publishable epsilon 1.9931 exceeds --max-epsilon 0.1",
        "pate: interrupted (SIGINT) after its files were committed: out/ledger.csv stands",
    ]
    assert run.written == ["ledger.csv"]

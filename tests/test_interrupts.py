"""Ctrl-C at any moment of a run is one line and exit 130, never a traceback
(``pate_cli.cli.interrupts``).

The moments are counted from the point where pate's entry point has run (its handler shows
in ``/proc/PID/status``): before that Python itself is starting (``site``, the environment's
``.pth`` files), and a signal there is the interpreter's, as for any Python program. From
there on: during the imports of numpy, scipy, typer and rich (held, then raised as the work
starts), during the work, and after it, while the interpreter shuts down (ignored: exit 0,
the release stands and nothing is printed about the signal).
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
import tomllib
from pathlib import Path

import pytest

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
    """Until ``signum`` is in the process's ``field`` mask (polled every half millisecond)."""
    deadline = time.monotonic() + 30
    while not _has(_mask(proc.pid, field), signum):
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
    assert _interrupted_lines(err) == ["pate: interrupted (SIGINT)"], err
    assert err.strip().splitlines() == ["pate: interrupted (SIGINT)"], err


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

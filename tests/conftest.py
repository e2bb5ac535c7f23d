"""Shared fixtures: paths to the reference vectors and sample data, and ``run_cli``."""

from __future__ import annotations

import contextlib
import json
import os
import signal
from collections.abc import Iterator
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from hypothesis import settings
from typer.testing import CliRunner

from pate_cli.cli.app import app
from pate_cli.errors import ExitCode

# pytest-xdist's workers set COLUMNS and LINES; the suite runs as off a terminal (tests that
# want a width set their own).
for _name in ("COLUMNS", "LINES"):
    os.environ.pop(_name, None)

ROOT = Path(__file__).resolve().parent.parent
REFERENCE = Path(__file__).resolve().parent / "data" / "reference"
SAMPLE = ROOT / "sample_data"
MNIST = SAMPLE / "mnist_250_teachers.npy"
MNIST_INDICES = SAMPLE / "mnist_250_teachers_100_indices_used_by_student.npy"
MNIST_LABELS = SAMPLE / "mnist_250_teachers_labels.npy"
# What --public prints of a report: nothing computed from the votes but the publishable figures.
PUBLIC_REPORT_KEYS = {
    "command",
    "input",
    "mechanism",
    "delta",
    "conversion",
    "num_queries",
    "publishable",
}
# The 2018 paper's MNIST setting (Table 2): Confident-GNMax on the first 640 queries.
TABLE2 = ["--threshold", 200, "--sigma1", 150, "--sigma", 40, "--queries", 640, "--delta", 1e-5]


@cache
def reference_json(name: str) -> dict[str, Any]:
    """A reference file, parsed once per session ("inf"/"nan" strings left as they are)."""
    return json.loads((REFERENCE / name).read_text())


def reference_votes(name: str) -> Path:
    """The votes of a reference file: the paper's MNIST votes, or the file beside it."""
    return MNIST if name.startswith("paper_") else REFERENCE / reference_json(name)["votes_file"]


def as_float(values: Any) -> np.ndarray:
    """Reference numbers as floats; the files spell non-finite values as strings."""
    return np.array([float(v) for v in np.atleast_1d(values)], dtype=np.float64)


@dataclass
class CliResult:
    exit_code: int
    stdout: str
    stderr: str

    @property
    def json(self) -> Any:
        return json.loads(self.stdout)


def run_cli(args: list[str], expect: int = ExitCode.OK) -> CliResult:
    """Invoke ``pate`` in-process; fail with stderr when the exit code is not ``expect``."""
    result = CliRunner().invoke(app, [str(a) for a in args])
    outcome = CliResult(result.exit_code, result.stdout, result.stderr)
    if result.exit_code != expect:
        raise AssertionError(
            f"pate {' '.join(map(str, args))}: exit {result.exit_code}, expected {int(expect)}\n"
            f"stdout:\n{result.stdout[:2000]}\nstderr:\n{result.stderr[:4000]}\n"
            f"exception: {result.exception!r}"
        )
    return outcome


@pytest.fixture
def write_npy(tmp_path: Path):
    """Write an array to tmp_path and return the path as a string."""

    def write(array: Any, name: str = "votes.npy") -> str:
        path = tmp_path / name
        np.save(path, np.asarray(array))
        return str(path)

    return write


@pytest.fixture(scope="session")
def mnist_counts() -> np.ndarray:
    """The 2018 paper's MNIST votes (9000 x 10, 250 teachers)."""
    return np.load(MNIST, allow_pickle=False)


# Property tests run 500 examples each in CI (CI=true, derandomized: the same examples on every
# run), 200 locally, and 2,000 with PATE_THOROUGH=1 (before a release: about six times longer).
settings.register_profile("ci", max_examples=500, deadline=None, derandomize=True)
settings.register_profile("dev", max_examples=200, deadline=None)
settings.register_profile("thorough", max_examples=2000, deadline=None, derandomize=True)
settings.load_profile(
    "thorough" if os.environ.get("PATE_THOROUGH") else "ci" if os.environ.get("CI") else "dev"
)


@contextlib.contextmanager
def deadline(seconds: int) -> Iterator[None]:
    """Fail instead of hanging or inflating for ever (POSIX only)."""

    def on_alarm(signum: int, frame: object) -> None:
        raise TimeoutError(f"still running after {seconds} s")

    previous = signal.signal(signal.SIGALRM, on_alarm)
    signal.alarm(seconds)
    try:
        yield
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, previous)


@pytest.fixture
def on_the_command_line() -> Iterator[None]:
    """Run a test as the command line does, its library calls spelling parameters as flags
    (``pate_cli.common.spelling.command_line``): for tests that pin the command line's words."""
    from pate_cli.common import spelling

    with spelling.command_line():
        yield

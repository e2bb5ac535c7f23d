"""Every finite parameter, from 1e-300 to 1e300, through every command: a figure (inf where
that is the truth or a sound bound) or one line, never exit 70, never a traceback, never NaN.

Each mechanism's noise parameters at 1e-300 ... 1e300 (the others at the 2018 paper's MNIST
setting), through ``analyze`` (with and without ``--budget``, ``--pld`` and ``--pld exact``),
``smooth-sensitivity``, ``aggregate --output`` (with and without ``--budget``), ``compare``
and ``plan``. A charge of a setting whose epsilon is past any limit is refused (exit 4) or
past double precision (exit 2), never written; a publishable figure is never below the
truth's order of magnitude.
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from pate_cli.cli.app import app
from pate_cli.errors import ExitCode
from tests.conftest import MNIST, SAMPLE, CliResult, run_cli

VALUES = (1e-300, 1e-200, 1e-20, 1e20, 1e200, 1e300)
TABLE2 = {"threshold": 200.0, "sigma1": 150.0, "sigma": 40.0}
STUDENT = SAMPLE / "mnist_student_probs.npy"
CONFIDENT, INTERACTIVE = "confident-gnmax", "interactive-gnmax"
QUERIES = ["--queries", 20, "--delta", 1e-5]
ALLOWED = {ExitCode.OK, ExitCode.BUDGET_EXCEEDED, ExitCode.BAD_INPUT, ExitCode.CHARGE_REFUSED}
# A release fixed in advance, so that it can be charged: 1 < order < 1/(2 beta).
FIXED_RELEASE = ["--order", 10, "--beta", 0.01, "--sigma-ss", 5]


def _flags(values: dict[str, float]) -> list[Any]:
    return [part for name, value in values.items() for part in (f"--{name}", value)]


# A threshold no count reaches, with a threshold noise of 1e-300.
ISSUE = _flags({"threshold": 1e300, "sigma1": 1e-300, "sigma": 40.0})


def _settings() -> list[Any]:
    """(mechanism, its flags, how noisy: "little", "much" or None where it moves no cost)."""
    found = []
    for value in VALUES:
        noise = "little" if value < 1 else "much"
        found.append(pytest.param("gnmax", ["--sigma", value], noise, id=f"gnmax-sigma-{value:g}"))
        # gamma is the inverse of a noise scale: a small gamma is much noise.
        lnmax = ("lnmax", ["--gamma", value], "much" if value < 1 else "little")
        found.append(pytest.param(*lnmax, id=f"lnmax-gamma-{value:g}"))
        for name in TABLE2:
            flags = _flags({**TABLE2, name: value})
            moves = None if name == "threshold" else noise  # every query answered: T moves none
            found.append(pytest.param(CONFIDENT, flags, moves, id=f"confident-{name}-{value:g}"))
    # Interactive-GNMax shares Confident-GNMax's steps: its ends only.
    for name in TABLE2:
        for value in (VALUES[0], VALUES[-1]):
            noise = None if name == "threshold" else "little" if value < 1 else "much"
            flags = _flags({**TABLE2, name: value})
            found.append(
                pytest.param(INTERACTIVE, flags, noise, id=f"interactive-{name}-{value:g}")
            )
    for mechanism in (CONFIDENT, INTERACTIVE):
        found.append(pytest.param(mechanism, ISSUE, "little", id=f"{mechanism}-issue"))
    return found


def _runs(mechanism: str, flags: list[Any], budget: Path, out: Path) -> list[list[Any]]:
    """The commands each setting runs: every one where it applies, with and without the
    budget; the release through smooth-sensitivity (chosen on the votes, and fixed in
    advance to be charged), the others with --no-release."""
    base = [
        "--mechanism",
        mechanism,
        *flags,
        *QUERIES,
        *(["--baseline", STUDENT] if mechanism == INTERACTIVE else []),
    ]
    analyze = ["analyze", MNIST, *base, "--no-release", "--json"]
    runs = [
        analyze,
        [*analyze, "--budget", budget],
        ["aggregate", MNIST, *base, "--output", out / "a.npy", "--json"],
        ["aggregate", MNIST, *base, "--output", out / "b.npy", "--budget", budget],
        ["smooth-sensitivity", MNIST, *base, "--json"],
        ["smooth-sensitivity", MNIST, *base, *FIXED_RELEASE, "--budget", budget],
        ["plan", "--mechanism", mechanism, *flags, "--delta", 1e-5, "--epsilon", 1],
    ]
    if mechanism != "lnmax" and not _pld_once(mechanism, flags):
        runs += [[*analyze, "--pld"], [*analyze, "--pld", "exact"]]
    return runs


def _pld_once(mechanism: str, flags: list[Any]) -> bool:
    """Whether the slowest runs (a few seconds each: --pld of Confident-GNMax with an answer
    noise of 1e20 and more, whose grid is the threshold's finest) were run at another of
    these settings: at 1e20 and 1e200 they are the run at 1e300, to double precision."""
    return mechanism == CONFIDENT and flags[flags.index("--sigma") + 1] in (1e20, 1e200)


def _run(args: list[Any]) -> CliResult:
    result = CliRunner().invoke(app, [str(a) for a in args])
    return CliResult(result.exit_code, result.stdout, result.stderr)


def _numbers(value: Any) -> list[float]:
    """Every number of a JSON value (the CLI spells inf "inf" and would spell NaN "nan")."""
    if isinstance(value, dict):
        return [n for item in value.values() for n in _numbers(item)]
    if isinstance(value, list):
        return [n for item in value for n in _numbers(item)]
    if isinstance(value, bool):
        return []
    if isinstance(value, int | float):
        return [float(value)]
    if value in ("inf", "-inf", "nan", "NaN"):
        return [float(value)]
    return []


def _sound(args: list[Any], result: CliResult) -> Any:
    """The run's exit code is one pate documents, its error one line, its JSON without NaN;
    the JSON when it printed some."""
    where = " ".join(str(a) for a in args)
    assert result.exit_code in ALLOWED, f"pate {where}: exit {result.exit_code}\n{result.stderr}"
    assert "Traceback" not in result.stderr, f"pate {where}:\n{result.stderr}"
    if result.exit_code in (ExitCode.BAD_INPUT, ExitCode.CHARGE_REFUSED):
        errors = [line for line in result.stderr.splitlines() if line.startswith("pate: ")]
        assert len(errors) == 1, f"pate {where}:\n{result.stderr}"
    if not result.stdout.strip().startswith("{"):
        return None
    out = json.loads(result.stdout)
    assert not any(math.isnan(n) for n in _numbers(out)), f"pate {where}: NaN in {out}"
    return out


def _budget(tmp_path: Path) -> Path:
    path = tmp_path / "b.jsonl"
    run_cli(["budget", "init", path, "--delta", 1e-5, "--max-epsilon", 1e9])
    return path


def _check_figure(out: Any, noise: str | None) -> None:
    """The publishable data-independent epsilon on the side of the truth: past any budget with
    next to no noise (mu or epsilon0 of 1e20 and more), below 1 with noise beyond 1e20."""
    if out is None or noise is None:
        return
    epsilon = float(out["data_independent"]["epsilon"])
    if noise == "little":
        assert epsilon > 1e10
    else:
        assert 0 <= epsilon < 1


def _check_charge(code: int, lines: int, budget: Path, noise: str | None) -> None:
    """A charge with next to no noise is refused (over the limit, or past double precision)
    and never written; one with much noise is written."""
    written = len(budget.read_text().splitlines()) - lines
    if noise == "little":
        assert code in (ExitCode.BAD_INPUT, ExitCode.CHARGE_REFUSED)
        assert written == 0
    elif noise == "much":
        assert code == ExitCode.OK
        assert written == 1


@pytest.mark.parametrize(("mechanism", "flags", "noise"), _settings())
def test_every_finite_parameter_is_a_figure_or_one_line(tmp_path, mechanism, flags, noise):
    budget = _budget(tmp_path)
    for args in _runs(mechanism, flags, budget, tmp_path):
        lines = len(budget.read_text().splitlines())
        result = _run(args)
        out = _sound(args, result)
        if args[0] == "analyze" and result.exit_code == ExitCode.OK:
            _check_figure(out, noise)
        if budget in args:
            _check_charge(result.exit_code, lines, budget, noise)


@pytest.mark.parametrize(
    ("mechanism", "name", "pld"),
    [
        ("gnmax", "sigma", True),
        ("lnmax", "gamma", False),
        (CONFIDENT, "threshold", True),
        (CONFIDENT, "sigma1", True),
        (CONFIDENT, "sigma", False),  # its --pld is the sweep's, once
        (INTERACTIVE, "sigma1", False),
    ],
)
def test_compare_at_every_finite_parameter(mechanism, name, pld):
    fixed = {key: value for key, value in TABLE2.items() if key != name}
    flags = _flags(fixed) if mechanism in (CONFIDENT, INTERACTIVE) else []
    if mechanism == INTERACTIVE:
        flags += ["--baseline", STUDENT]
    values = ",".join(repr(value) for value in VALUES)
    args = ["compare", MNIST, "--mechanism", mechanism, *flags, f"--{name}", values, *QUERIES]
    args += ["--json", *(["--pld"] if pld else [])]
    result = _run(args)
    out = _sound(args, result)
    assert result.exit_code == ExitCode.OK
    rows = {row["mechanism"][name]: row for row in out["rows"]}
    assert sorted(rows) == sorted(VALUES)
    if name == "threshold":
        return  # every query answered: the threshold moves no data-independent cost
    for value, row in rows.items():
        noisy = value > 1 if name != "gamma" else value < 1
        _check_figure(row, "much" if noisy else "little")

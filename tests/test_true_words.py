"""What the help and the documents say about a command is what it does: the release of
``analyze`` for LNMax, plan's closeness to its target, compare's gate fields, and a full
stdout, which fails the same way whatever the format."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from pate_cli.jobs.planning import CLOSE, _solve
from tests.conftest import MNIST, ROOT, run_cli

README = (ROOT / "README.md").read_text()
CLI_DOC = (ROOT / "docs" / "cli.md").read_text()


def _words(text: str) -> str:
    return " ".join(text.split())


def test_analyze_help_says_lnmax_is_released_too() -> None:
    help_text = _words(run_cli(["analyze", "--help"]).stdout)
    assert "for the GNMax family) the epsilon released" not in help_text
    assert "smooth sensitivity (GNSS), for LNMax as for the GNMax family" in help_text
    lnmax = ["analyze", str(MNIST), "--gamma", "0.05", "--delta", "1e-5", "--queries", "200"]
    assert run_cli([*lnmax, "--json"]).json["release"]["released"] is True


def test_plan_on_the_readme_lnmax_example_is_as_close_as_documented() -> None:
    """README: ``pate plan --delta 1e-6 --epsilon 2 --queries 100 --mechanism lnmax`` gives
    the gamma it names, whose epsilon never exceeds 2 and is within 1e-7 relative of it."""
    assert "pate plan --delta 1e-6 --epsilon 2 --queries 100 --mechanism lnmax" in README
    assert "within 1e-7 relative of it" in _words(README)
    assert "within 1e-7 relative of it" in _words(CLI_DOC)
    assert CLOSE == 1e-7
    args = ["plan", "--delta", "1e-6", "--epsilon", "2", "--queries", "100"]
    out = run_cli([*args, "--mechanism", "lnmax", "--json"]).json
    assert f"gamma {out['value']!r} for 100 LNMax queries" in _words(README)
    assert 2 * (1 - 1e-7) <= out["epsilon"] <= 2


def test_a_solved_value_gets_the_digits_its_closeness_needs() -> None:
    """A boundary just above 10 whose cost falls as 1 / sigma^2: 8 digits (10.000001)
    would leave the epsilon 2e-7 below the target, so the value gets a ninth."""
    boundary = 10.0000000001

    def cost(sigma: float) -> float:
        return 2 * (boundary / sigma) ** 2

    value = _solve(cost, "sigma", 2.0, 1e-5)
    assert 2 * (1 - CLOSE) <= cost(value) <= 2
    assert value == 10.0000001


def test_compare_gate_fields_only_with_max_epsilon() -> None:
    assert (
        "`within_budget` (in each row), `max_epsilon` and `gate` appear only with "
        "`--max-epsilon`" in _words(CLI_DOC)
    )
    args = [
        "compare",
        str(MNIST),
        "--sigma",
        "40,50",
        "--delta",
        "1e-5",
        "--queries",
        "200",
        "--json",
    ]
    plain = run_cli(args).json
    assert not {"gate", "max_epsilon"} & plain.keys()
    assert all("within_budget" not in row for row in plain["rows"])
    gated = run_cli([*args, "--max-epsilon", "100"]).json
    assert {"gate", "max_epsilon"} <= gated.keys()
    assert all("within_budget" in row for row in gated["rows"])


@pytest.mark.skipif(not os.path.exists("/dev/full"), reason="needs /dev/full")
@pytest.mark.parametrize("as_json", [False, True], ids=["text", "json"])
def test_a_full_stdout_leaves_the_release_standing_in_either_format(
    as_json: bool, tmp_path: Path
) -> None:
    """README: a full stdout is one line on stderr and exit 74, after the files were
    committed: the release stands, in text as with --json."""
    assert re.search(r"exit 74 \(after the files\s+were committed: the release stands\)", README)
    out = tmp_path / "out"
    out.mkdir()
    args = ["aggregate", str(MNIST), "--sigma", "40", "--delta", "1e-5", "--queries", "500"]
    args += ["--output", str(out / "labels.npy"), "--record", str(out / "rec.json")]
    env = {k: v for k, v in os.environ.items() if k not in ("COLUMNS", "PATE_DEBUG")}
    with open("/dev/full", "w") as full:
        result = subprocess.run(
            [sys.executable, "-m", "pate_cli", *args, *(["--json"] if as_json else [])],
            stdout=full,
            stderr=subprocess.PIPE,
            text=True,
            cwd=ROOT,
            env=env,
            timeout=120,
            check=False,
        )
    assert result.returncode == 74, result.stderr
    assert result.stderr.splitlines()[-1] == (
        "pate: error: cannot write the report to stdout (No space left on device)"
    )
    assert sorted(p.name for p in out.iterdir()) == ["labels.npy", "rec.json"]
    assert run_cli(["verify", str(out / "rec.json"), "--allow-unchecked"]).exit_code == 0

"""The command-line contract: exit codes, stream purity, one-line errors, help and version."""

from __future__ import annotations

import json
import math
import re
import shlex
import subprocess
import sys
from collections.abc import Iterator
from typing import Any

import numpy as np
import pytest
import typer

import pate_cli.accountant.run as run_account
import pate_cli.cli.app as cli
from pate_cli import __version__
from pate_cli.errors import ExitCode
from pate_cli.orders import DEFAULT_ORDERS
from tests.conftest import MNIST, ROOT, run_cli

MNIST_640 = [MNIST, "--queries", 640, "--delta", 1e-5]
CONFIDENT = ["--threshold", 200, "--sigma1", 150, "--sigma", 40]


def test_version():
    assert run_cli(["--version"]).stdout.strip() == f"pate {__version__}"


def test_no_arguments_shows_help():
    result = run_cli([], expect=ExitCode.BAD_INPUT)
    assert "Usage" in result.stdout + result.stderr


def _every_command(group: Any, words: tuple[str, ...] = ()) -> Iterator[tuple[str, ...]]:
    """The words after ``pate`` of every command and subcommand (``budget init``)."""
    for name, command in group.commands.items():
        if hasattr(command, "commands"):
            yield from _every_command(command, (*words, name))
        else:
            yield (*words, name)


EVERY_COMMAND = list(_every_command(typer.main.get_command(cli.app)))


def help_examples(words: tuple[str, ...]) -> list[str]:
    """The example lines of ``pate WORDS --help`` (off a terminal, 80 columns): the lines
    of its last section, "Example:" or "Examples:", which comes after its options."""
    lines = run_cli([*words, "--help"]).stdout.splitlines()
    headings = [i for i, line in enumerate(lines) if re.fullmatch(r"\S.*:", line)]
    (at,) = [i for i in headings if lines[i] in ("Example:", "Examples:")]
    assert at == headings[-1] and "Options:" in (lines[i] for i in headings[:-1])
    examples = lines[at + 1 :]
    assert examples and all(line.startswith("  ") for line in examples), examples
    return [line.strip() for line in examples]


def test_every_command_and_subcommand_is_found():
    assert {"analyze", "plan", "budget init", "budget show"} <= {" ".join(w) for w in EVERY_COMMAND}


@pytest.mark.parametrize("words", EVERY_COMMAND, ids=" ".join)
def test_help_ends_with_examples_each_one_whole_command_on_its_line(words):
    """Each example line is one whole command: it names the command once, at its start, and
    none is broken across lines or runs into the next."""
    examples = help_examples(words)
    for line in examples:
        args = shlex.split(line)
        assert args[: len(words) + 1] == ["pate", *words], line
        assert args.count("pate") == 1, line
    # The commands that read votes run on the sample data (plan reads none).
    if words not in {("plan",), ("budget", "init")}:
        assert any("sample_data/" in line for line in examples), examples


def test_help_examples_run(tmp_path, monkeypatch):
    """Every example of every command's help runs as written, in order, and exits 0 (from a
    scratch folder: the sample data is the project's; budget show reads what budget init
    wrote)."""
    monkeypatch.chdir(tmp_path)
    for words in EVERY_COMMAND:
        for line in help_examples(words):
            args = [str(ROOT / a) if a.startswith("sample_data/") else a for a in shlex.split(line)]
            run_cli(args[1:])
    assert (tmp_path / "labels.out.npy").exists() and (tmp_path / "team.budget.jsonl").exists()


def test_json_stdout_is_one_object_and_nothing_else():
    result = run_cli(["analyze", *MNIST_640, *CONFIDENT, "--json"])
    assert result.stdout.endswith("}\n") and result.stdout.count("\n") == 1
    payload = json.loads(result.stdout)
    assert payload["command"] == "analyze"
    for key in (
        "input",
        "mechanism",
        "delta",
        "conversion",
        "orders",
        "expected_answered",
        "data_dependent",
        "data_independent",
    ):
        assert key in payload
    assert set(payload["input"]) >= {
        "path",
        "sha256",
        "format",
        "num_queries",
        "num_teachers",
        "num_classes",
    }
    assert payload["mechanism"] == {
        "name": "confident-gnmax",
        "threshold": 200.0,
        "sigma1": 150.0,
        "sigma": 40.0,
    }
    for block in ("data_dependent", "data_independent"):
        assert set(payload[block]) >= {"epsilon", "order", "rdp"}
        assert len(payload[block]["rdp"]) == len(payload["orders"]) == DEFAULT_ORDERS.size == 302
    assert "nan" not in result.stdout.lower()


def test_human_report_shows_detected_format_and_closing_line():
    out = " ".join(run_cli(["analyze", *MNIST_640, *CONFIDENT]).stdout.split())
    assert "format counts (detected)" in out
    # Confident-GNMax's expected figure is named as the paper's average, not as a bound.
    assert "expected data-dependent epsilon 1.9989 at order 14 (private)" in out  # 1.99882, up
    assert "(private, the paper's average over the threshold noise, not a bound on the run)" in out
    assert "expected answered 282.7 of 640" in out


def test_budget_gate_exits_1_after_printing():
    """The default gate checks what may be published: the smallest publishable figure, the
    exact worst case (Gaussian DP, 3.926701...) on Table 2."""
    result = run_cli(
        ["analyze", *MNIST_640, *CONFIDENT, "--max-epsilon", 2.0, "--json"],
        expect=ExitCode.BUDGET_EXCEEDED,
    )
    printed = json.loads(result.stdout)
    assert printed["gate"] == {
        "on": "publishable",
        "epsilon": printed["data_independent_exact"]["epsilon"],
        "limit": 2.0,
        "passed": False,
    }
    assert "publishable epsilon 3.92671 exceeds --max-epsilon 2" in result.stderr  # rounded up
    within = run_cli(["analyze", *MNIST_640, *CONFIDENT, "--max-epsilon", 3.93, "--json"]).json
    assert within["gate"]["passed"] is True
    # The data-dependent epsilon (1.9988) is gated when asked for, with a word on stderr.
    run_cli(
        ["analyze", *MNIST_640, *CONFIDENT, "--max-epsilon", 1.5, "--gate-on", "data-dependent"],
        expect=ExitCode.BUDGET_EXCEEDED,
    )
    dependent = run_cli(
        ["analyze", *MNIST_640, *CONFIDENT, "--max-epsilon", 2.0, "--gate-on", "data-dependent"]
    )
    assert "depends on the votes and may not be published" in " ".join(dependent.stderr.split())
    # The data-independent epsilon (3.157) is gated when asked for.
    run_cli(
        ["analyze", *MNIST_640, *CONFIDENT, "--max-epsilon", 2.0, "--gate-on", "data-independent"],
        expect=ExitCode.BUDGET_EXCEEDED,
    )


def test_worst_case_is_every_query_answered_and_can_be_gated():
    """Prop. 8 on all 640 queries: lambda / (2 sigma1^2) + lambda / sigma^2 each, no votes."""
    report = run_cli(["analyze", *MNIST_640, *CONFIDENT, "--no-release", "--json"]).json
    worst = report["data_independent_worst_case"]
    order = worst["order"]
    rdp = 640 * (order / (2 * 150.0**2) + order / 40.0**2)
    assert worst["epsilon"] == pytest.approx(rdp + math.log(1e5) / (order - 1), rel=1e-12)
    assert worst["epsilon"] > report["data_independent"]["epsilon"]  # 4.786 > 3.157
    gated = ["--max-epsilon", 4.0, "--no-release", "--json"]
    run_cli(["analyze", *MNIST_640, *CONFIDENT, *gated, "--gate-on", "data-independent"])
    run_cli(["analyze", *MNIST_640, *CONFIDENT, *gated, "--gate-on", "publishable"])  # 3.93
    for on in ("worst-case",):
        run_cli(
            ["analyze", *MNIST_640, *CONFIDENT, *gated, "--gate-on", on],
            expect=ExitCode.BUDGET_EXCEEDED,
        )
    # GNMax answers every query: its data-independent bound is already the worst case.
    gnmax = run_cli(["analyze", *MNIST_640, "--sigma", 40, "--no-release", "--json"]).json
    assert gnmax["data_independent_worst_case"] == gnmax["data_independent"]


@pytest.mark.parametrize(
    ("args", "words"),
    [
        (["analyze", "missing.npy", "--sigma", 40, "--delta", 1e-5], "missing.npy"),
        (["analyze", *MNIST_640], "no mechanism"),
        (["analyze", *MNIST_640, "--sigma", 40, "--gamma", 0.1], "cannot be used with"),
        (["analyze", MNIST, "--sigma", 40, "--delta", 2], "--delta"),
        (["analyze", MNIST, "--sigma", 40, "--delta", 1e-5, "--orders", "1,2"], "--orders"),
        (["analyze", MNIST, "--sigma", -1, "--delta", 1e-5], "--sigma"),
        (["analyze", MNIST, "--sigma", 40, "--delta", 1e-5, "--queries", 10**6], "--queries"),
        (["analyze", MNIST, "--sigma", 40], "--delta"),
        (["analyze", MNIST, "--sigma", 40, "--delta", 1e-5, "--no-such-flag"], "--no-such-flag"),
        (["analyze", MNIST, "--sigma", "forty", "--delta", 1e-5], "--sigma: expected a number"),
    ],
)
def test_bad_input_is_one_line_and_exit_2(args, words):
    result = run_cli(args, expect=ExitCode.BAD_INPUT)
    assert result.stdout == ""
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("pate: error:")
    assert words in lines[0]
    assert "Traceback" not in result.stderr


def test_bad_file_message_names_the_file(tmp_path):
    bad = tmp_path / "votes.npy"
    bad.write_text("not numpy")
    result = run_cli(
        ["analyze", bad, "--sigma", 40, "--delta", 1e-5, "--json"], expect=ExitCode.BAD_INPUT
    )
    assert str(bad) in result.stderr and result.stdout == ""


def test_a_crash_exits_70_with_a_traceback(monkeypatch):
    def boom(*args, **kwargs):
        raise RuntimeError("kaboom")

    monkeypatch.setattr(run_account, "account_terms", boom)
    result = run_cli(["analyze", *MNIST_640, "--sigma", 40], expect=ExitCode.INTERNAL)
    assert "Traceback" in result.stderr and "kaboom" in result.stderr
    assert "bug in pate" in result.stderr


def test_exit_code_values_are_the_documented_ones():
    assert [int(c) for c in ExitCode] == [0, 1, 2, 3, 4, 5, 6, 70, 74, 130]


@pytest.mark.parametrize("document", ["README.md", "docs/cli.md", "pate --help"])
def test_every_exit_code_is_documented(document):
    """Each code in the README's and docs/cli.md's table of exit codes, and in pate --help."""
    if document == "pate --help":
        text = " ".join(run_cli(["--help"]).stdout.split()).split("Exit codes:", 1)[1]
        named = {int(code) for code in re.findall(r"\b(\d+)(?=[ /])", text.split(".", 1)[0])}
    else:
        section = (ROOT / document).read_text().split("Exit codes\n", 1)[1].split("\n#", 1)[0]
        cells = re.findall(r"^\| ([\d, ]+) \|", section, flags=re.M)
        named = {int(code) for cell in cells for code in cell.split(",")}
    assert {int(code) for code in ExitCode} <= named, (document, named)


def test_conversion_improved_is_recorded_and_never_above_classic():
    classic = run_cli(["analyze", *MNIST_640, "--sigma", 40, "--json"]).json
    improved = run_cli(
        ["analyze", *MNIST_640, "--sigma", 40, "--json", "--conversion", "improved"]
    ).json
    assert improved["conversion"] == "improved"
    assert improved["data_dependent"]["epsilon"] < classic["data_dependent"]["epsilon"]
    assert improved["data_independent"]["epsilon"] < classic["data_independent"]["epsilon"]


def test_edge_of_grid_warning(tmp_path):
    result = run_cli(["analyze", *MNIST_640, "--sigma", 40, "--orders", "2,3", "--json"])
    assert any("edge of the order grid" in w for w in result.json["warnings"])
    human = run_cli(["analyze", *MNIST_640, "--sigma", 40, "--orders", "2,3"])
    assert "edge of the order grid" in human.stderr


def test_all_orders_shows_every_row():
    out = run_cli(
        ["analyze", *MNIST_640, "--sigma", 40, "--orders", "2:12:1", "--all-orders"]
    ).stdout
    rows = [line for line in out.splitlines() if line.startswith("│")]
    assert len(rows) == 10


def test_answered_mask_accounts_the_realised_run(write_npy):
    counts = np.load(MNIST)[:640]
    mask = np.zeros(640, dtype=bool)
    mask[::2] = True
    path = write_npy(mask, "mask.npy")
    realised = run_cli(["analyze", *MNIST_640, *CONFIDENT, "--answered", path, "--json"]).json
    assert realised["accounting"] == "realized"
    assert realised["expected_answered"] == 320
    everything = run_cli(
        [
            "analyze",
            *MNIST_640,
            *CONFIDENT,
            "--answered",
            write_npy(np.ones(640, bool), "all.npy"),
            "--json",
        ]
    ).json
    assert everything["data_dependent"]["epsilon"] > realised["data_dependent"]["epsilon"]
    assert counts.shape == (640, 10)


def test_python_dash_m_runs_the_same_cli():
    done = subprocess.run(
        [sys.executable, "-m", "pate_cli", "--version"], capture_output=True, text=True, check=True
    )
    assert done.stdout.strip() == f"pate {__version__}"


def test_progress_is_for_people_only(monkeypatch):
    """Never with --json, never into a pipe, never for work that takes no time."""
    import io

    from rich.console import Console

    from pate_cli.cli.options import PROGRESS_MIN_WORK, progress_bar, show_progress

    class Terminal(io.StringIO):
        def isatty(self) -> bool:
            return True

    monkeypatch.setattr("sys.stderr", Terminal())
    assert show_progress(False, PROGRESS_MIN_WORK)
    assert not show_progress(True, PROGRESS_MIN_WORK)
    assert not show_progress(False, PROGRESS_MIN_WORK - 1)
    monkeypatch.setattr("sys.stderr", io.StringIO())
    assert not show_progress(False, 10**12)
    with progress_bar("x", 10, enabled=False) as advance:
        assert advance is None
    screen = io.StringIO()
    with progress_bar(
        "accounting", 10, enabled=True, console=Console(file=screen, force_terminal=True)
    ) as advance:
        assert advance is not None
        advance(10)
    assert "accounting" in screen.getvalue()

"""Conventions of Python command lines: -h, -V, completion, --quiet, colour, one metavar
style, and one error style at every level."""

from __future__ import annotations

import re
from typing import Annotated

import pytest
import typer
from typer.testing import CliRunner

from pate_cli.cli.app import app
from pate_cli.cli.suggestions import close_spellings, edits, long_options
from pate_cli.errors import ExitCode
from tests.conftest import MNIST, TABLE2, run_cli

COMMANDS = ("analyze", "smooth-sensitivity", "aggregate", "compare", "inspect", "verify")


def test_short_help_and_version():
    assert run_cli(["-h"]).stdout.startswith("Usage: pate [OPTIONS] COMMAND")
    assert run_cli(["-V"]).stdout == run_cli(["--version"]).stdout
    for command in COMMANDS:
        assert run_cli([command, "-h"]).stdout == run_cli([command, "--help"]).stdout


# A line of each shell's script that no other shell's has.
SCRIPTS = {
    "bash": "complete -o default -F _pate_completion pate",
    "zsh": "#compdef pate",
    "fish": "complete --command pate",
}


@pytest.mark.parametrize("shell", ["bash", "zsh", "fish"])
def test_completion_scripts(shell):
    # The script of the shell named, whatever shell (or none) pate was started from.
    script = run_cli(["--show-completion", shell]).stdout
    assert "_PATE_COMPLETE" in script and SCRIPTS[shell] in script
    assert "--install-completion" in run_cli(["--help"]).stdout


def test_completion_script_of_the_current_shell(monkeypatch):
    # No shell named: the one typer finds pate started from (here as if from fish).
    monkeypatch.setattr("typer.completion._get_shell_name", lambda: "fish")
    assert SCRIPTS["fish"] in run_cli(["--show-completion"]).stdout


@pytest.mark.parametrize(
    ("args", "words"),
    [
        (["--bogus"], "No such option: --bogus (see 'pate --help')"),
        (["nosuch"], "No such command 'nosuch' (see 'pate --help')"),
        (["analyze", "--bogus"], "No such option: --bogus (see 'pate analyze --help')"),
        (["analyze", MNIST, "--delta", 1e-5, "--sigma", "abc"], "--sigma: expected a number"),
        (["analyze", MNIST, "--delta", 1e-5, "--queries", 1.5], "--queries: expected an integer"),
        (["analyze", MNIST, "--delta", 1e-5, "--format", "x"], "--format: 'x' is not one of"),
        (["analyze", "--delta", 1e-5], "Missing argument 'VOTES'"),
        (["analyze", "missing.npy", "--delta", 1e-5, "--sigma", 4], "missing.npy: no such file"),
        (["verify", "missing.json"], "missing.json: no such file"),
    ],
)
def test_every_error_is_one_line_in_one_style(args, words):
    result = run_cli(args, expect=ExitCode.BAD_INPUT)
    assert result.stdout == ""
    (line,) = result.stderr.splitlines()
    assert line.startswith("pate: error: ") and words in line
    assert "Input should be" not in line and "Value error" not in line


@pytest.mark.parametrize(
    ("args", "line"),
    [
        # Click's own rule (difflib, the dashes counted) suggested --delta and --no-release.
        (["analyze", MNIST, "--release"], "No such option: --release (see 'pate analyze --help')"),
        (["analyze", MNIST, "--sigam", 4], "No such option: --sigam (Possible options: --sigma)"),
        (["analyze", MNIST, "--queires", 9], "--queires (Possible options: --queries)"),
        (["analyze", MNIST, "--budjet", "b"], "--budjet (Possible options: --budget)"),
        (["analyze", MNIST, "--no-relase"], "--no-relase (Possible options: --no-release)"),
        (["analyze", MNIST, "--sigma3", 4], "(Possible options: --sigma, --sigma1, --sigma2)"),
        (["analyze", MNIST, "--max-eps", 4], "--max-eps (Possible options: --max-epsilon)"),
        (["plan", "--delt", 1e-5], "--delt (Possible options: --delta) (see 'pate plan --help')"),
        (["--versoin"], "--versoin (Possible options: --version) (see 'pate --help')"),
        (["budgte"], "No such command 'budgte'. Did you mean 'budget'? (see 'pate --help')"),
        (["smooth"], "No such command 'smooth'. Did you mean 'smooth-sensitivity'?"),
        # Typer's own rule suggested verify and compare.
        (["version"], "No such command 'version' (see 'pate --help')"),
        (["compute"], "No such command 'compute' (see 'pate --help')"),
        (["budget", "shwo"], "No such command 'shwo'. Did you mean 'show'? (see 'pate budget"),
        (["budget", "delete"], "No such command 'delete' (see 'pate budget --help')"),
    ],
)
def test_an_unknown_name_suggests_only_close_spellings(args, line):
    result = run_cli(args, expect=ExitCode.BAD_INPUT)
    (said,) = result.stderr.splitlines()
    assert said.startswith("pate: error: ") and line in said, said
    assert said.count("Possible options") + said.count("Did you mean") <= 1


@pytest.mark.parametrize(
    ("typed", "names", "close"),
    [
        ("--release", ["--delta", "--no-release", "--seed"], []),
        ("--sigam", ["--sigma", "--sigma1", "--sigma2", "--sigma-ss"], ["--sigma"]),
        ("--SIGMA", ["--sigma"], ["--sigma"]),
        ("--sig", ["--sigma", "--sigma1", "--seed"], ["--sigma", "--sigma1"]),
        ("--no", ["--no-release"], []),  # two letters abbreviate nothing
        ("--threshhold", ["--threshold", "--threshold-bound"], ["--threshold"]),
        ("--max-epsion", ["--max-epsilon", "--max-queries"], ["--max-epsilon"]),
        ("shot", ["init", "show"], ["show"]),
        ("sohw", ["init", "show"], ["show"]),  # a swap is one edit
        ("compute", ["compare", "inspect"], []),
    ],
)
def test_the_rule_of_close_spellings(typed, names, close):
    assert close_spellings(typed, names) == close


def test_a_hidden_option_is_never_suggested():
    demo = typer.Typer()

    @demo.command()
    def run(
        sigma: Annotated[int, typer.Option("--sigma")] = 0,
        sigmas: Annotated[int, typer.Option("--sigmas", hidden=True)] = 0,
    ) -> None:
        pass

    names = long_options(typer.main.get_command(demo))
    assert "--sigma" in names and "--sigmas" not in names
    assert close_spellings("--sigmaz", names) == ["--sigma"]


def test_edits_count_a_swap_as_one():
    assert edits("sigam", "sigma") == 1
    assert edits("queires", "queries") == 1
    assert edits("release", "no-release") == 3
    assert edits("", "abc") == edits("abc", "") == 3
    assert edits("kitten", "sitting") == 3


def test_quiet_prints_nothing_but_errors():
    quiet = run_cli(["analyze", MNIST, *TABLE2, "--quiet"])
    assert quiet.stdout == "" and quiet.stderr == ""
    # --json is for a pipeline: quiet silences the text for people only.
    assert run_cli(["analyze", MNIST, *TABLE2, "-q", "--json"]).json["command"] == "analyze"
    over = run_cli(
        ["analyze", MNIST, *TABLE2, "-q", "--max-epsilon", 1], expect=ExitCode.BUDGET_EXCEEDED
    )
    assert over.stdout == "" and "exceeds --max-epsilon 1" in over.stderr
    bad = run_cli(["analyze", MNIST, "--delta", 2, "--sigma", 4, "-q"], expect=ExitCode.BAD_INPUT)
    assert bad.stderr.startswith("pate: error: --delta")
    # Not sticky: the next run prints again.
    assert run_cli(["inspect", MNIST]).stdout
    for command in COMMANDS:
        assert "--quiet" in run_cli([command, "--help"]).stdout


@pytest.mark.parametrize(
    ("env", "coloured"), [({"FORCE_COLOR": "1"}, True), ({"NO_COLOR": "1"}, False)]
)
def test_colour_follows_no_color_and_force_color(monkeypatch, env, coloured):
    for name in ("NO_COLOR", "FORCE_COLOR", "TERM"):
        monkeypatch.delenv(name, raising=False)
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    result = CliRunner().invoke(app, ["analyze", str(MNIST), *map(str, TABLE2), "--no-release"])
    assert result.exit_code == 0
    assert ("\x1b[" in result.stdout) is coloured


def test_one_metavar_style_in_every_help():
    """An upper-case word for a value, [a|b] for a choice; never Typer's <str> or {VOTES}."""
    for command in COMMANDS:
        text = run_cli([command, "--help"]).stdout
        assert not re.search(r"<[a-z]", text), command
        assert "{" not in text.split("\n", 1)[0], command
        for option, metavar in re.findall(
            r"^  (--[a-z-]+)(?:, -[-a-z0-9]+)* (?!/)(\S+)", text, re.M
        ):
            assert re.fullmatch(r"[A-Z][A-Z=]*|\[[a-z0-9|-]+\]", metavar), (
                command,
                option,
                metavar,
            )


def test_off_a_terminal_nothing_is_wrapped_or_padded(monkeypatch):
    """A pipe or a CI log without COLUMNS: every summary line is one line, tables take their
    natural width, and no line ends in spaces (grep finds what it looks for)."""
    monkeypatch.delenv("COLUMNS", raising=False)
    out = run_cli(["analyze", MNIST, *TABLE2]).stdout
    lines = out.splitlines()
    assert any(
        line.startswith("publishable: epsilon = ") and "worst-case" in line for line in lines
    )
    assert all(line == line.rstrip() for line in lines)
    assert max(map(len, lines)) > 80  # not folded at the old default width


def test_quiet_json_still_prints_the_json_and_no_warning():
    result = run_cli(["analyze", MNIST, *TABLE2, "--json", "-q"])
    assert result.json["command"] == "analyze"
    assert result.stderr == ""
    assert run_cli(["analyze", MNIST, *TABLE2, "-q"]).stdout == ""


def test_an_existing_ledger_or_plot_is_not_replaced_without_force(tmp_path):
    ledger = tmp_path / "L.csv"
    ledger.write_text("kept\n")
    result = run_cli(["analyze", MNIST, *TABLE2, "--ledger", ledger], expect=ExitCode.BAD_INPUT)
    assert "exists" in result.stderr and "--force" in result.stderr
    assert ledger.read_text() == "kept\n"
    run_cli(["analyze", MNIST, *TABLE2, "--ledger", ledger, "--force"])
    assert ledger.read_text().startswith("index,")


def test_a_run_after_would_charge_suggests_as_the_run_does(tmp_path):
    budget = tmp_path / "team.budget.jsonl"
    run_cli(["budget", "init", budget, "--delta", 1e-5, "--max-epsilon", 8])
    charge = ["budget", "show", budget, "--would-charge", "--", "aggregate", MNIST]
    result = run_cli([*charge, "--sigam", 40], expect=ExitCode.BAD_INPUT)
    (said,) = result.stderr.splitlines()
    assert "No such option: --sigam (Possible options: --sigma)" in said, said
    result = run_cli([*charge, "--release"], expect=ExitCode.BAD_INPUT)
    assert "No such option: --release" in result.stderr
    assert "Possible options" not in result.stderr

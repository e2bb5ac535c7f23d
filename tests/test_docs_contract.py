"""The contract documents, docs/cli.md and docs/api.md, are tested like code: every flag they
name exists, every option of a command is listed under it, the API they describe is the one
the package exports, and their examples run."""

from __future__ import annotations

import inspect
import re
import shlex
from functools import cache

import pytest

import pate_cli
import pate_cli.cli.app as cli
from pate_cli.mechanisms.registry import builtins, declarations
from tests.conftest import ROOT, run_cli

DOCS = ROOT / "docs"
CLI_DOC = (DOCS / "cli.md").read_text()
API_DOC = (DOCS / "api.md").read_text()
# A flag where it stands alone: not inside a longer word (the `x--y` of a formula, or the
# reference code's `--data_independent`).
FLAG = re.compile(r"(?<![\w-])--[a-z][a-z0-9]*(?:-[a-z0-9]+)*(?!\w)")
COMMANDS = [command.name or command.callback.__name__ for command in cli.app.registered_commands]
# The commands of a group (``pate budget init``), named with their group.
COMMANDS += [
    f"{group.name} {command.name}"
    for group in cli.app.registered_groups
    for command in group.typer_instance.registered_commands
]


@cache
def help_flags(command: str | None) -> frozenset[str]:
    """Every flag that ``pate [command] --help`` names (options and the flags its text cites)."""
    args = ["--help"] if command is None else [*command.split(), "--help"]
    return frozenset(FLAG.findall(run_cli(args).stdout))


@cache
def options(command: str) -> frozenset[str]:
    """The options of a command: the flags that start a line of its --help's options list."""
    text = run_cli([*command.split(), "--help"]).stdout.split("\nOptions:\n", 1)[1]
    starts = re.findall(r"^  (-\S.*?)(?:  |$)", text, flags=re.M)
    return frozenset(flag for start in starts for flag in FLAG.findall(start))


def _options_table() -> dict[str, set[str]]:
    section = CLI_DOC.split("## Options of each command", 1)[1].split("\n## ", 1)[0]
    rows = re.findall(r"^\| `pate ([a-z][a-z -]*)` \| (.*) \|$", section, flags=re.M)
    return {command: set(FLAG.findall(flags)) for command, flags in rows}


def _plugins_flags() -> frozenset[str]:
    """The flags of the parameters installed plugins bring (the docs list the built-ins')."""
    built_in = {parameter.name for kind in builtins() for parameter in kind.parameters}
    return frozenset(
        flag
        for name, parameter in declarations().items()
        if name not in built_in
        for flag in (parameter.flag, *parameter.aliases)
    )


def test_every_command_lists_exactly_its_options():
    table = _options_table()
    assert sorted(table) == sorted(COMMANDS)
    for command, documented in table.items():
        listed = options(command) - _plugins_flags()
        assert documented == listed, (
            command,
            "in docs/cli.md only:",
            sorted(documented - listed),
            "in --help only:",
            sorted(listed - documented),
        )


def test_every_flag_in_the_cli_doc_exists():
    """Each flag named in a section about one command (its heading starts with `pate X`) is
    that command's; any other flag is some command's (or ``pate``'s own)."""
    anywhere = help_flags(None).union(*(help_flags(command) for command in COMMANDS))
    missing = sorted(set(FLAG.findall(CLI_DOC)) - anywhere)
    assert not missing, f"flags in docs/cli.md that no --help names: {missing}"
    for section in re.split(r"^##+ ", CLI_DOC, flags=re.M)[1:]:
        heading = section.split("\n", 1)[0]
        named = re.match(r"`pate ([a-z-]+)`", heading)
        if named:
            wrong = sorted(set(FLAG.findall(section)) - help_flags(named[1]))
            assert not wrong, f"{heading!r}: not in pate {named[1]} --help: {wrong}"


def test_every_command_is_in_the_cli_doc():
    for command in COMMANDS:
        assert f"`pate {command}`" in CLI_DOC


@pytest.mark.parametrize(
    "line",
    [
        line
        for block in re.findall(r"^```\n(.*?)^```$", CLI_DOC, flags=re.S | re.M)
        for line in block.splitlines()
        if line.startswith("pate ")
    ],
)
def test_cli_doc_commands_run(line):
    run_cli(shlex.split(line)[1:])


def test_api_doc_names_are_exported_with_their_arguments():
    table = API_DOC.split("## Names", 1)[1].split("\n## ", 1)[0]
    first_cells = re.findall(r"^\| (.*?) \| ", table, flags=re.M)
    rows = [row for cell in first_cells for row in re.findall(r"`(\w+)\(([^)]*)\)", cell)]
    assert len(rows) == 16  # load_votes, four mechanisms, eight commands, the pass's three
    for name, arguments in rows:
        assert name in pate_cli.__all__, name
        documented = re.findall(r"\w+", arguments.replace("*", ""))
        actual = list(inspect.signature(getattr(pate_cli, name)).parameters)
        assert [a for a in actual if a in documented] == documented, (name, actual)
    for cell in first_cells:  # the constants, and the types the functions return
        for name in re.findall(r"`(\w+)`", cell) + re.findall(r"-> (\w+)", cell):
            assert name in pate_cli.__all__, name


def test_api_doc_example_runs(monkeypatch, capsys):
    section = API_DOC.split("## Example", 1)[1]
    (code,) = re.findall(r"```python\n(.*?)```", section, flags=re.S)
    monkeypatch.chdir(ROOT)
    exec(compile(code, "docs/api.md", "exec"), {})
    printed = capsys.readouterr().out.splitlines()
    comments = [line[2:] for line in code.splitlines() if line.startswith("# ")]
    assert len(printed) == len(comments)
    for out, comment in zip(printed, comments, strict=True):
        # "282.72..." in a comment is a prefix of what is printed.
        for value, expected in zip(out.split(), comment.split(), strict=True):
            assert value.startswith(expected.rstrip(",").removesuffix("...")), (out, comment)


def test_the_documents_speak_of_the_project_only():
    for name, text in (("cli.md", CLI_DOC), ("api.md", API_DOC)):
        for word in ("shared/", "issue", "session", "Round "):
            assert word not in text, (name, word)


def test_the_package_cites_the_documents_by_their_place_in_the_project():
    """The code cites docs/cli.md and docs/api.md, never the documents they were made from."""
    found = []
    for path in sorted((ROOT / "pate_cli").rglob("*")):
        if path.suffix not in (".py", ".md", ".txt", ".json", ".toml") or not path.is_file():
            continue
        for number, line in enumerate(path.read_text().splitlines(), start=1):
            cited = re.sub(r"docs/(cli|api)\.md", "", line)
            if re.search(r"\b(cli|api)\.md\b|shared/", cited, flags=re.I):
                found.append(f"{path.relative_to(ROOT)}:{number}: {line.strip()}")
    assert not found, "\n".join(found)

"""Commands stay thin: a command declares its options, describes its one library call,
renders the report and sets the exit code; what the commands share (the checks, the output
files, --public, --record, the budget gate) lives once, in ``pate_cli.cli.run``.

Checked from the source: the body of every Typer command (the statements after its
docstring; the signature with its option declarations does not count) spans at most
``MAX_BODY_LINES`` lines.
"""

from __future__ import annotations

import ast
import textwrap
from pathlib import Path

import pytest

from pate_cli.cli.app import app

COMMANDS = Path(__file__).resolve().parent.parent / "pate_cli" / "cli" / "commands"
MAX_BODY_LINES = 40


def body_lines(function: ast.FunctionDef) -> int:
    """Lines from the first statement after the docstring to the end of the last one."""
    body = function.body
    first = body[0]
    if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant):
        if isinstance(first.value.value, str):
            body = body[1:]
    if not body:
        return 0
    end = body[-1].end_lineno
    assert end is not None
    return end - body[0].lineno + 1


def command_functions() -> dict[str, ast.FunctionDef]:
    """Every function of a module of ``pate_cli/cli/commands`` that the app registers as a
    command, by ``file:function``."""
    registered = {
        (command.callback.__module__, command.callback.__name__)
        for command in app.registered_commands
        if command.callback is not None
    }
    found = {}
    for path in sorted(COMMANDS.glob("*.py")):
        module = f"pate_cli.cli.commands.{path.stem}"
        for node in ast.parse(path.read_text(), str(path)).body:
            if isinstance(node, ast.FunctionDef) and (module, node.name) in registered:
                found[f"{path.name}:{node.name}"] = node
    return found


FUNCTIONS = command_functions()


def test_every_command_is_defined_in_the_commands_package():
    assert len(FUNCTIONS) == len(app.registered_commands), sorted(FUNCTIONS)


@pytest.mark.parametrize("name", sorted(FUNCTIONS))
def test_command_body_is_thin(name):
    lines = body_lines(FUNCTIONS[name])
    assert lines <= MAX_BODY_LINES, (
        f"{name}: the body spans {lines} lines (at most {MAX_BODY_LINES}); shared behaviour "
        "belongs in pate_cli.cli.run, the command's call in its describe()"
    )


def _function(source: str) -> ast.FunctionDef:
    node = ast.parse(textwrap.dedent(source)).body[0]
    assert isinstance(node, ast.FunctionDef)
    return node


def test_the_measure_skips_the_docstring_and_counts_every_line_of_the_body():
    statements = "\n".join(f"    x{i} = {i}" for i in range(MAX_BODY_LINES + 1))
    long = _function(
        f'def f(\n    a: int = 1,\n) -> None:\n    """Doc.\n\n    More."""\n{statements}\n'
    )
    assert body_lines(long) == MAX_BODY_LINES + 1
    spread = _function('def g():\n    """Doc."""\n    call(\n        1,\n\n        2,\n    )\n')
    assert body_lines(spread) == 5
    assert body_lines(_function('def h():\n    """Only a docstring."""\n')) == 0


@pytest.mark.parametrize(
    ("argv", "runs"), [([], "nothing"), (["inspect", "votes.npy"], "['inspect']")]
)
def test_verify_refuses_a_command_line_that_writes_no_record(argv, runs):
    from typer.main import get_command

    from pate_cli.cli import command_line

    found = command_line.mismatches(get_command(app), {"argv": argv})
    assert found == [f"it runs {runs}, not a command that writes a record"]

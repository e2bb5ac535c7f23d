"""The ``pate`` command line: the Typer app, the one error boundary, and ``main``.

Commands live one per module in ``pate_cli.cli.commands`` and share the option
aliases of ``pate_cli.cli.options``. Each command declares its options, describes
its one library call and renders the report; ``pate_cli.cli.run`` checks the inputs,
makes the call, writes the files and the record, emits the report as JSON or Rich
tables and applies the budget gate. Only the command layer decides exit codes; the
boundary below turns typed errors into one line and their code.
"""

from __future__ import annotations

import os
import re
import sys
import traceback
from typing import Annotated, Any

import typer

# typer >= 0.29 (pinned in pyproject.toml) carries its own copy of click.
from typer._click.exceptions import UsageError as ClickUsageError
from typer.core import TyperGroup

from pate_cli import __version__
from pate_cli.cli.commands import (
    aggregate,
    analyze,
    compare,
    inspect,
    plan,
    smooth_sensitivity,
    verify,
)
from pate_cli.cli.options import ARGV, error_line
from pate_cli.errors import ExitCode, PateError

# One metavar style in every help: an upper-case word for a value, [a|b] for a choice.
_LISTS = {"orders_text", "sigma", "threshold", "sigma1", "gamma"}  # comma lists where str
_NAMED = {"inputs": "ROLE=PATH", "seed": "N", "queries": "N", "teachers": "M"}


def _metavar(param: Any) -> str | None:
    """The help's name for the value of ``param`` (None: a flag, nothing to show)."""
    described = param.type_descriptor
    kind = getattr(described, "annotation", None)
    if param.name in _NAMED:
        return _NAMED[param.name]
    if described.is_choice:
        return "[" + "|".join(str(getattr(c, "value", c)) for c in described.choices) + "]"
    if kind is bool:
        return None
    if kind is float:
        return "FLOAT"
    if kind is int:
        return "INT"
    return "LIST" if param.name in _LISTS else "FILE"


def _uniform_help(group: TyperGroup) -> None:
    """Give every option of every command one metavar style, and arguments their bare name."""
    for command in group.commands.values():
        for param in getattr(command, "params", ()):
            if param.param_type_name == "argument":
                name = param.metavar or param.name.upper()
                param.display_type_rich = lambda ctx: None
                param._usage_display_name = lambda name=name: name
            elif not getattr(param, "is_flag", False):
                param.metavar = _metavar(param)


class PateGroup(TyperGroup):
    """The single error boundary: typed errors -> one line and their exit code."""

    def make_context(self, info_name: str | None, args: list[str], *more: Any, **extra: Any) -> Any:
        # Keep the command line as given: --record stores it for people to read.
        ARGV.set(tuple(args))
        _uniform_help(self)
        try:
            return super().make_context(info_name, args, *more, **extra)
        except ClickUsageError as error:
            # A parse error before any command (an unknown option of pate itself).
            error_line(f"pate: error: {_our_words(error.format_message())} (see 'pate --help')")
            raise typer.Exit(int(ExitCode.BAD_INPUT)) from None

    def invoke(self, ctx: Any) -> Any:
        try:
            return super().invoke(ctx)
        except (typer.Exit, typer.Abort):
            raise
        except PateError as error:
            if os.environ.get("PATE_DEBUG"):
                raise
            error_line(f"pate: error: {error.message}")
            raise typer.Exit(int(error.exit_code)) from None
        except ClickUsageError as error:
            # Click's own parse errors, kept on one line; still exit 2.
            command = (
                f"pate {ctx.invoked_subcommand} --help" if ctx.invoked_subcommand else "pate --help"
            )
            error_line(f"pate: error: {_our_words(error.format_message())} (see '{command}')")
            raise typer.Exit(int(ExitCode.BAD_INPUT)) from None
        except KeyboardInterrupt:
            error_line("pate: interrupted")
            raise typer.Exit(int(ExitCode.INTERRUPTED)) from None
        except Exception:
            if os.environ.get("PATE_DEBUG"):
                raise
            sys.stderr.write(traceback.format_exc())
            error_line(
                "pate: internal error: this is a bug in pate, please report it "
                "with the traceback above and the command you ran"
            )
            raise typer.Exit(int(ExitCode.INTERNAL)) from None


# Typer's wording of a bad value (pydantic's), and ours.
_WORDING = (
    ("a valid number, unable to parse string as a number", "a number"),
    ("a valid integer, unable to parse string as an integer", "an integer"),
    ("a valid integer, got a number with a fractional part", "an integer"),
    ("Input should be ", "expected "),
    ("Value error, ", ""),
)
_INVALID = re.compile(r"Invalid value for '([^']+)'(?: / '[^']+')*: ")


def _our_words(message: str) -> str:
    """A parse error's message in the words of the rest of pate, on one line."""
    message = _INVALID.sub(r"\1: ", " ".join(message.split()))
    for theirs, ours in _WORDING:
        message = message.replace(theirs, ours)
    return message.rstrip(".")


app = typer.Typer(
    cls=PateGroup,
    name="pate",
    help="Privacy analysis for PATE (Private Aggregation of Teacher Ensembles).\n\n"
    "Reads saved teacher votes (.npy/.npz) and reports Renyi-DP and (epsilon, delta) "
    "costs, smooth-sensitivity releases, noisy labels and comparisons. "
    "Exit codes: 0 ok, 1 budget exceeded (--max-epsilon), 2 bad input or usage, 70 a bug.",
    no_args_is_help=True,
    add_completion=True,
    context_settings={"help_option_names": ["-h", "--help"]},
    pretty_exceptions_show_locals=False,
    rich_markup_mode=None,
)


def _version(value: bool) -> None:
    if value:
        typer.echo(f"pate {__version__}")
        raise typer.Exit()


@app.callback()
def _root(
    version: Annotated[
        bool | None,
        typer.Option(
            "--version", "-V", callback=_version, is_eager=True, help="Show the version and exit."
        ),
    ] = None,
) -> None:
    """Privacy analysis for PATE (Private Aggregation of Teacher Ensembles)."""


app.command("analyze")(analyze.analyze)
app.command("smooth-sensitivity")(smooth_sensitivity.smooth_sensitivity)
app.command("aggregate")(aggregate.aggregate)
app.command("compare")(compare.compare)
app.command("inspect")(inspect.inspect)
app.command("verify")(verify.verify)
app.command("plan")(plan.plan)


def main() -> None:
    """Console-script entry point."""
    app(prog_name="pate")

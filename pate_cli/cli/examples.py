"""Each command's examples: the last section of its help, one whole command a line.

A command's help is its description, its arguments and options, then ``Examples:``. The
help formatter reflows every paragraph it is given (two commands would run onto one line, a
long one would be broken across two), so the examples are not part of the description: they
are the command's epilog, written line by line as given, never reflowed. A line longer than
the terminal is left for the terminal to wrap; copied, it is still one command.
"""

from __future__ import annotations

from typing import Any

from typer.core import TyperCommand

from pate_cli.cli.deferred import defer


class ExampleCommand(TyperCommand):
    """A command whose epilog is its examples, one command a line (:func:`examples`)."""

    def get_help_option(self, ctx: Any) -> Any:
        return defer(super().get_help_option(ctx))  # pate_cli.cli.deferred

    def format_epilog(self, ctx: Any, formatter: Any) -> None:
        lines = [line.strip() for line in (self.epilog or "").splitlines() if line.strip()]
        if not lines:
            return
        with formatter.section("Examples" if len(lines) > 1 else "Example"):
            for line in lines:
                formatter.write(f"{'':>{formatter.current_indent}}{line}\n")


def examples(*commands: str) -> dict[str, Any]:
    """What a command is registered with (``app.command(name, **examples(...))``) to end its
    help with these example command lines, each whole on its own line."""
    return {"cls": ExampleCommand, "epilog": "\n".join(commands)}

"""What an unknown option or command suggests: only the names spelled close to it.

A suggestion is for a slip of the fingers. An unrelated name (``--delta`` for ``--release``)
misleads more than none, so a name is suggested only when it is close to what was typed,
both compared without their leading dashes and without regard to case:

- it is at most one edit away for every four letters typed, and at least one (an edit: a
  letter inserted, removed or replaced, or two neighbouring letters swapped), and no other
  name is fewer edits away (``--sigam``: ``--sigma``, not ``--sigma1``); or else
- what was typed, three letters or more, begins it (``--max-eps``: ``--max-epsilon``;
  ``pate smooth``: ``smooth-sensitivity``).

``--release`` is three letters from ``--no-release`` (its opposite): it suggests nothing.
Unknown options and unknown commands (of ``pate`` and of ``pate budget``) follow the rule.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from typer._click.exceptions import NoSuchOption
from typer._click.exceptions import UsageError as ClickUsageError
from typer.core import TyperGroup

from pate_cli.cli.deferred import defer

#: Letters typed per edit allowed (at least one edit is).
LETTERS_PER_EDIT = 4
#: The fewest letters typed that may stand for the names they begin.
SHORTEST_ABBREVIATION = 3


def edits(a: str, b: str) -> int:
    """The fewest edits from ``a`` to ``b``: a letter inserted, removed or replaced, or two
    neighbouring letters swapped (the optimal string alignment distance)."""
    before: list[int] | None = None
    previous = list(range(len(b) + 1))
    for i in range(1, len(a) + 1):
        current = [i] + [0] * len(b)
        for j in range(1, len(b) + 1):
            current[j] = min(
                previous[j] + 1,
                current[j - 1] + 1,
                previous[j - 1] + (a[i - 1] != b[j - 1]),
            )
            swapped = i > 1 and j > 1 and a[i - 1] == b[j - 2] and a[i - 2] == b[j - 1]
            if swapped and before is not None:
                current[j] = min(current[j], before[j - 2] + 1)
        before, previous = previous, current
    return previous[-1]


def close_spellings(typed: str, names: Iterable[str]) -> list[str]:
    """The names spelled close to ``typed`` (the module docstring's rule), sorted; empty
    when none is."""
    word = typed.lstrip("-").lower()
    known = sorted(set(names))
    distance = {name: edits(word, name.lstrip("-").lower()) for name in known}
    allowed = max(1, len(word) // LETTERS_PER_EDIT)
    near = [name for name in known if distance[name] <= allowed]
    if near:
        nearest = min(distance[name] for name in near)
        return [name for name in near if distance[name] == nearest]
    if len(word) < SHORTEST_ABBREVIATION:
        return []
    return [name for name in known if name.lstrip("-").lower().startswith(word)]


def long_options(command: Any) -> list[str]:
    """Every ``--name`` that ``command`` takes and its help shows (both spellings of a
    switch)."""
    return [
        name
        for param in getattr(command, "params", ())
        if not getattr(param, "hidden", False)
        for name in (*param.opts, *getattr(param, "secondary_opts", ()))
        if name.startswith("--")
    ]


def with_close_options(error: ClickUsageError) -> ClickUsageError:
    """An unknown option's error suggesting only the options spelled close to it (click's
    own suggestions are any that share enough letters with it, the dashes included)."""
    if isinstance(error, NoSuchOption) and error.ctx is not None:
        error.possibilities = close_spellings(error.option_name, long_options(error.ctx.command))
    return error


class CloseSpellingGroup(TyperGroup):
    """A command group whose unknown command suggests only the commands spelled close to
    it."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.suggest_commands = False  # Typer's own suggestions: any sharing enough letters

    def get_help_option(self, ctx: Any) -> Any:
        return defer(super().get_help_option(ctx))  # pate_cli.cli.deferred

    def resolve_command(self, ctx: Any, args: list[str]) -> Any:
        try:
            return super().resolve_command(ctx, args)
        except ClickUsageError as error:
            if args and error.message.startswith("No such command"):
                close = close_spellings(args[0], self.list_commands(ctx))
                if close:
                    names = ", ".join(repr(name) for name in close)
                    error.message = f"{error.message.rstrip('.')}. Did you mean {names}?"
            raise

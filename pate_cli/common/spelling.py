"""How a message names a parameter: a flag on the command line, a keyword in Python.

One rule, two vocabularies. A check lives once, in the library, and raises the same error
for both callers; only its words differ. A Python caller reads ``sigma=-1.0`` and
``format="counts", teachers=M``; the command line, which runs its whole invocation inside
:func:`command_line`, reads ``--sigma -1.0`` and ``--format counts --teachers M``.

Names are given in the command line's spelling (``"seed-file"``); the keyword is the same
name with ``_`` for ``-`` unless :data:`_KEYWORDS` says otherwise, and a switch
(``--no-release``) is its keyword with its value (``release=False``).
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar

_ON_COMMAND_LINE: ContextVar[bool] = ContextVar("pate_on_command_line", default=False)

# Switches: a flag without a value, in Python a keyword with its value.
_SWITCHES = {
    "no-release": "release=False",
    "data-independent": "data_independent=True",
    "skip-conditions": "skip_conditions=True",
    "reference-local-sensitivity": "reference_local_sensitivity=True",
    "walk-local-sensitivity": "walk_local_sensitivity=True",
    "round-half-even": "half_even=True",
    "breakdown": "breakdown=True",
    "force": "force=True",
}
# Flags whose keyword is not the flag's name with "_" for "-".
_KEYWORDS = {
    "round-half-even": "half_even",
    "student-probs": "student_probs",
    "head": "heads",
    "input": "inputs",
}


class Placeholder(str):
    """A value written as it is in both vocabularies: a placeholder the user fills in (the
    ``M`` of ``--teachers M`` and ``teachers=M``) or a number as printed (``epsilon=0.05``)."""

    def __repr__(self) -> str:
        return str(self)


@contextmanager
def command_line() -> Iterator[None]:
    """Spell parameters as flags inside the block (the command line's whole invocation)."""
    token = _ON_COMMAND_LINE.set(True)
    try:
        yield
    finally:
        _ON_COMMAND_LINE.reset(token)


def on_command_line() -> bool:
    """Whether messages are being spelled for the command line."""
    return _ON_COMMAND_LINE.get()


def option(name: str) -> str:
    """The parameter ``name`` as its caller wrote it: ``--seed-file`` or ``seed_file``."""
    if on_command_line():
        return f"--{name}"
    return _SWITCHES.get(name) or _keyword(name)


def _keyword(name: str) -> str:
    return _KEYWORDS.get(name, name.replace("-", "_"))


def given(name: str, value: object, *, quote: bool = False) -> str:
    """The parameter with its value: ``--sigma -1.0`` or ``sigma=-1.0``.

    On the command line the value is written as typed (``quote`` writes its repr, for text
    that may hold spaces); in Python it is always its repr, as the caller would write it.
    """
    if isinstance(value, os.PathLike):
        value = os.fspath(value)
    if on_command_line():
        return f"--{name} {value!r}" if quote else f"--{name} {value}"
    return f"{_keyword(name)}={value!r}"


def options(*names: str, joined: str = "and") -> str:
    """Several parameters, listed as their caller would write them (``a, b and c``)."""
    words = [option(name) for name in names]
    return words[0] if len(words) == 1 else f"{', '.join(words[:-1])} {joined} {words[-1]}"

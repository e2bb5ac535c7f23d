"""Typer's coercion of an option's value, built when a value needs it.

Typer checks every option of the command line as it is parsed, given or not, with a pydantic
``TypeAdapter`` that it builds on first use (``typer.core._TyperParameter.get_runtime_param``).
An option not given has no value to check (``None``, or ``()`` for a list), yet its adapter
was built and pydantic imported (0.06 s): ``pate analyze --help`` imported pydantic for the
root's ``--version``, and a run built an adapter for every option of its command, given or not.

Here each option's coercion is a stand-in (:class:`Deferred`). A missing value passes
through as typer passes it. A plain value is read as typer's adapter reads it, without one:
ASCII text for a ``str``; a decimal integer for an ``int`` (no sign but ``-``, no leading
zero, at most 18 digits) and a decimal number for a ``float`` (digits, a fraction, an
exponent of at most two digits), where the option has no bounds; a member of the choices for
an enum (a default). Every other value goes to typer's own coercion, built then: the same
checks and the same messages (tests/test_startup.py holds the two to the same values). A
typer without ``typer._coercion`` keeps its own coercion for every value.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from enum import Enum
from typing import Any

try:
    from typer._coercion import RuntimeParam, TypeDescriptor, build_runtime_param
except ImportError:  # a typer that keeps its coercion elsewhere: its own, throughout
    RuntimeParam = object  # type: ignore[misc,assignment]
    TypeDescriptor = Any  # type: ignore[misc,assignment]
    build_runtime_param = None  # type: ignore[assignment]

_INT = re.compile(r"0|-?[1-9][0-9]{0,17}")
_FLOAT = re.compile(r"-?[0-9]{1,20}(?:\.[0-9]{1,20})?(?:[eE][-+]?[0-9]{1,2})?")
_NOT_PLAIN = object()


def plain(descriptor: TypeDescriptor, value: Any) -> Any:
    """``value`` as typer's coercion of ``descriptor`` reads it, where it is plain (the
    module docstring); ``_NOT_PLAIN`` otherwise."""
    info = descriptor.parameter_info
    kind = descriptor.annotation
    if info.parser is not None or descriptor.file_annotation is not None:
        return _NOT_PLAIN
    if isinstance(kind, type) and issubclass(kind, Enum):
        return value if any(value is member for member in kind) else _NOT_PLAIN
    if not isinstance(value, str) or not value.isascii():
        return _NOT_PLAIN
    if kind is str:
        return value
    if info.min is not None or info.max is not None or info.clamp:
        return _NOT_PLAIN
    if kind is int and _INT.fullmatch(value):
        return int(value)
    if kind is float and _FLOAT.fullmatch(value):
        return float(value)
    return _NOT_PLAIN


@dataclass(frozen=True)
class Deferred(RuntimeParam):
    """One option's coercion: a plain value read here, any other by typer's coercion, built
    at the first such value (``RuntimeParam.coerce`` returns a missing value before it comes
    here)."""

    descriptor: TypeDescriptor

    def _coerce_value(self, value: Any, param: Any, ctx: Any) -> Any:
        read = plain(self.descriptor, value)
        if read is not _NOT_PLAIN:
            return read
        built = build_runtime_param(self.descriptor)
        param._runtime_param = built  # later values go to typer's coercion directly
        return built._coerce_value(value, param=param, ctx=ctx)


def defer(param: Any) -> Any:
    """``param`` with a :class:`Deferred` coercion where typer has built none yet (a
    parameter typer did not make, or None, is returned as it is)."""
    descriptor = getattr(param, "type_descriptor", None)
    if build_runtime_param is None:
        return param
    if descriptor is not None and getattr(param, "_runtime_param", False) is None:
        param._runtime_param = Deferred(
            parameter_info=descriptor.parameter_info,
            annotation=descriptor.annotation,
            descriptor=descriptor,
        )
    return param


def defer_coercion(command: Any) -> None:
    """:func:`defer` every parameter of ``command`` and of its subcommands (their ``--help``
    is made as they parse: ``get_help_option`` defers it)."""
    for param in getattr(command, "params", ()):
        defer(param)
    for sub in getattr(command, "commands", {}).values():
        defer_coercion(sub)

"""The reading flags' values: ``--format`` (the library's ``fmt=``/``format=``) and the
positive counts ``--num-classes``, ``--teachers`` and ``--queries``."""

from __future__ import annotations

from pate_cli.choices import VoteFormat
from pate_cli.common.spelling import given
from pate_cli.errors import UsageError


def check_flags(num_classes: int | None, teachers: int | None, queries: int | None) -> None:
    for name, value, noun in (
        ("num-classes", num_classes, "classes"),
        ("teachers", teachers, "teachers"),
        ("queries", queries, "queries"),
    ):
        if value is not None and value < 1:
            raise UsageError(f"{given(name, value)}: expected a positive number of {noun}")


def as_vote_format(fmt: VoteFormat | str | None, format: VoteFormat | str | None) -> VoteFormat:
    """The library's ``fmt=`` or its synonym ``format=`` (``--format``); neither is auto.

    Raises:
        UsageError: Not a format, or both given and different.
    """
    if fmt is not None and format is not None and str(fmt) != str(format):
        raise UsageError(
            f"fmt={str(fmt)!r} and format={str(format)!r}: expected one of the two "
            "(format= is a synonym of fmt=)"
        )
    chosen = fmt if fmt is not None else format
    try:
        return VoteFormat(VoteFormat.AUTO if chosen is None else chosen)
    except ValueError:
        choices = ", ".join(f.value for f in VoteFormat)
        name = "fmt" if fmt is not None else "format"
        raise UsageError(f"{name}={chosen!r}: expected one of {choices}") from None


def vote_format(fmt: VoteFormat | str) -> VoteFormat:
    """``--format`` as a :class:`VoteFormat`, or the usage error naming the choices."""
    try:
        return VoteFormat(fmt)
    except ValueError:
        raise UsageError(
            f"{given('format', fmt)}: expected auto, counts, labels or probs"
        ) from None

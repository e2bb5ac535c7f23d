"""Checks of numeric parameters, shared by the command line (at parse time) and the API.

Each returns the value it accepts, so that it can serve as a Typer callback too, and raises
``UsageError`` (a ``ValueError``) with the flag's one-line message otherwise. Nothing here
imports numpy: the checks run before any work.
"""

from __future__ import annotations

import math
import operator
from enum import Enum
from typing import TypeVar

from pate_cli.choices import Conversion
from pate_cli.common.spelling import given
from pate_cli.errors import UsageError

E = TypeVar("E", bound=Enum)


def max_epsilon(value: float | None) -> float | None:
    """A budget: finite and >= 0 (a NaN budget could never be compared honestly)."""
    if value is not None and not (math.isfinite(value) and value >= 0):
        raise UsageError(f"{given('max-epsilon', value)}: expected a finite number >= 0")
    return value


def sigma_ss(value: float | None) -> float | None:
    """The GNSS noise multiplier: finite and > 0."""
    if value is not None and not (math.isfinite(value) and value > 0):
        raise UsageError(f"{given('sigma-ss', value)}: expected a finite number greater than 0")
    return value


def beta(value: float | None) -> float | None:
    """The smoothness of a GNSS release: finite and > 0."""
    if value is not None and not (math.isfinite(value) and value > 0):
        raise UsageError(f"{given('beta', value)}: expected a finite number greater than 0")
    return value


def release(
    order: float | None,
    smoothness: float | None,
    multiplier: float | None = None,
    name: str = "order",
) -> None:
    """A GNSS release's parameters given in advance: sigma_ss (``multiplier``) and beta
    (``smoothness``) in their domains, and a finite order > 1 that, with beta, lies below
    1/(2 beta): the range of Theorem 23 (Papernot et al. 2018), where its RDP is finite.
    ``name``: the parameter that gave the order (``order``, or ``orders`` for a grid of one).

    Raises:
        UsageError: one outside its range, named with what it was given with.
    """
    sigma_ss(multiplier)
    beta(smoothness)
    if order is None:
        return
    if not (math.isfinite(order) and order > 1):
        raise UsageError(f"{given(name, order)}: expected a finite Renyi order greater than 1")
    if smoothness is not None and not order < 1 / (2 * smoothness):
        raise UsageError(
            f"{given(name, order)} with {given('beta', smoothness)}: expected "
            f"1 < order < 1/(2 beta) = {1 / (2 * smoothness):.6g}, the release's range "
            "(Theorem 23)"
        )


def seed(value: int | None) -> int | None:
    """A seed: a whole number >= 0 (numpy's seeds are non-negative)."""
    if value is None:
        return None
    try:
        number = operator.index(value)
    except TypeError:
        raise UsageError(
            f"{given('seed', value, quote=True)}: expected a non-negative integer"
        ) from None
    if number < 0:
        raise UsageError(f"{given('seed', value)}: expected a non-negative integer")
    return number


def choice(kind: type[E], value: E | str, name: str) -> E:
    """One of the named choices of ``kind`` (a member or its value), for the parameter ``name``
    (spelled as its flag: ``"gate-on"``)."""
    try:
        return kind(value)
    except ValueError:
        choices = ", ".join(str(member.value) for member in kind)
        raise UsageError(f"{given(name, value, quote=True)}: expected one of {choices}") from None


def delta(value: float) -> None:
    """A target delta: strictly between 0 and 1."""
    if not 0 < value < 1:
        raise UsageError(f"{given('delta', value)}: expected a number strictly between 0 and 1")


def conversion(value: str | Conversion) -> Conversion:
    """A conversion from its name ("classic" or "improved")."""
    return choice(Conversion, value, "conversion")


def claim(value: float | None) -> float | None:
    """An epsilon someone claims (``audit --claim``): finite and >= 0."""
    if value is not None and not (math.isfinite(value) and value >= 0):
        raise UsageError(f"{given('claim', value)}: expected a finite number >= 0")
    return value


def alpha(value: float) -> float:
    """The probability that an audit's lower bound is wrong: strictly between 0 and 1."""
    if not 0 < value < 1:
        raise UsageError(f"{given('alpha', value)}: expected a number strictly between 0 and 1")
    return float(value)


def whole(value: int, name: str, low: int, high: int) -> int:
    """A whole number from ``low`` to ``high`` (``name``: its flag without the dashes)."""
    try:
        number = operator.index(value)
    except TypeError:
        number = None
    if isinstance(value, bool) or number is None or not low <= number <= high:
        raise UsageError(
            f"{given(name, value, quote=True)}: expected a whole number from {low:,} to {high:,}"
        )
    return number

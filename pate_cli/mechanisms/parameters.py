"""A mechanism's parameters as data: what each is called, what values it takes, how the
command line shows it, and how ``compare`` and ``plan`` use it.

A mechanism declares its parameters once (``Mechanism.parameters``); from the declarations
come its checks (a value outside the domain is one line naming the parameter, as the caller
wrote it), every command's flags and their help, ``compare``'s comma lists, the unknowns
``plan`` solves for and the way it searches, the library's keywords, and the docs' table.
Two mechanisms that take a parameter of the same name share its declaration.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from enum import Enum

from pate_cli.common.spelling import given
from pate_cli.errors import UsageError


@dataclass(frozen=True)
class Domain:
    """The values a parameter takes: a test, and how a message says what was expected."""

    expected: str
    """What a refusal says: "expected a finite number greater than 0"."""
    test: Callable[[float], bool]

    def __repr__(self) -> str:
        return f"Domain({self.expected!r})"


POSITIVE = Domain("a finite number greater than 0", lambda v: math.isfinite(v) and v > 0)
FINITE = Domain("a finite number", math.isfinite)


class Cost(str, Enum):
    """How a run's planned cost moves as the parameter grows: the way ``plan`` searches."""

    FALLS = "falls"
    """More noise: the cost falls as it grows (sigma, sigma1)."""
    RISES = "rises"
    """Less noise: the cost rises with it (LNMax's gamma)."""
    FIXED = "fixed"
    """The planned cost does not depend on it (a threshold): plan never solves for it."""


@dataclass(frozen=True)
class Parameter:
    """One parameter of a mechanism: its keyword (and JSON key), its flag and help, its
    domain and unit, whether ``compare`` takes a comma list of it, and how the planned cost
    moves with it."""

    name: str
    """The keyword (``sigma=40``), the JSON key and, with ``-`` for ``_``, the flag."""
    help: str
    """The flag's help and the docs' description: what the value is."""
    symbol: str
    """The value's placeholder in the docs: ``--sigma S``."""
    unit: str = "votes"
    """What the value is measured in (a noise std is in votes; Laplace's gamma in 1/votes)."""
    domain: Domain = POSITIVE
    listable: bool = True
    """``compare`` takes a comma list of it (a row per value)."""
    cost: Cost = Cost.FALLS
    aliases: tuple[str, ...] = ()
    """Other flags for it (``--sigma2``, the 2018 paper's name of Confident-GNMax's sigma)."""

    @property
    def flag(self) -> str:
        return "--" + self.name.replace("_", "-")

    @property
    def solvable(self) -> bool:
        """Whether ``plan`` can solve for it (its planned cost moves with it)."""
        return self.cost is not Cost.FIXED

    def check(self, value: object) -> float:
        """The value as a float in the domain (40 and 40.0 are one setting, in JSON too).

        Raises:
            UsageError: not a number, or outside the domain; one line naming the parameter.
        """
        return checked(self.flag[2:], value, self.domain)


def checked(name: str, value: object, domain: Domain = POSITIVE) -> float:
    """``value`` as a float in ``domain``, or one line naming ``name`` as its caller wrote it.

    Raises:
        UsageError: not a number, or outside the domain.
    """
    try:
        number = float(value)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        raise UsageError(f"{given(name, value, quote=True)}: expected a number") from None
    if not domain.test(number):
        raise UsageError(f"{given(name, number)}: expected {domain.expected}")
    return number

"""What every aggregator is: frozen parameters that validate themselves, the steps the rest
of ``pate`` asks of it, and the one registry of names.

A mechanism is an optional threshold step and an answer step (``pate_cli.mechanisms.steps``).
The accountant, the release, ``aggregate``, ``plan``, ``compare``, the renderers and the
records ask a mechanism (or its steps) what they need and never its type; what a mechanism
cannot give is an :class:`UnsupportedError`, one line and exit 2, never a default branch.
A new aggregator is one module: a frozen dataclass subclass of :class:`Mechanism`, decorated
with :func:`register`.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, fields
from typing import TYPE_CHECKING, Any, ClassVar, NoReturn

from pate_cli.common.spelling import given
from pate_cli.errors import UnsupportedError, UsageError

if TYPE_CHECKING:
    import numpy as np

    from pate_cli.files.seeds import Noise
    from pate_cli.mechanisms.samplers import AggregationResult
    from pate_cli.mechanisms.steps import AnswerStep, ThresholdStep


def assert_never(value: NoReturn) -> NoReturn:
    """Exhaustiveness guard for matches over enums."""
    raise AssertionError(f"unhandled value: {value!r}")


@dataclass(frozen=True)
class Run:
    """What ``aggregate`` gives a mechanism's aggregator besides the votes and the noise."""

    student_probs: np.ndarray | None
    """The student's probabilities (a mechanism that ``needs_baseline``)."""
    student_confidence: float
    num_teachers: int
    max_answered: int | None
    max_queries: int | None
    half_even: bool

    @property
    def limits(self) -> dict[str, int | None]:
        """The stop conditions, as the aggregators take them."""
        return {"max_answered": self.max_answered, "max_queries": self.max_queries}


class Mechanism:
    """The base of every aggregator description (subclasses are frozen dataclasses).

    Class attributes a subclass sets: ``name`` (as on the command line and in JSON),
    ``short`` (the compare table's label), ``parameters`` (the keywords that build it, which
    are also its command-line flags), and ``needs_baseline`` (the student's votes).
    """

    name: ClassVar[str]
    short: ClassVar[str]
    parameters: ClassVar[tuple[str, ...]]
    needs_baseline: ClassVar[bool] = False
    answers_every_query: ClassVar[bool] = True
    """False for a mechanism with a threshold step (it may leave a query unanswered)."""
    defaults_in_json: ClassVar[dict[str, Any]] = {}
    """Parameters left out of the JSON at these values (a block stays as it was)."""

    @property
    def threshold_step(self) -> ThresholdStep | None:
        """The step that decides whether a query is answered; None when every one is."""
        return None

    @property
    def answer_step(self) -> AnswerStep:
        """The noisy argmax that labels an answered query."""
        raise UnsupportedError(f"{self.name}: no answer step")

    def to_json_dict(self) -> dict[str, Any]:
        """The report's ``mechanism`` block: its name and parameters."""
        out: dict[str, Any] = {"name": self.name}
        for item in fields(self):  # type: ignore[arg-type]
            value = getattr(self, item.name)
            if self.defaults_in_json.get(item.name, object()) != value:
                out[item.name] = value
        return out

    def run(self, counts: np.ndarray, noise: Noise, run: Run) -> AggregationResult:
        """Aggregate the votes: the answered mask and the noisy labels (``aggregate``)."""
        raise UnsupportedError(f"{self.name}: no aggregator to run")


REGISTRY: dict[str, type[Mechanism]] = {}


def register(kind: type[Mechanism]) -> type[Mechanism]:
    """Make ``kind`` known by its name: to the command line, ``compare``, ``plan`` and the
    records (a class decorator)."""
    REGISTRY[kind.name] = kind
    return kind


def registered(name: str) -> type[Mechanism]:
    """The mechanism class named ``name``.

    Raises:
        UsageError: no mechanism has that name.
    """
    try:
        return REGISTRY[str(name)]
    except KeyError:
        raise UsageError(
            f"{given('mechanism', name, quote=True)}: expected one of {', '.join(REGISTRY)}"
        ) from None


def is_mechanism(value: object) -> bool:
    return isinstance(value, Mechanism)


def mechanism_from_dict(block: dict[str, Any]) -> Mechanism:
    """The mechanism a report's ``mechanism`` block describes (``to_json_dict``'s inverse).

    Raises:
        UsageError: an unknown name, or parameters that do not fit it.
    """
    parameters = dict(block)
    kind = REGISTRY.get(str(parameters.pop("name", None)))
    if kind is None:
        raise UsageError(
            f"mechanism {block!r}: unknown name; expected one of {', '.join(REGISTRY)}"
        )
    try:
        return kind(**parameters)
    except TypeError:
        raise UsageError(f"mechanism {block!r}: parameters that do not fit it") from None


def answers_every_query(block: dict[str, Any]) -> bool:
    """Whether the mechanism a report's ``mechanism`` block names answers every query."""
    return registered(str(block.get("name"))).answers_every_query


def as_float(owner: object, field: str) -> float:
    """The field as a float (so that 40 and 40.0 are one setting, in JSON too), set back."""
    value = getattr(owner, field)
    try:
        number = float(value)
    except (TypeError, ValueError):
        raise UsageError(f"{given(field, value, quote=True)}: expected a number") from None
    object.__setattr__(owner, field, number)  # frozen: only __post_init__ normalises
    return number


def positive(owner: object, field: str) -> None:
    """Check that the field is a finite number greater than 0 (made a float)."""
    value = as_float(owner, field)
    if not (math.isfinite(value) and value > 0):
        raise UsageError(f"{given(field, value)}: expected a finite number greater than 0")

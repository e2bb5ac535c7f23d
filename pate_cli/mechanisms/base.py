"""What every aggregator is: frozen parameters that validate themselves, the steps the rest
of ``pate`` asks of it, and the one registry of names.

A mechanism is an optional threshold step and an answer step (``pate_cli.mechanisms.steps``).
The accountant, the release, ``aggregate``, ``plan``, ``compare``, the renderers and the
records ask a mechanism (or its steps) what they need and never its type; what a mechanism
cannot give is an :class:`UnsupportedError`, one line and exit 2, never a default branch.
A new aggregator is one module: a frozen dataclass subclass of :class:`Mechanism` that
declares its parameters (``pate_cli.mechanisms.parameters``), registered by the registry
(``pate_cli.mechanisms.registry``: the built-ins, ``register``, and the entry points of the
group ``pate_cli.mechanisms``).
"""

from __future__ import annotations

from dataclasses import dataclass, fields
from typing import TYPE_CHECKING, Any, ClassVar, NoReturn

from pate_cli.errors import UnsupportedError

if TYPE_CHECKING:
    import numpy as np

    from pate_cli.files.seeds import Noise
    from pate_cli.mechanisms.parameters import Parameter
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
    ``short`` (the compare table's label), ``parameters`` (the declarations of the keywords
    that build it, which are also its command-line flags), ``source`` (where it is
    described, for the docs' table) and ``needs_baseline`` (the student's votes). Its
    parameters are checked against their declarations when it is built. A subclass defined
    outside pate has its ``run``, ``answer_step`` and ``threshold_step`` guarded: what they
    raise or return out of contract is its ``PluginError`` (``pate_cli.mechanisms.plugins``).
    """

    name: ClassVar[str]
    short: ClassVar[str]
    parameters: ClassVar[tuple[Parameter, ...]]
    source: ClassVar[str] = ""
    needs_baseline: ClassVar[bool] = False
    answers_every_query: ClassVar[bool] = True
    """False for a mechanism with a threshold step (it may leave a query unanswered)."""
    adaptive_queries: ClassVar[bool] = False
    """True where a query depends on earlier answers (its account stays on Renyi DP: the
    privacy-loss-distribution account composes a fixed list of queries)."""
    defaults_in_json: ClassVar[dict[str, Any]] = {}
    """Parameters left out of the JSON at these values (a block stays as it was)."""

    def __init_subclass__(cls, **kwargs: Any) -> None:
        # A mechanism from outside pate: its members guarded, its failures its own
        # (pate_cli.mechanisms.plugins).
        super().__init_subclass__(**kwargs)
        from pate_cli.mechanisms.plugins import guard

        guard(cls)

    def __post_init__(self) -> None:
        # Each declared parameter checked, and kept as a float (frozen: set here only).
        for parameter in self.parameters:
            value = parameter.check(getattr(self, parameter.name))
            object.__setattr__(self, parameter.name, value)

    @classmethod
    def keywords(cls) -> tuple[str, ...]:
        """The names of its parameters, in order (its keywords and JSON keys)."""
        return tuple(parameter.name for parameter in cls.parameters)

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

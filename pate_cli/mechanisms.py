"""Mechanism descriptions: small frozen objects that validate themselves.

A mechanism says what the aggregator does (which noise, which threshold),
never how much it costs; ``accounting`` turns a mechanism and the votes into
RDP. ``infer_mechanism`` maps the CLI flags to one of them and rejects
missing or conflicting flags with a one-line ``UsageError``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from enum import Enum
from typing import Any, NoReturn

from pate_cli import checks
from pate_cli.choices import ThresholdBound
from pate_cli.errors import UsageError
from pate_cli.spelling import given


class MechanismName(str, Enum):
    """The four aggregators, spelled as on the command line and in JSON."""

    GNMAX = "gnmax"
    CONFIDENT_GNMAX = "confident-gnmax"
    INTERACTIVE_GNMAX = "interactive-gnmax"
    LNMAX = "lnmax"


def assert_never(value: NoReturn) -> NoReturn:
    """Exhaustiveness guard for matches over enums and mechanism types."""
    raise AssertionError(f"unhandled value: {value!r}")


def _as_float(owner: object, field: str) -> float:
    """The field as a float (so that 40 and 40.0 are one setting, in JSON too), set back."""
    value = getattr(owner, field)
    try:
        number = float(value)
    except (TypeError, ValueError):
        raise UsageError(f"{given(field, value, quote=True)}: expected a number") from None
    object.__setattr__(owner, field, number)  # frozen: only __post_init__ normalises
    return number


def _positive(owner: object, field: str) -> None:
    value = _as_float(owner, field)
    if not (math.isfinite(value) and value > 0):
        raise UsageError(f"{given(field, value)}: expected a finite number greater than 0")


@dataclass(frozen=True)
class GNMax:
    """Gaussian noisy max with noise N(0, sigma^2) on every class (2018, Section 4.1)."""

    sigma: float

    def __post_init__(self) -> None:
        _positive(self, "sigma")

    @property
    def name(self) -> MechanismName:
        return MechanismName.GNMAX

    def to_json_dict(self) -> dict[str, Any]:
        return {"name": self.name.value, "sigma": self.sigma}


@dataclass(frozen=True)
class ConfidentGNMax:
    """Algorithm 1 of 2018: answer with GNMax(sigma) when max vote + N(0, sigma1^2) >= threshold."""

    threshold: float
    sigma1: float
    sigma: float
    threshold_bound: str = "theorem6"
    """How the threshold step's data-dependent RDP is bounded: "theorem6" (the 2018 paper)
    or "exact" (the divergence of its two outcomes, maximised over the neighbours)."""

    def __post_init__(self) -> None:
        if not math.isfinite(_as_float(self, "threshold")):
            raise UsageError(f"{given('threshold', self.threshold)}: expected a finite number")
        _positive(self, "sigma1")
        _positive(self, "sigma")
        bound = checks.choice(ThresholdBound, self.threshold_bound, "threshold-bound")
        object.__setattr__(self, "threshold_bound", bound.value)  # plain text in the JSON

    @property
    def name(self) -> MechanismName:
        return MechanismName.CONFIDENT_GNMAX

    def to_json_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "name": self.name.value,
            "threshold": self.threshold,
            "sigma1": self.sigma1,
            "sigma": self.sigma,
        }
        if self.threshold_bound != "theorem6":  # the default leaves the block as it was
            out["threshold_bound"] = self.threshold_bound
        return out


@dataclass(frozen=True)
class InteractiveGNMax(ConfidentGNMax):
    """Algorithm 2 of 2018: the threshold step sees votes minus the student's baseline."""

    @property
    def name(self) -> MechanismName:
        return MechanismName.INTERACTIVE_GNMAX


@dataclass(frozen=True)
class LNMax:
    """Laplace noisy max of 2017: noise of scale 1/gamma, (2 gamma)-DP per answer."""

    gamma: float

    def __post_init__(self) -> None:
        _positive(self, "gamma")

    @property
    def name(self) -> MechanismName:
        return MechanismName.LNMAX

    def to_json_dict(self) -> dict[str, Any]:
        return {"name": self.name.value, "gamma": self.gamma}


Mechanism = GNMax | ConfidentGNMax | InteractiveGNMax | LNMax


def mechanism_from_dict(block: dict[str, Any]) -> Mechanism:
    """The mechanism a report's ``mechanism`` block describes (``to_json_dict``'s inverse).

    Raises:
        UsageError: an unknown name, or parameters that do not fit it.
    """
    kinds: dict[str, type[GNMax] | type[ConfidentGNMax] | type[LNMax]] = {
        MechanismName.GNMAX.value: GNMax,
        MechanismName.CONFIDENT_GNMAX.value: ConfidentGNMax,
        MechanismName.INTERACTIVE_GNMAX.value: InteractiveGNMax,
        MechanismName.LNMAX.value: LNMax,
    }
    parameters = dict(block)
    kind = kinds.get(str(parameters.pop("name", None)))
    if kind is None:
        raise UsageError(f"mechanism {block!r}: unknown name; expected one of {', '.join(kinds)}")
    try:
        return kind(**parameters)
    except TypeError:
        raise UsageError(f"mechanism {block!r}: parameters that do not fit it") from None


FLAGS_OF = {
    MechanismName.GNMAX: ("--sigma",),
    MechanismName.CONFIDENT_GNMAX: ("--threshold", "--sigma1", "--sigma"),
    MechanismName.INTERACTIVE_GNMAX: ("--threshold", "--sigma1", "--sigma", "--baseline"),
    MechanismName.LNMAX: ("--gamma",),
}


def infer_mechanism(
    name: MechanismName | None,
    *,
    sigma: float | None = None,
    threshold: float | None = None,
    sigma1: float | None = None,
    gamma: float | None = None,
    has_baseline: bool = False,
    baseline_flag: str = "--baseline",
    threshold_bound: str | ThresholdBound = ThresholdBound.THEOREM6,
) -> Mechanism:
    """Build the mechanism named by ``--mechanism``, or inferred from the flags given.

    Raises:
        UsageError: a required flag is missing or a flag belongs to another mechanism.
    """
    flags_given = {
        "--sigma": sigma is not None,
        "--threshold": threshold is not None,
        "--sigma1": sigma1 is not None,
        "--gamma": gamma is not None,
        "--baseline": has_baseline,
    }
    if name is None:
        if gamma is not None:
            name = MechanismName.LNMAX
        elif has_baseline:
            name = MechanismName.INTERACTIVE_GNMAX
        elif threshold is not None or sigma1 is not None:
            name = MechanismName.CONFIDENT_GNMAX
        elif sigma is not None:
            name = MechanismName.GNMAX
        else:
            raise UsageError(
                "no mechanism: give --sigma (gnmax), --threshold --sigma1 --sigma "
                "(confident-gnmax), add --baseline (interactive-gnmax), or --gamma (lnmax)"
            )
    needed = FLAGS_OF[name]
    extra = [flag for flag, on in flags_given.items() if on and flag not in needed]
    missing = [flag for flag in needed if not flags_given[flag]]
    shown = {"--baseline": baseline_flag}
    if extra:
        raise UsageError(
            f"{', '.join(shown.get(f, f) for f in extra)} cannot be used with {name.value} "
            f"(it takes {' '.join(shown.get(f, f) for f in needed)})"
        )
    if missing:
        raise UsageError(f"{name.value} needs {', '.join(shown.get(f, f) for f in missing)}")
    bound = checks.choice(ThresholdBound, threshold_bound, "threshold-bound")
    if bound is not ThresholdBound.THEOREM6 and name in (MechanismName.GNMAX, MechanismName.LNMAX):
        raise UsageError(
            f"{given('threshold-bound', bound.value)}: {name.value} has no threshold step"
        )
    if name is MechanismName.GNMAX:
        assert sigma is not None
        return GNMax(sigma)
    if name is MechanismName.LNMAX:
        assert gamma is not None
        return LNMax(gamma)
    assert threshold is not None and sigma1 is not None and sigma is not None
    if name is MechanismName.CONFIDENT_GNMAX:
        return ConfidentGNMax(threshold, sigma1, sigma, bound.value)
    if name is MechanismName.INTERACTIVE_GNMAX:
        return InteractiveGNMax(threshold, sigma1, sigma, bound.value)
    assert_never(name)

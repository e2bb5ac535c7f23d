"""What may be published, and the budget gate that checks it.

See docs/cli.md, "What may be published" and "Budget gates".

Data-dependent numbers are functions of the private votes. A report's publishable figures
are the ones that are not: the data-independent bound of a mechanism that answers every
query (GNMax, LNMax), the worst case of one that may not (Confident/Interactive-GNMax,
every query answered; their expected data-independent bound weights the answer step by
Pr[answered], which depends on the votes), and a GNSS-released epsilon when everything
that went into it but the votes was fixed in advance: its order, beta and sigma_ss, with
private noise, conditions that hold and the sound local sensitivity.

A budget gate (``--max-epsilon``) compares one epsilon with the limit. By default it is the
smallest publishable figure that does not depend on a random draw, so the gate checks what
may be claimed and answers the same on every run.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

from pate_cli.choices import GateOn
from pate_cli.common import checks
from pate_cli.common.spelling import Placeholder, given, on_command_line, option
from pate_cli.errors import UsageError
from pate_cli.mechanisms import answers_every_query
from pate_cli.release.gnss import GnssRelease, Release, fixed_beta_sigma_ss
from pate_cli.reports.rounding import bound_significant

if TYPE_CHECKING:
    from pate_cli.accountant.figures import ExactBound


@dataclass(frozen=True)
class Figure:
    """One epsilon that may be published as it is."""

    basis: str
    """"data-independent", "worst-case" or "gnss-release"."""
    epsilon: float
    delta: float
    note: str
    random: bool = False
    """A sample of private noise (the GNSS release): publishable, but not what a gate checks,
    which must answer the same on every run."""

    def to_json_dict(self) -> dict[str, Any]:
        return {
            "basis": self.basis,
            "epsilon": self.epsilon,
            "delta": self.delta,
            "note": self.note,
        }


# Mechanisms that answer every query: their data-independent bound is the worst case.


def bound_figure(mechanism: dict[str, Any], worst_case: float, delta: float) -> Figure:
    """The data-independent bound with every query answered: a function of the parameters
    and the number of queries alone."""
    if answers_every_query(mechanism):
        return Figure(
            "data-independent",
            worst_case,
            delta,
            "depends only on the mechanism's parameters and the number of queries",
        )
    return Figure(
        "worst-case",
        worst_case,
        delta,
        "every query answered: depends only on the mechanism's parameters and the number "
        "of queries",
    )


def release_withheld(release: GnssRelease) -> str | None:
    """Why a GNSS-released epsilon may not be published as it is; None when it may."""
    if not release.released or release.epsilon_released is None:
        return "nothing was released"
    if release.noise is None or not release.noise.private:
        return f"its noise is public ({option('seed')}): anyone can undo it"
    if release.order_chosen_on_data:
        command = "smooth-sensitivity" if on_command_line() else "smooth_sensitivity's"
        return (
            f"its order was chosen on the votes: fix it ({command} {option('order')}, or a "
            f"single order in {option('orders')})"
        )
    if release.parameters_chosen_on_data:
        return f"beta and sigma_ss were chosen on the votes: fix them with {fixed_beta_sigma_ss()}"
    if not release.strict_local_sensitivity:
        return "the reference's local sensitivity can understate the smooth sensitivity"
    if release.conditions_apply and (release.conditions is None or not all(release.conditions)):
        return "conditions C5/C6 do not hold at its order"
    return None


def release_figure(release: Release | None, delta: float) -> Figure | None:
    """The GNSS-released epsilon as a publishable figure, when it is one."""
    if not isinstance(release, GnssRelease) or release_withheld(release) is not None:
        return None
    assert release.epsilon_released is not None
    return Figure(
        "gnss-release",
        release.epsilon_released,
        delta,
        "one sample of the GNSS release, drawn with private noise",
        random=True,
    )


def exact_figure(exact: ExactBound, delta: float) -> Figure:
    """The exact data-independent epsilon with every query answered."""
    how = {
        "gaussian": "Gaussian DP of the whole run",
        "pure-dp-optimal": "the optimal composition of its pure-DP steps",
        "pure-dp-heterogeneous": "the composition of its pure-DP steps of several epsilon0",
    }[exact.method]
    return Figure(
        "data-independent-exact",
        exact.epsilon,
        delta,
        f"every query answered, {how}: depends only on the mechanism's parameters and the "
        "number of queries",
    )


def figures(
    mechanism: dict[str, Any],
    worst_case: float,
    delta: float,
    release: Release | None = None,
    exact: ExactBound | None = None,
) -> tuple[Figure, ...]:
    """The publishable figures of a report, best (smallest) first."""
    found = [bound_figure(mechanism, worst_case, delta)]
    if exact is not None:
        found.append(exact_figure(exact, delta))
    sample = release_figure(release, delta)
    if sample is not None:
        found.append(sample)
    return tuple(sorted(found, key=lambda figure: figure.epsilon))


def gate_figure(found: tuple[Figure, ...]) -> float:
    """What ``--gate-on publishable`` checks: the smallest figure not drawn at random."""
    return min(figure.epsilon for figure in found if not figure.random)


@dataclass(frozen=True)
class Gate:
    """The verdict of ``--max-epsilon``: the JSON's ``"gate"`` object."""

    on: GateOn
    epsilon: float
    limit: float

    @property
    def passed(self) -> bool:
        return within_limit(self.epsilon, self.limit)

    @property
    def message(self) -> str:
        limit = given("max-epsilon", Placeholder(f"{self.limit:g}"))
        return f"{self.on.value} epsilon {bound_significant(self.epsilon)} exceeds {limit}"

    def to_json_dict(self) -> dict[str, Any]:
        return {
            "on": self.on.value,
            "epsilon": self.epsilon,
            "limit": self.limit,
            "passed": self.passed,
        }


def within_limit(epsilon: float | None, limit: float) -> bool:
    """The gate's rule: a figure passes when it is at most ``limit`` (the limit itself
    passes). A missing figure never does, nor a NaN (written so that it could not)."""
    return epsilon is not None and bool(epsilon <= limit)


def within_budget(report: Gated, on: GateOn, limit: float) -> bool:
    """Whether the figure ``report`` offers to the gate ``on`` (its ``epsilons()``) is within
    ``limit`` (``within_limit``): a compare row's ``within_budget``."""
    return within_limit(report.epsilons().get(on), limit)


def as_gate_on(value: GateOn | str) -> GateOn:
    return checks.choice(GateOn, value, "gate-on")


def apply_gate(
    epsilons: Mapping[GateOn, float | None], limit: float | None, on: GateOn
) -> Gate | None:
    """The gate of a report's ``epsilons`` (None without a limit)."""
    if limit is None:
        return None
    epsilon = epsilons.get(on)
    if epsilon is None:
        raise UsageError(f"{given('gate-on', on.value)}: this run has no such epsilon")
    return Gate(on, epsilon, limit)


def gates_a_private_figure(on: GateOn, mechanism: dict[str, Any]) -> bool:
    """True when the gated figure depends on the votes (so its verdict does too)."""
    return on in (GateOn.DATA_DEPENDENT, GateOn.RELEASED, GateOn.GUARANTEED) or (
        on in (GateOn.DATA_INDEPENDENT, GateOn.EXACT_DATA_INDEPENDENT)
        and not answers_every_query(mechanism)
    )


def gate_warnings(on: GateOn, mechanism: dict[str, Any], limit: float | None) -> tuple[str, ...]:
    """A gate on a figure that depends on the votes says so (``released`` too: the expected
    release is computed from the votes' smooth sensitivity)."""
    if limit is None or not gates_a_private_figure(on, mechanism):
        return ()
    return (
        f"{given('gate-on', on.value)}: the gate checks a figure that depends on the votes and "
        "may not be published (the default, publishable, checks what may be claimed)",
    )


def check_public_gate(on: GateOn, mechanism: dict[str, Any], limit: float | None) -> None:
    """``--public`` prints nothing private; a gate's verdict on a private figure is."""
    if limit is not None and gates_a_private_figure(on, mechanism):
        raise UsageError(
            f"{option('public')} with {given('gate-on', on.value)}: the gate's verdict would "
            "depend on the votes; gate on publishable (the default) or worst-case"
        )


class Gated(Protocol):
    """A report that says what it offers to the gate: ``AnalysisReport``,
    ``SmoothSensitivityReport`` and ``CompareRow`` do. The report models import this module,
    so it names none of them."""

    def epsilons(self) -> dict[GateOn, float | None]: ...


def analysis_epsilons(report: Gated) -> dict[GateOn, float | None]:
    """What an analysis offers to the gate: ``report.epsilons()``."""
    return report.epsilons()


release_epsilons = analysis_epsilons
"""What a smooth-sensitivity report offers to the gate: ``report.epsilons()`` too."""


def check_gate_choice(on: GateOn, *, releases: bool, what: str) -> None:
    """Refuse, before any work, a gate on a figure the run will not compute."""
    if on is GateOn.RELEASED and not releases:
        raise UsageError(f"{given('gate-on', 'released')}: {what} releases no epsilon")

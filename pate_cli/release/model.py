"""What an analysis says about releasing its data-dependent epsilon: the GNSS release of
``pate_cli.release.gnss`` (``GnssRelease``), or why none was attempted (``NotReleased``).

Plain frozen records and their JSON; the computation is in ``pate_cli.release.gnss``, which
re-exports these names.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, Literal

import numpy as np
from numpy.typing import NDArray

from pate_cli.common.spelling import on_command_line, option, options
from pate_cli.errors import UsageError
from pate_cli.files.seeds import Noise

FloatArray = NDArray[np.float64]


def fixed_beta_sigma_ss() -> str:
    """What fixes beta and sigma_ss, in its caller's words: the flags to give (``--beta and
    --sigma-ss``), or the keywords to pass (``beta=... and sigma_ss=...``)."""
    names = ("beta", "sigma-ss")
    if on_command_line():
        return options(*names)
    return " and ".join(f"{option(name)}=..." for name in names)


def not_private_note() -> str:
    """The note on beta and sigma_ss chosen on the votes (``pate_cli.common.spelling``)."""
    return (
        "beta and sigma_ss were chosen by looking at the private votes; that choice is "
        f"not itself differentially private (fix them with {fixed_beta_sigma_ss()})"
    )


#: A sampled released epsilon is published rounded up to this many decimals.
SAMPLE_DECIMALS = 4


def on_grid(value: float, decimals: int = SAMPLE_DECIMALS) -> float:
    """``value`` rounded up to a multiple of 10^-decimals, never below it: a sampled figure is
    published on a grid so that its low bits do not carry the float structure of the draw
    (Mironov, CCS 2012). A mitigation, not a proof: the snapping mechanism is the proven form."""
    if not math.isfinite(value):
        return value
    scale = 10**decimals
    steps = math.ceil(value * scale)
    up = steps / scale
    return up if up >= value else (steps + 1) / scale


@dataclass(frozen=True)
class GnssRelease:
    """The smooth-sensitivity analysis at one order, and one sampled release."""

    order: float
    data_independent_steps: tuple[bool, bool]
    """(threshold step, answer step) accounted data-independently at ``order``."""
    step_names: tuple[str, str]
    """The names of those two steps (each step's ``name``: "threshold", and "gnmax" or
    "lnmax"), their keys in the JSON's ``data_independent_steps``."""
    conditions: tuple[bool, bool] | None
    """(C5, C6) at ``order``; None when not checked (nothing to release, or not checkable)."""
    expected_answered: float
    rdp_at_order: float
    """Total RDP at ``order``, with data-independent steps at their bound."""
    epsilon_data_dependent: float
    epsilon_data_independent_at_order: float
    """The data-independent epsilon at ``order``: an upper bound of the data-dependent one."""
    released: bool
    reason: str | None = None
    epsilon_data_independent: float | None = None
    epsilon_worst_case: float | None = None
    """With nothing to release: the data-independent epsilon with every query answered,
    the one that does not depend on the votes (see ``RdpAccount.worst_case``)."""
    beta: float | None = None
    smooth_sensitivity: float | None = None
    sigma_ss: float | None = None
    gnss_cost: float | None = None
    epsilon_expected_release: float | None = None
    noise_std: float | None = None
    epsilon_released: float | None = None
    noise: Noise | None = None
    """Where the sample's noise came from (its seed is never shown unless public)."""
    parameters_chosen_on_data: bool = False
    order_chosen_on_data: bool = True
    """The order is the best data-dependent one of several (not fixed in advance)."""
    strict_local_sensitivity: bool = False
    local_sensitivity_bound: LocalSensitivityBound | None = None
    """How the local sensitivity was bounded (None: nothing to release)."""
    conditions_apply: bool = True
    """False for LNMax: its bound is non-decreasing in q by proof, C5/C6 are GNMax's."""
    local_sensitivity: FloatArray | None = None
    """The local sensitivity's bound at the distances the walk went through, d = 0 .. n-1
    (n up to M: past them no value can set the smooth sensitivity, ``core.horizon``)."""
    local_sensitivity_past_walk: float | None = None
    """At least the local sensitivity's bound at every distance past the walk (W)."""
    warnings: tuple[str, ...] = field(default_factory=tuple)

    def to_json_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "released": self.released,
            "order": self.order,
            "data_independent_steps": dict(
                zip(self.step_names, self.data_independent_steps, strict=True)
            ),
            "expected_answered": self.expected_answered,
            "rdp_at_order": self.rdp_at_order,
            "epsilon_data_dependent": self.epsilon_data_dependent,
            "epsilon_data_independent_at_order": self.epsilon_data_independent_at_order,
        }
        if self.conditions is not None:
            out["conditions"] = {"c5": self.conditions[0], "c6": self.conditions[1]}
        elif self.released and self.conditions_apply:  # under --skip-conditions, unchecked
            out["conditions"] = {"c5": None, "c6": None}
        if not self.released:
            out["reason"] = self.reason
            out["epsilon_data_independent"] = self.epsilon_data_independent
            out["epsilon_worst_case"] = self.epsilon_worst_case
            return out
        out.update(
            beta=self.beta,
            smooth_sensitivity=self.smooth_sensitivity,
            sigma_ss=self.sigma_ss,
            gnss_cost=self.gnss_cost,
            epsilon_expected_release=self.epsilon_expected_release,
            noise_std=self.noise_std,
            epsilon_released=self.epsilon_released,
            noise=None if self.noise is None else self.noise.to_dict(),
            parameters_chosen_on_data=self.parameters_chosen_on_data,
            order_chosen_on_data=self.order_chosen_on_data,
            strict_local_sensitivity=self.strict_local_sensitivity,
            local_sensitivity_bound=self.local_sensitivity_bound,
        )
        return out


@dataclass(frozen=True)
class NotReleased:
    """No GNSS release was attempted: LNMax, forced data-independent bounds, or conditions
    that fail or cannot be checked at the order."""

    reason: str

    def to_json_dict(self) -> dict[str, Any]:
        return {"released": False, "reason": self.reason}


Release = GnssRelease | NotReleased
"""What an analysis says about releasing its data-dependent epsilon."""


def gated_epsilon(release: Release) -> float | None:
    """What ``--gate-on released`` checks: the expected released epsilon, or with nothing to
    release the worst case (the data-independent epsilon can depend on the votes through the
    number answered). None when no release was attempted."""
    if isinstance(release, NotReleased):
        return None
    if release.released:
        return release.epsilon_expected_release
    return release.epsilon_worst_case


LocalSensitivityBound = Literal["tabulated", "walk", "reference"]
"""How the GNMax family's local sensitivity is bounded: over cells of log q (the default,
``core.ls_cells``), by the exact walk of every distinct histogram (``core.ls_gnmax``), or
as the 2018 reference does (which can understate it)."""


def bound_of(reference: bool, walk: bool) -> LocalSensitivityBound:
    """The bound the two switches ask for (``reference_local_sensitivity``,
    ``walk_local_sensitivity``).

    Raises:
        UsageError: both.
    """
    if reference and walk:
        raise UsageError(
            f"{option('reference-local-sensitivity')} and {option('walk-local-sensitivity')} "
            "are two different bounds: give one"
        )
    return "reference" if reference else "walk" if walk else "tabulated"


_RELEASE_MODES = {"expected": "expected", "sample": "sample", True: "sample", False: None}


def release_mode(release: bool | str) -> str | None:
    """``analyze``'s ``release=`` as "expected", "sample" or None (no release).

    Raises:
        UsageError: anything else.
    """
    try:
        return _RELEASE_MODES[release]
    except (KeyError, TypeError):
        raise UsageError(
            f'release={release!r}: expected "expected" (the default: no noise drawn), '
            '"sample" (or True: draw the released epsilon) or False'
        ) from None

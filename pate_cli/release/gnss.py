"""Publishing the data-dependent epsilon: its smooth sensitivity and the GNSS release.

A data-dependent epsilon is a function of the private votes. The 2018 paper
(Appendix B) releases it by adding Gaussian noise scaled to its beta-smooth
sensitivity (GNSS, Theorem 23), at one Renyi order, and pays the extra cost of
that release. This module composes the core functions of ``pate_cli.core.smooth``
the way the reference's ``smooth_sensitivity_table.py`` does:

1. the order is the best data-dependent order of the analysis (or ``order``);
2. a step whose data-dependent bound can never beat the data-independent one
   at that order is accounted data-independently and has no sensitivity;
   when both steps are, there is nothing to release;
3. conditions C5 and C6 (Appendix B.4) must hold at that order;
4. the local sensitivity of the total RDP is accumulated per distance d
   (threshold step always, answer step weighted by Pr[answered], or by the
   answered mask for a realised run), beta and sigma_ss are chosen by the
   reference's rule unless given, and one noisy release is sampled.

LNMax (2017) is released the same way from ``pate_cli.core.ls_lnmax``: one step, every query
answered, and no condition to check (its per-query bound rises with q, proven there).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from numpy.typing import NDArray

from pate_cli.accountant.compose import StepCosts, compose
from pate_cli.accountant.figures import eps_curve
from pate_cli.accountant.terms import DEFAULT_CHUNK_SIZE, QueryTerms, answer_weights, query_terms
from pate_cli.choices import Conversion
from pate_cli.core import conditions as cond_core
from pate_cli.core import ls_lnmax
from pate_cli.core import smooth as smooth_core
from pate_cli.core.theorem6 import NumericalRangeError
from pate_cli.errors import PateError, UsageError
from pate_cli.mechanisms import ConfidentGNMax, GNMax, LNMax, Mechanism
from pate_cli.seeds import Noise, os_entropy

FloatArray = NDArray[np.float64]

NOT_PRIVATE_NOTE = (
    "beta and sigma_ss were chosen by looking at the private votes; that choice is "
    "not itself differentially private (fix them with --beta and --sigma-ss)"
)


class ConditionError(PateError):
    """Conditions C5/C6 fail at the order used: the smooth-sensitivity bound does not hold."""


@dataclass(frozen=True)
class GnssRelease:
    """The smooth-sensitivity analysis at one order, and one sampled release."""

    order: float
    data_independent_steps: tuple[bool, bool]
    """(threshold step, answer step) accounted data-independently at ``order``."""
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
    conditions_apply: bool = True
    """False for LNMax: its bound is non-decreasing in q by proof, C5/C6 are GNMax's."""
    local_sensitivity: FloatArray | None = None
    warnings: tuple[str, ...] = field(default_factory=tuple)

    def to_json_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "released": self.released,
            "order": self.order,
            "data_independent_steps": {
                "threshold": self.data_independent_steps[0],
                "gnmax": self.data_independent_steps[1],
            },
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
        )
        return out


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


def _epsilon_at(kind: Conversion, order: float, rdp: float, delta: float) -> float:
    """Epsilon of an RDP value at one order under the chosen conversion (never below 0)."""
    value = eps_curve(kind, np.array([order]), np.array([max(rdp, 0.0)]), delta)[0]
    return float(max(value, 0.0))


def _local_sensitivity_total(*args: Any, **kwargs: Any) -> FloatArray:
    """``core.smooth.local_sensitivity_total``, where a setting past double
    precision (with --skip-conditions) is the user's error, not a crash."""
    try:
        return smooth_core.local_sensitivity_total(*args, **kwargs)
    except NumericalRangeError as exc:
        raise ConditionError(
            f"{exc}: the local sensitivity cannot be bounded there; choose another --sigma"
        ) from exc


def _beta_for_sigma_ss(ls: FloatArray, rdp: float, order: float, sigma_ss: float) -> float:
    """The reference's beta grid, minimising the release cost with sigma_ss fixed (its first
    beta when every cost is infinite, as with a vanishing sigma_ss: the release then reports
    an infinite cost, as it does for a beta given)."""
    grid = np.arange(0.3 / order, 0.495 / order, 0.01 / order)
    best, best_cost = float(grid[0]), math.inf
    for beta in grid:
        cost = rdp + smooth_core.rdp_gnss(beta, sigma_ss, order)
        cost += 2 * smooth_core.smooth_sensitivity(ls, beta) * sigma_ss
        if cost < best_cost:
            best, best_cost = float(beta), cost
    return best


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


def gnss_release(
    counts: FloatArray,
    num_teachers: int,
    mechanism: Mechanism,
    order: float,
    delta: float,
    conversion: Conversion,
    *,
    epsilon_data_independent: float,
    epsilon_worst_case: float,
    baseline: FloatArray | None = None,
    answered: NDArray[np.bool_] | None = None,
    beta: float | None = None,
    sigma_ss: float | None = None,
    noise: Noise | None = None,
    order_chosen_on_data: bool = True,
    strict: bool = True,
    skip_conditions: bool = False,
    half_even: bool = False,
    terms: QueryTerms | None = None,
    steps: StepCosts | None = None,
    order_index: int | None = None,
    chunk_size: int = DEFAULT_CHUNK_SIZE,
    progress: Callable[[int], None] | None = None,
) -> GnssRelease:
    """Smooth sensitivity of the data-dependent RDP at ``order`` and its GNSS release.

    Args:
        counts: vote counts (Q, C), integers.
        num_teachers: M, the number of distances d = 0 .. M-1.
        mechanism: GNMax, Confident-, Interactive-GNMax or LNMax.
        order: the Renyi order of the release.
        delta: target delta.
        conversion: how RDP becomes epsilon.
        epsilon_data_independent: reported when there is nothing to release.
        epsilon_worst_case: reported then too, as the epsilon to publish.
        baseline: Interactive-GNMax's baseline (Q, C) on the votes' scale.
        answered: realised run: the answered mask of the queries seen (a prefix).
        beta: fix beta instead of choosing it on the data.
        sigma_ss: fix the GNSS noise multiplier instead of choosing it on the data.
        noise: the source of the sampled release's noise (default: OS entropy).
        order_chosen_on_data: ``order`` is the best data-dependent order of several, so the
            sample is not publishable as it is.
        strict: the sound local sensitivity (the default); False reproduces the reference's
            bounds, which can be below the truth (see ``core.ls_gnmax``).
        skip_conditions: compute even where C5/C6 fail (with a warning).
        half_even: round the threshold statistic as the reference does.
        terms: the analysis's per-query terms (with log q), so they are not computed again.
        steps: the analysis's step costs at every order, with ``order_index`` the index of
            ``order`` among those orders: the release then reads its cost there, the same
            numbers the analysis reports.
        chunk_size: queries per chunk of the passes over the votes.
        progress: called with the number of queries done after each sensitivity chunk.

    Raises:
        UsageError: beta outside (0, 1/(2 order)), or LNMax with ``strict`` off.
        ConditionError: C5 or C6 fails at ``order`` and ``skip_conditions`` is off.
    """
    num_seen = len(counts) if answered is None else answered.shape[0]
    num_classes = counts.shape[1]
    if num_classes < 2:
        raise ConditionError(
            "the votes have a single class: every answer is that class, so the answer step "
            "costs nothing and there is no smooth sensitivity to release"
        )
    if isinstance(mechanism, LNMax):
        if not strict:
            raise UsageError(
                "--reference-local-sensitivity reproduces the 2018 reference's GNMax bounds; "
                "LNMax has only its sound bound (drop the flag)"
            )
        return _lnmax_release(
            counts[:num_seen],
            num_teachers,
            mechanism,
            order,
            delta,
            conversion,
            answered=answered,
            beta=beta,
            sigma_ss=sigma_ss,
            noise=noise,
            order_chosen_on_data=order_chosen_on_data,
            terms=terms,
            steps=steps,
            order_index=order_index,
            chunk_size=chunk_size,
            progress=progress,
        )
    assert isinstance(mechanism, (GNMax, ConfidentGNMax))
    orders = np.array([order])
    sigma = mechanism.sigma
    threshold_step = mechanism if isinstance(mechanism, ConfidentGNMax) else None

    # The data-independent shortcut of the reference, per step, at this order.
    ind_gnmax = cond_core.is_data_independent_always_opt_gnmax(
        num_teachers, num_classes, sigma, order
    )
    exact_threshold = threshold_step is not None and threshold_step.threshold_bound == "exact"
    # The per-query scalars once (the analysis passes its own); a second pass for the
    # sensitivities.
    if terms is None:
        terms = query_terms(
            counts,
            mechanism,
            num_seen=num_seen,
            baseline=baseline,
            half_even=half_even,
            need_logq=not ind_gnmax,
            chunk_size=chunk_size,
        )
    moves = terms.threshold_sensitivity
    # The exact divergence of the two outcomes is below Prop. 8's by data processing, so it
    # is the data-dependent one at every order.
    ind_threshold = threshold_step is None or (
        not exact_threshold
        and cond_core.is_data_independent_always_opt_threshold(
            num_teachers, threshold_step.threshold, threshold_step.sigma1, order, moves
        )
    )
    weights = answer_weights(terms, answered)
    # As the reference: a data-independent step is accounted at Prop. 8's bound.
    forced = (ind_threshold, ind_gnmax)
    if steps is not None and order_index is not None:
        at_order = steps.at(order_index, data_independent=forced)
    else:
        at_order = compose(mechanism, terms, orders, weights=weights, data_independent=forced)
    expected_answered = float(num_seen if weights is None else weights.sum())
    common = _fields(
        order, (ind_threshold, ind_gnmax), expected_answered, at_order, delta, conversion
    )
    if ind_threshold and ind_gnmax:
        return GnssRelease(
            conditions=None,
            released=False,
            reason=(
                f"both steps are data-independent at order {order:g}: "
                + (
                    "the data-independent epsilon can be published as it is"
                    if threshold_step is None and answered is None
                    else "the number answered depends on the votes, so publish the worst-case "
                    "epsilon (every query answered)"
                )
            ),
            epsilon_data_independent=epsilon_data_independent,
            epsilon_worst_case=epsilon_worst_case,
            **common,
        )

    warnings: list[str] = []
    conditions: tuple[bool, bool] | None
    try:
        conditions = cond_core.check_conditions(sigma, num_classes, order, reference=not strict)
    except NumericalRangeError as exc:
        if not skip_conditions:
            raise ConditionError(
                f"{exc} (order {order:g}, sigma {sigma:g}); the release bound is not verified "
                "there: choose another --order or --sigma, or pass --skip-conditions"
            ) from exc
        conditions = None
        warnings.append(f"{exc}; computed anyway because of --skip-conditions")
    if strict and conditions == (True, False):
        # The sound bounds need only C5 (a non-decreasing per-query bound); without C6
        # they take a cell-wise bound of the increments instead of Algorithm 3's plateau.
        warnings.append(
            f"condition C6 fails at order {order:g} (sigma {sigma:g}, {num_classes} classes): "
            "the local sensitivity uses a bound that does not need it"
        )
    elif conditions is not None and not all(conditions):
        failed = " and ".join(
            name for name, ok in zip(("C5", "C6"), conditions, strict=True) if not ok
        )
        message = (
            f"condition {failed} of the smooth-sensitivity analysis fails at order {order:g} "
            f"(sigma {sigma:g}, {num_classes} classes)"
        )
        if not skip_conditions:
            raise ConditionError(
                f"{message}; the release bound is not proven there: choose another --order, "
                "or pass --skip-conditions to compute it anyway"
            )
        warnings.append(f"{message}; computed anyway because of --skip-conditions")

    # Theorem 24: the bound of the total is the sum of the per-query bounds, chunk by chunk.
    ls = np.zeros(num_teachers)
    for start in range(0, num_seen, chunk_size):
        stop = min(start + chunk_size, num_seen)
        block = _whole_counts(counts[start:stop])
        ls += _local_sensitivity_total(
            block,
            num_teachers,
            order,
            sigma,
            threshold=None if threshold_step is None else threshold_step.threshold,
            sigma1=None if threshold_step is None else threshold_step.sigma1,
            step1_votes=block if baseline is None else block - baseline[start:stop],
            step2_weights=None if answered is None or weights is None else weights[start:stop],
            data_independent_step1=ind_threshold,
            data_independent_step2=ind_gnmax,
            reference=not strict,
            increments_verified=conditions is not None and all(conditions),
            half_even=half_even,
            threshold_exact=exact_threshold,
            threshold_sensitivity=moves,
        )
        if progress is not None:
            progress(stop - start)
    common.update(
        conditions=conditions,
        order_chosen_on_data=order_chosen_on_data,
        strict_local_sensitivity=strict,
    )
    return _sampled(ls, common, warnings, delta, conversion, beta, sigma_ss, noise)


def _lnmax_release(
    counts: FloatArray,
    num_teachers: int,
    mechanism: LNMax,
    order: float,
    delta: float,
    conversion: Conversion,
    *,
    answered: NDArray[np.bool_] | None,
    beta: float | None,
    sigma_ss: float | None,
    noise: Noise | None,
    order_chosen_on_data: bool,
    terms: QueryTerms | None,
    steps: StepCosts | None,
    order_index: int | None,
    chunk_size: int,
    progress: Callable[[int], None] | None,
) -> GnssRelease:
    """LNMax's release: every query answered (or those of ``answered``), its bound F(q)
    non-decreasing in q (proven in ``core.ls_lnmax``, so no condition to check), the local
    sensitivity of ``ls_lnmax``."""
    orders = np.array([order])
    weights = None if answered is None else answered.astype(np.float64)
    if terms is None:
        terms = query_terms(counts, mechanism, num_seen=len(counts), chunk_size=chunk_size)
    if steps is not None and order_index is not None:
        at_order = steps.at(order_index, data_independent=(True, False))
    else:
        at_order = compose(mechanism, terms, orders, weights=weights)
    answered_count = float(len(counts) if weights is None else weights.sum())
    common = _fields(order, (True, False), answered_count, at_order, delta, conversion)
    ls = np.zeros(num_teachers)
    tables = ls_lnmax.LnmaxSensitivity(counts.shape[1], num_teachers, mechanism.gamma, order)
    for start in range(0, len(counts), chunk_size):
        block = _whole_counts(counts[start : start + chunk_size])
        ls += tables.total(block, None if weights is None else weights[start : start + chunk_size])
        if progress is not None:
            progress(len(block))
    common.update(
        conditions=None,
        conditions_apply=False,
        order_chosen_on_data=order_chosen_on_data,
        strict_local_sensitivity=True,
    )
    return _sampled(ls, common, [], delta, conversion, beta, sigma_ss, noise)


def _whole_counts(block: FloatArray) -> FloatArray:
    """A block of votes as whole counts, or the error: a teacher change moves one vote."""
    block = np.asarray(block, dtype=np.float64)
    if np.any(block != np.round(block)):
        raise ConditionError(
            "the smooth sensitivity needs whole vote counts (a teacher change moves one vote); "
            "these votes are fractional"
        )
    return block


def _fields(
    order: float,
    steps: tuple[bool, bool],
    expected_answered: float,
    at_order: StepCosts,
    delta: float,
    conversion: Conversion,
) -> dict[str, Any]:
    """The release's fields known before its sensitivity: the costs at ``order``."""
    rdp_at_order = float(at_order.data_dependent[0])
    return {
        "order": order,
        "data_independent_steps": steps,
        "expected_answered": expected_answered,
        "rdp_at_order": rdp_at_order,
        "epsilon_data_dependent": _epsilon_at(conversion, order, rdp_at_order, delta),
        "epsilon_data_independent_at_order": _epsilon_at(
            conversion, order, float(at_order.data_independent[0]), delta
        ),
    }


def _sampled(
    ls: FloatArray,
    fields: dict[str, Any],
    warnings: list[str],
    delta: float,
    conversion: Conversion,
    beta: float | None,
    sigma_ss: float | None,
    noise: Noise | None,
) -> GnssRelease:
    """beta and sigma_ss (given, or chosen by the reference's rule), the GNSS cost (Theorem
    23) and one sampled release of the total's local sensitivities ``ls``; ``fields`` are
    the release's other fields (``_fields`` and how its sensitivity was bounded)."""
    order = float(fields["order"])
    rdp_at_order = float(fields["rdp_at_order"])
    chosen_on_data = beta is None or sigma_ss is None
    if beta is not None and not 0 < beta < 1 / (2 * order):
        raise UsageError(
            f"--beta {beta}: expected 0 < beta < 1/(2 order) = {1 / (2 * order):.6g} (Theorem 23)"
        )
    if beta is None and sigma_ss is None:
        beta, smooth, sigma_ss = smooth_core.optimal_gnss_parameters(ls, rdp_at_order, order)
    else:
        if beta is None:
            assert sigma_ss is not None
            beta = _beta_for_sigma_ss(ls, rdp_at_order, order, sigma_ss)
        smooth = smooth_core.smooth_sensitivity(ls, beta)
        if sigma_ss is None:
            # The minimiser of order e^{2 beta} / s^2 + 2 SS s, as the reference.
            sigma_ss = (order * math.exp(2 * beta) / smooth) ** (1 / 3) if smooth > 0 else math.inf
    if chosen_on_data:
        warnings.append(NOT_PRIVATE_NOTE)
    if math.isinf(smooth):
        # An unbounded local sensitivity (a vanishing sigma1, say): no noise makes the
        # release private, so its cost and its sample are infinite.
        gnss_cost, noise_std = math.inf, math.inf
    else:
        gnss_cost = smooth_core.rdp_gnss(beta, sigma_ss, order)
        noise_std = smooth * sigma_ss if smooth > 0 else 0.0
    source = os_entropy() if noise is None else noise
    warnings.extend(source.notes)
    expected_only = source.source == "none"
    drawn = 0 < noise_std < math.inf and not expected_only
    sample = float(source.generator("gnss-sample").normal(0.0, noise_std)) if drawn else noise_std
    return GnssRelease(
        released=True,
        beta=beta,
        smooth_sensitivity=smooth,
        sigma_ss=sigma_ss,
        gnss_cost=gnss_cost,
        epsilon_expected_release=_epsilon_at(conversion, order, rdp_at_order + gnss_cost, delta),
        noise_std=noise_std,
        epsilon_released=None
        if expected_only
        else on_grid(_epsilon_at(conversion, order, rdp_at_order + gnss_cost + sample, delta)),
        noise=None if expected_only else source,
        parameters_chosen_on_data=chosen_on_data,
        local_sensitivity=ls,
        warnings=tuple(warnings),
        **fields,
    )

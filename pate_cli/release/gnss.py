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
from dataclasses import dataclass, replace
from functools import partial
from typing import Any

import numpy as np
from numpy.typing import NDArray

from pate_cli.accountant.compose import StepCosts, compose
from pate_cli.accountant.figures import eps_curve
from pate_cli.accountant.terms import DEFAULT_CHUNK_SIZE, QueryTerms, answer_weights, query_terms
from pate_cli.choices import Conversion
from pate_cli.common.spelling import given, option
from pate_cli.core import conditions as cond_core
from pate_cli.core import ls_lnmax
from pate_cli.core import smooth as smooth_core
from pate_cli.core.compact import Compact, DenseRows, parts
from pate_cli.core.theorem6 import NumericalRangeError
from pate_cli.errors import UsageError
from pate_cli.files.seeds import Noise, os_entropy
from pate_cli.mechanisms import Mechanism, UnsupportedError
from pate_cli.mechanisms.steps import LocalSensitivity, step_names
from pate_cli.release.conditions import ConditionError, checked_conditions
from pate_cli.release.model import (
    SAMPLE_DECIMALS,
    GnssRelease,
    LocalSensitivityBound,
    NotReleased,
    Release,
    fixed_beta_sigma_ss,
    gated_epsilon,
    not_private_note,
    on_grid,
)

# The release's records live in ``pate_cli.release.model``; they are imported from here.
__all__ = [
    "SAMPLE_DECIMALS",
    "ConditionError",
    "GnssRelease",
    "NotReleased",
    "Release",
    "fixed_beta_sigma_ss",
    "gated_epsilon",
    "gnss_release",
    "not_private_note",
    "on_grid",
]

FloatArray = NDArray[np.float64]


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
            f"{exc}: the local sensitivity cannot be bounded there; choose another "
            f"{option('sigma')}"
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
class _AtOrder:
    """The order of the release, how RDP there becomes epsilon, and the analysis' step costs
    at every order (``steps``, with ``order_index`` the index of ``order``) when it passes
    them."""

    order: float
    delta: float
    conversion: Conversion
    steps: StepCosts | None
    order_index: int | None

    def fields(
        self,
        mechanism: Mechanism,
        terms: QueryTerms,
        weights: FloatArray | None,
        data_independent: tuple[bool, bool],
        num_seen: int,
    ) -> dict[str, Any]:
        """The release's fields known before its sensitivity: the costs at ``order`` (read
        from the analysis' steps when it passes them, else composed), with the steps flagged
        in ``data_independent`` (threshold, answer) at their data-independent bound."""
        if self.steps is not None and self.order_index is not None:
            at_order = self.steps.at(self.order_index, data_independent=data_independent)
        else:
            orders = np.array([self.order])
            at_order = compose(
                mechanism, terms, orders, weights=weights, data_independent=data_independent
            )
        rdp_at_order = float(at_order.data_dependent[0])
        rdp_independent = float(at_order.data_independent[0])
        return {
            "order": self.order,
            "data_independent_steps": data_independent,
            "step_names": step_names(mechanism.threshold_step, mechanism.answer_step),
            "expected_answered": float(num_seen if weights is None else weights.sum()),
            "rdp_at_order": rdp_at_order,
            "epsilon_data_dependent": _epsilon_at(
                self.conversion, self.order, rdp_at_order, self.delta
            ),
            "epsilon_data_independent_at_order": _epsilon_at(
                self.conversion, self.order, rdp_independent, self.delta
            ),
        }


@dataclass(frozen=True)
class _Draw:
    """How the release is sampled: beta and sigma_ss when fixed (None: chosen on the votes),
    the source of its noise, and whether its order was chosen on the votes."""

    beta: float | None
    sigma_ss: float | None
    noise: Noise | None
    order_chosen_on_data: bool


@dataclass(frozen=True)
class _Walk:
    """The pass over the votes that bounds the local sensitivity, a chunk at a time."""

    num_teachers: int
    chunk_size: int
    progress: Callable[[int], None] | None

    def local_sensitivity(
        self,
        counts: FloatArray | Compact | DenseRows,
        num_seen: int,
        block_bound: Callable[[Any, slice], FloatArray],
    ) -> FloatArray:
        """The local sensitivity of the total RDP at each distance d = 0 .. M-1, over the
        first ``num_seen`` queries: ``block_bound(block, rows)`` of each block of whole
        counts (its rows of the votes given as a slice), summed."""
        # Theorem 24: the bound of the total is the sum of the per-query bounds, chunk by chunk.
        ls = np.zeros(self.num_teachers)
        for start in range(0, num_seen, self.chunk_size):
            stop = min(start + self.chunk_size, num_seen)
            ls += block_bound(_whole_counts(counts[start:stop]), slice(start, stop))
            if self.progress is not None:
                self.progress(stop - start)
        return ls


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
    local_sensitivity: LocalSensitivityBound = "tabulated",
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
        local_sensitivity: how the GNMax family's local sensitivity is bounded: tabulated
            over cells of log q (the default, ``core.ls_cells``), by the exact ``walk``
            (``core.ls_gnmax``; never above the tabulated one), or as the ``reference``
            (which can be below the truth). LNMax has its one sound bound.
        skip_conditions: compute even where C5/C6 fail (with a warning).
        half_even: round the threshold statistic as the reference does.
        terms: the analysis's per-query terms (with log q), so they are not computed again.
        steps: the analysis's step costs at every order, with ``order_index`` the index of
            ``order`` among those orders: the release then reads its cost there, the same
            numbers the analysis reports.
        chunk_size: queries per chunk of the passes over the votes.
        progress: called with the number of queries done after each sensitivity chunk.

    Raises:
        UsageError: beta outside (0, 1/(2 order)), or LNMax with another bound than
            "tabulated".
        ConditionError: C5 or C6 fails at ``order`` and ``skip_conditions`` is off.
    """
    _check_releasable(counts)
    at = _AtOrder(order, delta, conversion, steps, order_index)
    draw = _Draw(beta, sigma_ss, noise, order_chosen_on_data)
    walk = _Walk(num_teachers, chunk_size, progress)
    return _release_of(mechanism)(
        counts=counts,
        mechanism=mechanism,
        at=at,
        draw=draw,
        walk=walk,
        baseline=baseline,
        answered=answered,
        terms=terms,
        local_sensitivity=local_sensitivity,
        skip_conditions=skip_conditions,
        half_even=half_even,
        published=(epsilon_data_independent, epsilon_worst_case),
    )


def _release_of(mechanism: Mechanism) -> Callable[..., GnssRelease]:
    """The release made with the local-sensitivity table the mechanism's answer step names
    (bound as its first argument).

    Raises:
        UnsupportedError: an answer step without one (or with one no release here reads).
    """
    table = mechanism.answer_step.local_sensitivity
    if table is None or (found := _RELEASES.get(table.table)) is None:
        raise UnsupportedError(
            f"{mechanism.name}: its answer step has no local-sensitivity table, so its "
            "data-dependent epsilon has no smooth-sensitivity release"
        )
    return partial(found, table)


def _check_releasable(counts: FloatArray | Compact) -> None:
    """The errors known before any pass over the votes: a single class (no sensitivity to
    release), and candidate sets (a number of classes per query: no bound for them)."""
    if isinstance(counts, Compact) and np.any(counts.num_classes != counts.vocabulary):
        raise UnsupportedError(
            "the smooth-sensitivity release of votes with candidate sets (a number of classes "
            "per query) is not available; the RDP figures are"
        )
    if counts.shape[1] < 2:
        raise ConditionError(
            "the votes have a single class: every answer is that class, so the answer step "
            "costs nothing and there is no smooth sensitivity to release"
        )


def _reference_bounds_are_gnmax(local_sensitivity: LocalSensitivityBound) -> None:
    """LNMax has only its sound bound: the reference's bounds and the walk are GNMax's."""
    if local_sensitivity == "reference":
        raise UsageError(
            f"{option('reference-local-sensitivity')} reproduces the 2018 reference's "
            "GNMax bounds; LNMax has only its sound bound "
            f"(leave out {option('reference-local-sensitivity')})"
        )
    if local_sensitivity == "walk":
        raise UsageError(
            f"{option('walk-local-sensitivity')} is the GNMax family's exact walk; LNMax has "
            f"only its tabulated bound (leave out {option('walk-local-sensitivity')})"
        )


def _num_seen(counts: FloatArray, answered: NDArray[np.bool_] | None) -> int:
    """The queries the run saw: every one, or those of the answered mask (a prefix)."""
    return len(counts) if answered is None else answered.shape[0]


def gaussian_release(
    table: LocalSensitivity,
    counts: FloatArray,
    mechanism: Mechanism,
    at: _AtOrder,
    draw: _Draw,
    walk: _Walk,
    *,
    baseline: FloatArray | None,
    answered: NDArray[np.bool_] | None,
    terms: QueryTerms | None,
    local_sensitivity: LocalSensitivityBound,
    skip_conditions: bool,
    half_even: bool,
    published: tuple[float, float],
) -> GnssRelease:
    """(Confident-, Interactive-)GNMax's release: the steps accounted data-independently at
    the order, conditions C5/C6 there, and the local sensitivity of ``core.smooth`` (at
    sigma ``table.noise``). ``published`` (the data-independent and the worst-case epsilon)
    is reported when both steps are data-independent: there is nothing to release then."""
    num_seen = _num_seen(counts, answered)
    threshold_step = mechanism.threshold_step
    exact_threshold = threshold_step is not None and threshold_step.bound == "exact"
    terms, forced = _data_independent_steps(
        counts, mechanism, table.noise, at.order, walk, terms, num_seen, baseline, half_even
    )
    moves = terms.threshold_sensitivity
    weights = answer_weights(terms, answered)
    # As the reference: a data-independent step is accounted at Prop. 8's bound.
    fields = at.fields(mechanism, terms, weights, forced, num_seen)
    if all(forced):
        fixed_count = threshold_step is None and answered is None
        return _nothing_to_release(fields, fixed_count, *published)
    strict = local_sensitivity != "reference"
    conditions, warnings = checked_conditions(
        table.noise, counts.shape[1], at.order, strict, skip_conditions
    )

    def block_bound(block: FloatArray, rows: slice) -> FloatArray:
        """One block's bound of ``core.smooth.local_sensitivity_total``."""
        return _local_sensitivity_total(
            block,
            walk.num_teachers,
            at.order,
            table.noise,
            threshold=None if threshold_step is None else threshold_step.threshold,
            sigma1=None if threshold_step is None else threshold_step.sigma1,
            step1_votes=None if baseline is None else block - baseline[rows],
            step2_weights=None if answered is None or weights is None else weights[rows],
            data_independent_step1=forced[0],
            data_independent_step2=forced[1],
            reference=not strict,
            walk=local_sensitivity == "walk",
            increments_verified=conditions is not None and all(conditions),
            half_even=half_even,
            threshold_exact=exact_threshold,
            threshold_sensitivity=moves,
        )

    ls = walk.local_sensitivity(counts, num_seen, block_bound)
    fields.update(
        conditions=conditions,
        strict_local_sensitivity=strict,
        local_sensitivity_bound=local_sensitivity,
    )
    return _sampled(ls, fields, warnings, at, draw)


def _data_independent_steps(
    counts: FloatArray,
    mechanism: Mechanism,
    sigma: float,
    order: float,
    walk: _Walk,
    terms: QueryTerms | None,
    num_seen: int,
    baseline: FloatArray | None,
    half_even: bool,
) -> tuple[QueryTerms, tuple[bool, bool]]:
    """The per-query terms (the analysis' own, or one pass over the votes) and which steps
    (threshold, answer of noise ``sigma``) are accounted data-independently at ``order``:
    those whose data-dependent bound can never beat the data-independent one there."""
    threshold_step = mechanism.threshold_step
    # The data-independent shortcut of the reference, per step, at this order.
    ind_gnmax = cond_core.is_data_independent_always_opt_gnmax(
        walk.num_teachers, counts.shape[1], sigma, order
    )
    exact_threshold = threshold_step is not None and threshold_step.bound == "exact"
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
            chunk_size=walk.chunk_size,
        )
    # The exact divergence of the two outcomes is below Prop. 8's by data processing, so it
    # is the data-dependent one at every order.
    ind_threshold = threshold_step is None or (
        not exact_threshold
        and cond_core.is_data_independent_always_opt_threshold(
            walk.num_teachers,
            threshold_step.threshold,
            threshold_step.sigma1,
            order,
            terms.threshold_sensitivity,
        )
    )
    return terms, (ind_threshold, ind_gnmax)


def _nothing_to_release(
    fields: dict[str, Any],
    fixed_count: bool,
    epsilon_data_independent: float,
    epsilon_worst_case: float,
) -> GnssRelease:
    """Both steps data-independent at the order: nothing to release. The epsilon to publish
    is the data-independent one when the number answered is fixed (``fixed_count``: no
    threshold, not a realised run), else the worst case."""
    return GnssRelease(
        conditions=None,
        released=False,
        reason=(
            f"both steps are data-independent at order {fields['order']:g}: "
            + (
                "the data-independent epsilon can be published as it is"
                if fixed_count
                else "the number answered depends on the votes, so publish the worst-case "
                "epsilon (every query answered)"
            )
        ),
        epsilon_data_independent=epsilon_data_independent,
        epsilon_worst_case=epsilon_worst_case,
        **fields,
    )


_LNMAX_DENSE_CLASSES = 1 << 22  # LNMax's release reads a dense row of every class


def laplace_release(
    table: LocalSensitivity,
    counts: FloatArray,
    mechanism: Mechanism,
    at: _AtOrder,
    draw: _Draw,
    walk: _Walk,
    *,
    answered: NDArray[np.bool_] | None,
    terms: QueryTerms | None,
    local_sensitivity: LocalSensitivityBound,
    **unused: Any,
) -> GnssRelease:
    """LNMax's release: every query answered (or those of ``answered``), its bound F(q)
    non-decreasing in q (proven in ``core.ls_lnmax``, so no condition to check), the local
    sensitivity of ``ls_lnmax``. The rest of ``gaussian_release``'s arguments (``unused``:
    a baseline, the conditions, the threshold's rounding) have no part in it."""
    _reference_bounds_are_gnmax(local_sensitivity)
    counts = counts[: _num_seen(counts, answered)]
    if terms is None:
        terms = query_terms(counts, mechanism, num_seen=len(counts), chunk_size=walk.chunk_size)
    rows: FloatArray | DenseRows = counts
    if isinstance(counts, Compact):  # its bounds read every class: dense blocks of rows
        if counts.vocabulary > _LNMAX_DENSE_CLASSES:
            raise UnsupportedError(
                f"LNMax's release over {counts.vocabulary} classes reads every class of each "
                f"query: at most {_LNMAX_DENSE_CLASSES}; its RDP figures are available"
            )
        rows, walk = DenseRows(counts), replace(walk, chunk_size=counts.dense_block_rows())
    weights = None if answered is None else answered.astype(np.float64)
    fields = at.fields(mechanism, terms, weights, (True, False), len(counts))
    tables = ls_lnmax.LnmaxSensitivity(counts.shape[1], walk.num_teachers, table.noise, at.order)

    def block_bound(block: FloatArray, rows: slice) -> FloatArray:
        """One block's bound of ``ls_lnmax``."""
        return tables.total(block, None if weights is None else weights[rows])

    ls = walk.local_sensitivity(rows, len(counts), block_bound)
    fields.update(
        conditions=None,
        conditions_apply=False,
        strict_local_sensitivity=True,
        local_sensitivity_bound="tabulated",
    )
    return _sampled(ls, fields, [], at, draw)


# The releases there are, by the table an answer step names (``LocalSensitivity.table``):
# the GNMax family's (core.smooth with core.ls_gnmax) and LNMax's (core.ls_lnmax).
_RELEASES: dict[str, Callable[..., GnssRelease]] = {
    "ls_gnmax": gaussian_release,
    "ls_lnmax": laplace_release,
}


def _whole_counts(block: FloatArray | Compact) -> FloatArray | Compact:
    """A block of votes as whole counts, or the error: a teacher change moves one vote."""
    block = block if isinstance(block, Compact) else np.asarray(block, dtype=np.float64)
    values, _, _ = parts(block)
    if np.any(np.isfinite(values) & (values != np.round(values))):
        raise ConditionError(
            "the smooth sensitivity needs whole vote counts (a teacher change moves one vote); "
            "these votes are fractional"
        )
    return block


def _sampled(
    ls: FloatArray, fields: dict[str, Any], warnings: list[str], at: _AtOrder, draw: _Draw
) -> GnssRelease:
    """beta and sigma_ss (given, or chosen by the reference's rule), the GNSS cost (Theorem
    23) and one sampled release of the total's local sensitivities ``ls``; ``fields`` are
    the release's other fields (``_AtOrder.fields`` and how its sensitivity was bounded)."""
    delta, conversion = at.delta, at.conversion
    beta, sigma_ss, noise = draw.beta, draw.sigma_ss, draw.noise
    order = float(fields["order"])
    rdp_at_order = float(fields["rdp_at_order"])
    chosen_on_data = beta is None or sigma_ss is None
    if beta is not None and not 0 < beta < 1 / (2 * order):
        raise UsageError(
            f"{given('beta', beta)}: expected 0 < beta < 1/(2 order) = {1 / (2 * order):.6g} "
            "(Theorem 23)"
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
        warnings.append(not_private_note())
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
        order_chosen_on_data=draw.order_chosen_on_data,
        local_sensitivity=ls,
        warnings=tuple(warnings),
        **fields,
    )

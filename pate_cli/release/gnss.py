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

The release is the one the mechanism's answer step brings (its ``release`` member, a value
of ``pate_cli.mechanisms.releases``), made here by its kind: the GNMax family's
(:func:`gaussian_release`, whose threshold step must be a Gaussian threshold) or LNMax's
(``pate_cli.release.laplace``: one step, every query answered, no condition to check). An
answer step without one is one line, as is a threshold step the release does not cover.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
from numpy.typing import NDArray

from pate_cli.accountant.compose import StepCosts
from pate_cli.accountant.terms import DEFAULT_CHUNK_SIZE, QueryTerms, answer_weights, query_terms
from pate_cli.choices import Conversion
from pate_cli.common.spelling import option
from pate_cli.core import conditions as cond_core
from pate_cli.core import smooth as smooth_core
from pate_cli.core.compact import Compact
from pate_cli.core.distinct import DistinctRows
from pate_cli.core.horizon import Horizon
from pate_cli.core.theorem6 import NumericalRangeError
from pate_cli.files.seeds import Noise
from pate_cli.mechanisms import Mechanism, UnsupportedError
from pate_cli.mechanisms.releases import GaussianRelease, LaplaceRelease, StepRelease
from pate_cli.mechanisms.steps import GaussianThreshold, gaussian_threshold
from pate_cli.release.common import AtOrder, Draw, Walk, num_seen, sampled, smallest_beta
from pate_cli.release.conditions import ConditionError, checked_conditions
from pate_cli.release.laplace import laplace_release
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
    "gaussian_release",
    "gnss_release",
    "laplace_release",
    "not_private_note",
    "on_grid",
]

FloatArray = NDArray[np.float64]


def _local_sensitivity_walked(*args: Any, **kwargs: Any) -> Horizon:
    """``core.smooth.local_sensitivity_walked``, where a setting past double
    precision (with --skip-conditions) is the user's error, not a crash."""
    try:
        return smooth_core.local_sensitivity_walked(*args, **kwargs)
    except NumericalRangeError as exc:
        raise ConditionError(
            f"{exc}: the local sensitivity cannot be bounded there; choose another "
            f"{option('sigma')}"
        ) from exc


def gnss_release(
    counts: FloatArray | DistinctRows,
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
        counts: vote counts (Q, C), integers, or held by distinct row (``DistinctRows``:
            each row's local sensitivity is then evaluated once and weighted by its count,
            the same terms as row by row).
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
    brought = release_of(mechanism)
    maker = _Maker(
        counts=counts,
        mechanism=mechanism,
        at=AtOrder(order, delta, conversion, steps, order_index),
        draw=Draw(beta, sigma_ss, noise, order_chosen_on_data),
        walk=Walk(num_teachers, chunk_size, progress),
        baseline=baseline,
        answered=answered,
        terms=terms,
        local_sensitivity=local_sensitivity,
        skip_conditions=skip_conditions,
        half_even=half_even,
        published=(epsilon_data_independent, epsilon_worst_case),
    )
    return brought.made_by(maker)


def release_of(mechanism: Mechanism) -> StepRelease:
    """The release the mechanism's answer step brings (its ``release`` member).

    Raises:
        UnsupportedError: an answer step that brings none (None, or no such member).
    """
    brought: StepRelease | None = getattr(mechanism.answer_step, "release", None)
    if brought is None:
        raise UnsupportedError(
            f"{mechanism.name}: its answer step has no local-sensitivity table, so its "
            "data-dependent epsilon has no smooth-sensitivity release"
        )
    return brought


class _Maker:
    """Makes the release an answer step brings (a ``releases.ReleaseMaker``), with the
    run's arguments: the GNMax family's here, LNMax's in ``release.laplace``."""

    def __init__(self, **arguments: Any) -> None:
        self.arguments = arguments

    def gaussian(self, release: GaussianRelease) -> GnssRelease:
        return gaussian_release(release, **self.arguments)

    def laplace(self, release: LaplaceRelease) -> GnssRelease:
        return laplace_release(release, **self.arguments)


def _check_releasable(counts: FloatArray | Compact | DistinctRows) -> None:
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


def gaussian_release(
    release: GaussianRelease,
    counts: FloatArray | DistinctRows,
    mechanism: Mechanism,
    at: AtOrder,
    draw: Draw,
    walk: Walk,
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
    sigma ``release.sigma``, and the threshold step's as its ``gaussian`` member gives it).
    ``published`` (the data-independent and the worst-case epsilon) is reported when both
    steps are data-independent: there is nothing to release then.

    Raises:
        UnsupportedError: a threshold step that is not a Gaussian threshold, before any work.
    """
    step = mechanism.threshold_step
    gate = None if step is None else gaussian_threshold(step, _feature(mechanism))
    seen = num_seen(counts, answered)
    terms, forced = _data_independent_steps(
        counts, mechanism, gate, release.sigma, at.order, walk, terms, seen, baseline, half_even
    )
    weights = answer_weights(terms, answered)
    # As the reference: a data-independent step is accounted at Prop. 8's bound.
    fields = at.fields(mechanism, terms, weights, forced, seen)
    if all(forced):
        fixed_count = gate is None and answered is None
        return _nothing_to_release(fields, fixed_count, *published)
    strict = local_sensitivity != "reference"
    conditions, warnings = checked_conditions(
        release.sigma, counts.shape[1], at.order, strict, skip_conditions
    )

    def bound(
        block: FloatArray,
        block_baseline: FloatArray | None,
        block_weights: FloatArray | None,
        row_counts: FloatArray | None,
        horizon: Horizon,
    ) -> Horizon:
        """A block's bound of ``core.smooth.local_sensitivity_walked`` (``Walk.walked``)."""
        return _local_sensitivity_walked(
            block,
            walk.num_teachers,
            at.order,
            release.sigma,
            horizon,
            threshold=None if gate is None else gate.threshold,
            sigma1=None if gate is None else gate.sigma1,
            step1_votes=None if block_baseline is None else block - block_baseline,
            step2_weights=block_weights,
            row_counts=row_counts,
            data_independent_step1=forced[0],
            data_independent_step2=forced[1],
            reference=not strict,
            walk=local_sensitivity == "walk",
            increments_verified=conditions is not None and all(conditions),
            half_even=half_even,
            threshold_exact=gate is not None and gate.bound == "exact",
            threshold_sensitivity=terms.threshold_sensitivity,
        )

    # The reference's weights (Pr[answered] per query, fractions) keep the queries' order.
    beta_min = smallest_beta(draw, at.order)
    walked = walk.walked(counts, seen, bound, beta_min, baseline, answered, by_row=strict)
    fields.update(
        conditions=conditions,
        strict_local_sensitivity=strict,
        local_sensitivity_bound=local_sensitivity,
    )
    return sampled(walked, fields, warnings, at, draw)


def _feature(mechanism: Mechanism) -> str:
    return f"{mechanism.name}: the smooth-sensitivity release of a Gaussian answer step"


def _data_independent_steps(
    counts: FloatArray | DistinctRows,
    mechanism: Mechanism,
    gate: GaussianThreshold | None,
    sigma: float,
    order: float,
    walk: Walk,
    terms: QueryTerms | None,
    num_seen: int,
    baseline: FloatArray | None,
    half_even: bool,
) -> tuple[QueryTerms, tuple[bool, bool]]:
    """The per-query terms (the analysis' own, or one pass over the votes) and which steps
    (threshold, answer of noise ``sigma``) are accounted data-independently at ``order``:
    those whose data-dependent bound can never beat the data-independent one there (the
    threshold step ``gate``, Gaussian)."""
    # The data-independent shortcut of the reference, per step, at this order.
    ind_gnmax = cond_core.is_data_independent_always_opt_gnmax(
        walk.num_teachers, counts.shape[1], sigma, order
    )
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
    ind_threshold = gate is None or (
        gate.bound != "exact"
        and cond_core.is_data_independent_always_opt_threshold(
            walk.num_teachers,
            gate.threshold,
            gate.sigma1,
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

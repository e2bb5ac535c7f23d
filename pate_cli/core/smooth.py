"""Smooth sensitivity of the data-dependent PATE epsilon and its GNSS release.

Papernot et al. 2018 ("Scalable Private Learning with PATE"), Appendix B, Theorem 24 /
Definition 12 / Theorem 23. The data-dependent RDP of Confident/Interactive GNMax is itself
a function of the votes, so it is released through the Gaussian Noise with Smooth
Sensitivity mechanism (GNSS, Definition 22 / Theorem 23). That needs, for every query and
every distance d = 0 .. M-1 (M teachers), an upper bound on the local sensitivity of the
per-query RDP over histograms at distance d (Theorem 24 sums those bounds over queries,
Definition 12 discounts them by exp(-beta d)).

Design. Everything reproduces the reference implementation (tensorflow/privacy
research/pate_2018 ``smooth_sensitivity.py`` and the driver
``ICLR2018/smooth_sensitivity_table.py``), but vectorised: the per-query bounds come from
``ls_answer`` (the answer step, on ``ls_cells``' or ``ls_gnmax``'s walks) and
``ls_threshold`` (the threshold step), and ``local_sensitivity_total`` never materialises a
(Q, M) array: pairs are produced in chunks and scattered into the total with bincount. The
parts go through the distances range by range (``core.horizon``); a release's walk
(``local_sensitivity_walked``) stops where no later distance can change its smooth
sensitivity, so its work and its tables follow the distances walked, not M.

Shapes: Q queries, C classes, M teachers (distances d = 0 .. M-1).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Protocol

import numpy as np
from numpy.typing import ArrayLike, NDArray

from pate_cli.core._common import (
    _as_counts,
    _as_integer_votes,
    _check_num_teachers,
    _check_order,
    _check_positive,
)
from pate_cli.core.compact import Compact, narrow
from pate_cli.core.gnmax import rdp_gnmax_data_independent
from pate_cli.core.horizon import Horizon, distance_ranges
from pate_cli.core.ls_answer import _AnswerWeights, _GnmaxWalk, _MovedTotal
from pate_cli.core.ls_threshold import (
    _ChangeWindow,
    _pr_answered_table,
    _threshold_ls_table,
    _threshold_tops,
    _ThresholdTotal,
)
from pate_cli.core.ls_tilde import _GnmaxSensitivity
from pate_cli.core.threshold import log_pr_answered_threshold, statistic_sensitivity


@dataclass(frozen=True)
class _ThresholdStep:
    """The threshold step (step 1) of Confident/Interactive GNMax: its rounded statistic h
    per query, on tables over h = 0 .. ``levels`` shifted by an offset (see ``build``)."""

    step1: NDArray[np.float64]  # what step 1 thresholds (Q, C)
    num_teachers: int  # M
    tops: NDArray[np.int64]  # the shifted h of each query (Q,)
    levels: int  # the largest shifted h
    threshold: float  # T
    shifted: float  # T shifted as h is
    sigma1: float
    sensitivity: int  # how far a neighbour moves h
    half_even: bool

    @classmethod
    def build(
        cls,
        counts: NDArray[np.float64],
        step1_votes: ArrayLike | None,
        num_teachers: int,
        threshold: float,
        sigma1: float | None,
        half_even: bool,
        sensitivity: int | None,
    ) -> _ThresholdStep:
        """Check sigma1 and step1_votes, and round the statistic (arguments as
        ``local_sensitivity_total``'s)."""
        if sigma1 is None:
            raise ValueError("sigma1 is required together with threshold")
        sigma1 = _check_positive("sigma1", sigma1)
        step1 = counts if step1_votes is None else _as_counts(step1_votes, "step1_votes")
        if step1.shape != counts.shape:
            raise ValueError(f"step1_votes has shape {step1.shape}, votes {counts.shape}")
        # With a baseline, abstaining teachers make votes - baseline sum below 0, and the
        # statistic h of the votes or of a neighbour can be negative, down to -M: the tables
        # then run over h = -M .. M, shifted by M (they depend on h - T alone).
        offset = 0
        if step1_votes is not None and np.any(step1.sum(axis=1) < -0.5):
            offset = num_teachers
        levels = num_teachers + offset  # the largest shifted h
        tops = _threshold_tops(step1, num_teachers, half_even, lowest=-offset) + offset
        shifted = float(threshold) + offset
        if sensitivity is None:
            sensitivity = statistic_sensitivity(step1, half_even=half_even)
        return cls(
            step1,
            num_teachers,
            tops,
            levels,
            float(threshold),
            shifted,
            sigma1,
            sensitivity,
            half_even,
        )

    def local_sensitivity(
        self, order: float, counts: NDArray[np.float64] | None, *, reference: bool, exact: bool
    ) -> _ThresholdTotal:
        """The step's local sensitivity summed over queries, range by range of distances:
        strict (a running maximum, every distance filled) unless ``reference``. Its table runs
        over h, and the queries are grouped by h = round(max(step1 votes)), each row standing
        for ``counts`` queries (None: one): no (Q, M) array."""
        table = _threshold_ls_table(
            self.levels,
            self.shifted,
            self.sigma1,
            order,
            rounded_up=not reference,
            exact=exact,
            sensitivity=self.sensitivity,
        )
        return _ThresholdTotal(self.tops, table, not reference, self.sensitivity - 1, counts)

    def answer_weights(
        self, sigma: float, order: float, counts: NDArray[np.float64] | None, *, reference: bool
    ) -> _AnswerWeights:
        """Pr[answered] as the answer step's weight: at the votes themselves for
        ``reference``, else a function of h whose change within each distance is bounded;
        each row standing for ``counts`` queries (None: one)."""
        held = np.ones(self.tops.size) if counts is None else counts
        if reference:
            pr = np.exp(
                log_pr_answered_threshold(
                    self.step1, self.threshold, self.sigma1, half_even=self.half_even
                )
            )
            return _AnswerWeights(pr * held)
        pr, change = _pr_answered_table(self.levels, self.shifted, self.sigma1)
        window = _ChangeWindow.build(change)
        del change  # M entries, no longer needed: the window holds its running maxima
        # The answer step's cost is at most Prop. 8's, whether or not it is data-dependent.
        independent = float(rdp_gnmax_data_independent(sigma, np.array([order]))[0])
        return _AnswerWeights(held, self.tops, pr, window, independent, self.sensitivity)

    def moved_total(
        self, window: _ChangeWindow, independent: float, counts: NDArray[np.float64] | None
    ) -> _MovedTotal:
        """An answer step at Prop. 8's cost ``independent`` (``_MovedTotal``)."""
        return _MovedTotal(window, self.tops, self.sensitivity, independent, counts)


def local_sensitivity_total(
    votes: ArrayLike | Compact,
    num_teachers: int,
    order: float,
    sigma: float,
    *,
    threshold: float | None = None,
    sigma1: float | None = None,
    step1_votes: ArrayLike | None = None,
    step2_weights: ArrayLike | None = None,
    data_independent_step1: bool = False,
    data_independent_step2: bool = False,
    reference: bool = False,
    walk: bool = False,
    increments_verified: bool = False,
    half_even: bool = False,
    threshold_exact: bool = False,
    threshold_sensitivity: int | None = None,
    row_counts: ArrayLike | None = None,
) -> NDArray[np.float64]:
    """Local-sensitivity bound of the total RDP at each distance d (Theorem 24).

    The sum over queries of a bound on the change of each query's published cost, thr(n) +
    w(n) g(n), over every histogram within distance d and its neighbours: the threshold step's
    (strict: a running maximum, every distance filled) plus the answer step's, whose weight w
    is Pr[answered] in expectation and so moves with the votes too (``_AnswerWeights``), or a
    fixed 0/1 mask for a realised run. A data-independent step has no sensitivity of its own,
    but in expectation its cost still moves with Pr[answered]. Never materialises a (Q, M) array.

    Args:
        votes: integer teacher vote counts (step 2, GNMax), dense or compact.
        num_teachers: M.
        order: Renyi order.
        sigma: GNMax (step 2) noise standard deviation.
        threshold: T of Confident/Interactive GNMax; None: plain GNMax (no step 1, weights 1).
        sigma1: threshold-step noise standard deviation (required with threshold).
        step1_votes: what step 1 thresholds (Interactive GNMax: votes - baseline); default votes.
        step2_weights: a realised run's 0/1 answered mask (or any fixed weights). Defaults to
            Pr[answered] (the expectation the reference uses), or 1 without a threshold.
        data_independent_step1: step 1 uses Prop. 8's bound (no sensitivity).
        data_independent_step2: step 2 uses Prop. 8's bound (no sensitivity).
        reference: the reference's bounds, which can be below the truth: as its
            ``_find_optimal_smooth_sensitivity_parameters``, its GNMax bounds, its threshold
            bounds (distances past max(h, M-h) left at 0, no running maximum), and each answer
            step weighted by Pr[answered] at the votes themselves.
        walk: the exact walk's answer-step bound (``ls_gnmax``), not the tabulated default.
        increments_verified: C6 holds at this order (see ``ls_cells.local_sensitivity_gnmax``).
        half_even: round the threshold statistic half to even, as the reference.
        threshold_sensitivity: how far a neighbour moves the rounded statistic (1, or 2 under
            half to even at exact halves); None: from ``step1_votes`` and ``half_even``
            (``threshold.statistic_sensitivity``).
        threshold_exact: the threshold step's table is its exact cost's (``--threshold-bound``).
        row_counts: how many queries each row stands for (whole; None: one), its every term
            weighted by it (``step2_weights`` then summed over its queries).

    Returns the summed bound per distance; ValueError on bad shapes, sigma1 or parameters.

    Shapes: votes (Q, C), step1_votes (Q, C), step2_weights (Q,) -> (M,).
    """
    parts, num_queries, num_teachers, _ = _parts(
        votes,
        num_teachers,
        order,
        sigma,
        threshold=threshold,
        sigma1=sigma1,
        step1_votes=step1_votes,
        step2_weights=step2_weights,
        data_independent_step1=data_independent_step1,
        data_independent_step2=data_independent_step2,
        reference=reference,
        walk=walk,
        increments_verified=increments_verified,
        half_even=half_even,
        threshold_exact=threshold_exact,
        threshold_sensitivity=threshold_sensitivity,
        row_counts=row_counts,
    )
    total, _ = _walked(parts, num_teachers, num_queries, None)
    return total


def local_sensitivity_walked(
    votes: ArrayLike | Compact,
    num_teachers: int,
    order: float,
    sigma: float,
    horizon: Horizon,
    **options: Any,
) -> Horizon:
    """``local_sensitivity_total`` (``options`` its keyword arguments) of one block of a
    release's queries, walked only over the distances that can change its smooth sensitivity
    at betas of at least ``horizon.beta`` (``core.horizon``): returns the horizon after the
    block, its totals added there (``Horizon.total``). The weights (Pr[answered], or
    ``step2_weights``) must be at most 1 a query: the queries still to come are bounded as
    such (a row standing for ``row_counts`` queries: its weight at most that count).

    Shapes: votes (Q, C).
    """
    weights = options.get("step2_weights")
    held = options.get("row_counts")
    most = 1.0 if held is None else np.asarray(held, dtype=np.float64)
    if weights is not None and np.any(np.asarray(weights, dtype=np.float64) > most):
        raise ValueError("a release's walk needs step2_weights of at most 1 a query")
    parts, num_queries, num_teachers, shared = _parts(votes, num_teachers, order, sigma, **options)
    totals, bound = _walked(parts, num_teachers, num_queries, horizon, shared)
    return horizon.after(totals, bound, num_queries)


class _Part(Protocol):
    """A part of the total, range by range of distances (``span``, asked for in order from
    0); ``bound``: at least the part at every distance; ``per_query``: at least one query's
    part (of weight at most 1) at any distance, whatever its votes, in any block of the
    release whose tables are this block's."""

    bound: float
    per_query: float

    def span(self, start: int, stop: int) -> NDArray[np.float64]: ...


def _parts(
    votes: ArrayLike | Compact,
    num_teachers: int,
    order: float,
    sigma: float,
    *,
    threshold: float | None = None,
    sigma1: float | None = None,
    step1_votes: ArrayLike | None = None,
    step2_weights: ArrayLike | None = None,
    data_independent_step1: bool = False,
    data_independent_step2: bool = False,
    reference: bool = False,
    walk: bool = False,
    increments_verified: bool = False,
    half_even: bool = False,
    threshold_exact: bool = False,
    threshold_sensitivity: int | None = None,
    row_counts: ArrayLike | None = None,
) -> tuple[list[_Part], int, int, bool]:
    """The parts of ``local_sensitivity_total`` (arguments as its): the threshold step's, the
    change of Pr[answered] of an answer step at Prop. 8's cost, the answer step's, each where
    it has a sensitivity; the number of queries, M, and whether the threshold step's tables
    are every block's (a baseline's tables run over h = -M .. M in a block whose
    votes - baseline sum below 0, and its statistic moves as its votes say)."""
    counts, extra, num_teachers, order, sigma = _checked(votes, num_teachers, order, sigma)
    num_rows, num_classes = counts.shape[0], counts.shape[1] + extra
    held = None if row_counts is None else _row_counts(row_counts, num_rows)
    num_queries = num_rows if held is None else int(held.sum())
    parts: list[_Part] = []
    answer = _AnswerWeights(np.ones(num_rows) if held is None else held)
    shared = True
    if threshold is not None:
        step = _ThresholdStep.build(
            counts, step1_votes, num_teachers, threshold, sigma1, half_even, threshold_sensitivity
        )
        # Every block's tables are this block's, or within them: the sensitivity is given,
        # and the statistic's tables run over h = 0 .. M, or this block's over -M .. M.
        widest = step.levels > num_teachers
        shared = threshold_sensitivity is not None and (step1_votes is None or widest)
        if not data_independent_step1:
            parts.append(
                step.local_sensitivity(order, held, reference=reference, exact=threshold_exact)
            )
        if step2_weights is None:
            answer = step.answer_weights(sigma, order, held, reference=reference)
            if answer.change is not None and (data_independent_step2 or num_classes == 1):
                parts.append(step.moved_total(answer.change, answer.independent, held))
    if step2_weights is not None:
        answer = _AnswerWeights(_fixed_weights(step2_weights, num_rows))
    if not data_independent_step2 and num_classes > 1 and num_queries > 0:
        bounds = {"reference": reference, "increments_verified": increments_verified}
        params = _GnmaxSensitivity.build(sigma, order, num_classes, **bounds)
        votes = _as_integer_votes(counts)
        parts.append(_GnmaxWalk(votes, answer, num_teachers, params, extra, walk))
    return parts, num_queries, num_teachers, shared


def _walked(
    parts: list[_Part],
    num_teachers: int,
    num_queries: int,
    horizon: Horizon | None,
    shared: bool = True,
) -> tuple[NDArray[np.float64], float]:
    """The parts summed (in order) at every distance, range by range, and their bound W;
    with a ``horizon``, only until it is reached (the totals then end there). Tables not
    ``shared`` by every block bound no query to come: a block with queries to come then
    walks every distance."""
    bound = sum((part.bound for part in parts), 0.0)
    per_query = sum((part.per_query for part in parts), 0.0) if shared else math.inf
    pieces, reach = [np.zeros(0)], math.inf
    for start, stop in distance_ranges(num_teachers):
        span = np.zeros(stop - start)
        for part in parts:
            span += part.span(start, stop)
        pieces.append(span)
        if horizon is not None:
            reach = min(reach, horizon.reach(span, start, bound, num_queries, per_query))
            if reach < stop:
                break
    return np.concatenate(pieces), bound


def _checked(
    votes: ArrayLike | Compact, num_teachers: int, order: float, sigma: float
) -> tuple[NDArray[np.float64], int, int, float, float]:
    """The votes as counts (Q, C) and the zero-vote classes beyond them (compact votes:
    ``compact.narrow``), then M, the order and sigma, each checked."""
    dense, extra = narrow(votes)
    return (
        _as_counts(dense, "votes"),
        extra,
        _check_num_teachers(num_teachers),
        _check_order(order),
        _check_positive("sigma", sigma),
    )


def _row_counts(counts: ArrayLike, num_rows: int) -> NDArray[np.float64]:
    """How many queries each row stands for: whole numbers, at least 1, one per row."""
    out = np.asarray(counts, dtype=np.float64)
    if out.shape != (num_rows,):
        raise ValueError(f"row_counts must have shape ({num_rows},), got {out.shape}")
    if not np.all(np.isfinite(out)) or np.any(out < 1) or np.any(out != np.round(out)):
        raise ValueError("row_counts must be whole numbers of at least 1")
    return out


def _fixed_weights(weights: ArrayLike, num_queries: int) -> NDArray[np.float64]:
    out = np.asarray(weights, dtype=np.float64)
    if out.shape != (num_queries,):
        raise ValueError(f"step2_weights must have shape ({num_queries},), got {out.shape}")
    if not np.all(np.isfinite(out)) or np.any(out < 0):
        raise ValueError("step2_weights must be finite and non-negative")
    return out


def smooth_sensitivity(ls_total: ArrayLike, beta: float) -> float:
    """beta-smooth sensitivity from local-sensitivity bounds: max_d e^(-beta d) LS[d].

    Definition 12 / Theorem 24, Papernot et al. 2018.

    Raises:
        ValueError: empty input, NaN, or beta < 0.

    Shapes: ls_total (M,) -> scalar.
    """
    ls = np.asarray(ls_total, dtype=np.float64)
    if ls.ndim != 1 or ls.size == 0 or np.any(np.isnan(ls)):
        raise ValueError("ls_total must be a non-empty 1-D array without NaN")
    if not beta >= 0:
        raise ValueError(f"beta must be non-negative, got {beta}")
    return float(np.max(ls * np.exp(-beta * np.arange(ls.size))))


def rdp_gnss(beta: float, sigma_ss: float, order: float) -> float:
    """RDP of the GNSS release (Theorem 23, Papernot et al. 2018).

    lambda e^(2 beta) / sigma_ss^2 + (beta lambda - log(1 - 2 lambda beta) / 2) / (lambda - 1),
    valid for 1 < lambda < 1 / (2 beta). sigma_ss = inf (no noise needed) is allowed.

    Raises:
        ValueError: beta < 0, sigma_ss <= 0, or the order outside (1, 1/(2 beta)).

    Shapes: scalars -> scalar.
    """
    order = _check_order(order)
    if not (beta >= 0 and math.isfinite(beta)):
        raise ValueError(f"beta must be finite and non-negative, got {beta}")
    if not sigma_ss > 0:
        raise ValueError(f"sigma_ss must be positive, got {sigma_ss}")
    if beta > 0 and not order < 1 / (2 * beta):
        raise ValueError(f"order {order} outside the (1, 1/(2*beta)) range for beta={beta}")
    # Theorem 23, Papernot et al. 2018.
    # In float64: sigma_ss^2 beyond the float range gives a cost of 0 (or inf), not an error.
    with np.errstate(over="ignore", divide="ignore", under="ignore"):
        noise_term = order * np.exp(2 * beta) / np.float64(sigma_ss) ** 2
    return float(noise_term) + (beta * order - 0.5 * math.log1p(-2 * order * beta)) / (order - 1)


def beta_grid(order: float) -> NDArray[np.float64]:
    """The reference's betas at ``order``: ``np.arange(.3/order, .495/order, .01/order)``."""
    return np.arange(0.3 / order, 0.495 / order, 0.01 / order)


def optimal_gnss_parameters(
    ls_total: ArrayLike, rdp_at_order: float, order: float
) -> tuple[float, float, float]:
    """(beta, SS_beta, sigma_ss) minimising the reference's release cost.

    As ``smooth_sensitivity_table._find_optimal_smooth_sensitivity_parameters``:
    beta runs over ``np.arange(.3/order, .495/order, .01/order)``; for each,
    SS = max_d e^(-beta d) LS[d] (Definition 12), sigma_ss = (lambda e^(2 beta) / SS)^(1/3)
    (minimiser of lambda e^(2 beta)/sigma^2 + 2 SS sigma), and the cost is
    rdp_at_order + rdp_gnss(beta, sigma_ss) (Theorem 23) + 2 SS sigma_ss. The first
    strict minimum wins. The choice looks at the sensitive data, so it is not
    itself private (as in the reference). If every LS is 0, SS = 0 and
    sigma_ss = inf with 2 SS sigma_ss treated as 0 (no noise is needed).

    Raises:
        ValueError: empty or NaN ls_total, negative entries, order <= 1.

    Shapes: ls_total (M,) -> (scalar, scalar, scalar).
    """
    ls = np.asarray(ls_total, dtype=np.float64)
    order = _check_order(order)
    if ls.ndim != 1 or ls.size == 0 or np.any(np.isnan(ls)) or np.any(ls < 0):
        raise ValueError("ls_total must be a non-empty 1-D array of non-negative numbers")
    betas = beta_grid(order)
    distance = np.arange(ls.size)
    # One beta at a time: M can be millions, and a (betas, M) table would be gigabytes.
    ss = np.array([np.max(np.exp(-(beta * distance)) * ls) for beta in betas])
    growth = order * np.exp(2 * betas)
    # SS = 0: sigma_ss = inf, no noise needed. SS = inf (an unbounded local sensitivity):
    # sigma_ss = 0 and an infinite cost, which no beta improves.
    with np.errstate(divide="ignore", invalid="ignore"):
        sigma_ss = (growth / ss) ** (1 / 3)
        # Theorem 23 per beta; 1/(2 beta) >= order/0.99 > order on this grid.
        rdp_release = growth / sigma_ss**2 + (
            betas * order - 0.5 * np.log1p(-2 * order * betas)
        ) / (order - 1)
        noise = ss * np.where(ss > 0, sigma_ss, 0.0)  # 0 * inf treated as 0
    cost = np.where(np.isinf(ss), np.inf, rdp_at_order + rdp_release + 2 * noise)
    best = int(np.argmin(cost))
    return float(betas[best]), float(ss[best]), float(sigma_ss[best])

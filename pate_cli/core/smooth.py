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
``ls_gnmax`` (the GNMax step) and ``ls_threshold`` (the threshold step), and
``local_sensitivity_total`` never materialises a (Q, M) array: pairs are produced in chunks
and scattered into the (M,) total with bincount.

Shapes: Q queries, C classes, M teachers (distances d = 0 .. M-1).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from functools import partial

import numpy as np
from numpy.typing import ArrayLike, NDArray

from pate_cli.core._common import (
    _as_counts,
    _as_integer_votes,
    _blocks,
    _check_num_teachers,
    _check_order,
    _check_positive,
    _ordered_map,
)
from pate_cli.core.compact import Compact, narrow
from pate_cli.core.gnmax import rdp_gnmax_data_independent
from pate_cli.core.ls_cells import plan_cells
from pate_cli.core.ls_gnmax import GroupPlan, WalkChunk, _canonical_rows, walk_plan
from pate_cli.core.ls_threshold import (
    _ChangeWindow,
    _pr_answered_table,
    _threshold_ls_table,
    _threshold_tops,
    _threshold_total,
)
from pate_cli.core.ls_tilde import _GnmaxSensitivity
from pate_cli.core.threshold import log_pr_answered_threshold, statistic_sensitivity


@dataclass(frozen=True)
class _AnswerWeights:
    """What multiplies a query's GNMax local sensitivity at distance d.

    ``pr_answered`` is None for a constant weight per query (plain GNMax: 1; a realised
    run: its 0/1 mask). In expectation the cost is thr(n) + P(n) g(n) with P = Pr[answered],
    a non-decreasing function of the rounded top vote h of step 1 (h moves by at most 1 a
    step), so over a histogram n'' within distance d and its neighbour n':
    |P(n') g(n') - P(n'') g(n'')| <= P(n') |g(n') - g(n'')| + |P(n') - P(n'')| g(n''),
    at most P(min(h + d + 1, M)) LS_g[d] + max_{|h'' - h| <= d} |dP(h'')| G[d], with G[d]
    the largest cost over the ball (the right walk's state, else Prop. 8's DI_g).
    """

    weights: NDArray[np.float64]  # per query (Q,)
    tops: NDArray[np.int64] | None = None  # h per query (Q,), with pr_answered
    pr_answered: NDArray[np.float64] | None = None  # P(h) for h = 0 .. M
    change: _ChangeWindow | None = None  # max |dP| within distance d of h, with pr_answered
    independent: float = 0.0  # Prop. 8's bound of the answer step's cost, with change
    sensitivity: int = 1  # how far a neighbour moves h (2: half to even at exact halves)

    @property
    def ahead(self) -> int:
        """How far past h + d the top of a neighbour of a histogram d away can be: h' <= h
        + d + (s - 1), h'' <= h' + s, so 2 s - 1 (1 for s = 1)."""
        return 2 * self.sensitivity - 1

    def change_at(self, top: NDArray[np.int64], distance: NDArray[np.int64]) -> NDArray[np.float64]:
        """A bound of |P(h') - P(h'')| over h' within distance d (+ s - 1) of h and h'' a
        neighbour's (within s of h'): s times the largest single step of P within
        d + 2 (s - 1) of h."""
        assert self.change is not None
        return self.sensitivity * self.change.at(top, distance + 2 * (self.sensitivity - 1))


@dataclass(frozen=True)
class _Pairs:
    """The live queries grouped by (canonical row, h): a row's walk runs once for all its
    pairs. Shapes: P pairs, R canonical rows."""

    row: NDArray[np.int64]  # canonical row of each pair (P,), non-decreasing
    top: NDArray[np.int64]  # h of each pair (P,)
    weight: NDArray[np.float64]  # the summed weights of the pair's queries (P,)
    start: NDArray[np.intp]  # each row's first pair (R,)
    count: NDArray[np.intp]  # each row's number of pairs (R,)
    highest: int  # the largest top h

    @classmethod
    def group(
        cls,
        inverse: NDArray[np.intp],
        tops: NDArray[np.int64],
        weights: NDArray[np.float64],
        num_rows: int,
        highest: int,
    ) -> _Pairs:
        """Pairs of the queries (canonical row ``inverse``, top ``tops``), weights summed."""
        key, pair_of_query = np.unique(inverse * (highest + 1) + tops, return_inverse=True)
        pair_row, pair_top = np.divmod(key, highest + 1)
        pair_weight = np.asarray(
            np.bincount(pair_of_query.reshape(-1), weights=weights), dtype=np.float64
        )
        pair_start = np.searchsorted(pair_row, np.arange(num_rows))
        pair_count = np.diff(np.append(pair_start, pair_row.size))
        return cls(pair_row, pair_top, pair_weight, pair_start, pair_count, highest)

    def weight_at(
        self, pair: NDArray[np.intp], step: NDArray[np.int64], answer: _AnswerWeights
    ) -> NDArray[np.float64]:
        """The pairs' weights at distance ``step``: times Pr[answered] at the highest top a
        histogram that far (or its neighbour) can have, in expectation."""
        pr = answer.pr_answered
        if pr is None:
            return self.weight[pair]
        return (
            self.weight[pair] * pr[np.minimum(self.top[pair] + step + answer.ahead, self.highest)]
        )


def _chunk_sums(
    pairs: _Pairs, answer: _AnswerWeights, evaluate: Callable[[], WalkChunk]
) -> tuple[int, NDArray[np.float64]]:
    """A chunk's terms summed per distance: (first distance, sums from there)."""
    row, step, ls, cost = evaluate()
    counts = pairs.count[row]
    owner = np.repeat(np.arange(row.size), counts)
    pair = (
        pairs.start[row][owner]
        + np.arange(owner.size)
        - np.repeat(np.cumsum(counts) - counts, counts)
    )
    at = step[owner]
    terms = pairs.weight_at(pair, at, answer) * ls[owner]
    if answer.change is not None:
        terms += pairs.weight[pair] * answer.change_at(pairs.top[pair], at) * cost[owner]
    first = int(at.min()) if at.size else 0
    return first, np.asarray(np.bincount(at - first, weights=terms), dtype=np.float64)


def _add_answered_plateau(
    total: NDArray[np.float64],
    pairs: _Pairs,
    pair_done: NDArray[np.int64],
    answer: _AnswerWeights,
    pr: NDArray[np.float64],
    plateau: float,
) -> None:
    """Add (in place) the plateau of the pairs from the distance they leave their walk on,
    weighted by Pr[answered] and its change, grouped by distinct h and in blocks."""
    num_teachers = total.size
    distinct, top_index = np.unique(pairs.top, return_inverse=True)
    finished = np.zeros((0, num_teachers))
    for block, span in _blocks(distinct.size, num_teachers):
        rows = distinct[block]
        if span.start == 0:
            mine = (top_index >= block.start) & (top_index < block.start + rows.size)
            cells = (top_index[mine] - block.start) * (num_teachers + 1) + pair_done[mine]
            done = np.bincount(
                cells, weights=pairs.weight[mine], minlength=rows.size * (num_teachers + 1)
            )
            finished = np.asarray(done, dtype=np.float64).reshape(rows.size, num_teachers + 1)
            np.cumsum(finished, axis=1, out=finished)  # in place: M entries a row
        distance = np.arange(span.start, span.stop)
        weight = plateau * pr[np.minimum(rows[:, None] + distance + answer.ahead, pairs.highest)]
        if answer.change is not None:
            weight += answer.independent * answer.change_at(rows[:, None], distance)
        total[span] += np.sum(finished[:, span] * weight, axis=0)


def _walk_plan(
    unique: NDArray[np.int64],
    num_teachers: int,
    params: _GnmaxSensitivity,
    extra: int,
    walk: bool,
) -> GroupPlan:
    """The tabulated plan (``ls_cells``), or with ``walk`` (or the reference's bounds) the
    exact walk of every canonical row, each its own group."""
    if walk or params.reference:
        return walk_plan(unique, num_teachers, params, extra)
    return plan_cells(unique, num_teachers, params, extra)


def _gnmax_total(
    votes: NDArray[np.int64],
    answer: _AnswerWeights,
    num_teachers: int,
    params: _GnmaxSensitivity,
    extra: int = 0,
    walk: bool = False,
) -> NDArray[np.float64]:
    """sum_q w_q(d) LS_gnmax(q)[d] without a (Q, M) array, ``extra`` zero-vote classes
    beyond the columns (``compact.narrow``). Shapes: (Q, C) -> (M,).

    Queries are grouped by (group, h), a group being rows that share every state (a
    canonical row of the exact ``walk``, or ``ls_cells``' groups); each group's states run
    once, in chunks.
    """
    live = answer.weights != 0
    if not np.any(live):
        return np.zeros(num_teachers)
    unique, inverse = _canonical_rows(votes[live])
    tops = np.zeros(inverse.size, dtype=np.int64) if answer.tops is None else answer.tops[live]
    pr = answer.pr_answered
    highest = num_teachers if pr is None else pr.size - 1  # the largest top h
    plan = _walk_plan(unique, num_teachers, params, extra, walk)
    num_groups = plan.done_from.size
    pairs = _Pairs.group(
        plan.group_of_row[inverse], tops, answer.weights[live], num_groups, highest
    )
    total = np.zeros(num_teachers)
    # Chunks on threads; their sums are added in chunk order, whatever the thread count.
    for first, sums in _ordered_map(partial(_chunk_sums, pairs, answer), plan.chunks()):
        total[first : first + sums.size] += sums
    # Rows off their walk (or on the plateau throughout) contribute the plateau.
    done_from = plan.done_from
    del plan  # its tail tables and per-gap bounds run to M entries each: no longer needed
    pair_done = done_from[pairs.row]
    if pr is None:
        finished = np.cumsum(
            np.bincount(pair_done, weights=pairs.weight, minlength=num_teachers + 1)
        )
        return total + params.plateau * finished[:num_teachers]
    _add_answered_plateau(total, pairs, pair_done, answer, pr, params.plateau)
    return total


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
        self, order: float, *, reference: bool, exact: bool
    ) -> NDArray[np.float64]:
        """The step's local sensitivity summed over queries, per distance (M,): strict (a
        running maximum, every distance filled) unless ``reference``. Its table runs over h,
        and the queries are grouped by h = round(max(step1 votes)): no (Q, M) array."""
        table = _threshold_ls_table(
            self.levels,
            self.shifted,
            self.sigma1,
            order,
            rounded_up=not reference,
            exact=exact,
            sensitivity=self.sensitivity,
        )
        total = _threshold_total(self.tops, table, not reference, self.sensitivity - 1)
        return total[: self.num_teachers]

    def answer_weights(self, sigma: float, order: float, *, reference: bool) -> _AnswerWeights:
        """Pr[answered] as the answer step's weight: at the votes themselves for
        ``reference``, else a function of h whose change within each distance is bounded."""
        if reference:
            pr = np.exp(
                log_pr_answered_threshold(
                    self.step1, self.threshold, self.sigma1, half_even=self.half_even
                )
            )
            return _AnswerWeights(pr)
        pr, change = _pr_answered_table(self.levels, self.shifted, self.sigma1)
        window = _ChangeWindow.build(change)
        del change  # M entries, no longer needed: the window holds its running maxima
        # The answer step's cost is at most Prop. 8's, whether or not it is data-dependent.
        independent = float(rdp_gnmax_data_independent(sigma, np.array([order]))[0])
        return _AnswerWeights(
            np.ones(self.tops.size), self.tops, pr, window, independent, self.sensitivity
        )

    def moved_total(self, window: _ChangeWindow, independent: float) -> NDArray[np.float64]:
        """An answer step at Prop. 8's cost ``independent``: that cost times the change of
        Pr[answered] within each distance, summed over queries (M,)."""
        moved = window.total(self.tops, self.levels, 2 * (self.sensitivity - 1))
        moved = moved[: self.num_teachers]
        return independent * self.sensitivity * moved


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
        step1_votes: what step 1 thresholds; votes - baseline for Interactive GNMax. Defaults
            to ``votes``.
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
        threshold_exact: the threshold step is accounted exactly (``--threshold-bound exact``):
            its table is of that cost.

    Returns the summed bound per distance; raises ValueError on inconsistent shapes, a
    missing sigma1 or invalid parameters.

    Shapes: votes (Q, C), step1_votes (Q, C), step2_weights (Q,) -> (M,).
    """
    counts, extra, num_teachers, order, sigma = _checked(votes, num_teachers, order, sigma)
    num_queries, num_classes = counts.shape[0], counts.shape[1] + extra
    total = np.zeros(num_teachers)
    answer = _AnswerWeights(np.ones(num_queries))
    if threshold is not None:
        step = _ThresholdStep.build(
            counts, step1_votes, num_teachers, threshold, sigma1, half_even, threshold_sensitivity
        )
        if not data_independent_step1:
            total += step.local_sensitivity(order, reference=reference, exact=threshold_exact)
        if step2_weights is None:
            answer = step.answer_weights(sigma, order, reference=reference)
            if answer.change is not None and (data_independent_step2 or num_classes == 1):
                total += step.moved_total(answer.change, answer.independent)
    if step2_weights is not None:
        answer = _AnswerWeights(_fixed_weights(step2_weights, num_queries))
    if not data_independent_step2 and num_classes > 1 and num_queries > 0:
        bounds = {"reference": reference, "increments_verified": increments_verified}
        params = _GnmaxSensitivity.build(sigma, order, num_classes, **bounds)
        total += _gnmax_total(_as_integer_votes(counts), answer, num_teachers, params, extra, walk)
    return total


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
    betas = np.arange(0.3 / order, 0.495 / order, 0.01 / order)
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

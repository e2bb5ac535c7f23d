"""The threshold step's local sensitivity at every distance d, and the change of Pr[answered].

Papernot et al. 2018, Appendix B, Algorithm 4's ThresholdLocalSensitivity: the threshold
step's RDP (Theorem 6 with sigma -> sqrt(2) sigma1) depends on the votes only through
h = round(max(votes)), so ThreshLS(h) is tabulated for h = 0 .. M once and queries are
grouped by h. Pr[answered], which weights the answer step in expectation, is a function of
h too: its change next to each h is tabulated the same way.

Shapes: Q queries, C classes, M teachers (distances d = 0 .. M-1).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from numpy.typing import ArrayLike, NDArray
from scipy import special

from pate_cli.core._common import (
    _PAIR_CHUNK,
    _THREADS,
    _as_counts,
    _blocks,
    _check_num_teachers,
    _check_order,
    _check_positive,
    _excess,
    _ordered_map,
)
from pate_cli.core.horizon import distance_ranges
from pate_cli.core.threshold import (
    logq_threshold,
    rdp_threshold,
    rdp_threshold_joint,
    round_votes,
    statistic_sensitivity,
    threshold_margins,
)


def _pr_answered_table(
    num_teachers: int, threshold: float, sigma1: float
) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
    """(P(h), |P(h+1) - P(h)|) for h = 0 .. M (the change has M entries), P = Pr[answered].

    Each change is a difference of the nearer tails, rounded up by four ulps of the larger.
    """
    pr, upper = np.empty(num_teachers + 1), np.empty(num_teachers + 1)
    change = np.empty(num_teachers)
    # By blocks of tops (elementwise, so the same numbers): M can be millions.
    for start in range(0, num_teachers + 1, _PAIR_CHUNK):
        stop = min(start + _PAIR_CHUNK + 1, num_teachers + 1)  # one past: the next change
        margins = threshold_margins(
            np.arange(start, stop, dtype=np.float64)[:, None], threshold, sigma1
        )
        pr[start:stop] = p = special.ndtr(margins)
        upper[start:stop] = u = special.ndtr(-margins)  # Pr[not answered], from its own tail
        near = np.where(margins[:-1] >= 0, u[:-1] - u[1:], p[1:] - p[:-1])
        near = np.abs(near) + 4 * np.finfo(np.float64).eps * np.maximum(p[1:], u[:-1])
        change[start : stop - 1] = near
    return pr, change


@dataclass(frozen=True)
class _ChangeWindow:
    """max over tops h'' within distance d of h of the change of P next to h''.

    From running maxima of the changes next to each top: a window that ends left of the
    peak reads the prefix maximum at its right end, one that starts right of it the suffix
    maximum at its left end, and one that holds the peak the peak.
    """

    prefix: NDArray[np.float64]  # running maximum of max(|dP(h)|, |dP(h-1)|), h = 0 .. M
    suffix: NDArray[np.float64]  # the same from the right
    peak: int
    largest: float  # the change at the peak

    @classmethod
    def build(cls, change: NDArray[np.float64]) -> _ChangeWindow:
        near = np.zeros(change.size + 1)
        near[:-1] = change
        near[1:] = np.maximum(near[1:], change)
        peak = int(np.argmax(near))
        prefix = np.maximum.accumulate(near)
        suffix = np.maximum.accumulate(near[::-1], out=near[::-1])[::-1]
        return cls(prefix, suffix, peak, float(prefix[peak]))

    def at(self, top: NDArray[np.int64], distance: NDArray[np.int64]) -> NDArray[np.float64]:
        """The window maximum, elementwise over broadcast (top, distance)."""
        low = np.maximum(top - distance, 0)
        high = np.minimum(top + distance, self.prefix.size - 1)
        return np.where(
            high < self.peak,
            self.prefix[high],
            np.where(low > self.peak, self.suffix[low], self.largest),
        )

    def total(
        self,
        tops: NDArray[np.int64],
        start: int,
        stop: int,
        extra: int = 0,
        counts: NDArray[np.float64] | None = None,
    ) -> NDArray[np.float64]:
        """sum over queries of the window maximum per distance d = start .. stop-1 (the
        window reaching d + ``extra`` steps), summed over the tops row by row (the same
        order whatever the range); ``counts``: the queries each top stands for (None: one).
        Shapes: (Q,), (Q,) -> (stop - start,)."""
        distinct, weight = _multiplicities(tops, counts)
        total = np.zeros(stop - start)
        for block, span in _blocks(distinct.size, stop - start):
            distance = np.arange(start + span.start, start + span.stop) + extra
            at = self.at(distinct[block, None], distance)
            total[span] += np.sum(at * weight[block, None], axis=0)
        return total


def _multiplicities(
    tops: NDArray[np.int64], counts: NDArray[np.float64] | None
) -> tuple[NDArray[np.int64], NDArray[np.float64]]:
    """The distinct tops and how many queries hold each: one per entry of ``tops``, or
    ``counts`` of each (whole numbers, so their sums are exact in any order)."""
    if counts is None:
        distinct, multiplicity = np.unique(tops, return_counts=True)
        return distinct, multiplicity.astype(np.float64)
    distinct, inverse = np.unique(tops, return_inverse=True)
    summed = np.bincount(inverse.reshape(-1), weights=counts, minlength=distinct.size)
    return distinct, np.asarray(summed, dtype=np.float64)


def _threshold_ls_table(
    num_teachers: int,
    threshold: float,
    sigma1: float,
    order: float,
    *,
    rounded_up: bool,
    exact: bool = False,
    sensitivity: int = 1,
) -> NDArray[np.float64]:
    """ThreshLS(h) for h = 0 .. M (Algorithm 5's helper). Shapes: -> (M+1,).

    The threshold step's RDP (Theorem 6 with sigma -> sqrt(2) sigma1, or with ``exact`` the
    divergence of its two outcomes, ``rdp_threshold_joint``) depends on the votes only
    through h = round(max(votes)), and a neighbour moves h by at most ``sensitivity`` (1; 2
    under half to even at exact halves): entry h is the largest change of the cost between
    h and a top within that many steps of it. ``rounded_up`` rounds each difference up (the
    reference subtracts plainly).
    """
    rdp = np.empty(num_teachers + 1)
    orders = np.array([order])
    # By blocks of tops (elementwise, so the same numbers): M can be millions.
    for start in range(0, num_teachers + 1, _PAIR_CHUNK):
        top = np.arange(start, min(start + _PAIR_CHUNK, num_teachers + 1), dtype=np.float64)
        if exact:
            margins = (top - threshold) / sigma1
            part = rdp_threshold_joint(margins, sigma1, orders, shift=float(sensitivity))
        else:
            logq = logq_threshold(top[:, None], threshold, sigma1)
            part = rdp_threshold(logq, sigma1, orders, sensitivity=sensitivity)
        rdp[start : start + top.size] = part[:, 0]
    table = np.zeros(num_teachers + 1)
    for gap in range(1, sensitivity + 1):
        high, low = rdp[gap:], rdp[:-gap]
        if rounded_up:
            step = _excess(np.maximum(high, low), np.minimum(high, low))
        else:
            step = np.abs(high - low)
        np.maximum(table[:-gap], step, out=table[:-gap])  # h and the top gap above it
        np.maximum(table[gap:], step, out=table[gap:])  # h and the top gap below it
    return table


def _threshold_ls_rows(
    tops: NDArray[np.int64],
    table: NDArray[np.float64],
    strict: bool,
    distance: NDArray[np.int64] | None = None,
    carry: NDArray[np.float64] | None = None,
) -> NDArray[np.float64]:
    """ThresholdLocalSensitivity for each h in ``tops`` at ``distance`` (default: every
    distance). ``carry``: with strict, the running maximum over the smaller distances,
    per row. Shapes: (N,), (M+1,), (D,), (N,) -> (N, D)."""
    num_teachers = table.size - 1
    if distance is None:
        distance = np.arange(num_teachers)
    up = tops[:, None] + distance
    down = tops[:, None] - distance
    ls_up = np.where(up <= num_teachers, table[np.minimum(up, num_teachers)], -np.inf)
    ls_down = np.where(down >= 0, table[np.maximum(down, 0)], -np.inf)
    ls = np.maximum(ls_up, ls_down)
    if strict:
        # Theorem 24 needs the max over distances <= d: a running maximum.
        running = np.maximum.accumulate(ls, axis=1)
        return running if carry is None else np.maximum(running, carry[:, None])
    # Reference: only d < max(h, M-h) is filled, the rest stays 0.
    return np.where(distance < np.maximum(tops, num_teachers - tops)[:, None], ls, 0.0)


def _threshold_tops(
    step1_votes: NDArray[np.float64], num_teachers: int, half_even: bool, lowest: int = 0
) -> NDArray[np.int64]:
    # Rounded as log_pr_answered_threshold rounds it (round_votes: half up by default).
    tops = round_votes(step1_votes.max(axis=1), half_even=half_even)
    if np.any(tops < lowest) or np.any(tops > num_teachers):
        raise ValueError(
            f"round(max(votes)) must lie in [{lowest}, num_teachers={num_teachers}] for the "
            "threshold step"
        )
    return tops.astype(np.int64)


def local_sensitivity_threshold(
    counts: ArrayLike,
    num_teachers: int,
    threshold: float,
    sigma1: float,
    order: float,
    *,
    strict: bool = False,
    half_even: bool = False,
    exact: bool = False,
) -> NDArray[np.float64]:
    """Upper bounds on the threshold step's local sensitivity at distance d, per query.

    Algorithm 4's ThresholdLocalSensitivity, Papernot et al. 2018. With
    h = round(max(counts)) (``round_votes``: half up, or half to even as the
    reference with ``half_even``), entry d is
    max(ThreshLS(h+d), ThreshLS(h-d)) over the ends inside [0, M].

    ``strict=False`` reproduces the reference exactly, including two quirks:
    the distance d = max(h, M-h) and beyond are never filled (they stay 0),
    and entry d is the value at distance exactly d, not a running maximum.
    ``strict=True`` is what a strict reading of Theorem 24 needs: every
    distance is filled and entry d is the maximum over distances <= d, so the
    array is non-decreasing in d and never below the default.

    Args:
        counts: votes for step 1 (votes - baseline for Interactive GNMax; may be fractional).
        num_teachers: M.
        threshold: T.
        sigma1: noise standard deviation of the threshold step.
        order: Renyi order.
        strict: see above.
        half_even: round max(counts) half to even, as the reference.
        exact: the cost is the exact divergence of the two outcomes
            (``--threshold-bound exact``), not Theorem 6's.

    Returns:
        Local-sensitivity bounds per query and distance.

    Raises:
        ValueError: sigma1 <= 0, order <= 1, M < 1, or round(max) outside [0, M].

    Shapes: counts (Q, C) -> (Q, M).
    """
    step1 = _as_counts(counts)
    num_teachers = _check_num_teachers(num_teachers)
    sigma1 = _check_positive("sigma1", sigma1)
    order = _check_order(order)
    tops = _threshold_tops(step1, num_teachers, half_even)
    sensitivity = statistic_sensitivity(step1, half_even=half_even)
    table = _threshold_ls_table(
        num_teachers,
        float(threshold),
        sigma1,
        order,
        rounded_up=strict,
        exact=exact,
        sensitivity=sensitivity,
    )
    unique, inverse = np.unique(tops, return_inverse=True)
    # A top d + reach steps away bounds distance d (reach 1 where a neighbour moves h by 2).
    reach = sensitivity - 1
    rows = _threshold_ls_rows(unique, table, strict, np.arange(num_teachers + reach))
    return rows[:, reach:][inverse.reshape(-1)]


class _ThresholdTotal:
    """sum over queries of ThresholdLocalSensitivity per distance d, range by range of
    distances (``span``, asked for in order from 0), the tops within d + ``reach`` steps of h
    (``reach`` 1 where a neighbour moves h by 2: the rounded top of a histogram d teachers
    away is within d + 1 of h); strict: the running maximum carried from range to range.
    Every entry is at most the table's largest, so ``bound`` (that times the queries) is at
    least the total at every distance. Shapes: tops (Q,), table (M+1,)."""

    def __init__(
        self,
        tops: NDArray[np.int64],
        table: NDArray[np.float64],
        strict: bool,
        reach: int = 0,
        counts: NDArray[np.float64] | None = None,
    ) -> None:
        self.unique, self.multiplicity = _multiplicities(tops, counts)
        self.table, self.strict, self.reach = table, strict, reach
        self.per_query = float(table.max())  # every entry of a row is one of the table's
        self.bound = float(self.multiplicity.sum()) * self.per_query
        self.carry = np.full(self.unique.size, -np.inf)
        if reach and strict:  # the running maximum starts at distance 0
            self.carry = _threshold_ls_rows(self.unique, table, strict, np.arange(reach))[:, -1]

    def span(self, start: int, stop: int) -> NDArray[np.float64]:
        """The total at distances start .. stop-1. Shapes: -> (stop - start,)."""
        width = stop - start
        spans: dict[tuple[int, int], list[slice]] = {}
        for block, part in _blocks(self.unique.size, width):
            spans.setdefault((block.start, block.stop), []).append(part)
        distance = np.arange(start, stop) + self.reach

        def rows_total(rows: tuple[int, int]) -> NDArray[np.float64]:
            """One block of tops over the range, its running maxima carried."""
            block = slice(*rows)
            out = np.zeros(width)
            for part in spans[rows]:
                ls = _threshold_ls_rows(
                    self.unique[block], self.table, self.strict, distance[part], self.carry[block]
                )
                if self.strict:
                    self.carry[block] = ls[:, -1]
                # Summed over the tops row by row: the same order whatever the range's width.
                out[part] = np.sum(ls * self.multiplicity[block, None], axis=0)
            return out

        # Blocks of tops on threads (an array of the range's distances each), added in block
        # order: the same sums for any thread count.
        total = np.zeros(width)
        for partial in _ordered_map(rows_total, spans, _THREADS):
            total += partial
        return total


def _threshold_total(
    tops: NDArray[np.int64], table: NDArray[np.float64], strict: bool, reach: int = 0
) -> NDArray[np.float64]:
    """sum over queries of ThresholdLocalSensitivity per distance d (``_ThresholdTotal``)
    over every distance, range by range. Shapes: (Q,), (M+1,) -> (M,)."""
    walk = _ThresholdTotal(tops, table, strict, reach)
    num_teachers = table.size - 1
    return np.concatenate(
        [np.zeros(0), *(walk.span(*span) for span in distance_ranges(num_teachers))]
    )

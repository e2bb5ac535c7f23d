"""Rigorous bounds on the exact outcome probabilities of GNMax and Confident-GNMax.

GNMax (Papernot et al. 2018) answers j with probability
p_j = int phi(t) prod_{i != j} Phi(t + (n_j - n_i) / sigma) dt. Each p_j is bracketed by
the trapezoid rule on the whole line, whose error for an integrand analytic in the strip
|Im t| < a is at most 2 M / (exp(2 pi a / h) - 1), M = sup_{|y| < a} int |f(x + i y)| dx
(Trefethen and Weideman, SIAM Review 2014, Theorem 5.1). Here |phi(x + i y)| = phi(x) e^{y^2/2}
and |Phi(x + i y)| <= e^{y^2/2} Phi(x) (integrate phi along the horizontal line), so
M <= e^{C a^2 / 2} p_j: the error is relative, 2 exp(-2 pi^2 / (C h^2)) at a = 2 pi / (h C),
below 1e-15 at the steps chosen here. The sum runs over a window of nodes around the mode of
the log-concave integrand; the nodes outside are bounded from the window's ends (the log of
the integrand lies below its tangent minus (t - t0)^2 / 2) and added to the upper bound.
Every floating-point step is bounded too and moved to the safe side.

Shapes: ``K`` histograms, ``C`` classes, ``O`` outcomes.
"""

from __future__ import annotations

import math
from functools import partial

import numpy as np
from numpy.typing import ArrayLike, NDArray
from scipy.special import log_ndtr

from pate_cli.core._common import _check_positive, _ordered_map
from pate_cli.core.logmath import log1mexp
from pate_cli.core.threshold import threshold_margins

FloatArray = NDArray[np.float64]
IntArray = NDArray[np.intp]

_U = 2.0**-53  # the unit roundoff of a double
_TINY = 5e-324  # the smallest subnormal: an exp or product below it may round to 0
_LOG_SQRT_2PI = 0.5 * math.log(2 * math.pi)
MAX_CLASSES = 20
# A relative allowance for the roundings not bounded one by one (the constants log h and
# log sqrt(2 pi), log_ndtr's absolute errors of ~1e-16 near 0, per class): a safe multiple.
_BASE_SLACK = 1e-13
# log_ndtr(x) is within 16 ulp of |log_ndtr(x)| (1 + max(x, 0)^2) of the truth (against mpmath
# at 50 digits: 4.4 ulp for x < 0; for x > 0 the argument's own scaling costs ~1.4 x^2 ulp).
_NDTR_ULPS = 16.0
# The log of the trapezoid sum is within this many ulp of its terms' largest magnitude of the
# truth (C + 4 roundings per node, below 24 for 20 classes; the rest is _BASE_SLACK).
_SUM_ULPS = 64.0
# Relative trapezoid error aimed at: 2 exp(-_TRAPEZOID_EXPONENT), below 1e-15.
_TRAPEZOID_EXPONENT = 35.5
# Nodes on each side of the mode, in noise units: the log-integrand's curvature lies in
# [-C, -1], so what lies beyond is below sqrt(C) Phi(-7.5) < 2e-13 of p_j (and it is bounded,
# and added to the upper bound). A wider window costs time, and tightness: its ends' larger
# logs carry larger roundings.
_HALF_WIDTH = 7.5
# Modes are looked for up to here (noise units): beyond, the gaps are so far beyond the
# noise that the window's place only matters to the bounds' tightness, not their validity.
_FARTHEST_MODE = 1e12
# Integer gaps are tabulated while the tables hold at most this many entries.
_TABLE_ENTRIES = 1 << 20
# Cells of one (rows, nodes) block of the integrals: temporaries stay at a few tens of MB.
_BLOCK_CELLS = 1 << 20


class TooManyClassesError(ValueError):
    """More classes than the exact privacy-loss pairs cover."""


# ----------------------------------------------------------------------------- checks


def _check_hists(hists: ArrayLike) -> FloatArray:
    arr = np.array(hists, dtype=np.float64, ndmin=2)
    if arr.ndim != 2 or arr.shape[1] < 1:
        raise ValueError(f"histograms must have shape (K, C), got {arr.shape}")
    if arr.shape[1] > MAX_CLASSES:
        raise TooManyClassesError(
            f"exact privacy-loss pairs cover at most {MAX_CLASSES} classes; got {arr.shape[1]}"
        )
    if not np.all(np.isfinite(arr)):
        raise ValueError("histograms must be finite")
    return arr


# ----------------------------------------------------------------------------- log space


def _log_phi(x: FloatArray) -> FloatArray:
    """log of the standard normal density, within 3 ulp of its magnitude."""
    out: FloatArray = -0.5 * x * x - _LOG_SQRT_2PI
    return out


def _ndtr_error(values: FloatArray, x: FloatArray) -> FloatArray:
    """A bound on the error of ``log_ndtr(x)`` = ``values`` (see _NDTR_ULPS)."""
    positive = np.maximum(x, 0.0)
    return _NDTR_ULPS * _U * np.abs(values) * (1.0 + positive * positive)


def _log_mills_above(s: FloatArray, step: float) -> FloatArray:
    """An upper bound on log sum_{m >= 1} h exp(s m h - (m h)^2 / 2).

    The summand is unimodal in m: the sum is at most the integral over u > 0 of
    e^{s u - u^2/2}, which is Phi(s) / phi(s), plus h times its largest value (e^{s^2/2}
    where s > 0; where s <= 0 it decreases and the integral alone bounds the sum).
    """
    with np.errstate(over="ignore", invalid="ignore"):
        ratio = log_ndtr(s) - _log_phi(s)  # log Phi(s)/phi(s)
        peak = 0.5 * s * s + math.log(step)
        out = np.where(s > 0, np.logaddexp(ratio, peak), ratio)
        # log_ndtr and the square, each within a few ulp of its size.
        out += 32 * _U * (s * s + np.abs(log_ndtr(s)) + 2.0) + 1e-300
    result: FloatArray = np.where(np.isnan(out), np.inf, out)
    return result


def _log_sum_bounds(x: FloatArray, axis: int = -1) -> tuple[FloatArray, FloatArray]:
    """log sum exp(x) along ``axis``, rounded down and up: max + log sum exp(x - max) is
    within (2 n + 4) ulp plus 2 ulp of its magnitude of the truth (n terms, each exp and
    difference within an ulp of a term at most 1, the sum of n such and the log)."""
    n = x.shape[axis]
    top = np.max(x, axis=axis, keepdims=True)
    safe = np.where(np.isfinite(top), top, 0.0)
    with np.errstate(divide="ignore", invalid="ignore"):
        value = np.log(np.sum(np.exp(x - safe), axis=axis)) + np.squeeze(safe, axis=axis)
    value = np.where(np.isneginf(np.squeeze(top, axis=axis)), -np.inf, value)
    slack = (2 * n + 4) * _U + 2 * _U * np.where(np.isfinite(value), np.abs(value), 0.0)
    return value - slack, value + slack


def _log_sum_bounds_in_place(x: FloatArray) -> tuple[FloatArray, FloatArray]:
    """``_log_sum_bounds`` along the last axis of a 2-D ``x``, overwriting it."""
    top = np.max(x, axis=1)
    x -= top[:, None]
    np.exp(x, out=x)
    with np.errstate(divide="ignore", invalid="ignore"):
        value = np.log(np.sum(x, axis=1)) + top
    slack = (2 * x.shape[1] + 4) * _U + 2 * _U * np.where(np.isfinite(value), np.abs(value), 0.0)
    return value - slack, value + slack


def _log1mexp_bounds(low: FloatArray, high: FloatArray) -> tuple[FloatArray, FloatArray]:
    """Bounds on log(1 - e^x) for x in [low, high] (both <= 0): log(1 - e^high) rounded down,
    log(1 - e^low) rounded up. log1p(-e^x) (x < -1) is within 3 ulp of its size; log(-expm1(x))
    (x >= -1, where the result is above -0.46) within 2 ulp plus 2 ulp of its size."""
    low = np.minimum(low, 0.0)
    high = np.minimum(high, 0.0)
    below = log1mexp(high)
    above = log1mexp(low)
    # A log among the subnormals (or below them: -1e-400 rounds to -0) is within a subnormal
    # of the truth, not within ulps of its size: one more keeps each bound on its side.
    below = below - (8 * _U * np.abs(below) + np.where(high >= -1, 8 * _U, 0.0) + _TINY)
    above = above + (8 * _U * np.abs(above) + np.where(low >= -1, 8 * _U, 0.0) + _TINY)
    return below, np.minimum(above, 0.0)


def _sum_to_one(lower: FloatArray, upper: FloatArray) -> None:
    """Tighten each row's most likely outcome by the others, in place: its probability is
    1 - (the others' sum), so it lies between 1 - (their upper bounds) and 1 - (their lower
    bounds), in log space. Also clips the upper bounds at 0 (a probability is at most 1)."""
    np.minimum(upper, 0.0, out=upper)
    np.minimum(lower, upper, out=lower)
    if lower.shape[1] < 2:
        np.copyto(lower, 0.0)
        np.copyto(upper, 0.0)
        return
    rows = np.arange(lower.shape[0])
    top = np.argmax(lower, axis=1)
    others_low = lower.copy()
    others_high = upper.copy()
    others_low[rows, top] = -np.inf
    others_high[rows, top] = -np.inf
    low_sum, _ = _log_sum_bounds(others_low)
    _, high_sum = _log_sum_bounds(others_high)
    below, above = _log1mexp_bounds(np.minimum(low_sum, 0.0), np.minimum(high_sum, 0.0))
    upper[rows, top] = np.minimum(upper[rows, top], above)
    lower[rows, top] = np.maximum(lower[rows, top], below)
    np.minimum(lower, upper, out=lower)


# ----------------------------------------------------------------------------- GNMax


def _step(num_classes: int) -> float:
    """The node spacing for C classes: a multiple of 1/64 (so every node k h is exact) with
    2 pi^2 / (C h^2) >= _TRAPEZOID_EXPONENT."""
    largest = math.sqrt(2 * math.pi**2 / (num_classes * _TRAPEZOID_EXPONENT))
    return math.floor(64 * largest) / 64


def _trapezoid_error(step: float, num_classes: int) -> float:
    """The relative error bound 2 e^{C a^2/2} / (e^{2 pi a / h} - 1) at a = 2 pi / (h C)
    (Trefethen and Weideman 2014, Theorem 5.1, with M <= e^{C a^2/2} p_j), rounded up."""
    exponent = 2 * math.pi**2 / (num_classes * step * step)
    return 2 * math.exp(-exponent) / -math.expm1(-2 * exponent) * 1.01


class _Rows:
    """The distinct integrals of a block of histograms: one row per histogram and distinct
    vote count u (classes with equal counts have equal probabilities), with the gaps
    u - v to its distinct counts v and how many other classes have each.

    Shapes: hists (K, C) -> gaps, mult (R, V) and row_of (K, C), each class's row.
    """

    def __init__(self, hists: FloatArray) -> None:
        num_hists, num_classes = hists.shape
        order = np.argsort(-hists, axis=1, kind="stable")
        ranked = np.take_along_axis(hists, order, axis=1)
        new = np.ones(ranked.shape, dtype=bool)
        new[:, 1:] = ranked[:, 1:] != ranked[:, :-1]
        group = np.cumsum(new, axis=1) - 1  # the distinct count of each sorted class
        distinct = group[:, -1] + 1
        width = int(distinct.max()) if num_hists else 1
        values = np.zeros((num_hists, width))
        mult = np.zeros((num_hists, width), dtype=np.int64)
        rows_k = np.repeat(np.arange(num_hists), num_classes)
        values[rows_k, group.ravel()] = ranked.ravel()
        np.add.at(mult, (rows_k, group.ravel()), 1)
        start = np.concatenate([[0], np.cumsum(distinct)[:-1]])
        # Each class's row, in the classes' own order.
        row_of = np.empty((num_hists, num_classes), dtype=np.intp)
        np.put_along_axis(row_of, order, start[:, None] + group, axis=1)
        self.row_of = row_of
        hist_of_row = np.repeat(np.arange(num_hists), distinct)
        own = np.arange(hist_of_row.size) - np.repeat(start, distinct)
        own_value = values[hist_of_row, own]
        self.mult = mult[hist_of_row]
        self.mult[np.arange(own.size), own] -= 1  # the own class contributes Phi(inf) = 1
        gaps = own_value[:, None] - values[hist_of_row]
        gaps[self.mult == 0] = 0.0
        self.gaps = gaps


class _Source:
    """log Phi(k h + d) and phi/Phi(k h + d) at integer nodes k, for a block's gaps.

    Integer gaps come from tables with one row per gap in [-G, G] and one column per node
    k_low .. k_high (each value computed once, by the same expression as the direct path);
    other gaps are evaluated directly.
    """

    def __init__(self, gaps: FloatArray, sigma: float, step: float, k_low: int, k_high: int):
        self.sigma = sigma
        self.step = step
        self.k_low = k_low
        self.table: FloatArray | None = None
        self.hazard: FloatArray | None = None
        self.log_phi: FloatArray | None = None
        self.offset = 0
        largest = float(np.max(np.abs(gaps))) if gaps.size else 0.0
        columns = k_high - k_low + 1
        if (
            largest < _TABLE_ENTRIES
            and (2 * largest + 1) * columns <= _TABLE_ENTRIES
            and np.array_equal(gaps, np.round(gaps))
        ):
            self.offset = int(largest)
            d = np.arange(-self.offset, self.offset + 1, dtype=np.float64) / sigma
            t = np.arange(k_low, k_high + 1, dtype=np.float64) * step
            x = t + d[:, None]
            with np.errstate(over="ignore"):
                table = log_ndtr(x)
            # A last row of zeros: the classes a row does not have read it (see ``rows``).
            self.hazard = np.vstack([_hazard(x, table), np.zeros((1, columns))])
            self.table = np.vstack([table, np.zeros((1, columns))])
            self.log_phi = _log_phi(t)

    def rows(self, gaps: FloatArray, mult: NDArray[np.int64]) -> IntArray | None:
        """Each gap's row in the tables, the row of zeros where no class has it (None where
        gaps are evaluated directly)."""
        if self.table is None:
            return None
        out: IntArray = np.where(mult > 0, gaps.astype(np.intp) + self.offset, 2 * self.offset + 1)
        return out

    def window_log_phi(self, first: IntArray, width: int) -> FloatArray:
        """log phi at the nodes first .. first + width - 1 of each row. Shapes: (R,) -> (R, W)."""
        if self.log_phi is not None:
            view = np.lib.stride_tricks.sliding_window_view(self.log_phi, width)
            out: FloatArray = view[first - self.k_low]
            return out
        nodes = (first[:, None] + np.arange(width)) * self.step
        return _log_phi(nodes.astype(np.float64))

    def window_log_cdf(
        self, gaps: FloatArray, table_rows: IntArray | None, first: IntArray, width: int
    ) -> FloatArray:
        """log Phi(k h + gap / sigma) at the nodes first .. first + width - 1 of each row.

        Shapes: gaps, table_rows, first (R,) -> (R, W).
        """
        if self.table is not None and table_rows is not None:
            view = np.lib.stride_tricks.sliding_window_view(self.table, width, axis=1)
            out: FloatArray = view[table_rows, first - self.k_low]
            return out
        x = (first[:, None] + np.arange(width)) * self.step + (gaps / self.sigma)[:, None]
        with np.errstate(over="ignore"):
            direct: FloatArray = log_ndtr(x)
        return direct

    def argument(self, gaps: FloatArray, k: IntArray) -> FloatArray:
        """The computed x = k h + gap / sigma (the same double in the tables)."""
        out: FloatArray = k * self.step + gaps / self.sigma
        return out

    def hazard_at(self, gaps: FloatArray, table_rows: IntArray | None, k: IntArray) -> FloatArray:
        """phi/Phi(x) at x = k h + gap / sigma (for the mode search); k broadcasts."""
        if self.hazard is not None and table_rows is not None:
            out: FloatArray = self.hazard[table_rows, k - self.k_low]
            return out
        x = self.argument(gaps, k)
        with np.errstate(over="ignore"):
            return _hazard(x, log_ndtr(x))


def _hazard(x: FloatArray, log_cdf: FloatArray) -> FloatArray:
    """phi(x) / Phi(x) from log Phi(x)."""
    with np.errstate(over="ignore", under="ignore", invalid="ignore"):
        out: FloatArray = np.exp(_log_phi(x) - log_cdf)
    return out


def _argument_error(reach: FloatArray, d: FloatArray) -> FloatArray:
    """A bound on how far a computed x = k h + fl(fl(u - v) / sigma) is from the exact
    k h + (u - v) / sigma: k h is exact, the quotient within 2 ulp of |d| and the sum within
    an ulp of |x| <= ``reach``; twice that is taken."""
    out: FloatArray = 2 * _U * (reach + 3 * np.abs(d))
    return out


def _hazard_bound(x: FloatArray, log_cdf: FloatArray, d: FloatArray, side: int) -> FloatArray:
    """A bound on phi/Phi at the exact x that the computed ``x`` stands for: from below for
    side -1, from above for side +1.

    The argument is within ``_argument_error`` of it, and phi/Phi moves by less than the
    argument (its slope -phi/Phi (x + phi/Phi) lies in (-1, 0)). exp(log phi - log Phi) is
    within e^s of the value at the computed x, s a few ulp of the magnitudes of the two logs
    and their difference; twice that is taken.
    """
    value = _hazard(x, log_cdf)
    with np.errstate(over="ignore", invalid="ignore"):
        spread = 8 * _U * (x * x + np.abs(log_cdf) + np.abs(_log_phi(x) - log_cdf) + 4.0)
        spread += _ndtr_error(log_cdf, x)
        out = value * np.exp(2 * side * spread) + side * _argument_error(np.abs(x), d)
    if side < 0:
        return np.where(np.isnan(out), 0.0, np.maximum(out, 0.0))
    return np.where(np.isnan(out), np.inf, out)


def _mode_nodes(rows: _Rows, source: _Source, num_classes: int) -> IntArray:
    """For each row, the last node k >= 0 where the log-integrand still rises (its slope
    -t + sum_b m_b phi/Phi(t + d_b) is positive), by bisection: the slope decreases (the
    log-integrand is concave), is positive at t = 0 and at most -t + 0.8 (C - 1) beyond the
    largest -d_b (phi/Phi(x) <= phi(0)/Phi(0) < 0.8 for x >= 0). Only places the window."""
    step = source.step
    d = rows.gaps / source.sigma
    reach = np.max(np.where(rows.mult > 0, np.maximum(-d, 0.0), 0.0), axis=1, initial=0.0)
    reach = np.minimum(np.maximum(reach, 0.8 * (num_classes - 1)), _FARTHEST_MODE)
    low = np.zeros(reach.size, dtype=np.intp)
    high = np.ceil(reach / step).astype(np.intp) + 1
    table_rows = source.rows(rows.gaps, rows.mult)
    steps = int(np.ceil(np.log2(float(high.max(initial=1)) + 1))) + 1
    for _ in range(steps):
        middle = (low + high) // 2
        hazards = source.hazard_at(rows.gaps, table_rows, middle[:, None])
        with np.errstate(invalid="ignore"):
            slope = np.sum(np.where(rows.mult > 0, rows.mult * hazards, 0.0), axis=1)
        rising = slope > middle * step
        low = np.where(rising, middle, low)
        high = np.where(rising, high, middle)
    return low


def _gnmax_rows(
    rows: _Rows, source: _Source, num_classes: int, modes: IntArray
) -> tuple[FloatArray, FloatArray]:
    """Lower and upper bounds on log p for each row (see the module's docstring).

    Shapes: rows (R, V) -> (R,), (R,).
    """
    step = source.step
    half = math.ceil(_HALF_WIDTH / step)
    width = 2 * half + 2
    first = modes - half  # (R,)
    last = first + (width - 1)
    table_rows = source.rows(rows.gaps, rows.mult)
    num_rows, num_values = rows.gaps.shape
    d_all = rows.gaps / source.sigma
    mult = rows.mult.astype(np.float64)
    log_f = source.window_log_phi(first, width)  # (R, W)
    if not log_f.flags.writeable:
        log_f = log_f.copy()
    end_cdf = np.zeros((num_rows, num_values, 2))
    for b in range(num_values):
        if not np.any(rows.mult[:, b]):
            continue
        column_rows = None if table_rows is None else table_rows[:, b]
        values = source.window_log_cdf(rows.gaps[:, b], column_rows, first, width)
        end_cdf[:, b, 0], end_cdf[:, b, 1] = values[:, 0], values[:, -1]
        # Rows without this class read zeros from the tables, or a finite log Phi (gap 0)
        # that the multiplicity 0 removes.
        if table_rows is None or np.any(rows.mult[:, b] > 1):
            values *= mult[:, b, None]
        log_f += values
    end_x = np.stack(
        [source.argument(rows.gaps, first[:, None]), source.argument(rows.gaps, last[:, None])],
        axis=2,
    )
    t_ends = np.stack([first * step, last * step], axis=1).astype(np.float64)
    # Rounding of the window's logs: the sum's terms share a sign, so C + 4 roundings of the
    # largest magnitude bound it (at an end of the window: the log-integrand is concave);
    # each log Phi's own error and its argument's add per class: the argument's error times
    # phi/Phi, below max(-x, 0) + 1 (phi/Phi(0) < 0.8, and its slope lies in (-1, 0)) and
    # largest at the window's left end.
    ends = log_f[:, [0, -1]]
    size = np.max(-ends, axis=1) * (1 + 1e-9)
    left_x = end_x[:, :, 0]
    shift = _argument_error(np.maximum(np.abs(left_x), np.abs(end_x[:, :, 1])), d_all)
    argument = (np.maximum(-left_x, 0.0) + 1.0 + shift) * shift
    own = _NDTR_ULPS * _U * np.maximum(np.abs(end_cdf[:, :, 0]), 1.0)
    rho = _BASE_SLACK + _SUM_ULPS * _U * size + np.sum(mult * (argument + own), axis=1)
    low_sum, high_sum = _log_sum_bounds_in_place(log_f)
    log_step = math.log(step)
    window = low_sum + log_step
    rho += 4 * _U * (np.abs(window) + abs(log_step))
    # The nodes beyond each end: log f(t_end -+ u) <= log f(t_end) -+ slope u - u^2 / 2
    # (log phi is that quadratic, log Phi is concave), summed by _log_mills_above.
    present = mult > 0
    with np.errstate(invalid="ignore"):
        low_h = _hazard_bound(end_x[:, :, 0], end_cdf[:, :, 0], d_all, -1)
        rise_left = np.sum(np.where(present, mult * low_h, 0.0), axis=1)
        high_h = _hazard_bound(end_x[:, :, 1], end_cdf[:, :, 1], d_all, 1)
        rise_right = np.sum(np.where(present, mult * high_h, 0.0), axis=1)
    # The sums of V + 1 terms, each rounded.
    error_left = (num_values + 2) * _U * (np.abs(t_ends[:, 0]) + rise_left)
    error_right = (num_values + 2) * _U * (np.abs(t_ends[:, 1]) + rise_right)
    slope_left_low = -t_ends[:, 0] + rise_left - error_left
    slope_right_high = -t_ends[:, 1] + rise_right + error_right
    tail_left = ends[:, 0] + rho + _log_mills_above(-slope_left_low, step)
    tail_right = ends[:, 1] + rho + _log_mills_above(slope_right_high, step)
    tails = np.logaddexp(tail_left, tail_right)
    tails += 4 * _U * np.abs(tails) + 1e-12  # the tails are negligible: a generous margin
    error = _trapezoid_error(step, num_classes)
    lower = window - rho - math.log1p(error)
    with np.errstate(invalid="ignore"):
        upper = np.logaddexp(high_sum + log_step + rho, tails) - math.log1p(-error)
    lower -= 4 * _U * np.abs(lower)
    upper += 4 * _U * np.abs(upper) + 4 * _U
    lower = np.where(np.isnan(lower), -np.inf, lower)
    upper = np.where(np.isnan(upper), 0.0, upper)
    return lower, upper


def _gnmax_block(
    hists: FloatArray, sigma: float, step: float, block: slice
) -> tuple[IntArray, FloatArray, FloatArray]:
    """The rows of a block of histograms: (each class's row, lower, upper bounds of log p).

    Gaps beyond the float range in noise units (sigma near 1e-300) overflow to infinities and
    NaNs, which ``_gnmax_rows`` turns into the trivial bounds -inf and 0.
    """
    num_classes = hists.shape[1]
    half = math.ceil(_HALF_WIDTH / step)
    rows = _Rows(hists[block])
    with np.errstate(all="ignore"):
        d = rows.gaps / sigma
        reach = np.max(np.where(rows.mult > 0, np.maximum(-d, 0.0), 0.0), initial=0.0)
        reach = min(max(float(reach), 0.8 * (num_classes - 1)), _FARTHEST_MODE)
        k_high = math.ceil(reach / step) + 2 * half + 4  # past the last mode's window
        source = _Source(rows.gaps, sigma, step, -half - 1, k_high)
        modes = _mode_nodes(rows, source, num_classes)
        row_low, row_high = _gnmax_rows(rows, source, num_classes, modes)
    return rows.row_of, row_low, row_high


def gnmax_log_prob_bounds(hists: ArrayLike, sigma: float) -> tuple[FloatArray, FloatArray]:
    """Lower and upper bounds on log Pr[GNMax answers j] for each histogram and class.

    The trapezoid rule on the whole line with a rigorous relative error (Trefethen and
    Weideman 2014, Theorem 5.1), the truncated nodes and every rounding bounded (see the
    module's docstring); the most likely class is also bounded by 1 - (the others). Upper
    and lower are within ~1e-11 of each other (relative) where |log p| < 100, and within
    ~1e-13 |log p| beyond (the logs' own rounding).

    Shapes: hists (K, C) -> (K, C), (K, C).

    Raises:
        TooManyClassesError: for more than 20 classes.
    """
    hists = _check_hists(hists)
    sigma = _check_positive("sigma", sigma)
    num_hists, num_classes = hists.shape
    lower = np.empty((num_hists, num_classes))
    upper = np.empty((num_hists, num_classes))
    if num_hists == 0:
        return lower, upper
    step = _step(num_classes)
    width = 2 * math.ceil(_HALF_WIDTH / step) + 2
    per_block = max(1, _BLOCK_CELLS // (width * num_classes))
    blocks = [
        slice(start, min(start + per_block, num_hists)) for start in range(0, num_hists, per_block)
    ]
    results = _ordered_map(partial(_gnmax_block, hists, sigma, step), blocks)
    for block, (row_of, row_low, row_high) in zip(blocks, results, strict=True):
        lower[block] = row_low[row_of]
        upper[block] = row_high[row_of]
    _sum_to_one(lower, upper)
    return lower, upper


# ----------------------------------------------------------------------------- Confident


def confident_log_prob_bounds(
    hists: ArrayLike, threshold: float, sigma1: float, sigma: float
) -> tuple[FloatArray, FloatArray]:
    """Lower and upper bounds on the log-probabilities of Confident-GNMax's outcomes:
    outcome 0 abstains, outcome j + 1 answers class j.

    Pr[answered] = Phi(z), Pr[abstain] = Phi(-z), z = (floor(max n + 1/2) - T) / sigma1, each
    tail from log_ndtr (within _NDTR_ULPS of its size; the two roundings of z move it by
    2 ulp of z, times phi/Phi <= |z| + 1); Pr[answered, j] = Pr[answered] p_j with p_j
    from :func:`gnmax_log_prob_bounds`. The most likely outcome is also bounded by the others.

    Shapes: hists (K, C) -> (K, C + 1), (K, C + 1).

    Raises:
        TooManyClassesError: for more than 20 classes.
    """
    hists = _check_hists(hists)
    sigma1 = _check_positive("sigma1", sigma1)
    threshold = float(threshold)
    if not math.isfinite(threshold):
        raise ValueError(f"threshold must be finite, got {threshold}")
    gn_low, gn_high = gnmax_log_prob_bounds(hists, sigma)
    z = threshold_margins(hists, threshold, sigma1)
    tails = np.stack([log_ndtr(-z), log_ndtr(z)], axis=1)  # (abstain, answered)
    signed = np.stack([-z, z], axis=1)
    # z beyond the float range (sigma1 near 1e-300) is infinite: its bounds are trivial.
    with np.errstate(all="ignore"):
        shift = 2.01 * _U * np.abs(z)[:, None]  # how far z may be from (h - T) / sigma1
        error = _ndtr_error(tails, signed) + (np.abs(z)[:, None] + 1 + shift) * shift
        tail_low = tails - error - _TINY
        tail_high = tails + error + _TINY
    tail_low = np.where(np.isnan(tail_low), -np.inf, tail_low)
    tail_high = np.where(np.isnan(tail_high), 0.0, tail_high)
    num_hists, num_classes = hists.shape
    lower = np.empty((num_hists, num_classes + 1))
    upper = np.empty((num_hists, num_classes + 1))
    lower[:, 0], upper[:, 0] = tail_low[:, 0], tail_high[:, 0]
    low = tail_low[:, 1:2] + gn_low
    high = tail_high[:, 1:2] + gn_high
    lower[:, 1:] = low - 2 * _U * np.abs(low) - _TINY
    upper[:, 1:] = high + 2 * _U * np.abs(high) + _TINY
    _sum_to_one(lower, upper)
    return lower, upper

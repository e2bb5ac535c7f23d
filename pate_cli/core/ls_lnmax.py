"""LNMax's local sensitivity at every distance d: the bound that releases its epsilon.

The published per-query bound of LNMax (2017) at order lambda is f(n) = F(q(n)): q is
Lemma 4's q = min(1 - 1/C, sum_{j != top} h(gamma g_j)), h(x) = (2 + x) / (4 e^x), g_j the
gaps to the top count, and F is Theorem 3 of 2017 as RDP, capped by the data-independent
bound (``core.lnmax.rdp_lnmax``). Smooth sensitivity (2018, Definition 12 / Theorem 24)
needs, per query and distance d, a bound of A_d(n) = max |f(n'') - f(n')| over n' within
d teacher changes of n and n'' one change from n'. Three facts give one, none of them a
walk that could miss a neighbour:

1. F is non-decreasing in q. On q <= 1/(e^eps + 1) the moment is A(q) = (1 - q) r^l +
   q e^(eps l), r = (1 - q) / (1 - e^eps q) in [1, e^eps], and
   A'(q) = r^l (l (e^eps - 1) / (1 - e^eps q) - 1) + e^(eps l) > 0, since r^l <= e^(eps l);
   the cap is a constant and meets Theorem 3 where its condition ends.
2. One change moves q by a factor of at most e^(2 gamma) either way. A change removes at
   most one vote and adds at most one, so every gap to the top shrinks by at most 2, and
   h(max(0, x - 2 gamma)) <= e^(2 gamma) h(x); the neighbour relation is symmetric.
3. Over the ball of radius d, q lies in [q_lo(d), q_hi(d)]. Up: gaps are at least
   max(0, g - d - a_j) with sum_j a_j <= d (the top loses at most d votes, d votes are
   added); h is convex and decreasing, so the largest sum spends the d votes on the
   smallest gaps first. Down: no class gains or loses more than d votes, so every gap to
   the new top is at most g_j + 2d (the old top's g is 0); if the top changes, the old
   top's term h(2 gamma d) replaces the new top's, which is no larger, so q is at least
   sum_{j != top} h(gamma (g_j + 2d)) either way.

So A_d(n) <= max over q in [q_lo(d), q_hi(d)] of max(F(min(cap, e^(2 gamma) q)) - F(q),
F(q) - F(e^(-2 gamma) q)). That maximum is read from a table over cells of log q, each
cell bounded by F at its far ends (F is monotone), made unimodal by taking running maxima
towards its peak (an upper envelope), so a range maximum is one lookup. Every cell carries
a rounding allowance above the float error of F.

Shapes: Q queries, C classes, M teachers (distances d = 0 .. M-1).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from numpy.typing import ArrayLike, NDArray

from pate_cli.core._common import (
    _ENTRY_CHUNK,
    _as_integer_votes,
    _check_num_teachers,
    _check_order,
    _check_positive,
)
from pate_cli.core.horizon import Horizon, distance_ranges
from pate_cli.core.lnmax import rdp_lnmax, rdp_lnmax_data_independent
from pate_cli.core.ls_gnmax import _canonical_rows

# Per teacher change, log q moves by at most this many gammas (fact 2 above).
_STEP_GAMMAS = 2.0
# Cells of log q per step of a teacher change: the table's bound exceeds the supremum by
# about one cell's worth of F, 1/_CELLS_PER_STEP of a step.
_CELLS_PER_STEP = 256
# At most this many cells: a tiny gamma gets wider cells (a looser, still sound, bound).
_MAX_CELLS = 1 << 18
# The lowest cell is [0, e^low], bounded like the others: low sits this far below the q of
# the most confident histogram (runner-up gap M, q >= h(gamma M)), and not below e^-120.
_BELOW_CONFIDENT = 20.0
_LOWEST_LOG_Q = -120.0
# F is computed to about 1e-13 (1 + eps) absolutely (log-space terms of magnitude up to
# eps times the moment, divided by it); the allowance is ten times that, per value of F.
_ROUNDING = 1e-12


@dataclass(frozen=True)
class _SensitivityTable:
    """A unimodal upper envelope of the one-change increment of F over cells of log q."""

    low: float  # log q at the top of the lowest cell (cell 0 is [0, e^low])
    width: float  # log-width of cells 1 .. K
    envelope: NDArray[np.float64]  # (K + 1,)
    peak: int

    def cell(self, log_q: NDArray[np.float64]) -> NDArray[np.int64]:
        """The cell holding each log q (-inf in cell 0), not yet widened."""
        with np.errstate(invalid="ignore"):
            position = np.floor((log_q - self.low) / self.width) + 1
        position = np.where(log_q < self.low, 0.0, position)
        return np.clip(position, 0, self.envelope.size - 1).astype(np.int64)


def _sensitivity_table(
    num_classes: int, gamma: float, order: float, num_teachers: int
) -> _SensitivityTable:
    """The increment table of one (C, gamma, order, M).

    Cells are c = 0 .. K: cell 0 is [0, e^E_0], cell c is [E_(c-1), E_c] with E_j = low +
    j width (capped at log(1 - 1/C)). A step of 2 gamma is at most m cells, so over a cell
    [a, b]: F(min(cap, e^(2 gamma) b)) - F(a) <= F(E_(c+m)) - F(E_(c-1)) and F(b) -
    F(e^(-2 gamma) a) <= F(E_c) - F(E_(c-1-m)), F non-decreasing: F on one grid gives both.
    """
    log_cap = math.log1p(-1 / num_classes)
    step = _STEP_GAMMAS * gamma
    confident = math.log((2 + gamma * num_teachers) / 4) - gamma * num_teachers
    low = min(max(_LOWEST_LOG_Q, confident - _BELOW_CONFIDENT), log_cap - step)
    width = max(step / _CELLS_PER_STEP, (log_cap - low) / _MAX_CELLS)
    shift = math.ceil(step / width)
    if shift * width < step:  # the division rounded down
        shift += 1
    num_cells = math.ceil((log_cap - low) / width)
    # F at E_j for j = -shift .. num_cells + shift.
    grid = low + width * np.arange(-shift, num_cells + shift + 1)
    at = rdp_lnmax(np.minimum(grid, log_cap), gamma, np.array([order]))[:, 0]
    cells = np.arange(1, num_cells + 1) + shift  # index of E_c in ``at`` for c = 1 .. K
    up = np.concatenate(([at[2 * shift]], at[cells + shift] - at[cells - 1]))
    down = np.concatenate(([at[shift]], at[cells] - at[cells - 1 - shift]))
    independent = float(rdp_lnmax_data_independent(gamma, np.array([order]))[0])
    increment = np.maximum(np.maximum(up, down), 0.0) + 2 * _ROUNDING * (1 + independent)
    peak = int(np.argmax(increment))
    envelope = increment.copy()
    envelope[: peak + 1] = np.maximum.accumulate(increment[: peak + 1])
    envelope[peak:] = np.maximum.accumulate(increment[peak:][::-1])[::-1]
    return _SensitivityTable(low=low, width=width, envelope=envelope, peak=peak)


# Lemma 4's terms come from a table over whole gaps, in linear space shifted by e^_SHIFT:
# a term below e^-1300 underflows, far below the lowest cell's top (at least e^-120).
_SHIFT = 600.0
# Beyond this scaled gap a term is exactly 0 in the table (e^(-1400 + _SHIFT) underflows).
_ZERO_SCALED_GAP = 1400.0


def _term_table(gamma: float, largest_gap: int) -> NDArray[np.float64]:
    """h(gamma k) e^_SHIFT for k = 0 .. largest_gap (Lemma 4's term, h(x) = (2 + x) / (4
    e^x)), cut where the terms underflow to 0: read it through ``_terms_at``."""
    # A subnormal gamma's cut overflows to inf: the whole table, never ceil(inf).
    size = math.ceil(min(float(largest_gap), _ZERO_SCALED_GAP / gamma)) + 1
    terms = np.empty(size)
    for start in range(0, size, _ENTRY_CHUNK):  # with many teachers the table is large
        scaled = gamma * np.arange(start, min(start + _ENTRY_CHUNK, size), dtype=np.float64)
        terms[start : start + scaled.size] = np.exp(
            np.log(2 + scaled) - scaled + (_SHIFT - math.log(4))
        )
    return terms


def _terms_at(terms: NDArray[np.float64], gaps: NDArray[np.int64]) -> NDArray[np.float64]:
    """The table's terms at whole gaps; a gap past a cut table reads its last entry, 0."""
    return np.take(terms, gaps, mode="clip")


def _log_q_hi(
    gaps: NDArray[np.int64], distances: NDArray[np.int64], terms: NDArray[np.float64]
) -> NDArray[np.float64]:
    """log of fact 3's q_hi before the cap: the top loses d votes, d votes go to the smallest
    gaps first. Shapes: gaps (R, C-1) ascending, distances (D,) -> (R, D)."""
    d = distances[None, :, None]
    shifted = np.maximum(gaps[:, None, :] - d, 0)  # (R, D, C-1), ascending
    # y_i = clip(sum_{j<=i} x_j - d, 0, x_i): the votes spent from the smallest gap on.
    spent = np.clip(np.cumsum(shifted, axis=2) - d, 0, shifted)
    with np.errstate(divide="ignore"):  # an all-underflowed sum is below every cell: -inf
        return np.log(_terms_at(terms, spent).sum(axis=2)) - _SHIFT


def _log_q_lo(
    gaps: NDArray[np.int64], distances: NDArray[np.int64], terms: NDArray[np.float64]
) -> NDArray[np.float64]:
    """log of fact 3's q_lo: every gap at most g + 2d. Shapes as ``_log_q_hi``."""
    widened = gaps[:, None, :] + 2 * distances[None, :, None]
    with np.errstate(divide="ignore"):  # an all-underflowed sum is below every cell: -inf
        return np.log(_terms_at(terms, widened).sum(axis=2)) - _SHIFT


class _RowWalk:
    """A_d bounds of sorted rows (R, C) range by range of distances (``bounds``: each block of
    rows asked for its ranges in order from distance 0).

    A row's interval [q_lo(d), q_hi(d)] starts at its own q and widens with d. Below the
    table's peak only its upper end matters (the envelope rises to the peak), above it only
    its lower end; once the interval holds the peak the bound is the table's maximum
    (``highest``, at least every bound), and the row is done.
    """

    def __init__(
        self,
        rows: NDArray[np.int64],
        num_teachers: int,
        terms: NDArray[np.float64],
        table: _SensitivityTable,
    ) -> None:
        self.gaps = rows[:, :1] - rows[:, 1:]  # (R, C-1), ascending
        self.num_teachers, self.terms, self.table = num_teachers, terms, table
        self.highest = float(table.envelope[table.peak])
        own = _log_q_hi(self.gaps, np.zeros(1, dtype=np.int64), terms)[:, 0]
        self.rising = table.cell(own) - 1 <= table.peak  # the lower end never passes the peak
        self.open = np.ones(rows.shape[0], dtype=bool)  # not yet at the peak

    def bounds(self, block: slice, start: int, stop: int) -> NDArray[np.float64]:
        """The rows of ``block`` at distances start .. stop-1. Shapes: -> (rows, width)."""
        first = block.start
        out = np.full((block.stop - first, stop - start), self.highest)
        for rising in (True, False):
            mine = self.open[block] & (self.rising[block] == rising)
            self._fill(out, first + np.flatnonzero(mine), first, start, stop, rising)
        if stop == self.num_teachers:
            # Beyond the last distance the ball keeps growing: the table's maximum bounds it all.
            out[:, -1] = self.highest
        return out

    def _fill(
        self,
        out: NDArray[np.float64],
        active: NDArray[np.intp],
        first: int,
        start: int,
        stop: int,
        rising: bool,
    ) -> None:
        """Write the bounds of the ``active`` rows (``out``'s row 0 is row ``first``) at
        distances start .. stop-1, in blocks of distances; a row at the peak is done."""
        table, width = self.table, self.gaps.shape[1]
        bound = _log_q_hi if rising else _log_q_lo
        position = start
        while active.size and position < stop:
            size = max(1, min(stop - position, _ENTRY_CHUNK // (active.size * width)))
            distances = np.arange(position, position + size)
            position += size
            cells = table.cell(bound(self.gaps[active], distances, self.terms))
            if rising:
                reach = np.minimum(cells + 1, table.peak)
            else:
                reach = np.maximum(cells - 1, table.peak)
            out[active[:, None] - first, distances[None, :] - start] = table.envelope[reach]
            done = reach[:, -1] == table.peak
            self.open[active[done]] = False
            active = active[~done]


class LnmaxSensitivity:
    """The tables of LNMax's local sensitivity for one (C, M, gamma, order), built once and
    read for every block of votes: the increment table over cells of log q and Lemma 4's
    terms up to the largest gap a ball can reach (a count is at most M, plus 2 M)."""

    def __init__(self, num_classes: int, num_teachers: int, gamma: float, order: float) -> None:
        self.num_classes = int(num_classes)
        self.num_teachers = _check_num_teachers(num_teachers)
        gamma = _check_positive("gamma", gamma)
        order = _check_order(order)
        self._table = (
            _sensitivity_table(self.num_classes, gamma, order, self.num_teachers)
            if self.num_classes >= 2
            else None
        )
        self._terms = _term_table(gamma, 3 * self.num_teachers)

    def _rows(self, votes: ArrayLike) -> tuple[NDArray[np.int64], NDArray[np.intp]]:
        """Distinct sorted rows of whole counts and the inverse map, checked against C, M."""
        counts = _as_integer_votes(votes)
        if counts.shape[1] != self.num_classes:
            raise ValueError(f"votes have {counts.shape[1]} classes, expected {self.num_classes}")
        if counts.size and counts.max() > self.num_teachers:
            raise ValueError(f"a vote count exceeds the {self.num_teachers} teachers")
        return _canonical_rows(counts)

    def per_query(self, votes: ArrayLike) -> NDArray[np.float64]:
        """A_d bounds per query: (Q, C) -> (Q, M)."""
        unique, inverse = self._rows(votes)
        if self._table is None:
            return np.zeros((inverse.size, self.num_teachers))
        walk = _RowWalk(unique, self.num_teachers, self._terms, self._table)
        every = slice(0, unique.shape[0])
        spans = distance_ranges(self.num_teachers)
        return np.concatenate([walk.bounds(every, *span) for span in spans], axis=1)[inverse]

    def total(self, votes: ArrayLike, weights: ArrayLike | None = None) -> NDArray[np.float64]:
        """sum_q w_q A_d(q): (Q, C), (Q,) -> (M,); equal sorted rows bounded once."""
        total, _, _ = self._walked(votes, weights, None)
        return total

    def walked(
        self,
        votes: ArrayLike,
        weights: ArrayLike | None,
        horizon: Horizon,
        counts: ArrayLike | None = None,
    ) -> Horizon:
        """``total`` of one block of a release's queries, walked only over the distances that
        can change the smooth sensitivity at betas of at least ``horizon.beta``
        (``core.horizon``; W: the weights times the table's largest): returns the horizon
        after the block. The weights must be at most 1 a query (the queries still to come
        are bounded as such). ``counts``: how many queries each row stands for (distinct
        rows; whole numbers), the weights then the summed weights of its queries (None: the
        counts)."""
        total, bound, queries = self._walked(votes, weights, horizon, counts)
        return horizon.after(total, bound, queries)

    def _walked(
        self,
        votes: ArrayLike,
        weights: ArrayLike | None,
        horizon: Horizon | None,
        counts: ArrayLike | None = None,
    ) -> tuple[NDArray[np.float64], float, int]:
        """The total range by range (until ``horizon`` is reached), its bound W and the
        number of queries."""
        unique, inverse = self._rows(votes)
        held = np.ones(inverse.size) if counts is None else np.asarray(counts, dtype=np.float64)
        w = held if weights is None else np.asarray(weights, dtype=np.float64)
        if horizon is not None and np.any(w > held):
            raise ValueError("a release's walk needs weights of at most 1 a query")
        highest = 0.0 if self._table is None else float(self._table.envelope[self._table.peak])
        bound = float(w.sum()) * highest
        queries = inverse.size if counts is None else int(held.sum())
        row_weight = np.asarray(
            np.bincount(inverse, weights=w, minlength=unique.shape[0]), dtype=np.float64
        )
        live = np.flatnonzero(row_weight)
        walk = None
        if self._table is not None and live.size:
            walk = _RowWalk(unique[live], self.num_teachers, self._terms, self._table)
        pieces, reach = [np.zeros(0)], math.inf
        for start, stop in distance_ranges(self.num_teachers):
            if walk is None:
                pieces.append(np.zeros(stop - start))
            else:
                pieces.append(_weighted(walk, row_weight[live], start, stop))
            if horizon is not None:
                reach = min(reach, horizon.reach(pieces[-1], start, bound, queries, highest))
                if reach < stop:
                    break
        return np.concatenate(pieces), bound, queries


def _weighted(
    walk: _RowWalk, weights: NDArray[np.float64], start: int, stop: int
) -> NDArray[np.float64]:
    """sum over rows of weight times A_d, d = start .. stop-1, in blocks of rows (summed row
    by row: the same order whatever the range)."""
    total = np.zeros(stop - start)
    rows = max(1, _ENTRY_CHUNK // (stop - start))
    for first in range(0, weights.size, rows):
        block = slice(first, min(first + rows, weights.size))
        total += np.sum(walk.bounds(block, start, stop) * weights[block, None], axis=0)
    return total


def local_sensitivity_lnmax(
    votes: ArrayLike, num_teachers: int, gamma: float, order: float
) -> NDArray[np.float64]:
    """Per query and distance d, an upper bound of LNMax's local sensitivity A_d at ``order``.

    Column d bounds max |f(n'') - f(n')| over n' within d teacher changes of the query's
    histogram and n'' one change from n' (a change moves, adds or removes one vote); the
    last column bounds every larger d too.

    Shapes: votes (Q, C) whole counts, each at most M -> (Q, M).
    """
    counts = _as_integer_votes(votes)
    return LnmaxSensitivity(counts.shape[1], num_teachers, gamma, order).per_query(counts)


def local_sensitivity_total_lnmax(
    votes: ArrayLike,
    num_teachers: int,
    gamma: float,
    order: float,
    weights: ArrayLike | None = None,
) -> NDArray[np.float64]:
    """sum_q w_q A_d(q) for d = 0 .. M-1 (Theorem 24: the total's bound is the sum).

    ``weights`` (Q,) default to 1 (every query answered). For several blocks of votes, build
    one ``LnmaxSensitivity`` and call its ``total`` per block.

    Shapes: votes (Q, C) whole counts, each at most M -> (M,).
    """
    counts = _as_integer_votes(votes)
    return LnmaxSensitivity(counts.shape[1], num_teachers, gamma, order).total(counts, weights)

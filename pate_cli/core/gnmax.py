"""GNMax: the Gaussian noisy-max aggregator of Papernot et al. 2018.

The data-dependent analysis bounds q = Pr[noisy argmax != argmax] from the
votes (Prop. 7) and turns a bound on q into an RDP bound (Theorem 6, with the
higher orders of Prop. 10). The data-independent bound is Prop. 8. Every
per-query quantity depends on the votes only through log q, which is what
makes deduplication and smooth sensitivity tractable.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray
from scipy.special import log_ndtr, logsumexp

from pate_cli.core import compact
from pate_cli.core.compact import Compact
from pate_cli.core.logmath import log1mexp


def _variance(sigma: float) -> np.float64:
    """sigma^2 as a float64: 0 or inf where it leaves the float range, never an exception.

    (A Python ``sigma**2`` raises OverflowError for sigma > 1.3e154.) Inside the range
    this is the same correctly rounded square as ``sigma**2``.
    """
    with np.errstate(over="ignore", under="ignore"):
        return np.float64(sigma) ** 2


def _check_sigma_orders(sigma: float, orders: NDArray[np.float64]) -> None:
    if not sigma > 0:
        raise ValueError(f"sigma must be positive, got {sigma}")
    if np.any(orders <= 1):
        raise ValueError("Renyi orders must be greater than 1")


def logq_gnmax(counts: NDArray[np.float64] | Compact, sigma: float) -> NDArray[np.float64]:
    """Upper bound on log Pr[GNMax outcome != argmax] for each query.

    Prop. 7, Papernot et al. 2018: q <= sum_{i != i*} Pr[N(0, 2 sigma^2) >= n_i* - n_i],
    capped at 1 - 1/C. The argmax is the first maximal class, as in the reference. Compact
    histograms add their unlisted zero-vote classes as one term times their number.

    Shapes: counts (Q, C) -> (Q,).
    """
    counts, zeros, num_classes = compact.parts(counts)
    if not sigma > 0:
        raise ValueError(f"sigma must be positive, got {sigma}")
    with np.errstate(divide="ignore"):  # log(0) for a single class is the intended -inf
        cap = np.log(1 - 1 / num_classes)
    logq = _logq_integer_gaps(counts, sigma)
    if logq is None:
        logq = _logq_rows_log_space(counts, sigma)
    if zeros is not None:
        top = counts.max(axis=1) if counts.size else np.zeros(0)
        with np.errstate(divide="ignore"):  # no other zero class: log 0 adds nothing
            logq = np.logaddexp(logq, np.log(zeros) + _log_tails(top, sigma))
    return np.minimum(logq, cap)


def logq_gnmax_neighbour(
    counts: NDArray[np.float64] | Compact, sigma: float
) -> NDArray[np.float64]:
    """Upper bound on log Pr[GNMax on any neighbour != this argmax], for each query.

    Prop. 7 of 2018 for the neighbour's votes: moving one teacher's vote shrinks every gap
    to the first argmax i* by at most 2, and the union bound holds for a fixed i* whether
    or not it is the neighbour's argmax; capped at 1 (not 1 - 1/C: i* may not be the
    neighbour's most likely class). Shapes: counts (Q, C) -> (Q,).
    """
    counts, zeros, _ = compact.parts(counts)
    if not sigma > 0:
        raise ValueError(f"sigma must be positive, got {sigma}")
    rows = np.arange(counts.shape[0])
    top = counts.argmax(axis=1) if counts.size else np.zeros(0, dtype=np.intp)
    gaps = counts[rows, top][:, None] - counts - 2.0
    logq = _logq_log_space(gaps, rows, top, sigma)
    if zeros is not None:
        with np.errstate(divide="ignore"):  # no other zero class: log 0 adds nothing
            logq = np.logaddexp(logq, np.log(zeros) + _log_tails(counts[rows, top] - 2.0, sigma))
    return np.minimum(logq, 0.0)


def _logq_rows_log_space(counts: NDArray[np.float64], sigma: float) -> NDArray[np.float64]:
    """Prop. 7 in log space, row by row of ``counts``: valid for any votes."""
    rows = np.arange(counts.shape[0])
    top = counts.argmax(axis=1)
    gaps = counts[rows, top][:, None] - counts
    return _logq_log_space(gaps, rows, top, sigma)


def _log_tails(gaps: NDArray[np.float64], sigma: float) -> NDArray[np.float64]:
    """log Pr[N(0, 2 sigma^2) >= gap] = log_ndtr(-gap / (sqrt(2) sigma)), elementwise."""
    variance = _variance(sigma)
    if np.finfo(np.float64).tiny <= variance <= np.finfo(np.float64).max / 2:
        return log_ndtr(-gaps / np.sqrt(2 * variance))  # the reference's expression
    # sigma^2 outside the float range: scale without squaring. A gap of more than
    # ~1e308 noise scales overflows to -inf, a tail of probability 0 (log q = -inf).
    with np.errstate(over="ignore"):
        return log_ndtr(-(gaps / sigma) / np.sqrt(2))


def _logq_log_space(
    gaps: NDArray[np.float64], rows: NDArray[np.intp], top: NDArray[np.intp], sigma: float
) -> NDArray[np.float64]:
    """The union bound of Prop. 7 summed in log space: valid for any gaps."""
    log_tails = _log_tails(gaps, sigma)
    log_tails[rows, top] = -np.inf  # the union bound runs over the other classes only
    return logsumexp(log_tails, axis=1)


# Integer gaps up to this many are tabulated (8 MB at most per table).
_TABLE_MAX_GAP = 1 << 20
# The largest term of a row must be at least this for a linear-space sum to keep full
# relative precision (all terms are positive: no cancellation; subnormals are negligible).
_LINEAR_FLOOR = 1e-280


@functools.lru_cache(maxsize=8)
def _tail_table(sigma: float, width: int) -> NDArray[np.float64]:
    """Tails of the gaps 0 .. width-1 for a sum, and the tail of gap 0 again (read-only).

    Entry 0 is 0: the maximal classes are counted apart (see ``_logq_integer_gaps``).
    """
    tails = np.exp(_log_tails(np.arange(width, dtype=np.float64), sigma))
    table = np.append(tails, tails[0])
    table[0] = 0.0
    table.flags.writeable = False
    return table


def _logq_integer_gaps(counts: NDArray[np.float64], sigma: float) -> NDArray[np.float64] | None:
    """Prop. 7 for integer votes, from a table of Gaussian tails per integer gap.

    Votes are usually counts, so every gap to the top count is an integer in [0, M]:
    the tail of each gap is computed once (with the same expression as the general
    path) and summed in linear space where that keeps full precision; other rows go
    to log space. The work runs on the transposed (C, Q) block, in place where it
    can, so every step is a loop over queries. The union bound excludes one maximal
    class: the other classes of gap 0 (ties) add their tail 1/2 each.
    Returns None when the gaps are not small integers.
    """
    if counts.size == 0:
        return None
    gaps = counts.T.copy()  # (C, Q)
    np.subtract(gaps.max(axis=0), gaps, out=gaps)
    largest = gaps.max()
    if not largest <= _TABLE_MAX_GAP:
        return None
    index = gaps.astype(np.intp)
    if not np.array_equal(index, gaps):
        return None
    table = _tail_table(float(sigma), int(largest) + 1)
    half = float(table[-1])  # the tail of gap 0
    ties = np.count_nonzero(index == 0, axis=0) - 1  # maximal classes besides the excluded one
    terms = np.take(table, index, out=gaps)  # the tails of the nonzero gaps; 0 for gap 0
    # A row's largest term: the tail of gap 0 with a tie, else of its smallest nonzero gap.
    head = np.where(ties > 0, half, terms.max(axis=0))
    sums = _column_sums(terms)
    sums += ties * half
    exact = head >= _LINEAR_FLOOR
    logq = np.empty(counts.shape[0])
    with np.errstate(divide="ignore"):  # a zero sum (single class) is the intended -inf
        logq[exact] = np.log(sums[exact])
    rest = ~exact
    if rest.any():
        logq[rest] = _logq_rows_log_space(counts[rest], sigma)
    return logq


# Up to this many classes a column is summed in order; beyond, pairwise.
_PAIRWISE_FROM = 128


def _column_sums(terms: NDArray[np.float64]) -> NDArray[np.float64]:
    """Sums down the columns of (C, Q) non-negative terms: in order for few classes, else
    pairwise (halving the rows), so that the rounding error grows with log C, not C."""
    if terms.shape[0] <= _PAIRWISE_FROM:
        # Row after row, as numpy sums down columns of two or more queries; its sum down a
        # single column (one query) is pairwise, which gave a query other bits alone.
        sums = terms[0].copy()
        for row in terms[1:]:
            sums += row
        return sums
    rows = terms
    while rows.shape[0] > 1:
        half = rows.shape[0] // 2
        paired = rows[:half] + rows[half : 2 * half]
        if rows.shape[0] % 2:
            paired[-1] += rows[-1]
        rows = paired
    return rows[0].copy()


def rdp_gnmax_data_independent(sigma: float, orders: NDArray[np.float64]) -> NDArray[np.float64]:
    """Data-independent RDP of one GNMax answer: lambda / sigma^2 (Prop. 8).

    Shapes: orders (K,) -> (K,).
    """
    orders = np.asarray(orders, dtype=np.float64)
    _check_sigma_orders(sigma, orders)
    # sigma^2 below the float range: lambda / sigma^2 is +inf, an unbounded cost, not an error.
    with np.errstate(divide="ignore", over="ignore"):
        return orders / _variance(sigma)


def rdp_gnmax(
    logq: NDArray[np.float64], sigma: float, orders: NDArray[np.float64]
) -> NDArray[np.float64]:
    """Data-dependent RDP of one GNMax answer per query and order.

    Theorem 6 with mu2 = sigma sqrt(-log q), mu1 = mu2 + 1 (Prop. 10), applied
    where its conditions hold and never above the data-independent lambda/sigma^2
    (Prop. 8). q = 0 (log q = -inf) means a fixed outcome: RDP 0.

    Shapes: logq (Q,), orders (K,) -> (Q, K).
    """
    logq = np.asarray(logq, dtype=np.float64)
    orders = np.asarray(orders, dtype=np.float64)
    _check_sigma_orders(sigma, orders)
    if np.any(~(logq <= 0)):
        raise ValueError("logq must be <= 0")
    variance = _variance(sigma)
    out = np.empty((logq.size, orders.size))
    out[:] = rdp_gnmax_data_independent(sigma, orders)
    fixed = np.isneginf(logq)
    out[fixed] = 0.0

    # With sigma^2 out of the float range these are 0, inf or NaN; each fails `ok` below,
    # as does a fixed outcome.
    with np.errstate(divide="ignore", over="ignore", invalid="ignore"):
        mu2 = np.sqrt(variance * -logq)
        mu1 = mu2 + 1
        rdp2 = mu2 / variance
        rdp1 = mu1 / variance
        # Theorem 6 conditions: q below the point where the bound stops increasing
        # in q, and -log q > eps2 so that A is positive.
        # Same expression as the reference so that the test never flips at the edge.
        q_limit = (mu2 - 1) * rdp2 - mu2 * (np.log(1 + 1 / (mu1 - 1)) + np.log(1 + 1 / (mu2 - 1)))
    ok = (mu2 > 1) & (logq <= q_limit) & (-logq > rdp2) & ~fixed
    rows = np.flatnonzero(ok)
    if rows.size == 0:
        return out
    pick = slice(None) if rows.size == logq.size else rows  # every row: views, not copies
    lq, m1, m2, e1, e2 = logq[pick], mu1[pick], mu2[pick], rdp1[pick], rdp2[pick]
    log1q = log1mexp(lq)
    a_inner = log1q - log1mexp((lq + e2) * (1 - 1 / m2))
    b_inner = e1 - lq / (m1 - 1)
    # Prop. 10: Theorem 6 applies at the orders below mu1 only, so each row is evaluated
    # on the orders it can lower, in groups of rows that need about as many.
    by_order = np.argsort(orders, kind="stable")
    needed = np.searchsorted(orders[by_order], m1, side="left")
    for members in _groups(needed):
        width = int(needed[members].max())
        if width == 0:
            continue
        columns = by_order[:width]
        parts = _Theorem6Rows(lq[members], log1q[members], a_inner[members], b_inner[members])
        applies, candidate = parts.bound(orders[columns], m1[members], e1[members])
        whole = isinstance(pick, slice) and isinstance(members, slice) and width == orders.size
        index = (slice(None), slice(None)) if whole else np.ix_(rows[members], columns)
        block = out[index]
        out[index] = np.where(applies, np.minimum(block, candidate), block)
    return out


def _groups(needed: NDArray[np.intp], count: int = 8) -> list[NDArray[np.intp] | slice]:
    """Rows split into up to ``count`` groups of about equal size, by how many orders each
    needs: a group is evaluated on the most its rows need. One group where few orders are
    asked (a release's one order): the sort would cost more than it saves."""
    if needed.size and needed.max() <= _FEW_ORDERS:
        return [slice(None)]
    ranked = np.argsort(needed, kind="stable")
    return [part for part in np.array_split(ranked, min(count, ranked.size)) if part.size]


_FEW_ORDERS = 16


@dataclass(frozen=True)
class _Theorem6Rows:
    """Theorem 6's bound for rows of (log q, log(1-q), log A, log B) at given orders."""

    lq: NDArray[np.float64]
    log1q: NDArray[np.float64]
    a_inner: NDArray[np.float64]
    b_inner: NDArray[np.float64]

    def bound(
        self, orders: NDArray[np.float64], m1: NDArray[np.float64], e1: NDArray[np.float64]
    ) -> tuple[NDArray[np.bool_], NDArray[np.float64]]:
        """(where the bound applies, the bound) per row and order."""
        lq, log1q = self.lq, self.log1q
        om1 = orders - 1
        # Theorem 6: (1/(l-1)) log((1-q) A^(l-1) + q B^(l-1)), summed in log space.
        first = (log1q + om1[:, None] * self.a_inner).T
        second = (lq + om1[:, None] * self.b_inner).T
        log_s = np.logaddexp(first, second)
        candidate = log_s / om1
        # The sum is >= 1 (log_s >= 0) in exact arithmetic. Where the candidate is not above
        # a bound of its rounding error (a huge sigma: -5.6e-17 for a true cost near 1e-34),
        # it carries no digit of the bound, and Prop. 8's stays. The error of each term is
        # that of its parts, weighted by the term's share of the sum (at most 1): the bound
        # per row at the smallest order settles most entries without the weights.
        eps = np.finfo(np.float64).eps
        if candidate.size and self._settled(candidate, om1.min(), m1, e1):
            return m1[:, None] > orders, candidate
        error_a = eps * (np.abs(log1q) + np.abs(log1q - self.a_inner))
        error_b = eps * (np.abs(e1) + np.abs(lq / (m1 - 1)))
        row_bound = 8 * (eps * (np.abs(log1q) + np.abs(lq)) / om1.min() + error_a + error_b)
        above = candidate >= 2 * (row_bound[:, None] + 8 * eps * np.abs(candidate))
        unsettled = np.flatnonzero(~above.all(axis=1))
        if unsettled.size:
            part = (slice(None),) if unsettled.size == lq.size else (unsettled,)
            with np.errstate(invalid="ignore"):  # -inf - -inf where both terms vanish
                error = np.exp(first[part] - log_s[part]) * (
                    eps * np.abs(log1q[part])[:, None] + om1 * error_a[part][:, None]
                )
                error += np.exp(second[part] - log_s[part]) * (
                    eps * np.abs(lq[part])[:, None] + om1 * error_b[part][:, None]
                )
            rounding = 8 * (np.nan_to_num(error) + eps * np.abs(log_s[part])) / om1
            above[part] = candidate[part] >= rounding
        return (m1[:, None] > orders) & above, candidate

    def _settled(
        self,
        candidate: NDArray[np.float64],
        smallest: float,
        m1: NDArray[np.float64],
        e1: NDArray[np.float64],
    ) -> bool:
        """The rows' bound of the rounding error at once, from its parts' largest values:
        True when every candidate is above twice it (then every row's test passes)."""
        eps = np.finfo(np.float64).eps
        largest_log1q = -self.log1q.min()  # log(1 - q) <= 0, log q <= 0
        largest_lq = -self.lq.min()
        largest_a = largest_log1q + max(self.a_inner.max(), -self.a_inner.min())
        largest_b = e1.max() + largest_lq / (m1 - 1).min()
        largest_candidate = max(candidate.max(), -candidate.min())
        with np.errstate(invalid="ignore", over="ignore"):  # inf or NaN parts: not settled
            parts = (largest_log1q + largest_lq) / smallest + largest_a + largest_b
            return bool(candidate.min() >= 16 * eps * (parts + largest_candidate))

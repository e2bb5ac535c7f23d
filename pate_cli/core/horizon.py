"""The distances a smooth-sensitivity release walks: past them nothing can change its figures.

Papernot et al. 2018, Definition 12 / Theorem 24: the beta-smooth sensitivity is
SS(beta) = max over d = 0 .. M-1 of e^(-beta d) LS(d), LS(d) the total's local-sensitivity
bound at distance d. A release reads SS at betas of one known set (the reference's grid, or
the one beta given), all at least beta_min > 0. Let W >= LS(d) at every distance (each part
of the total gives its own: the largest value its bound can take, times the weights).

Early stop. Let d' be a walked distance with LS(d') > 0, S(d') = d' + ln(W / LS(d')) /
beta_min, and d a distance not walked (so d > d') with d > S(d'). For every beta >= beta_min,
beta (d - d') > ln(W / LS(d')): if the log is >= 0, d - d' > S(d') - d' >= 0 and beta >=
beta_min; if it is < 0, the left side is positive. So

    e^(-beta d) LS(d) <= e^(-beta d) W < e^(-beta d') LS(d') <= SS(beta).

With S the least S(d') over the distances walked, no distance past S sets SS(beta) for any
beta the release reads, and neither does W put there: SS, and so beta, sigma_ss, the GNSS
cost and every figure, are those of the full walk. The walk goes through distances in ranges
(``distance_ranges``, fixed by M) and stops after the first range whose end is past S (S
only falls as the walk goes on). The release reads SS from the walked totals followed by W
at the first distance past the walk (``Horizon.reading``): e^(-beta d) W is largest there of
the distances past the walk, so that is SS of the total filled with W at every distance, an
upper bound of the truth whatever the rounding, and by the inequality above the full walk's.
A total of 0 everywhere (W = 0) stops after the first range.

Floating point. W and LS(d') are sums of rounded non-negative terms, each within a relative
n eps of its exact value (n terms: 1e-7 for n = 1e9), and the release's e^(-beta d) is within
a relative (beta d + 1) eps (below 1e-7 for M up to 1e9). S adds ``_MARGIN`` (1e-6) to
ln(W / LS(d')), so the strict inequality above holds between the rounded values too, down to
values of a few hundred ulps of the smallest normal double: the largest value the release
takes is the full walk's, the same double (and below that it can only be W's, larger). The
walked distances' totals are the full walk's bit for bit: both go through the same ranges,
each range summing the same terms in the same order.

Blocks of queries. The release sums the total block by block, each walked when read. Block k
stops with W_k the blocks walked so far plus its own plus, for the queries still to come,
``per_query`` each (a bound of one query's local sensitivity at any distance, weight at most
1, whatever its votes, in tables every block shares), so W_k >= W, the blocks' summed W; and
with LS_k(d') the earlier blocks' totals where they walked plus its own, never above the
final LS(d'). So S_k(d') >= S(d') at every d' block k walked. Let block j walk the fewest
distances, n = ``Horizon.walked``: it stopped at n > S_j(d') >= S(d') for a d' < n, which
every block walked, so every distance d >= n is past S(d') and the final total, kept on
0 .. n-1, gives SS. No array of M entries is made.
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from dataclasses import dataclass, replace

import numpy as np
from numpy.typing import NDArray

# ln(W / LS(d')) is raised by this much: W, LS and the release's e^(-beta d) are each within
# a relative 1e-7 of their exact values (module docstring, "Floating point").
_MARGIN = 1e-6
# The first range of distances, and every range at least (M / 8 if smaller, at least 1):
# each next range is a third of the distances already walked, so the walk overshoots S by
# at most a third, and M = 1e7 takes about 50 ranges.
_FIRST_RANGE = 32


def distance_ranges(num_teachers: int) -> Iterator[tuple[int, int]]:
    """The ranges [start, stop) of distances a walk goes through, in order, covering 0 .. M-1.
    Fixed by M alone, so that a walk that stops and one that does not sum the same terms."""
    least = max(1, min(_FIRST_RANGE, num_teachers // 8))
    start = 0
    while start < num_teachers:
        stop = min(num_teachers, start + max(least, start // 3))
        yield start, stop
        start = stop


def stop_distance(totals: NDArray[np.float64], bound: float, beta: float) -> float:
    """S: the least d' + (ln(W / LS(d')) + margin) / beta over the distances d' of
    ``totals`` (LS there, each at most the final one) with LS(d') > 0; no distance past S
    can set the smooth sensitivity at a beta of at least ``beta`` (module docstring). -inf
    when W is 0 (every total is 0), +inf when no distance gives a bound."""
    if not beta > 0 or math.isnan(bound):
        return math.inf
    if bound == 0:
        return -math.inf
    distance = np.flatnonzero(totals > 0)
    if distance.size == 0:
        return math.inf
    with np.errstate(invalid="ignore", over="ignore", divide="ignore"):
        # The stop of Definition 12's max (module docstring): d' + ln(W / LS(d')) / beta_min.
        reach = distance + (math.log(bound) - np.log(totals[distance]) + _MARGIN) / beta
    reach = np.where(np.isnan(reach), math.inf, reach)
    return float(reach.min())


@dataclass(frozen=True)
class Horizon:
    """How far a release's walk goes: the smallest beta it reads, and what the blocks of
    queries walked so far have given (module docstring, "Blocks of queries").

    Made by ``Horizon.start`` before the first block; each block's walk reads it
    (``reach``) and returns it ``after`` itself, with its totals summed (``total``)."""

    beta: float  # beta_min: every beta the release reads is at least this
    num_teachers: int  # M
    queries_left: int  # the queries of the blocks not walked yet
    walked: int  # distances 0 .. walked-1 exact in every block walked (M before the first)
    partial: NDArray[np.float64] | None  # the walked blocks' totals there, summed
    bound: float  # the walked blocks' W, summed

    @classmethod
    def start(cls, beta: float, num_teachers: int, num_queries: int) -> Horizon:
        """Before the first block: ``num_queries`` queries to walk, betas read >= ``beta``."""
        return cls(float(beta), int(num_teachers), int(num_queries), int(num_teachers), None, 0.0)

    def reach(
        self,
        totals: NDArray[np.float64],
        start: int,
        bound: float,
        queries: int,
        per_query: float,
    ) -> float:
        """S over the distances start .. start + n - 1 of a block whose totals there are
        ``totals`` (n of them), of W ``bound`` and ``queries`` queries (``per_query``: a
        bound of one query still to come, at any distance). The block can stop at the end of
        a range past the least S of its ranges so far."""
        lower = np.array(totals, dtype=np.float64)
        if self.partial is not None:
            shared = self.partial[start : start + lower.size]
            lower[: shared.size] += shared
        left = self.queries_left - queries
        whole = self.bound + bound + (left * per_query if left > 0 else 0.0)
        return start + stop_distance(lower, whole, self.beta)

    def after(self, totals: NDArray[np.float64], bound: float, queries: int) -> Horizon:
        """The horizon once a block is walked: ``totals`` its exact totals at the distances
        it walked, ``bound`` its W, ``queries`` its queries."""
        walked = min(self.walked, int(totals.size))
        block = np.asarray(totals[:walked], dtype=np.float64)
        partial = block.copy() if self.partial is None else self.partial[:walked] + block
        return replace(
            self,
            queries_left=self.queries_left - queries,
            walked=walked,
            partial=partial,
            bound=self.bound + bound,
        )

    @property
    def total(self) -> NDArray[np.float64]:
        """The blocks' summed total at the distances every block walked (0 .. walked-1):
        the full walk's there; past them the total is at most ``bound`` and cannot set the
        smooth sensitivity at the betas read."""
        return np.zeros(self.walked) if self.partial is None else self.partial

    @property
    def reading(self) -> NDArray[np.float64]:
        """What a release reads its smooth sensitivity from: ``total``, then W at the first
        distance past the walk (when the walk stopped). e^(-beta d) W is largest there of the
        distances past the walk, so the smooth sensitivity of this array is that of the total
        filled with W at every distance: an upper bound of the truth whatever the rounding,
        and the full walk's wherever the early stop's inequality holds in floats (module
        docstring)."""
        if self.walked >= self.num_teachers:
            return self.total
        return np.append(self.total, self.bound)

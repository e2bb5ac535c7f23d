"""The kinds of query a privacy-loss-distribution run composes, when its cells are too many.

``pate_cli.core.pld.cells`` groups the queries by their cells of log a and log b (width
0.01, rounded up) and by their threshold margin. Where a query's q depends on one top count
alone (a sparse vote over a large vocabulary: its zero-vote classes' term outweighs the
rest), a run has a few hundred cells. Over a handful of candidates per query, q depends on
every count of the query (the zero-vote term is small), and a run of 50,000 queries has
thousands of cells, each costing a profile, a hull and a transform on the whole loss grid,
and its share of the FFT's rounding charge.

:func:`within_budget` merges cells of the same margin until the run's work (cells times
grid points) is within ``MOST_WORK``: each merged cell takes the larger log a and the
larger log b of the two, so its pair bounds every member's (the q-bound pair grows with
both, and a threshold's margin is kept exact). Never below the truth: only tightness is
traded. The merges are chosen cheapest first among cells adjacent in log a, the cost of a
merge being how much it raises the queries' mean privacy loss, read from the Gaussian
trade-off: the outcomes other than the plurality's, of probability a, lose on average
u(a) / a with u(a) = a mu^2 / 2 + mu phi(Phi^-1(a)) (the integral of mu^2 / 2 - mu
Phi^-1(p) over p <= a), constant past a = Phi(mu / 2), where the pair is mu-GDP's own;
a threshold step weighs it by Pr[answered]. A tiny a is raised almost for free, an a near 1
costs little more than it is, and the cells queries crowd into are kept.
"""

from __future__ import annotations

import heapq
import math

import numpy as np
from numpy.typing import NDArray
from scipy.special import log_ndtr, ndtri_exp

FloatArray = NDArray[np.float64]
IntArray = NDArray[np.int64]

MOST_WORK = 1 << 20
"""The most cells times grid points a run composes unmerged: some 450 cells of a grid of
2,300 points. On 50,000 next-token queries over 16 candidates with a threshold (5,400
cells), the run with --pld then takes 1.95 times the CPU of the run without it, where 680
cells took 2.5 times and 900 cells 3.1 times; its epsilon 0.12% above 900 cells' (58.544
against 58.472; benchmarks/bench_pld.py)."""
# Fewer than this many cells are never merged, whatever the grid.
_FEWEST = 256


def rest_loss(log_a: FloatArray, mu: float) -> FloatArray:
    """u(a) = a mu^2 / 2 + mu phi(Phi^-1(a)), the mean privacy loss that the outcomes of
    probability a carry under mu-Gaussian DP's trade-off, held at its value at
    Phi(mu / 2) above it (module docstring). Non-decreasing in a. Shapes: (G,) -> (G,)."""
    top = float(log_ndtr(mu / 2))
    held = np.minimum(np.asarray(log_a, dtype=np.float64), top)
    z = ndtri_exp(held)
    density: FloatArray = np.exp(-z * z / 2 - 0.5 * math.log(2 * math.pi))
    found: FloatArray = np.exp(held) * (mu * mu / 2) + mu * density
    return found


def within_budget(
    log_a: FloatArray,
    log_b: FloatArray,
    counts: IntArray,
    exact: FloatArray,
    mu: float,
    points: int,
    weight: FloatArray | None = None,
) -> tuple[FloatArray, FloatArray, IntArray, FloatArray]:
    """The cells (log a, log b, counts, exact value: ``pate_cli.core.pld.cells``' output)
    merged until their number times ``points`` (the loss grid's) is within ``MOST_WORK``,
    at least ``_FEWEST`` kept: as they are where they already are. Cells merge only with
    an equal ``exact`` (a threshold's margin), into the larger log a and log b of the two;
    ``weight``: each cell's weight in the merge cost (Pr[answered]; None: 1). Shapes:
    (G,) each -> (G',) each."""
    found = merged(log_a, log_b, counts, exact, mu, points, weight)
    return found[0], found[1], found[2], found[3]


def merged(
    log_a: FloatArray,
    log_b: FloatArray,
    counts: IntArray,
    exact: FloatArray,
    mu: float,
    points: int,
    weight: FloatArray | None = None,
) -> tuple[FloatArray, FloatArray, IntArray, FloatArray, IntArray]:
    """:func:`within_budget`'s cells, and which of them each given cell went into.
    Shapes: (G,) each -> (G',) each, (G,)."""
    most = max(MOST_WORK // max(points, 1), _FEWEST)
    if counts.size <= most:
        return log_a, log_b, counts, exact, np.arange(counts.size)
    order = np.lexsort((log_b, log_a, exact))
    cells = _Cells(log_a, log_b, counts, exact, mu, weight)
    cells.merge(order, most)
    keep = cells.kept()
    of_cell = np.cumsum(keep)[cells.owners()] - 1
    return cells.a[keep], cells.b[keep], cells.n[keep].astype(np.int64), exact[keep], of_cell


class _Cells:
    """Cells being merged: each its (log a, log b), its count, u of both, and the sum of
    its members' counts times u of both (what they cost before any merge)."""

    def __init__(
        self,
        log_a: FloatArray,
        log_b: FloatArray,
        counts: IntArray,
        exact: FloatArray,
        mu: float,
        weight: FloatArray | None,
    ) -> None:
        self.a, self.b = log_a.astype(np.float64), log_b.astype(np.float64)
        self.n = counts.astype(np.float64)
        self.exact = exact
        self.ua, self.ub = rest_loss(log_a, mu).tolist(), rest_loss(log_b, mu).tolist()
        self.weight = [1.0] * counts.size if weight is None else weight.tolist()
        self.count = self.n.tolist()
        self.after: dict[int, int] = {}
        self.before: dict[int, int] = {}
        self.alive = [True] * counts.size
        self.version = [0] * counts.size
        self.into = list(range(counts.size))  # the cell each went into, when it merged

    def cost(self, x: int, y: int) -> float:
        """What merging x and y adds to the members' weighted mean loss: (n_x + n_y) u of
        the larger values less each cell's own n u (u is non-decreasing: the larger value's
        u is the larger u)."""
        total = self.count[x] + self.count[y]
        merged = max(self.ua[x], self.ua[y]) + max(self.ub[x], self.ub[y])
        own = self.count[x] * (self.ua[x] + self.ub[x]) + self.count[y] * (self.ua[y] + self.ub[y])
        return max(self.weight[x], self.weight[y]) * (total * merged - own)

    def merge(self, order: NDArray[np.intp], most: int) -> None:
        """Merge the cheapest pair of neighbours (in ``order``, of one exact value) until at
        most ``most`` cells are left or no neighbours are."""
        heap: list[tuple[float, int, int, int, int]] = []
        for x, y in zip(order[:-1].tolist(), order[1:].tolist(), strict=True):
            if self.exact[x] == self.exact[y]:
                self.after[x], self.before[y] = y, x
                heap.append((self.cost(x, y), x, y, 0, 0))
        heapq.heapify(heap)
        left = len(self.alive)
        while left > most and heap:
            _, x, y, seen_x, seen_y = heapq.heappop(heap)
            fresh = self.version[x] == seen_x and self.version[y] == seen_y
            if not (fresh and self.alive[x] and self.alive[y]):
                continue  # a stale pair: one of them has merged since
            self._join(x, y)
            left -= 1
            for first, second in ((self.before.get(x), x), (x, self.after.get(x))):
                if first is not None and second is not None:
                    pair = (first, second, self.version[first], self.version[second])
                    heapq.heappush(heap, (self.cost(first, second), *pair))

    def _join(self, x: int, y: int) -> None:
        """y into x (its right neighbour): the larger values, the counts and u summed."""
        self.a[x], self.b[x] = max(self.a[x], self.a[y]), max(self.b[x], self.b[y])
        self.ua[x], self.ub[x] = max(self.ua[x], self.ua[y]), max(self.ub[x], self.ub[y])
        self.count[x] += self.count[y]
        self.n[x] = self.count[x]
        self.weight[x] = max(self.weight[x], self.weight[y])
        self.alive[y] = False
        self.into[y] = x
        self.version[x] += 1
        following = self.after.pop(y, None)
        if following is None:
            self.after.pop(x, None)
        else:
            self.after[x], self.before[following] = following, x

    def kept(self) -> NDArray[np.bool_]:
        return np.array(self.alive, dtype=bool)

    def owners(self) -> IntArray:
        """The kept cell each cell is now part of (following its merges)."""
        owner = np.array(self.into, dtype=np.int64)
        while True:  # at most as many rounds as the longest chain of merges, halved each time
            further = owner[owner]
            if np.array_equal(further, owner):
                return owner
            owner = further

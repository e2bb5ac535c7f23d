"""The neighbouring histograms an audit runs on.

Without votes, the pair is searched: histograms whose votes lie on two classes, (x, y, 0,
..., 0), and their neighbour in which one teacher moves its vote from the first class to the
second, (x - 1, y + 1, 0, ..., 0). The noisy max is symmetric in the classes, so this covers
every pair of two-class histograms; a threshold step reads the top count, which such a move
lowers by one. The search scores a pair by the bound its best test gives at the expected
counts (``pate_cli.core.auditing``): first on a grid of x and y (every value to 8, then two
a doubling, up to 2^14 where the noise needs it), then, from the three best, by a pattern
search whose steps halve down to one vote (the law evaluated exactly, so each step is a fair
comparison). On a vote file, the pair is the query's histogram and its neighbour whose move
scores best, among moves between its eight largest classes and its smallest.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray

from pate_cli.audits.laws import Law

FloatArray = NDArray[np.float64]
Score = Callable[[FloatArray, FloatArray], float]
"""(law on A (K,), law on B (K,)) -> the bound at the expected counts."""

_SMALL = 8
_LARGEST = 1 << 14
_STARTS = 3
_FIRST_REACH = 64
_MOVES = ((1, 0), (-1, 0), (0, 1), (0, -1), (1, 1), (-1, -1), (1, -1), (-1, 1))


@dataclass(frozen=True)
class Pair:
    """Two neighbouring histograms (C,) each, their laws (K,) each, and the pair's score.
    ``move``: the classes (from, to) of the teacher that moves."""

    a: FloatArray
    b: FloatArray
    law_a: FloatArray
    law_b: FloatArray
    score: float
    move: tuple[int, int]


def grid(per_doubling: int) -> NDArray[np.int64]:
    """Vote counts to search: 0 to 8, then ``per_doubling`` values a doubling to 2^14."""
    steps = np.arange(1, per_doubling * int(np.log2(_LARGEST / _SMALL)) + 1)
    grown = np.round(_SMALL * 2.0 ** (steps / per_doubling)).astype(np.int64)
    return np.unique(np.concatenate([np.arange(_SMALL + 1), grown]))


def _two_class(points: NDArray[np.int64], classes: int) -> tuple[FloatArray, FloatArray]:
    """Histograms (x, y, 0, ...) and their neighbours (x - 1, y + 1, 0, ...). Shapes:
    points (n, 2) -> (n, C), (n, C)."""
    a = np.zeros((len(points), classes))
    a[:, :2] = points
    b = a.copy()
    b[:, 0] -= 1
    b[:, 1] += 1
    return a, b


def _scored(law: Law, score: Score, points: NDArray[np.int64], classes: int) -> list[Pair]:
    a, b = _two_class(points, classes)
    laws = law(np.concatenate([a, b]))
    law_a, law_b = laws[: len(a)], laws[len(a) :]
    return [
        Pair(a[i], b[i], law_a[i], law_b[i], score(law_a[i], law_b[i]), (0, 1))
        for i in range(len(a))
    ]


def searched(law: Law, score: Score, classes: int, *, refine: bool, per_doubling: int) -> Pair:
    """The best-scoring two-class pair (module docstring); ``refine``: the pattern search
    after the grid, for a stated law (an estimated one is too noisy to climb). The grid
    grows a doubling at a time, from 64 votes, while the best pair so far scores nothing or
    (with ``refine``) lies in its upper half: a mechanism of little noise is not integrated at
    counts its noise never reaches, and an estimated law's noise does not grow the grid."""
    values = grid(per_doubling)
    found: list[Pair] = []
    reach, done = _FIRST_REACH, 0
    while True:
        within = values[values <= reach]
        x, y = np.meshgrid(within[within >= 1], within, indexing="ij")
        points = np.column_stack([x.ravel(), y.ravel()])
        points = points[points.max(axis=1) > done]
        found += _scored(law, score, points, classes)
        best = max(found, key=lambda pair: pair.score)
        inside = not refine or 2 * max(best.a[:2]) <= reach
        if reach >= _LARGEST or (best.score > 0 and inside):
            break
        done, reach = reach, 2 * reach
    found.sort(key=lambda pair: -pair.score)
    if not refine:
        return found[0]
    climbed = [_climb(law, score, classes, start, values) for start in found[:_STARTS]]
    return max(climbed, key=lambda pair: pair.score)


def _climb(law: Law, score: Score, classes: int, start: Pair, values: NDArray[np.int64]) -> Pair:
    """A pattern search from ``start``: the best of its eight neighbours at the step, which
    halves when none is better, from the grid's spacing there to one vote."""
    best = start
    x, y = int(start.a[0]), int(start.a[1])
    above = values[values > max(x, y)]
    step = int(max(1, (above[0] - max(x, y)) if above.size else max(x, y) // 2))
    while step >= 1:
        moves = np.array(_MOVES) * step + [x, y]
        moves = moves[(moves[:, 0] >= 1) & (moves[:, 1] >= 0)]
        tried = _scored(law, score, moves, classes)
        better = max(tried, key=lambda pair: pair.score, default=best)
        if better.score > best.score:
            best, x, y = better, int(better.a[0]), int(better.a[1])
        else:
            step //= 2
    return best


def of_query(law: Law, score: Score, row: FloatArray) -> Pair:
    """The query's histogram ``row`` (C,) and its best-scoring neighbour (module docstring).

    The row must hold a vote (``pate_cli.jobs.audit`` checks it): a neighbour moves one.
    """
    order = np.argsort(-row, kind="stable")
    sources = [int(c) for c in order[:_SMALL] if row[c] >= 1]
    targets = sorted({*(int(c) for c in order[:_SMALL]), int(order[-1])})
    moves = [(s, t) for s in sources for t in targets if s != t]
    others = np.repeat(row[None, :], len(moves), axis=0)
    for i, (s, t) in enumerate(moves):
        others[i, s] -= 1
        others[i, t] += 1
    laws = law(np.concatenate([row[None, :], others]))
    pairs = [
        Pair(row, others[i], laws[0], laws[i + 1], score(laws[0], laws[i + 1]), moves[i])
        for i in range(len(moves))
    ]
    return max(pairs, key=lambda pair: pair.score)

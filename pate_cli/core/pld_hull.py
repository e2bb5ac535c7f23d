"""Connect the dots: a privacy-loss distribution whose profile is the lower convex hull of
a query's bounds (``pate_cli.core.pld``'s per-query step).

A profile bounded on the grid eps_i = i h is convex in gamma = e^eps, so the chords of the
lower convex hull of the bounds lie above it, and the hull is exactly the profile of atoms
at its vertices (Doroshenko, Ghazi, Kamath, Kumar and Manurangsi 2022, "Connect the Dots",
Sec. 4): that distribution dominates the query's pair.
"""

from __future__ import annotations

import numpy as np
from numpy.typing import NDArray

from pate_cli.core.pld_compose import Pessimistic

FloatArray = NDArray[np.float64]
IntArray = NDArray[np.int64]

_U = 2.0**-53  # the unit roundoff of a double
# Relative margin of a hull over its bounds, for the roundings of its atoms.
_HULL_MARGIN = 1e-10


def connect_the_dots(first: int, profiles: FloatArray, grid: float) -> Pessimistic:
    """Each row's privacy-loss distribution whose profile is the lower convex hull (in
    gamma) of the row's bounds at losses (first + i) grid and of (gamma = 0, delta = 1).

    A convex profile at or below the bounds at the grid points is at or below that hull
    everywhere (the hull is the greatest convex function below the points), and the hull is
    exactly the profile of atoms at its vertices, each with P-mass x_k (slope after - slope
    before) (the kink there; Connect the Dots, Sec. 4). Beyond the last point the profile
    stays at its last value: the mass at +infinity. Shapes: profiles (G, I).
    """
    rows, size = profiles.shape
    x = np.concatenate(([0.0], np.exp((first + np.arange(size)) * grid)))
    y = np.concatenate((np.ones((rows, 1)), np.minimum(profiles, 1.0)), axis=1)
    # Non-increasing in gamma, as every profile is: raising a bound is safe.
    y[:, 1:] = np.maximum.accumulate(y[:, :0:-1], axis=1)[:, ::-1]
    bounds = y[:, 1:].copy()
    # The hull of bounds raised by a margin for the arithmetic below (slopes, atoms, the
    # check's sums), which the check against the bounds themselves then allows for.
    y[:, 1:] = np.minimum(y[:, 1:] * (1 + _HULL_MARGIN), 1.0)
    keep = _lower_hull(x, y)
    left, right = _neighbours(keep)
    columns = np.arange(size + 1)
    with np.errstate(invalid="ignore", divide="ignore"):
        before = (y - np.take_along_axis(y, left, 1)) / (x - x[left])
        after = (np.take_along_axis(y, right, 1) - y) / (x[right] - x)
    after = np.where(right == columns, 0.0, after)  # after the last vertex: flat
    atoms = np.where(keep & (columns > 0), np.maximum(x * (after - before), 0.0), 0.0)[:, 1:]
    last = size - np.argmax(keep[:, ::-1], axis=1)  # the last vertex (the last point)
    infinity = y[np.arange(rows), last].copy()
    return _settled(Pessimistic(first, atoms, infinity), keep[:, 1:], x[1:], bounds)


def _neighbours(keep: NDArray[np.bool_]) -> tuple[IntArray, IntArray]:
    """For every column, the nearest kept column before it and after it (itself at the
    ends). Shapes: (G, I) -> (G, I), (G, I)."""
    columns = np.arange(keep.shape[1])
    marked = np.where(keep, columns, -1)
    left = np.maximum.accumulate(np.concatenate((marked[:, :1], marked[:, :-1]), axis=1), axis=1)
    left = np.where(left < 0, columns, left)
    marked = np.where(keep, columns, keep.shape[1])
    shifted = np.concatenate((marked[:, 1:], marked[:, -1:]), axis=1)
    right = np.minimum.accumulate(shifted[:, ::-1], axis=1)[:, ::-1]
    right = np.where(right >= keep.shape[1], columns, right)
    return left.astype(np.int64), right.astype(np.int64)


def _lower_hull(x: FloatArray, y: FloatArray) -> NDArray[np.bool_]:
    """Per row, which points sorted by x are vertices of the lower convex hull (both ends
    kept), to within ``_HULL_TOLERANCE`` of each chord. Dropping a point only raises the
    hull of the rest, so every pass may drop more than it must (never below the truth: the
    tolerance trades tightness alone, far less than the hull's margin over its bounds,
    ``_HULL_MARGIN``). First every point above the chord of the points 2^k steps away on
    either side (k = 0, 1, ...) less that tolerance is dropped (a point above a chord of two
    others is no vertex); then a few rounds drop, all at once, every point above the chord
    of its nearest kept neighbours less the tolerance; rows still changing after them finish
    by the monotone chain over their kept points, all rows in step. Shapes: (I,), (G, I) ->
    (G, I)."""
    keep = _far_chords(x, y)
    inner = np.zeros(y.shape[1], dtype=bool)
    inner[1:-1] = True
    active = np.arange(y.shape[0])
    for _ in range(_HULL_ROUNDS):
        if not active.size:
            return keep
        kept, rows = keep[active], y[active]
        left, right = _neighbours(kept)
        y_left, y_right = np.take_along_axis(rows, left, 1), np.take_along_axis(rows, right, 1)
        with np.errstate(invalid="ignore", divide="ignore"):
            chord = y_left + (y_right - y_left) * ((x - x[left]) / (x[right] - x[left]))
        above = kept & inner & (rows > chord - _HULL_TOLERANCE * np.abs(chord))
        changed = above.any(axis=1)
        keep[active] = kept & ~above
        active = active[changed]
    if active.size:
        keep[active] = _chains(x, y[active], keep[active])
    return keep


_HULL_ROUNDS = 2
# Relative slack of the chord tests: the passes' few dozen of it stay far below _HULL_MARGIN.
_HULL_TOLERANCE = 1e-13


def _far_chords(x: FloatArray, y: FloatArray) -> NDArray[np.bool_]:
    """Which points are below the chord of the points d = 1, 2, 4, ... steps away on either
    side, less ``_HULL_TOLERANCE`` (the ends always). Shapes: (I,), (G, I) -> (G, I)."""
    keep = np.ones(y.shape, dtype=bool)
    size = y.shape[1]
    step = 1
    while 2 * step < size:
        middle = np.arange(step, size - step)
        low, high = middle - step, middle + step
        share = (x[middle] - x[low]) / (x[high] - x[low])
        chord = y[:, low] + (y[:, high] - y[:, low]) * share
        keep[:, middle] &= ~(y[:, middle] > chord - _HULL_TOLERANCE * np.abs(chord))
        step *= 2
    return keep


def _chains(x: FloatArray, y: FloatArray, keep: NDArray[np.bool_]) -> NDArray[np.bool_]:
    """Per row, the lower hull's vertices among its kept points by Andrew's monotone chain
    (1979), every row a step at a time: a point is pushed after popping each top that is not
    below the chord from the one beneath it to the point. Shapes: (I,), (R, I) -> (R, I)."""
    rows = keep.shape[0]
    counts = keep.sum(axis=1)
    width = int(counts.max()) if rows else 0
    order = np.argsort(~keep, axis=1, kind="stable")[:, :width]  # kept columns, in order
    stack = np.zeros((rows, width), dtype=np.int64)
    size = np.zeros(rows, dtype=np.int64)
    every = np.arange(rows)
    for j in range(width):
        these = every[counts > j]
        column = order[these, j]
        x_new, y_new = x[column], y[these, column]
        popping = np.arange(these.size)
        while popping.size:
            popping = popping[size[these[popping]] >= 2]
            at = these[popping]
            below, top = stack[at, size[at] - 2], stack[at, size[at] - 1]
            y_below, y_top = y[at, below], y[at, top]
            cross = (x[top] - x[below]) * (y_new[popping] - y_below) - (y_top - y_below) * (
                x_new[popping] - x[below]
            )
            popping = popping[cross <= 0]
            size[these[popping]] -= 1
        stack[these, size[these]] = column
        size[these] += 1
    found = np.zeros_like(keep)
    held = np.arange(width)[None, :] < size[:, None]
    found[np.nonzero(held)[0], stack[held]] = True
    return found


def _profile_at(pmf: Pessimistic, x: FloatArray) -> FloatArray:
    """delta(gamma) = infinity + sum_j w_j (1 - gamma / x_j)_+ at gamma = x (the atoms'
    positions), from two running sums from the top. Shapes: -> (G, I)."""
    masses = pmf.masses
    above = np.cumsum(masses[:, ::-1], axis=1)[:, ::-1]
    weighted = np.cumsum((masses / x)[:, ::-1], axis=1)[:, ::-1]
    return pmf.infinity[:, None] + (above - masses) - x * (weighted - masses / x)


def _settled(
    pmf: Pessimistic, vertices: NDArray[np.bool_], x: FloatArray, bounds: FloatArray
) -> Pessimistic:
    """The distributions with P-mass 1 exactly (each largest atom takes what the sums
    leave) and profiles at or above ``bounds`` at their vertices: a shortfall the roundings
    left is moved from the lowest atoms to +infinity (which raises delta everywhere)."""
    masses, infinity = pmf.masses, pmf.infinity
    rows = np.arange(masses.shape[0])
    for _ in range(8):
        top = np.argmax(masses, axis=1)
        masses[rows, top] = 0.0
        masses[rows, top] = np.maximum(1.0 - infinity - masses.sum(axis=1), 0.0)
        found = _profile_at(Pessimistic(pmf.lo, masses, infinity), x)
        short = np.maximum(np.max(np.where(vertices, bounds - found, 0.0), axis=1), 0.0)
        if not short.any():
            return Pessimistic(pmf.lo, masses, infinity)
        for row in np.flatnonzero(short):
            move = 2 * float(short[row]) + 4 * _U
            infinity[row] += move
            for index in np.flatnonzero(masses[row]):
                taken = min(move, float(masses[row, index]))
                masses[row, index] -= taken
                move -= taken
                if move <= 0:
                    break
    raise AssertionError("the pessimistic distribution did not settle above its bounds")

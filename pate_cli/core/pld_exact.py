"""Rigorous bounds on the privacy profile of one query against its worst neighbour, from
the bounds on its outcome probabilities (``pate_cli.core.outcome_bounds``).

The privacy profile of a pair is delta_{P||Q}(gamma) = sum_o max(p_o - gamma q_o, 0) (the
hockey-stick divergence); an upper bound takes the upper bounds of p and the lower bounds
of q. The neighbours of a histogram n are every n - e_a + e_b with a != b and n_a >= 1 (one
teacher changes its vote). Both mechanisms treat the classes alike, so the profiles of n
are those of n sorted, and of each neighbour sorted: :func:`worst_neighbour_profiles_many`
evaluates each sorted histogram once.

Shapes: ``K`` histograms, ``C`` classes, ``O`` outcomes, ``I`` values of epsilon.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
from numpy.typing import ArrayLike, NDArray

from pate_cli.core._common import _ordered_map
from pate_cli.core.outcome_bounds import (
    _TINY,
    _U,
    MAX_CLASSES,
    TooManyClassesError,
    _check_hists,
    confident_log_prob_bounds,
    gnmax_log_prob_bounds,
)

FloatArray = NDArray[np.float64]
IntArray = NDArray[np.intp]
LogProbBounds = Callable[[FloatArray], tuple[FloatArray, FloatArray]]

# Cells of one (pairs, eps) block of the profiles: temporaries stay at a few tens of MB.
_BLOCK_CELLS = 1 << 20
# Histograms whose neighbours are evaluated together by ``worst_neighbour_profiles_many``.
_BASE_BLOCK = 512
# Up to this epsilon e^eps q is formed in linear space (see ``_pair_profiles``).
_LINEAR_EPS = 600.0
# Up to this many bases in a block their neighbours' maximum is taken base by base.
_FEW_SEGMENTS = 64

__all__ = [
    "MAX_CLASSES",
    "TooManyClassesError",
    "confident_log_prob_bounds",
    "gnmax_log_prob_bounds",
    "worst_neighbour_profiles",
    "worst_neighbour_profiles_many",
]

# ----------------------------------------------------------------------------- profiles


def _neighbour_moves(num_classes: int) -> tuple[IntArray, IntArray]:
    """(a, b) of every move of one vote from class a to class b != a."""
    a, b = np.nonzero(~np.eye(num_classes, dtype=bool))
    return a.astype(np.intp), b.astype(np.intp)


def _neighbours(hists: FloatArray) -> tuple[FloatArray, NDArray[np.bool_]]:
    """Every n - e_a + e_b (a != b) and whether it is a neighbour (n_a >= 1).

    Shapes: hists (K, C) -> (K, C (C - 1), C), (K, C (C - 1)).
    """
    num_classes = hists.shape[1]
    a, b = _neighbour_moves(num_classes)
    moved = np.repeat(hists[:, None, :], a.size, axis=1)
    moves = np.arange(a.size)
    moved[:, moves, a] -= 1.0
    moved[:, moves, b] += 1.0
    return moved, hists[:, a] >= 1


def _first_of_their_kind(hists: FloatArray) -> NDArray[np.bool_]:
    """For each move of ``_neighbour_moves``, whether no earlier move takes a vote between the
    same two counts. Swapping two classes with equal counts leaves n and its distribution in
    place and maps one such move onto the other, so their profiles are equal.

    Shapes: hists (K, C) -> (K, C (C - 1)).
    """
    num_classes = hists.shape[1]
    a, b = _neighbour_moves(num_classes)
    order = np.argsort(hists, axis=1, kind="stable")
    ranked = np.take_along_axis(hists, order, axis=1)
    new = np.ones(ranked.shape, dtype=bool)
    new[:, 1:] = ranked[:, 1:] != ranked[:, :-1]
    group = np.empty_like(order)
    np.put_along_axis(group, order, np.cumsum(new, axis=1) - 1, axis=1)
    key = group[:, a] * num_classes + group[:, b]
    by_key = np.argsort(key, axis=1, kind="stable")
    sorted_key = np.take_along_axis(key, by_key, axis=1)
    first = np.ones(key.shape, dtype=bool)
    first[:, 1:] = sorted_key[:, 1:] != sorted_key[:, :-1]
    out = np.empty_like(first)
    np.put_along_axis(out, by_key, first, axis=1)
    return out


def _upper_linear(log_p: FloatArray) -> FloatArray:
    """e^log_p rounded up (exp is within an ulp; one subnormal covers an underflow)."""
    with np.errstate(under="ignore"):
        out: FloatArray = np.exp(log_p) * (1 + 4 * _U) + _TINY
    return out


def _lower_linear(log_p: FloatArray) -> FloatArray:
    """e^log_p rounded down."""
    with np.errstate(under="ignore"):
        out: FloatArray = np.maximum(np.exp(log_p) * (1 - 4 * _U) - _TINY, 0.0)
    return out


def _floor_and_ceiling(profile: FloatArray, eps: FloatArray) -> FloatArray:
    """Raise a profile bound to (1 - e^eps)_+ (rounded up; every profile is at least that)
    and lower it to 1 (every profile is at most 1)."""
    floor = np.maximum(-np.expm1(np.minimum(eps, 0.0)) * (1 + 4 * _U), 0.0)
    return np.minimum(np.maximum(profile, floor), 1.0)


def _running_sums(weights: FloatArray, starts: IntArray, num_eps: int, scale: float) -> FloatArray:
    """S[p, i] = sum of weights[p, o] over the o with starts[p, o] <= i, for i < I, times
    ``scale``: a step function of i, each step's value a prefix sum of the weights by
    increasing start (a sum of at most O terms), written out by repetition.

    Shapes: (P, O), (P, O) -> (P, I).
    """
    num_rows, count = weights.shape
    order = np.argsort(starts, axis=1, kind="stable")
    edges = np.minimum(np.take_along_axis(starts, order, axis=1), num_eps)
    steps = np.zeros((num_rows, count + 1))
    np.cumsum(np.take_along_axis(weights, order, axis=1), axis=1, out=steps[:, 1:])
    steps *= scale
    bounds = np.zeros((num_rows, count + 2), dtype=np.intp)
    bounds[:, 1:-1] = edges
    bounds[:, -1] = num_eps
    out: FloatArray = np.repeat(steps.ravel(), np.diff(bounds, axis=1).ravel())
    return out.reshape(num_rows, num_eps)


def _pair_profiles(log_a: FloatArray, log_b: FloatArray, eps: FloatArray) -> FloatArray:
    """Upper bounds on delta_{P||Q}(e^eps) for pairs with log P_o <= log_a, log Q_o >= log_b,
    at eps sorted in decreasing order.

    delta <= sum_o max(e^a_o - e^(eps + b_o), 0) =: D(eps), whose term o is positive exactly
    where eps < g_o = a_o - b_o. With g_o computed to within m_o (4 ulp of the logs' sizes),
    the term is e^a_o - e^(eps + b_o) where eps < g_o - m_o, 0 where eps >= g_o + m_o, and
    between, where the sign is unsure, at most e^a_o (1 - e^-(g_o - eps)) <= 2 m_o e^a_o. So
    D(eps) <= A(eps) - e^eps B(eps): A sums e^a_o (1 - 2 m_o) over eps < g_o - m_o and
    2 m_o e^a_o over eps < g_o + m_o, B sums e^b_o over eps < g_o - m_o: running sums of at
    most 2 O non-negative terms along the eps, without cancellation. A is rounded up by
    (2 O + 8) ulp (its terms and sum, and the final difference's rounding:
    (x - y)(1 - u) >= A - e^eps B for x >= A (1 + 4u)) and by two subnormals per term (its
    products and the product e^eps B among the subnormals); e^eps B is rounded down. The
    difference is not clipped at 0 (the caller's floor does it). The work is O(P (O + I)).
    Above _LINEAR_EPS, e^eps alone overflows: there the terms are summed one by one, each
    e^(eps + b_o) formed in log space.

    Shapes: log_a, log_b (P, O), eps (I,) decreasing -> (P, I).
    """
    num_outcomes = log_a.shape[1]
    # A bound of -inf on log P leaves no term; one on log Q leaves e^a_o at every eps.
    finite = np.isfinite(log_a) & np.isfinite(log_b)
    never = np.where(np.isneginf(log_a), -np.inf, np.inf)
    with np.errstate(invalid="ignore"):
        gap = log_a - log_b
        margin = 4 * _U * (np.abs(log_a) + np.abs(log_b)) + 1e-300
        upper_cut = np.where(finite, gap + margin, never)
        lower_cut = np.where(finite, gap - margin, never)
    unsure = np.where(finite, np.minimum(2 * margin, 1.0), 0.0)
    linear_a = _upper_linear(log_a)
    num_huge = int(np.searchsorted(-eps, -_LINEAR_EPS, side="left"))  # eps > _LINEAR_EPS
    out = np.empty((log_a.shape[0], eps.size))
    if num_huge < eps.size:
        part = eps[num_huge:]
        rising = -part
        # Term o counts from the first eps below its cut on: after #{eps >= cut}.
        sure = np.searchsorted(rising, -lower_cut, side="right")
        maybe = np.searchsorted(rising, -upper_cut, side="right")
        weights = np.concatenate([linear_a * (1 - unsure), linear_a * unsure], axis=1)
        weights += 2 * _TINY
        total_a = _running_sums(
            weights,
            np.concatenate([sure, maybe], axis=1),
            part.size,
            1 + (2 * num_outcomes + 8) * _U,
        )
        total_b = _running_sums(_lower_linear(log_b), sure, part.size, 1.0)
        # e^eps (1 - (O + 8) u) is below e^eps after its rounding, B's sums' and the product's.
        total_b *= np.exp(part) * (1 - (num_outcomes + 8) * _U)
        np.subtract(total_a, total_b, out=out[:, num_huge:])
    if num_huge:
        huge = eps[:num_huge]
        total = np.zeros((log_a.shape[0], huge.size))
        for o in range(num_outcomes):
            logs = log_b[:, o, None]
            with np.errstate(under="ignore", over="ignore", invalid="ignore"):
                x = logs + huge
                x -= 2 * _U * (np.abs(x) + np.abs(logs))
                scaled = np.exp(x) * (1 - 4 * _U) - _TINY
            scaled = np.where(np.isnan(scaled), 0.0, scaled)
            total += np.maximum(linear_a[:, o, None] + _TINY - scaled, 0.0)
        out[:, :num_huge] = total * (1 + (num_outcomes + 4) * _U)
    return out


def _profiles(
    base_low: FloatArray,
    base_high: FloatArray,
    nb_low: FloatArray,
    nb_high: FloatArray,
    owner: IntArray,
    eps: FloatArray,
) -> tuple[FloatArray, FloatArray]:
    """Upper bounds on max over neighbours of delta_{M(n)||M(n')} and delta_{M(n')||M(n)},
    from ``_pair_profiles`` (remove: P = M(n) from above, Q = M(n') from below; add: the other
    way round), in blocks of pairs and of eps; each profile is then kept within
    [(1 - e^eps)_+, 1].

    Shapes: base (B, O), neighbours (P, O), owner (P,) (each neighbour's base, in increasing
    order), eps (I,) -> (B, I), (B, I).
    """
    num_bases = base_low.shape[0]
    num_pairs = owner.size
    remove = np.zeros((num_bases, eps.size))
    add = np.zeros((num_bases, eps.size))
    if num_pairs and eps.size:
        order = np.argsort(-eps, kind="stable")
        ranked = eps[order]
        eps_per_block = min(eps.size, _BLOCK_CELLS)
        pairs_per_block = max(1, _BLOCK_CELLS // eps_per_block)
        blocks = [
            (slice(first, min(first + pairs_per_block, num_pairs)), slice(start, stop))
            for first in range(0, num_pairs, pairs_per_block)
            for start in range(0, eps.size, eps_per_block)
            for stop in [min(start + eps_per_block, eps.size)]
        ]

        def block_profiles(
            block: tuple[slice, slice],
        ) -> tuple[IntArray, FloatArray, FloatArray]:
            pairs, part = block
            mine = owner[pairs]
            starts = np.flatnonzero(np.diff(mine, prepend=-1))
            ends = np.append(starts[1:], mine.size)
            results = []
            for log_a, log_b in (
                (base_high[mine], nb_low[pairs]),
                (nb_high[pairs], base_low[mine]),
            ):
                profile = _pair_profiles(log_a, log_b, ranked[part])
                if starts.size > _FEW_SEGMENTS:
                    results.append(np.maximum.reduceat(profile, starts, axis=0))
                else:  # a maximum over contiguous rows is faster for a few long segments
                    results.append(
                        np.stack(
                            [profile[i:j].max(axis=0) for i, j in zip(starts, ends, strict=True)]
                        )
                    )
            return mine[starts], results[0], results[1]

        for (_, part), (bases, part_remove, part_add) in zip(
            blocks, _ordered_map(block_profiles, blocks), strict=True
        ):
            columns = order[part]
            index = np.ix_(bases, columns)
            remove[index] = np.maximum(remove[index], part_remove)
            add[index] = np.maximum(add[index], part_add)
    return _floor_and_ceiling(remove, eps), _floor_and_ceiling(add, eps)


def _check_eps(eps: ArrayLike) -> FloatArray:
    out = np.array(eps, dtype=np.float64, ndmin=1)
    if out.ndim != 1:
        raise ValueError(f"eps must have shape (I,), got {out.shape}")
    if not np.all(np.isfinite(out)):
        raise ValueError("eps must be finite")
    return out


def worst_neighbour_profiles(
    hist: ArrayLike, eps: ArrayLike, *, log_prob_bounds: LogProbBounds
) -> tuple[FloatArray, FloatArray]:
    """Upper bounds on the privacy profiles of one query against its worst neighbour.

    remove[i] >= max over neighbours n' of delta_{M(n)||M(n')}(e^eps_i) and add[i] >= max of
    delta_{M(n')||M(n)}(e^eps_i), delta_{P||Q}(gamma) = sum_o max(p_o - gamma q_o, 0), from
    ``log_prob_bounds`` (histograms (K, C) -> lower and upper log-probabilities (K, O) of the
    outcomes, e.g. :func:`gnmax_log_prob_bounds` with sigma fixed). Each lies in
    [(1 - e^eps)_+, 1]; a histogram without votes has no neighbour and gets (1 - e^eps)_+.

    Shapes: hist (C,), eps (I,) -> (I,), (I,).

    Raises:
        TooManyClassesError: for more than 20 classes.
    """
    base = _check_hists(np.asarray(hist, dtype=np.float64)[None, :])
    eps_arr = _check_eps(eps)
    moved, valid = _neighbours(base)
    others = moved[0][valid[0]]
    low, high = log_prob_bounds(np.vstack([base, others]))
    low = np.asarray(low, dtype=np.float64)
    high = np.asarray(high, dtype=np.float64)
    owner = np.zeros(others.shape[0], dtype=np.intp)
    remove, add = _profiles(low[:1], high[:1], low[1:], high[1:], owner, eps_arr)
    return remove[0], add[0]


def worst_neighbour_profiles_many(
    hists: ArrayLike, eps: ArrayLike, *, log_prob_bounds: LogProbBounds
) -> tuple[FloatArray, FloatArray]:
    """:func:`worst_neighbour_profiles` for many histograms, each sorted histogram (and
    each sorted neighbour) evaluated once.

    ``log_prob_bounds`` must treat the classes alike, as GNMax and Confident-GNMax do: its
    outcomes are the classes (O = C) or abstain and then the classes (O = C + 1). Of the
    moves between two classes with the same two counts one is evaluated (the others are its
    images under a swap of equal classes). Histograms are processed in blocks, so memory
    follows the block, not K.

    Shapes: hists (K, C), eps (I,) -> (K, I), (K, I).

    Raises:
        TooManyClassesError: for more than 20 classes.
    """
    hists = _check_hists(hists)
    eps_arr = _check_eps(eps)
    num_hists, num_classes = hists.shape
    remove = np.empty((num_hists, eps_arr.size))
    add = np.empty((num_hists, eps_arr.size))
    if num_hists == 0:
        return remove, add
    ranked = -np.sort(-hists, axis=1)
    bases, inverse = np.unique(ranked, axis=0, return_inverse=True)
    inverse = inverse.reshape(-1)
    base_remove = np.empty((bases.shape[0], eps_arr.size))
    base_add = np.empty((bases.shape[0], eps_arr.size))
    for start in range(0, bases.shape[0], _BASE_BLOCK):
        block = bases[start : start + _BASE_BLOCK]
        moved, kept = _neighbours(block)
        kept &= _first_of_their_kind(block)
        flat = moved[kept]  # (P, C), base by base
        owner = np.repeat(np.arange(block.shape[0]), kept.sum(axis=1))
        order = np.argsort(-flat, axis=1, kind="stable")
        sorted_nb = np.take_along_axis(flat, order, axis=1)
        unique, where = np.unique(np.vstack([block, sorted_nb]), axis=0, return_inverse=True)
        where = where.reshape(-1)
        low, high = log_prob_bounds(unique)
        low = np.asarray(low, dtype=np.float64)
        high = np.asarray(high, dtype=np.float64)
        num_outcomes = low.shape[1]
        shift = num_outcomes - num_classes
        if shift not in (0, 1):
            raise ValueError(
                f"log_prob_bounds gave {num_outcomes} outcomes for {num_classes} classes"
            )
        base_rows = where[: block.shape[0]]
        nb_rows = where[block.shape[0] :]
        # Outcome of class c of a neighbour: its rank in the sorted neighbour (abstain first).
        rank = np.empty_like(order)
        np.put_along_axis(rank, order, np.arange(num_classes)[None, :], axis=1)
        columns = np.concatenate(
            [np.zeros((flat.shape[0], shift), dtype=np.intp), rank + shift], axis=1
        )
        part_remove, part_add = _profiles(
            low[base_rows],
            high[base_rows],
            low[nb_rows[:, None], columns],
            high[nb_rows[:, None], columns],
            owner,
            eps_arr,
        )
        base_remove[start : start + block.shape[0]] = part_remove
        base_add[start : start + block.shape[0]] = part_add
    remove[:] = base_remove[inverse]
    add[:] = base_add[inverse]
    return remove, add

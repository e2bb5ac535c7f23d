"""The built-in aggregators: LNMax, GNMax, Confident-GNMax and Interactive-GNMax.

Each is a function of the vote counts ``(Q, C)``, its mechanism parameters and an explicit
``numpy.random.Generator``, built from the samplers of ``pate_cli.mechanisms.samplers``
(whose module docstring gives the random stream layout an auditor replays) and, for
Confident- and Interactive-GNMax, a Gaussian threshold step drawn first, from its own stream
when ``threshold_rng`` is given. Nothing here computes privacy costs.
"""

from __future__ import annotations

import operator

import numpy as np
from numpy.typing import ArrayLike, NDArray

from pate_cli.core.compact import Compact, parts
from pate_cli.core.threshold import round_votes
from pate_cli.mechanisms.samplers import (
    AggregationResult,
    Branch,
    Gaussian,
    Laplace,
    _check_common,
    _check_counts,
    _check_dense_counts,
    _noisy_argmax,
    _row_blocks,
    answer_every_query,
    apply_stop_conditions,
)

__all__ = [
    "aggregate_confident_gnmax",
    "aggregate_gnmax",
    "aggregate_interactive_gnmax",
    "aggregate_lnmax",
]


def _check_scale(name: str, value: float) -> None:
    if not (np.isfinite(value) and value > 0):
        raise ValueError(f"{name} must be positive and finite, got {value}")


def _threshold_source(
    rng: np.random.Generator, threshold_rng: np.random.Generator | None
) -> np.random.Generator:
    """The threshold step's generator: its own stream when given, else ``rng``'s next draws."""
    if threshold_rng is None:
        return rng
    if not isinstance(threshold_rng, np.random.Generator):
        raise TypeError(
            f"threshold_rng must be a numpy.random.Generator, got {type(threshold_rng).__name__}"
        )
    return threshold_rng


def _threshold_step(
    top: NDArray[np.float64],
    threshold: float,
    sigma1: float,
    rng: np.random.Generator,
    half_even: bool,
) -> NDArray[np.bool_]:
    """round(top) + N(0, sigma1^2) >= threshold; rounded as in log_pr_answered_threshold."""
    if np.isnan(threshold):
        raise ValueError("threshold must not be NaN")
    _check_scale("sigma1", sigma1)
    with np.errstate(over="ignore"):  # an infinite draw passes or fails, as it should
        noise = sigma1 * rng.standard_normal(top.shape[0])
    return round_votes(top, half_even=half_even) + noise >= threshold


def aggregate_lnmax(
    counts: ArrayLike | Compact,
    gamma: float,
    rng: np.random.Generator,
    *,
    max_answered: int | None = None,
    max_queries: int | None = None,
) -> AggregationResult:
    """LNMax: argmax of the counts plus Laplace noise of scale 1/gamma on every class.

    Args:
        counts: vote histograms.
        gamma: inverse Laplace scale (one answer is 2 gamma-DP).
        rng: the only source of randomness; draws ``laplace(0, 1, (Q, C))``.
        max_answered: stop right after this many answers (None: no limit).
        max_queries: process at most this many queries (None: all).

    Returns:
        Labels, answered mask (every seen query), seen prefix and branches.

    Raises:
        ValueError: gamma not positive and finite, bad counts or limits.
        TypeError: rng is not a numpy Generator.

    Shapes: counts (Q, C) -> result arrays (Q,).
    """
    # LNMax, Papernot et al. 2017, Section 2.1.
    counts = _check_counts(counts)
    _check_scale("gamma", gamma)
    _check_common(rng, max_answered, max_queries)
    # The sampler of Laplace(1 / gamma), unchecked: 1 / gamma overflows to inf for a
    # subnormal gamma, where every row is decided on the noise alone (_noisy_argmax).
    labels = _noisy_argmax(counts, 1.0 / gamma, Laplace, rng)
    return answer_every_query(labels, max_answered=max_answered, max_queries=max_queries)


def aggregate_gnmax(
    counts: ArrayLike | Compact,
    sigma: float,
    rng: np.random.Generator,
    *,
    max_answered: int | None = None,
    max_queries: int | None = None,
) -> AggregationResult:
    """GNMax: argmax of the counts plus N(0, sigma^2) noise on every class.

    Arguments, result and errors as ``aggregate_lnmax``, with ``sigma`` the standard
    deviation of the class noise in place of ``gamma``; draws ``standard_normal((Q, C))``.
    """
    # GNMax, Papernot et al. 2018, Section 4.1.
    counts = _check_counts(counts)
    _check_scale("sigma", sigma)
    _check_common(rng, max_answered, max_queries)
    labels = _noisy_argmax(counts, sigma, Gaussian, rng)  # noisy_max, counts checked
    return answer_every_query(labels, max_answered=max_answered, max_queries=max_queries)


def aggregate_confident_gnmax(
    counts: ArrayLike | Compact,
    threshold: float,
    sigma1: float,
    sigma: float,
    rng: np.random.Generator,
    *,
    max_answered: int | None = None,
    max_queries: int | None = None,
    half_even: bool = False,
    threshold_rng: np.random.Generator | None = None,
) -> AggregationResult:
    """Confident-GNMax: answer with GNMax only where max(votes) + N(0, sigma1^2) >= threshold.

    Args:
        counts: vote histograms.
        threshold: T, the noisy consensus a query needs to be answered.
        sigma1: standard deviation of the threshold noise.
        sigma: standard deviation of the GNMax class noise.
        rng: the source of randomness; draws ``standard_normal(Q)`` (unless
            ``threshold_rng`` is given) then ``((Q, C))``.
        max_answered: stop right after this many answers (None: no limit).
        max_queries: process at most this many queries (None: all).
        half_even: round the threshold statistic half to even, as the reference does.

    Returns:
        Labels (-1 where abstained), answered mask, seen prefix and branches.

    Raises:
        ValueError: a noise scale not positive and finite, NaN threshold, bad counts or limits.
        TypeError: rng is not a numpy Generator.

    Shapes: counts (Q, C) -> result arrays (Q,).
    """
    # Algorithm 1, Papernot et al. 2018.
    counts = _check_counts(counts)
    _check_scale("sigma", sigma)
    _check_common(rng, max_answered, max_queries)
    answered = _threshold_step(
        parts(counts)[0].max(axis=1),
        threshold,
        sigma1,
        _threshold_source(rng, threshold_rng),
        half_even,
    )
    labels = _noisy_argmax(counts, sigma, Gaussian, rng)
    labels = np.where(answered, labels, -1)
    branch = np.where(answered, Branch.TEACHERS, Branch.ABSTAINED)
    return apply_stop_conditions(
        labels, answered, branch, max_answered=max_answered, max_queries=max_queries
    )


def aggregate_interactive_gnmax(
    counts: ArrayLike,
    student_probs: ArrayLike,
    threshold: float,
    sigma1: float,
    sigma: float,
    student_confidence: float,
    rng: np.random.Generator,
    *,
    num_teachers: int | None = None,
    max_answered: int | None = None,
    max_queries: int | None = None,
    half_even: bool = False,
    threshold_rng: np.random.Generator | None = None,
) -> AggregationResult:
    """Interactive-GNMax: the teachers answer only where they disagree with the student.

    Where max_j (n_j - M p_j) + N(0, sigma1^2) >= threshold the teachers answer with GNMax
    (``TEACHERS``); otherwise, where max_j p_j > student_confidence, the student's argmax is
    released without a teacher answer (``STUDENT``); otherwise nothing (``ABSTAINED``).

    Args:
        counts: vote histograms n.
        student_probs: the student's class probabilities p (finite, non-negative).
        threshold: T of the disagreement test.
        sigma1: standard deviation of the threshold noise.
        sigma: standard deviation of the GNMax class noise.
        student_confidence: gamma of Algorithm 2, the confidence needed to reinforce.
        rng: the source of randomness; draws ``standard_normal(Q)`` (unless
            ``threshold_rng`` is given) then ``((Q, C))``.
        num_teachers: M; defaults to the sum of the first row of counts.
        max_answered: stop right after this many teacher answers (None: no limit).
        max_queries: process at most this many queries (None: all).
        half_even: round the threshold statistic half to even, as the reference does.

    Returns:
        Labels (-1 where abstained), answered mask (teacher answers only), seen prefix, branches.

    Raises:
        ValueError: a noise scale not positive and finite, NaN threshold or confidence,
            num_teachers < 1, bad counts, probabilities or limits.
        TypeError: rng is not a numpy Generator.

    Shapes: counts (Q, C), student_probs (Q, C) -> result arrays (Q,).
    """
    # Algorithm 2, Papernot et al. 2018.
    counts = _check_dense_counts(counts)
    probs = np.asarray(student_probs, dtype=np.float64)
    if probs.shape != counts.shape:
        raise ValueError(f"student_probs shape {probs.shape} != counts shape {counts.shape}")
    if not np.all(np.isfinite(probs) & (probs >= 0)):
        raise ValueError("student_probs must be finite and non-negative")
    if np.isnan(student_confidence):
        raise ValueError("student_confidence must not be NaN")
    _check_scale("sigma", sigma)
    _check_common(rng, max_answered, max_queries)
    if num_teachers is None:
        weight = float(counts[0].sum()) if counts.shape[0] else 0.0
    elif isinstance(num_teachers, bool) or operator.index(num_teachers) < 1:
        raise ValueError(f"num_teachers must be a positive integer, got {num_teachers}")
    else:
        weight = float(num_teachers)
    top = np.empty(counts.shape[0])
    for rows in _row_blocks(*counts.shape):  # bounds the (block, C) temporary
        top[rows] = (counts[rows] - weight * probs[rows]).max(axis=1)
    answered = _threshold_step(
        top, threshold, sigma1, _threshold_source(rng, threshold_rng), half_even
    )
    teacher_labels = _noisy_argmax(counts, sigma, Gaussian, rng)
    is_student = ~answered & (probs.max(axis=1) > student_confidence)
    labels = np.where(answered, teacher_labels, np.where(is_student, probs.argmax(axis=1), -1))
    branch = np.select([answered, is_student], [Branch.TEACHERS, Branch.STUDENT], Branch.ABSTAINED)
    return apply_stop_conditions(
        labels, answered, branch, max_answered=max_answered, max_queries=max_queries
    )

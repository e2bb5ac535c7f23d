"""The randomised PATE aggregators: LNMax, GNMax, Confident-GNMax and Interactive-GNMax.

Each aggregator is a pure function of the vote counts ``(Q, C)``, its mechanism parameters and
an explicit ``numpy.random.Generator`` (the SciPy SPEC-7 ``rng`` convention); the global
``np.random`` state is never used. Work is vectorised over queries. The result says, per query,
which label was released (-1 for none), whether the teachers answered (the mask that the privacy
accounting composes over), whether the query was seen before a stop condition, and which
``Branch`` of the algorithm ran. Nothing here computes privacy costs.

Random stream layout (what an auditor needs to reproduce the labels from a seed). All noise for
all Q queries is drawn first, in this order, whatever the outcomes and the stop conditions:

1. threshold noise, Confident- and Interactive-GNMax only: ``z1 = threshold_rng.standard_normal(Q)``
   (``threshold_rng`` defaults to ``rng``; ``pate_cli.jobs.aggregation`` passes each step its own
   stream, ``pate_cli.files.seeds.PURPOSES``);
2. class noise, row-major: ``z = rng.standard_normal((Q, C))`` for the GNMax step, or
   ``rng.laplace(0.0, 1.0, (Q, C))`` times 1 / gamma for LNMax (drawn even where the query
   abstains).

The noisy values are ``counts + sigma * z`` (argmax, first maximum on ties) and
``round(max_j s_j) + sigma1 * z1 >= threshold`` with ``s = counts`` (Confident) or
``s = counts - num_teachers * student_probs`` (Interactive). ``round`` is
``core.threshold.round_votes`` (half up by default, half to even with ``half_even=True``),
exactly as in ``log_pr_answered_threshold``, so Pr[answered] is the probability the
accounting uses; it is the identity for integer votes. When Q*C is large the
class noise is drawn in blocks of whole rows; Generator draws are sequential, so the numbers are
the same as with the single calls above. The noise of query i thus depends only on the seed and
on (Q, C), never on ``max_answered`` or ``max_queries``, and every call consumes the whole stream.

Stop conditions only look at released outputs, so they leak nothing more: query i is *seen* iff
``i < max_queries`` and fewer than ``max_answered`` teacher answers were released before it.
The seen queries form a prefix; unseen queries get label -1, answered False, ``ABSTAINED``.
"""

from __future__ import annotations

import operator
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from enum import IntEnum

import numpy as np
from numpy.typing import ArrayLike, NDArray
from scipy.special import ndtri

from pate_cli.core.compact import Compact, parts
from pate_cli.core.threshold import round_votes

# Class noise is drawn in blocks of about this many elements; results do not depend on it.
_CHUNK_ELEMENTS = 2**22


class Branch(IntEnum):
    """What happened to a query."""

    ABSTAINED = 0  # nothing released (or the query was not seen)
    TEACHERS = 1  # the teachers answered with a noisy argmax
    STUDENT = 2  # Interactive-GNMax reinforced the student's own label


@dataclass(frozen=True)
class AggregationResult:
    """Outcome of one aggregation run; the arrays are read-only.

    Shapes: labels, answered, seen, branch all (Q,).
    """

    labels: NDArray[np.int64]
    """The released label; -1 where nothing was released (abstained or not seen)."""
    answered: NDArray[np.bool_]
    """True where the teachers answered (noisy-argmax step ran): the mask the accounting uses."""
    seen: NDArray[np.bool_]
    """True for the queries processed before a stop condition (always a prefix)."""
    branch: NDArray[np.int8]
    """The `Branch` of each query; unseen queries are ``ABSTAINED``."""

    @property
    def num_seen(self) -> int:
        """Number of queries processed before a stop condition."""
        return int(self.seen.sum())

    @property
    def num_answered(self) -> int:
        """Number of teacher answers, the queries whose privacy cost includes the argmax step."""
        return int(self.answered.sum())

    @property
    def num_student(self) -> int:
        """Number of queries where Interactive-GNMax reinforced the student's label."""
        return int(np.count_nonzero(self.branch == Branch.STUDENT))


def _check_counts(counts: ArrayLike | Compact) -> NDArray[np.float64] | Compact:
    if isinstance(counts, Compact):  # checked as it was read
        return counts
    return _check_dense_counts(counts)


def _check_dense_counts(counts: ArrayLike | Compact) -> NDArray[np.float64]:
    if isinstance(counts, Compact):
        raise ValueError("votes over a vocabulary (compact): this aggregator needs dense counts")
    out = np.asarray(counts, dtype=np.float64)
    if out.ndim != 2 or out.shape[1] < 1:
        raise ValueError(f"counts must have shape (queries, classes >= 1), got {out.shape}")
    if not np.all(np.isfinite(out) & (out >= 0)):
        raise ValueError("counts must be finite and non-negative")
    return out


def _check_scale(name: str, value: float) -> None:
    if not (np.isfinite(value) and value > 0):
        raise ValueError(f"{name} must be positive and finite, got {value}")


def _check_common(
    rng: np.random.Generator, max_answered: int | None, max_queries: int | None
) -> None:
    if not isinstance(rng, np.random.Generator):
        raise TypeError(f"rng must be a numpy.random.Generator, got {type(rng).__name__}")
    for name, limit in (("max_answered", max_answered), ("max_queries", max_queries)):
        if limit is not None and (isinstance(limit, bool) or operator.index(limit) < 0):
            raise ValueError(f"{name} must be a non-negative integer or None, got {limit}")


def _row_blocks(num_queries: int, num_classes: int) -> Iterator[slice]:
    step = max(1, _CHUNK_ELEMENTS // num_classes)
    for start in range(0, num_queries, step):
        yield slice(start, start + step)


Largest = Callable[[NDArray[np.int64]], NDArray[np.float64]]
"""largest(k): per row, the largest of k[row] independent unit noises (-inf for k = 0)."""


def _uniform_open(rng: np.random.Generator, size: int) -> NDArray[np.float64]:
    """Uniform draws in (0, 1), both ends excluded (53 random bits each)."""
    bits = rng.integers(0, 1 << 53, size).astype(np.float64)
    return (bits + 0.5) / float(1 << 53)


def _largest_gaussian(rng: np.random.Generator) -> Largest:
    """The largest of k standard normals by inversion: Phi(x)^k = u, so x = -Phi^-1(p) with
    p = 1 - u^(1/k) computed as -expm1(log(u) / k) (no cancellation near 1)."""

    def largest(k: NDArray[np.int64]) -> NDArray[np.float64]:
        u = _uniform_open(rng, k.size)
        with np.errstate(divide="ignore"):  # k = 0: p = 1, x = -inf (no such class)
            p = -np.expm1(np.log(u) / k)
        return np.asarray(-ndtri(p))

    return largest


def _largest_laplace(rng: np.random.Generator) -> Largest:
    """The largest of k standard Laplace draws by inversion of F(x)^k = u: with
    p = 1 - u^(1/k), x = -log(2 p) above the median, log(2 (1 - p)) below it."""

    def largest(k: NDArray[np.int64]) -> NDArray[np.float64]:
        u = _uniform_open(rng, k.size)
        with np.errstate(divide="ignore"):  # k = 0: x = -inf (no such class)
            log_v = np.log(u) / k  # log F(x)
            p = -np.expm1(log_v)
            return np.where(p <= 0.5, -np.log(2 * p), np.log(2.0) + log_v)

    return largest


def _noisy_argmax(
    counts: NDArray[np.float64] | Compact,
    scale: float,
    unit: Callable[[tuple[int, int]], NDArray[np.float64]],
    largest: Largest,
    rng: np.random.Generator,
) -> NDArray[np.int64]:
    """argmax(counts + scale * unit(shape)) per row, drawing block by block in row order.

    Where scale * noise overflows (scale near the float limit), the row is decided
    on counts / scale + noise instead: the same argmax, without an inf - inf. Compact
    counts draw the unlisted zero-vote classes' noise as one maximum per query
    (``_compact_noisy_argmax``).
    """
    if isinstance(counts, Compact):
        return _compact_noisy_argmax(counts, scale, unit, largest, rng)
    labels = np.empty(counts.shape[0], dtype=np.int64)
    for rows in _row_blocks(*counts.shape):
        block = counts[rows]
        noise = unit(block.shape)
        with np.errstate(over="ignore"):
            noisy = block + scale * noise
        overflow = ~np.isfinite(noisy).all(axis=1)
        if overflow.any():
            noisy[overflow] = block[overflow] / scale + noise[overflow]
        labels[rows] = np.argmax(noisy, axis=1)
    return labels


def _compact_noisy_argmax(
    counts: Compact,
    scale: float,
    unit: Callable[[tuple[int, int]], NDArray[np.float64]],
    largest: Largest,
    rng: np.random.Generator,
) -> NDArray[np.int64]:
    """The noisy argmax over a vocabulary without its zero-vote classes' noise one by one.

    In noise units (counts / scale + noise: the same argmax): the listed classes draw
    their noise; the query's k unlisted zero-vote classes, exchangeable, reach the largest
    of k noises (one draw, ``largest``), and when that beats every listed class the label
    is one of them, uniformly: the same distribution as the argmax over every class.
    """
    labels = np.empty(len(counts), dtype=np.int64)
    for rows in _row_blocks(*counts.values.shape):
        block = counts[rows]
        noisy = block.values / scale + unit(block.values.shape)
        column = np.argmax(noisy, axis=1)
        index = np.arange(len(block))
        best, label = noisy[index, column], block.classes[index, column]
        unlisted = largest(block.zeros)
        (won,) = np.nonzero(unlisted > best)
        if won.size:
            label[won] = _unlisted_class(block.classes[won], rng.integers(0, block.zeros[won]))
        labels[rows] = label
    return labels


def _unlisted_class(classes: NDArray[np.int64], rank: NDArray[np.int64]) -> NDArray[np.int64]:
    """Per row, the class of the given rank among those not in the row's ``classes``
    (-1 pads ignored): walk the listed classes in increasing order, stepping over each."""
    listed = np.sort(np.where(classes < 0, np.iinfo(np.int64).max, classes), axis=1)
    found = rank.astype(np.int64)
    for column in listed.T:
        found += column <= found
    return found


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


def _finish(
    labels: NDArray[np.int64],
    answered: NDArray[np.bool_],
    branch: NDArray[np.int8],
    max_answered: int | None,
    max_queries: int | None,
) -> AggregationResult:
    """Apply the stop conditions (prefix semantics) and freeze the arrays."""
    seen = np.ones(labels.shape[0], dtype=bool)
    if max_queries is not None:
        seen &= np.arange(labels.shape[0]) < max_queries
    if max_answered is not None:
        answered_before = np.cumsum(answered, dtype=np.int64) - answered
        seen &= answered_before < max_answered
    arrays = (
        np.where(seen, labels, -1).astype(np.int64),
        answered & seen,
        seen,
        np.where(seen, branch, Branch.ABSTAINED).astype(np.int8),
    )
    for array in arrays:
        array.flags.writeable = False
    return AggregationResult(*arrays)


def _teacher_branch(answered: NDArray[np.bool_]) -> NDArray[np.int8]:
    return np.where(answered, Branch.TEACHERS, Branch.ABSTAINED).astype(np.int8)


def _answer_every_query(
    labels: NDArray[np.int64], max_answered: int | None, max_queries: int | None
) -> AggregationResult:
    """LNMax and GNMax answer every query they see, with the teachers' label."""
    answered = np.ones(labels.shape[0], dtype=bool)
    return _finish(labels, answered, _teacher_branch(answered), max_answered, max_queries)


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
    laplace = _largest_laplace(rng)
    labels = _noisy_argmax(
        counts, 1.0 / gamma, lambda shape: rng.laplace(0.0, 1.0, shape), laplace, rng
    )
    return _answer_every_query(labels, max_answered, max_queries)


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
    labels = _noisy_argmax(counts, sigma, rng.standard_normal, _largest_gaussian(rng), rng)
    return _answer_every_query(labels, max_answered, max_queries)


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
    labels = _noisy_argmax(counts, sigma, rng.standard_normal, _largest_gaussian(rng), rng)
    labels = np.where(answered, labels, -1)
    return _finish(labels, answered, _teacher_branch(answered), max_answered, max_queries)


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
    teacher_labels = _noisy_argmax(counts, sigma, rng.standard_normal, _largest_gaussian(rng), rng)
    is_student = ~answered & (probs.max(axis=1) > student_confidence)
    labels = np.where(answered, teacher_labels, np.where(is_student, probs.argmax(axis=1), -1))
    branch = np.select([answered, is_student], [Branch.TEACHERS, Branch.STUDENT], Branch.ABSTAINED)
    return _finish(labels, answered, branch.astype(np.int8), max_answered, max_queries)

"""The samplers: a noisy max with Gaussian, Laplace or Gumbel noise, and the result of a run.

A mechanism's ``run`` draws its labels here, from the stream of its purpose
(``noise.generator("aggregate-answer")``, ``pate_cli.files.seeds.PURPOSES``); the built-in
aggregators (``pate_cli.mechanisms.aggregators``: LNMax, GNMax, Confident-GNMax and
Interactive-GNMax) are built from the same samplers. A new one is a few lines::

    rng = noise.generator("aggregate-answer")
    labels = noisy_max(counts, Gumbel(self.scale), rng)
    return answer_every_query(labels, **run.limits)

Every sampler is a pure function of the vote counts ``(Q, C)``, a noise description
(:class:`Gaussian`, :class:`Laplace`, :class:`Gumbel`) and an explicit
``numpy.random.Generator`` (the SciPy SPEC-7 ``rng`` convention); the global ``np.random``
state is never used. The generator must be the stream of one purpose of one mechanism, never
shared between two mechanisms or two steps: whoever knows one step's draws would otherwise
know another's. Work is vectorised over queries. The result says, per query, which label was
released (-1 for none), whether the teachers answered (the mask that the privacy accounting
composes over), whether the query was seen before a stop condition, and which ``Branch`` of
the algorithm ran. Nothing here computes privacy costs.

Random stream layout (what an auditor needs to reproduce the labels from a seed). ``aggregate``
calls a mechanism's ``run`` a block of queries at a time (``pate_cli.jobs.aggregation``:
65,536, each block with the noise of its own streams, ``Noise.block``), and within a call all
noise for all Q queries is drawn first, in this order, whatever the outcomes and the stop
conditions:

1. threshold noise, Confident- and Interactive-GNMax only: ``z1 = threshold_rng.standard_normal(Q)``
   (``threshold_rng`` defaults to ``rng``; ``pate_cli.jobs.aggregation`` passes each step its own
   stream, ``pate_cli.files.seeds.PURPOSES``); ``noisy_threshold`` draws the same, the unit
   noise of its kind (Q,) from the ``rng`` it is given;
2. class noise, row-major: ``z = rng.standard_normal((Q, C))`` for the GNMax step (and
   ``Gaussian``), ``rng.laplace(0.0, 1.0, (Q, C))`` times 1 / gamma for LNMax (``Laplace``:
   times its scale), ``rng.gumbel(0.0, 1.0, (Q, C))`` for ``Gumbel`` (drawn even where the
   query abstains).

The noisy values are ``counts + sigma * z`` (argmax, first maximum on ties) and
``round(max_j s_j) + sigma1 * z1 >= threshold`` with ``s = counts`` (Confident) or
``s = counts - num_teachers * student_probs`` (Interactive). ``round`` is
``core.threshold.round_votes`` (half up by default, half to even with ``half_even=True``),
exactly as in ``log_pr_answered_threshold``, so Pr[answered] is the probability the
accounting uses; it is the identity for integer votes. When Q*C is large the
class noise is drawn in blocks of whole rows; Generator draws are sequential, so the numbers are
the same as with the single calls above. The noise of query i thus depends only on the seed and
on (Q, C), never on ``max_answered`` or ``max_queries``, and every call consumes the whole stream.
Votes over a vocabulary (``Compact``) draw, per block of rows, the listed classes' noise
``(rows, W)``, then one maximum of the unlisted classes' noises per row (53 random bits,
``rng.integers(0, 2**53, rows)``, inverted), then ``rng.integers(0, k)`` for each row (in
order) whose unlisted maximum won, the rank of its label among its k unlisted classes.

Stop conditions only look at released outputs, so they leak nothing more: query i is *seen* iff
``i < max_queries`` and fewer than ``max_answered`` teacher answers were released before it.
The seen queries form a prefix; unseen queries get label -1, answered False, ``ABSTAINED``.
"""

from __future__ import annotations

import operator
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from enum import IntEnum
from typing import Self

import numpy as np
from numpy.typing import ArrayLike, NDArray
from scipy.special import ndtri

from pate_cli.core.compact import Compact, parts
from pate_cli.core.threshold import round_votes
from pate_cli.mechanisms.parameters import checked

__all__ = [
    "AggregationResult",
    "Branch",
    "ClassNoise",
    "Gaussian",
    "Gumbel",
    "Laplace",
    "answer_every_query",
    "answer_where",
    "apply_stop_conditions",
    "noisy_max",
    "noisy_threshold",
]

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


def _check_rng(rng: np.random.Generator) -> None:
    if not isinstance(rng, np.random.Generator):
        raise TypeError(f"rng must be a numpy.random.Generator, got {type(rng).__name__}")


def _check_limits(max_answered: int | None, max_queries: int | None) -> None:
    for name, limit in (("max_answered", max_answered), ("max_queries", max_queries)):
        if limit is not None and (isinstance(limit, bool) or operator.index(limit) < 0):
            raise ValueError(f"{name} must be a non-negative integer or None, got {limit}")


def _check_common(
    rng: np.random.Generator, max_answered: int | None, max_queries: int | None
) -> None:
    _check_rng(rng)
    _check_limits(max_answered, max_queries)


def _row_blocks(num_queries: int, num_classes: int) -> Iterator[slice]:
    step = max(1, _CHUNK_ELEMENTS // num_classes)
    for start in range(0, num_queries, step):
        yield slice(start, start + step)


Unit = Callable[[tuple[int, ...]], NDArray[np.float64]]
"""unit(shape): independent unit noises (scale 1) of that shape, drawn in row-major order."""
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


def _largest_gumbel(rng: np.random.Generator) -> Largest:
    """The largest of k standard Gumbel draws: F(x)^k = exp(-k e^-x) = F(x - log k), so it is
    a Gumbel(log k, 1) draw, log k - log(-log u) by inversion (Gumbel max-stability)."""

    def largest(k: NDArray[np.int64]) -> NDArray[np.float64]:
        u = _uniform_open(rng, k.size)
        with np.errstate(divide="ignore"):  # k = 0: log k = -inf (no such class)
            return np.asarray(np.log(k) - np.log(-np.log(u)))

    return largest


@dataclass(frozen=True)
class Gaussian:
    """Noise N(0, sigma^2) on every class: the GNMax answer (Papernot et al. 2018, Section 4.1).

    Raises:
        UsageError: sigma is not a finite number greater than 0 (a ``ValueError``).
    """

    sigma: float
    """The standard deviation."""

    def __post_init__(self) -> None:
        object.__setattr__(self, "sigma", checked("sigma", self.sigma))  # frozen: set here only

    @property
    def scale(self) -> float:
        """The factor of the unit noise ``rng.standard_normal``: sigma."""
        return self.sigma

    @staticmethod
    def _unit(rng: np.random.Generator) -> Unit:
        return rng.standard_normal

    @staticmethod
    def _largest(rng: np.random.Generator) -> Largest:
        return _largest_gaussian(rng)


@dataclass(frozen=True)
class _Scaled:
    """Noise of scale b: b times a unit draw.

    Raises:
        UsageError: scale is not a finite number greater than 0 (a ``ValueError``).
    """

    scale: float
    """b, the factor of the unit noise."""

    def __post_init__(self) -> None:
        object.__setattr__(self, "scale", checked("scale", self.scale))  # frozen: set here only

    @classmethod
    def of_rate(cls, rate: float) -> Self:
        """Noise of scale 1 / ``rate`` (LNMax's gamma): where 1 / rate overflows (a subnormal
        rate), the scale is inf and the noise alone decides every label, as ``noisy_max``
        decides a row whose noisy values leave the float range.

        Raises:
            UsageError: rate is not a finite number greater than 0 (a ``ValueError``).
        """
        noise = object.__new__(cls)
        object.__setattr__(noise, "scale", 1.0 / checked("rate", rate))
        return noise


@dataclass(frozen=True)
class Laplace(_Scaled):
    """Laplace noise of scale b on every class (``rng.laplace(0.0, 1.0, shape)`` times b):
    LNMax with b = 1 / gamma (Papernot et al. 2017, Section 2.1)."""

    @staticmethod
    def _unit(rng: np.random.Generator) -> Unit:
        return lambda shape: rng.laplace(0.0, 1.0, shape)

    @staticmethod
    def _largest(rng: np.random.Generator) -> Largest:
        return _largest_laplace(rng)


@dataclass(frozen=True)
class Gumbel(_Scaled):
    """Gumbel(0, b) noise on every class (``rng.gumbel(0.0, 1.0, shape)`` times b): the noisy
    max releases class j with probability exp(n_j / b) / sum_i exp(n_i / b), the exponential
    mechanism on the counts (the Gumbel-max trick: Gumbel 1954; Maddison, Tarlow and Minka
    2014)."""

    @staticmethod
    def _unit(rng: np.random.Generator) -> Unit:
        return lambda shape: rng.gumbel(0.0, 1.0, shape)

    @staticmethod
    def _largest(rng: np.random.Generator) -> Largest:
        return _largest_gumbel(rng)


ClassNoise = Gaussian | Laplace | Gumbel
"""The noise a noisy max adds to every class."""


def noisy_max(
    counts: ArrayLike | Compact, noise: ClassNoise, rng: np.random.Generator
) -> NDArray[np.int64]:
    """The noisy argmax of every query: argmax_j (counts[i, j] + noise), first on ties.

    Args:
        counts: vote histograms (Q, C), or votes over a vocabulary (``Compact``), whose
            unlisted zero-vote classes draw the largest of their noises as one draw.
        noise: what is added to every class: ``Gaussian(sigma)``, ``Laplace(scale)`` or
            ``Gumbel(scale)``.
        rng: the stream of this step of this mechanism, the run's
            ``Noise.generator(purpose)`` (``pate_cli.files.seeds.PURPOSES``), shared with no
            other mechanism or step. Dense counts draw the unit noise of the kind, (Q, C) in
            row-major order (the module docstring gives the layout for ``Compact``).

    Returns:
        The label of each query, int64 (Q,): a class id (of the vocabulary, for ``Compact``).

    Raises:
        ValueError: counts not finite and non-negative, or not (Q, C >= 1).
        TypeError: noise is not a ``ClassNoise``, or rng not a numpy Generator.
    """
    counts = _check_counts(counts)
    if not isinstance(noise, Gaussian | Laplace | Gumbel):
        raise TypeError(f"noise must be Gaussian, Laplace or Gumbel, got {type(noise).__name__}")
    _check_rng(rng)
    return _noisy_argmax(counts, noise.scale, type(noise), rng)


def noisy_threshold(
    values: ArrayLike | Compact,
    threshold: float,
    noise: ClassNoise,
    rng: np.random.Generator,
    *,
    half_even: bool = False,
) -> NDArray[np.bool_]:
    """Which queries a noisy threshold answers: round(max_j values[i, j]) + noise >= threshold.

    Confident-GNMax's threshold step with ``Gaussian(sigma1)`` (2018, Algorithm 1), drawn
    as its aggregator draws it: ``noise.scale`` times the unit noise of the kind, (Q,) from
    ``rng``, whatever the values. ``round`` is ``core.threshold.round_votes`` (half up, or
    half to even with ``half_even``), as in the accounting's probabilities.

    Args:
        values: the statistic's votes (Q, C): the counts, or the counts minus a baseline.
        threshold: T, the noisy top count a query needs to be answered.
        noise: what is added to the rounded top count (``Gaussian(sigma1)``, ...).
        rng: the stream of this step (``noise.generator("aggregate-threshold")``).
        half_even: round half to even, as the 2018 reference does.

    Returns:
        The answered mask, bool (Q,).

    Raises:
        ValueError: a NaN threshold, values not (Q, C).
        TypeError: noise is not a ``ClassNoise``, or rng not a numpy Generator.
    """
    if not isinstance(noise, Gaussian | Laplace | Gumbel):
        raise TypeError(f"noise must be Gaussian, Laplace or Gumbel, got {type(noise).__name__}")
    _check_rng(rng)
    if np.isnan(threshold):
        raise ValueError("threshold must not be NaN")
    rows, _, _ = parts(values if isinstance(values, Compact) else np.asarray(values, float))
    if rows.ndim != 2:
        raise ValueError(f"values must have shape (queries, classes), got {rows.shape}")
    top = round_votes(rows.max(axis=1), half_even=half_even)
    with np.errstate(over="ignore"):  # an infinite draw passes or fails, as it should
        drawn = noise.scale * type(noise)._unit(rng)((rows.shape[0],))
    answered: NDArray[np.bool_] = top + drawn >= threshold
    return answered


def _noisy_argmax(
    counts: NDArray[np.float64] | Compact,
    scale: float,
    kind: type[ClassNoise],
    rng: np.random.Generator,
) -> NDArray[np.int64]:
    """argmax(counts + scale * unit(shape)) per row, drawing block by block in row order.

    Where scale * noise overflows (scale near the float limit), the row is decided
    on counts / scale + noise instead: the same argmax, without an inf - inf. Compact
    counts draw the unlisted zero-vote classes' noise as one maximum per query
    (``_compact_noisy_argmax``).
    """
    unit, largest = kind._unit(rng), kind._largest(rng)
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
    unit: Unit,
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
        # A padding slot stays -inf at any scale (-inf / inf would be NaN, and win).
        with np.errstate(invalid="ignore"):
            scaled = np.where(np.isneginf(block.values), -np.inf, block.values / scale)
        noisy = scaled + unit(block.values.shape)
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


def apply_stop_conditions(
    labels: ArrayLike,
    answered: ArrayLike,
    branch: ArrayLike,
    *,
    max_answered: int | None = None,
    max_queries: int | None = None,
) -> AggregationResult:
    """The result of a run whose every query was drawn: the stop conditions applied.

    Query i is seen iff ``i < max_queries`` and fewer than ``max_answered`` of the queries
    before it were answered (a prefix); an unseen query is -1, not answered, ``ABSTAINED``.
    Draws nothing.

    Args:
        labels: the label drawn for each query, -1 where none is released, (Q,).
        answered: where the teachers answered (the mask the accounting composes over), (Q,).
        branch: the ``Branch`` of each query, (Q,).
        max_answered: stop right after this many answers (None: no limit).
        max_queries: process at most this many queries (None: all).

    Returns:
        The frozen result, its arrays read-only.

    Raises:
        ValueError: arrays not of one (Q,) shape, labels not integers, or bad limits.
    """
    _check_limits(max_answered, max_queries)
    labels, answered, branch = np.asarray(labels), np.asarray(answered), np.asarray(branch)
    if labels.ndim != 1 or not np.issubdtype(labels.dtype, np.integer):
        raise ValueError(
            f"labels must be integers of shape (Q,), got {labels.dtype} {labels.shape}"
        )
    if answered.shape != labels.shape or branch.shape != labels.shape:
        raise ValueError(
            f"labels {labels.shape}, answered {answered.shape} and branch {branch.shape} differ"
        )
    return _finish(labels, answered.astype(bool), branch, max_answered, max_queries)


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


def answer_every_query(
    labels: ArrayLike, *, max_answered: int | None = None, max_queries: int | None = None
) -> AggregationResult:
    """The result of a mechanism that answers every query it sees with the teachers' label.

    A noisy max without a threshold step (LNMax, GNMax, a Gumbel max): every query seen is
    answered (``Branch.TEACHERS``) under the stop conditions of ``apply_stop_conditions``.
    Draws nothing: ``labels`` come from a sampler, such as ``noisy_max``.

    Args:
        labels: the label of each query, integers (Q,).
        max_answered: stop right after this many answers (None: no limit).
        max_queries: process at most this many queries (None: all).

    Raises:
        ValueError: labels not integers of shape (Q,), or bad limits.
    """
    answered = np.ones(np.shape(labels)[:1], dtype=bool)
    return apply_stop_conditions(
        labels,
        answered,
        _teacher_branch(answered),
        max_answered=max_answered,
        max_queries=max_queries,
    )


def answer_where(
    answered: ArrayLike,
    labels: ArrayLike,
    *,
    max_answered: int | None = None,
    max_queries: int | None = None,
) -> AggregationResult:
    """The result of a mechanism with a threshold step: the teachers' label where
    ``answered`` (``Branch.TEACHERS``), nothing elsewhere (-1, ``ABSTAINED``), under the stop
    conditions of ``apply_stop_conditions``. Draws nothing: ``answered`` comes from a
    threshold's sampler (``noisy_threshold``), ``labels`` from ``noisy_max``.

    Raises:
        ValueError: arrays not of one (Q,) shape, labels not integers, or bad limits.
    """
    mask = np.asarray(answered, dtype=bool)
    labels = np.asarray(labels)
    if mask.shape != labels.shape:
        raise ValueError(f"answered {mask.shape} and labels {labels.shape} differ")
    return apply_stop_conditions(
        np.where(mask, labels, -1).astype(labels.dtype),
        mask,
        _teacher_branch(mask),
        max_answered=max_answered,
        max_queries=max_queries,
    )


def _teacher_branch(answered: NDArray[np.bool_]) -> NDArray[np.int8]:
    return np.where(answered, Branch.TEACHERS, Branch.ABSTAINED).astype(np.int8)

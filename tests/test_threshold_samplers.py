"""The public samplers a thresholded plugin draws with: ``noisy_threshold`` (the Gaussian
threshold step's ``sample``) draws what Confident- and Interactive-GNMax's aggregators draw,
``answer_where`` makes their result, and ``Laplace.of_rate`` is LNMax's noise even where
1 / gamma overflows."""

from __future__ import annotations

import math

import numpy as np
import pytest

from pate_cli.errors import UsageError
from pate_cli.mechanisms.aggregators import (
    aggregate_confident_gnmax,
    aggregate_interactive_gnmax,
)
from pate_cli.mechanisms.samplers import (
    Branch,
    Gaussian,
    Laplace,
    answer_where,
    noisy_max,
    noisy_threshold,
)
from pate_cli.mechanisms.steps import GaussianThreshold

ROWS = np.array([[9, 1, 0], [5, 5, 0], [2, 3, 5], [0, 0, 10], [4, 4, 2]], dtype=np.float64)


def _rng(seed: int) -> np.random.Generator:
    return np.random.default_rng(seed)


@pytest.mark.parametrize("half_even", [False, True])
def test_the_gaussian_thresholds_sample_is_confident_gnmaxs_draw(half_even):
    counts = np.repeat(ROWS, 40, axis=0)
    step = GaussianThreshold(6.0, 2.0)
    answered = step.sample(counts, _rng(1), half_even)
    run = aggregate_confident_gnmax(
        counts, 6.0, 2.0, 3.0, _rng(2), half_even=half_even, threshold_rng=_rng(1)
    )
    assert np.array_equal(answered, run.answered)
    assert 0 < answered.sum() < len(counts)
    # Interactive's statistic, votes - baseline, here with exact halves (half to even moves).
    probs = np.full(counts.shape, 0.05)  # 10 teachers: a baseline of 0.5 on every class
    run = aggregate_interactive_gnmax(
        counts, probs, 6.0, 2.0, 3.0, 1.0, _rng(2), num_teachers=10, half_even=half_even,
        threshold_rng=_rng(1),
    )  # fmt: skip
    values = counts - 10 * probs
    assert np.array_equal(step.sample(values, _rng(1), half_even), run.answered)
    drawn = noisy_threshold(values, 6.0, Gaussian(2.0), _rng(1), half_even=half_even)
    assert np.array_equal(drawn, run.answered)


def test_answer_where_labels_the_answered_queries_under_the_stop_conditions():
    answered = np.array([True, False, True, True, False, True])
    labels = np.array([2, 1, 0, 1, 2, 0])
    result = answer_where(answered, labels, max_answered=2)
    assert result.labels.tolist() == [2, -1, 0, -1, -1, -1]
    assert result.answered.tolist() == [True, False, True, False, False, False]
    assert result.seen.tolist() == [True, True, True, False, False, False]
    assert result.branch.tolist() == [Branch.TEACHERS, 0, Branch.TEACHERS, 0, 0, 0]
    with pytest.raises(ValueError, match="differ"):
        answer_where(answered[:3], labels)


def test_noisy_threshold_refuses_what_it_cannot_draw():
    with pytest.raises(ValueError, match="NaN"):
        noisy_threshold(ROWS, math.nan, Gaussian(1.0), _rng(0))
    with pytest.raises(TypeError, match="Gaussian, Laplace or Gumbel"):
        noisy_threshold(ROWS, 1.0, 2.0, _rng(0))  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="Generator"):
        noisy_threshold(ROWS, 1.0, Gaussian(1.0), 0)  # type: ignore[arg-type]


def test_laplace_of_a_rate_is_lnmaxs_noise_even_past_the_float_range():
    assert Laplace.of_rate(4.0) == Laplace(0.25)
    assert Laplace.of_rate(1e-310).scale == math.inf
    with pytest.raises(UsageError, match=r"^rate=0\.0: expected a finite number greater than 0$"):
        Laplace.of_rate(0.0)
    # The noise alone decides: every class about as often, whatever the counts.
    counts = np.repeat(np.array([[1000.0, 0.0, 0.0]]), 3000, axis=0)
    labels = noisy_max(counts, Laplace.of_rate(1e-310), _rng(3))
    assert np.all(np.abs(np.bincount(labels, minlength=3) - 1000) < 5 * math.sqrt(3000 * 2 / 9))

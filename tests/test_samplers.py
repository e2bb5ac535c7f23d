"""Tests for the public samplers (pate_cli.mechanisms.samplers): the Gumbel noisy max draws
the exponential mechanism's softmax, over dense counts and over a vocabulary alike; the largest
of k unlisted Gumbel noises is the maximum of k draws; the stop conditions keep a prefix; the
public samplers draw the built-in aggregators' streams; the docs' example runs."""

from __future__ import annotations

import re
from types import SimpleNamespace
from typing import Any

import numpy as np
import pytest
from scipy.special import softmax
from scipy.stats import chisquare, gumbel_r, ks_2samp, kstest

from pate_cli.core.compact import Compact
from pate_cli.errors import UsageError
from pate_cli.files.seeds import from_seed
from pate_cli.mechanisms import samplers
from pate_cli.mechanisms.aggregators import aggregate_gnmax, aggregate_lnmax
from pate_cli.mechanisms.samplers import (
    Branch,
    Gaussian,
    Gumbel,
    Laplace,
    answer_every_query,
    apply_stop_conditions,
    noisy_max,
)
from tests.conftest import ROOT

DRAWS = 30000
VOCABULARY = 40
# Two queries over 40 classes, most with no vote; the second at a scale of 2 (its counts halve).
ROWS = np.zeros((2, VOCABULARY))
ROWS[0, [5, 17, 30]] = [3, 1, 2]
ROWS[1, [0, 1, 39]] = [8, 6, 6]
SCALES = (1.0, 2.0)


def _compact(dense: np.ndarray) -> Compact:
    index, column = np.nonzero(dense)
    return Compact.from_sorted_entries(
        index.astype(np.int64), column.astype(np.int64), dense[index, column], *dense.shape
    )


@pytest.mark.parametrize("form", ["dense", "compact"])
@pytest.mark.parametrize("q", [0, 1])
def test_the_gumbel_noisy_max_draws_the_softmax_of_the_counts(form, q):
    """Class j wins with probability exp(n_j / b) / sum_i exp(n_i / b), every class of the
    vocabulary (the unlisted zero-vote ones too), for dense and compact counts alike."""
    dense = np.repeat(ROWS[q : q + 1], DRAWS, axis=0)
    counts = dense if form == "dense" else _compact(dense)
    labels = noisy_max(counts, Gumbel(SCALES[q]), np.random.default_rng(2024 + q))
    observed = np.bincount(labels, minlength=VOCABULARY)
    expected = DRAWS * softmax(ROWS[q] / SCALES[q])
    assert chisquare(observed, expected).pvalue > 1e-4, (observed, expected)


@pytest.mark.parametrize("k", [1, 2, 7, 300])
def test_the_largest_of_k_gumbel_noises_is_the_maximum_of_k_draws(k):
    """The one draw that stands for k unlisted classes against the maximum of k draws (two
    samples) and against Gumbel(log k, 1), max-stability's closed form (one sample)."""
    got = samplers._largest_gumbel(np.random.default_rng(8))(np.full(20000, k, dtype=np.int64))
    want = np.random.default_rng(9).gumbel(0.0, 1.0, (20000, k)).max(axis=1)
    assert ks_2samp(got, want).pvalue > 1e-4
    assert kstest(got, gumbel_r(loc=np.log(k)).cdf).pvalue > 1e-4


def test_no_unlisted_class_never_wins():
    largest = samplers._largest_gumbel(np.random.default_rng(0))
    assert np.all(np.isneginf(largest(np.zeros(3, dtype=np.int64))))


def test_the_gumbel_stream_is_the_documented_one():
    """Dense counts: argmax(counts + b * rng.gumbel(0, 1, (Q, C))), first maximum on ties."""
    counts = np.repeat(ROWS, 50, axis=0)
    want = np.argmax(counts + 2.0 * np.random.default_rng(4).gumbel(0.0, 1.0, counts.shape), 1)
    assert np.array_equal(noisy_max(counts, Gumbel(2.0), np.random.default_rng(4)), want)


@pytest.mark.parametrize("form", ["dense", "compact"])
def test_the_public_samplers_draw_the_built_in_streams(form):
    """GNMax and LNMax are noisy_max with Gaussian(sigma) and Laplace(1 / gamma): the same
    labels from the same seed (the records replay them)."""
    counts = np.repeat(ROWS, 100, axis=0)
    counts = counts if form == "dense" else _compact(counts)
    gaussian = noisy_max(counts, Gaussian(3.0), np.random.default_rng(1))
    assert np.array_equal(gaussian, aggregate_gnmax(counts, 3.0, np.random.default_rng(1)).labels)
    laplace = noisy_max(counts, Laplace(2.0), np.random.default_rng(1))
    assert np.array_equal(laplace, aggregate_lnmax(counts, 0.5, np.random.default_rng(1)).labels)


def test_answer_every_query_keeps_the_prefix_before_a_stop():
    labels = np.arange(10) % 3
    full = answer_every_query(labels)
    assert full.answered.all() and (full.branch == Branch.TEACHERS).all() and full.num_seen == 10
    part = answer_every_query(labels, max_answered=4)
    assert part.seen.tolist() == [True] * 4 + [False] * 6 and part.num_answered == 4
    assert part.labels.tolist() == [0, 1, 2, 0] + [-1] * 6
    assert (part.branch[4:] == Branch.ABSTAINED).all() and not part.answered[4:].any()
    both = answer_every_query(labels, max_answered=8, max_queries=3)
    assert both.num_seen == 3 and both.labels.dtype == np.int64
    assert not both.labels.flags.writeable and not both.seen.flags.writeable


def test_apply_stop_conditions_counts_the_answers_before_each_query():
    answered = np.array([False, True, False, True, True, False])
    branch = np.where(answered, Branch.TEACHERS, Branch.ABSTAINED)
    labels = np.where(answered, 1, -1)
    result = apply_stop_conditions(labels, answered, branch, max_answered=2)
    # Answers before each query: 0 0 1 1 2 3, so the fifth (the third answer) is not seen.
    assert result.seen.tolist() == [True] * 4 + [False] * 2
    assert result.answered.tolist() == [False, True, False, True, False, False]
    assert result.labels.tolist() == [-1, 1, -1, 1, -1, -1] and result.num_answered == 2


@pytest.mark.parametrize("scale", [0.0, -1.0, float("nan"), float("inf"), "wide"])
@pytest.mark.parametrize("kind", [Gaussian, Laplace, Gumbel])
def test_a_bad_scale_is_one_line_of_usage_error(kind, scale):
    with pytest.raises(UsageError, match=r"\A[^\n]*(sigma|scale)[^\n]*expected[^\n]*\Z"):
        kind(scale)


@pytest.mark.parametrize(
    ("call", "error"),
    [
        (lambda: noisy_max(ROWS, 2.0, np.random.default_rng(0)), TypeError),
        (lambda: noisy_max(ROWS, Gumbel(2.0), 0), TypeError),
        (lambda: noisy_max(-ROWS, Gumbel(2.0), np.random.default_rng(0)), ValueError),
        (lambda: answer_every_query(np.zeros(3)), ValueError),
        (lambda: answer_every_query(np.zeros(3, dtype=int), max_queries=-1), ValueError),
        (lambda: apply_stop_conditions([0, 1], [True], [1, 1]), ValueError),
    ],
)
def test_bad_arguments_are_refused(call, error):
    with pytest.raises(error):
        call()


def test_the_docs_example_mechanism_runs_from_a_purpose_stream():
    """docs/api.md's Gumbel mechanism: its run draws from the "aggregate-answer" stream of the
    seed and stops where the run says."""
    section = (ROOT / "docs" / "api.md").read_text().split("## Samplers", 1)[1]
    (code,) = re.findall(r"```py\n(.*?)```", section, flags=re.S)
    namespace: dict[str, Any] = {}
    exec(compile(code, "docs/api.md", "exec"), namespace)
    mechanism = SimpleNamespace(scale=2.0)  # the parameters' checks are not the example's
    run = SimpleNamespace(limits={"max_answered": 30, "max_queries": None})
    counts = np.repeat(ROWS, 25, axis=0)
    result = namespace["GumbelMax"].run(mechanism, counts, from_seed(5), run)
    stream = from_seed(5).generator("aggregate-answer")
    want = noisy_max(counts, Gumbel(2.0), stream)[:30]
    assert result.num_seen == 30 and np.array_equal(result.labels[:30], want)
    assert (result.labels[30:] == -1).all()


def test_lnmax_at_a_vanishing_gamma_answers_every_compact_query_with_a_class():
    """1 / gamma overflows to inf below gamma ~ 5.6e-309: the noise then swamps the counts,
    and a padding slot of the compact rows must never win (it did, as NaN: label -1 reported
    answered). Every query gets a real class, uniformly over the vocabulary."""
    rows = np.zeros((600, VOCABULARY))
    rows[:, 3], rows[::2, 7] = 9, 4  # rows of one and of two listed classes: padding in some
    result = aggregate_lnmax(_compact(rows), 1e-310, np.random.default_rng(11))
    assert result.answered.all() and (result.labels >= 0).all()
    assert (result.labels < VOCABULARY).all()
    assert len(np.unique(result.labels)) > VOCABULARY // 2  # not stuck on the voted classes

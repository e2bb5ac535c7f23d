"""Tests for pate_cli.mechanisms.aggregators: seeded determinism, branches, stop rules, statistics."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import pytest
from numpy.typing import NDArray

from pate_cli.core.gnmax import logq_gnmax
from pate_cli.core.lnmax import logq_lnmax
from pate_cli.core.threshold import log_pr_answered_threshold
from pate_cli.mechanisms import samplers
from pate_cli.mechanisms.aggregators import (
    aggregate_confident_gnmax,
    aggregate_gnmax,
    aggregate_interactive_gnmax,
    aggregate_lnmax,
)
from pate_cli.mechanisms.samplers import AggregationResult, Branch

Runner = Callable[..., AggregationResult]

# 100 teachers, 4 classes, plurality margins from a tie to near-unanimity.
CONTESTED = np.array(
    [[50, 50, 0, 0], [40, 35, 20, 5], [60, 30, 10, 0], [90, 5, 5, 0], [34, 33, 33, 0]] * 40,
    dtype=np.float64,
)


def _probs_for(counts: NDArray[np.float64]) -> NDArray[np.float64]:
    """A student that mildly disagrees with the teachers (fixed, no randomness)."""
    return np.roll(counts, 1, axis=1) / counts.sum(axis=1, keepdims=True)


RUNNERS: dict[str, Runner] = {
    "lnmax": lambda counts, rng, **kw: aggregate_lnmax(counts, 0.1, rng, **kw),
    "gnmax": lambda counts, rng, **kw: aggregate_gnmax(counts, 10.0, rng, **kw),
    "confident": lambda counts, rng, **kw: aggregate_confident_gnmax(
        counts, 60.0, 10.0, 10.0, rng, **kw
    ),
    "interactive": lambda counts, rng, **kw: aggregate_interactive_gnmax(
        counts, _probs_for(counts), 20.0, 10.0, 10.0, 0.3, rng, **kw
    ),
}


def _seeded(
    name: str, seed: int, counts: NDArray[np.float64] = CONTESTED, **kw: int
) -> AggregationResult:
    return RUNNERS[name](counts, np.random.default_rng(seed), **kw)


@pytest.mark.parametrize("name", RUNNERS)
def test_same_seed_gives_identical_result(name: str) -> None:
    first, second = _seeded(name, 7), _seeded(name, 7)
    for field in ("labels", "answered", "seen", "branch"):
        a, b = getattr(first, field), getattr(second, field)
        assert np.array_equal(a, b)
        assert a.tobytes() == b.tobytes()
    assert first.labels.dtype == np.int64 and first.branch.dtype == np.int8
    assert not first.labels.flags.writeable
    assert not np.array_equal(first.labels, _seeded(name, 8).labels)


@pytest.mark.parametrize("name", RUNNERS)
def test_global_rng_is_untouched(name: str) -> None:
    before = np.random.get_state(legacy=False)  # noqa: NPY002 - inspecting the legacy global RNG
    _seeded(name, 1)
    after = np.random.get_state(legacy=False)  # noqa: NPY002
    assert after["state"]["pos"] == before["state"]["pos"]
    assert np.array_equal(after["state"]["key"], before["state"]["key"])


@pytest.mark.parametrize("name", RUNNERS)
def test_labels_match_documented_stream_layout(name: str) -> None:
    """An auditor reproduces the labels from the seed with the single draws of the docstring."""
    result, rng = _seeded(name, 11), np.random.default_rng(11)
    counts = CONTESTED
    if name == "lnmax":
        expected = np.argmax(counts + rng.laplace(0.0, 1 / 0.1, counts.shape), axis=1)
    elif name == "gnmax":
        expected = np.argmax(counts + 10.0 * rng.standard_normal(counts.shape), axis=1)
    else:
        stat = counts if name == "confident" else counts - 100 * _probs_for(counts)
        threshold = 60.0 if name == "confident" else 20.0
        passed = np.round(stat.max(axis=1)) + 10.0 * rng.standard_normal(len(counts)) >= threshold
        noisy = np.argmax(counts + 10.0 * rng.standard_normal(counts.shape), axis=1)
        assert np.array_equal(result.answered, passed)
        expected = np.where(passed, noisy, result.labels)
    assert np.array_equal(result.labels, expected)


@pytest.mark.parametrize("name", RUNNERS)
def test_chunking_does_not_change_labels(name: str, monkeypatch: pytest.MonkeyPatch) -> None:
    whole = _seeded(name, 3)
    monkeypatch.setattr(samplers, "_CHUNK_ELEMENTS", 13)  # blocks of 3 rows, the last ragged
    chunked = _seeded(name, 3)
    assert whole.labels.tobytes() == chunked.labels.tobytes()
    assert np.array_equal(whole.branch, chunked.branch)


@pytest.mark.parametrize("name", ["lnmax", "gnmax", "confident"])
def test_unanimous_votes_with_tiny_noise_give_the_plurality(name: str) -> None:
    counts = np.zeros((30, 5))
    counts[np.arange(30), np.arange(30) % 5] = 100
    rng = np.random.default_rng(0)
    result = {
        "lnmax": lambda: aggregate_lnmax(counts, 1e3, rng),
        "gnmax": lambda: aggregate_gnmax(counts, 1e-3, rng),
        "confident": lambda: aggregate_confident_gnmax(counts, 50.0, 1e-3, 1e-3, rng),
    }[name]()
    assert np.array_equal(result.labels, np.arange(30) % 5)
    assert result.answered.all() and (result.branch == Branch.TEACHERS).all()


def test_noise_at_the_float_limit_is_decided_on_the_noise() -> None:
    """sigma * z overflows to +-inf near 1.8e308: the rows fall back on counts / sigma + z.

    counts / sigma underflows to 0 there, so the label is the argmax of the draws alone,
    never the first class by an inf == inf tie.
    """
    counts = np.zeros((200, 4))
    counts[:, 0] = 250
    sigma = 1.7e308
    z = np.random.default_rng(9).standard_normal(counts.shape)
    with np.errstate(over="ignore"):
        assert not np.isfinite(sigma * z).all()
    result = aggregate_gnmax(counts, sigma, np.random.default_rng(9))
    assert np.array_equal(result.labels, z.argmax(axis=1))


def test_confident_threshold_extremes() -> None:
    rng = np.random.default_rng(5)
    none = aggregate_confident_gnmax(CONTESTED, 1e9, 10.0, 10.0, rng)
    assert (none.labels == -1).all() and not none.answered.any() and none.seen.all()
    assert (none.branch == Branch.ABSTAINED).all() and none.num_answered == 0
    every = aggregate_confident_gnmax(CONTESTED, -1e9, 10.0, 10.0, rng)
    assert every.answered.all() and (every.labels >= 0).all() and every.num_answered == 200


def test_confident_answered_fraction_matches_log_pr_answered() -> None:
    counts = np.repeat(np.array([[90, 10, 0], [100, 0, 0], [110, 0, 0], [70, 20, 10]]), 2000, 0)
    result = aggregate_confident_gnmax(counts, 100.0, 15.0, 5.0, np.random.default_rng(2))
    pr = np.exp(log_pr_answered_threshold(counts, 100.0, 15.0))
    se = np.sqrt(np.sum(pr * (1 - pr))) / len(pr)
    assert abs(result.answered.mean() - pr.mean()) <= 4 * se


def test_interactive_answered_fraction_uses_the_same_statistic_as_accounting() -> None:
    counts = np.repeat(np.array([[60.0, 40.0], [75.0, 25.0], [50.0, 50.0]]), 3000, 0)
    probs = np.repeat(np.array([[0.5, 0.5], [0.305, 0.695], [0.9, 0.1]]), 3000, 0)
    result = aggregate_interactive_gnmax(
        counts, probs, 40.0, 8.0, 5.0, 0.99, np.random.default_rng(9)
    )
    pr = np.exp(log_pr_answered_threshold(counts - 100 * probs, 40.0, 8.0))
    se = np.sqrt(np.sum(pr * (1 - pr))) / len(pr)
    assert abs(result.answered.mean() - pr.mean()) <= 4 * se


GAPS = np.array([1, 3, 6, 10, 15, 25])


def _gap_counts(repeats: int) -> NDArray[np.float64]:
    """Rows with top 40 + gap on class 0, runner-up 40, the rest spread (C = 5)."""
    rows = np.array([[40 + g, 40, 10, 6, 4] for g in GAPS], dtype=np.float64)
    return np.repeat(rows, repeats, axis=0)


@pytest.mark.parametrize(
    ("run", "logq"),
    [
        (lambda c, rng: aggregate_gnmax(c, 6.0, rng), lambda c: logq_gnmax(c, 6.0)),
        (lambda c, rng: aggregate_lnmax(c, 0.2, rng), lambda c: logq_lnmax(c, 0.2)),
    ],
    ids=["gnmax", "lnmax"],
)
def test_disagreement_rate_stays_below_logq_bound(
    run: Callable[..., AggregationResult], logq: Callable[..., NDArray[np.float64]]
) -> None:
    repeats = 2000
    counts = _gap_counts(repeats)
    disagree = run(counts, np.random.default_rng(4)).labels != 0
    bound = np.exp(logq(counts)).reshape(len(GAPS), repeats)[:, 0]
    rate = disagree.reshape(len(GAPS), repeats).mean(axis=1)
    se = np.sqrt(bound * (1 - bound) / repeats)
    assert np.all(rate <= bound + 4 * se), (rate, bound)
    assert rate[0] > 0.1  # the smallest gap is genuinely contested: the test has power


def test_interactive_branches_on_hand_made_cases() -> None:
    counts = np.array([[95, 5, 0], [95, 5, 0], [95, 5, 0], [0, 10, 90]], dtype=np.float64)
    probs = np.array([[0.95, 0.05, 0.0], [0.05, 0.95, 0.0], [0.94, 0.06, 0.0], [0.1, 0.5, 0.4]])
    # Case 0: the student agrees and is confident -> reinforced, no teacher answer.
    # Case 1: the student disagrees -> the teachers answer with their plurality.
    # Case 2: agrees but below the confidence 0.945 -> abstain.
    # Case 3: n - M p peaks at 50 -> answered (teachers say class 2).
    result = aggregate_interactive_gnmax(
        counts, probs, 40.0, 1e-3, 1e-3, 0.945, np.random.default_rng(0)
    )
    assert result.branch.tolist() == [
        Branch.STUDENT,
        Branch.TEACHERS,
        Branch.ABSTAINED,
        Branch.TEACHERS,
    ]
    assert result.labels.tolist() == [0, 0, -1, 2]
    assert result.answered.tolist() == [False, True, False, True]
    assert (result.num_answered, result.num_student, result.num_seen) == (2, 1, 4)
    explicit = aggregate_interactive_gnmax(
        counts, probs, 40.0, 1e-3, 1e-3, 0.945, np.random.default_rng(0), num_teachers=100
    )
    assert np.array_equal(explicit.branch, result.branch)
    # With M = 10 every n - M p is large: the teachers answer everything.
    small_m = aggregate_interactive_gnmax(
        counts, probs, 40.0, 1e-3, 1e-3, 0.945, np.random.default_rng(0), num_teachers=10
    )
    assert small_m.answered.all()


@pytest.mark.parametrize("name", RUNNERS)
@pytest.mark.parametrize("limit", [0, 1, 17, 60])
def test_max_answered_stops_after_exactly_n_answers(name: str, limit: int) -> None:
    full = _seeded(name, 21)
    part = _seeded(name, 21, max_answered=limit)
    assert part.num_answered == min(limit, full.num_answered)
    n = part.num_seen
    assert np.array_equal(part.seen, np.arange(len(CONTESTED)) < n)  # a prefix
    if 0 < n < len(CONTESTED):
        assert part.answered[n - 1]  # stopped right after the last allowed answer
    for field in ("labels", "answered", "branch"):
        assert np.array_equal(getattr(part, field)[:n], getattr(full, field)[:n])
    assert (part.labels[n:] == -1).all() and not part.answered[n:].any()
    assert (part.branch[n:] == Branch.ABSTAINED).all()


@pytest.mark.parametrize("name", RUNNERS)
def test_max_queries_keeps_a_prefix_with_the_same_labels(name: str) -> None:
    full = _seeded(name, 5)
    part = _seeded(name, 5, max_queries=33)
    assert np.array_equal(part.seen, np.arange(len(CONTESTED)) < 33)
    assert np.array_equal(part.labels[:33], full.labels[:33])
    assert (part.labels[33:] == -1).all()
    both = _seeded(name, 5, max_queries=33, max_answered=5)
    assert both.num_seen <= 33 and both.num_answered == min(5, part.num_answered)
    assert _seeded(name, 5, max_answered=10**6).num_seen == len(CONTESTED)


def test_empty_input() -> None:
    result = aggregate_confident_gnmax(np.zeros((0, 3)), 1.0, 1.0, 1.0, np.random.default_rng(0))
    assert result.labels.shape == (0,) and result.num_seen == 0


GOOD = np.array([[3.0, 1.0], [0.0, 4.0]])
PROBS = np.array([[0.5, 0.5], [0.2, 0.8]])
RNG = np.random.default_rng(0)


@pytest.mark.parametrize(
    "call",
    [
        lambda: aggregate_gnmax(GOOD, 0.0, RNG),
        lambda: aggregate_gnmax(GOOD, float("nan"), RNG),
        lambda: aggregate_gnmax(GOOD, float("inf"), RNG),
        lambda: aggregate_lnmax(GOOD, -1.0, RNG),
        lambda: aggregate_gnmax(GOOD[0], 1.0, RNG),
        lambda: aggregate_gnmax(np.zeros((2, 0)), 1.0, RNG),
        lambda: aggregate_gnmax(-GOOD, 1.0, RNG),
        lambda: aggregate_gnmax(GOOD * np.nan, 1.0, RNG),
        lambda: aggregate_gnmax(GOOD, 1.0, RNG, max_answered=-1),
        lambda: aggregate_gnmax(GOOD, 1.0, RNG, max_queries=True),
        lambda: aggregate_confident_gnmax(GOOD, 1.0, 0.0, 1.0, RNG),
        lambda: aggregate_confident_gnmax(GOOD, float("nan"), 1.0, 1.0, RNG),
        lambda: aggregate_interactive_gnmax(GOOD, PROBS[:1], 1.0, 1.0, 1.0, 0.5, RNG),
        lambda: aggregate_interactive_gnmax(GOOD, -PROBS, 1.0, 1.0, 1.0, 0.5, RNG),
        lambda: aggregate_interactive_gnmax(GOOD, PROBS * np.inf, 1.0, 1.0, 1.0, 0.5, RNG),
        lambda: aggregate_interactive_gnmax(GOOD, PROBS, 1.0, 1.0, 1.0, float("nan"), RNG),
        lambda: aggregate_interactive_gnmax(GOOD, PROBS, 1.0, 1.0, 1.0, 0.5, RNG, num_teachers=0),
    ],
)
def test_bad_parameters_raise_value_error(call: Callable[[], AggregationResult]) -> None:
    with pytest.raises(ValueError):
        call()


def test_rng_must_be_a_generator() -> None:
    with pytest.raises(TypeError):
        aggregate_gnmax(GOOD, 1.0, 0)  # type: ignore[arg-type]

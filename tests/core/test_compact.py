"""Compact histograms (``pate_cli.core.compact``) against the dense ones they stand for.

The oracle is the dense (Q, C) array itself: every figure computed from a ``Compact`` must be
the one the dense code computes on ``compact.dense(C)``, whatever the closed forms inside. The
histograms are random (seeded) with the cases that trip a held-by-voted-classes form: rows
without votes, ties at the top, votes elsewhere than class 0, a row voting on every class,
one or a few classes, and a vocabulary of 60000.
"""

from __future__ import annotations

import mpmath
import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from pate_cli.core import compact as compact_mod
from pate_cli.core.agreement import gaussian_agreement, laplace_agreement
from pate_cli.core.compact import Compact
from pate_cli.core.gnmax import logq_gnmax
from pate_cli.core.lnmax import logq_lnmax
from pate_cli.core.ls_cells import local_sensitivity_gnmax
from pate_cli.core.smooth import local_sensitivity_total

CLASSES = [1, 2, 3, 10, 500, 60000]
SIGMAS = [0.5, 4.0, 60.0]
GAMMAS = [0.05, 0.5, 3.0]


def random_histograms(
    seed: int, num_queries: int, num_classes: int, *, max_count: int = 50, integer: bool = True
) -> np.ndarray:
    """Rows voting on 0..6 classes, then the special rows: no votes, a tie at the top, votes
    only away from class 0, the top tied with a later class, and (C <= 10) every class."""
    rng = np.random.default_rng(seed)
    dense = np.zeros((num_queries, num_classes))
    for row in dense:
        voted = rng.choice(
            num_classes, size=rng.integers(0, min(6, num_classes) + 1), replace=False
        )
        if integer:
            row[voted] = rng.integers(1, max_count + 1, voted.size)
        else:
            row[voted] = rng.uniform(0.25, max_count, voted.size)
    special = [np.zeros(num_classes)]
    if num_classes >= 2:
        tie = np.zeros(num_classes)
        tie[[0, num_classes - 1]] = 7
        special.append(tie)
        away = np.zeros(num_classes)
        away[num_classes - 1] = 5
        special.append(away)
    if num_classes >= 3:
        later = np.zeros(num_classes)
        later[[1, 2]] = [3, 9]
        later[num_classes - 1] = 9
        special.append(later)
    if num_classes <= 10:
        special.append(rng.integers(1, max_count + 1, num_classes).astype(np.float64))
    return np.vstack([dense, *special])


def histograms_summing_to(seed: int, num_queries: int, num_classes: int, total: int) -> np.ndarray:
    """Integer votes of ``total`` teachers per row, on 1..6 classes (and every class when C
    is small), with a tie at the top and votes away from class 0."""
    rng = np.random.default_rng(seed)
    dense = np.zeros((num_queries, num_classes))
    for row in dense:
        voted = rng.choice(
            num_classes, size=rng.integers(1, min(6, num_classes) + 1), replace=False
        )
        share = rng.dirichlet(np.full(voted.size, 0.7))
        row[voted] = rng.multinomial(total, share)
    extra = []
    if num_classes >= 2:
        assert total % 2 == 0
        tie = np.zeros(num_classes)
        tie[[0, num_classes - 1]] = total // 2
        extra.append(tie)
        away = np.zeros(num_classes)
        away[num_classes - 1] = total
        extra.append(away)
    if num_classes <= 10:
        extra.append(rng.multinomial(total, np.full(num_classes, 1 / num_classes)).astype(float))
    return np.vstack([dense, *extra])


def compact_of(dense: np.ndarray, num_classes: int | np.ndarray | None = None) -> Compact:
    """A Compact from the non-zero entries of ``dense`` (row-major: sorted by (row, column))."""
    rows, columns = np.nonzero(dense)
    return Compact.from_sorted_entries(
        rows.astype(np.int64),
        columns.astype(np.int64),
        dense[rows, columns],
        dense.shape[0],
        dense.shape[1] if num_classes is None else num_classes,
    )


def layout_oracle(dense: np.ndarray) -> tuple[list[list[float]], list[list[int]], list[int]]:
    """The documented layout, row by row: the voted classes in class order, then the smallest
    zero class (if any); the number of the other zero classes."""
    values, classes, zeros = [], [], []
    for row in dense:
        voted = [int(c) for c in np.flatnonzero(row)]
        unvoted = [int(c) for c in np.flatnonzero(row == 0)]
        values.append([float(row[c]) for c in voted] + ([0.0] if unvoted else []))
        classes.append(voted + unvoted[:1])
        zeros.append(max(len(unvoted) - 1, 0))
    return values, classes, zeros


def assert_same_logs(got: np.ndarray, want: np.ndarray, rtol: float) -> None:
    """Equal -inf where the dense figure is -inf, else equal to ``rtol`` relative."""
    assert got.shape == want.shape
    assert np.array_equal(np.isneginf(got), np.isneginf(want)), (got, want)
    finite = np.isfinite(want)
    np.testing.assert_allclose(got[finite], want[finite], rtol=rtol, atol=0)


# --- layout and helpers ---------------------------------------------------------------------


@pytest.mark.parametrize("num_classes", CLASSES)
def test_from_sorted_entries_follows_the_documented_layout_and_round_trips(num_classes):
    num_queries = 4 if num_classes == 60000 else 40
    dense = random_histograms(1, num_queries, num_classes)
    counts = compact_of(dense)
    values, classes, zeros = layout_oracle(dense)
    width = max(len(v) for v in values)
    assert counts.values.shape == counts.classes.shape == (dense.shape[0], width)
    for q in range(dense.shape[0]):
        n = len(values[q])
        assert counts.values[q, :n].tolist() == values[q]
        assert counts.classes[q, :n].tolist() == classes[q]
        assert np.all(np.isneginf(counts.values[q, n:])) and np.all(counts.classes[q, n:] == -1)
    assert counts.zeros.tolist() == zeros
    assert counts.vocabulary == num_classes and counts.shape == dense.shape
    assert np.array_equal(counts.num_classes, np.full(dense.shape[0], num_classes))
    assert np.array_equal(counts.dense(num_classes), dense)
    assert np.array_equal(compact_mod.row_sums(counts), dense.sum(axis=1))


@given(
    st.integers(1, 12).flatmap(
        lambda c: st.lists(
            st.lists(st.integers(0, 4), min_size=c, max_size=c), min_size=1, max_size=8
        )
    )
)
def test_round_trip_plurality_and_top_two_match_dense(rows):
    dense = np.array(rows, dtype=np.float64)
    num_classes = dense.shape[1]
    counts = compact_of(dense)
    assert np.array_equal(counts.dense(num_classes), dense)
    assert np.array_equal(compact_mod.plurality(counts), np.argmax(dense, axis=1))
    ordered = -np.sort(-dense, axis=1)
    top, second = compact_mod.top_two_values(counts)
    assert np.array_equal(top, ordered[:, 0])
    want_second = ordered[:, 1] if num_classes > 1 else np.full(dense.shape[0], -np.inf)
    assert np.array_equal(second, want_second)


def test_plurality_is_the_first_maximal_class_in_the_hard_rows():
    dense = np.array(
        [
            [0, 0, 0, 0, 0, 0],  # no votes: class 0, as argmax
            [0, 0, 4, 0, 1, 0],  # class 0 is a zero class, the votes elsewhere
            [0, 3, 0, 0, 3, 0],  # tie between voted classes: the first
            [2, 2, 2, 2, 2, 2],  # every class voted, all tied
            [0, 0, 0, 0, 0, 9],  # the last class alone
        ],
        dtype=np.float64,
    )
    counts = compact_of(dense)
    assert compact_mod.plurality(counts).tolist() == [0, 2, 1, 0, 5]
    top, second = compact_mod.top_two_values(counts)
    assert top.tolist() == [0, 4, 3, 2, 9] and second.tolist() == [0, 1, 3, 2, 0]
    # The zero class listed for the second row is class 0, its first one; 3 more are unlisted.
    assert counts.classes[1].tolist()[:3] == [2, 4, 0] and counts.zeros.tolist() == [5, 3, 3, 0, 4]


def test_a_row_of_one_class_has_no_second_value():
    counts = compact_of(np.array([[3.0], [0.0]]))
    top, second = compact_mod.top_two_values(counts)
    assert top.tolist() == [3.0, 0.0] and np.all(np.isneginf(second))
    assert compact_mod.plurality(counts).tolist() == [0, 0]


# --- the figures --------------------------------------------------------------------------


def _cases(integer: bool = True) -> list:
    return [
        pytest.param(c, seed, integer, id=f"C{c}-seed{seed}-{'int' if integer else 'float'}")
        for c in CLASSES
        for seed in (11, 12)
    ]


def exact_logq(row: np.ndarray, scale: float, lnmax: bool) -> float:
    """Prop. 7 (GNMax, sigma = ``scale``) or Lemma 4 (LNMax, gamma = ``scale``) in 40 digits,
    over the row's distinct counts with their multiplicities, capped at 1 - 1/C."""
    mpmath.mp.dps = 40
    top = row.max()
    values, times = np.unique(row, return_counts=True)
    q = mpmath.mpf(0)
    for value, count in zip(values, times, strict=True):
        others = int(count) - (value == top)  # the union bound leaves one maximal class out
        gap = mpmath.mpf(float(top)) - mpmath.mpf(float(value))
        if lnmax:
            term = (2 + scale * gap) / (4 * mpmath.exp(scale * gap))
        else:
            term = mpmath.ncdf(-gap / (mpmath.sqrt(2) * scale))
        q += others * term
    q = min(q, 1 - mpmath.mpf(1) / row.size)
    return float(mpmath.log(q)) if q > 0 else -np.inf


@pytest.mark.parametrize(("num_classes", "seed", "integer"), _cases() + _cases(integer=False))
def test_logq_gnmax_and_lnmax_equal_dense(num_classes, seed, integer):
    num_queries = 5 if num_classes == 60000 else 60
    dense = random_histograms(seed, num_queries, num_classes, integer=integer)
    counts = compact_of(dense)
    if num_classes < 60000:
        for sigma in SIGMAS:
            assert_same_logs(logq_gnmax(counts, sigma), logq_gnmax(dense, sigma), rtol=1e-12)
        for gamma in GAMMAS:
            assert_same_logs(logq_lnmax(counts, gamma), logq_lnmax(dense, gamma), rtol=1e-12)
        return
    # 60000 classes: the truth is a 40-digit sum, which the compact figure meets to 1e-12,
    # and the dense one too (its columns are summed pairwise: summed in order, an error up
    # to C * eps of q, 1.5e-12 relative, was seen).
    for scale, function, lnmax in [(s, logq_gnmax, False) for s in SIGMAS] + [
        (g, logq_lnmax, True) for g in GAMMAS
    ]:
        got, want = function(counts, scale), function(dense, scale)
        exact = np.array([exact_logq(row, scale, lnmax) for row in dense])
        assert_same_logs(got, exact, rtol=1e-12)
        assert_same_logs(want, exact, rtol=1e-12)


@given(
    st.integers(1, 12).flatmap(
        lambda c: st.lists(
            st.lists(st.integers(0, 60), min_size=c, max_size=c), min_size=1, max_size=6
        )
    ),
    st.sampled_from(SIGMAS),
    st.sampled_from(GAMMAS),
)
def test_logq_of_any_small_histogram_equals_dense(rows, sigma, gamma):
    dense = np.array(rows, dtype=np.float64)
    counts = compact_of(dense)
    assert_same_logs(logq_gnmax(counts, sigma), logq_gnmax(dense, sigma), rtol=1e-12)
    assert_same_logs(logq_lnmax(counts, gamma), logq_lnmax(dense, gamma), rtol=1e-12)


def test_logq_is_not_capped_everywhere_in_these_cases():
    """The comparisons above are not between two caps: most rows' q is below 1 - 1/C."""
    dense = random_histograms(11, 60, 500)
    logq = logq_gnmax(dense, 4.0)
    assert np.count_nonzero(logq < np.log(1 - 1 / 500) - 1) > 30
    assert np.count_nonzero(np.isfinite(logq_lnmax(dense, 0.5))) == dense.shape[0]


@pytest.mark.parametrize("num_classes", [c for c in CLASSES if c <= 500])
def test_agreement_equals_dense(num_classes):
    dense = random_histograms(21, 40, num_classes)
    counts = compact_of(dense)
    for sigma in SIGMAS:
        got, want = gaussian_agreement(counts, sigma), gaussian_agreement(dense, sigma)
        np.testing.assert_allclose(got, want, rtol=0, atol=1e-12)
    for gamma in GAMMAS:
        got, want = laplace_agreement(counts, gamma), laplace_agreement(dense, gamma)
        np.testing.assert_allclose(got, want, rtol=0, atol=1e-12)
    if num_classes > 1:  # not all 1: the agreement depends on the votes here
        assert gaussian_agreement(dense, 4.0).min() < 0.9


LS_CASES = [
    pytest.param(c, m, sigma, order, id=f"C{c}-M{m}-sigma{sigma}-order{order}")
    for c, m in [(1, 20), (2, 24), (3, 30), (10, 40), (300, 32)]
    for sigma, order in [(2.0, 6.0), (3.0, 3.0), (4.0, 10.0)]
]


@pytest.mark.parametrize(("num_classes", "num_teachers", "sigma", "order"), LS_CASES)
def test_local_sensitivity_gnmax_equals_dense(num_classes, num_teachers, sigma, order):
    dense = histograms_summing_to(31, 30, num_classes, num_teachers)
    counts = compact_of(dense)
    for reference in (False, True):
        got = local_sensitivity_gnmax(counts, num_teachers, sigma, order, reference=reference)
        want = local_sensitivity_gnmax(dense, num_teachers, sigma, order, reference=reference)
        assert got.shape == want.shape == (dense.shape[0], num_teachers)
        np.testing.assert_allclose(got, want, rtol=1e-10, atol=0)
    if num_classes > 1:  # the walks ran: not one plateau for every query and distance
        assert np.unique(want).size >= 5


@pytest.mark.parametrize(("num_classes", "num_teachers", "sigma", "order"), LS_CASES)
def test_local_sensitivity_total_equals_dense(num_classes, num_teachers, sigma, order):
    dense = histograms_summing_to(41, 30, num_classes, num_teachers)
    counts = compact_of(dense)
    calls = [
        {},
        {"threshold": 0.6 * num_teachers, "sigma1": 3.0},
        {"threshold": 0.9 * num_teachers, "sigma1": 8.0, "data_independent_step1": True},
        {"threshold": 0.5 * num_teachers, "sigma1": 3.0, "reference": True},
    ]
    for extra in calls:
        got = local_sensitivity_total(counts, num_teachers, order, sigma, **extra)
        want = local_sensitivity_total(dense, num_teachers, order, sigma, **extra)
        assert got.shape == want.shape == (num_teachers,)
        np.testing.assert_allclose(got, want, rtol=1e-10, atol=0, err_msg=str(extra))
        if num_classes > 1:
            assert want.max() > 0, extra


# --- candidate sets -----------------------------------------------------------------------


def test_candidate_sets_hold_each_querys_classes():
    per_row = np.array([3, 1, 5, 2, 7], dtype=np.int64)
    dense = np.array(
        [
            [2, 0, 5, 0, 0, 0, 0],
            [4, 0, 0, 0, 0, 0, 0],
            [0, 0, 0, 0, 0, 0, 0],
            [0, 6, 0, 0, 0, 0, 0],
            [0, 3, 0, 0, 3, 0, 1],
        ],
        dtype=np.float64,
    )
    counts = compact_of(dense, per_row)
    assert counts.num_classes.tolist() == per_row.tolist() and counts.vocabulary == 7
    assert counts.zeros.tolist() == [0, 0, 4, 0, 3]
    assert np.array_equal(counts.dense(7), dense)
    for sigma in SIGMAS:
        want = np.concatenate(
            [logq_gnmax(dense[q : q + 1, :c], sigma) for q, c in enumerate(per_row)]
        )
        assert_same_logs(logq_gnmax(counts, sigma), want, rtol=1e-12)
    for gamma in GAMMAS:
        want = np.concatenate(
            [logq_lnmax(dense[q : q + 1, :c], gamma) for q, c in enumerate(per_row)]
        )
        assert_same_logs(logq_lnmax(counts, gamma), want, rtol=1e-12)
    assert np.isneginf(logq_gnmax(counts, 4.0)[1])  # one candidate: a fixed outcome


def test_random_candidate_sets_equal_the_dense_rows():
    rng = np.random.default_rng(51)
    per_row = rng.integers(1, 40, 80)
    dense = np.zeros((per_row.size, 40))
    for q, c in enumerate(per_row):
        voted = rng.choice(c, size=rng.integers(0, min(6, c) + 1), replace=False)
        dense[q, voted] = rng.integers(1, 30, voted.size)
    counts = compact_of(dense, per_row)
    for sigma in SIGMAS:
        want = np.concatenate(
            [logq_gnmax(dense[q : q + 1, :c], sigma) for q, c in enumerate(per_row)]
        )
        assert_same_logs(logq_gnmax(counts, sigma), want, rtol=1e-12)


def test_an_entry_outside_its_querys_candidates_is_refused():
    row = np.array([0, 1, 1], dtype=np.int64)
    column = np.array([1, 0, 3], dtype=np.int64)
    value = np.array([2.0, 1.0, 4.0])
    with pytest.raises(ValueError):
        Compact.from_sorted_entries(row, column, value, 2, np.array([5, 3]))
    with pytest.raises(ValueError):
        Compact.from_sorted_entries(row, column, value, 2, 3)
    # At the last candidate it is accepted.
    fits = Compact.from_sorted_entries(row, column, value, 2, np.array([5, 4]))
    assert fits.dense(5).tolist() == [[0, 2, 0, 0, 0], [1, 0, 0, 4, 0]]

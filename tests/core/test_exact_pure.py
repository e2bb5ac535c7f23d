"""The composition of pure-DP steps of several epsilon0 (``core.exact_pure``) against
independent computations: the sum over every subset of the steps (Murtagh and Vadhan's
characterisation, term by term, at 50 digits) and the double sum over the two counts at 50
digits; never below either, and within rounding of them."""

from __future__ import annotations

import itertools
import math
import warnings

import mpmath
import pytest

from pate_cli.core import exact, exact_pure

mpmath.mp.dps = 50


def subset_delta(eps: float, epsilons: list[float]) -> mpmath.mpf:
    """delta(eps) of the optimal composition of eps_i-DP steps, summed over every subset S
    of the steps: (1 / prod(1 + e^eps_i)) sum_S [e^(sum_S eps_i) - e^eps e^(sum_not_S eps_i)]_+."""
    values = [mpmath.mpf(e) for e in epsilons]
    total = mpmath.mpf(0)
    for chosen in itertools.product((True, False), repeat=len(values)):
        inside = sum((v for v, c in zip(values, chosen, strict=True) if c), mpmath.mpf(0))
        outside = sum((v for v, c in zip(values, chosen, strict=True) if not c), mpmath.mpf(0))
        total += max(mpmath.e**inside - mpmath.e ** mpmath.mpf(eps) * mpmath.e**outside, 0)
    return total / mpmath.fprod(1 + mpmath.e**v for v in values)


def count_delta(eps: float, shares: list[tuple[float, int]]) -> mpmath.mpf:
    """The same as a sum over how many steps of each share fall outside S (binomial
    weights), at 50 digits: the privacy loss (k1 - 2 l1) e1 + (k2 - 2 l2) e2."""
    (e1, k1), (e2, k2) = ((mpmath.mpf(e), k) for e, k in shares)
    q1, q2 = 1 / (1 + mpmath.e**e1), 1 / (1 + mpmath.e**e2)
    total = mpmath.mpf(0)
    for l1 in range(k1 + 1):
        w1 = mpmath.binomial(k1, l1) * q1**l1 * (1 - q1) ** (k1 - l1)
        for l2 in range(k2 + 1):
            loss = (k1 - 2 * l1) * e1 + (k2 - 2 * l2) * e2
            if loss > eps:
                w2 = mpmath.binomial(k2, l2) * q2**l2 * (1 - q2) ** (k2 - l2)
                total += w1 * w2 * (1 - mpmath.e ** (eps - loss))
    return total


SMALL = [
    [(0.3, 3), (0.7, 5)],
    [(2.0, 4), (0.5, 5)],
    [(1.0, 2), (0.05, 8)],
    [(0.01, 6), (0.1, 4)],
]


@pytest.mark.parametrize("shares", SMALL)
def test_the_curve_is_the_subset_sum_from_above(shares):
    """At eps from 0 to the basic composition: never below the subset sum, above it by at
    most 1e-10 in the log."""
    epsilons = [e for e, k in shares for _ in range(k)]
    curve = exact_pure.curve(shares)
    top = sum(epsilons)
    for fraction in (0.0, 0.1, 0.25, 0.4, 0.55, 0.7, 0.85, 0.95, 0.999):
        eps = fraction * top
        truth = subset_delta(eps, epsilons)
        mine = curve(eps)
        if truth == 0:
            assert mine == -math.inf
            continue
        excess = mine - float(mpmath.log(truth))
        assert 0 <= excess <= 1e-10, (shares, eps, excess)


@pytest.mark.parametrize(
    "shares", [[(0.02, 120), (0.2, 40)], [(0.5, 30), (0.05, 90)], [(1.5, 12), (0.3, 25)]]
)
@pytest.mark.parametrize("delta", [1e-3, 1e-6])
def test_the_epsilon_holds_its_delta_and_no_less_would(shares, delta):
    """delta at the returned epsilon, by the double sum at 50 digits, is within the target;
    1e-6 lower it is not: the figure is the optimal composition, from above."""
    eps = exact_pure.heterogeneous_epsilon(shares, delta)
    assert count_delta(eps, shares) <= delta
    assert count_delta(eps * (1 - 1e-6), shares) > delta


def test_several_epsilon0_are_raised_to_two_from_above():
    """Three values of eps0: the curve of the two largest levels (the smallest raised) is
    never below the subset sum of the three."""
    shares = [(0.1, 3), (0.25, 3), (0.4, 3)]
    epsilons = [e for e, k in shares for _ in range(k)]
    curve = exact_pure.curve(shares)
    for eps in (0.0, 0.5, 1.0, 1.5, 2.0, 2.5):
        assert curve(eps) >= float(mpmath.log(subset_delta(eps, epsilons)))
    raised = exact_pure.heterogeneous_epsilon([(0.25, 6), (0.4, 3)], 1e-4)
    basic = exact_pure.basic_epsilon(shares)  # 2.25: below the raised levels' 2.685 here
    assert exact_pure.heterogeneous_epsilon(shares, 1e-4) == min(raised, basic) == basic


def test_it_lies_between_the_homogeneous_compositions():
    """Each step is eps_max-DP and eps_min-DP at best: the optimal composition of all the
    steps at eps_min is below it, at eps_max above it, and the basic sum bounds it."""
    shares = [(0.01, 9000), (0.1, 9000)]
    mine = exact_pure.heterogeneous_epsilon(shares, 1e-5)
    assert exact.pure_composition_epsilon(0.01, 18000, 1e-5) < mine
    assert mine < exact.pure_composition_epsilon(0.1, 18000, 1e-5)
    assert mine < exact_pure.basic_epsilon(shares)
    assert mine == pytest.approx(85.16566624, rel=1e-8)  # the window's sum, once


def test_beyond_the_windows_the_closed_forms_bound_it(monkeypatch):
    """With the windows made tiny, the figure is the smaller of Hoeffding's bound and each
    share's optimal composition beside the others' largest loss: above the optimal one."""
    shares = [(0.05, 60), (0.3, 20)]
    summed = exact_pure.heterogeneous_epsilon(shares, 1e-5)
    monkeypatch.setattr(exact_pure, "_PAIR_WINDOW", 4)
    closed = exact_pure.heterogeneous_epsilon(shares, 1e-5)
    assert summed < closed < exact_pure.basic_epsilon(shares)
    assert count_delta(closed, shares) <= 1e-5
    # Each closed form alone, and their minimum, never below the double sum.
    curve = exact_pure.curve(shares)
    for eps in (2.0, 4.0, 6.0, 8.0, 10.0):
        truth = float(mpmath.log(count_delta(eps, shares)))
        assert curve(eps) >= truth
        assert exact_pure._log_delta_hoeffding(eps, shares) >= truth
    # Hoeffding's, by hand: c = sum k e tanh(e/2), V = sum k e^2, eps = c + sqrt(2 V log 1e5).
    centre = sum(k * e * math.tanh(e / 2) for e, k in shares)
    spread = sum(k * e * e for e, k in shares)
    assert closed <= centre + math.sqrt(2 * spread * math.log(1e5)) * (1 + 1e-9)


@pytest.mark.parametrize(
    "shares",
    [
        [(1e-300, 5), (0.1, 10)],
        [(0.5, 3), (1e-14, 5)],
        [(60.0, 3), (0.1, 10)],
        [(700.0, 2), (0.1, 3)],
        [(1e300, 1), (0.2, 2)],
        [(0.1, 0), (0.2, 0)],
        [(0.0, 5), (0.2, 7)],
        [(0.1, 2**40), (0.3, 5)],
        [(0.001, 10**6), (0.002, 10**6)],
    ],
)
def test_every_share_gives_a_number_within_the_basic_sum(shares):
    """Epsilons at deltas from the smallest double to 1: never NaN, never below 0, never
    above the basic sum, falling as delta grows; no warning."""
    deltas = [5e-324, 1e-300, 1e-12, 1e-5, 0.1, 1.0]
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        found = [exact_pure.heterogeneous_epsilon(shares, delta) for delta in deltas]
    basic = exact_pure.basic_epsilon(exact_pure.merged(shares)) if exact_pure.merged(shares) else 0
    assert all(0 <= eps <= basic for eps in found)  # NaN fails this too
    assert found == sorted(found, reverse=True)


def test_hoeffding_bound_is_rounded_against_the_user():
    """Hoeffding's log delta of several eps0 (``_log_delta_hoeffding``) at or above the same
    bound in 50-digit arithmetic on 2,000 cases (eps0 1e-6 to 1e-3, k 1e7 to 1e10, 1 to 35
    standard deviations out), where each rounding moves the figure up: a spread rounded down
    put it below in about one case in six, by up to 4.4e-16 relative."""
    import random

    rng = random.Random(20261202)
    mpmath.mp.dps = 50
    for _ in range(2000):
        shares = [
            (10 ** rng.uniform(-6, -3), int(10 ** rng.uniform(7, 10)))
            for _ in range(rng.randint(1, 3))
        ]
        centre = mpmath.fsum(k * mpmath.mpf(e) * mpmath.tanh(mpmath.mpf(e) / 2) for e, k in shares)
        spread = mpmath.fsum(k * mpmath.mpf(e) ** 2 for e, k in shares)
        eps = float(centre + rng.uniform(1, 35) * mpmath.sqrt(spread))
        exact_value = -((mpmath.mpf(eps) - centre) ** 2) / (2 * spread)
        assert exact_pure._log_delta_hoeffding(eps, shares) >= exact_value

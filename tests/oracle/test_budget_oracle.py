"""A budget's total against an independent oracle: runs drawn at random, composed by hand.

The oracle shares no code with ``pate_cli.budget``: every account is written out from the
run's parameters (GNMax mu^2 = 2 Q / sigma^2; Confident- and Interactive-GNMax add
Q s^2 / sigma1^2 with s = 1, or 2 half to even; LNMax is Q mechanisms each 2 gamma-DP; a
GNSS release is RDP at its one order, the mechanism's there plus Theorem 23 of Papernot et
al. 2018), and composed in mpmath at 50 digits:

- all Gaussian: mu = sqrt(sum mu_i^2) on the exact curve
  delta(eps) = Phi(-eps/mu + mu/2) - e^eps Phi(-eps/mu - mu/2), solved by bisection;
- all pure with one eps0: the optimal composition (Kairouz, Oh and Viswanath 2015)
  delta(eps) = sum_l C(k, l) [e^((k-l) eps0) - e^(eps + l eps0)]_+ / (1 + e^eps0)^k, solved
  by bisection;
- otherwise RDP per order, summed over DEFAULT_ORDERS and every listed order (an order a
  release does not list is inf), converted (classic or improved) and minimised.

pate's total must never be below the oracle's (up to rounding: 1e-12 relative) and never
above it by more than 1e-6 relative; a budget whose next charge composes over its limit
refuses it and its file is left as it was.
"""

from __future__ import annotations

import math
import tempfile
from dataclasses import dataclass, replace
from pathlib import Path

import mpmath as mp
import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from pate_cli.budget import Budget, BudgetExceeded, Charge, Release, account_of, compose
from pate_cli.budget.charges import charge_of
from pate_cli.choices import Conversion
from pate_cli.mechanisms import ConfidentGNMax, GNMax, InteractiveGNMax, LNMax
from pate_cli.orders import DEFAULT_ORDERS
from tests.oracle.strategies import EXAMPLES, log_uniform

# Below the oracle by at most rounding; above it by at most this.
BELOW = 1e-12
ABOVE = 1e-6
DPS = 50
# Each example composes a few runs in mpmath: a quarter of the oracle folder's examples.
BUDGET_EXAMPLES = max(20, EXAMPLES // 4)
ORACLE_SETTINGS = settings(max_examples=BUDGET_EXAMPLES)


# ----------------------------------------------------------------------------- runs


@dataclass(frozen=True)
class Run:
    """One charged run: its mechanism's parameters, its queries and its optional release."""

    kind: str  # "gnmax", "confident", "interactive" or "lnmax"
    queries: int
    sigma: float = 0.0
    sigma1: float = 0.0
    threshold: float = 0.0
    gamma: float = 0.0
    half_even: bool = False
    release: tuple[float, float, float] | None = None  # (order, beta, sigma_ss)

    def mechanism(self):
        if self.kind == "gnmax":
            return GNMax(sigma=self.sigma)
        if self.kind == "confident":
            return ConfidentGNMax(threshold=self.threshold, sigma1=self.sigma1, sigma=self.sigma)
        if self.kind == "interactive":
            return InteractiveGNMax(threshold=self.threshold, sigma1=self.sigma1, sigma=self.sigma)
        return LNMax(gamma=self.gamma)

    def pate_release(self) -> Release | None:
        return None if self.release is None else Release(*self.release)

    def charge(self) -> Charge:
        return Charge(
            "aggregate" if self.release is None else "smooth-sensitivity",
            self.mechanism(),
            self.queries,
            half_even=self.half_even,
            release=self.pate_release(),
        )


@st.composite
def releases(draw: st.DrawFn) -> tuple[float, float, float]:
    """A GNSS release fixed in advance: 1 < order < 1 / (2 beta)."""
    order = draw(st.one_of(st.sampled_from([2.0, 8.0, 14.0, 32.0]), st.floats(1.5, 80.0)))
    beta = draw(st.floats(0.0, 0.9)) / (2 * order)
    sigma_ss = draw(log_uniform(0.5, 500.0))
    return (order, beta, sigma_ss)


@st.composite
def runs(
    draw: st.DrawFn,
    kinds: tuple[str, ...] = ("gnmax", "confident", "interactive", "lnmax"),
    gamma: float | None = None,
    with_release: bool = False,
) -> Run:
    kind = draw(st.sampled_from(kinds))
    queries = draw(st.integers(1, 300))
    release = draw(st.one_of(st.none(), releases())) if with_release else None
    if kind == "lnmax":
        g = gamma if gamma is not None else draw(log_uniform(0.002, 0.5))
        return Run(kind, queries, gamma=g, release=release)
    sigma = draw(log_uniform(5.0, 300.0))
    if kind == "gnmax":
        return Run(kind, queries, sigma=sigma, release=release)
    return Run(
        kind,
        queries,
        sigma=sigma,
        sigma1=draw(log_uniform(20.0, 400.0)),
        threshold=draw(st.floats(0.0, 300.0)),
        half_even=draw(st.booleans()),
        release=release,
    )


deltas = log_uniform(1e-9, 1e-3)
conversions = st.sampled_from(["classic", "improved"])


# ----------------------------------------------------------------------------- the oracle


def hand_mu2(run: Run) -> mp.mpf:
    """mu^2 of a Gaussian run, from its parameters."""
    q, sigma = mp.mpf(run.queries), mp.mpf(run.sigma)
    answer = 2 * q / sigma**2
    if run.kind == "gnmax":
        return answer
    s = mp.mpf(2 if run.half_even else 1)
    return q * s**2 / mp.mpf(run.sigma1) ** 2 + answer


def hand_mechanism_rdp(run: Run, order: mp.mpf) -> mp.mpf:
    """The run's mechanism as RDP at ``order``: lambda mu^2 / 2, or Q min(e0, lambda e0^2/2)."""
    if run.kind == "lnmax":
        e0 = 2 * mp.mpf(run.gamma)
        return run.queries * min(e0, order * e0**2 / 2)
    return order * hand_mu2(run) / 2


def hand_gnss_rdp(order: mp.mpf, beta: float, sigma_ss: float) -> mp.mpf:
    """Theorem 23: lambda e^(2 beta) / sigma_ss^2 + (beta lambda - log(1 - 2 lambda beta) / 2)
    / (lambda - 1)."""
    b, s = mp.mpf(beta), mp.mpf(sigma_ss)
    return order * mp.exp(2 * b) / s**2 + (b * order - mp.log(1 - 2 * order * b) / 2) / (order - 1)


def hand_rdp(run: Run, order: mp.mpf) -> mp.mpf:
    """The run as RDP at ``order`` (inf where a release's account says nothing)."""
    if run.release is None:
        return hand_mechanism_rdp(run, order)
    release_order, beta, sigma_ss = run.release
    if order != mp.mpf(release_order):
        return mp.inf
    return hand_mechanism_rdp(run, order) + hand_gnss_rdp(order, beta, sigma_ss)


def bisect_epsilon(delta_of, delta: float) -> mp.mpf:
    """The smallest eps >= 0 with delta_of(eps) <= delta, for a decreasing curve."""
    target = mp.mpf(delta)
    if delta_of(mp.mpf(0)) <= target:
        return mp.mpf(0)
    high = mp.mpf(1)
    while delta_of(high) > target:
        high *= 2
    low = mp.mpf(0)
    while high - low > high * mp.mpf("1e-30"):
        middle = (low + high) / 2
        if delta_of(middle) <= target:
            high = middle
        else:
            low = middle
    return high


def gaussian_delta(eps: mp.mpf, mu: mp.mpf) -> mp.mpf:
    """Dong, Roth and Su 2022, Corollary 2.13."""
    return mp.ncdf(-eps / mu + mu / 2) - mp.exp(eps) * mp.ncdf(-eps / mu - mu / 2)


def gaussian_oracle(mu2: mp.mpf, delta: float) -> mp.mpf:
    mu = mp.sqrt(mu2)
    return bisect_epsilon(lambda eps: gaussian_delta(eps, mu), delta)


def kov_terms(eps0: mp.mpf, k: int) -> tuple[list[mp.mpf], list[mp.mpf]]:
    """C(k, l) e^((k-l) eps0) / (1 + e^eps0)^k and C(k, l) e^(l eps0) / (1 + e^eps0)^k."""
    norm = (1 + mp.exp(eps0)) ** k
    first = [mp.binomial(k, j) * mp.exp((k - j) * eps0) / norm for j in range(k + 1)]
    second = [mp.binomial(k, j) * mp.exp(j * eps0) / norm for j in range(k + 1)]
    return first, second


def kov_delta_literal(eps: mp.mpf, eps0: mp.mpf, k: int) -> mp.mpf:
    """The formula term by term, every positive part taken (the prefix form's check)."""
    first, second = kov_terms(eps0, k)
    return mp.fsum(max(mp.mpf(0), a - mp.exp(eps) * b) for a, b in zip(first, second, strict=True))


def kov_curve(eps0: mp.mpf, k: int):
    """delta(eps) of the optimal composition, in O(1) per point: the term l is positive
    exactly when (k - 2 l) eps0 > eps, a prefix l < (k eps0 - eps) / (2 eps0)."""
    first, second = kov_terms(eps0, k)
    a_prefix, b_prefix = [mp.mpf(0)], [mp.mpf(0)]
    for a, b in zip(first, second, strict=True):
        a_prefix.append(a_prefix[-1] + a)
        b_prefix.append(b_prefix[-1] + b)

    def delta_of(eps: mp.mpf) -> mp.mpf:
        m = int(mp.ceil((k * eps0 - eps) / (2 * eps0)))
        m = min(max(m, 0), k + 1)
        return a_prefix[m] - mp.exp(eps) * b_prefix[m]

    return delta_of


def pure_oracle(eps0: float, k: int, delta: float) -> mp.mpf:
    return bisect_epsilon(kov_curve(mp.mpf(eps0), k), delta)


def rdp_oracle(all_runs: list[Run], delta: float, conversion: str) -> mp.mpf:
    listed = {r.release[0] for r in all_runs if r.release is not None}
    orders = sorted({float(o) for o in DEFAULT_ORDERS} | listed)
    d = mp.mpf(delta)
    best = mp.inf
    for value in orders:
        order = mp.mpf(value)
        total = mp.fsum(hand_rdp(run, order) for run in all_runs)
        if total == mp.inf:
            continue
        if conversion == "classic":
            eps = total + mp.log(1 / d) / (order - 1)
        elif d**2 + mp.expm1(-total) > 0:
            eps = mp.mpf(0)
        else:
            eps = total + mp.log(1 - 1 / order) - mp.log(d * order) / (order - 1)
        best = min(best, eps)
    return best if best == mp.inf else max(best, mp.mpf(0))


def oracle_total(all_runs: list[Run], delta: float, conversion: str) -> tuple[mp.mpf, str]:
    """The runs composed at ``delta`` as the module docstring says, and the method."""
    with mp.workdps(DPS):
        if not all_runs:
            return mp.mpf(0), "none"
        if all(r.release is None and r.kind != "lnmax" for r in all_runs):
            return gaussian_oracle(mp.fsum(hand_mu2(r) for r in all_runs), delta), "gaussian"
        gammas = {r.gamma for r in all_runs}
        if all(r.release is None and r.kind == "lnmax" for r in all_runs) and len(gammas) == 1:
            k = sum(r.queries for r in all_runs)
            return pure_oracle(2 * all_runs[0].gamma, k, delta), "pure-dp-optimal"
        return rdp_oracle(all_runs, delta, conversion), "rdp"


def pate_total(all_runs: list[Run], delta: float, conversion: str):
    accounts = [
        account_of(r.mechanism(), r.queries, half_even=r.half_even, release=r.pate_release())
        for r in all_runs
    ]
    return compose(accounts, delta, Conversion(conversion))


def assert_close_above(ours: float, truth: mp.mpf) -> None:
    """Sound (never below the oracle, up to rounding) and tight (1e-6 relative above)."""
    if truth == mp.inf:
        assert ours == math.inf
        return
    t = float(truth)
    assert ours >= t * (1 - BELOW), f"below the oracle: {ours!r} < {t!r}"
    assert ours <= t * (1 + ABOVE) + 1e-15, f"above the oracle by more than 1e-6: {ours!r} > {t!r}"


# ----------------------------------------------------------------------------- the oracle's self-checks


def test_gaussian_oracle_closed_forms():
    """delta(0) = 2 Phi(mu/2) - 1, and at the oracle's epsilon the curve meets delta."""
    with mp.workdps(DPS):
        for mu in (0.1, 1.0, 3.0):
            assert gaussian_delta(mp.mpf(0), mp.mpf(mu)) == pytest.approx(
                float(2 * mp.ncdf(mp.mpf(mu) / 2) - 1), rel=1e-30
            )
            eps = gaussian_oracle(mp.mpf(mu) ** 2, 1e-5)
            assert gaussian_delta(eps, mp.mpf(mu)) <= mp.mpf(1e-5)
            assert gaussian_delta(eps * (1 - mp.mpf("1e-20")), mp.mpf(mu)) > mp.mpf(1e-5)


def test_pure_oracle_one_step_and_basic_composition():
    """k = 1: delta(eps) = (e^eps0 - e^eps) / (1 + e^eps0) below eps0, so
    eps = log(e^eps0 - delta (1 + e^eps0)); k eps0 is always enough (delta 0 there)."""
    with mp.workdps(DPS):
        for eps0 in (0.01, 0.3, 1.5):
            e0 = mp.mpf(eps0)
            want = mp.log(mp.exp(e0) - mp.mpf(1e-6) * (1 + mp.exp(e0)))
            assert pure_oracle(eps0, 1, 1e-6) == pytest.approx(float(want), rel=1e-25)
            for k in (1, 7, 40):
                assert kov_curve(e0, k)(k * e0) == 0
                assert pure_oracle(eps0, k, 1e-9) <= k * e0


def test_the_comparison_sees_a_bound_slightly_off():
    """1e-9 below the oracle is unsound, 1e-5 above it is loose: both fail."""
    with mp.workdps(DPS):
        truth = gaussian_oracle(mp.mpf(2), 1e-5)
    assert_close_above(float(truth), truth)
    with pytest.raises(AssertionError, match="below"):
        assert_close_above(float(truth) * (1 - 1e-9), truth)
    with pytest.raises(AssertionError, match="above"):
        assert_close_above(float(truth) * (1 + 1e-5), truth)


@pytest.mark.parametrize("k", [1, 2, 5, 17, 60])
@pytest.mark.parametrize("eps0", [0.004, 0.2, 1.3])
def test_pure_oracle_prefix_is_the_literal_sum(k, eps0):
    """The O(1) prefix form of the curve is the formula summed term by term."""
    with mp.workdps(DPS):
        e0 = mp.mpf(eps0)
        curve = kov_curve(e0, k)
        for fraction in ("0", "0.1", "0.33", "0.5", "0.77", "1", "1.2"):
            eps = k * e0 * mp.mpf(fraction)
            literal = kov_delta_literal(eps, e0, k)
            assert abs(curve(eps) - literal) <= mp.mpf("1e-40") * max(literal, mp.mpf(1))


# ----------------------------------------------------------------------------- accounts


@ORACLE_SETTINGS
@given(runs(with_release=True))
def test_accounts_are_the_hand_formulas(run):
    """Every account is its closed form, computed from the run's parameters."""
    account = account_of(
        run.mechanism(), run.queries, half_even=run.half_even, release=run.pate_release()
    )
    with mp.workdps(DPS):
        if run.release is not None:
            order = run.release[0]
            assert account["kind"] == "rdp" and account["orders"] == [order]
            want = hand_rdp(run, mp.mpf(order))
            assert account["rdp"][0] == pytest.approx(float(want), rel=1e-12)
        elif run.kind == "lnmax":
            assert account == {"kind": "pure", "epsilon0": 2 * run.gamma, "count": run.queries}
        else:
            assert account["kind"] == "gaussian" and set(account) == {"kind", "mu"}
            assert account["mu"] == pytest.approx(float(mp.sqrt(hand_mu2(run))), rel=1e-12)


@ORACLE_SETTINGS
@given(runs(), st.integers(0, 400), st.integers(1, 400))
def test_aggregate_charges_at_most_max_queries(run, max_queries, queries):
    """aggregate charges min(Q, --max-queries) queries, every one answered."""
    charge = charge_of(
        "aggregate",
        "aggregate",
        run.mechanism(),
        queries,
        {"max_queries": max_queries, "half_even": run.half_even},
    )
    charged = min(queries, max_queries)
    assert charge.num_queries == charged
    assert charge.account == account_of(run.mechanism(), charged, half_even=run.half_even)
    assert charge.release is None


@ORACLE_SETTINGS
@given(runs(kinds=("gnmax", "confident", "lnmax")), releases())
def test_release_charges_at_its_one_order(run, release):
    """analyze with one order and smooth-sensitivity charge the mechanism plus the release
    at that order; analyze --no-release the mechanism alone."""
    order, beta, sigma_ss = release
    options = {"beta": beta, "sigma_ss": sigma_ss, "half_even": run.half_even}
    analyzed = charge_of(
        "analyze",
        "analyze",
        run.mechanism(),
        run.queries,
        options | {"release": True, "orders": [order]},
    )
    smoothed = charge_of(
        "smooth_sensitivity",
        "smooth-sensitivity",
        run.mechanism(),
        run.queries,
        options | {"order": order},
    )
    unreleased = charge_of(
        "analyze", "analyze", run.mechanism(), run.queries, options | {"release": False}
    )
    with mp.workdps(DPS):
        want = hand_mechanism_rdp(run, mp.mpf(order)) + hand_gnss_rdp(mp.mpf(order), beta, sigma_ss)
    for charge in (analyzed, smoothed):
        assert charge.account["kind"] == "rdp" and charge.account["orders"] == [order]
        assert charge.account["rdp"][0] == pytest.approx(float(want), rel=1e-12)
        assert charge.purposes == ("gnss-sample",)
    assert unreleased.account == account_of(run.mechanism(), run.queries, half_even=run.half_even)
    assert unreleased.purposes == ()


# ----------------------------------------------------------------------------- composition


@ORACLE_SETTINGS
@given(st.lists(runs(kinds=("gnmax", "confident", "interactive")), min_size=1, max_size=6), deltas)
def test_gaussian_runs_compose_on_the_exact_curve(all_runs, delta):
    total = pate_total(all_runs, delta, "classic")
    truth, method = oracle_total(all_runs, delta, "classic")
    assert (total.method, method) == ("gaussian", "gaussian")
    assert total.delta == delta
    assert_close_above(total.epsilon, truth)


@ORACLE_SETTINGS
@given(
    log_uniform(0.002, 0.5),
    st.lists(st.integers(1, 200), min_size=1, max_size=4),
    deltas,
)
def test_lnmax_runs_of_one_gamma_compose_optimally(gamma, counts, delta):
    all_runs = [Run("lnmax", q, gamma=gamma) for q in counts]
    total = pate_total(all_runs, delta, "classic")
    truth, method = oracle_total(all_runs, delta, "classic")
    assert (total.method, method) == ("pure-dp-optimal", "pure-dp-optimal")
    assert_close_above(total.epsilon, truth)
    assert total.epsilon <= 2 * gamma * sum(counts) * (1 + 1e-12)  # never above basic


@st.composite
def mixtures(draw: st.DrawFn) -> list[Run]:
    """Runs that compose through RDP: two forms, two gammas, or a release."""
    shape = draw(st.sampled_from(["gaussian+pure", "two gammas", "release", "any"]))
    if shape == "gaussian+pure":
        base = [
            draw(runs(kinds=("gnmax", "confident", "interactive"))),
            draw(runs(kinds=("lnmax",))),
        ]
    elif shape == "two gammas":
        g = draw(log_uniform(0.002, 0.25))
        base = [draw(runs(kinds=("lnmax",), gamma=g)), draw(runs(kinds=("lnmax",), gamma=2 * g))]
    elif shape == "release":
        order, beta, sigma_ss = draw(releases())
        first = draw(runs())
        base = [replace(first, release=(order, beta, sigma_ss))]
    else:
        base = []
    more = draw(st.lists(runs(with_release=draw(st.booleans())), max_size=3))
    all_runs = draw(st.permutations(base + more))
    kinds = {"pure" if r.kind == "lnmax" else "gaussian" for r in all_runs if r.release is None}
    gammas = {r.gamma for r in all_runs if r.kind == "lnmax"}
    released = any(r.release is not None for r in all_runs)
    assume(released or kinds == {"pure", "gaussian"} or len(gammas) > 1)
    return all_runs


@ORACLE_SETTINGS
@given(mixtures(), deltas, conversions)
def test_mixtures_compose_through_rdp(all_runs, delta, conversion):
    """Every account as RDP per order, summed, converted, minimised over the orders (a
    release's account at its own order only: two releases at two orders give inf)."""
    total = pate_total(all_runs, delta, conversion)
    truth, method = oracle_total(all_runs, delta, conversion)
    assert (total.method, method) == ("rdp", "rdp")
    assert_close_above(total.epsilon, truth)


@ORACLE_SETTINGS
@given(st.lists(runs(with_release=True), min_size=1, max_size=5), deltas, conversions)
def test_any_runs_compose_as_the_oracle_says(all_runs, delta, conversion):
    total = pate_total(all_runs, delta, conversion)
    truth, method = oracle_total(all_runs, delta, conversion)
    assert total.method == method
    assert_close_above(total.epsilon, truth)


def test_no_run_spends_nothing():
    total = compose([], 1e-5, Conversion.CLASSIC)
    assert (total.epsilon, total.delta, total.method) == (0.0, 1e-5, "none")


# ----------------------------------------------------------------------------- the limit


@settings(max_examples=max(10, BUDGET_EXAMPLES // 2))
@given(st.lists(runs(with_release=True), min_size=2, max_size=5), deltas, conversions)
def test_a_charge_over_the_limit_is_refused(all_runs, delta, conversion):
    """A limit between the oracle's total of the first runs and of all of them: every
    charge but the last is appended, the last is refused and the file is left as it was."""
    *first, last = all_runs
    before, _ = oracle_total(first, delta, conversion)
    after, _ = oracle_total(all_runs, delta, conversion)
    assume(before < mp.inf and after > before * (1 + mp.mpf("1e-4")) + mp.mpf("1e-9"))
    limit = float((before + after) / 2) if after < mp.inf else float(2 * before + 1)
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "budget.jsonl"
        budget = Budget.init(path, delta=delta, max_epsilon=limit, conversion=conversion)
        for run in first:
            spent = budget.charge(run.charge())
            assert spent.epsilon <= limit
        content = path.read_bytes()
        with pytest.raises(BudgetExceeded, match="over the limit"):
            budget.charge(last.charge())
        assert path.read_bytes() == content
        opened = Budget.open(path)
        assert len(opened.entries) == len(first)
        assert opened.total().epsilon <= limit
        assert opened.remaining == pytest.approx(limit - opened.total().epsilon)
        with pytest.raises(BudgetExceeded):
            opened.check(last.charge())

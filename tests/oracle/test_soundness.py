"""pate's privacy bounds are never below the exact values of ``tests/oracle/exact.py``.

Per-query RDP (Theorem 6 / Prop. 10 for GNMax, its sensitivity-1 form for the threshold
step, Theorem 3 of 2017 for LNMax, Prop. 8 for the data-independent bounds) against the
exact sup over neighbours n' of D_lambda(M(n) || M(n')); smooth sensitivity (Definition 12,
Theorem 24, Papernot et al. 2018) against a brute force over every histogram of the same M
and C, with the per-query cost taken from pate's own per-query functions. A bound may
exceed the truth by any amount; it may fall below it by 1e-9 relative (rounding).
"""

from __future__ import annotations

import functools
from collections.abc import Callable

import numpy as np
from hypothesis import assume, example, given, note, settings
from hypothesis import strategies as st

from pate_cli.core.conditions import (
    check_conditions,
    is_data_independent_always_opt_gnmax,
    is_data_independent_always_opt_threshold,
)
from pate_cli.core.gnmax import logq_gnmax, rdp_gnmax, rdp_gnmax_data_independent
from pate_cli.core.horizon import Horizon
from pate_cli.core.lnmax import logq_lnmax, rdp_lnmax, rdp_lnmax_data_independent
from pate_cli.core.smooth import (
    local_sensitivity_total,
    local_sensitivity_walked,
    smooth_sensitivity,
)
from pate_cli.core.theorem6 import NumericalRangeError
from pate_cli.core.threshold import (
    log_pr_answered_threshold,
    logq_threshold,
    rdp_threshold,
    rdp_threshold_data_independent,
)
from tests.oracle import exact
from tests.oracle.strategies import EXAMPLES, histograms, log_uniform, renyi_orders

RTOL = 1e-9
Cost = Callable[[np.ndarray], np.ndarray]


def at_least(ours: float, truth: float) -> bool:
    """ours >= truth up to a relative 1e-9 (and NaN is never sound)."""
    return bool(ours >= truth * (1 - RTOL))


# ----------------------------------------------------------------------------- pate's side


def gnmax_rdp(hists: np.ndarray, sigma: float, order: float) -> np.ndarray:
    """The published per-query cost of GNMax: Theorem 6 at Prop. 7's q. Shapes: (H, C) -> (H,)."""
    hists = np.asarray(hists, dtype=np.float64)
    return rdp_gnmax(logq_gnmax(hists, sigma), sigma, np.array([order]))[:, 0]


def threshold_rdp(hists: np.ndarray, threshold: float, sigma1: float, order: float) -> np.ndarray:
    hists = np.asarray(hists, dtype=np.float64)
    return rdp_threshold(logq_threshold(hists, threshold, sigma1), sigma1, np.array([order]))[:, 0]


def gnmax_cost(sigma: float, order: float) -> Cost:
    return functools.partial(gnmax_rdp, sigma=sigma, order=order)


def confident_cost(
    num_teachers: int,
    num_classes: int,
    *,
    threshold: float,
    sigma1: float,
    sigma: float,
    order: float,
) -> tuple[Cost, dict[str, bool]]:
    """f(n) = thr(n) + Pr[answered](n) g(n), and the data-independent flags the release uses.

    A step that ``is_data_independent_always_opt_*`` declares data-independent at this order
    costs its Prop. 8 value instead (the weight Pr[answered] stays).
    """
    flags = {
        "data_independent_step1": is_data_independent_always_opt_threshold(
            num_teachers, threshold, sigma1, order
        ),
        "data_independent_step2": is_data_independent_always_opt_gnmax(
            num_teachers, num_classes, sigma, order
        ),
    }
    orders = np.array([order])

    def f(hists: np.ndarray) -> np.ndarray:
        """The cost as terms (H, 4): thr, and Pr[answered] g written as g - Pr[not] g where
        Pr[answered] >= 1/2 (Pr[not] from its own tail), so that no difference of neighbours
        is taken between numbers near 1 (see ``exact.local_sensitivities``)."""
        hists = np.asarray(hists, dtype=np.float64)
        if flags["data_independent_step1"]:
            step1 = np.full(hists.shape[0], rdp_threshold_data_independent(sigma1, orders)[0])
        else:
            step1 = threshold_rdp(hists, threshold, sigma1, order)
        if flags["data_independent_step2"]:
            step2 = np.full(hists.shape[0], rdp_gnmax_data_independent(sigma, orders)[0])
        else:
            step2 = gnmax_rdp(hists, sigma, order)
        log_answered = log_pr_answered_threshold(hists, threshold, sigma1)
        likely = log_answered >= np.log(0.5)
        # Where answering is the likelier outcome, the less likely one is not answering.
        not_answered = np.exp(logq_threshold(hists, threshold, sigma1))
        terms = np.zeros((hists.shape[0], 4))
        terms[:, 0] = step1
        terms[likely, 1] = step2[likely]
        terms[likely, 2] = -not_answered[likely] * step2[likely]
        terms[~likely, 3] = np.exp(log_answered[~likely]) * step2[~likely]
        return terms

    return f, flags


def conditions_verified(sigma: float, num_classes: int, order: float) -> bool:
    """C5 and C6 as the release checks them; an example where they cannot be checked is skipped."""
    try:
        return all(check_conditions(sigma, num_classes, order))
    except NumericalRangeError:
        assume(False)
        raise AssertionError("unreachable") from None


def pate_local_sensitivity(
    hist: np.ndarray,
    order: float,
    *,
    sigma: float,
    threshold: float | None = None,
    sigma1: float | None = None,
    flags: dict[str, bool] | None = None,
    verified: bool | None = None,
) -> np.ndarray:
    """local_sensitivity_total of one query, C6 trusted where check_conditions says so."""
    hist = np.asarray(hist)
    if verified is None:
        verified = all(check_conditions(sigma, hist.size, order))
    return local_sensitivity_total(
        hist[None, :],
        int(hist.sum()),
        order,
        sigma,
        threshold=threshold,
        sigma1=sigma1,
        increments_verified=verified,
        **(flags or {}),
    )


def pate_smooth_sensitivity(hist: np.ndarray, order: float, beta: float, **kwargs) -> float:
    return smooth_sensitivity(pate_local_sensitivity(hist, order, **kwargs), beta)


# ----------------------------------------------------------------------------- per-query RDP


def exact_rdp(hist: np.ndarray, log_probs: Callable, order: float) -> float:
    truth, worst = exact.max_over_neighbours(hist, log_probs, order)
    note(f"exact {truth!r} against neighbour {worst.tolist()}")
    return truth


@settings(max_examples=EXAMPLES)
@given(hist=histograms(), sigma=log_uniform(0.3, 1e4), order=renyi_orders(500.0))
def test_gnmax_data_dependent_rdp_is_sound(hist, sigma, order):
    """rdp_gnmax(logq_gnmax(n)) >= sup_n' D_lambda(GNMax(n) || GNMax(n'))."""
    truth = exact_rdp(hist, functools.partial(exact.gnmax_log_probs, sigma=sigma), order)
    ours = gnmax_rdp(hist[None, :], sigma, order)[0]
    assert at_least(ours, truth), f"pate {ours!r} < exact {truth!r}"


@st.composite
def threshold_cases(draw: st.DrawFn) -> tuple[np.ndarray, float, float]:
    """A histogram, T from 3 below 0 to 3 above M, sigma1 from 0.2 up."""
    hist = draw(histograms())
    threshold = draw(st.floats(-3.0, float(hist.sum()) + 3.0))
    return hist, threshold, draw(log_uniform(0.2, 1e4))


@settings(max_examples=EXAMPLES)
@given(case=threshold_cases(), order=renyi_orders(500.0))
# Pr[not answered] far below 1e-16, a neighbour with one more top vote, a large order: where
# log(1 - Pr[answered]) taken from a rounded log Pr[answered] said "certain, cost 0".
@example(case=(np.array([10, 4]), -3.0, 0.3), order=50.0)
@example(case=(np.array([12, 1, 1]), 0.0, 0.25), order=120.0)
def test_threshold_data_dependent_rdp_is_sound(case, order):
    """rdp_threshold(logq_threshold(n)) >= sup_n' D_lambda(Bern(Pr[answered](n)) || Bern(..n'))."""
    hist, threshold, sigma1 = case
    log_probs = functools.partial(exact.threshold_log_probs, threshold=threshold, sigma1=sigma1)
    truth = exact_rdp(hist, log_probs, order)
    ours = threshold_rdp(hist[None, :], threshold, sigma1, order)[0]
    assert at_least(ours, truth), f"pate {ours!r} < exact {truth!r}"


@settings(max_examples=EXAMPLES)
@given(hist=histograms(), gamma=log_uniform(0.005, 3.0), order=renyi_orders(500.0))
def test_lnmax_data_dependent_rdp_is_sound(hist, gamma, order):
    """rdp_lnmax(logq_lnmax(n)) >= sup_n' D_lambda(LNMax(n) || LNMax(n')), gamma <= 3 so that
    the data-independent 2 gamma caps nothing trivially."""
    truth = exact_rdp(hist, functools.partial(exact.lnmax_log_probs, gamma=gamma), order)
    logq = logq_lnmax(hist[None, :].astype(np.float64), gamma)
    ours = rdp_lnmax(logq, gamma, np.array([order]))[0, 0]
    assert at_least(ours, truth), f"pate {ours!r} < exact {truth!r}"


@settings(max_examples=EXAMPLES)
@given(
    hist=histograms(),
    mechanism=st.sampled_from(["gnmax", "threshold", "lnmax"]),
    noise=log_uniform(0.3, 1e4),
    order=renyi_orders(500.0),
    threshold=st.floats(-3.0, 17.0),
)
def test_data_independent_rdp_is_sound(hist, mechanism, noise, order, threshold):
    """Prop. 8 (lambda/sigma^2, lambda/(2 sigma1^2)) and min(eps^2 lambda/2, eps) of a
    (2 gamma)-DP answer bound every neighbour's divergence (gamma = 1/noise for LNMax)."""
    orders = np.array([order])
    if mechanism == "gnmax":
        log_probs = functools.partial(exact.gnmax_log_probs, sigma=noise)
        bound = rdp_gnmax_data_independent(noise, orders)[0]
    elif mechanism == "threshold":
        log_probs = functools.partial(exact.threshold_log_probs, threshold=threshold, sigma1=noise)
        bound = rdp_threshold_data_independent(noise, orders)[0]
    else:
        log_probs = functools.partial(exact.lnmax_log_probs, gamma=1 / noise)
        bound = rdp_lnmax_data_independent(1 / noise, orders)[0]
    truth = exact_rdp(hist, log_probs, order)
    assert at_least(bound, truth), f"pate {bound!r} < exact {truth!r}"


# ----------------------------------------------------------------------------- sensitivity


_LS_CACHE: dict[tuple, np.ndarray] = {}


def brute_force_ls(key: tuple, f: Cost, hist: np.ndarray) -> np.ndarray:
    """LS(n) of every histogram of hist's M and C, cached per (parameters, M, C).

    ``key`` names f (a new closure per example, so it cannot be the key itself); the cache
    serves hypothesis's replays and shrinking, and is emptied when it grows large.
    """
    full = (key, int(hist.sum()), hist.size)
    if full not in _LS_CACHE:
        if len(_LS_CACHE) > 4096:
            _LS_CACHE.clear()
        _LS_CACHE[full] = exact.local_sensitivities(f, int(hist.sum()), hist.size)
    return _LS_CACHE[full]


@st.composite
def gnmax_sensitivity_cases(draw: st.DrawFn) -> dict:
    """Histogram, sigma, order in [1.01, 50] (and the default grid's below 2), beta in
    (0, 0.49/order), whether C6 is trusted (the release trusts it where check_conditions
    says so; not trusting it is always allowed), and which sound bound: the default tabulated
    one (``ls_cells``) or the exact walk."""
    order = draw(renyi_orders(50.0))
    beta = draw(st.floats(0.0, 0.49 / order, exclude_min=True))
    return {
        "hist": draw(histograms()),
        "sigma": draw(log_uniform(0.3, 1e3)),
        "order": order,
        "beta": beta,
        "trust_conditions": draw(st.booleans()),
        "walk": draw(st.booleans()),
    }


@st.composite
def confident_sensitivity_cases(draw: st.DrawFn) -> dict:
    case = draw(gnmax_sensitivity_cases())
    teachers = float(case["hist"].sum())
    case["threshold"] = draw(st.floats(-3.0, teachers + 3.0))
    case["sigma1"] = draw(log_uniform(0.2, 100.0))
    return case


def _verified(case: dict) -> bool:
    if not case["trust_conditions"]:
        return False
    return conditions_verified(case["sigma"], case["hist"].size, case["order"])


@settings(max_examples=EXAMPLES)
@given(case=gnmax_sensitivity_cases())
def test_gnmax_smooth_sensitivity_is_sound(case):
    """smooth_sensitivity(local_sensitivity_total(n0)) >= max_n LS(n) e^(-beta dist(n0, n))."""
    hist, sigma, order, beta = case["hist"], case["sigma"], case["order"], case["beta"]
    verified = _verified(case)
    f = gnmax_cost(sigma, order)
    ls = brute_force_ls(("gnmax", sigma, order), f, hist)
    truth = exact.smooth_sensitivity(hist, ls, int(hist.sum()), beta)
    flags = {"walk": case["walk"]}
    ours = pate_smooth_sensitivity(hist, order, beta, sigma=sigma, verified=verified, flags=flags)
    assert at_least(ours, truth), f"pate {ours!r} < brute force {truth!r} (C6 trusted: {verified})"


@settings(max_examples=EXAMPLES)
@given(case=confident_sensitivity_cases())
def test_confident_gnmax_smooth_sensitivity_is_sound(case):
    """The same for f = thr + Pr[answered] g, with the release's data-independent steps."""
    hist, order, beta = case["hist"], case["order"], case["beta"]
    params = {k: case[k] for k in ("threshold", "sigma1", "sigma")}
    verified = _verified(case)
    f, flags = confident_cost(int(hist.sum()), hist.size, order=order, **params)
    flags = {**flags, "walk": case["walk"]}
    note(f"data-independent steps: {flags}")
    ls = brute_force_ls(("confident", *params.values(), order), f, hist)
    truth = exact.smooth_sensitivity(hist, ls, int(hist.sum()), beta)
    ours = pate_smooth_sensitivity(hist, order, beta, flags=flags, verified=verified, **params)
    assert at_least(ours, truth), f"pate {ours!r} < brute force {truth!r} (C6 trusted: {verified})"


@settings(max_examples=EXAMPLES)
@given(case=confident_sensitivity_cases(), confident=st.booleans())
def test_local_sensitivity_bounds_every_distance(case, confident):
    """ls[d] >= max of LS(n) over histograms within distance d of n0, for every d < M
    (plain GNMax, or Confident-GNMax with the release's data-independent steps)."""
    hist, sigma, order = case["hist"], case["sigma"], case["order"]
    verified = _verified(case)
    if confident:
        params = {k: case[k] for k in ("threshold", "sigma1", "sigma")}
        f, flags = confident_cost(int(hist.sum()), hist.size, order=order, **params)
        key = ("confident", *params.values(), order)
    else:
        params, flags = {"sigma": sigma}, {}
        f, key = gnmax_cost(sigma, order), ("gnmax", sigma, order)
    flags = {**flags, "walk": case["walk"]}
    truth = exact.ls_by_distance(hist, brute_force_ls(key, f, hist), int(hist.sum()))
    ours = pate_local_sensitivity(hist, order, flags=flags, verified=verified, **params)
    low = np.flatnonzero(~(ours >= truth * (1 - RTOL)))
    assert low.size == 0, (
        f"distances {low.tolist()}: pate {ours[low].tolist()} < brute force {truth[low].tolist()}"
        f" (C6 trusted: {verified}, flags {flags})"
    )


@settings(max_examples=EXAMPLES)
@given(case=confident_sensitivity_cases(), confident=st.booleans())
def test_the_walk_stops_only_where_nothing_can_change(case, confident):
    """core.horizon: a walk stopped for betas of at least the case's beta keeps the full walk's
    totals where it walked; past them its bound W is at least the brute force at every
    distance, and at betas from the case's to 1/(2 order) its smooth sensitivity is the full
    walk's and at least the brute force's."""
    hist, sigma, order, beta = case["hist"], case["sigma"], case["order"], case["beta"]
    verified = _verified(case)
    if confident:
        params = {k: case[k] for k in ("threshold", "sigma1", "sigma")}
        f, flags = confident_cost(int(hist.sum()), hist.size, order=order, **params)
        key = ("confident", *params.values(), order)
    else:
        params, flags = {"sigma": sigma}, {}
        f, key = gnmax_cost(sigma, order), ("gnmax", sigma, order)
    flags = {**flags, "walk": case["walk"]}
    local = brute_force_ls(key, f, hist)
    teachers = int(hist.sum())
    full = pate_local_sensitivity(hist, order, flags=flags, verified=verified, **params)
    options = {k: v for k, v in params.items() if k != "sigma"}
    horizon = local_sensitivity_walked(
        hist[None, :],
        teachers,
        order,
        params["sigma"],
        Horizon.start(beta, teachers, 1),
        increments_verified=verified,
        **options,
        **flags,
    )
    walked = horizon.total
    note(f"walked {walked.size} of {teachers} distances")
    np.testing.assert_array_equal(walked, full[: walked.size])
    truth = exact.ls_by_distance(hist, local, teachers)
    assert np.all(horizon.bound >= truth[walked.size :] * (1 - RTOL))
    for at in np.linspace(beta, 0.49 / order, 4):
        ours = smooth_sensitivity(walked, at)
        assert ours == smooth_sensitivity(full, at)
        assert at_least(ours, exact.smooth_sensitivity(hist, local, teachers, at))

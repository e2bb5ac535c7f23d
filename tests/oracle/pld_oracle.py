"""Exact privacy profiles (hockey-stick divergences) of PATE queries and of tiny runs.

An oracle for the data-dependent privacy of a fixed vote matrix that shares no formula with
``pate_cli``: nothing here imports it. Outcome distributions come from ``exact`` (numerical
integration of the noise); divergences and epsilons come from their definitions on the
finite outcome space.

- The hockey-stick divergence of P from Q at gamma >= 0 is
  delta_{P||Q}(gamma) = sum_o max(p_o - gamma q_o, 0) = sup_S P(S) - gamma Q(S).
  Each positive term is p_o (1 - gamma q_o / p_o), formed in log space, so the sum of
  positive terms never cancels and is never negative.
- The privacy profile of one query at the histogram n is the worst case over the neighbours
  n' of n (one teacher changes its vote): "remove" compares M(n) to M(n'), "add" M(n') to
  M(n).
- A run of k queries is answered with independent noise, so its outcome distribution is the
  product of the k rows. A neighbouring run changes one teacher's votes, which changes every
  query's histogram independently by at most one vote: each query is unchanged or any
  neighbour of it, and every combination is a neighbouring run.
- epsilon(P||Q) at delta is the smallest eps >= 0 with delta_{P||Q}(e^eps) <= delta. With the
  privacy losses L_o = log(p_o / q_o) sorted in decreasing order L_1 >= L_2 >= ..., on the
  piece eps in [L_{j+1}, L_j] the divergence is linear in e^eps,
  delta(eps) = p_inf + sum_{i <= j} p_i - e^eps sum_{i <= j} q_i (p_inf: the mass of P where
  Q is 0, an infinite loss), so the equation delta(eps) = delta is solved in closed form on
  the piece where it crosses delta.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Hashable, Sequence
from dataclasses import dataclass
from typing import Literal, Protocol

import numpy as np
from hypothesis import strategies as st
from numpy.typing import ArrayLike, NDArray
from scipy.special import logsumexp

from tests.oracle import exact

Direction = Literal["remove", "add"]
DIRECTIONS: tuple[Direction, ...] = ("remove", "add")

# Ranges of the tiny runs (``tiny_runs``, ``tiny_run``).
MAX_QUERIES = 3
MIN_CLASSES, MAX_CLASSES = 2, 4
MIN_TEACHERS, MAX_TEACHERS = 4, 14
MIN_SIGMA, MAX_SIGMA = 1.0, 6.0


# ----------------------------------------------------------------------------- mechanisms


class Mechanism(Hashable, Protocol):
    """One query's outcome distribution as a function of its histogram (hashable: the rows
    of a histogram and its neighbours are cached per mechanism)."""

    def log_probs(self, hists: ArrayLike) -> NDArray[np.float64]:
        """Normalised outcome log-probabilities. Shapes: hists (K, C) -> (K, O)."""
        ...


@dataclass(frozen=True)
class GNMax:
    """argmax of the counts plus N(0, sigma^2) noise per class; outcomes are the classes."""

    sigma: float

    def log_probs(self, hists: ArrayLike) -> NDArray[np.float64]:
        return exact.gnmax_log_probs(hists, self.sigma)


@dataclass(frozen=True)
class ConfidentGNMax:
    """The threshold step (noise N(0, sigma1^2) on the largest count, compared to T), then
    GNMax(sigma) with independent noise if it passes.

    Outcomes: [abstain, class 0, ..., class C-1]; Pr[class j] = Pr[answered] GNMax_j.
    """

    threshold: float
    sigma1: float
    sigma: float

    def log_probs(self, hists: ArrayLike) -> NDArray[np.float64]:
        hists = np.array(hists, dtype=np.float64, ndmin=2)
        step = exact.threshold_log_probs(hists, self.threshold, self.sigma1)
        classes = exact.gnmax_log_probs(hists, self.sigma)
        answered, abstain = step[:, :1], step[:, 1:]
        return exact.normalise(np.concatenate([abstain, answered + classes], axis=1))


@dataclass(frozen=True)
class LNMax:
    """argmax of the counts plus Laplace noise of scale 1/gamma; outcomes are the classes."""

    gamma: float

    def log_probs(self, hists: ArrayLike) -> NDArray[np.float64]:
        return exact.lnmax_log_probs(hists, self.gamma)


# ----------------------------------------------------------------------------- divergence


def _hockey_stick_log(
    logp: NDArray[np.float64], logq: NDArray[np.float64], log_gammas: NDArray[np.float64]
) -> NDArray[np.float64]:
    """delta_{P||Q}(e^log_gamma). Shapes: (..., O), (..., O), (G,) -> (..., G)."""
    lp = logp[..., None, :]
    lq = logq[..., None, :]
    lg = log_gammas[:, None]
    with np.errstate(invalid="ignore"):  # -inf - -inf, replaced below
        # log(gamma q_o / p_o); where q_o = 0 the term is p_o whatever gamma is.
        x = np.where(lq == -np.inf, -np.inf, lg + lq - lp)
    live = (lp > -np.inf) & (x < 0)
    safe = np.where(live, x, -1.0)
    terms = np.where(live, lp + exact.log1mexp(safe), -np.inf)
    return np.asarray(np.exp(logsumexp(terms, axis=-1)), dtype=np.float64)


def hockey_stick(logp: ArrayLike, logq: ArrayLike, gammas: ArrayLike) -> NDArray[np.float64]:
    """delta_{P||Q}(gamma) = sum_o max(p_o - gamma q_o, 0) for each gamma >= 0.

    Terms are p_o (1 - gamma q_o / p_o), each formed in log space: exact in relative terms,
    and never negative. Shapes: logp, logq (..., O) broadcast; gammas (G,) or a scalar ->
    (..., G) or (...).
    """
    logp_arr, logq_arr = np.broadcast_arrays(
        np.asarray(logp, dtype=np.float64), np.asarray(logq, dtype=np.float64)
    )
    gamma_arr = np.asarray(gammas, dtype=np.float64)
    if np.any(gamma_arr < 0) or np.any(np.isnan(gamma_arr)):
        raise ValueError("gammas must be >= 0")
    with np.errstate(divide="ignore"):  # gamma = 0: log 0 = -inf is the value wanted
        log_gammas = np.log(gamma_arr.reshape(-1))
    out = _hockey_stick_log(logp_arr, logq_arr, log_gammas)
    return out.reshape(logp_arr.shape[:-1] + gamma_arr.shape)


def epsilon_at_delta(logp: ArrayLike, logq: ArrayLike, delta: float) -> NDArray[np.float64]:
    """The smallest eps >= 0 with delta_{P||Q}(e^eps) <= delta, exactly, row by row.

    Only outcomes with a positive loss L_o = log(p_o / q_o) matter for eps >= 0. Sorted by
    decreasing loss, delta at the breakpoint L_j is
    D_j = p_inf + sum_{i < j} p_i - e^(L_j) sum_{i < j} q_i (the product formed in log space;
    it is at most sum_{i < j} p_i <= 1); between breakpoints delta is linear in e^eps and the
    equation delta(eps) = delta is solved on the piece that crosses it. +inf where the mass of
    infinite loss (q_o = 0 < p_o) exceeds delta. Shapes: (..., O), (..., O) -> (...).
    """
    if not delta >= 0:
        raise ValueError("delta must be >= 0")
    logp_arr, logq_arr = np.broadcast_arrays(
        np.asarray(logp, dtype=np.float64), np.asarray(logq, dtype=np.float64)
    )
    shape = logp_arr.shape[:-1]
    num_outcomes = logp_arr.shape[-1]
    lp = logp_arr.reshape(-1, num_outcomes)
    lq = logq_arr.reshape(-1, num_outcomes)
    rows = lp.shape[0]

    seen = lp > -np.inf
    infinite = seen & (lq == -np.inf)
    with np.errstate(invalid="ignore"):  # -inf - -inf, masked by `positive`
        loss = lp - lq
    positive = seen & ~infinite & (loss > 0)
    p = np.exp(lp)
    p_inf = np.where(infinite, p, 0.0).sum(axis=1)

    # Outcomes of no positive loss are kept as empty entries at loss 0 (they add nothing);
    # one more empty entry at loss 0 makes D end with delta(0) on every row.
    key = np.where(positive, loss, 0.0)
    order = np.argsort(-key, axis=1, kind="stable")
    losses = np.take_along_axis(key, order, axis=1)
    probs = np.take_along_axis(np.where(positive, p, 0.0), order, axis=1)
    log_qs = np.take_along_axis(np.where(positive, lq, -np.inf), order, axis=1)
    losses = np.hstack([losses, np.zeros((rows, 1))])
    probs = np.hstack([probs, np.zeros((rows, 1))])
    log_qs = np.hstack([log_qs, np.full((rows, 1), -np.inf)])

    # Sums over the entries before j (exclusive prefix sums).
    cum_p = np.hstack([np.zeros((rows, 1)), np.cumsum(probs, axis=1)[:, :-1]])
    log_cum_q = np.hstack(
        [np.full((rows, 1), -np.inf), np.logaddexp.accumulate(log_qs, axis=1)[:, :-1]]
    )
    at_breakpoints = p_inf[:, None] + cum_p - np.exp(losses + log_cum_q)

    above = at_breakpoints > delta
    crosses = above.any(axis=1)
    first = np.argmax(above, axis=1)  # the first breakpoint (largest loss) above delta
    out = np.zeros(rows)
    out[crosses & (first == 0)] = np.inf  # D_0 = p_inf > delta
    solve = np.flatnonzero(crosses & (first > 0))
    j = first[solve]
    with np.errstate(divide="ignore", invalid="ignore"):  # clipped below
        eps = np.log(p_inf[solve] + cum_p[solve, j] - delta) - log_cum_q[solve, j]
    eps = np.where(np.isnan(eps), losses[solve, j], eps)
    out[solve] = np.clip(eps, losses[solve, j], losses[solve, j - 1])
    return out.reshape(shape)


# ----------------------------------------------------------------------------- one query


@functools.lru_cache(maxsize=4096)
def _query_rows(hist: tuple[int, ...], mechanism: Mechanism) -> NDArray[np.float64]:
    """Rows of the histogram (row 0) and of each of its neighbours (rows 1..N).

    Shapes: -> (1 + N, O).
    """
    counts = np.array(hist, dtype=np.int64)
    stacked = np.vstack([counts[None, :], exact.neighbours(counts)])
    rows = np.array(mechanism.log_probs(stacked), dtype=np.float64)
    rows.flags.writeable = False
    return rows


def query_rows(hist: ArrayLike, mechanism: Mechanism) -> NDArray[np.float64]:
    """log-probabilities of M(n) (row 0) and of M(n') for each neighbour n' (rows 1..N),
    neighbours in the order of ``exact.neighbours``. Shapes: (C,) -> (1 + N, O)."""
    key = tuple(int(v) for v in np.asarray(hist, dtype=np.int64).reshape(-1))
    return _query_rows(key, mechanism)


def query_profiles(
    hist: ArrayLike, mechanism: Mechanism, eps: ArrayLike
) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
    """(remove, add) privacy profiles of one query at the histogram n, for each eps:
    remove = max over neighbours n' of delta_{M(n)||M(n')}(e^eps),
    add = max over n' of delta_{M(n')||M(n)}(e^eps). Shapes: eps (E,) -> (E,), (E,).
    """
    eps_arr = np.asarray(eps, dtype=np.float64)
    rows = query_rows(hist, mechanism)
    log_gammas = eps_arr.reshape(-1)
    remove = _hockey_stick_log(rows[:1], rows[1:], log_gammas).max(axis=0)
    add = _hockey_stick_log(rows[1:], rows[:1], log_gammas).max(axis=0)
    return remove.reshape(eps_arr.shape), add.reshape(eps_arr.shape)


# ----------------------------------------------------------------------------- runs


def run_log_probs(hists: ArrayLike, mechanism: Mechanism) -> NDArray[np.float64]:
    """log-probabilities of every outcome tuple of the run (row 0) and of each neighbouring
    run (every combination of "unchanged or a neighbour" per query).

    Row r, column o: the combination and the outcome tuple in row-major order over the
    queries (the first query most significant). Shapes: (k, C) -> (prod (1 + N_i), O^k).
    """
    hist_arr = np.array(hists, dtype=np.int64, ndmin=2)
    combined: NDArray[np.float64] = np.zeros((1, 1))
    for hist in hist_arr:
        rows = query_rows(hist, mechanism)
        combined = (combined[:, None, :, None] + rows[None, :, None, :]).reshape(
            combined.shape[0] * rows.shape[0], combined.shape[1] * rows.shape[1]
        )
    return combined


def run_epsilon_one_direction(
    hists: ArrayLike, mechanism: Mechanism, delta: float, direction: Direction = "remove"
) -> float:
    """max over neighbouring runs of epsilon(P||Q) ("remove") or epsilon(Q||P) ("add") at
    delta, P the run's outcome distribution and Q a neighbouring run's."""
    if direction not in DIRECTIONS:
        raise ValueError(f"direction must be one of {DIRECTIONS}")
    rows = run_log_probs(hists, mechanism)
    mine, theirs = rows[:1], rows
    if direction == "remove":
        return float(epsilon_at_delta(mine, theirs, delta).max())
    return float(epsilon_at_delta(theirs, mine, delta).max())


def run_epsilon(hists: ArrayLike, mechanism: Mechanism, delta: float) -> float:
    """The exact epsilon at delta of a run of queries answered independently, over every
    neighbouring run and both directions."""
    rows = run_log_probs(hists, mechanism)
    remove = epsilon_at_delta(rows[:1], rows, delta)
    add = epsilon_at_delta(rows, rows[:1], delta)
    return float(max(remove.max(), add.max()))


# ----------------------------------------------------------------------------- corpus

Run = tuple[NDArray[np.int64], Mechanism]


def _log_uniform(rng: np.random.Generator, low: float, high: float) -> float:
    return float(min(max(math.exp(rng.uniform(math.log(low), math.log(high))), low), high))


def tiny_runs(seed: int, count: int) -> list[Run]:
    """A deterministic corpus of ``count`` tiny runs: k in {1, 2, 3} queries, C in {2, 3, 4},
    M in [4, 14] teachers, histograms random; even-numbered runs GNMax (sigma in [1, 6],
    log-uniform), odd-numbered Confident-GNMax (sigma1, sigma in [1, 6] log-uniform, T in
    [M/2, M] uniform)."""
    rng = np.random.default_rng(seed)
    out: list[Run] = []
    for index in range(count):
        num_queries = int(rng.integers(1, MAX_QUERIES + 1))
        num_classes = int(rng.integers(MIN_CLASSES, MAX_CLASSES + 1))
        num_teachers = int(rng.integers(MIN_TEACHERS, MAX_TEACHERS + 1))
        # Class shares from a flat Dirichlet: consensus and split votes alike.
        hists = np.array(
            [
                rng.multinomial(num_teachers, rng.dirichlet(np.ones(num_classes)))
                for _ in range(num_queries)
            ],
            dtype=np.int64,
        )
        mechanism: Mechanism
        if index % 2 == 0:
            mechanism = GNMax(_log_uniform(rng, MIN_SIGMA, MAX_SIGMA))
        else:
            threshold = float(rng.uniform(num_teachers / 2, num_teachers))
            sigma1 = _log_uniform(rng, MIN_SIGMA, MAX_SIGMA)
            sigma = _log_uniform(rng, MIN_SIGMA, MAX_SIGMA)
            mechanism = ConfidentGNMax(threshold, sigma1, sigma)
        hists.flags.writeable = False
        out.append((hists, mechanism))
    return out


def _log_uniform_strategy(low: float, high: float) -> st.SearchStrategy[float]:
    return st.floats(math.log(low), math.log(high)).map(lambda x: min(max(math.exp(x), low), high))


def _histogram(draw: st.DrawFn, num_teachers: int, num_classes: int) -> NDArray[np.int64]:
    cuts: Sequence[int] = sorted(
        draw(
            st.lists(
                st.integers(0, num_teachers), min_size=num_classes - 1, max_size=num_classes - 1
            )
        )
    )
    return np.diff(np.array([0, *cuts, num_teachers])).astype(np.int64)


@st.composite
def tiny_run(draw: st.DrawFn) -> Run:
    """A tiny run as in ``tiny_runs``: (hists (k, C), GNMax or Confident-GNMax)."""
    num_queries = draw(st.integers(1, MAX_QUERIES))
    num_classes = draw(st.integers(MIN_CLASSES, MAX_CLASSES))
    num_teachers = draw(st.integers(MIN_TEACHERS, MAX_TEACHERS))
    hists = np.array(
        [_histogram(draw, num_teachers, num_classes) for _ in range(num_queries)], dtype=np.int64
    )
    mechanism: Mechanism
    if draw(st.booleans()):
        mechanism = GNMax(draw(_log_uniform_strategy(MIN_SIGMA, MAX_SIGMA)))
    else:
        mechanism = ConfidentGNMax(
            draw(st.floats(num_teachers / 2, num_teachers)),
            draw(_log_uniform_strategy(MIN_SIGMA, MAX_SIGMA)),
            draw(_log_uniform_strategy(MIN_SIGMA, MAX_SIGMA)),
        )
    return hists, mechanism

"""Exact outcome distributions of the PATE aggregators and brute-force sensitivities.

An oracle for the privacy bounds that shares no formula with ``pate_cli``: nothing here
imports it. The outcome probabilities come from numerical integration of the noise, the
divergences from their definition, and the sensitivities from enumerating every
histogram of M votes over C classes (Papernot et al. 2018, Appendix B: neighbours differ
in one teacher's vote, the distance between histograms is half their L1 distance).

- GNMax: p_j = Pr[argmax_i (n_i + sigma Z_i) = j]
  = int phi(t) prod_{i != j} Phi(t + (n_j - n_i) / sigma) dt.
  The log-integrand is concave with second derivative in (-C, -1] ((log phi)'' = -1 and
  each (log Phi)'' lies in (-1, 0)), so it has one mode t* > 0 and falls at least like
  -(t - t*)^2 / 2 away from it. The integral is a trapezoid sum in log space on
  t* +- 13 (what lies outside is below e^-84 of it). The integrand is an entire function,
  for which the trapezoid rule converges like exp(-2 pi^2 / (C h^2)): e^-490 at h = 0.1.
- LNMax: the same with Laplace noise of scale b = 1/gamma. Between consecutive vote counts
  the integrand is smooth, so Gauss-Legendre on pieces of length b/2 is exact to rounding;
  left of all counts it is one exponential (integrated in closed form), right of them it
  is a polynomial of degree C-1 in u = exp(-(x - max n) / b) (Gauss-Legendre is exact).
- Threshold step: Bernoulli with Pr[answered] = Phi((round_half_up(max n) - T) / sigma1),
  each outcome from its own tail.

Every row is normalised by replacing the most likely outcome with 1 - (sum of the others):
the others are computed to full relative precision in log space, so divergences of 1e-300
between near-certain distributions stay exact.
"""

from __future__ import annotations

import functools
import itertools
import math
from collections.abc import Callable

import numpy as np
from numpy.typing import ArrayLike, NDArray
from scipy.special import log_ndtr, logsumexp, roots_legendre

LOG_SQRT_2PI = 0.5 * math.log(2 * math.pi)
# Trapezoid step and half-width (in noise units) of the GNMax integral around its mode.
GNMAX_STEP = 0.1
GNMAX_HALF_WIDTH = 13.0
# Gauss-Legendre nodes per piece of the LNMax integral; pieces are at most b/2 long.
LNMAX_NODES = 16


# ----------------------------------------------------------------------------- log space


def log1mexp(x: ArrayLike) -> NDArray[np.float64]:
    """log(1 - e^x) for x <= 0, with the two branches of Maechler (2012)."""
    x = np.asarray(x, dtype=np.float64)
    out = np.empty_like(x)
    far = x < -math.log(2)
    out[far] = np.log1p(-np.exp(x[far]))
    with np.errstate(divide="ignore"):  # x = 0: log 0 = -inf is the value wanted
        out[~far] = np.log(-np.expm1(x[~far]))
    return out


def normalise(logp: ArrayLike) -> NDArray[np.float64]:
    """Rows of log-probabilities with the largest entry replaced by log(1 - others).

    The others are exact in relative terms; the largest is >= 1/(number of outcomes), so
    1 - (sum of the others) loses nothing, and the row sums to 1 by construction.
    Shapes: (K, O) -> (K, O).
    """
    logp = np.array(logp, dtype=np.float64, ndmin=2)
    rows = np.arange(logp.shape[0])
    top = logp.argmax(axis=1)
    others = logp.copy()
    others[rows, top] = -np.inf
    logp[rows, top] = log1mexp(np.minimum(logsumexp(others, axis=1), 0.0))
    return logp


# ----------------------------------------------------------------------------- GNMax


def _log_phi(x: NDArray[np.float64]) -> NDArray[np.float64]:
    return -0.5 * x * x - LOG_SQRT_2PI


def _gnmax_offsets(hists: NDArray[np.float64], sigma: float) -> NDArray[np.float64]:
    """d[k, j, i] = (n_kj - n_ki) / sigma, and +inf for i = j (a factor Phi(inf) = 1)."""
    d = (hists[:, :, None] - hists[:, None, :]) / sigma
    num_classes = hists.shape[1]
    d[:, np.arange(num_classes), np.arange(num_classes)] = np.inf
    return d


def _gnmax_mode(d: NDArray[np.float64]) -> NDArray[np.float64]:
    """The mode t* of log phi(t) + sum_i log Phi(t + d_i), per (k, j), by bisection.

    The derivative -t + sum_i phi/Phi(t + d_i) is decreasing (concavity), positive at 0,
    and negative from sum_i (max(-d_i, 0) + 1) + 1 on, since phi/Phi(x) < max(-x, 0) + 1.
    """
    finite = np.where(np.isfinite(d), d, 0.0)
    low = np.zeros(d.shape[:2])
    high = np.where(np.isfinite(d), np.maximum(-finite, 0.0) + 1.0, 0.0).sum(axis=2) + 1.0
    for _ in range(70):
        middle = 0.5 * (low + high)
        x = middle[:, :, None] + d
        ratio = np.exp(_log_phi(x) - log_ndtr(x))  # the own class (x = inf) gives e^-inf = 0
        slope = -middle + np.where(np.isfinite(d), ratio, 0.0).sum(axis=2)
        rising = slope > 0
        low = np.where(rising, middle, low)
        high = np.where(rising, high, middle)
    return 0.5 * (low + high)


def gnmax_log_probs(hists: ArrayLike, sigma: float, *, raw: bool = False) -> NDArray[np.float64]:
    """log Pr[GNMax answers j] for each histogram, by integration in log space.

    ``raw`` keeps the integrals as they are (for checking that they sum to 1);
    otherwise rows are ``normalise``d. Shapes: hists (K, C) -> (K, C).
    """
    hists = np.array(hists, dtype=np.float64, ndmin=2)
    d = _gnmax_offsets(hists, float(sigma))
    mode = _gnmax_mode(d)
    count = int(round(GNMAX_HALF_WIDTH / GNMAX_STEP))
    grid = GNMAX_STEP * np.arange(-count, count + 1)
    t = mode[:, :, None] + grid  # (K, C, T)
    log_integrand = _log_phi(t) + log_ndtr(t[:, :, None, :] + d[:, :, :, None]).sum(axis=2)
    logp = logsumexp(log_integrand, axis=2) + math.log(GNMAX_STEP)
    return logp if raw else normalise(logp)


# ----------------------------------------------------------------------------- LNMax


def _laplace_log_cdf(t: NDArray[np.float64], scale: float) -> NDArray[np.float64]:
    """log Pr[Laplace(0, scale) <= t], each side from its own expression."""
    out = np.empty_like(t)
    left = t < 0
    out[left] = t[left] / scale - math.log(2)
    out[~left] = np.log1p(-0.5 * np.exp(-t[~left] / scale))
    return out


def _laplace_log_pdf(t: NDArray[np.float64], scale: float) -> NDArray[np.float64]:
    return -np.abs(t) / scale - math.log(2 * scale)


@functools.cache
def _legendre(nodes: int) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
    return roots_legendre(nodes)


def _lnmax_row(counts: NDArray[np.float64], scale: float) -> NDArray[np.float64]:
    """log Pr[LNMax answers j] for one histogram, unnormalised. Shapes: (C,) -> (C,)."""
    num_classes = counts.size
    kinks = np.unique(counts)
    pieces = []
    # Left of every count: (1/(2b)) 2^-(C-1) exp((C x - sum n) / b), integrated to kinks[0].
    left = (
        (num_classes * kinks[0] - counts.sum()) / scale
        + math.log(scale / num_classes)
        - math.log(2 * scale)
        - (num_classes - 1) * math.log(2)
    )
    pieces.append(np.full(num_classes, left))
    # Between consecutive counts: Gauss-Legendre on pieces of length <= b/2.
    if kinks.size > 1:
        nodes, weights = _legendre(LNMAX_NODES)
        x_parts, w_parts = [], []
        for a, c in itertools.pairwise(kinks):
            parts = max(1, math.ceil((c - a) / (0.5 * scale)))
            edges = np.linspace(a, c, parts + 1)
            half = 0.5 * np.diff(edges)
            centre = 0.5 * (edges[:-1] + edges[1:])
            x_parts.append((centre[:, None] + half[:, None] * nodes).ravel())
            w_parts.append((half[:, None] * weights).ravel())
        x = np.concatenate(x_parts)
        log_w = np.log(np.concatenate(w_parts))
        offsets = x[None, :] - counts[:, None]  # (C, N)
        log_cdf = _laplace_log_cdf(offsets, scale)
        log_integrand = _laplace_log_pdf(offsets, scale) - log_cdf + log_cdf.sum(axis=0)
        pieces.append(logsumexp(log_integrand + log_w, axis=1))
    # Right of every count, with u = exp(-(x - A)/b):
    # (1/2) exp((n_j - A)/b) int_0^1 prod_{i != j} (1 - u c_i / 2) du, c_i = exp((n_i - A)/b).
    top = kinks[-1]
    nodes, weights = _legendre(max(num_classes, 2))
    u = 0.5 * (nodes + 1)
    log_factors = np.log1p(-0.5 * u[None, :] * np.exp((counts[:, None] - top) / scale))
    inner = log_factors.sum(axis=0)[None, :] - log_factors  # drop the own class
    right = (
        math.log(0.5)
        + (counts - top) / scale
        + logsumexp(inner + np.log(0.5 * weights)[None, :], axis=1)
    )
    pieces.append(right)
    return logsumexp(np.stack(pieces), axis=0)


def lnmax_log_probs(hists: ArrayLike, gamma: float, *, raw: bool = False) -> NDArray[np.float64]:
    """log Pr[LNMax answers j], noise Laplace of scale 1/gamma. Shapes: (K, C) -> (K, C)."""
    hists = np.array(hists, dtype=np.float64, ndmin=2)
    scale = 1.0 / float(gamma)
    logp = np.stack([_lnmax_row(row, scale) for row in hists])
    return logp if raw else normalise(logp)


# ----------------------------------------------------------------------------- threshold


def round_half_up(values: ArrayLike) -> NDArray[np.float64]:
    return np.floor(np.asarray(values, dtype=np.float64) + 0.5)


def threshold_log_probs(hists: ArrayLike, threshold: float, sigma1: float) -> NDArray[np.float64]:
    """(log Pr[answered], log Pr[not answered]) of the threshold step, each from its tail.

    Shapes: hists (K, C) -> (K, 2).
    """
    hists = np.array(hists, dtype=np.float64, ndmin=2)
    z = (round_half_up(hists.max(axis=1)) - threshold) / sigma1
    return np.stack([log_ndtr(z), log_ndtr(-z)], axis=1)


# ----------------------------------------------------------------------------- divergence


def _times_expm1(log_scale: NDArray[np.float64], x: NDArray[np.float64]) -> NDArray[np.float64]:
    """e^log_scale (e^x - 1) without forming e^log_scale: exact where the product is a
    normal double, even where e^log_scale alone is subnormal (e^-745 (e^48 - 1) ~ 1e-303)."""
    with np.errstate(divide="ignore", invalid="ignore"):  # x = 0 gives log 0: a 0 product
        log_size = np.where(x > 0, x + log1mexp(-np.abs(x)), log1mexp(-np.abs(x)))
        return np.sign(x) * np.exp(log_scale + log_size)


def _renyi_row(logp: NDArray[np.float64], logq: NDArray[np.float64], lam: float) -> float:
    live = logp > -np.inf  # outcomes P never shows contribute 0^lam = 0
    with np.errstate(invalid="ignore"):  # masked by `live`: -inf * 0 and -inf - -inf
        terms = np.where(live, lam * logp + (1 - lam) * logq, -np.inf)
        ratio = np.where(live, (lam - 1) * (logp - logq), 0.0)
    log_s = float(logsumexp(terms))
    if not log_s <= 0.5:
        return log_s / (lam - 1)
    # S - 1 = sum_j p_j (e^((lam-1) r_j) - 1), r_j = log(p_j / q_j): no cancellation against 1.
    contrib = np.where(live, _times_expm1(logp, ratio), 0.0)
    top = int(np.argmax(logp))
    if int(np.argmax(logq)) == top:
        # Both rows' largest entry is 1 - (the others) (``normalise``): take its log-ratio from
        # the others too, log(p_k/q_k) = log1p((Q - P) / (1 - Q)), with Q - P summed from
        # q_j - p_j = p_j expm1(log q_j - log p_j). Rounding the logs near 0 would cost
        # ~1e-16 / r_k relative, all there is when the rows are nearly certain.
        others = np.arange(logp.size) != top
        lp, lq = logp[others], logq[others]
        seen = lp > -np.inf
        with np.errstate(invalid="ignore"):  # masked by `seen`: -inf - -inf
            gap = np.where(seen, lq - lp, 0.0)
        diff = np.where(seen, _times_expm1(lp, gap), np.exp(lq))
        rest_p, rest_q = math.fsum(np.exp(lp)), math.fsum(np.exp(lq))
        log_ratio = math.log1p(math.fsum(diff) / (1 - rest_q))
        contrib[top] = (1 - rest_p) * math.expm1((lam - 1) * log_ratio)
    return math.log1p(max(math.fsum(contrib), 0.0)) / (lam - 1)


def renyi(logp: ArrayLike, logq: ArrayLike, order: float) -> NDArray[np.float64]:
    """D_order(P || Q) = log(sum_j p_j^order q_j^(1-order)) / (order - 1), row-wise.

    Rows must be normalised (``normalise``). Where the sum S is near 1 it is evaluated as
    1 + sum_j p_j expm1((order-1) log(p_j/q_j)), relatively exact down to 1e-300 when the
    rows share their most likely outcome; elsewhere by log-sum-exp.
    Shapes: (..., O), (..., O) -> (...).
    """
    logp, logq = np.broadcast_arrays(
        np.asarray(logp, dtype=np.float64), np.asarray(logq, dtype=np.float64)
    )
    lam = float(order)
    rows_p = logp.reshape(-1, logp.shape[-1])
    rows_q = logq.reshape(-1, logq.shape[-1])
    out = np.array([_renyi_row(p, q, lam) for p, q in zip(rows_p, rows_q, strict=True)])
    return out.reshape(logp.shape[:-1])


# ----------------------------------------------------------------------------- histograms


@functools.cache
def histograms(num_teachers: int, num_classes: int) -> NDArray[np.int64]:
    """Every histogram of M votes over C classes, in lexicographic order. Shapes: -> (H, C)."""
    # Stars and bars: C-1 bars among M+C-1 slots; a class's count is the gap between bars.
    slots = num_teachers + num_classes - 1
    rows = [
        np.diff(np.array((-1, *bars, slots))) - 1
        for bars in itertools.combinations(range(slots), num_classes - 1)
    ]
    out = np.array(rows, dtype=np.int64)
    out.flags.writeable = False
    return out


def neighbours(hist: ArrayLike) -> NDArray[np.int64]:
    """Every n - e_a + e_b with a != b and n_a >= 1: one teacher changes its vote.

    Shapes: (C,) -> (N, C).
    """
    hist = np.asarray(hist, dtype=np.int64)
    out = []
    for a, b in itertools.permutations(range(hist.size), 2):
        if hist[a] >= 1:
            moved = hist.copy()
            moved[a] -= 1
            moved[b] += 1
            out.append(moved)
    return np.array(out, dtype=np.int64).reshape(-1, hist.size)


def distance(first: ArrayLike, second: ArrayLike) -> NDArray[np.int64]:
    """Half the L1 distance: the number of votes to change. Broadcasts over rows."""
    diff = np.abs(np.asarray(first, dtype=np.int64) - np.asarray(second, dtype=np.int64))
    return diff.sum(axis=-1) // 2


def max_over_neighbours(
    hist: ArrayLike,
    log_probs: Callable[[NDArray[np.int64]], NDArray[np.float64]],
    order: float,
) -> tuple[float, NDArray[np.int64]]:
    """sup over neighbours n' of D_order(M(n) || M(n')) and the neighbour attaining it.

    ``log_probs`` maps histograms (K, C) to normalised outcome log-probabilities (K, O).
    """
    hist = np.asarray(hist, dtype=np.int64)
    others = neighbours(hist)
    logp = log_probs(np.vstack([hist[None, :], others]))
    divergences = renyi(logp[0], logp[1:], order)
    best = int(np.argmax(divergences))
    return float(divergences[best]), others[best]


@functools.cache
def _neighbour_table(num_teachers: int, num_classes: int) -> NDArray[np.intp]:
    """For every histogram, the indices of its neighbours (-1 where a move is impossible).

    Shapes: -> (H, C (C-1)).
    """
    hists = histograms(num_teachers, num_classes)
    # The first class is the most significant digit: lexicographic order sorts the codes.
    radix = (num_teachers + 1) ** np.arange(num_classes - 1, -1, -1)
    codes = hists @ radix
    assert np.all(np.diff(codes) > 0)  # searchsorted below needs them increasing
    moves = list(itertools.permutations(range(num_classes), 2))
    table = np.full((hists.shape[0], len(moves)), -1, dtype=np.intp)
    for column, (a, b) in enumerate(moves):
        possible = hists[:, a] >= 1
        target = codes[possible] - radix[a] + radix[b]
        table[possible, column] = np.searchsorted(codes, target)
    table.flags.writeable = False
    return table


def local_sensitivities(
    f: Callable[[NDArray[np.int64]], NDArray[np.float64]], num_teachers: int, num_classes: int
) -> NDArray[np.float64]:
    """LS(n) = max over neighbours n' of |f(n') - f(n)| for every histogram.

    ``f`` maps histograms (H, C) to the per-query cost (H,), or to terms (H, K) whose sum is
    the cost: differences are then taken term by term before summing, so that what n and n'
    share (a data-independent step's constant) cancels exactly instead of leaving its
    rounding in a difference many orders of magnitude smaller. Shapes: -> (H,).
    """
    values = np.asarray(f(histograms(num_teachers, num_classes)), dtype=np.float64)
    if values.ndim == 1:
        values = values[:, None]
    table = _neighbour_table(num_teachers, num_classes)
    change = (values[table] - values[:, None, :]).sum(axis=2)  # (H, moves)
    return np.where(table >= 0, np.abs(change), 0.0).max(axis=1)


def ls_by_distance(
    hist: ArrayLike, ls: NDArray[np.float64], num_teachers: int
) -> NDArray[np.float64]:
    """max of LS(n) over histograms n within distance d of ``hist``, for d = 0 .. M-1."""
    hist = np.asarray(hist, dtype=np.int64)
    dist = distance(histograms(num_teachers, hist.size), hist)
    at = np.zeros(num_teachers + 1)
    np.maximum.at(at, dist, ls)
    return np.maximum.accumulate(at)[:num_teachers]


def smooth_sensitivity(
    hist: ArrayLike, ls: NDArray[np.float64], num_teachers: int, beta: float
) -> float:
    """max over all histograms n of LS(n) exp(-beta dist(hist, n)) (Definition 12)."""
    hist = np.asarray(hist, dtype=np.int64)
    dist = distance(histograms(num_teachers, hist.size), hist)
    return float(np.max(ls * np.exp(-beta * dist)))

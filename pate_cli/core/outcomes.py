"""The law of a noisy max's label: log Pr[the noisy argmax is class j], per histogram.

What a mechanism's stated outcome probabilities are for the built-in answer steps, the
numbers ``pate_cli.testing`` checks their samplers and their Renyi-DP bounds against (on
small histograms: every class of every row is integrated).

- Gaussian noise N(0, sigma^2) on every class (GNMax): the midpoint of the rigorous bounds
  of ``core.outcome_bounds.gnmax_log_prob_bounds`` (within ~1e-11 of each other, relative).
- Laplace noise of scale 1/gamma (LNMax): with x the winner's noise in noise units,
  p_j = int f(x) prod_{i != j} F(x + gamma (n_j - n_i)) dx, f(x) = e^-|x| / 2 and F the
  standard Laplace CDF. The log-integrand is smooth between its kinks (x = 0 and
  x = gamma (n_i - n_j)), so Gauss-Legendre on panels of at most half a noise unit between
  them is exact to rounding. Left of every kink each factor is one exponential: the integral
  is e^(C a + sum_i d_i - C log 2) / C in closed form (a the first kink). Right of the last
  kink B the integrand lies below e^-x / 2 and above e^-x 2^-C, so stopping 60 units past B
  leaves out less than e^-56 of p_j.

Everything is summed in log space (a class far below the others keeps its relative digits).

Shapes: counts (Q, C) -> (Q, C).
"""

from __future__ import annotations

import itertools
import math
from functools import cache

import numpy as np
from numpy.typing import ArrayLike, NDArray
from scipy.special import logsumexp, roots_legendre

from pate_cli.core._common import _check_positive
from pate_cli.core.outcome_bounds import gnmax_log_prob_bounds

FloatArray = NDArray[np.float64]

_NODES = 16  # Gauss-Legendre nodes per panel
_PANEL = 0.5  # the longest panel, in noise units
_RIGHT_TAIL = 60.0  # noise units integrated past the last kink
_MOST_PANELS = 1 << 14  # per row: wider rows get wider panels (less exact, never a hang)


def gaussian_log_probabilities(counts: ArrayLike, sigma: float) -> FloatArray:
    """log Pr[argmax_j (n_j + N(0, sigma^2)) = j] per histogram and class (module docstring).

    Shapes: counts (Q, C) -> (Q, C).
    """
    lower, upper = gnmax_log_prob_bounds(counts, sigma)
    with np.errstate(invalid="ignore"):  # -inf and -inf: an impossible class stays -inf
        middle = np.where(np.isneginf(lower), upper, 0.5 * (lower + upper))
    return np.asarray(middle, dtype=np.float64)


@cache
def _legendre() -> tuple[FloatArray, FloatArray]:
    nodes, weights = roots_legendre(_NODES)
    return np.asarray(nodes), np.asarray(weights)


def _laplace_log_cdf(y: FloatArray) -> FloatArray:
    """log F(y) of the standard Laplace distribution, each side from its own form."""
    with np.errstate(over="ignore"):  # the branch not taken may overflow; it is discarded
        return np.where(y < 0, y - math.log(2.0), np.log1p(-0.5 * np.exp(-np.abs(y))))


def _panels(kinks: FloatArray) -> tuple[FloatArray, FloatArray]:
    """Gauss-Legendre nodes and log-weights on [kinks[0], kinks[-1] + _RIGHT_TAIL], every
    panel between two consecutive kinks (at most _PANEL long while the row allows)."""
    edges = np.append(kinks, kinks[-1] + _RIGHT_TAIL)
    longest = max(_PANEL, float(edges[-1] - edges[0]) / _MOST_PANELS)
    nodes, weights = _legendre()
    xs, log_ws = [], []
    for start, stop in itertools.pairwise(edges):
        cuts = np.linspace(start, stop, max(1, math.ceil((stop - start) / longest)) + 1)
        half = 0.5 * np.diff(cuts)[:, None]
        xs.append((cuts[:-1, None] + half * (nodes + 1.0)).ravel())
        log_ws.append(np.log(half * weights).ravel())
    return np.concatenate(xs), np.concatenate(log_ws)


def _laplace_row(gaps: FloatArray) -> FloatArray:
    """log p_j for one histogram, from d[j, i] = gamma (n_j - n_i) (Shapes: (C, C) -> (C,))."""
    num_classes = gaps.shape[0]
    out = np.empty(num_classes)
    for j in range(num_classes):
        d = np.delete(gaps[j], j)
        kinks = np.unique(np.append(-d, 0.0))
        # Left of every kink: e^(C x + sum d - C log 2), integrated from -inf to kinks[0].
        left = num_classes * kinks[0] + d.sum() - num_classes * math.log(2.0)
        left -= math.log(num_classes)
        x, log_w = _panels(kinks)
        log_f = -np.abs(x) - math.log(2.0)
        log_integrand = log_f + _laplace_log_cdf(x[None, :] + d[:, None]).sum(axis=0)
        out[j] = np.logaddexp(left, logsumexp(log_w + log_integrand))
    return out


def laplace_log_probabilities(counts: ArrayLike, gamma: float) -> FloatArray:
    """log Pr[argmax_j (n_j + Laplace(1/gamma)) = j] per histogram and class (module
    docstring): exact to rounding while gamma (max n - min n) stays below a few thousand.

    Shapes: counts (Q, C) -> (Q, C).
    """
    rows = np.asarray(counts, dtype=np.float64)
    if rows.ndim != 2 or not np.all(np.isfinite(rows)):
        raise ValueError(f"counts must be finite, of shape (queries, classes), got {rows.shape}")
    gamma = _check_positive("gamma", gamma)
    with np.errstate(over="ignore"):
        gaps = gamma * (rows[:, :, None] - rows[:, None, :])
    if not np.all(np.isfinite(gaps)):
        raise ValueError(f"gamma={gamma} times the counts' spread is past the double range")
    return np.stack([_laplace_row(row) for row in gaps]).reshape(rows.shape)

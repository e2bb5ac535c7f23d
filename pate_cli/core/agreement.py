"""The expected agreement of a noisy argmax with the plurality vote, by quadrature.

For one vote row n with plurality class t (the first of the largest counts, as ``argmax``
takes it), the noisy label is t exactly when t's noisy count beats every other's. With the
noise of t integrated out (the others are independent of it):

- Gaussian noise N(0, sigma^2) (GNMax):
  P = integral phi(z) prod_{j != t} Phi((n_t - n_j) / sigma + z) dz, computed with
  probabilists' Gauss-Hermite nodes (the integrand is smooth);
- Laplace noise of scale 1/gamma (LNMax):
  P = integral f(x) prod_{j != t} F(gamma (n_t - n_j) + x) dx with f and F the standard
  Laplace density and CDF, computed on each half line with Gauss-Laguerre nodes.

Ties in the plurality count as agreement only when the noisy label is the first tied class,
as ``argmax`` reports the plurality. Everything is in log space per class (``log_ndtr``, a
Laplace log-CDF from its own branches), so a vocabulary of thousands of classes does not
underflow a product.
"""

from __future__ import annotations

from functools import cache

import numpy as np
from numpy.typing import NDArray
from scipy import special

from pate_cli.core import compact
from pate_cli.core.compact import Compact

FloatArray = NDArray[np.float64]

_HERMITE_NODES = 96
_LAGUERRE_NODES = 128
_BLOCK_ELEMENTS = 1 << 22  # rows x classes x nodes held at once


@cache
def _hermite() -> tuple[FloatArray, FloatArray]:
    nodes, weights = np.polynomial.hermite_e.hermegauss(_HERMITE_NODES)
    return nodes, weights / np.sqrt(2 * np.pi)  # weights of the standard normal density


@cache
def _laguerre() -> tuple[FloatArray, FloatArray]:
    return np.polynomial.laguerre.laggauss(_LAGUERRE_NODES)


def _gaps(counts: FloatArray) -> FloatArray:
    """n_t - n_j for every class but the plurality t (which gets +inf: it never loses to
    itself). Shapes: (R, C) -> (R, C)."""
    top = np.argmax(counts, axis=1)
    rows = np.arange(counts.shape[0])
    gaps = counts[rows, top][:, None] - counts
    gaps[rows, top] = np.inf
    return gaps


def _rows_per_block(classes: int, nodes: int) -> int:
    """Rows whose (rows, classes, nodes) work array stays within the block budget."""
    return max(1, _BLOCK_ELEMENTS // max(1, classes * nodes))


def gaussian_agreement(counts: FloatArray | Compact, sigma: float) -> FloatArray:
    """P[argmax(n + N(0, sigma^2 I)) = argmax(n)] per row (module docstring); the unlisted
    zero-vote classes of compact histograms as one factor to the power of their number.

    Shapes: counts (R, C) -> (R,)."""
    counts, zeros, _ = compact.parts(counts)
    nodes, weights = _hermite()
    out = np.empty(counts.shape[0])
    step = _rows_per_block(counts.shape[1], nodes.size)
    for start in range(0, counts.shape[0], step):
        block = counts[start : start + step]
        gaps = _gaps(block) / sigma
        # log prod_j Phi(gap_j + z) at every node z: (rows, nodes)
        log_win = special.log_ndtr(gaps[:, :, None] + nodes[None, None, :]).sum(axis=1)
        if zeros is not None:
            top = block.max(axis=1)[:, None] / sigma
            log_win += zeros[start : start + step, None] * special.log_ndtr(top + nodes)
        out[start : start + gaps.shape[0]] = np.exp(log_win) @ weights
    return np.clip(out, 0.0, 1.0)


def _laplace_log_cdf(x: FloatArray) -> FloatArray:
    """log F(x) of the standard Laplace distribution, each branch from its own form."""
    with np.errstate(over="ignore"):  # the branch not taken may overflow; it is discarded
        return np.where(x < 0, x - np.log(2.0), np.log1p(-0.5 * np.exp(-np.abs(x))))


def laplace_agreement(counts: FloatArray | Compact, gamma: float) -> FloatArray:
    """P[argmax(n + Laplace(1/gamma) noise) = argmax(n)] per row (module docstring).

    Shapes: counts (R, C) -> (R,)."""
    counts, zeros, _ = compact.parts(counts)
    nodes, weights = _laguerre()
    both = np.concatenate([nodes, -nodes])  # the top's noise x on each half line
    half = np.concatenate([weights, weights]) / 2  # density e^{-|x|} / 2
    out = np.empty(counts.shape[0])
    step = _rows_per_block(counts.shape[1], both.size)
    for start in range(0, counts.shape[0], step):
        block = counts[start : start + step]
        gaps = _gaps(block) * gamma
        log_win = _laplace_log_cdf(gaps[:, :, None] + both[None, None, :]).sum(axis=1)
        if zeros is not None:
            top = block.max(axis=1)[:, None] * gamma
            log_win += zeros[start : start + step, None] * _laplace_log_cdf(top + both)
        out[start : start + gaps.shape[0]] = np.exp(log_win) @ half
    return np.clip(out, 0.0, 1.0)

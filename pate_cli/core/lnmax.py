"""LNMax: the Laplace noisy-max aggregator of Papernot et al. 2017, and the bound it rests
on, which holds for any pure-DP answer.

Noise of scale 1/gamma is added to every class count; one answer is
(2 gamma)-DP. The data-dependent bound uses q = Pr[noisy argmax != argmax]
(Lemma 4, 2017) in the moments bound of Theorem 3 (2017), written as RDP:
the 2017 moment l is the Renyi order l + 1 with log-mgf l * RDP(l + 1).
Theorem 3 holds for any eps0-DP mechanism and any bound q on the probability
that it does not give one outcome: :func:`rdp_pure_answer` is it for any
eps0 (an exponential mechanism's answer, say), :func:`rdp_lnmax` the case
eps0 = 2 gamma.
"""

from __future__ import annotations

import numpy as np
from numpy.typing import NDArray
from scipy.special import logsumexp

from pate_cli.core import compact
from pate_cli.core.compact import Compact
from pate_cli.core.logmath import log1mexp


def logq_lnmax(counts: NDArray[np.float64] | Compact, gamma: float) -> NDArray[np.float64]:
    """Upper bound on log Pr[LNMax outcome != argmax] for each query.

    Lemma 4, Papernot et al. 2017: q <= sum_{j != j*} (2 + gamma g_j) / (4 exp(gamma g_j))
    with g_j the gap to the top count, capped at 1 - 1/C. Compact histograms add their
    unlisted zero-vote classes as one term times their number.

    Shapes: counts (Q, C) -> (Q,).
    """
    if not gamma > 0:
        raise ValueError(f"gamma must be positive, got {gamma}")
    counts, zeros, num_classes = compact.parts(counts)
    rows = np.arange(counts.shape[0])
    top = counts.argmax(axis=1)
    terms = _log_terms(counts - counts[rows, top][:, None], gamma)
    terms[rows, top] = -np.inf
    logq = logsumexp(terms, axis=1)
    if zeros is not None:
        with np.errstate(divide="ignore"):  # no other zero class: log 0 adds nothing
            logq = np.logaddexp(logq, np.log(zeros) + _log_terms(-counts[rows, top], gamma))
    with np.errstate(divide="ignore"):  # log(0) for a single class is the intended -inf
        cap = np.log(1 - 1 / num_classes)
    return np.minimum(logq, cap)


def _log_terms(gaps: NDArray[np.float64], gamma: float) -> NDArray[np.float64]:
    """log of Lemma 4's term (2 + gamma g) / (4 exp(gamma g)) at each gap -g <= 0."""
    # Scaled gaps, <= 0; the reference divides by lambda = 1/gamma. A gap of more than
    # ~1e308 noise scales overflows: clip it, so that its term is exp(-1.8e308) = 0, not NaN.
    with np.errstate(over="ignore"):
        scaled = gaps / (1 / gamma)
    scaled = np.maximum(scaled, -np.finfo(np.float64).max)
    result: NDArray[np.float64] = np.log(2 - scaled) + np.log(0.25) + scaled
    return result


def rdp_lnmax_data_independent(gamma: float, orders: NDArray[np.float64]) -> NDArray[np.float64]:
    """RDP of one (2 gamma)-DP answer: min(eps^2 lambda / 2, eps) (Theorem 3 of 2017 at q = 1).

    Shapes: orders (K,) -> (K,).
    """
    if not gamma > 0:
        raise ValueError(f"gamma must be positive, got {gamma}")
    return rdp_pure_data_independent(2 * gamma, orders)


def rdp_pure_data_independent(epsilon0: float, orders: NDArray[np.float64]) -> NDArray[np.float64]:
    """RDP of one epsilon0-DP answer: min(eps^2 lambda / 2, eps) (Theorem 3 of 2017 at q = 1).

    Shapes: orders (K,) -> (K,).
    """
    orders = np.asarray(orders, dtype=np.float64)
    if not epsilon0 > 0:
        raise ValueError(f"epsilon0 must be positive, got {epsilon0}")
    if np.any(orders <= 1):
        raise ValueError("Renyi orders must be greater than 1")
    return np.minimum(0.5 * epsilon0 * epsilon0 * orders, epsilon0)


def rdp_lnmax(
    logq: NDArray[np.float64], gamma: float, orders: NDArray[np.float64]
) -> NDArray[np.float64]:
    """Data-dependent RDP of one LNMax answer per query and order: :func:`rdp_pure_answer`
    with eps0 = 2 gamma (Theorem 3, Papernot et al. 2017).

    Shapes: logq (Q,), orders (K,) -> (Q, K).
    """
    if not gamma > 0:
        raise ValueError(f"gamma must be positive, got {gamma}")
    return rdp_pure_answer(logq, 2 * gamma, orders)


def rdp_pure_answer(
    logq: NDArray[np.float64], epsilon0: float, orders: NDArray[np.float64]
) -> NDArray[np.float64]:
    """Data-dependent RDP per query and order of one answer of an epsilon0-DP mechanism
    that fails to give one outcome with probability at most q (``logq``, per query).

    Theorem 3, Papernot et al. 2017, for q <= 1/(e^eps + 1) with eps = epsilon0:
    (1/(l-1)) log((1-q) ((1-q)/(1-e^eps q))^(l-1) + q e^(eps (l-1))),
    never above the data-independent bound.

    Shapes: logq (Q,), orders (K,) -> (Q, K).
    """
    logq = np.asarray(logq, dtype=np.float64)
    out = np.empty((logq.size, np.size(orders)))
    out[:] = rdp_pure_data_independent(epsilon0, orders)
    if np.any(~(logq <= 0)):
        raise ValueError("logq must be <= 0")
    eps = epsilon0
    fixed = np.isneginf(logq)
    out[fixed] = 0.0  # q = 0: a fixed outcome, where Theorem 3 gives 0 (also for eps = inf)
    # Theorem 3's condition q <= 1/(e^eps + 1), in log space so that e^eps cannot overflow.
    valid = ~fixed & (logq <= -np.logaddexp(0.0, eps))
    if not valid.any():
        return out
    lq = logq[valid]
    om1 = np.asarray(orders, dtype=np.float64) - 1
    log1q = np.log1p(-np.exp(lq))
    log_t_one = log1q[:, None] + (log1q - log1mexp(eps + lq))[:, None] * om1
    log_t_two = lq[:, None] + eps * om1
    with np.errstate(divide="ignore"):  # q = 0 gives log t = 0 exactly; no warning wanted
        candidate = np.logaddexp(log_t_one, log_t_two) / om1
    out[valid] = np.minimum(out[valid], candidate)
    return out

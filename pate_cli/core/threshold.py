"""The noisy threshold step of Confident- and Interactive-GNMax (Papernot et al. 2018).

Step 1 answers a query when max(votes) + N(0, sigma1^2) >= T. It is a Gaussian
mechanism on max(votes), whose sensitivity is 1 (not 2 as for GNMax), so its
RDP bounds are those of GNMax with sigma replaced by sqrt(2) sigma1, with q
the probability of the less likely of the two outcomes.
"""

from __future__ import annotations

import numpy as np
from numpy.typing import NDArray
from scipy.special import log_ndtr

from pate_cli.core.gnmax import rdp_gnmax, rdp_gnmax_data_independent
from pate_cli.core.logmath import log1mexp


def round_votes(values: NDArray[np.float64], *, half_even: bool = False) -> NDArray[np.float64]:
    """Round the threshold statistic to an integer.

    The default rounds halves up, floor(x + 1/2), which keeps the sensitivity
    of the rounded max at 1 as the analysis assumes. The reference rounds half
    to even (Python ``round``), under which x = 0.5 -> 0 and x + 1 = 1.5 -> 2: a
    change of 2 between neighbours. The two differ only at exact halves, which
    only fractional Interactive-GNMax inputs (votes - baseline) can reach.
    """
    return np.round(values) if half_even else np.floor(values + 0.5)


def log_pr_answered_threshold(
    counts: NDArray[np.float64], threshold: float, sigma1: float, *, half_even: bool = False
) -> NDArray[np.float64]:
    """log Pr[max(votes) + N(0, sigma1^2) >= T] per query (Algorithm 1, step 1).

    As in the reference, max(votes) is rounded to an integer (see
    ``round_votes``), which only matters for the fractional votes - baseline of
    Interactive-GNMax.

    Shapes: counts (Q, C) -> (Q,).
    """
    if not sigma1 > 0:
        raise ValueError(f"sigma1 must be positive, got {sigma1}")
    top = round_votes(np.asarray(counts, dtype=np.float64).max(axis=1), half_even=half_even)
    # Pr[N(0, s^2) >= T - top] = Phi((top - T) / s), in log space. Beyond the float range
    # the ratio is +-inf: answered with probability 1 (log 0) or 0 (-inf), its limits.
    with np.errstate(over="ignore"):
        return log_ndtr((top - threshold) / sigma1)


def rdp_threshold(
    log_pr_answered: NDArray[np.float64], sigma1: float, orders: NDArray[np.float64]
) -> NDArray[np.float64]:
    """Data-dependent RDP of the threshold step per query and order.

    Theorem 6 applied to the two-outcome Gaussian mechanism of sensitivity 1:
    q = min(Pr[answered], 1 - Pr[answered]) and sigma -> sqrt(2) sigma1.

    Shapes: log_pr_answered (Q,), orders (K,) -> (Q, K).
    """
    log_pr_answered = np.asarray(log_pr_answered, dtype=np.float64)
    logq = np.minimum(log_pr_answered, log1mexp(log_pr_answered))
    return rdp_gnmax(logq, 2**0.5 * sigma1, orders)


def rdp_threshold_data_independent(
    sigma1: float, orders: NDArray[np.float64]
) -> NDArray[np.float64]:
    """Data-independent RDP of the threshold step: lambda / (2 sigma1^2) (Prop. 8, sensitivity 1).

    Shapes: orders (K,) -> (K,).
    """
    return rdp_gnmax_data_independent(2**0.5 * sigma1, orders)

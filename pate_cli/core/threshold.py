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


def round_votes(values: NDArray[np.float64], *, half_even: bool = False) -> NDArray[np.float64]:
    """Round the threshold statistic to an integer.

    The default rounds halves up, floor(x + 1/2), which keeps the sensitivity
    of the rounded max at 1 as the analysis assumes. The reference rounds half
    to even (Python ``round``), under which x = 0.5 -> 0 and x + 1 = 1.5 -> 2: a
    change of 2 between neighbours. The two differ only at exact halves, which
    only fractional Interactive-GNMax inputs (votes - baseline) can reach.
    """
    return np.round(values) if half_even else np.floor(values + 0.5)


def statistic_sensitivity(values: NDArray[np.float64], *, half_even: bool = False) -> int:
    """How far round(max(values)) can move between neighbouring votes: 1, or 2 under half to
    even where a value of ``values`` (votes - baseline) is an exact half.

    A neighbour moves each vote by a whole number, so the fractional parts of votes -
    baseline, and whether one is a half, are the same for every neighbour; away from exact
    halves half to even rounds as half up does, whose rounded max moves by at most 1.

    Shapes: values (Q, C) -> int.
    """
    if not half_even:
        return 1
    values = np.asarray(values, dtype=np.float64)
    with np.errstate(invalid="ignore"):  # -inf (no class, in compact votes) is no half
        return 2 if bool(np.any(values - np.floor(values) == 0.5)) else 1


def threshold_margins(
    counts: NDArray[np.float64], threshold: float, sigma1: float, *, half_even: bool = False
) -> NDArray[np.float64]:
    """(round(max(votes)) - T) / sigma1 per query: the step-1 statistic in noise units.

    Pr[answered] = Phi(z) and Pr[not answered] = Phi(-z) (Algorithm 1, step 1). As in the
    reference, max(votes) is rounded to an integer (see ``round_votes``), which only matters
    for the fractional votes - baseline of Interactive-GNMax. Beyond the float range z is
    +-inf, whose tails are the limits 1 and 0.

    Shapes: counts (Q, C) -> (Q,).
    """
    if not sigma1 > 0:
        raise ValueError(f"sigma1 must be positive, got {sigma1}")
    top = round_votes(np.asarray(counts, dtype=np.float64).max(axis=1), half_even=half_even)
    with np.errstate(over="ignore"):
        return (top - threshold) / sigma1


def log_pr_answered_threshold(
    counts: NDArray[np.float64], threshold: float, sigma1: float, *, half_even: bool = False
) -> NDArray[np.float64]:
    """log Pr[max(votes) + N(0, sigma1^2) >= T] per query (Algorithm 1, step 1).

    Shapes: counts (Q, C) -> (Q,).
    """
    return log_ndtr(threshold_margins(counts, threshold, sigma1, half_even=half_even))


def logq_threshold(
    counts: NDArray[np.float64], threshold: float, sigma1: float, *, half_even: bool = False
) -> NDArray[np.float64]:
    """log of the probability of the threshold step's less likely outcome, per query.

    min(Pr[answered], Pr[not answered]) = Phi(-|z|), from its own Gaussian tail: taking
    log(1 - Pr[answered]) from a rounded log Pr[answered] would give log 0 (a "certain"
    outcome, RDP 0) as soon as Pr[not answered] < 1e-16.

    Shapes: counts (Q, C) -> (Q,).
    """
    return logq_from_margins(threshold_margins(counts, threshold, sigma1, half_even=half_even))


def logq_from_margins(margins: NDArray[np.float64]) -> NDArray[np.float64]:
    """log Phi(-|z|): the less likely outcome of step 1 at margin z. Shapes: (Q,) -> (Q,)."""
    return log_ndtr(-np.abs(np.asarray(margins, dtype=np.float64)))


def outcomes_from_margins(
    margins: NDArray[np.float64],
) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
    """(log Pr[answered], log q of the less likely outcome) at margins z, each from its own tail.

    Shapes: (Q,) -> (Q,), (Q,).
    """
    return log_ndtr(margins), logq_from_margins(margins)


# log(1/2) with room for the last bit of log_ndtr(0): the largest log q of a less likely outcome.
_LOG_HALF = float(np.log(0.5)) + 1e-12


def rdp_threshold(
    logq: NDArray[np.float64],
    sigma1: float,
    orders: NDArray[np.float64],
    *,
    sensitivity: float = 1.0,
) -> NDArray[np.float64]:
    """Data-dependent RDP of the threshold step per query and order.

    Theorem 6 applied to the two-outcome Gaussian mechanism of sensitivity 1 (or
    ``sensitivity``: Prop. 8's curve of sigma1 / sensitivity), with
    q = min(Pr[answered], Pr[not answered]) (``logq_threshold``) and sigma -> sqrt(2) sigma1.

    Raises:
        ValueError: a log q above log(1/2), which is no less likely outcome (a log
            Pr[answered] passed by mistake).

    Shapes: logq (Q,), orders (K,) -> (Q, K).
    """
    logq = np.asarray(logq, dtype=np.float64)
    if np.any(logq > _LOG_HALF):
        raise ValueError(
            "the threshold step's log q is that of its less likely outcome (<= log 1/2)"
        )
    return rdp_gnmax(logq, 2**0.5 * sigma1 / sensitivity, orders)


def rdp_threshold_data_independent(
    sigma1: float, orders: NDArray[np.float64], *, sensitivity: float = 1.0
) -> NDArray[np.float64]:
    """Data-independent RDP of the threshold step: lambda s^2 / (2 sigma1^2) (Prop. 8, the
    statistic's sensitivity s, 1 by default).

    Shapes: orders (K,) -> (K,).
    """
    return rdp_gnmax_data_independent(2**0.5 * sigma1 / sensitivity, orders)


def _log_tails(margins: NDArray[np.float64]) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
    """(log Pr[answered], log Pr[not answered]) at margins z, each from its own tail."""
    return log_ndtr(margins), log_ndtr(-margins)


def rdp_threshold_joint(
    margins: NDArray[np.float64],
    sigma1: float,
    orders: NDArray[np.float64],
    answer_rdp: NDArray[np.float64] | None = None,
    *,
    shift: float = 1.0,
) -> NDArray[np.float64]:
    """The Renyi divergence of the threshold step's outcome, and of the outcome joint with
    the label, per query and order, maximised over the neighbours.

    The outcome is Bernoulli(p), p = Phi(z); a neighbour moves the top vote by ``shift``
    (1 for the rounded max), so its margin is z' = z +- shift / sigma1. By the chain rule the
    joint (outcome, label) divergence is at most
    log(p^l p'^(1-l) e^((l-1) g) + (1-p)^l (1-p')^(1-l)) / (l-1), with g >= the label's
    divergence given an answer (``answer_rdp``; 0 gives the outcome alone, exactly, as
    Private-kNN, Zhu et al. 2020). The expression is convex in p', so its maximum over the
    neighbours is at z' = z - shift / sigma1 or z + shift / sigma1.

    Shapes: margins (Q,), orders (K,), answer_rdp (Q, K) -> (Q, K).
    """
    margins = np.asarray(margins, dtype=np.float64)
    orders = np.asarray(orders, dtype=np.float64)
    lam = orders[None, :]
    log_p, log_q = (t[:, None] for t in _log_tails(margins))
    with np.errstate(over="ignore"):  # a gain past the float range is +inf: no bound lost
        gain = 0.0 if answer_rdp is None else (lam - 1) * np.asarray(answer_rdp, dtype=np.float64)
    best = np.full((margins.size, orders.size), -np.inf)
    with np.errstate(invalid="ignore"):
        for step in (-shift / sigma1, shift / sigma1):
            log_p2, log_q2 = (t[:, None] for t in _log_tails(margins + step))
            answered = lam * log_p + (1 - lam) * log_p2 + gain
            declined = lam * log_q + (1 - lam) * log_q2
            # An outcome impossible at the votes contributes nothing (0^l, whatever p').
            answered = np.where(np.isneginf(log_p), -np.inf, answered)
            declined = np.where(np.isneginf(log_q), -np.inf, declined)
            best = np.maximum(best, np.logaddexp(answered, declined))
    rdp = best / (lam - 1)
    return np.where(np.isnan(rdp), np.inf, np.maximum(rdp, 0.0))

"""Theorem 6's data-dependent GNMax bound, where it meets Prop. 8's (q0, q1), and its slope.

Papernot et al. 2018 ("Scalable Private Learning with PATE"), Appendix B: Theorem 6 with
Prop. 10's mu1, mu2; beta(q) (before Corollary 11); the crossover log q0 of Theorem 6 and
the data-independent bound of Prop. 8 (condition C5); Prop. 13's bounds B_L, B_U of a
neighbour's q and log q1 = log B_L(q0) (condition C6); the derivative of Theorem 6's bound
with which C5/C6 are checked.

* The crossover log q0 (Brent root of Theorem 6 = Prop. 8) is a pure scalar function of
  (sigma, order) and is memoised with ``functools.lru_cache``; so is the sound analysis's
  q0, a bisection on the published bound ``rdp_gnmax``.
* The derivative of Theorem 6's bound is written out analytically instead of through sympy.

Shapes: N values of log q, K orders.
"""

from __future__ import annotations

import functools
import math

import numpy as np
from numpy.typing import ArrayLike, NDArray
from scipy.special import log_ndtr, ndtri_exp

from pate_cli.core._common import _check_num_classes, _check_order, _check_positive
from pate_cli.core.bisection import bisect_boundary
from pate_cli.core.gnmax import rdp_gnmax, rdp_gnmax_data_independent

# Theorem 6 is evaluated on log q clipped to [_LOGQ_FLOOR, log q0]; it is 0 at the floor.
_LOGQ_FLOOR = -1e300
# sigma for which log q0 is computed: sigma^2, 1/sigma^2 and Theorem 6's terms stay normal.
_SIGMA_RANGE = (1e-100, 1e100)


class NumericalRangeError(ArithmeticError):
    """A quantity of the analysis leaves the double range (sigma too small or too large)."""


def _rdp_gnmax_theorem6(
    logq: NDArray[np.float64], sigma: float, order: float
) -> NDArray[np.float64]:
    """Theorem 6 with Prop. 10's mu1, mu2, without checking its conditions.

    The caller guarantees -inf < logq <= logq0, where the conditions hold by
    construction of logq0 (log q0 <= -(1 + 1/sigma)^2). Shapes: logq (N,) -> (N,).
    """
    variance = sigma**2
    mu2 = sigma * np.sqrt(-logq)  # Prop. 10
    mu1 = mu2 + 1
    eps1 = mu1 / variance
    eps2 = mu2 / variance
    # log(1 - e^x) as log1p(-e^x): both arguments are <= -1 here, since log q <= -1 and
    # (log q + eps2)(1 - 1/mu2) = -(sqrt(-log q) - 1/sigma)^2 <= -1 for log q <= -(1 + 1/sigma)^2.
    log1q = np.log1p(-np.exp(logq))
    # Theorem 6: A = (1-q) / (1 - (q e^eps2)^((mu2-1)/mu2)), B = e^eps1 / q^(1/(mu1-1)).
    log_a = (order - 1) * (log1q - np.log1p(-np.exp((logq + eps2) * (1 - 1 / mu2))))
    log_b = (order - 1) * (eps1 - logq / (mu1 - 1))
    # Theorem 6: (1/(l-1)) log((1-q) A^(l-1) + q B^(l-1)), summed in log space.
    return np.logaddexp(log1q + log_a, logq + log_b) / (order - 1)


def _beta(
    logq: NDArray[np.float64], sigma: float, order: float, logq0: float
) -> NDArray[np.float64]:
    """beta_sigma(q) of Appendix B (before Corollary 11), as the reference evaluates it.

    Theorem 6 below q0 and the data-independent lambda / sigma^2 (Prop. 8)
    from q0 on; q = 0 (log q = -inf) is a fixed outcome with RDP 0.
    Shapes: logq (N,) -> (N,).
    """
    logq = np.asarray(logq, dtype=np.float64)
    # Clipping keeps Theorem 6 finite everywhere; np.where then picks the right branch
    # (at the floor the bound is exactly 0, the fixed-outcome value).
    dependent = _rdp_gnmax_theorem6(np.clip(logq, _LOGQ_FLOOR, logq0), sigma, order)
    return np.where(logq < logq0, dependent, rdp_gnmax_data_independent(sigma, np.array([order])))


@functools.lru_cache(maxsize=1024)
def _logq0_scalar(sigma: float, order: float) -> float:
    """Brent root of Theorem 6 = Prop. 8 in log q, bracketed as the reference does."""
    # Theorem 6 needs lambda / sigma^2 and (1 + 1/sigma)^2 as normal doubles.
    if not _SIGMA_RANGE[0] <= sigma <= _SIGMA_RANGE[1]:
        raise NumericalRangeError(
            f"log q0 is not computable in double precision for sigma {sigma:g} "
            f"(outside [{_SIGMA_RANGE[0]:g}, {_SIGMA_RANGE[1]:g}])"
        )
    independent = order / sigma**2

    def excess(logq: float) -> float:
        dependent = _rdp_gnmax_theorem6(np.array([logq]), sigma, order)[0]
        return float(dependent - independent)

    # Natural upper bounds on log q0 (they keep Theorem 6's conditions, Lemma 9).
    log_upper = min(-((1 + 1 / sigma) ** 2), -(((order - 0.99) / sigma) ** 2), -1 / sigma**2)
    if excess(log_upper) < 0:
        return log_upper
    log_lower = 2 * log_upper
    while excess(log_lower) > 0:
        if log_lower < -10000:
            raise NumericalRangeError(
                f"cannot bracket log q0 for sigma={sigma}, order={order}: "
                "the lower end passed -10000"
            )
        log_lower *= 1.5
    from scipy import optimize  # 0.2 s to import: only the reference's q0 needs it

    root, result = optimize.brentq(excess, log_lower, log_upper, full_output=True)
    if not result.converged:
        raise RuntimeError(
            f"the root finder for log q0 did not converge (sigma={sigma}, order={order})"
        )
    return float(root)


def logq0_gnmax(sigma: float, orders: ArrayLike) -> NDArray[np.float64]:
    """log q0: where GNMax's data-independent bound takes over, per order.

    Condition C5, Papernot et al. 2018: beta(q) is Theorem 6's bound for
    q < q0 and lambda / sigma^2 (Prop. 8) for q >= q0. Found with Brent's method
    on the same bracket as the reference (``compute_logq0_gnmax``), so the roots
    agree to the solver tolerance (~1e-12).

    Args:
        sigma: standard deviation of GNMax's Gaussian noise.
        orders: Renyi orders, each > 1.

    Returns:
        log q0 per order.

    Raises:
        ValueError: sigma <= 0 or an order <= 1.
        NumericalRangeError: sigma outside 1e-100 .. 1e100, or no bracket for the root.
        RuntimeError: Brent does not converge.

    Shapes: orders (K,) -> (K,).
    """
    sigma = _check_positive("sigma", sigma)
    orders_arr = np.atleast_1d(np.asarray(orders, dtype=np.float64))
    return np.array([_logq0_scalar(sigma, _check_order(o)) for o in orders_arr])


def _log_erfcinv_argument(logq: ArrayLike, num_classes: int) -> tuple[NDArray[np.float64], float]:
    # erfcinv(2q/(C-1)) = -ndtri(q/(C-1)) / sqrt(2); ndtri_exp keeps tiny q exact.
    log_c1 = math.log(num_classes - 1)
    return ndtri_exp(np.minimum(np.asarray(logq, dtype=np.float64) - log_c1, 0.0)), log_c1


def log_bl_gnmax(logq: ArrayLike, sigma: float, num_classes: int) -> NDArray[np.float64]:
    """log B_L(q): lower bound on q over neighbouring histograms (Algorithm 3).

    B_L(q) = (C-1)/2 erfc(erfcinv(2q/(C-1)) + 1/sigma) (Prop. 13, Papernot et
    al. 2018), evaluated in log space as
    log(C-1) + log Phi(Phi^-1(q/(C-1)) - sqrt(2)/sigma), which stays exact
    where q underflows.

    Shapes: logq (N,) -> (N,).
    """
    sigma = _check_positive("sigma", sigma)
    num_classes = _check_num_classes(num_classes)
    z, log_c1 = _log_erfcinv_argument(logq, num_classes)
    return log_c1 + log_ndtr(z - math.sqrt(2) / sigma)


def log_bu_gnmax(logq: ArrayLike, sigma: float, num_classes: int) -> NDArray[np.float64]:
    """log B_U(q): upper bound on q over neighbouring histograms (Algorithm 3).

    B_U(q) = min(1, (C-1)/2 erfc(erfcinv(2q/(C-1)) - 1/sigma)) (Prop. 13,
    Papernot et al. 2018), in log space like :func:`log_bl_gnmax`.

    Shapes: logq (N,) -> (N,).
    """
    sigma = _check_positive("sigma", sigma)
    num_classes = _check_num_classes(num_classes)
    z, log_c1 = _log_erfcinv_argument(logq, num_classes)
    return np.minimum(0.0, log_c1 + log_ndtr(z + math.sqrt(2) / sigma))


def logq1_gnmax(sigma: float, orders: ArrayLike, num_classes: int) -> NDArray[np.float64]:
    """log q1 = log B_L(q0) per order: the left end of Algorithm 3's plateau.

    Condition C6, Papernot et al. 2018 (the reference's ``_compute_logq1``).

    Shapes: orders (K,) -> (K,).
    """
    return log_bl_gnmax(logq0_gnmax(sigma, orders), sigma, num_classes)


def _phi(logq: NDArray[np.float64], sigma: float, order: float) -> NDArray[np.float64]:
    """The published per-query GNMax bound (``rdp_gnmax``) at one order. Shapes: (N,) -> (N,)."""
    return rdp_gnmax(np.minimum(logq, 0.0), sigma, np.array([order]))[:, 0]


@functools.lru_cache(maxsize=1024)
def _logq0_sound(sigma: float, order: float, num_classes: int) -> float:
    """A lower bound of inf{log q : rdp_gnmax(log q) = lambda / sigma^2}, by bisection.

    rdp_gnmax is non-decreasing in q and equals Prop. 8's bound from there on; the
    returned point is the largest one found where it is still below, so the infimum is
    never below it. When it never reaches Prop. 8 below the cap, the cap is returned.
    """
    if not _SIGMA_RANGE[0] <= sigma <= _SIGMA_RANGE[1]:
        raise NumericalRangeError(
            f"log q0 is not computable in double precision for sigma {sigma:g} "
            f"(outside [{_SIGMA_RANGE[0]:g}, {_SIGMA_RANGE[1]:g}])"
        )
    independent = float(rdp_gnmax_data_independent(sigma, np.array([order]))[0])
    log_cap = math.log(1 - 1 / num_classes)

    def reached(logq: float) -> bool:
        return bool(_phi(np.array([logq]), sigma, order)[0] >= independent)

    if not reached(log_cap):
        return log_cap
    low = -1.0
    while reached(low):
        low *= 2
        if low < -1e300:
            return low  # Prop. 8 everywhere: any point below every histogram's log q
    high = log_cap
    if low > high:
        low = 2 * high
    # From below, to adjacent doubles: every point returned is one where Prop. 8 is not reached.
    return bisect_boundary(lambda logq: not reached(logq), low, high)


def _theorem6_derivative(q: float, sigma: float, order: float) -> float:
    """d/dq of Theorem 6's bound (Prop. 10's mu1, mu2), unconditional, as sympy would get.

    With L = -log q: mu2 = sigma sqrt(L), mu1 = mu2 + 1, eps_i = mu_i / sigma^2,
    log A = log(1-q) - log(1 - P), P = (q e^eps2)^(1-1/mu2), log B = eps1 - log(q)/(mu1-1),
    beta = log((1-q) A^(l-1) + q B^(l-1)) / (l-1). Evaluated in float64 arithmetic whose
    overflow gives +-inf; NaN (inf - inf) where the value is not representable.
    """
    with np.errstate(all="ignore"):
        q_ = np.float64(q)
        log_q = np.log(q_)
        root = np.sqrt(-log_q)
        mu2 = sigma * root
        mu1 = mu2 + 1
        variance = np.float64(sigma) ** 2
        eps2 = mu2 / variance
        eps1 = mu1 / variance
        d_mu2 = -sigma / (2 * q_ * root)
        d_eps2 = d_mu2 / variance
        exponent = (1 - 1 / mu2) * (log_q + eps2)
        d_exponent = d_mu2 / mu2**2 * (log_q + eps2) + (1 - 1 / mu2) * (1 / q_ + d_eps2)
        power = np.exp(exponent)
        log_a = np.log1p(-q_) - np.log1p(-power)
        d_log_a = -1 / (1 - q_) + power / (1 - power) * d_exponent
        log_b = eps1 - log_q / (mu1 - 1)
        d_log_b = d_eps2 - 1 / (q_ * (mu1 - 1)) + log_q / (mu1 - 1) ** 2 * d_mu2
        first = np.log1p(-q_) + (order - 1) * log_a
        second = log_q + (order - 1) * log_b
        log_s = np.logaddexp(first, second)
        # d log S / dq with the weights of the two terms; q B^(l-1) / q kept in log space.
        derivative = (
            np.exp(first - log_s) * (-1 / (1 - q_) + (order - 1) * d_log_a)
            + np.exp((order - 1) * log_b - log_s)
            + np.exp(second - log_s) * (order - 1) * d_log_b
        )
        return float(derivative / (order - 1))

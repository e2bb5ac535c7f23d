"""From an RDP curve to (epsilon, delta)-DP at the best order.

Two named conversions:

- ``classic``: eps = rdp + log(1/delta) / (order - 1) (Mironov 2017, Prop. 3),
  what the 2018 paper and its reference code use.
- ``improved``: eps = rdp + log(1 - 1/order) - log(delta * order) / (order - 1)
  (Balle et al. 2020 / Canonne, Kamath, Steinke 2020), computed as
  dp_accounting's ``rdp_privacy_accountant.compute_epsilon`` does, so the
  numbers agree with that library and Opacus.

Both return the epsilon per order, so callers can show the whole curve, and
pick the first index of the minimum, as ``numpy.argmin`` does in the reference.
"""

from __future__ import annotations

import numpy as np
from numpy.typing import NDArray


def _check(orders: NDArray[np.float64], rdp: NDArray[np.float64], delta: float) -> None:
    if orders.shape != rdp.shape:
        raise ValueError("orders and rdp must have the same shape")
    if not 0 < delta < 1:
        raise ValueError(f"delta must be in (0, 1), got {delta}")
    if np.any(orders <= 1):
        raise ValueError("Renyi orders must be greater than 1")
    if np.any(~(rdp >= 0)):
        raise ValueError("RDP must be non-negative and not NaN")


def eps_curve_classic(
    orders: NDArray[np.float64], rdp: NDArray[np.float64], delta: float
) -> NDArray[np.float64]:
    """eps(order) = rdp + log(1/delta) / (order - 1) (Mironov 2017, Prop. 3).

    Shapes: orders (K,), rdp (K,) -> (K,).
    """
    orders, rdp = np.asarray(orders, np.float64), np.asarray(rdp, np.float64)
    _check(orders, rdp, delta)
    return rdp - np.log(delta) / (orders - 1)


def eps_curve_improved(
    orders: NDArray[np.float64], rdp: NDArray[np.float64], delta: float
) -> NDArray[np.float64]:
    """eps(order) of Balle et al. 2020, Theorem 21 (= Canonne et al. 2020, Prop. 12).

    As dp_accounting: 0 where delta^2 + expm1(-rdp) > 0 (the KL bound already
    gives delta), inf for orders <= 1.01 (unstable there). Values may be
    negative: as dp_accounting, pick the order on these raw values and clip
    the chosen epsilon at 0 (``clip_epsilon``).

    Shapes: orders (K,), rdp (K,) -> (K,).
    """
    orders, rdp = np.asarray(orders, np.float64), np.asarray(rdp, np.float64)
    _check(orders, rdp, delta)
    eps = np.full(orders.shape, np.inf)
    stable = orders > 1.01
    a, r = orders[stable], rdp[stable]
    eps[stable] = r + np.log1p(-1 / a) - np.log(delta * a) / (a - 1)
    eps[delta**2 + np.expm1(-rdp) > 0] = 0.0
    return eps


def best_order(eps: NDArray[np.float64]) -> int:
    """Index of the first minimum of an epsilon curve (numpy.argmin, as the reference)."""
    return int(np.argmin(eps))

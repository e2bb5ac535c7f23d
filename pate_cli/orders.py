"""Renyi orders: the default grid of the 2018 reference and the ``--orders`` parser."""

from __future__ import annotations

import numpy as np
from numpy.typing import NDArray

from pate_cli.errors import UsageError

# The 2018 reference's list, exactly: 2, 2.5, ..., 100.5 then 100 ... 500 on a
# log scale. It is not sorted and 100.0 appears twice; argmin keeps the first.
DEFAULT_ORDERS: NDArray[np.float64] = np.concatenate(
    (np.arange(2, 100 + 1, 0.5), np.logspace(np.log10(100), np.log10(500), num=100))
)

_MAX_ORDERS = 100_000


def parse_orders(text: str | None) -> NDArray[np.float64]:
    """Parse ``--orders``: ``None`` (the default grid), ``a,b,c`` or ``start:stop:step``.

    ``start:stop:step`` has ``numpy.arange`` semantics (stop excluded, float
    steps allowed). Every order must be finite and greater than 1.
    """
    if text is None:
        return DEFAULT_ORDERS.copy()
    spec = text.strip()
    try:
        if ":" in spec:
            parts = [float(p) for p in spec.split(":")]
            if len(parts) != 3:
                raise ValueError
            start, stop, step = parts
            if not np.isfinite(parts).all() or step <= 0:
                raise UsageError(
                    f"--orders {text!r}: start:stop:step needs finite numbers and a positive step"
                )
            if (stop - start) / step > _MAX_ORDERS:
                raise UsageError(f"--orders {text!r}: more than {_MAX_ORDERS} orders")
            orders = np.arange(start, stop, step, dtype=np.float64)
        else:
            orders = np.array([float(p) for p in spec.split(",") if p.strip()], dtype=np.float64)
    except ValueError:
        raise UsageError(
            f"--orders {text!r}: expected a comma list such as 2,4,8 "
            "or start:stop:step such as 2:64:0.5"
        ) from None
    if orders.size == 0:
        raise UsageError(f"--orders {text!r}: the list of orders is empty")
    if not np.all(np.isfinite(orders)) or np.any(orders <= 1):
        raise UsageError(f"--orders {text!r}: every Renyi order must be finite and greater than 1")
    return orders

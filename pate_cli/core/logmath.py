"""Vectorised log-space helpers."""

from __future__ import annotations

import numpy as np
from numpy.typing import ArrayLike, NDArray


def log1mexp(x: ArrayLike) -> NDArray[np.float64]:
    """Return log(1 - exp(x)) for x <= 0, elementwise.

    Uses log1p(-exp(x)) for x < -1 and log(-expm1(x)) for -1 <= x < 0, the
    split that keeps both branches accurate (Maechler 2012); log1mexp(0) = -inf.

    Raises:
        ValueError: if any x > 0 (or is NaN).
    """
    x = np.asarray(x, dtype=np.float64)
    if not np.all(x <= 0):
        raise ValueError("log1mexp needs non-positive arguments")
    near = x >= -1
    taken = np.count_nonzero(near)
    with np.errstate(divide="ignore", invalid="ignore"):  # log(0) = -inf at x = 0: intended
        out = np.log1p(-np.exp(x), out=np.empty_like(x))
        if 4 * taken > near.size:  # both branches everywhere beat gathering a large part
            out = np.where(near, np.log(-np.expm1(x)), out)
        elif taken:
            out[near] = np.log(-np.expm1(x[near]))
    return out

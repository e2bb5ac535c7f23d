"""Hypothesis strategies and example budgets shared by the oracle tests."""

from __future__ import annotations

import math
import os

import numpy as np
from hypothesis import strategies as st

from pate_cli.orders import DEFAULT_ORDERS

# Every soundness property runs at least 200 examples in CI (CI=true: the "ci" profile of
# tests/conftest.py, derandomized), 100 locally and 1,000 with PATE_THOROUGH=1;
# PATE_ORACLE_EXAMPLES overrides them all.
_DEFAULT = 1000 if os.environ.get("PATE_THOROUGH") else 200 if os.environ.get("CI") else 100
EXAMPLES = int(os.environ.get("PATE_ORACLE_EXAMPLES", _DEFAULT))
# The oracle's self-checks need fewer: each compares two integration methods.
SELF_CHECK_EXAMPLES = max(20, EXAMPLES // 5)


def log_uniform(low: float, high: float) -> st.SearchStrategy[float]:
    """Floats spread evenly in log scale over [low, high] (ends included)."""
    return st.floats(math.log(low), math.log(high)).map(lambda x: min(max(math.exp(x), low), high))


def renyi_orders(high: float) -> st.SearchStrategy[float]:
    """Renyi orders up to ``high``: the default grid's orders below 2 (where the 2018
    reference's list stops) and any order in [1.01, high], log-uniform."""
    low = sorted({float(order) for order in DEFAULT_ORDERS if order < 2})
    return st.one_of(st.sampled_from(low), log_uniform(1.01, high))


@st.composite
def histograms(
    draw: st.DrawFn, min_classes: int = 2, max_classes: int = 4, max_teachers: int = 14
) -> np.ndarray:
    """A histogram of M in [2, max_teachers] votes over C classes, from C-1 cut points."""
    num_classes = draw(st.integers(min_classes, max_classes))
    num_teachers = draw(st.integers(2, max_teachers))
    cuts = sorted(
        draw(
            st.lists(
                st.integers(0, num_teachers), min_size=num_classes - 1, max_size=num_classes - 1
            )
        )
    )
    return np.diff(np.array([0, *cuts, num_teachers])).astype(np.int64)

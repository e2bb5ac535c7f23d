"""One pass: the per-query terms (log q, Pr[answered]) are computed once per call.

The figures (data-dependent, guaranteed, exact, worst case), the ledger and the release's
local sensitivities read the terms the accountant computed; none walks the queries
through the core's log-q or Pr[answered] functions again. The calls are counted by code
object, so an import under another name is counted too.
"""

from __future__ import annotations

import sys
import threading
from collections import Counter
from collections.abc import Callable, Iterator
from contextlib import contextmanager

import numpy as np
import pytest

import pate_cli as pate
from pate_cli.core import gnmax, lnmax, threshold
from tests.conftest import MNIST

QUERIES = 640
TEACHERS = 250
WATCHED = {
    gnmax.logq_gnmax.__code__: "log q",
    lnmax.logq_lnmax.__code__: "log q",
    threshold.threshold_margins.__code__: "Pr[answered]",
}


@contextmanager
def rows_evaluated() -> Iterator[Counter[str]]:
    """How many rows each watched function was given, over every call in every thread."""
    rows: Counter[str] = Counter()

    def profile(frame, event, arg):  # noqa: ANN001, ARG001 - the sys.setprofile signature
        if event == "call" and frame.f_code in WATCHED:
            first = frame.f_locals[frame.f_code.co_varnames[0]]
            rows[WATCHED[frame.f_code]] += int(np.shape(first)[0]) if np.ndim(first) else 1

    threading.setprofile(profile)
    sys.setprofile(profile)
    try:
        yield rows
    finally:
        sys.setprofile(None)
        threading.setprofile(None)


CALLS: dict[str, Callable[[pate.Votes], object]] = {
    "gnmax analyze": lambda v: pate.analyze(v, pate.GNMax(40), delta=1e-5, breakdown=True),
    "confident analyze": lambda v: pate.analyze(
        v, pate.ConfidentGNMax(200, 150, 40), delta=1e-5, breakdown=True
    ),
    "lnmax analyze": lambda v: pate.analyze(v, pate.LNMax(0.05), delta=1e-5, breakdown=True),
    "confident smooth-sensitivity": lambda v: pate.smooth_sensitivity(
        v, pate.ConfidentGNMax(200, 150, 40), delta=1e-5
    ),
    # The realised run's account reads the expected run's terms.
    "confident aggregate": lambda v: pate.aggregate(
        v, pate.ConfidentGNMax(200, 150, 40), delta=1e-5, seed=np.random.default_rng(1)
    ),
}


@pytest.mark.parametrize("name", CALLS)
def test_each_query_is_evaluated_once_per_call(name):
    votes = pate.load_votes(MNIST, queries=QUERIES)
    with rows_evaluated() as rows:
        CALLS[name](votes)
    # Once per query, plus what is not a query: the release's table of Pr[answered] over
    # the statistic's M + 1 values, and the data-independence shortcut's one histogram.
    # A second pass over the queries would add another 640.
    assert QUERIES <= rows["log q"] <= QUERIES + 2
    if "confident" in name:
        assert QUERIES <= rows["Pr[answered]"] <= QUERIES + TEACHERS + 1 + 2
    else:
        assert rows["Pr[answered]"] == 0

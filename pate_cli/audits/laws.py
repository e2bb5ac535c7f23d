"""The law of one query's outcome on histograms: stated by the mechanism, or estimated.

A law is, per histogram, the log-probability of each kind of outcome (``draws``: kind 0
abstained where the mechanism has a threshold step, then each label). The stated law is
the answer step's ``log_probabilities`` (the label's law, exact to rounding) and, with a
threshold step, its terms' log Pr[answered] and log of the less likely outcome, each
outcome from its own tail; the threshold's and the answer's noises are independent, so
Pr[label j] = Pr[answered] Pr[argmax = j]. A mechanism that states no label law is
estimated on draws held out from the audit (frequencies with half a draw added to each
kind), which fix the pair and the test and nothing else.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from itertools import count

import numpy as np
from numpy.typing import NDArray

from pate_cli.audits.draws import block_noise, kinds_of, outcome_kinds
from pate_cli.core.logmath import log1mexp
from pate_cli.core.outcome_bounds import TooManyClassesError
from pate_cli.mechanisms import Mechanism
from pate_cli.mechanisms.plugins import failure

FloatArray = NDArray[np.float64]
Law = Callable[[FloatArray], FloatArray]
"""histograms (n, C) -> log-probabilities of each kind of outcome (n, K)."""

_LOG_HALF = math.log(0.5)


def stated_law(mechanism: Mechanism) -> Law | None:
    """The mechanism's own law of a query's outcome (module docstring); None where its
    answer step states no ``log_probabilities``."""
    labels_of = getattr(mechanism.answer_step, "log_probabilities", None)
    if labels_of is None:
        return None
    step = mechanism.threshold_step

    def law(rows: FloatArray) -> FloatArray:
        labels = _checked(mechanism, labels_of(rows), rows.shape)
        if step is None:
            return labels
        terms = step.terms(rows, False)
        log_pr = np.minimum(np.asarray(terms.log_pr_answered, dtype=np.float64), 0.0)
        logq = np.minimum(np.asarray(terms.logq, dtype=np.float64), 0.0)
        rare = log_pr <= _LOG_HALF  # the less likely outcome from its own tail
        abstain = np.where(rare, log1mexp(log_pr), logq)
        answered = np.where(rare, log_pr, log1mexp(logq))
        return np.column_stack([abstain, answered[:, None] + labels])

    return law


def uncovered(law: Law, classes: int) -> str | None:
    """Why the stated ``law`` cannot give histograms of ``classes`` classes (its exact
    quadrature covers fewer), or None where it can: tried on one histogram."""
    try:
        law(np.eye(1, classes) * 2.0)
    except TooManyClassesError as error:
        return str(error)
    return None


def _checked(mechanism: Mechanism, found: object, shape: tuple[int, ...]) -> FloatArray:
    """The stated label law, checked: log-probabilities of ``shape``, none NaN or above 0.

    Raises:
        PluginError: what it states is not a law of that shape: the mechanism's failure.
    """
    labels = np.asarray(found, dtype=np.float64)
    if labels.shape != shape or np.isnan(labels).any() or (labels > 1e-12).any():
        did = f"its answer step's log_probabilities are not log-probabilities of shape {shape}"
        raise failure(type(mechanism), did)
    return np.minimum(labels, 0.0)


def estimated_law(mechanism: Mechanism, draws: int, root: int) -> Law:
    """The law estimated on ``draws`` held-out outcomes of each histogram (module
    docstring), each histogram's draws a stream of their own (``pate_cli.audits.draws``)."""
    blocks = count()

    def law(rows: FloatArray) -> FloatArray:
        kinds = kinds_of(mechanism, rows.shape[1])
        out = np.empty((rows.shape[0], kinds))
        for index, row in enumerate(rows):
            noise = block_noise(root, "pilot", 0, next(blocks))
            drawn = outcome_kinds(mechanism, row, draws, noise)
            seen = np.bincount(drawn, minlength=kinds) + 0.5
            out[index] = np.log(seen / seen.sum())
        return out

    return law

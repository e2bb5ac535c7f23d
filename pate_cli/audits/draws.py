"""A mechanism's outcomes on one histogram, drawn by its own ``run`` (what ``aggregate`` runs).

The kind of an outcome is its label plus one for a mechanism with a threshold step (kind 0:
abstained), the label itself otherwise. Every block of draws comes from its own stream: a
``numpy.random.SeedSequence`` of the audit's root entropy and a spawn key (purpose, side,
block), turned into the seed of a ``Noise`` whose purposes each draw from their own stream
(``pate_cli.files.seeds``), so no two blocks, sides or purposes share a draw.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
from numpy.typing import NDArray

from pate_cli.files.seeds import Noise, from_seed
from pate_cli.mechanisms import Mechanism, Run
from pate_cli.mechanisms.plugins import failure

IntArray = NDArray[np.int64]

BLOCK_ELEMENTS = 1 << 21
"""Votes (queries x classes) given to one call of ``run``: memory is bounded by it, not by
the runs."""

PURPOSES = {"pilot": 1, "audit": 2}
"""The audit's streams, by spawn key: draws held out to fix a test, and the audit's own."""


def kinds_of(mechanism: Mechanism, classes: int) -> int:
    """How many kinds of outcome one query has: its labels, and abstaining if it can."""
    return classes + (0 if mechanism.answers_every_query else 1)


def block_noise(root: int, purpose: str, side: int, block: int) -> Noise:
    """The noise of one block: its own stream of the root entropy."""
    sequence = np.random.SeedSequence(root, spawn_key=(PURPOSES[purpose], side, block))
    seed = int.from_bytes(sequence.generate_state(4, np.uint32).tobytes(), "little")
    return from_seed(seed)


def outcome_kinds(
    mechanism: Mechanism, row: NDArray[np.float64], count: int, noise: Noise
) -> IntArray:
    """The kinds of ``count`` outcomes of one query on the histogram ``row`` (C,), drawn by
    the mechanism's ``run`` with a baseline of zeros (the student never reinforced), no stop
    condition, rounding half up.

    Raises:
        PluginError: the run released a label that is not a class of the row (or -1 from a
            mechanism that answers every query): the mechanism's failure.
    """
    counts = np.repeat(row[None, :], count, axis=0)
    baseline = np.zeros(counts.shape) if mechanism.needs_baseline else None
    teachers = int(round(float(row.sum())))
    result = mechanism.run(counts, noise, Run(baseline, 1.0, teachers, None, None, False))
    labels = np.asarray(result.labels, dtype=np.int64)
    low = 0 if mechanism.answers_every_query else -1
    if labels.shape != (count,) or labels.min() < low or labels.max() >= row.size:
        said = "" if low == 0 else " (or -1, none)"
        did = f"its run released a label outside the classes 0..{row.size - 1}{said}"
        raise failure(type(mechanism), did)
    return labels - low


def run_vectors(
    draw: Callable[[int, int], IntArray], runs: int, queries: int, kinds: int, classes: int
) -> Callable[[], tuple[int, IntArray]]:
    """Blocks of whole runs' count vectors: ``draw(count, block)`` gives the kinds of
    ``count`` outcomes of histograms of ``classes`` classes; each call of the result gives
    (runs in the block, their vectors (n, kinds)), until the runs are drawn."""
    per_block = max(1, BLOCK_ELEMENTS // (queries * classes))
    state = {"done": 0, "block": 0}

    def following() -> tuple[int, IntArray]:
        count = min(per_block, runs - state["done"])
        drawn = draw(count * queries, state["block"])
        owner = np.repeat(np.arange(count, dtype=np.int64), queries)
        vectors = np.bincount(owner * kinds + drawn, minlength=count * kinds)
        state["done"] += count
        state["block"] += 1
        return count, vectors.reshape(count, kinds)

    return following

"""When counts are held by distinct row as they are read (``Votes.distinct``).

The rows of a (Q, C) counts file are grouped in the pass that detects and validates it
(``formats.scan_rows_distinct``, ``core.distinct.RowTable``). They are kept by distinct row
where that is worth it and gives every figure the rows give: at most :data:`SHARE` of the
rows distinct, at most :data:`CELLS` values in the distinct rows (128 MB of float64: the
memory of grouping a file; a file with more is read row by row), and whole counts of at most
:data:`MAX_VOTES` votes, where each query's terms are the same wherever its row lies
(GNMax's table of Gaussian tails covers gaps up to 2^20 votes; a block of rows beyond it, or
of fractional gaps, is summed in log space as a whole).
"""

from __future__ import annotations

from collections.abc import Iterator

import numpy as np

from pate_cli.core.distinct import DistinctRows
from pate_cli.votes.formats import BlockScan, Distinct, scan_rows_distinct

SHARE = 0.5
CELLS = 1 << 24
MAX_VOTES = 1 << 20


def limit(shape: tuple[int, ...], is_wide: bool) -> int:
    """The most distinct rows a counts file of ``shape`` is grouped by (0: none, for counts
    over a vocabulary, held compact)."""
    if len(shape) != 2 or is_wide:
        return 0
    return CELLS // max(shape[1], 1)


def grouped(found: Distinct | None, num_queries: int) -> DistinctRows | None:
    """The first ``num_queries`` queries by distinct row, where that is worth it and gives
    every figure as the rows do (module docstring); else None."""
    if found is None:
        return None
    inverse = found[1][:num_queries]
    held = int(inverse.max()) + 1 if inverse.size else 0  # the rows of the queries kept
    rows = np.asarray(found[0][:held], dtype=np.float64)
    if held > SHARE * num_queries:
        return None
    if not np.all((rows >= 0) & (rows <= MAX_VOTES)) or not np.array_equal(rows, np.floor(rows)):
        return None
    return DistinctRows.grouped(rows, inverse)


def scan_rows(raw: np.ndarray, step: int, is_wide: bool) -> tuple[BlockScan, Distinct | None]:
    """The counts rule's scan of a 2-D array in memory (or memory-mapped), ``step`` rows at a
    time so that its temporaries are a block's, of each distinct row once, and the distinct
    rows (``formats.scan_rows_distinct``)."""

    def blocks() -> Iterator[tuple[int, np.ndarray]]:
        return ((start, raw[start : start + step]) for start in range(0, len(raw), step))

    return scan_rows_distinct(blocks, len(raw), limit(raw.shape, is_wide), SHARE)

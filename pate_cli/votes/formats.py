"""Vote formats: the rules each format's values obey, and the one scan that applies them.

A votes file holds one of three layouts (README, "Inputs"); each becomes a float64 ``(Q, C)``
histogram of votes:

- ``counts``: (Q, C), finite non-negative vote counts; every row sums to M. Under
  ``--teachers M`` rows may sum to less (abstaining teachers, with a warning), never to more.
  Fractional values (soft votes) are analysed as they are, with a warning naming the first.
- ``labels``: (M, Q), whole-number class labels in [0, C), or -1 for a teacher that abstains
  on a query (counted in no class, so that query's histogram sums to less than M); M stays
  the number of rows. Without ``--num-classes``, C is one more than the largest label of the
  whole file (-1 plays no part), so that a selection cannot change C.
- ``probs``: (M, Q, C), finite scores; each teacher votes for its highest score (the first
  one on ties).

``--teachers M`` is a claim about the file that the file can refute: below the largest row
sum of counts, or below the number of teachers of scores, it is an input error; above them it
is a note (abstaining teachers). For labels it picks the layout of M teachers, and M of
neither layout is an input error (``pate_cli.votes.detection``).

The rules are written once, for a block of queries (:func:`first_bad`), and applied by one
loop over blocks (:func:`scan_blocks`), which also gathers what detection needs (row sums,
the smallest and largest values, whether all are whole, the first -1 and the first
fractional value) the same way whichever axis the blocks split. Both ways of reading votes
go through it: the in-memory path hands over its whole selection as a single block, the
streamed path (``pate_cli.votes.stream``) the blocks it reads from a large file. So a file
is accepted or rejected, with the same one-line message naming the first bad value (of the
first query holding one), however it was read. A value is named by its place in the file:
``file_query`` maps a query of the checked array back to the file when a selection was
taken first.

Detection of the format (``--format auto``) is ``pate_cli.votes.detection``; the checks that
need the whole array (M, C, the shape) and the conversion to counts are
``pate_cli.votes.conversion``.

Shape letters: Q queries, C classes, M teachers.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from numpy.typing import NDArray

from pate_cli.choices import VoteFormat
from pate_cli.core.distinct import RowTable
from pate_cli.errors import InputError

LAYOUTS = {
    "counts": "(queries, classes)",
    "labels": "(teachers, queries)",
    "probs": "(teachers, queries, classes)",
}


#: The axes of each format's array, by name: ``" x ".join(AXES[fmt])`` is its layout.
AXES = {
    VoteFormat.COUNTS: ("queries", "classes"),
    VoteFormat.LABELS: ("teachers", "queries"),
    VoteFormat.PROBS: ("teachers", "queries", "classes"),
}

#: The axis of the queries in each format's array: rows of counts, columns of labels/scores.
QUERY_AXIS = {VoteFormat.COUNTS: 0, VoteFormat.LABELS: 1, VoteFormat.PROBS: 1}

#: The label of a teacher that abstains on a query: it votes for no class.
ABSTAIN = -1


def show_value(value: object) -> str:
    """A numpy scalar as plain text: ``nan``, ``-1``, ``2.5``, and ``3`` for 3.0."""
    item = np.asarray(value).item()
    if isinstance(item, float) and item.is_integer() and abs(item) < 2**53:
        return str(int(item))
    return str(item)


def first_index(mask: NDArray[np.bool_]) -> tuple[int, ...]:
    """Index of the first True entry (C order) of a mask known to have one."""
    return tuple(int(i) for i in np.unravel_index(int(np.argmax(mask)), mask.shape))


def first_by_query(mask: NDArray[np.bool_], fmt: VoteFormat) -> tuple[int, ...]:
    """Index of the first True entry of a mask known to have one, query by query.

    Queries are taken in order (then the rest in C order), so that the first entry of a
    whole array is the first of the first block holding one, however it is split along
    :data:`QUERY_AXIS`.
    """
    axis = QUERY_AXIS[fmt]
    index = list(first_index(np.moveaxis(mask, axis, 0)))
    index.insert(axis, index.pop(0))
    return tuple(index)


def sum_rows(a: np.ndarray) -> NDArray[np.float64]:
    """Sums along axis 1, accumulated in float64."""
    # Overflow to inf (values near 1e308) is a bad-input case reported by the caller.
    with np.errstate(over="ignore", invalid="ignore"):
        return np.asarray(a.sum(axis=1, dtype=np.float64))


def all_near(sums: NDArray[np.float64], total: float) -> bool:
    """np.allclose(sums, total, rtol=1e-9, atol=0), from two reductions (NaN fails)."""
    tolerance = 1e-9 * abs(total)
    if sums.size == 0:
        return True
    return bool(total - sums.min() <= tolerance and sums.max() - total <= tolerance)


def is_whole(a: np.ndarray) -> NDArray[np.bool_]:
    """Elementwise: finite and integral (always True for integer dtypes)."""
    if a.dtype.kind in "iub":
        return np.ones(a.shape, dtype=bool)
    whole: NDArray[np.bool_] = np.isfinite(a) & (a == np.floor(a))
    return whole


_CHUNK = 1 << 20  # values of a block compared with their floor at a time


def _pieces(a: np.ndarray) -> Iterator[tuple[int, np.ndarray]]:
    """(first row, rows) of ``a`` in pieces of about :data:`_CHUNK` values, so that a
    temporary of a piece, not of the whole block, is what an elementwise test costs."""
    step = max(1, _CHUNK // max(a[0].size if len(a) else 1, 1))
    for start in range(0, len(a), step):
        yield start, a[start : start + step]


def _integral(a: np.ndarray) -> bool:
    """Whether every value of a float array without NaN or infinities is a whole number."""
    return all(np.array_equal(np.floor(piece), piece) for _, piece in _pieces(a))


def _first_fraction(a: np.ndarray) -> tuple[int, ...]:
    """Index of the first value (C order) of a float array, known to hold one, that is not
    a whole number."""
    for start, piece in _pieces(a):
        mask = piece != np.floor(piece)
        if mask.any():
            index = first_index(mask)
            return (index[0] + start, *index[1:])
    raise ValueError("no fractional value")


def same_query(q: int) -> int:
    return q


def first_bad(
    block: np.ndarray,
    fmt: VoteFormat,
    num_classes: int | None = None,
    bounds: tuple[Any, Any] | None = None,
) -> tuple[int, ...] | None:
    """The rule of ``fmt`` on one block of votes: the index of its first bad value, or None.

    ``counts`` must be finite and non-negative; ``labels`` whole numbers in [0, C) (no
    upper bound when ``num_classes`` is None) or :data:`ABSTAIN`; ``probs`` finite. "First"
    is by query (:func:`first_by_query`).

    ``bounds``: the block's (min, max), when the caller has them already.

    Shapes: ``block`` is (rows, C) counts, (M, queries) labels or (M, queries, C) scores.
    """
    if block.size == 0:
        return None
    # min and max propagate NaN, so two reductions, without temporaries, clear a good
    # block; the elementwise mask is built only for a bad one, to find its first bad value.
    low, high = (block.min(), block.max()) if bounds is None else bounds
    if fmt is VoteFormat.COUNTS:
        if low >= 0 and high < np.inf:
            return None
        bad = ~np.isfinite(block) | (block < 0)
    elif fmt is VoteFormat.LABELS:
        limit = np.inf if num_classes is None else num_classes
        if low >= ABSTAIN and high < limit and (block.dtype.kind in "iub" or _integral(block)):
            return None
        bad = ~is_whole(block) | (block < ABSTAIN)
        if num_classes is not None:
            bad |= block >= num_classes
    else:
        if low > -np.inf and high < np.inf:
            return None
        bad = ~np.isfinite(block)
    return first_by_query(bad, fmt) if bad.any() else None


@dataclass
class BlockScan:
    """What :func:`scan_blocks` found in the blocks of one votes array.

    Attributes:
        fmt: The format whose rule was applied.
        num_classes: The bound of the labels rule (None: unbounded).
        row_sums: Sums along axis 1 of the whole 2-D array (per query of counts, per
            teacher of labels) when the scan was asked for them; else empty.
        bad: Index in the whole array of the first bad value, or None.
        bad_value: That value, as read.
        largest: The largest label before the first block with a bad value (labels), as a
            scalar of the array's dtype, so that it compares with C as the rule does; 0
            when every label read is :data:`ABSTAIN`.

    What detection needs of a 2-D array is gathered from every block (however the blocks
    split it; a scan that stops at a bad value has it in part only):

    Attributes:
        finite: Every value is finite.
        whole: Every value is finite and a whole number.
        low: The smallest value (when ``finite``), a scalar of the blocks' dtype.
        high: The largest value (when ``finite``).
        minus_one: Index in the whole array of the first -1 in row-major order (rows of the
            file first), or None; gathered when ``whole``.
        fraction: Index in the whole array of the first value that is not a whole number,
            in row-major order (by query, for counts), or None; gathered when ``finite``.
        fraction_value: That value.
    """

    fmt: VoteFormat
    num_classes: int | None
    row_sums: NDArray[np.float64] = field(default_factory=lambda: np.zeros(0))
    bad: tuple[int, ...] | None = None
    bad_value: object = None
    largest: Any = 0
    finite: bool = True
    whole: bool = True
    low: Any = None
    high: Any = None
    minus_one: tuple[int, int] | None = None
    fraction: tuple[int, int] | None = None
    fraction_value: object = None

    def gather(self, block: np.ndarray, start: int, axis: int) -> tuple[Any, Any]:
        """Add one block of a 2-D array (its first index ``start`` along ``axis``) to what
        detection needs; returns the block's (min, max)."""
        low, high = block.min(), block.max()
        if not (low > -np.inf and high < np.inf):  # NaN (which fails both) or infinite
            self.finite = self.whole = False
            return low, high
        self.low = low if self.low is None else min(self.low, low)
        self.high = high if self.high is None else max(self.high, high)
        shift = (start, 0) if axis == 0 else (0, start)
        if block.dtype.kind not in "iub" and not _integral(block):
            self.whole = False
            index = _first_fraction(block)
            place = (index[0] + shift[0], index[1] + shift[1])
            if self.fraction is None or place < self.fraction:
                self.fraction, self.fraction_value = place, block[index]
        if self.whole and low <= ABSTAIN:
            mask = block == ABSTAIN
            if mask.any():
                index = first_index(mask)
                place = (index[0] + shift[0], index[1] + shift[1])
                if self.minus_one is None or place < self.minus_one:
                    self.minus_one = place
        return low, high

    def check(
        self,
        where: str,
        file_query: Callable[[int], int] = same_query,
        num_queries: int | None = None,
    ) -> None:
        """Raise the error naming the first bad value, if there is one.

        Args:
            where: The path as the user gave it.
            file_query: Maps a query of the scanned array to its index in the file.
            num_queries: Only the first ``num_queries`` queries count (a prefix of a file
                scanned whole); None: all.

        Raises:
            InputError: The one-line message of the format's rule.
        """
        if self.bad is None:
            return
        q = self.bad[QUERY_AXIS[self.fmt]]
        if num_queries is not None and q >= num_queries:
            return
        value = show_value(self.bad_value)
        if self.fmt is VoteFormat.COUNTS:
            raise InputError(
                f"{where}: votes row {file_query(q)}, column {self.bad[1]} is {value}; "
                "expected finite non-negative vote counts"
            )
        if self.fmt is VoteFormat.LABELS:
            limit = "[0, classes)" if self.num_classes is None else f"[0, {self.num_classes})"
            raise InputError(
                f"{where}: label of teacher {self.bad[0]} for query {file_query(q)} is "
                f"{value}; expected integer class labels in {limit}, or {ABSTAIN} for a "
                "teacher that abstains"
            )
        raise InputError(
            f"{where}: score of teacher {self.bad[0]} for query {file_query(q)}, class "
            f"{self.bad[2]} is {value}; expected finite scores"
        )


def scan_blocks(
    blocks: Iterable[tuple[int, np.ndarray]],
    fmt: VoteFormat,
    *,
    num_classes: int | None = None,
    num_rows: int | None = None,
    stop_at_bad: bool = False,
) -> BlockScan:
    """Apply the rule of ``fmt`` (:func:`first_bad`) to a votes array, block by block.

    This is the one validator of vote values: the in-memory path passes its array as a
    single block, ``[(0, array)]``; the streamed path passes the blocks it reads.

    Args:
        blocks: (index of the block's first query, block) pairs, in query order; the blocks
            split the array along :data:`QUERY_AXIS` of ``fmt``.
        fmt: The format whose rule applies (not ``AUTO``).
        num_classes: For labels: the exclusive upper bound, or None for none.
        num_rows: For a 2-D array, its number of rows: the scan then also sums each row
            (what detection and M need), in the same pass.
        stop_at_bad: Stop at the first block with a bad value (when only the error is
            wanted; ``row_sums`` and ``largest`` are then partial).

    Returns:
        The :class:`BlockScan`; its ``check`` raises the error, if any.
    """
    scan = BlockScan(fmt, num_classes)
    axis = QUERY_AXIS[fmt]
    sums = None if num_rows is None else np.zeros(num_rows)
    for start, block in blocks:
        if sums is not None:
            if axis == 0:
                sums[start : start + len(block)] = sum_rows(block)
            else:
                with np.errstate(over="ignore", invalid="ignore"):  # as in sum_rows
                    sums += sum_rows(block)
        bounds = scan.gather(block, start, axis) if block.ndim == 2 and block.size else None
        if scan.bad is not None:
            continue
        index = first_bad(block, fmt, num_classes, bounds)
        if index is not None:
            scan.bad_value = block[index]
            scan.bad = tuple(i + start if k == axis else i for k, i in enumerate(index))
            if stop_at_bad:
                break
        elif fmt is VoteFormat.LABELS and block.size:
            scan.largest = max(scan.largest, block.max() if bounds is None else bounds[1])
    if sums is not None:
        scan.row_sums = sums
    return scan


def scan_distinct(
    rows: np.ndarray, inverse: NDArray[np.signedinteger[Any]], fmt: VoteFormat, block_rows: int
) -> BlockScan:
    """:func:`scan_blocks` (with ``num_rows``) of a 2-D array split along its rows, from its
    distinct rows: each is checked once, and the scan is the whole array's.

    ``rows`` are the distinct rows in the order of the first row holding each, ``inverse``
    the distinct row of every row (``pate_cli.core.distinct``). A value is named at the first
    row holding it: that order keeps the first bad value, the first -1 and the first
    fractional value the whole array's. Each row's sum is its distinct row's.

    Shapes: rows (U, C), inverse (R,); blocks of ``block_rows`` distinct rows.
    """
    step = max(1, block_rows)
    blocks = ((start, rows[start : start + step]) for start in range(0, len(rows), step))
    scan = scan_blocks(blocks, fmt, num_rows=len(rows))
    runs = np.maximum.accumulate(inverse) if inverse.size else inverse

    def first_row(place: tuple[int, ...] | None) -> Any:
        if place is None:
            return None
        return (int(np.searchsorted(runs, place[0])), *place[1:])

    scan.bad, scan.minus_one = first_row(scan.bad), first_row(scan.minus_one)
    scan.fraction = first_row(scan.fraction)
    scan.row_sums = scan.row_sums[inverse]
    return scan


_GROUP_ROWS = 1 << 16  # rows grouped at a time

Distinct = tuple[np.ndarray, NDArray[np.signedinteger[Any]]]
"""Distinct rows (U, C), in the order of their first row, and the distinct row of each (R,)."""


def scan_rows_distinct(
    blocks: Callable[[], Iterable[tuple[int, np.ndarray]]],
    num_rows: int,
    limit: int,
    share: float = 0.5,
) -> tuple[BlockScan, Distinct | None]:
    """The counts rule's scan (:func:`scan_blocks` with ``num_rows``) of a 2-D array split
    along its rows, and its distinct rows: one pass that groups the rows of ``blocks()``
    (``core.distinct.RowTable``), then the rule on each distinct row once
    (:func:`scan_distinct`). An array of more than ``limit`` distinct rows, or of more than
    ``share`` of its rows read distinct past its first block, is scanned row by row instead
    (a second call of ``blocks()``; None for the rows): the rows held stay within ``limit``."""
    if limit < 1:
        return scan_blocks(blocks(), VoteFormat.COUNTS, num_rows=num_rows), None
    table = RowTable(limit)
    done = step = 0
    for _, whole in blocks():
        step = max(step, len(whole))
        # A few rows at a time, so that mostly distinct rows are given up on early.
        for start in range(0, len(whole), _GROUP_ROWS):
            block = whole[start : start + _GROUP_ROWS]
            done += len(block)
            if not table.add(block) or table.size > max(share * done, len(block)):
                return scan_blocks(blocks(), VoteFormat.COUNTS, num_rows=num_rows), None
    rows, inverse = table.distinct()
    return scan_distinct(rows, inverse, VoteFormat.COUNTS, step), (rows, inverse)

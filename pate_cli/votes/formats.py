"""Vote formats: detection, the rules each format's values obey, and conversion to counts.

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
sum of counts, or below the number of rows of labels or scores, it is an input error; above
them it is a note (abstaining teachers).

Detection (``--format auto``) looks at the whole file and takes a reading only when no other
reading of the same array is plausible; otherwise it is an input error that names every
plausible reading, with its sizes and what picks it. It never guesses in a way that changes
the numbers. The readings of a 2-D array of R rows and K columns, and when each is
plausible:

- counts, R queries x K classes: finite non-negative values. Rows that all sum to the same
  positive total make it counts outright: the rows of a labels file are each one teacher's
  labels over many queries, whose sums vary widely (a labels file whose rows all share one
  sum, which takes few teachers and queries, is read as counts);
- counts with abstaining teachers: whole non-negative values whose rows mostly reach the
  largest row sum S: the rows below S are fewer than half of them and none is below S/2.
  Auto never reads them without ``--teachers`` (M could be more than S), but names them;
- labels, R teachers x K queries (the documented layout): whole numbers, at least -1, whose
  class count C = largest label + 1 is at most both R and K. A labels reading of a counts
  file implies a class count near the counts' number of teachers (``[[240, 10], [100,
  100]]``: 241 classes for 2 teachers; a transposed counts file: hundreds of classes for
  10 queries), which a real labels file does not have;
- labels saved queries x teachers, K teachers x R queries: plausible labels of at least two
  classes with R >= K. PATE asks more queries than it has teachers, so with R < K this
  reading (more teachers than queries) is not taken as plausible: a file saved queries x
  teachers with fewer queries than teachers cannot be told from the documented layout, and
  is read as it (the report states the layout it read). Labels of a single class (every
  value 0 or -1) have no vote to aggregate and are read in the documented layout too.
  Auto never reads this orientation; ``--format labels --teachers K`` does (the teachers
  are the axis of K entries; ``load_votes`` reads the array transposed and says so).

So ``--format auto`` reads:

- 3-D as ``probs``;
- 2-D with rows that all sum to the same positive total as ``counts``;
- 2-D with ``--teachers M``: the plausible reading that M does not refute (counts with no
  row above M, labels of at most M teachers): ``counts`` (which then warns on rows below
  M), or ``labels``; several, or only labels saved queries x teachers, are an input error;
  none is ``counts``, which then fails;
- 2-D otherwise: ``labels`` when that is the only plausible reading; an input error when
  counts with abstaining teachers or the transposed orientation are plausible too (5,000 x
  100 labels of 10 classes: 5,000 teachers x 100 queries, or 100 teachers x 5,000 queries;
  3,000 x 100 counts of 50 teachers, one vote abstaining: those counts, or labels of 3,000
  teachers x 100 queries of as many classes as the largest count plus one), or when whole
  values of at least -1 are labels only with more classes than teachers or queries (they
  may be counts);
- anything else as ``counts`` (which then fails with the reason).

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

Shape letters: Q queries, C classes, M teachers.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from numpy.typing import NDArray

from pate_cli.choices import VoteFormat
from pate_cli.errors import InputError

_LAYOUTS = {
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


def _all_near(sums: NDArray[np.float64], total: float) -> bool:
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


def _same(q: int) -> int:
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
        file_query: Callable[[int], int] = _same,
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


def _above(sums: NDArray[np.float64], teachers: int) -> NDArray[np.bool_]:
    """Rows that sum to more than ``teachers`` (beyond rounding)."""
    off = ~np.isclose(sums, teachers, rtol=1e-9, atol=1e-9)
    above: NDArray[np.bool_] = off & (sums > teachers)
    return above


def _short_rows(sums: NDArray[np.float64]) -> NDArray[np.bool_]:
    """Rows that sum to less than the largest row sum (beyond rounding)."""
    short: NDArray[np.bool_] = ~np.isclose(sums, sums.max(), rtol=1e-9, atol=0)
    return short


def _abstaining(sums: NDArray[np.float64]) -> bool:
    """Row sums of counts with a few abstaining teachers: the largest sum S is positive,
    the rows below it are fewer than half of them, and none is below S / 2."""
    top = sums.max()
    if not (np.isfinite(top) and top > 0):
        return False
    short = int(_short_rows(sums).sum())
    return 0 < short and 2 * short < sums.size and bool(sums.min() >= top / 2)


def _rows_text(sums: NDArray[np.float64]) -> str:
    """How rows of counts sum: "1 of 3000 rows sums to 49, the others to 50"."""
    short = _short_rows(sums)
    top, count = show_value(sums.max()), int(short.sum())
    if count == 0:
        return f"every row sums to {top}"
    if 2 * count >= sums.size:
        return f"rows summing to {show_value(sums.min())} to {top}"
    below = sums[short]
    low, high = show_value(below.min()), show_value(below.max())
    if count == 1:
        return f"1 of {sums.size} rows sums to {low}, the others to {top}"
    span = low if low == high else f"{low} to {high}"
    return f"{count} of {sums.size} rows sum to {span}, the others to {top}"


def _classes_text(num_classes: int) -> str:
    if num_classes == 1:
        return "1 class"
    shown = str(num_classes) if num_classes < 10**15 else f"{float(num_classes):.3g}"
    return f"{shown} classes"


def detect_format(
    shape: tuple[int, ...], where: str, teachers: int | None, scan: BlockScan | None
) -> VoteFormat:
    """Auto-detection rules; see the module docstring.

    Args:
        shape: The file's array shape.
        where: The path as the user gave it.
        teachers: ``--teachers``.
        scan: For a non-empty 2-D array, a scan of the whole of it (in memory, or streamed
            by rows or by columns) made with ``num_rows``: its row sums and what detection
            needs. Unused otherwise.

    Raises:
        InputError: Not 2-D or 3-D, or a 2-D array with more than one plausible reading
            (each is named, with what picks it), or one that reads as counts only with
            abstaining teachers and no ``--teachers``, or as labels only with more classes
            than teachers or queries.
    """
    if len(shape) == 3:
        return VoteFormat.PROBS
    if len(shape) != 2:
        raise InputError(
            f"{where}: array has {len(shape)} dimensions {shape} but --format auto expects "
            f"{_LAYOUTS['counts']} counts, {_LAYOUTS['labels']} labels or "
            f"{_LAYOUTS['probs']} probs"
        )
    if scan is None or 0 in shape:
        return VoteFormat.COUNTS  # rejected as empty by the shape check
    rows, columns = (int(n) for n in shape)
    sums = scan.row_sums
    counts_ok = scan.finite and scan.low >= 0
    labels_ok = scan.whole and scan.low >= ABSTAIN
    if counts_ok and np.isfinite(sums[0]) and sums[0] > 0 and _all_near(sums, sums[0]):
        return VoteFormat.COUNTS
    num_classes = int(max(scan.high, 0)) + 1 if labels_ok else 0
    fits = labels_ok and num_classes <= min(rows, columns)
    # Saved queries x teachers: as plausible when it has at least as many queries (rows).
    flips = fits and rows >= columns and num_classes > 1
    shown = _classes_text(num_classes)
    as_labels = f"labels of {rows} teachers x {columns} queries ({shown}; pass --format labels)"
    transposed = (
        f"labels of {columns} teachers x {rows} queries saved as queries x teachers ({shown}; "
        + (
            f"pass --format labels --teachers {columns})"
            if rows != columns  # a square array's axes cannot be told apart by a count
            else "save the array transposed, as (teachers, queries))"
        )
    )
    readings: list[str] = []
    if teachers is not None:
        # Each reading that --teachers M does not refute: counts with no row above M,
        # labels of at most M teachers.
        if counts_ok and not _above(sums, teachers).any():
            readings.append(
                f"counts of {rows} queries x {columns} classes from {teachers} teachers "
                f"({_rows_text(sums)}; pass --format counts)"
            )
        if fits and rows <= teachers:
            readings.append(as_labels)
        if flips and columns <= teachers:
            readings.append(transposed)
        if len(readings) > 1:
            raise InputError(
                f"{where}: cannot tell the format: it could be {', or '.join(readings)}"
            )
        if readings == [transposed]:
            raise InputError(f"{where}: reads only as {transposed}")
        return VoteFormat.LABELS if readings == [as_labels] else VoteFormat.COUNTS
    abstaining = counts_ok and labels_ok and _abstaining(sums)
    if fits:
        if abstaining:
            readings.append(
                f"counts of {rows} queries x {columns} classes with abstaining teachers "
                f"({_rows_text(sums)}; pass --format counts --teachers M, M at least "
                f"{show_value(sums.max())})"
            )
        readings.append(as_labels)
        if flips:
            readings.append(transposed)
        if len(readings) == 1:
            return VoteFormat.LABELS
        raise InputError(f"{where}: cannot tell the format: it could be {', or '.join(readings)}")
    if not labels_ok:
        return VoteFormat.COUNTS  # which then fails with the reason
    too_many = (
        f"labels ({rows} teachers, {columns} queries, {shown}: more classes than teachers or "
        "queries)"
    )
    if scan.minus_one is not None:  # not counts, and labels only with many classes
        row, column = scan.minus_one
        raise InputError(
            f"{where}: cannot tell the format: it could be {too_many} with abstaining "
            f"teachers ({ABSTAIN}), or counts with a bad value (row {row}, column {column} "
            f"is {ABSTAIN}); pass --format labels, or fix the counts"
        )
    raise InputError(
        f"{where}: cannot tell the format: it could be {too_many} or counts with abstaining "
        f"teachers ({rows} queries, {columns} classes, {_rows_text(sums)}); pass --format "
        "labels, or --format counts --teachers M"
    )


def check_shape(
    shape: tuple[int, ...], where: str, fmt: VoteFormat, num_classes: int | None
) -> None:
    """Check the number of dimensions, emptiness and ``--num-classes`` against ``fmt``."""
    ndim = 3 if fmt is VoteFormat.PROBS else 2
    if len(shape) != ndim:
        raise InputError(
            f"{where}: array has {len(shape)} dimensions {shape} but --format "
            f"{fmt.value} expects {_LAYOUTS[fmt.value]}"
        )
    if 0 in shape:
        raise InputError(
            f"{where}: votes array is empty, shape {shape}; expected "
            f"{_LAYOUTS[fmt.value]} with at least one of each"
        )
    if num_classes is not None and fmt is not VoteFormat.LABELS and shape[-1] != num_classes:
        raise InputError(
            f"{where}: votes have {shape[-1]} classes (shape {shape}) but "
            f"--num-classes is {num_classes}"
        )


def counts_from_labels(labels: np.ndarray, num_classes: int) -> NDArray[np.float64]:
    """Histogram each query's column of labels: (M, Q) -> (Q, C), one bincount.

    A label :data:`ABSTAIN` is counted in no class.
    """
    num_queries = labels.shape[1]
    flat = labels.astype(np.int64) + num_classes * np.arange(num_queries, dtype=np.int64)
    if labels.size and labels.min() < 0:
        # Dropped, not binned: -1 + C * q would land in the last class of query q - 1.
        flat = flat[labels >= 0]
    counts = np.bincount(flat.ravel(), minlength=num_queries * num_classes)
    return counts.reshape(num_queries, num_classes).astype(np.float64)


def teachers_from_sums(
    sums: NDArray[np.float64],
    where: str,
    teachers: int | None,
    notes: list[str],
    file_query: Callable[[int], int],
) -> int:
    """M from the row sums of a counts array, or ``teachers`` with a note when they differ.

    Under ``teachers`` rows may sum to less than M (abstaining teachers), never to more
    (a single vote above M makes its row sum more too: votes are non-negative).

    Raises:
        InputError: Every row sums to 0; rows disagree without ``teachers``; a row sums
            to more than ``teachers``; the common sum is not a whole number.
    """
    if not sums.any():
        raise InputError(
            f"{where}: every votes row sums to 0; expected rows that sum to the "
            "number of teachers M"
        )
    if teachers is not None:
        off = ~np.isclose(sums, teachers, rtol=1e-9, atol=1e-9)
        above = off & (sums > teachers)
        if above.any():
            q = int(np.argmax(above))
            raise InputError(
                f"{where}: votes row {file_query(q)} sums to {show_value(sums[q])}, more than "
                f"--teachers {teachers}; --teachers must be at least the largest row sum "
                f"({show_value(sums.max())})"
            )
        if off.any():
            notes.append(
                f"{where}: {int(off.sum())} of {sums.size} votes rows do not sum to "
                f"--teachers {teachers} (sums range from {show_value(sums.min())} to "
                f"{show_value(sums.max())})"
            )
        return teachers
    if not _all_near(sums, sums[0]):
        q = int(np.argmin(np.isclose(sums, sums[0], rtol=1e-9, atol=0)))
        raise InputError(
            f"{where}: votes rows sum to different totals (row {file_query(0)}: "
            f"{show_value(sums[0])}, row {file_query(q)}: {show_value(sums[q])}); expected "
            "every row to sum to the number of teachers M, or pass --teachers M"
        )
    if not np.isfinite(sums[0]) or abs(sums[0] - round(sums[0])) > 1e-9 * sums[0]:
        raise InputError(
            f"{where}: votes rows sum to {show_value(sums[0])}; expected a whole number "
            "of teachers M, or pass --teachers M"
        )
    return int(round(sums[0]))


def teachers_of_counts(
    scan: BlockScan,
    where: str,
    teachers: int | None,
    notes: list[str],
    file_query: Callable[[int], int] = _same,
    num_queries: int | None = None,
) -> int:
    """Check counts from their scan (made with ``num_rows``) and return M.

    ``num_queries``: only the first queries are analysed (a prefix of a file scanned whole).
    Fractional counts (soft votes) are taken as they are, with a note naming the first.
    """
    scan.check(where, file_query, num_queries)
    sums = scan.row_sums[:num_queries]
    num_teachers = teachers_from_sums(sums, where, teachers, notes, file_query)
    if scan.fraction is not None and (num_queries is None or scan.fraction[0] < num_queries):
        q, c = scan.fraction
        notes.append(
            f"{where}: votes hold fractional values (soft votes; row {file_query(q)}, column "
            f"{c} is {show_value(scan.fraction_value)}): they are analysed as counts, as they "
            "are; the smooth-sensitivity release needs whole counts"
        )
    return num_teachers


def classes_of_labels(
    where: str,
    num_classes: int | None,
    whole: BlockScan | None,
    selected: Callable[[], Iterable[tuple[int, np.ndarray]]],
    file_query: Callable[[int], int] = _same,
) -> int:
    """Check labels and return C: ``num_classes``, or one more than the largest label.

    Without ``num_classes`` C comes from the whole file, which must hold labels only:
    ``whole`` is its scan with the labels rule, C unbounded. Then the selected queries
    (``selected()`` yields their blocks) must lie in [0, C); a ``whole`` scan that shows
    they do spares reading them again.

    Raises:
        InputError: A value that is not a label (in [0, C)).
    """
    if num_classes is None:
        if whole is None:
            raise ValueError("the number of classes of labels needs a scan of the whole file")
        whole.check(where)
        num_classes = int(whole.largest) + 1
    # Compared as the rule compares: float labels beyond 2**53 can equal C = largest + 1.
    if whole is None or whole.bad is not None or whole.largest >= num_classes:
        scan = scan_blocks(selected(), VoteFormat.LABELS, num_classes=num_classes, stop_at_bad=True)
        scan.check(where, file_query)
    return num_classes


def teachers_of_labels(
    file_teachers: int, teachers: int | None, where: str, notes: list[str]
) -> int:
    """M of a labels or scores file: its teacher count, or ``--teachers`` with a note.

    Raises:
        InputError: ``teachers`` is below the file's number of teachers (its rows).
    """
    num_teachers = teachers if teachers is not None else file_teachers
    if num_teachers < file_teachers:
        raise InputError(
            f"{where}: the file has {file_teachers} teachers but --teachers is {num_teachers}; "
            f"--teachers must be at least the file's number of teachers, or be left out"
        )
    if num_teachers != file_teachers:
        notes.append(
            f"{where}: the file has {file_teachers} teachers but --teachers is {num_teachers}"
        )
    return num_teachers


def to_counts(
    full: np.ndarray,
    data: np.ndarray,
    fmt: VoteFormat,
    where: str,
    num_classes: int | None,
    teachers: int | None,
    file_query: Callable[[int], int],
    notes: list[str],
    max_label_cells: int,
) -> tuple[NDArray[np.float64], int]:
    """Validate selected votes of any format and histogram them, in memory; returns (counts, M).

    The selection is checked as a single block by :func:`scan_blocks`.

    Args:
        full: The whole array of the file (labels without ``num_classes`` take C from it).
        data: The selected part of ``full``.
        fmt: Its format (not ``AUTO``).
        where: The path as the user gave it.
        num_classes: ``--num-classes``.
        teachers: ``--teachers``.
        file_query: Maps a query of ``data`` to its index in the file.
        notes: Warnings are appended here.
        max_label_cells: The most Q * C cells a labels file may make (C is implausible
            beyond).

    Shapes: ``data`` is (Q, C) counts, (M, Q) labels or (M, Q, C) scores; counts are (Q, C).
    """
    if fmt is VoteFormat.COUNTS:
        counts = np.array(data, dtype=np.float64, order="C")
        scan = scan_blocks([(0, counts)], fmt, num_rows=len(counts))
        return counts, teachers_of_counts(scan, where, teachers, notes, file_query)
    if fmt is VoteFormat.LABELS:
        # C comes from the whole file, so that a selection cannot change the class count.
        whole = scan_blocks([(0, full)], fmt) if num_classes is None else None
        num_classes = classes_of_labels(where, num_classes, whole, lambda: [(0, data)], file_query)
        if data.shape[1] * num_classes > max_label_cells:
            raise InputError(
                f"{where}: labels imply {num_classes} classes for {data.shape[1]} queries; "
                "expected small class labels (or pass --num-classes)"
            )
        labels = data
    else:
        scan_blocks([(0, data)], fmt).check(where, file_query)
        num_classes = int(data.shape[2])
        labels = np.argmax(data, axis=2)  # the first maximum wins ties
    counts = counts_from_labels(labels, num_classes)
    return counts, teachers_of_labels(int(data.shape[0]), teachers, where, notes)

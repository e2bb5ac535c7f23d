"""Vote format detection: one reading of the array, or an input error naming each one.

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

The readings are told apart by what a scan of the whole array gathered
(:class:`~pate_cli.votes.formats.BlockScan`).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray

from pate_cli.choices import VoteFormat
from pate_cli.errors import InputError
from pate_cli.spelling import Placeholder, given, on_command_line
from pate_cli.votes.formats import ABSTAIN, LAYOUTS, BlockScan, all_near, show_value


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


def _together(*parameters: str) -> str:
    """Parameters to give together, as their caller writes them (``--format labels
    --teachers 5`` or ``format='labels', teachers=5``)."""
    return (" " if on_command_line() else ", ").join(parameters)


def _counts_of_m() -> str:
    """The reading as counts of M teachers: ``--format counts --teachers M``."""
    return _together(given("format", "counts"), given("teachers", Placeholder("M")))


def _classes_text(num_classes: int) -> str:
    if num_classes == 1:
        return "1 class"
    shown = str(num_classes) if num_classes < 10**15 else f"{float(num_classes):.3g}"
    return f"{shown} classes"


@dataclass(frozen=True)
class _Readings:
    """What tells the readings of a non-empty 2-D array of ``rows`` x ``columns`` apart,
    from a scan of the whole of it (see the module docstring)."""

    rows: int
    columns: int
    scan: BlockScan

    @property
    def sums(self) -> NDArray[np.float64]:
        """The row sums."""
        return self.scan.row_sums

    @property
    def counts_ok(self) -> bool:
        """Finite non-negative values: plausible counts."""
        return self.scan.finite and self.scan.low >= 0

    @property
    def labels_ok(self) -> bool:
        """Whole values of at least -1: plausible labels, of some number of classes."""
        return self.scan.whole and self.scan.low >= ABSTAIN

    @property
    def num_classes(self) -> int:
        """C = largest label + 1 of the labels reading (0 when there is none)."""
        return int(max(self.scan.high, 0)) + 1 if self.labels_ok else 0

    @property
    def fits(self) -> bool:
        """Labels of no more classes than teachers or queries."""
        return self.labels_ok and self.num_classes <= min(self.rows, self.columns)

    @property
    def flips(self) -> bool:
        """Saved queries x teachers: as plausible when it has at least as many queries (rows)."""
        return self.fits and self.rows >= self.columns and self.num_classes > 1

    @property
    def as_labels(self) -> str:
        """The labels reading in the documented layout, and what picks it."""
        shown = _classes_text(self.num_classes)
        return (
            f"labels of {self.rows} teachers x {self.columns} queries ({shown}; "
            f"pass {given('format', 'labels')})"
        )

    @property
    def transposed(self) -> str:
        """The labels reading saved queries x teachers, and what picks it."""
        rows, columns = self.rows, self.columns
        return (
            f"labels of {columns} teachers x {rows} queries saved as queries x teachers "
            f"({_classes_text(self.num_classes)}; "
            + (
                f"pass {_together(given('format', 'labels'), given('teachers', columns))})"
                if rows != columns  # a square array's axes cannot be told apart by a count
                else "save the array transposed, as (teachers, queries))"
            )
        )


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
            f"{where}: array has {len(shape)} dimensions {shape} but {given('format', 'auto')} "
            "expects "
            f"{LAYOUTS['counts']} counts, {LAYOUTS['labels']} labels or "
            f"{LAYOUTS['probs']} probs"
        )
    if scan is None or 0 in shape:
        return VoteFormat.COUNTS  # rejected as empty by the shape check
    rows, columns = (int(n) for n in shape)
    found = _Readings(rows, columns, scan)
    sums = scan.row_sums
    if found.counts_ok and np.isfinite(sums[0]) and sums[0] > 0 and all_near(sums, sums[0]):
        return VoteFormat.COUNTS
    if teachers is not None:
        return _format_of_m(found, where, teachers)
    return _format_without_m(found, where)


def _format_of_m(found: _Readings, where: str, teachers: int) -> VoteFormat:
    """With ``--teachers M``: the one reading that M does not refute; several, or only
    labels saved queries x teachers, are an input error; none is counts (which then fails)."""
    readings: list[str] = []
    # Each reading that --teachers M does not refute: counts with no row above M,
    # labels of at most M teachers.
    if found.counts_ok and not _above(found.sums, teachers).any():
        readings.append(
            f"counts of {found.rows} queries x {found.columns} classes from {teachers} teachers "
            f"({_rows_text(found.sums)}; pass {given('format', 'counts')})"
        )
    if found.fits and found.rows <= teachers:
        readings.append(found.as_labels)
    if found.flips and found.columns <= teachers:
        readings.append(found.transposed)
    if len(readings) > 1:
        raise InputError(f"{where}: cannot tell the format: it could be {', or '.join(readings)}")
    if readings == [found.transposed]:
        raise InputError(f"{where}: reads only as {found.transposed}")
    return VoteFormat.LABELS if readings == [found.as_labels] else VoteFormat.COUNTS


def _format_without_m(found: _Readings, where: str) -> VoteFormat:
    """Without ``--teachers``: labels when that is the only plausible reading, counts when
    labels are not plausible at all (which then fails with the reason); an input error when
    another reading is plausible too, or when the labels have more classes than teachers or
    queries."""
    rows, columns, sums = found.rows, found.columns, found.sums
    abstaining = found.counts_ok and found.labels_ok and _abstaining(sums)
    if found.fits:
        readings: list[str] = []
        if abstaining:
            readings.append(
                f"counts of {rows} queries x {columns} classes with abstaining teachers "
                f"({_rows_text(sums)}; pass {_counts_of_m()}, M at least "
                f"{show_value(sums.max())})"
            )
        readings.append(found.as_labels)
        if found.flips:
            readings.append(found.transposed)
        if len(readings) == 1:
            return VoteFormat.LABELS
        raise InputError(f"{where}: cannot tell the format: it could be {', or '.join(readings)}")
    if not found.labels_ok:
        return VoteFormat.COUNTS  # which then fails with the reason
    too_many = (
        f"labels ({rows} teachers, {columns} queries, {_classes_text(found.num_classes)}: more "
        "classes than teachers or queries)"
    )
    if found.scan.minus_one is not None:  # not counts, and labels only with many classes
        row, column = found.scan.minus_one
        raise InputError(
            f"{where}: cannot tell the format: it could be {too_many} with abstaining "
            f"teachers ({ABSTAIN}), or counts with a bad value (row {row}, column {column} "
            f"is {ABSTAIN}); pass {given('format', 'labels')}, or fix the counts"
        )
    raise InputError(
        f"{where}: cannot tell the format: it could be {too_many} or counts with abstaining "
        f"teachers ({rows} queries, {columns} classes, {_rows_text(sums)}); pass "
        f"{given('format', 'labels')}, or {_counts_of_m()}"
    )

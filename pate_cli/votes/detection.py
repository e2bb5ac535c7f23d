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
- labels, in either layout: R teachers x K queries (the documented layout), or K teachers x
  R queries saved queries x teachers. Labels are plausible when they are whole numbers, at
  least -1, whose class count C = largest label + 1 is at most both R and K (a labels
  reading of a counts file implies a class count near the counts' number of teachers:
  ``[[240, 10], [100, 100]]``, 241 classes for 2 teachers; a transposed counts file,
  hundreds of classes for 10 queries), and that one rule holds for both layouts alike
  (:attr:`_Readings.fits`): whatever the shape, a plausible labels array reads both ways
  (the 2017 250 x 9000 file could as well be 9000 teachers x 250 queries), so both are
  always named. ``--teachers M`` picks the layout of M teachers (:func:`labels_layouts`,
  the one rule of the layout for auto and for ``--format labels``); an M of neither layout
  is an input error, never a note.

So ``--format auto`` reads:

- 3-D as ``probs``;
- 2-D with rows that all sum to the same positive total as ``counts``;
- 2-D with ``--teachers M``: the plausible reading that M does not refute (counts with no
  row above M, labels in the layout of M teachers): ``counts`` (which then warns on rows
  below M), or ``labels`` in that layout (transposed for K = M; a square array's layouts
  both have M teachers); several are an input error, and so is none when labels are
  plausible; none otherwise is ``counts``, which then fails;
- 2-D otherwise: an input error when labels are plausible (both layouts are named, and
  counts with abstaining teachers when they are plausible too: 3,000 x 100 counts of 50
  teachers, one vote abstaining, or labels of 3,000 teachers x 100 queries of as many
  classes as the largest count plus one, or of 100 teachers x 3,000 queries), or when whole
  values of at least -1 are labels only with more classes than teachers or queries (they
  may be counts);
- anything else as ``counts`` (which then fails with the reason).

``--format labels`` reads the documented layout, or the layout of ``--teachers M`` when M
names the other axis alone (:func:`labels_transposed`).

The readings are told apart by what a scan of the whole array gathered
(:class:`~pate_cli.votes.formats.BlockScan`).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray

from pate_cli.choices import VoteFormat
from pate_cli.common.spelling import Placeholder, given, on_command_line
from pate_cli.errors import InputError
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
        """Plausible labels: no more classes than teachers or queries. Symmetric in R and K,
        so it holds of both layouts alike: the one rule of what labels may be."""
        return self.labels_ok and self.num_classes <= min(self.rows, self.columns)

    def layout(self, transposed: bool) -> str:
        """The labels reading in one layout, and what picks it."""
        return self.transposed if transposed else self.as_labels

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


def labels_layouts(rows: int, columns: int, teachers: int | None) -> tuple[bool, ...]:
    """The layouts of an R x K labels array that ``--teachers`` leaves: False for R teachers
    x K queries (the documented layout), True for K teachers x R queries (saved queries x
    teachers). Both without ``teachers``; with M, those of M teachers (both for a square
    array of M rows, none when M is neither R nor K).

    The one rule of the layout: auto-detection names or takes these readings (when labels
    are plausible, which is the same for both), and ``--format labels`` takes the documented
    one of them (:func:`labels_transposed`).
    """
    return tuple(
        transposed
        for transposed, num_teachers in ((False, rows), (True, columns))
        if teachers is None or num_teachers == teachers
    )


def _no_layout(where: str, rows: int, columns: int, teachers: int) -> str:
    """Why ``--teachers`` M fits no layout of R x K labels, and the M of each."""
    if rows == columns:
        return (
            f"{where}: {given('teachers', teachers)} does not match the labels: {rows} teachers x "
            f"{columns} queries ({given('teachers', rows)})"
        )
    return (
        f"{where}: {given('teachers', teachers)} matches neither layout of the labels: {rows} "
        f"teachers x {columns} queries as saved ({given('teachers', rows)}), or {columns} "
        f"teachers x {rows} queries saved as queries x teachers ({given('teachers', columns)})"
    )


def labels_transposed(shape: tuple[int, ...], where: str, teachers: int | None) -> bool:
    """Whether ``--format labels`` reads a 2-D array as saved queries x teachers: when
    ``--teachers`` names its columns and not its rows (:func:`labels_layouts`); the
    documented layout otherwise, a square array's too.

    Raises:
        InputError: ``teachers`` is the number of neither rows nor columns.
    """
    if teachers is None or len(shape) != 2 or 0 in shape:
        return False  # not 2-D, or empty: refused by the shape check
    rows, columns = (int(n) for n in shape)
    layouts = labels_layouts(rows, columns, teachers)
    if not layouts:
        raise InputError(_no_layout(where, rows, columns, teachers))
    return layouts == (True,)


def detect_format(
    shape: tuple[int, ...], where: str, teachers: int | None, scan: BlockScan | None
) -> tuple[VoteFormat, bool]:
    """Auto-detection rules; see the module docstring.

    Args:
        shape: The file's array shape.
        where: The path as the user gave it.
        teachers: ``--teachers``.
        scan: For a non-empty 2-D array, a scan of the whole of it (in memory, or streamed
            by rows or by columns) made with ``num_rows``: its row sums and what detection
            needs. Unused otherwise.

    Returns:
        The format, and for labels whether they are read saved queries x teachers (the
        layout ``teachers`` picked; always False for the other formats).

    Raises:
        InputError: Not 2-D or 3-D, or a 2-D array with more than one plausible reading
            (each is named, with what picks it: plausible labels always read two ways
            without ``--teachers``), or one that reads as counts only with abstaining
            teachers and no ``--teachers``, or as labels only with more classes than
            teachers or queries; plausible labels with a ``--teachers`` of neither layout
            that counts refute.
    """
    if len(shape) == 3:
        return VoteFormat.PROBS, False
    if len(shape) != 2:
        raise InputError(
            f"{where}: array has {len(shape)} dimensions {shape} but {given('format', 'auto')} "
            "expects "
            f"{LAYOUTS['counts']} counts, {LAYOUTS['labels']} labels or "
            f"{LAYOUTS['probs']} probs"
        )
    if scan is None or 0 in shape:
        return VoteFormat.COUNTS, False  # rejected as empty by the shape check
    rows, columns = (int(n) for n in shape)
    found = _Readings(rows, columns, scan)
    sums = scan.row_sums
    if found.counts_ok and np.isfinite(sums[0]) and sums[0] > 0 and all_near(sums, sums[0]):
        return VoteFormat.COUNTS, False
    if teachers is not None:
        return _format_of_m(found, where, teachers)
    return _format_without_m(found, where), False


def _format_of_m(found: _Readings, where: str, teachers: int) -> tuple[VoteFormat, bool]:
    """With ``--teachers M``: the one reading that M does not refute, and whether it is
    labels saved queries x teachers; several are an input error, and so is none of plausible
    labels; none otherwise is counts (which then fails)."""
    readings: list[str] = []
    # Each reading that --teachers M does not refute: counts with no row above M, labels
    # in the layout of M teachers.
    counts_left = found.counts_ok and not _above(found.sums, teachers).any()
    if counts_left:
        readings.append(
            f"counts of {found.rows} queries x {found.columns} classes from {teachers} teachers "
            f"({_rows_text(found.sums)}; pass {given('format', 'counts')})"
        )
    layouts = labels_layouts(found.rows, found.columns, teachers) if found.fits else ()
    readings += [found.layout(transposed) for transposed in layouts]
    if len(readings) > 1:
        raise InputError(f"{where}: cannot tell the format: it could be {', or '.join(readings)}")
    if layouts:
        return VoteFormat.LABELS, layouts[0]
    if found.fits and not counts_left:
        message = _no_layout(where, found.rows, found.columns, teachers)
        if found.counts_ok:  # counts, refuted by a row above M
            row = int(np.argmax(_above(found.sums, teachers)))
            message += (
                f"; as counts, votes row {row} sums to {show_value(found.sums[row])}, more "
                f"than {given('teachers', teachers)}"
            )
        raise InputError(message)
    return VoteFormat.COUNTS, False


def _format_without_m(found: _Readings, where: str) -> VoteFormat:
    """Without ``--teachers``: counts when labels are not plausible at all (which then fails
    with the reason); otherwise an input error: plausible labels read both ways (and maybe as
    counts with abstaining teachers too), and whole values of at least -1 with more classes
    than teachers or queries may be labels or counts."""
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
        # Plausible labels read both ways (labels_layouts): never one without --teachers.
        readings += [found.layout(transposed) for transposed in labels_layouts(rows, columns, None)]
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

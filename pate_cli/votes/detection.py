"""Vote format detection: one reading of the array, or an input error naming each one.

Detection (``--format auto``) looks at the whole file and takes a reading only when no other
reading of the same array is plausible, or when the data decide between them; otherwise it
is an input error (:class:`AmbiguousFormatError`) that names every plausible reading, with
its sizes and what picks it. It never guesses in a way that changes the numbers. The
readings of a 2-D array of R rows and K columns, and when each is plausible:

- counts, R queries x K classes: finite non-negative values. Rows that all sum to the same
  positive total make it counts outright: the rows of a labels file are each one teacher's
  labels over many queries, whose sums vary widely (a labels file whose rows all share one
  sum, which takes few teachers and queries, is read as counts);
- counts with abstaining teachers: whole non-negative values whose rows mostly reach the
  largest row sum S (the rows below S are fewer than half of them and none is below S/2);
  beside labels of more classes than teachers or queries, any whole non-negative values
  whose S is at most :data:`PLAUSIBLE_TEACHERS` (counts of more teachers than any ensemble
  are no reading a labels file can have: token ids sum to billions). Auto never reads them
  without ``--teachers`` (M could be more than S), but names them; ``--num-classes`` other
  than K refutes them;
- labels, in either layout: R teachers x K queries (the documented layout), or K teachers x
  R queries saved queries x teachers. Labels are plausible when they are whole numbers, at
  least -1, whose class count C = largest label + 1 is at most both R and K (a labels
  reading of a counts file implies a class count near the counts' number of teachers:
  ``[[240, 10], [100, 100]]``, 241 classes for 2 teachers; a transposed counts file,
  hundreds of classes for 10 queries), or below ``--num-classes`` V (the classes are then
  V). That one rule holds for both layouts alike (:attr:`_Readings.fits`); the sizes never
  tell the layouts apart (the 2017 250 x 9000 file could as well be 9000 teachers x 250
  queries), the labels do: :mod:`pate_cli.votes.layout` takes the layout whose queries the
  teachers agree on, where that is decisive. ``--teachers M`` picks the layout of M
  teachers (:func:`labels_layouts`, the one rule of the layout for auto and for ``--format
  labels``); an M of neither layout is an input error, never a note.

A class count of labels read from the largest label that makes a vocabulary (1,000 classes
or more) needs ``--num-classes`` (:func:`~pate_cli.votes.conversion.check_inferred_classes`).

So ``--format auto`` reads:

- 3-D as ``probs``;
- 2-D with rows that all sum to the same positive total as ``counts``;
- 2-D with ``--teachers M``: the plausible reading that M does not refute (counts with no
  row above M, labels in the layout of M teachers): ``counts`` (which then warns on rows
  below M), or ``labels`` in that layout (transposed for K = M; a square array's layouts
  both have M teachers); several are an input error, and so is none when labels are
  plausible; none otherwise is ``counts``, which then fails;
- 2-D otherwise, with plausible labels: ``labels`` in the layout the labels decide, unless
  counts with abstaining teachers are plausible too; an input error naming every plausible
  reading otherwise (labels of more classes than teachers or queries, without
  ``--num-classes``, are named but never taken: they may be counts);
- anything else as ``counts`` (which then fails with the reason).

``--format labels`` reads the documented layout, or the layout of ``--teachers M`` when M
names the other axis alone (:func:`labels_transposed`).

The readings are told apart by what a scan of the whole array gathered
(:class:`~pate_cli.votes.formats.BlockScan`) and, for the layout of labels, by a pass over
its rows and columns (:func:`~pate_cli.votes.layout.layout_evidence`), made only when it
decides something.
"""

from __future__ import annotations

from collections.abc import Callable
from concurrent.futures import Future
from dataclasses import dataclass
from typing import Any

import numpy as np
from numpy.typing import NDArray

from pate_cli.choices import VoteFormat
from pate_cli.common.spelling import Placeholder, given, on_command_line
from pate_cli.errors import InputError
from pate_cli.votes.conversion import VOCABULARY, check_inferred_classes
from pate_cli.votes.formats import ABSTAIN, AXES, LAYOUTS, BlockScan, all_near, show_value
from pate_cli.votes.layout import AxisAgreement, LayoutEvidence

#: The most teachers a counts reading may imply when it is named beside labels: 2**24, above
#: any ensemble pate is measured on (10 million teachers).
PLAUSIBLE_TEACHERS = 1 << 24

_M = Placeholder("M")  # the number of teachers a user fills in

Evidence = Callable[[int], LayoutEvidence]
"""The agreement of a labels array's rows and of its columns, for C classes: a pass over
the array, asked for only when it decides something."""


@dataclass(frozen=True)
class Reading:
    """One plausible reading of a 2-D votes array: what a refusal names and ``inspect``
    lists."""

    format: VoteFormat
    transposed: bool
    """Labels saved queries x teachers."""
    num_queries: int
    num_classes: int
    num_teachers: int | None
    """None for counts whose teachers only ``--teachers`` can give."""
    what: str
    """The reading in words, with its sizes."""
    flags: tuple[tuple[str, object], ...]
    """The parameters that pick it, by their command-line names (a :class:`Placeholder`
    value is for the user to fill in); none for a reading no flag picks."""
    after: str = ""
    """What follows the flags in words (``, M at least 50``), or stands instead of them."""
    agreement: tuple[AxisAgreement, AxisAgreement] | None = None
    """Labels: how the labels agree by query and by teacher in this layout."""
    min_teachers: float | None = None
    """Counts of abstaining teachers: the least M (their largest row sum)."""

    @property
    def pick(self) -> str:
        """What picks it, as its caller writes it (``pass --format labels``)."""
        spelled = _together(*(given(name, value) for name, value in self.flags))
        return (f"pass {spelled}" if self.flags else "") + self.after

    @property
    def text(self) -> str:
        """The reading as a refusal names it."""
        return f"{self.what}; {self.pick})"

    @property
    def layout(self) -> str:
        axes = AXES[self.format]
        return " x ".join(axes[::-1] if self.transposed else axes)

    def to_dict(self) -> dict[str, Any]:
        agreement = None
        if self.agreement is not None:
            by_query, by_teacher = self.agreement
            agreement = {"by_query": by_query.to_dict(), "by_teacher": by_teacher.to_dict()}
        return {
            "format": self.format.value,
            "layout": self.layout,
            "num_teachers": self.num_teachers,
            "num_queries": self.num_queries,
            "num_classes": self.num_classes,
            "agreement": agreement,
            "min_teachers": self.min_teachers,
            "pick": {
                name.replace("-", "_"): None if isinstance(value, Placeholder) else value
                for name, value in self.flags
            },
        }


class AmbiguousFormatError(InputError):
    """A votes array that reads more than one plausible way: its readings are listed.

    Attributes:
        where: The path as the user gave it.
        readings: Every plausible reading, with what picks it.
        shape: The array's shape as saved.
        dtype: Its dtype as saved.
        digest: Its digest, being computed (None until the loader sets it).
    """

    def __init__(self, where: str, message: str, readings: tuple[Reading, ...]) -> None:
        super().__init__(message)
        self.where, self.readings = where, readings
        self.shape: tuple[int, ...] = ()
        self.dtype = ""
        self.digest: Future[str] | None = None


@dataclass(frozen=True)
class Detected:
    """What detection decided: the format, the layout of labels and what decided it."""

    format: VoteFormat
    transposed: bool = False
    """Labels read saved queries x teachers."""
    evidence: LayoutEvidence | None = None
    """The labels' agreement, when it decided the layout."""


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


def _classes_text(num_classes: int) -> str:
    if num_classes == 1:
        return "1 class"
    shown = str(num_classes) if num_classes < 10**15 else f"{float(num_classes):.3g}"
    return f"{shown} classes"


def _agreement_text(evidence: LayoutEvidence) -> str:
    """Why the labels do not decide the layout, in a few words."""
    column, row = evidence.by_column, evidence.by_row
    return (
        f"the labels do not decide it: they agree by column {column.lam:.3f} (chance "
        f"{column.chance:.3f}) and by row {row.lam:.3f} (chance {row.chance:.3f})"
    )


@dataclass(frozen=True)
class _Readings:
    """What tells the readings of a non-empty 2-D array of ``rows`` x ``columns`` apart,
    from a scan of the whole of it (see the module docstring); ``vocabulary`` is
    ``--num-classes``."""

    rows: int
    columns: int
    scan: BlockScan
    vocabulary: int | None = None

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
    def inferred_classes(self) -> int:
        """One more than the largest label (0 when the values are not labels)."""
        return int(max(self.scan.high, 0)) + 1 if self.labels_ok else 0

    @property
    def num_classes(self) -> int:
        """C of the labels reading: ``--num-classes`` when every label is below it, else
        one more than the largest label."""
        inferred = self.inferred_classes
        vocabulary = self.vocabulary
        return vocabulary if vocabulary is not None and vocabulary >= inferred else inferred

    @property
    def counts_refuted(self) -> bool:
        """``--num-classes`` other than the columns: no reading as counts."""
        return self.vocabulary is not None and self.vocabulary != self.columns

    @property
    def fits(self) -> bool:
        """Plausible labels: no more classes than teachers or queries, or below a
        ``--num-classes`` that is not also the counts' class count. Symmetric in R and K,
        so it holds of both layouts alike: the one rule of what labels may be."""
        if not self.labels_ok:
            return False
        inferred = self.inferred_classes
        if self.vocabulary is not None and inferred <= self.vocabulary and self.counts_refuted:
            return True
        return inferred <= min(self.rows, self.columns)

    def layout(self, transposed: bool, evidence: LayoutEvidence | None = None) -> Reading:
        """The labels reading in one layout, and what picks it."""
        return labels_reading((self.rows, self.columns), self.num_classes, transposed, evidence)

    def counts(self, teachers: int | None = None) -> Reading:
        """The reading as counts of ``teachers`` (``--teachers``), or of abstaining teachers
        whose number only ``--teachers`` can give, and what picks it."""
        known, largest = teachers is not None, self.sums.max()
        return Reading(
            VoteFormat.COUNTS,
            False,
            num_queries=self.rows,
            num_classes=self.columns,
            num_teachers=teachers,
            what=(
                f"counts of {self.rows} queries x {self.columns} classes "
                f"{f'from {teachers}' if known else 'with abstaining'} teachers "
                f"({_rows_text(self.sums)}"
            ),
            flags=(("format", "counts"),) if known else (("format", "counts"), ("teachers", _M)),
            after="" if known else f", M at least {show_value(largest)}",
            min_teachers=None if known else float(largest),
        )


def labels_reading(
    shape: tuple[int, int],
    num_classes: int,
    transposed: bool,
    evidence: LayoutEvidence | None = None,
) -> Reading:
    """The reading of an R x K array as labels in one layout (``transposed``: K teachers x
    R queries saved queries x teachers), and what picks it."""
    rows, columns = shape
    teachers, queries = (columns, rows) if transposed else (rows, columns)
    saved = " saved as queries x teachers" if transposed else ""
    flags: tuple[tuple[str, object], ...] = (("format", "labels"),)
    after = ""
    if transposed and rows != columns:
        flags += (("teachers", columns),)
    elif transposed:  # a square array's axes cannot be told apart by a count
        flags, after = (), "save the array transposed, as (teachers, queries)"
    return Reading(
        VoteFormat.LABELS,
        transposed,
        num_queries=queries,
        num_classes=num_classes,
        num_teachers=teachers,
        what=(
            f"labels of {teachers} teachers x {queries} queries{saved} "
            f"({_classes_text(num_classes)}"
        ),
        flags=flags,
        after=after,
        agreement=None if evidence is None else evidence.axes(transposed),
    )


def _refuse(where: str, readings: list[Reading], why: str = "") -> AmbiguousFormatError:
    """The error naming every plausible reading (and why the data do not decide)."""
    message = (
        f"{where}: cannot tell the format: it could be {', or '.join(r.text for r in readings)}"
    )
    return AmbiguousFormatError(where, message + (f"; {why}" if why else ""), tuple(readings))


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
    shape: tuple[int, ...],
    where: str,
    teachers: int | None,
    scan: BlockScan | None,
    num_classes: int | None = None,
    evidence: Evidence | None = None,
) -> Detected:
    """Auto-detection rules; see the module docstring.

    Args:
        shape: The file's array shape.
        where: The path as the user gave it.
        teachers: ``--teachers``.
        scan: For a non-empty 2-D array, a scan of the whole of it (in memory, or streamed
            by rows or by columns) made with ``num_rows``: its row sums and what detection
            needs. Unused otherwise.
        num_classes: ``--num-classes``.
        evidence: For a non-empty 2-D array, the pass that measures how its labels agree by
            row and by column (:func:`~pate_cli.votes.layout.layout_evidence`); without it,
            plausible labels are never read without ``--teachers``.

    Returns:
        The format, and for labels the layout and what decided it.

    Raises:
        AmbiguousFormatError: A 2-D array with more than one plausible reading that the
            data do not decide (each is named, with what picks it), or one that reads as
            labels only with more classes than teachers or queries (they may be counts).
        InputError: Not 2-D or 3-D; labels whose class count read from the largest label
            makes a vocabulary, without ``--num-classes``; plausible labels with a
            ``--teachers`` of neither layout that counts refute.
    """
    if len(shape) == 3:
        return Detected(VoteFormat.PROBS)
    if len(shape) != 2:
        raise InputError(
            f"{where}: array has {len(shape)} dimensions {shape} but {given('format', 'auto')} "
            "expects "
            f"{LAYOUTS['counts']} counts, {LAYOUTS['labels']} labels or "
            f"{LAYOUTS['probs']} probs"
        )
    if scan is None or 0 in shape:
        return Detected(VoteFormat.COUNTS)  # rejected as empty by the shape check
    rows, columns = (int(n) for n in shape)
    found = _Readings(rows, columns, scan, num_classes)
    sums = scan.row_sums
    if found.counts_ok and np.isfinite(sums[0]) and sums[0] > 0 and all_near(sums, sums[0]):
        return Detected(VoteFormat.COUNTS)
    if teachers is not None:
        return _format_of_m(found, where, teachers)
    return _format_without_m(found, where, evidence)


def _format_of_m(found: _Readings, where: str, teachers: int) -> Detected:
    """With ``--teachers M``: the one reading that M does not refute, and whether it is
    labels saved queries x teachers; several are an input error, and so is none of plausible
    labels; none otherwise is counts (which then fails)."""
    readings: list[Reading] = []
    # Each reading that --teachers M does not refute: counts with no row above M, labels
    # in the layout of M teachers.
    counts_left = (
        found.counts_ok and not found.counts_refuted and not _above(found.sums, teachers).any()
    )
    if counts_left:
        readings.append(found.counts(teachers))
    layouts = labels_layouts(found.rows, found.columns, teachers) if found.fits else ()
    readings += [found.layout(transposed) for transposed in layouts]
    if len(readings) > 1:
        raise _refuse(where, readings)
    if layouts:
        return Detected(VoteFormat.LABELS, layouts[0])
    if found.fits and not counts_left:
        message = _no_layout(where, found.rows, found.columns, teachers)
        if found.counts_ok and not found.counts_refuted:  # counts, refuted by a row above M
            row = int(np.argmax(_above(found.sums, teachers)))
            message += (
                f"; as counts, votes row {row} sums to {show_value(found.sums[row])}, more "
                f"than {given('teachers', teachers)}"
            )
        raise InputError(message)
    return Detected(VoteFormat.COUNTS)


def _format_without_m(found: _Readings, where: str, evidence: Evidence | None) -> Detected:
    """Without ``--teachers``: plausible labels in the layout their agreement decides, when
    counts with abstaining teachers are not plausible too; counts when labels are not
    plausible at all (which then fails with the reason); an input error naming the readings
    otherwise."""
    rows, columns, sums = found.rows, found.columns, found.sums
    counts = found.counts_ok and found.labels_ok and not found.counts_refuted
    if found.fits:
        if found.vocabulary is None:
            check_inferred_classes(where, found.inferred_classes)
        if counts and _abstaining(sums):
            readings = [found.counts(), found.layout(False), found.layout(True)]
            raise _refuse(where, readings)
        if evidence is None:
            raise _refuse(where, [found.layout(False), found.layout(True)])
        measured = evidence(found.num_classes)
        transposed = measured.layout
        if transposed is None:
            layouts = [found.layout(False, measured), found.layout(True, measured)]
            raise _refuse(where, layouts, _agreement_text(measured))
        return Detected(VoteFormat.LABELS, transposed, measured)
    if not found.labels_ok:
        return Detected(VoteFormat.COUNTS)  # which then fails with the reason
    inferred = found.inferred_classes
    vocabulary = inferred >= VOCABULARY
    flags = (("num-classes", Placeholder("V")),) if vocabulary else (("format", "labels"),)
    after = f", the vocabulary, at least {inferred}" if vocabulary else ""
    labels = Reading(
        VoteFormat.LABELS,
        False,
        num_queries=columns,
        num_classes=inferred,
        num_teachers=rows,
        what=(
            f"labels ({rows} teachers, {columns} queries, {_classes_text(inferred)}: more "
            "classes than teachers or queries"
        ),
        flags=flags,
        after=after,
    )
    if found.scan.minus_one is not None:  # not counts, and labels only with many classes
        row, column = found.scan.minus_one
        raise InputError(
            f"{where}: cannot tell the format: it could be {labels.what}) with abstaining "
            f"teachers ({ABSTAIN}), or counts with a bad value (row {row}, column {column} "
            f"is {ABSTAIN}); {labels.pick}, or fix the counts"
        )
    # Counts of more teachers than any ensemble are no reading of a labels file (token ids
    # sum to billions), unless their rows sum as abstaining teachers' do.
    if counts and (_abstaining(sums) or sums.max() <= PLAUSIBLE_TEACHERS):
        raise _refuse(where, [labels, found.counts()])
    if inferred >= VOCABULARY:
        check_inferred_classes(where, inferred)
    raise _refuse(where, [labels])

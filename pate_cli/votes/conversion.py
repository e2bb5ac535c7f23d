"""Votes checked and converted to a ``(Q, C)`` histogram of counts.

What the rules of one block cannot check needs the whole array: its shape against the
format and ``--num-classes`` (:func:`check_shape`), the number of teachers M (from the row
sums of counts, or the rows of labels and scores, against ``--teachers``) and the number of
classes C of labels. :func:`to_counts` does all of it for votes in memory; the streamed path
(``pate_cli.votes.stream``) uses the same pieces on the scan of its blocks. The formats and
their rules are ``pate_cli.votes.formats``.

Shape letters: Q queries, C classes, M teachers.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable

import numpy as np
from numpy.typing import NDArray

from pate_cli.choices import VoteFormat
from pate_cli.common.spelling import Placeholder, given, option
from pate_cli.errors import InputError
from pate_cli.votes.formats import (
    LAYOUTS,
    BlockScan,
    Distinct,
    all_near,
    same_query,
    scan_blocks,
    scan_rows_distinct,
    show_value,
)


def check_shape(
    shape: tuple[int, ...], where: str, fmt: VoteFormat, num_classes: int | None
) -> None:
    """Check the number of dimensions, emptiness and ``--num-classes`` against ``fmt``."""
    ndim = 3 if fmt is VoteFormat.PROBS else 2
    if len(shape) != ndim:
        raise InputError(
            f"{where}: array has {len(shape)} dimensions {shape} but "
            f"{given('format', fmt.value)} expects {LAYOUTS[fmt.value]}"
        )
    if 0 in shape:
        raise InputError(
            f"{where}: votes array is empty, shape {shape}; expected "
            f"{LAYOUTS[fmt.value]} with at least one of each"
        )
    if num_classes is not None and fmt is not VoteFormat.LABELS and shape[-1] != num_classes:
        raise InputError(
            f"{where}: votes have {shape[-1]} classes (shape {shape}) but "
            f"{option('num-classes')} is {num_classes}"
        )


def counts_from_labels(labels: np.ndarray, num_classes: int) -> NDArray[np.float64]:
    """Histogram each query's column of labels: (M, Q) -> (Q, C), one bincount.

    A label :data:`~pate_cli.votes.formats.ABSTAIN` is counted in no class.
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
                f"{given('teachers', teachers)}; {option('teachers')} must be at least the "
                "largest row sum "
                f"({show_value(sums.max())})"
            )
        if off.any():
            notes.append(
                f"{where}: {int(off.sum())} of {sums.size} votes rows do not sum to "
                f"{given('teachers', teachers)} (sums range from {show_value(sums.min())} to "
                f"{show_value(sums.max())})"
            )
        return teachers
    if not all_near(sums, sums[0]):
        q = int(np.argmin(np.isclose(sums, sums[0], rtol=1e-9, atol=0)))
        raise InputError(
            f"{where}: votes rows sum to different totals (row {file_query(0)}: "
            f"{show_value(sums[0])}, row {file_query(q)}: {show_value(sums[q])}); expected "
            "every row to sum to the number of teachers M, or pass "
            f"{given('teachers', Placeholder('M'))}"
        )
    if not np.isfinite(sums[0]) or abs(sums[0] - round(sums[0])) > 1e-9 * sums[0]:
        raise InputError(
            f"{where}: votes rows sum to {show_value(sums[0])}; expected a whole number "
            f"of teachers M, or pass {given('teachers', Placeholder('M'))}"
        )
    return int(round(sums[0]))


def teachers_of_counts(
    scan: BlockScan,
    where: str,
    teachers: int | None,
    notes: list[str],
    file_query: Callable[[int], int] = same_query,
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


#: A class count read from the largest label that makes a vocabulary: it needs ``--num-classes``.
VOCABULARY = 1000


def check_inferred_classes(where: str, num_classes: int) -> None:
    """Refuse a class count read from the largest label that makes a vocabulary.

    The data-dependent bound sums over every class (Prop. 7's union), those no teacher voted
    for too: a count read from the largest label can fall short of the vocabulary, and the
    classes left out would lower the figure below the truth.

    Raises:
        InputError: ``num_classes`` is :data:`VOCABULARY` or more.
    """
    if num_classes >= VOCABULARY:
        largest = show_value(num_classes - 1)
        raise InputError(
            f"{where}: labels imply {show_value(num_classes)} classes (the largest label is "
            f"{largest}), a vocabulary: pass {given('num-classes', Placeholder('V'))} "
            "with its size; a count read from the largest label can fall short of it, and the "
            "data-dependent bound counts every class, voted for or not, so a short count "
            "would lower the figure"
        )


def classes_of_labels(
    where: str,
    num_classes: int | None,
    whole: BlockScan | None,
    selected: Callable[[], Iterable[tuple[int, np.ndarray]]],
    file_query: Callable[[int], int] = same_query,
) -> int:
    """Check labels and return C: ``num_classes``, or one more than the largest label.

    Without ``num_classes`` C comes from the whole file, which must hold labels only:
    ``whole`` is its scan with the labels rule, C unbounded. Then the selected queries
    (``selected()`` yields their blocks) must lie in [0, C); a ``whole`` scan that shows
    they do spares reading them again.

    Raises:
        InputError: A value that is not a label (in [0, C)).
    """
    inferred = num_classes is None
    if num_classes is None:
        if whole is None:
            raise ValueError("the number of classes of labels needs a scan of the whole file")
        whole.check(where)
        num_classes = int(whole.largest) + 1
    # Compared as the rule compares: float labels beyond 2**53 can equal C = largest + 1.
    if whole is None or whole.bad is not None or whole.largest >= num_classes:
        scan = scan_blocks(selected(), VoteFormat.LABELS, num_classes=num_classes, stop_at_bad=True)
        scan.check(where, file_query)
    if inferred:  # a label out of range is named first (a float label of 1e300, say)
        check_inferred_classes(where, num_classes)
    return num_classes


def check_label_cells(where: str, num_classes: int, num_queries: int, max_cells: int) -> None:
    """Refuse labels whose counts would be implausibly large, ``num_queries`` x ``num_classes``
    above ``max_cells`` (the same rule for a file read whole and one streamed)."""
    if num_queries * num_classes > max_cells:
        raise InputError(
            f"{where}: labels imply {num_classes} classes for {num_queries} queries; "
            f"expected small class labels (or pass {option('num-classes')})"
        )


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
            f"{where}: the file has {file_teachers} teachers but {option('teachers')} is "
            f"{num_teachers}; {option('teachers')} must be at least the file's number of "
            "teachers, or be left out"
        )
    if num_teachers != file_teachers:
        notes.append(
            f"{where}: the file has {file_teachers} teachers but {option('teachers')} is "
            f"{num_teachers}"
        )
    return num_teachers


def counts_by_rows(
    data: np.ndarray,
    where: str,
    teachers: int | None,
    file_query: Callable[[int], int],
    notes: list[str],
    *,
    limit: int = 0,
    share: float = 0.5,
    found: tuple[BlockScan, Distinct | None] | None = None,
) -> tuple[NDArray[np.float64], int, Distinct | None]:
    """Validate (Q, C) counts in memory and return (counts as float64, M, their distinct
    rows): each distinct row checked once (at most ``limit`` of them, at most ``share`` of
    the rows, else each row; ``formats.scan_rows_distinct``). ``found``: the scan and
    distinct rows made of ``data`` already (of the same values), not made again."""
    counts = np.array(data, dtype=np.float64, order="C")
    blocks = [(0, counts)]
    scan, distinct = found or scan_rows_distinct(lambda: blocks, len(counts), limit, share)
    return counts, teachers_of_counts(scan, where, teachers, notes, file_query), distinct


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
        counts, num_teachers, _ = counts_by_rows(data, where, teachers, file_query, notes)
        return counts, num_teachers
    if fmt is VoteFormat.LABELS:
        # C comes from the whole file, so that a selection cannot change the class count.
        whole = scan_blocks([(0, full)], fmt) if num_classes is None else None
        num_classes = classes_of_labels(where, num_classes, whole, lambda: [(0, data)], file_query)
        check_label_cells(where, num_classes, data.shape[1], max_label_cells)
        labels = data
    else:
        scan_blocks([(0, data)], fmt).check(where, file_query)
        num_classes = int(data.shape[2])
        labels = np.argmax(data, axis=2)  # the first maximum wins ties
    counts = counts_from_labels(labels, num_classes)
    return counts, teachers_of_labels(int(data.shape[0]), teachers, where, notes)

"""Vote histograms over many classes, held by their voted classes.

A next-token run votes over a vocabulary of tens of thousands of tokens, and each query's
teachers agree on a handful. ``Compact`` keeps, per query, the counts of its voted classes
and of one zero-vote class (the first by class id), pads the rest of its row with -inf (no
class), and counts the query's other zero-vote classes in ``zeros``. Every figure of a
histogram is a function of its counts as a multiset, so the zero-vote classes enter each
one in closed form: their number times the term of one class with no votes.

The voted classes come in class-id order and the zero-vote class after them, so ``argmax``
over a row is the first maximal class, as over the dense row (a zero-vote class is
maximal only in a row without votes, where it is the only column); a pad (-inf) is never
maximal and its terms vanish (a gap of +inf: a tail of 0, a CDF of 1).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from numpy.typing import ArrayLike, NDArray

FloatArray = NDArray[np.float64]
IntArray = NDArray[np.int64]


@dataclass(frozen=True)
class Compact:
    """Queries' histograms by their voted classes (module docstring).

    Shapes: values (Q, W) float64, classes (Q, W) int64 (-1 for a pad), zeros (Q,) int64;
    ``vocabulary``: the most classes a query has (the dense width).
    """

    values: FloatArray
    classes: IntArray
    zeros: IntArray
    vocabulary: int

    def __len__(self) -> int:
        return int(self.values.shape[0])

    @property
    def shape(self) -> tuple[int, int]:
        """The shape of the dense histogram: (Q, vocabulary)."""
        return len(self), self.vocabulary

    def __getitem__(self, rows: slice) -> Compact:
        return self.rows(*rows.indices(len(self))[:2])

    @property
    def num_classes(self) -> IntArray:
        """Each query's number of classes: its columns that are classes, and its zeros."""
        listed: IntArray = np.count_nonzero(self.classes >= 0, axis=1) + self.zeros
        return listed

    def rows(self, start: int, stop: int) -> Compact:
        stop = max(start, stop)
        part = slice(start, stop)
        return Compact(self.values[part], self.classes[part], self.zeros[part], self.vocabulary)

    def dense_block_rows(self) -> int:
        """Rows of a dense block of about 4M values (``DenseRows``)."""
        return max(1, (1 << 22) // max(self.vocabulary, 1))

    def take(self, index: NDArray[np.intp] | NDArray[np.bool_]) -> Compact:
        """The queries at ``index``, in its order."""
        return Compact(self.values[index], self.classes[index], self.zeros[index], self.vocabulary)

    def dense(self, num_classes: int) -> FloatArray:
        """The (Q, num_classes) histogram (for small cases and tests)."""
        out = np.zeros((len(self), num_classes))
        rows, columns = np.nonzero(self.classes >= 0)
        out[rows, self.classes[rows, columns]] = self.values[rows, columns]
        return out

    @classmethod
    def from_sorted_entries(
        cls,
        row: IntArray,
        column: IntArray,
        value: FloatArray,
        num_rows: int,
        num_classes: int | IntArray,
        vocabulary: int | None = None,
    ) -> Compact:
        """From the non-zero entries of a (num_rows, C) histogram, sorted by (row, column),
        with C = ``num_classes`` for every row or one count per row (candidate sets, of a
        ``vocabulary``: by default the largest).

        Raises:
            ValueError: an entry at a column at or beyond its row's number of classes.
        """
        classes_per_row = np.broadcast_to(np.asarray(num_classes, dtype=np.int64), (num_rows,))
        outside = column >= classes_per_row[row] if row.size else np.zeros(0, dtype=bool)
        if outside.any():
            i = int(np.argmax(outside))
            raise ValueError(
                f"query {row[i]} has votes for class {column[i]} but {classes_per_row[row[i]]} "
                "classes"
            )
        nnz = np.bincount(row, minlength=num_rows).astype(np.int64)
        starts = np.zeros(num_rows + 1, dtype=np.int64)
        np.cumsum(nnz, out=starts[1:])
        rank = np.arange(row.size, dtype=np.int64) - starts[row]
        has_zero = nnz < classes_per_row
        width = int((nnz + has_zero).max()) if num_rows else 0
        values = np.full((num_rows, max(width, 1)), -np.inf)
        classes = np.full((num_rows, max(width, 1)), -1, dtype=np.int64)
        values[row, rank] = value
        classes[row, rank] = column
        # The first zero-vote class: the first rank whose column is not the rank itself
        # (the columns of a row are sorted and distinct), else the row's count.
        first_zero = nnz.copy()
        off = column != rank
        if off.any():
            np.minimum.at(first_zero, row[off], rank[off])
        holders = np.flatnonzero(has_zero)
        values[holders, nnz[holders]] = 0.0
        classes[holders, nnz[holders]] = first_zero[holders]
        zeros = np.where(has_zero, classes_per_row - nnz - 1, 0)
        if vocabulary is None:
            vocabulary = int(np.max(num_classes)) if np.size(num_classes) else 0
        return cls(values, classes, zeros, vocabulary)


Counts = FloatArray | Compact
"""Vote histograms, dense (Q, C) or compact."""


def parts(counts: FloatArray | Compact) -> tuple[FloatArray, IntArray | None, IntArray]:
    """(values, zeros or None, classes per row) of dense or compact histograms."""
    if isinstance(counts, Compact):
        return counts.values, counts.zeros, counts.num_classes
    values = np.asarray(counts, dtype=np.float64)
    return values, None, np.full(values.shape[0], values.shape[1], dtype=np.int64)


def read_rows(votes: object, start: int, stop: int) -> FloatArray | Compact:
    """Rows [start, stop) of dense counts (any array-like that slices by rows, as float64)
    or of compact ones."""
    rows = votes[start:stop]  # type: ignore[index]
    return rows if isinstance(rows, Compact) else np.asarray(rows, dtype=np.float64)


def plurality(counts: FloatArray | Compact) -> NDArray[np.intp]:
    """The plurality class of each query: the first of its largest counts, as ``argmax``."""
    if isinstance(counts, Compact):
        column = np.argmax(counts.values, axis=1)
        found: NDArray[np.intp] = counts.classes[np.arange(len(counts)), column]
        return found
    return np.asarray(np.argmax(np.asarray(counts, dtype=np.float64), axis=1))


def top_two_values(counts: Compact) -> tuple[FloatArray, FloatArray]:
    """Each query's largest count and the next (0 for an unlisted zero-vote class; -inf for
    a query with one class). Shapes: (Q,), (Q,)."""
    values = counts.values
    if values.shape[1] == 1:
        second = np.full(len(counts), -np.inf)
        top = values[:, 0].copy()
    else:
        pair = np.partition(values, -2, axis=1)[:, -2:]
        top, second = pair[:, 1], pair[:, 0]
    second = np.where(counts.zeros > 0, np.maximum(second, 0.0), second)
    return top, second


def row_sums(counts: Compact) -> FloatArray:
    """Each query's number of votes."""
    total: FloatArray = np.where(counts.classes >= 0, counts.values, 0.0).sum(axis=1)
    return total


def narrow(counts: ArrayLike | Compact, min_width: int = 3) -> tuple[ArrayLike, int]:
    """Compact counts as dense rows over their listed classes, and the number of zero-vote
    classes beyond them (every query having the same classes); other counts as they are,
    with 0.

    Each row keeps its listed counts, pads read as zero-vote classes, and at least
    ``min_width`` columns (as many as there are classes, at most), so that every row with
    an unlisted zero-vote class ends in a zero column: the walks of the local sensitivity
    give the unlisted classes that column's terms, times their number.

    Raises:
        ValueError: queries with different numbers of classes (candidate sets).
    """
    if not isinstance(counts, Compact):
        return counts, 0
    classes = counts.num_classes
    if classes.size and np.any(classes != counts.vocabulary):
        raise ValueError("the queries have different numbers of classes (candidate sets)")
    width = min(max(counts.values.shape[1], min_width), max(counts.vocabulary, 1))
    rows = np.zeros((len(counts), width))
    listed = counts.classes >= 0
    rows[:, : counts.values.shape[1]] = np.where(listed, counts.values, 0.0)[:, :width]
    return rows, counts.vocabulary - width


class DenseRows:
    """Compact votes read as dense rows a block at a time, for a bound that reads every
    class (LNMax's local sensitivity); the queries must share their classes."""

    def __init__(self, counts: Compact) -> None:
        if np.any(counts.num_classes != counts.vocabulary):
            raise ValueError("the queries have different numbers of classes (candidate sets)")
        self.counts = counts
        self.shape = counts.shape

    def __len__(self) -> int:
        return len(self.counts)

    def __getitem__(self, rows: slice) -> FloatArray:
        start, stop, _ = rows.indices(len(self))
        return self.counts.rows(start, stop).dense(self.counts.vocabulary)

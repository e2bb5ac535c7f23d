"""Which axis of a labels matrix holds the queries: what the labels themselves say.

A labels array of R rows and K columns is R teachers x K queries (the documented layout, the
2017 ``mnist_250_teachers_labels.npy``) or K teachers x R queries saved queries x teachers.
Its sizes cannot tell the two apart, but its labels can: teachers trained for the same task
agree on a query, while one teacher's labels across many queries only follow how often each
class occurs. So the labels depend on the query far more than on the teacher.

The statistic is Goodman and Kruskal's lambda of the label given one axis's index: how much
knowing the group (a column, or a row) cuts the error of guessing its labels, against
guessing the most frequent class of the whole file::

    lambda = (sum_g max_c n_gc - max_c N_c) / (N - max_c N_c)

with n_gc the labels of class c in group g, N_c those in the file and N every label that is
not -1 (an abstaining teacher counts nowhere). It is 0 when a group's labels follow the
class frequencies and 1 when every group is unanimous; heavily imbalanced classes push it
towards 0 on both axes (every group's plurality is the frequent class), so such files are
not decided by it.

Labels that follow the class frequencies alone still reach some lambda by chance, more in
small groups. :attr:`AxisAgreement.chance` bounds it: the expected plurality count of n
labels drawn from frequencies p is at most n max_c p_c + sqrt(n G) (Jensen on the
multinomial's deviations, G = 1 - sum_c p_c^2), and one label moves the numerator by at most
2, so by McDiarmid's inequality chance exceeds the bound plus sqrt(2 N ln(1 / alpha)) with
probability at most alpha = :data:`CHANCE`. The file's own frequencies stand in for p. What
a group agrees beyond that is its ``excess``.

The layout of the queries on axis A (and the teachers on the other, B) is decided when:

- A's labels agree beyond chance by at least :data:`MIN_EXCESS` (a quarter of the way from
  the class frequencies to unanimity), and
- B's lambda, chance included, is at most :data:`MAX_RATIO` of A's excess.

The same test decides either layout, so the other layout is taken only where the labels are
as decisive about it. Where neither holds (weak agreement, a few labels, classes so
imbalanced that every group's plurality is the same, teachers that each keep to a class),
the reader refuses and names both readings. On the 2017 file (250 x 9,000) the columns'
lambda is 0.679 (chance 0.072) and the rows' 0.0003.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray

#: How rarely labels that follow the class frequencies alone exceed :attr:`AxisAgreement.chance`.
CHANCE = 1e-6
#: The least lambda beyond chance that makes an axis the queries'.
MIN_EXCESS = 0.25
#: The most the teachers' axis may agree, as a fraction of the queries' excess.
MAX_RATIO = 0.25


@dataclass(frozen=True)
class AxisAgreement:
    """How the labels of one axis's groups agree (each row, or each column, a group)."""

    lam: float
    """Goodman and Kruskal's lambda of the label given the group (0 when no label differs
    from the most frequent class, which leaves nothing to explain)."""
    chance: float
    """What labels that follow the class frequencies alone stay below (but with
    probability :data:`CHANCE`); at most 1, which leaves no agreement to show."""

    @property
    def excess(self) -> float:
        """Agreement beyond chance (negative when there is none)."""
        return self.lam - self.chance

    def to_dict(self) -> dict[str, float]:
        return {"lambda": self.lam, "chance": self.chance}


@dataclass(frozen=True)
class LayoutEvidence:
    """Each axis's agreement: by column (the documented layout's queries) and by row."""

    by_column: AxisAgreement
    by_row: AxisAgreement

    def axes(self, transposed: bool) -> tuple[AxisAgreement, AxisAgreement]:
        """(by query, by teacher) in one layout (``transposed``: saved queries x teachers)."""
        return (self.by_row, self.by_column) if transposed else (self.by_column, self.by_row)

    def decides(self, transposed: bool) -> bool:
        """Whether the labels decide this layout (see the module docstring)."""
        query, teacher = self.axes(transposed)
        return query.excess >= MIN_EXCESS and teacher.lam <= MAX_RATIO * query.excess

    @property
    def layout(self) -> bool | None:
        """The layout the labels decide (True: saved queries x teachers), or None."""
        for transposed in (False, True):
            if self.decides(transposed):
                return transposed
        return None


@dataclass
class _Tally:
    """Sums over one axis's groups: plurality counts, labels and the labels' square roots."""

    plurality: int = 0
    labels: int = 0
    root_labels: float = 0.0

    def add(self, groups: np.ndarray, num_classes: int) -> NDArray[np.int64]:
        """Add a block whose rows are groups; returns each class's labels in it (-1 none)."""
        plurality, sizes, classes = _group_counts(groups, num_classes)
        self.plurality += int(plurality.sum())
        self.labels += int(sizes.sum())
        self.root_labels += float(np.sqrt(sizes).sum())
        return classes

    def agreement(self, most: int, spread: float) -> AxisAgreement:
        """Lambda and its chance level, given the file's largest class count and its
        G = 1 - sum p_c^2."""
        room = self.labels - most
        if room <= 0:
            return AxisAgreement(0.0, 1.0)  # one class: nothing tells the groups apart
        slack = math.sqrt(spread) * self.root_labels
        slack += math.sqrt(2 * self.labels * math.log(1 / CHANCE))
        # Lambda is at most 1: a chance level that high leaves no agreement to show.
        return AxisAgreement((self.plurality - most) / room, min(1.0, slack / room))


def _group_counts(
    groups: np.ndarray, num_classes: int
) -> tuple[NDArray[np.int64], NDArray[np.int64], NDArray[np.int64]]:
    """Each row's plurality count and labels (-1 not counted), and each class's labels.

    Rows are histogrammed where their histograms are no larger than the rows themselves,
    else sorted and their longest run of one class taken: both bounded by the block.
    """
    labels = np.asarray(groups).astype(np.int64, copy=False)
    num_groups, width = labels.shape
    if width == 0:
        nothing = np.zeros(num_groups, dtype=np.int64)
        return nothing, nothing, np.zeros(num_classes, dtype=np.int64)
    if num_classes + 1 <= width:
        flat = labels + 1 + (num_classes + 1) * np.arange(num_groups)[:, None]
        hist = np.bincount(flat.ravel(), minlength=num_groups * (num_classes + 1))
        hist = hist.reshape(num_groups, num_classes + 1)[:, 1:]
        return hist.max(axis=1, initial=0), hist.sum(axis=1), hist.sum(axis=0)
    ordered = np.sort(labels, axis=1)
    starts = np.ones_like(ordered, dtype=bool)
    starts[:, 1:] = ordered[:, 1:] != ordered[:, :-1]
    where = np.flatnonzero(starts.ravel())
    runs = np.diff(np.append(where, ordered.size))
    runs[ordered.ravel()[where] < 0] = 0  # the abstentions' run
    # Every row starts a run: row r's first is where[searchsorted(where, r * width)].
    plurality = np.maximum.reduceat(runs, np.searchsorted(where, np.arange(num_groups) * width))
    sizes = np.count_nonzero(labels >= 0, axis=1)
    voted = labels[labels >= 0]
    return plurality, sizes, np.bincount(voted, minlength=num_classes)


def layout_evidence(
    rows: Iterable[np.ndarray], columns: Iterable[np.ndarray], num_classes: int
) -> LayoutEvidence:
    """The agreement of a labels array's rows and of its columns.

    Args:
        rows: Blocks of whole rows, in any order, covering the array once.
        columns: Blocks of whole columns, each as saved (R x columns), covering it once.
        num_classes: C: every label is in [0, C) or -1.

    Returns:
        Lambda and its chance level for each axis.
    """
    by_row, by_column = _Tally(), _Tally()
    totals = np.zeros(num_classes, dtype=np.int64)
    for block in rows:
        totals += by_row.add(block, num_classes)
    for block in columns:
        by_column.add(np.asarray(block).T, num_classes)
    count = int(totals.sum())
    if count == 0:
        nothing = AxisAgreement(0.0, 1.0)
        return LayoutEvidence(nothing, nothing)
    shares = totals / count
    spread = max(0.0, 1.0 - float(np.dot(shares, shares)))
    most = int(totals.max())
    return LayoutEvidence(by_column.agreement(most, spread), by_row.agreement(most, spread))

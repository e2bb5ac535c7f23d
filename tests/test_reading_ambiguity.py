"""``--format auto`` reads a vote array as it was written, or refuses it: never another way.

Hypothesis writes vote arrays the way a user might save them (counts, counts with a few
abstaining teachers, soft votes, labels, labels saved queries x teachers, labels with more
classes than teachers, square arrays of either) and loads them with
:func:`pate_cli.votes.load_votes`. The only outcomes allowed are the reading the generator
meant (the same counts histogram and the same number of teachers) or an
:class:`~pate_cli.errors.InputError` (exit 2). One limit is documented
(``pate_cli.votes.detection``): a whole-number array whose rows all share one positive sum is
counts, so labels whose teachers' labels happen to sum alike read as counts (the test allows
exactly that reading for exactly those arrays). Plausible labels read both ways whatever
their shape; the labels drawn here agree on nothing, so their layout is never decided
(``tests/test_layout_evidence.py`` draws labels that agree, ``tests/test_labels_layout.py``
checks the layouts over shapes and flags). Counts with many abstaining teachers (most rows
short of the largest sum) are never read as labels, whose agreement test they could pass
only by chance.

Half the examples go through the block-by-block reader (made to start at 2 rows), which must
decide the same way. The profile's example count applies (500 in CI); one example is a
millisecond or two.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from unittest import mock

import numpy as np
import pytest
from hypothesis import event, example, given
from hypothesis import strategies as st

from pate_cli import votes as votes_module
from pate_cli.errors import InputError
from pate_cli.votes import VoteFormat, load_votes

KINDS = [
    "counts",
    "abstaining counts",
    "counts of many abstaining teachers",
    "soft votes",
    "labels",
    "labels saved queries x teachers",
    "labels with more classes than teachers",
    "square labels",
    "square counts",
]


@dataclass(frozen=True)
class Reading:
    """One way to read an array: the format, the (Q, C) histogram and M."""

    fmt: VoteFormat
    counts: np.ndarray
    num_teachers: int


@dataclass(frozen=True)
class Case:
    kind: str
    array: np.ndarray
    meant: Reading
    teachers: int  # M, as the generator knows it


def histogram(labels: np.ndarray) -> np.ndarray:
    """The counts of (M, Q) labels, one vote at a time; C from the largest label; -1 is none."""
    num_classes = max(int(labels.max()), 0) + 1
    counts = np.zeros((labels.shape[1], num_classes))
    for teacher, query in zip(*np.nonzero(labels >= 0), strict=True):
        counts[query, labels[teacher, query]] += 1
    return counts


def labels_case(kind: str, labels: np.ndarray, saved: np.ndarray) -> Case:
    teachers = labels.shape[0]
    return Case(kind, saved, Reading(VoteFormat.LABELS, histogram(labels), teachers), teachers)


def counts_case(kind: str, counts: np.ndarray, teachers: int) -> Case:
    return Case(kind, counts, Reading(VoteFormat.COUNTS, counts.astype(float), teachers), teachers)


def random_labels(rng: np.random.Generator, teachers: int, queries: int, classes: int):
    labels = rng.integers(0, classes, size=(teachers, queries))
    if rng.random() < 0.3:  # some teachers abstain on some queries
        labels[rng.random(labels.shape) < 0.1] = -1
    return labels


def random_counts(rng: np.random.Generator, teachers: int, queries: int, classes: int):
    alpha = rng.choice([0.1, 1.0, 10.0])
    return rng.multinomial(teachers, rng.dirichlet(np.full(classes, alpha)), size=queries)


@st.composite
def cases(draw) -> Case:
    kind = draw(st.sampled_from(KINDS))
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
    if kind == "counts":
        teachers = draw(st.integers(1, 300))
        counts = random_counts(rng, teachers, draw(st.integers(1, 40)), draw(st.integers(1, 12)))
        return counts_case(kind, counts, teachers)
    if kind == "abstaining counts":  # fewer than half the rows lose a few votes
        teachers, queries = draw(st.integers(2, 300)), draw(st.integers(3, 40))
        counts = random_counts(rng, teachers, queries, draw(st.integers(2, 12)))
        for row in rng.choice(
            queries, size=draw(st.integers(1, (queries - 1) // 2)), replace=False
        ):
            for _ in range(int(rng.integers(1, min(3, teachers // 2) + 1))):
                counts[row, rng.choice(np.flatnonzero(counts[row]))] -= 1
        return counts_case(kind, counts, teachers)
    if kind == "counts of many abstaining teachers":  # each teacher abstains now and then
        teachers = draw(st.integers(2, 300))
        queries, classes = draw(st.integers(3, 60)), draw(st.integers(2, 60))
        voting = rng.binomial(teachers, draw(st.floats(0.5, 0.95)), size=queries)
        frequencies = rng.dirichlet(np.full(classes, 0.3), size=queries)
        counts = np.array([rng.multinomial(n, p) for n, p in zip(voting, frequencies, strict=True)])
        return counts_case(kind, counts, teachers)
    if kind == "soft votes":  # votes in quarters: fractional values, rows summing to M
        teachers = draw(st.integers(1, 300))
        quarters = random_counts(rng, 4 * teachers, draw(st.integers(1, 40)), 12)
        return counts_case(kind, quarters / 4, teachers)
    if kind == "labels":
        teachers, queries = draw(st.integers(1, 30)), draw(st.integers(1, 80))
        classes = draw(st.integers(1, 10))
        labels = random_labels(rng, teachers, queries, classes)
        return labels_case(kind, labels, labels)
    if kind == "labels saved queries x teachers":  # PATE: at least as many queries
        teachers = draw(st.integers(1, 30))
        queries = draw(st.integers(teachers, 80))
        labels = random_labels(rng, teachers, queries, draw(st.integers(2, 10)))
        labels[rng.integers(teachers), rng.integers(queries)] = 1  # two classes at least
        return labels_case(kind, labels, labels.T.copy())
    if kind == "labels with more classes than teachers":
        teachers, queries = draw(st.integers(1, 10)), draw(st.integers(1, 60))
        classes = draw(st.integers(teachers + 1, 40))
        labels = random_labels(rng, teachers, queries, classes)
        labels[rng.integers(teachers), rng.integers(queries)] = classes - 1
        return labels_case(kind, labels, labels)
    size = draw(st.integers(1, 12))
    if kind == "square labels":
        labels = random_labels(rng, size, size, draw(st.integers(1, size)))
        return labels_case(kind, labels, labels)
    teachers = draw(st.integers(1, 300))
    return counts_case(kind, random_counts(rng, teachers, size, size), teachers)


def allowed_readings(case: Case) -> list[Reading]:
    """What the generator meant; plus counts, for an array the documented rule makes counts."""
    readings = [case.meant]
    sums = case.array.sum(axis=1)
    if case.array.min() >= 0 and sums[0] > 0 and np.all(sums == sums[0]):
        readings.append(Reading(VoteFormat.COUNTS, case.array.astype(float), int(sums[0])))
    return readings


def outcome(path: Path, streamed: bool, **kwargs: object):
    limits = {"STREAM_MIN_ROWS": 2 if streamed else votes_module.STREAM_MIN_ROWS, "_BLOCK_ROWS": 3}
    with mock.patch.multiple(votes_module, **limits):  # type: ignore[arg-type]
        try:
            votes = load_votes(path, **kwargs)  # type: ignore[arg-type]
        except InputError as error:
            assert "\n" not in error.message and error.message.startswith(str(path))
            return None
    return Reading(votes.format, np.asarray(votes.counts), votes.num_teachers)


def same(read: Reading, reading: Reading) -> bool:
    return (
        read.fmt is reading.fmt
        and read.num_teachers == reading.num_teachers
        and read.counts.shape == reading.counts.shape
        and bool(np.array_equal(read.counts, reading.counts))
    )


@pytest.fixture(scope="module")
def scratch(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("ambiguity")


def issue_counts() -> np.ndarray:
    """The issue's counts: 3,000 queries x 100 classes of 50 teachers, one vote abstaining."""
    counts = random_counts(np.random.default_rng(15), 50, 3000, 100)
    counts[17, int(np.argmax(counts[17]))] -= 1
    return counts


def issue_labels() -> np.ndarray:
    """The issue's labels: 100 teachers x 5,000 queries of 10 classes."""
    return np.random.default_rng(15).integers(0, 10, size=(100, 5000))


@given(cases(), st.booleans())
@example(counts_case("abstaining counts", issue_counts(), 50), False)
@example(labels_case("labels saved queries x teachers", issue_labels(), issue_labels().T), True)
def test_auto_reads_as_written_or_refuses(scratch: Path, case: Case, streamed: bool) -> None:
    path = scratch / "votes.npy"
    path.unlink(missing_ok=True)
    np.save(path, case.array)
    read = outcome(path, streamed)
    event(f"{case.kind}: {'refused' if read is None else 'read as ' + read.fmt.value}")
    if read is not None:
        assert any(same(read, r) for r in allowed_readings(case)), (case.kind, read.fmt)
    if case.meant.fmt is VoteFormat.COUNTS:
        # --teachers M, the count the generator used: counts as written, or a refusal.
        read = outcome(path, streamed, teachers=case.teachers)
        if read is not None:
            assert same(read, case.meant), (case.kind, read.fmt, read.num_teachers)


@given(cases())
def test_the_format_the_generator_meant_reads_as_it_meant(scratch: Path, case: Case) -> None:
    """The counterpart: ``--format`` and ``--teachers`` as written always read it so (labels
    saved queries x teachers too: ``--teachers`` names their columns; but a square array,
    whose axes no count tells apart)."""
    if case.kind == "labels saved queries x teachers" and len(set(case.array.shape)) == 1:
        return
    path = scratch / "given.npy"
    path.unlink(missing_ok=True)
    np.save(path, case.array)
    read = outcome(path, False, fmt=case.meant.fmt.value, teachers=case.teachers)
    assert read is not None and same(read, case.meant), case.kind

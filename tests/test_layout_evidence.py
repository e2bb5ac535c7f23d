"""The layout of labels from what the labels say: the right reading or a refusal, never the
other one (``pate_cli.votes.layout``).

Hypothesis writes PATE votes as teachers make them: each query has a true class drawn from
the class frequencies (balanced, skewed, or one class of 90-97%), and each teacher gives it
with probability ``agreement`` (strong, weak or none), else its favourite class with a
smaller probability (teachers trained on different data lean to a class), else a class
drawn from the frequencies; some teachers abstain (-1). Shapes are wide, tall, square and
near-square, with 2 to 1,000 classes (a count of 1,000 or more is a vocabulary: some
examples name it with ``--num-classes``). The file is saved in either layout and read with
``--format auto`` (from the file, streamed from it, and as an array in memory): the outcome
is the layout it was saved in or an :class:`InputError`, never the other layout.

The statistic itself is held to a per-group count written out plainly, and its chance level
to labels drawn independently of their groups, which must stay below it.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any
from unittest import mock

import numpy as np
import pytest
from hypothesis import event, given
from hypothesis import strategies as st

from pate_cli import votes as votes_module
from pate_cli.errors import ExitCode, InputError
from pate_cli.votes import load_votes
from pate_cli.votes.layout import MAX_RATIO, MIN_EXCESS, layout_evidence
from tests.conftest import MNIST_LABELS, run_cli


@dataclass(frozen=True)
class Saved:
    labels: np.ndarray  # (M, Q), as the teachers made them
    transposed: bool  # saved queries x teachers
    num_classes: int | None  # --num-classes, when the example names its vocabulary

    @property
    def array(self) -> np.ndarray:
        return np.ascontiguousarray(self.labels.T if self.transposed else self.labels)


def make_labels(
    rng: np.random.Generator,
    shape: tuple[int, int],
    frequencies: np.ndarray,
    agreement: float,
    lean: float,
    abstain: float,
) -> np.ndarray:
    teachers, queries = shape
    classes = len(frequencies)
    truth = rng.choice(classes, size=queries, p=frequencies)
    favourite = rng.integers(0, classes, size=teachers)
    other = rng.choice(classes, size=shape, p=frequencies)
    draw = rng.random(shape)
    labels = np.where(draw < agreement, truth[None, :], other)
    leans = (draw >= agreement) & (draw < agreement + lean)
    labels = np.where(leans, favourite[:, None], labels)
    labels[rng.random(shape) < abstain] = -1
    return labels


def log_uniform(rng: np.random.Generator, low: int, high: int) -> int:
    return int(np.exp(rng.uniform(np.log(low), np.log(high + 1))))


@st.composite
def saved_votes(draw: st.DrawFn) -> Saved:
    # Hypothesis draws the kind of file; sizes come spread in log scale from its seed (its
    # own integers crowd at the small end, where nothing can be decided).
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
    teachers = log_uniform(rng, 2, 250) if draw(st.booleans()) else log_uniform(rng, 50, 250)
    shape = draw(st.sampled_from(["wide", "tall", "square", "near-square"]))
    queries = {
        "wide": lambda: log_uniform(rng, teachers, 800),
        "tall": lambda: log_uniform(rng, 2, teachers),
        "square": lambda: teachers,
        "near-square": lambda: max(2, teachers + int(rng.integers(-3, 4))),
    }[shape]()
    many = draw(st.sampled_from(["few classes", "few classes", "many classes"]))
    classes = log_uniform(rng, 2, 12) if many == "few classes" else log_uniform(rng, 13, 1000)
    skew = draw(st.sampled_from(["balanced", "skewed", "one class"]))
    if skew == "balanced":
        frequencies = np.full(classes, 1 / classes)
    elif skew == "skewed":
        frequencies = rng.dirichlet(np.full(classes, 0.3))
    else:
        top = draw(st.sampled_from([0.9, 0.97]))
        frequencies = np.full(classes, (1 - top) / (classes - 1))
        frequencies[0] = top
    strength = draw(st.sampled_from(["strong", "strong", "weak", "none"]))
    agreement = {"strong": (0.7, 1.0), "weak": (0.1, 0.5), "none": (0.0, 0.0)}[strength]
    agree = float(rng.uniform(*agreement))
    # Teachers that lean to a class, less than they agree; or do not lean.
    lean = float(rng.uniform(0, agree / 2)) if draw(st.booleans()) else 0.0
    abstain = draw(st.sampled_from([0.0, 0.0, 0.1, 0.5]))
    labels = make_labels(rng, (teachers, queries), frequencies, agree, lean, abstain)
    event(f"{shape}, {strength} agreement, {skew}")
    largest = int(labels.max()) + 1
    vocabulary = draw(st.booleans()) and largest > min(teachers, queries)
    return Saved(labels, draw(st.booleans()), max(classes, largest) if vocabulary else None)


def histogram(labels: np.ndarray, num_classes: int) -> np.ndarray:
    """The (Q, C) counts of (M, Q) labels, -1 counted nowhere."""
    counts = np.zeros((labels.shape[1], num_classes))
    teacher, query = np.nonzero(labels >= 0)
    np.add.at(counts, (query, labels[teacher, query]), 1)
    return counts


@pytest.fixture(scope="module")
def scratch(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("layout_evidence")


def read(case: Saved, path: Path, how: str) -> Any:
    kwargs: dict[str, Any] = {} if case.num_classes is None else {"num_classes": case.num_classes}
    limits = {"STREAM_MIN_ROWS": 2 if how == "streamed" else votes_module.STREAM_MIN_ROWS}
    with mock.patch.multiple(  # type: ignore[arg-type]
        votes_module, _BLOCK_ROWS=97, _BLOCK_CELLS=4096, **limits
    ):
        try:
            return load_votes(case.array if how == "in memory" else path, **kwargs)
        except InputError as error:
            assert "\n" not in error.message
            return None


@given(saved_votes(), st.sampled_from(["whole", "streamed", "in memory"]))
def test_labels_read_in_their_layout_or_refused(scratch: Path, case: Saved, how: str) -> None:
    path = scratch / "labels.npy"
    path.unlink(missing_ok=True)
    np.save(path, case.array)
    votes = read(case, path, how)
    event("refused" if votes is None else f"read as {votes.layout}")
    if votes is None:
        return
    sums = case.array.sum(axis=1)
    if votes.format.value == "counts":  # the documented limit: rows sharing a positive sum
        assert case.array.min() >= 0 and sums[0] > 0 and np.all(sums == sums[0])
        return
    assert votes.transposed == case.transposed, "read in the other layout"
    assert (votes.num_teachers, votes.num_queries) == case.labels.shape
    classes = case.num_classes or int(case.labels.max()) + 1
    np.testing.assert_array_equal(np.asarray(votes.counts), histogram(case.labels, classes))


def test_the_2017_labels_decide_their_layout_by_far() -> None:
    votes = load_votes(MNIST_LABELS)
    evidence = votes.layout_evidence
    assert evidence is not None and evidence.layout is False
    query, teacher = evidence.axes(False)
    # The columns agree beyond chance ten times the margin asked; the rows not at all.
    assert query.excess > 2 * MIN_EXCESS and teacher.lam < MAX_RATIO * query.excess / 100


def test_weak_agreement_over_imbalanced_classes_is_refused(tmp_path: Path) -> None:
    """Nine labels in ten of one class and teachers that agree weakly: both axes' groups
    mostly vote for that class, so the labels do not tell the layouts apart."""
    frequencies = np.full(10, 0.1 / 9)
    frequencies[0] = 0.9
    rng = np.random.default_rng(11)
    labels = make_labels(rng, (250, 1000), frequencies, agreement=0.4, lean=0.0, abstain=0.0)
    path = tmp_path / "weak.npy"
    np.save(path, labels)
    result = run_cli(["analyze", path, "--sigma", 40, "--delta", 1e-5], expect=ExitCode.BAD_INPUT)
    assert "the labels do not decide it: they agree by column" in result.stderr
    # The same teachers agreeing strongly are read.
    rng = np.random.default_rng(11)
    labels = make_labels(rng, (250, 1000), frequencies, agreement=0.95, lean=0.0, abstain=0.0)
    np.save(path, labels)
    source = run_cli(["inspect", path, "--json"]).json["input"]
    assert (source["layout"], source["num_teachers"]) == ("teachers x queries", 250)


def test_token_ids_need_their_vocabulary(tmp_path: Path) -> None:
    """Labels of token ids: without --num-classes, exit 2 naming it; with it, the same
    figures as the votes held as a sparse queries x vocabulary matrix."""
    import scipy.sparse

    rng = np.random.default_rng(5)
    teachers, queries, vocabulary = 64, 1000, 50_257
    truth = rng.integers(0, vocabulary, size=queries)
    labels = np.where(
        rng.random((teachers, queries)) < 0.8,
        truth,
        rng.integers(0, vocabulary, (teachers, queries)),
    )
    path = tmp_path / "tokens.npy"
    np.save(path, labels)
    refused = run_cli(["analyze", path, "--sigma", 40, "--delta", 1e-5], expect=2)
    assert refused.stderr.count("\n") == 1
    assert f"labels imply {int(labels.max()) + 1} classes" in refused.stderr
    assert "pass --num-classes V with its size" in refused.stderr
    args = ["--sigma", 40, "--delta", 1e-5, "--no-release", "--json"]
    read = run_cli(["analyze", path, "--num-classes", vocabulary, *args]).json
    assert (read["input"]["num_teachers"], read["input"]["num_classes"]) == (64, vocabulary)
    assert read["input"]["num_classes_from"] == "given"
    sparse_path = tmp_path / "tokens_sparse.npz"
    scipy.sparse.save_npz(
        sparse_path, scipy.sparse.csr_matrix(histogram(labels, vocabulary)), compressed=True
    )
    sparse = run_cli(["analyze", sparse_path, *args]).json
    for key in ("data_dependent", "data_independent"):
        assert read[key]["epsilon"] == pytest.approx(sparse[key]["epsilon"], rel=1e-12)


# --- the statistic ---------------------------------------------------------------------------


def lambda_of_groups(groups: list[np.ndarray], num_classes: int) -> float:
    """Goodman and Kruskal's lambda, a group at a time: (sum of plurality counts - the
    largest class count) / (labels - the largest class count)."""
    total = np.zeros(num_classes, dtype=int)
    plurality = 0
    for group in groups:
        voted = group[group >= 0]
        counts = np.bincount(voted, minlength=num_classes)
        plurality += int(counts.max()) if voted.size else 0
        total += counts
    most = int(total.max())
    room = int(total.sum()) - most
    return (plurality - most) / room if room else 0.0  # one class: nothing to explain


@given(
    st.integers(0, 2**32 - 1),
    st.integers(1, 30),
    st.integers(1, 30),
    st.integers(2, 40),
    st.integers(1, 7),
)
def test_lambda_is_counted_as_written(seed: int, rows: int, columns: int, classes: int, cut: int):
    rng = np.random.default_rng(seed)
    labels = rng.integers(-1, classes, size=(rows, columns))
    labels[0, 0] = 0
    labels[-1, -1] = classes - 1  # two classes at least
    # Blocks of any size give the same figures (histogrammed or sorted alike).
    by_rows = [labels[i : i + cut] for i in range(0, rows, cut)]
    by_columns = [labels[:, j : j + cut] for j in range(0, columns, cut)]
    evidence = layout_evidence(by_rows, by_columns, classes)
    assert evidence.by_row.lam == pytest.approx(lambda_of_groups(list(labels), classes))
    assert evidence.by_column.lam == pytest.approx(lambda_of_groups(list(labels.T), classes))


@pytest.mark.parametrize(
    ("shape", "classes", "top"),
    [((250, 1000), 10, None), ((20, 40), 2, None), ((100, 120), 10, 0.9), ((5, 300), 50, None)],
)
def test_chance_bounds_lambda_of_labels_that_follow_the_frequencies(
    shape: tuple[int, int], classes: int, top: float | None
) -> None:
    """Labels drawn from the class frequencies alone, whatever their group: 200 files, and
    no axis's lambda above its chance level (which only 1e-6 of them may pass)."""
    rng = np.random.default_rng(17)
    frequencies = np.full(classes, 1 / classes)
    if top is not None:
        frequencies = np.full(classes, (1 - top) / (classes - 1))
        frequencies[0] = top
    worst = -1.0
    for _ in range(200):
        labels = rng.choice(classes, size=shape, p=frequencies)
        evidence = layout_evidence([labels], [labels], classes)
        for axis in (evidence.by_row, evidence.by_column):
            worst = max(worst, axis.lam - axis.chance)
    assert worst < 0

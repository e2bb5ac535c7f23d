"""Labels read one way or refused: the layout a user holds, or exit 2, never the other one.

A labels array of R rows and K columns is R teachers x K queries (the documented layout, the
2017 ``mnist_250_teachers_labels.npy``) or K teachers x R queries saved queries x teachers
(what a script stacking each query's votes writes). Whatever its shape, both are plausible
whenever labels are (``pate_cli.votes.detection``), so:

- without ``--format`` or ``--teachers`` the labels decide it where they agree by query far
  more than by teacher (``pate_cli.votes.layout``), else the array is refused, naming both
  readings (``tests/test_layout_evidence.py`` holds the decision to generated PATE votes);
- ``--teachers M`` picks the layout of M teachers; M matching neither is exit 2, never a note;
- ``--format labels`` alone states the documented layout (so does it with ``--teachers``
  naming both axes of a square array).

Hypothesis draws labels over shapes (wider, taller, square), both layouts and the flags a
user may pass, through the in-memory and the block-by-block reader and as an array in
memory: the outcome is the reading the user holds or an :class:`InputError`. The command
line's exact words are pinned through ``run_cli`` below.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from unittest import mock

import numpy as np
import pytest
from hypothesis import event, example, given
from hypothesis import strategies as st

from pate_cli import votes as votes_module
from pate_cli.errors import ExitCode, InputError
from pate_cli.votes import VoteFormat, load_votes
from tests.conftest import MNIST_LABELS, run_cli

FLAGS = (
    "none",
    "teachers",
    "format labels",
    "format labels and teachers",
    "teachers of neither layout",
    "format labels and teachers of neither layout",
)


def histogram(labels: np.ndarray) -> np.ndarray:
    """The (Q, C) counts of (M, Q) labels, a vote at a time; C = largest label + 1; -1 is none."""
    counts = np.zeros((labels.shape[1], max(int(labels.max()), 0) + 1))
    for teacher, query in zip(*np.nonzero(labels >= 0), strict=True):
        counts[query, labels[teacher, query]] += 1
    return counts


@dataclass(frozen=True)
class Held:
    """Labels as their user holds them, the array as saved, and the flags passed."""

    labels: np.ndarray  # (M, Q)
    transposed: bool  # saved queries x teachers
    flags: str

    @property
    def saved(self) -> np.ndarray:
        return np.ascontiguousarray(self.labels.T if self.transposed else self.labels)

    @property
    def square(self) -> bool:
        return self.labels.shape[0] == self.labels.shape[1]

    @property
    def kwargs(self) -> dict[str, Any]:
        neither = max(self.labels.shape) + 1  # the teachers of no layout
        return {
            "none": {},
            "teachers": {"teachers": self.labels.shape[0]},
            "format labels": {"fmt": "labels"},
            "format labels and teachers": {"fmt": "labels", "teachers": self.labels.shape[0]},
            "teachers of neither layout": {"teachers": neither},
            "format labels and teachers of neither layout": {"fmt": "labels", "teachers": neither},
        }[self.flags]


@st.composite
def held(draw: st.DrawFn) -> Held:
    teachers, queries = draw(st.integers(1, 12)), draw(st.integers(1, 12))
    # Plausible labels: no more classes than teachers or queries (README, "Inputs").
    classes = draw(st.integers(1, min(teachers, queries)))
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
    labels = rng.integers(0, classes, size=(teachers, queries))
    if draw(st.booleans()):  # some teachers abstain on some queries
        labels[rng.random(labels.shape) < 0.2] = -1
    transposed = draw(st.booleans())
    flags = draw(st.sampled_from(FLAGS))
    # --format labels states the (teachers, queries) layout, unless --teachers names the
    # other axis alone: a user holding the other layout passes --teachers with it, and
    # cannot pass it at all for a square array (no count tells its axes apart).
    if transposed and flags in ("format labels", "format labels and teachers"):
        if teachers == queries:
            flags = "teachers" if flags.endswith("teachers") else "none"
        else:
            flags = "format labels and teachers"
    return Held(labels, transposed, flags)


def outcome(
    array: np.ndarray, path: Path, how: str, kwargs: dict[str, Any]
) -> votes_module.Votes | None:
    """``load_votes`` of the array, from its file (read whole or streamed) or in memory."""
    limits = {"STREAM_MIN_ROWS": 2 if how == "streamed" else votes_module.STREAM_MIN_ROWS}
    with mock.patch.multiple(votes_module, _BLOCK_ROWS=3, **limits):  # type: ignore[arg-type]
        try:
            return load_votes(array if how == "in memory" else path, **kwargs)
        except InputError as error:
            assert isinstance(error, ValueError) and "\n" not in error.message
            return None


def counts_outright(array: np.ndarray) -> bool:
    """Whole values whose rows all share a positive sum: counts (README, the one exception)."""
    sums = array.sum(axis=1)
    return bool(array.min() >= 0 and sums[0] > 0 and np.all(sums == sums[0]))


@pytest.fixture(scope="module")
def scratch(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("layout")


def issue_labels() -> np.ndarray:
    """The issue's labels: 250 teachers x 100 queries of 10 classes (saved 100 x 250)."""
    rng = np.random.default_rng(3)
    truth = rng.integers(0, 10, size=100)
    return np.where(rng.random((250, 100)) < 0.7, truth, rng.integers(0, 10, (250, 100)))


@given(held(), st.sampled_from(["whole", "streamed", "in memory"]))
@example(Held(issue_labels(), True, "teachers"), "whole")
@example(Held(issue_labels(), True, "none"), "streamed")
@example(Held(issue_labels(), True, "teachers of neither layout"), "whole")
@example(Held(issue_labels().T.copy(), True, "format labels and teachers"), "streamed")
def test_labels_read_as_held_or_refused(scratch: Path, case: Held, how: str) -> None:
    path = scratch / "labels.npy"
    path.unlink(missing_ok=True)
    np.save(path, case.saved)
    votes = outcome(case.saved, path, how, case.kwargs)
    event(f"{case.flags}: {'refused' if votes is None else 'read as ' + votes.layout}")
    if votes is None:
        # Refused where nothing else may be done: no flag, a --teachers of neither layout,
        # or a reading that counts share (auto); never a reading the flags settle.
        assert not (case.flags.startswith("format labels") and "neither" not in case.flags)
        return
    assert "neither" not in case.flags or votes.format is VoteFormat.COUNTS, "a labels reading"
    if votes.format is VoteFormat.COUNTS:
        # Auto only: rows sharing a sum are counts (documented), and so is an array that a
        # --teachers of neither layout leaves as counts (its meaning for counts).
        assert not case.flags.startswith("format labels")
        assert "neither" in case.flags or counts_outright(case.saved)
        np.testing.assert_array_equal(np.asarray(votes.counts), case.saved)
        return
    assert (votes.num_teachers, votes.num_queries) == case.labels.shape
    if case.flags == "none":  # the layout the labels decided: the one held, square or not
        assert votes.transposed == case.transposed
    else:
        assert votes.transposed == (case.transposed and not case.square)
    np.testing.assert_array_equal(np.asarray(votes.counts), histogram(case.labels))
    assert not any("teachers but" in w for w in votes.warnings), votes.warnings


# --- the command line's words --------------------------------------------------------------


@pytest.fixture
def issue_file(tmp_path: Path) -> str:
    """100 queries x 250 teachers of 10 classes: a file saved queries x teachers."""
    path = tmp_path / "stacked.npy"
    np.save(path, np.ascontiguousarray(issue_labels().T))
    return str(path)


@pytest.fixture
def noise_file(tmp_path: Path) -> str:
    """100 x 250 labels of 10 classes that agree on nothing: their layout is not decided."""
    path = tmp_path / "noise.npy"
    np.save(path, np.random.default_rng(5).integers(0, 10, size=(100, 250)))
    return str(path)


BOTH = (
    "cannot tell the format: it could be labels of 100 teachers x 250 queries (10 classes; "
    "pass --format labels), or labels of 250 teachers x 100 queries saved as queries x "
    "teachers (10 classes; pass --format labels --teachers 250); the labels do not decide it: "
)


def one_error_line(args: list[Any]) -> str:
    result = run_cli(args, expect=ExitCode.BAD_INPUT)
    assert result.stdout == "" and result.stderr.count("\n") == 1, result.stderr
    return result.stderr.rstrip("\n")


def test_labels_stacked_query_by_query_read_as_held(issue_file: str) -> None:
    """The 100 x 250 file the refusal rule was made for: its teachers agree by row, so it is
    read as 250 teachers x 100 queries, and says why."""
    out = run_cli(["analyze", issue_file, "--sigma", 40, "--delta", 1e-5, "--json"]).json
    source = out["input"]
    assert (source["layout"], source["num_teachers"], source["num_queries"]) == (
        "queries x teachers",
        250,
        100,
    )
    assert out["warnings"][0] == (
        f"{issue_file}: read as labels saved queries x teachers (100 queries x 250 teachers): "
        "their teachers agree on each query (lambda 0.688, chance 0.108), not across one "
        "teacher's queries (0.013)"
    )


def test_inspect_lists_the_readings_it_weighed(issue_file: str) -> None:
    out = run_cli(["inspect", issue_file, "--json"]).json
    assert (out["reading"], out["refusal"]) == (1, None)
    documented, held = out["readings"]
    assert (documented["taken"], held["taken"]) == (False, True)
    assert (held["layout"], held["num_teachers"], held["num_queries"]) == (
        "queries x teachers",
        250,
        100,
    )
    assert held["pick"] == {"format": "labels", "teachers": 250}
    assert documented["pick"] == {"format": "labels"}
    # One layout's agreement by query is the other's by teacher.
    assert held["agreement"]["by_query"] == documented["agreement"]["by_teacher"]
    assert held["agreement"]["by_query"]["lambda"] == pytest.approx(0.6877, abs=1e-4)
    assert held["agreement"]["by_teacher"]["lambda"] == pytest.approx(0.0129, abs=1e-4)
    (row,) = [
        line for line in run_cli(["inspect", issue_file]).stdout.splitlines() if " read " in line
    ]
    cells = [cell.strip() for cell in row.split("│")[1:-1]]
    assert cells[:6] == [
        "read",
        "labels, queries x teachers",
        "250",
        "100",
        "10",
        "0.688 (chance 0.108)",
    ]


def test_inspect_describes_labels_that_read_both_ways(noise_file: str) -> None:
    """A file the labels do not decide: exit 0 from inspect, listing both readings, what
    picks each and why no command reads it; exit 2 from the rest, with the same words."""
    refusal = one_error_line(["analyze", noise_file, "--sigma", 40, "--delta", 1e-5])
    assert refusal.startswith(f"pate: error: {noise_file}: {BOTH}")
    out = run_cli(["inspect", noise_file, "--json"]).json
    assert (out["reading"], out["top_share"], out["plurality_counts"]) == (None, None, None)
    assert f"pate: error: {out['refusal']}" == refusal
    source = out["input"]
    assert (source["format"], source["num_queries"], source["shape"]) == (None, None, [100, 250])
    assert source["sha256"] == hashlib.sha256(Path(noise_file).read_bytes()).hexdigest()
    assert [(r["num_teachers"], r["num_queries"], r["pick"]) for r in out["readings"]] == [
        (100, 250, {"format": "labels"}),
        (250, 100, {"format": "labels", "teachers": 250}),
    ]
    table = " ".join(run_cli(["inspect", noise_file]).stdout.split())
    assert "no reading taken" in table and "--format labels --teachers 250" in table


@pytest.mark.parametrize("fmt", [[], ["--format", "labels"]], ids=["auto", "labels"])
def test_teachers_picks_the_layout_of_that_many_teachers(issue_file: str, fmt: list[str]) -> None:
    out = run_cli(["inspect", issue_file, "--teachers", 250, *fmt, "--json"]).json
    source = out["input"]
    assert (source["format"], source["format_detected"]) == ("labels", not fmt)
    assert (source["layout"], source["num_teachers"], source["num_queries"]) == (
        "queries x teachers",
        250,
        100,
    )
    assert (
        out["plurality_counts"]
        == np.bincount(histogram(issue_labels()).argmax(axis=1), minlength=10).tolist()
    )
    assert out["warnings"] == [
        f"{issue_file}: read as labels saved queries x teachers (100 queries x 250 teachers), "
        "the axis --teachers 250 names"
    ]
    table = run_cli(["inspect", issue_file, "--teachers", 250, *fmt])
    assert "100 queries x 10 classes (largest label + 1), 250 teachers" in " ".join(
        table.stdout.split()
    )
    as_saved = run_cli(["inspect", issue_file, "--teachers", 100, *fmt, "--json"]).json
    assert (as_saved["input"]["layout"], as_saved["input"]["num_teachers"]) == (
        "teachers x queries",
        100,
    )
    assert as_saved["input"]["num_queries"] == 250 and as_saved["warnings"] == []


NEITHER = (
    "--teachers 300 matches neither layout of the labels: 100 teachers x 250 queries as saved "
    "(--teachers 100), or 250 teachers x 100 queries saved as queries x teachers (--teachers "
    "250)"
)


def test_teachers_of_neither_layout_is_exit_2(issue_file: str) -> None:
    line = one_error_line(["inspect", issue_file, "--teachers", 300, "--format", "labels"])
    assert line == f"pate: error: {issue_file}: {NEITHER}"
    # Auto names the counts reading that --teachers 300 refutes too.
    line = one_error_line(["inspect", issue_file, "--teachers", 300])
    assert line == (
        f"pate: error: {issue_file}: {NEITHER}; as counts, votes row 0 sums to 1729, more "
        "than --teachers 300"
    )


def test_the_library_spells_its_parameters(issue_file: str, noise_file: str) -> None:
    with pytest.raises(InputError) as excinfo:
        load_votes(issue_file, fmt="labels", teachers=300)
    assert isinstance(excinfo.value, ValueError)
    assert str(excinfo.value) == (
        f"{issue_file}: teachers=300 matches neither layout of the labels: 100 teachers x 250 "
        "queries as saved (teachers=100), or 250 teachers x 100 queries saved as queries x "
        "teachers (teachers=250)"
    )
    with pytest.raises(InputError, match="pass format='labels', teachers=250"):
        load_votes(noise_file)
    votes = load_votes(np.load(issue_file), teachers=250)
    assert (votes.layout, votes.num_teachers, votes.num_queries) == ("queries x teachers", 250, 100)


def test_the_2017_labels_read_as_their_teachers(tmp_path: Path) -> None:
    """250 x 9000 could as well be 9000 teachers x 250 queries by its sizes; its labels say
    which, with no flag, and --teachers 250 says the same. Saved transposed it reads the
    same, never as 9000 teachers."""
    path = str(MNIST_LABELS)
    transposed = tmp_path / "transposed.npy"
    np.save(transposed, np.load(path).T)
    for args in ([path], [path, "--teachers", 250], [transposed]):
        out = run_cli(["inspect", *args, "--json"]).json
        source = out["input"]
        assert (source["format"], source["format_detected"]) == ("labels", True)
        assert (source["num_teachers"], source["num_queries"]) == (250, 9000)
        assert (source["num_classes"], source["num_classes_from"]) == (10, "largest label")
    documented = run_cli(["inspect", path, "--json"]).json
    assert documented["input"]["layout"] == "teachers x queries" and documented["reading"] == 0
    by_query = documented["readings"][0]["agreement"]["by_query"]
    assert by_query["lambda"] == pytest.approx(0.6785, abs=1e-4)
    assert by_query["chance"] == pytest.approx(0.0723, abs=1e-4)


def test_a_square_array_is_not_picked_by_a_count(tmp_path: Path) -> None:
    labels = np.array([[1, 2, 0], [0, 0, 2], [2, 1, 1]])
    path = tmp_path / "square.npy"
    np.save(path, labels)
    line = one_error_line(["analyze", path, "--teachers", 3, "--sigma", 40, "--delta", 1e-5])
    assert line == (
        f"pate: error: {path}: cannot tell the format: it could be labels of 3 teachers x 3 "
        "queries (3 classes; pass --format labels), or labels of 3 teachers x 3 queries saved "
        "as queries x teachers (3 classes; save the array transposed, as (teachers, queries))"
    )
    assert one_error_line(["inspect", path, "--format", "labels", "--teachers", 4]) == (
        f"pate: error: {path}: --teachers 4 does not match the labels: 3 teachers x 3 queries "
        "(--teachers 3)"
    )
    given_labels = run_cli(["inspect", path, "--format", "labels", "--teachers", 3, "--json"])
    assert given_labels.json["input"]["layout"] == "teachers x queries"


@pytest.mark.parametrize(
    "command",
    [
        ["analyze", "--sigma", 40, "--delta", 1e-5],
        ["smooth-sensitivity", "--sigma", 40, "--delta", 1e-5, "--queries", 300],
        ["compare", "--sigma", "30,40", "--delta", 1e-5],
        ["aggregate", "--sigma", 40, "--delta", 1e-5, "--seed", 3],
    ],
    ids=lambda command: command[0],
)
def test_the_commands_read_the_2017_labels_without_a_flag(command: list[Any], tmp_path: Path):
    name, *flags = command
    output = ["--output", tmp_path / "labels.npy"] if name == "aggregate" else []
    table = run_cli([name, MNIST_LABELS, *flags, *output])
    assert "format labels (detected, 250 teachers x 9000 queries)" in " ".join(table.stdout.split())

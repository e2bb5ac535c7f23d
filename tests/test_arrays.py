"""Votes and side inputs given as arrays in memory: read exactly as the same array saved to
a file, through the public names only (``import pate_cli as pate``)."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import pate_cli as pate

ROOT = Path(__file__).resolve().parent.parent
SAMPLES = ROOT / "sample_data"

COUNTS = np.load(SAMPLES / "mnist_250_teachers.npy")[:120]
LABELS = np.load(SAMPLES / "mnist_250_teachers_labels.npy")[:40, :100].astype(np.int64)
LABELS[::7, ::5] = -1  # abstaining teachers
PROBS = np.random.default_rng(0).random((20, 30, 5))
ARRAYS = {"counts": COUNTS, "labels": LABELS, "probs": PROBS}
GNMAX = pate.GNMax(sigma=4.0)
CONFIDENT = pate.ConfidentGNMax(threshold=30.0, sigma1=15.0, sigma=5.0)

# How each kind is read: labels read both ways (40 x 100), so teachers= picks the layout.
READING: dict[str, dict[str, Any]] = {"counts": {}, "labels": {"teachers": 40}, "probs": {}}

# Each entry point, called on the votes (an array, or its file) and how to read them; seeds
# fix every draw.
CALLS: dict[str, Callable[..., Any]] = {
    "analyze-gnmax": lambda v, **r: pate.analyze(
        v, GNMAX, delta=1e-5, release="sample", seed=2, **r
    ),
    "analyze-confident": lambda v, **r: pate.analyze(
        v, CONFIDENT, delta=1e-5, release="sample", seed=2, **r
    ),
    "smooth_sensitivity": lambda v, **r: pate.smooth_sensitivity(v, GNMAX, delta=1e-5, seed=2, **r),
    "compare": lambda v, **r: pate.compare(v, [GNMAX, CONFIDENT], delta=1e-5, **r),
    "aggregate": lambda v, **r: pate.aggregate(v, CONFIDENT, delta=1e-5, seed=5, **r),
    "inspect": lambda v, **r: pate.inspect(v, **r),
}


def _save(tmp_path: Path, name: str, array: np.ndarray) -> str:
    path = tmp_path / name
    np.save(path, array)
    return str(path)


def _numbers(report: Any, path: str | None = None) -> tuple[dict[str, Any], dict[str, Any]]:
    """(everything but the input block, the input block) of a report's ``to_dict()``, as
    JSON would carry them; a file's path in a warning is written as the array's."""
    block = report.to_dict()
    given = block.pop("input")
    text = json.dumps(block, default=lambda o: np.asarray(o).tolist())
    if path is not None:
        text = text.replace(path, "<array>")
    return json.loads(text), given


@pytest.mark.parametrize("call", list(CALLS))
@pytest.mark.parametrize("kind", list(ARRAYS))
def test_an_array_and_its_file_give_the_same_numbers(kind: str, call: str, tmp_path: Path):
    array = ARRAYS[kind]
    path = _save(tmp_path, f"{kind}.npy", array)
    from_file, file_input = _numbers(CALLS[call](path, **READING[kind]), path)
    from_memory, memory_input = _numbers(CALLS[call](array, **READING[kind]))
    assert from_memory == from_file
    assert "source" not in file_input  # the command line's JSON is unchanged
    assert memory_input["source"] == "memory"
    assert memory_input["path"] == "<array>"
    shared = {k: v for k, v in file_input.items() if k not in ("path", "sha256")}
    assert {k: memory_input[k] for k in shared} == shared


def test_a_list_reads_as_its_array():
    votes = pate.load_votes(COUNTS[:10].tolist())
    np.testing.assert_array_equal(votes.counts, pate.load_votes(COUNTS[:10]).counts)


def test_the_input_block_says_memory_with_shape_dtype_and_digest():
    report = pate.analyze(LABELS, GNMAX, delta=1e-5, release=False, teachers=40)
    given = report.to_dict()["input"]
    expected = hashlib.sha256(b"<i8 (40, 100)\n" + LABELS.tobytes()).hexdigest()
    assert given["source"] == "memory"
    assert given["shape"] == [40, 100]
    assert given["dtype"] == "int64"
    assert given["sha256"] == expected
    assert given["format"] == "labels"


def test_the_digest_depends_on_dtype_and_shape():
    digests = {
        pate.load_votes(a, format="labels").sha256
        for a in (LABELS, LABELS.astype(np.int32), LABELS.reshape(20, 200))
    }
    assert len(digests) == 3


def test_repr_is_short_and_names_format_shape_and_digest():
    votes = pate.load_votes(PROBS)
    text = repr(votes)
    assert "Future" not in text and len(text) < 200
    assert "format=probs" in text and "(20, 30, 5)" in text and votes.sha256[:12] in text


def test_an_ambiguous_array_is_refused_as_its_file_is(tmp_path: Path):
    # Labels that agree on nothing: the data do not decide their layout.
    wide = np.random.default_rng(2).integers(0, 10, size=(250, 60))
    path = _save(tmp_path, "wide.npy", wide)
    with pytest.raises(pate.InputError) as from_file:
        pate.load_votes(path)
    with pytest.raises(pate.InputError) as from_memory:
        pate.load_votes(wide)
    assert "cannot tell the format" in str(from_memory.value)
    assert str(from_memory.value) == str(from_file.value).replace(path, "<array>")
    assert pate.load_votes(wide, format="labels").num_teachers == 250
    assert pate.load_votes(wide, fmt="labels", format="labels").format.value == "labels"


def test_labels_whose_layout_their_agreement_decides_read_as_their_file_does(tmp_path: Path):
    # 60 queries of the 2017 labels, saved queries x teachers: the teachers agree by row.
    tall = np.load(SAMPLES / "mnist_250_teachers_labels.npy")[:, :60].T.astype(np.int64)
    path = _save(tmp_path, "tall.npy", tall)
    from_file, from_memory = pate.load_votes(path), pate.load_votes(tall)
    for votes in (from_file, from_memory):
        assert (votes.layout, votes.num_teachers, votes.num_queries) == (
            "queries x teachers",
            250,
            60,
        )
    np.testing.assert_array_equal(np.asarray(from_file.counts), np.asarray(from_memory.counts))
    assert from_memory.warnings == tuple(w.replace(path, "<array>") for w in from_file.warnings)


def test_format_and_fmt_that_differ_are_a_usage_error():
    with pytest.raises(pate.UsageError, match="fmt='counts' and format='labels'"):
        pate.load_votes(LABELS, fmt="counts", format="labels")
    with pytest.raises(pate.UsageError, match="format='csv': expected one of"):
        pate.load_votes(LABELS, format="csv")


def test_selection_by_queries_and_an_array_of_indices():
    indices = np.array([5, 0, 17])
    votes = pate.load_votes(COUNTS, indices=indices, queries=2)
    np.testing.assert_array_equal(votes.counts, COUNTS[[5, 0]])
    with pytest.raises(pate.InputError, match=r"^<indices array>: index at position 1 is -1"):
        pate.load_votes(COUNTS, indices=[3, -1])


BAD = [
    pytest.param(np.array([[1, None]], dtype=object), "unsupported dtype object", id="object"),
    pytest.param([[1, 2], [3]], "not a rectangular array of numbers", id="ragged"),
    pytest.param(np.full((3, 2), np.nan), "is nan; expected finite", id="nan"),
    pytest.param(np.array([[1.0, np.inf], [1, 1]]), "is inf; expected finite", id="inf"),
    pytest.param(np.array([[-2.5, 1], [1, 1]]), "is -2.5; expected finite non-negative", id="neg"),
    pytest.param(np.ones(5), "array has 1 dimensions (5,)", id="1-d"),
    pytest.param(np.ones((2, 2, 2, 2)), "array has 4 dimensions", id="4-d"),
    pytest.param(np.ones((0, 3)), "votes array is empty, shape (0, 3)", id="0-rows"),
    pytest.param(np.array([["a"]]), "unsupported dtype <U1", id="strings"),
    pytest.param(np.ones((2, 2), dtype=complex), "unsupported dtype complex128", id="complex"),
    pytest.param(np.ones((2, 2), dtype=bool), "dtype bool", id="bool"),
]


@pytest.mark.parametrize(("array", "message"), BAD)
def test_a_bad_array_is_an_input_error_of_one_line(array: Any, message: str):
    with pytest.raises(pate.InputError) as excinfo:
        pate.analyze(array, GNMAX, delta=1e-5)
    text = str(excinfo.value)
    assert text.startswith("<array>: ") and "\n" not in text
    assert message in text


def test_negative_counts_under_format_counts():
    with pytest.raises(pate.InputError, match=r"row 0, column 1 is -1; expected finite non-neg"):
        pate.load_votes(np.array([[3, -1], [2, 2]]), format="counts")


def test_baseline_and_answered_as_arrays(tmp_path: Path):
    interactive = pate.InteractiveGNMax(threshold=30.0, sigma1=15.0, sigma=5.0)
    baseline = np.full(COUNTS.shape, 1 / COUNTS.shape[1])
    answered = np.arange(len(COUNTS)) % 3 == 0
    paths = {
        "baseline": _save(tmp_path, "baseline.npy", baseline),
        "answered": _save(tmp_path, "answered.npy", answered),
    }
    from_memory = pate.analyze(
        COUNTS, interactive, delta=1e-5, baseline=baseline, answered=answered, release=False
    )
    from_file = pate.analyze(COUNTS, interactive, delta=1e-5, release=False, **paths)
    assert _numbers(from_memory) == _numbers(from_file)
    assert from_memory.realized


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"baseline": np.ones((3, 10))}, "<baseline array>: baseline has shape (3, 10)"),
        ({"baseline": -np.ones(COUNTS.shape)}, "<baseline array>: baseline row 0, column 0 is"),
        ({"baseline": [[1, 2], [3]]}, "<baseline array>: not a rectangular array"),
        ({"answered": np.array([0, 2])}, "<answered mask array>: answered mask entry 1 is 2"),
        ({"answered": np.ones(500, bool)}, "<answered mask array>: answered mask has shape"),
        ({"answered": np.array([np.nan])}, "answered mask has dtype float64"),
    ],
)
def test_bad_side_arrays_are_input_errors(options: dict[str, Any], message: str):
    interactive = pate.InteractiveGNMax(threshold=30.0, sigma1=15.0, sigma=5.0)
    with pytest.raises(pate.InputError) as excinfo:
        pate.analyze(COUNTS, interactive, delta=1e-5, release=False, **options)
    assert message in str(excinfo.value) and "\n" not in str(excinfo.value)


def test_aggregate_student_probs_and_true_labels_as_arrays(tmp_path: Path):
    interactive = pate.InteractiveGNMax(threshold=30.0, sigma1=15.0, sigma=5.0)
    probs = np.full(COUNTS.shape, 1 / COUNTS.shape[1])
    truth = COUNTS.argmax(axis=1)
    paths = {
        "student_probs": _save(tmp_path, "probs.npy", probs),
        "true_labels": _save(tmp_path, "truth.npy", truth),
    }
    from_memory = pate.aggregate(
        COUNTS, interactive, delta=1e-5, seed=1, student_probs=probs, true_labels=truth
    )
    from_file = pate.aggregate(COUNTS, interactive, delta=1e-5, seed=1, **paths)
    assert _numbers(from_memory) == _numbers(from_file)
    with pytest.raises(pate.InputError, match="not a rectangular array"):
        pate.aggregate(COUNTS, interactive, delta=1e-5, student_probs=[[0.5, 0.5], [1]])


def test_verify_needs_files():
    with pytest.raises(pate.UsageError, match="^votes: expected the path of a file, not ndarray"):
        pate.verify(SAMPLES / "mnist_table2.record.json", votes=COUNTS)  # type: ignore[arg-type]

"""Student probabilities and true labels have one check, whether they come as a file or an array.

``pate.aggregate(..., student_probs=..., true_labels=...)`` takes a path or an array; both go
through ``pate_cli.votes.inputs.check_student_probs`` / ``check_true_labels``. The same array
saved to a .npy and passed in memory must give the same result, or the same error class with
the same one-line message after the name of the input (the file's path, or the
``<student_probs array>`` / ``<true_labels array>`` placeholder).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import pate_cli as pate
from pate_cli.reports.models import dumps
from pate_cli.votes import Votes, load_votes
from tests.conftest import MNIST, MNIST_INDICES, SAMPLE

M = 250  # teachers of the MNIST sample
QUERIES = 640
MECHANISM = pate.InteractiveGNMax(200, 150, 40)


@pytest.fixture(scope="module")
def votes() -> Votes:
    return load_votes(str(MNIST), queries=QUERIES)


@pytest.fixture(scope="module")
def probs() -> np.ndarray:
    """The sample student, one row per query of the votes file (9000 x 10, rows sum to 1)."""
    return np.load(SAMPLE / "mnist_student_probs.npy", allow_pickle=False)


@pytest.fixture(scope="module")
def truth() -> np.ndarray:
    """The plurality label of each query of the votes file, as true labels."""
    return np.load(MNIST, allow_pickle=False).argmax(axis=1)


def _changed(array: np.ndarray, index: Any, value: Any, dtype: Any = None) -> np.ndarray:
    out = np.array(array, dtype=dtype)
    out[index] = value
    return out


def _outcome(call: Callable[[], pate.AggregateResult], where: str) -> tuple[str, Any]:
    """("ok", the result as the JSON report), or (the error class, the message after
    ``where: ``), checking that the message is one line naming the input first."""
    try:
        result = call()
    except pate.PateError as error:
        message = str(error)
        assert "\n" not in message
        assert message.startswith(f"{where}: "), message
        return type(error).__name__, message[len(where) + 2 :]
    return "ok", json.loads(dumps(result.to_dict()))


def _both(
    tmp_path: Path, votes: Votes, keyword: str, array: np.ndarray, **extra: Any
) -> tuple[tuple[str, Any], tuple[str, Any]]:
    """The outcome of ``aggregate`` given ``array`` as a .npy file, then as an array."""
    path = tmp_path / f"{keyword}.npy"
    np.save(path, array)

    def call(value: object) -> Callable[[], pate.AggregateResult]:
        return lambda: pate.aggregate(
            votes, MECHANISM, delta=1e-5, seed=0, **{keyword: value}, **extra
        )

    from_file = _outcome(call(str(path)), str(path))
    from_array = _outcome(call(array), f"<{keyword} array>")
    return from_file, from_array


PROBS_CASES: dict[str, tuple[Callable[[np.ndarray], np.ndarray], str | None]] = {
    "valid": (lambda p: p[:QUERIES], None),
    "valid-file-rows": (lambda p: p, None),
    "scaled-by-M": (lambda p: p[:QUERIES] * M, None),
    "nan": (
        lambda p: _changed(p[:QUERIES], (3, 2), np.nan),
        "student_probs of query 3, class 2 is nan; expected finite non-negative probabilities",
    ),
    "negative": (
        lambda p: _changed(p[:QUERIES], (5, 1), -0.1),
        "student_probs of query 5, class 1 is -0.1; expected finite non-negative probabilities",
    ),
    "row-not-summing-to-1": (
        lambda p: _changed(p[:QUERIES], 7, p[7] / 2),
        "student_probs of query 7 sum to 0.5; expected every row to sum to 1 (or every row "
        f"to the number of teachers, {M})",
    ),
    "one-row-not-scaled-by-M": (
        lambda p: _changed(p[:QUERIES] * M, 9, p[9]),
        f"student_probs of query 0 sum to {M}; expected every row to sum to 1 (or every row "
        f"to the number of teachers, {M})",
    ),
    "wrong-shape": (
        lambda p: p[:QUERIES, :9],
        "student_probs has shape (640, 9) and dtype float64; expected numbers of shape "
        f"(9000, 10) like {MNIST}, or (640, 10) for the selected queries",
    ),
    "bool": (lambda p: p[:QUERIES] > 0.5, "student_probs has shape (640, 10) and dtype bool"),
}


@pytest.mark.parametrize("case", list(PROBS_CASES))
def test_student_probs_from_a_file_or_an_array(tmp_path, votes, probs, case):
    make, tail = PROBS_CASES[case]
    from_file, from_array = _both(tmp_path, votes, "student_probs", make(probs))
    assert from_file == from_array
    if tail is None:
        assert from_file[0] == "ok"
    else:
        assert from_file[0] == "InputError"
        assert from_file[1].startswith(tail)


def test_probabilities_scaled_by_m_are_the_probabilities(tmp_path, votes, probs):
    """The documented rule (``--baseline``: "its probabilities ... or M times them") for
    both: M times the probabilities draw the same labels at the same cost."""
    plain, _ = _both(tmp_path, votes, "student_probs", probs[:QUERIES])
    scaled_file, scaled_array = _both(tmp_path, votes, "student_probs", probs[:QUERIES] * M)
    assert plain[0] == "ok" and plain == scaled_file == scaled_array


LABELS_CASES: dict[str, tuple[Callable[[np.ndarray], np.ndarray], str | None]] = {
    "valid": (lambda t: t[:QUERIES], None),
    "valid-float": (lambda t: t[:QUERIES].astype(np.float64), None),
    "out-of-range": (
        lambda t: _changed(t[:QUERIES], 4, 10),
        "true_labels of query 4 is 10; expected an integer in [0, 10)",
    ),
    "fractional": (
        lambda t: _changed(t[:QUERIES], 4, 1.5, dtype=np.float64),
        "true_labels of query 4 is 1.5; expected an integer in [0, 10)",
    ),
    "negative": (
        lambda t: _changed(t[:QUERIES], 4, -1),
        "true_labels of query 4 is -1; expected an integer in [0, 10)",
    ),
    "nan": (
        lambda t: _changed(t[:QUERIES], 4, np.nan, dtype=np.float64),
        "true_labels of query 4 is nan; expected an integer in [0, 10)",
    ),
    "wrong-length": (
        lambda t: t[:17],
        "true_labels has shape (17,) and dtype int64; expected integer labels of shape "
        f"(9000,) or (640,), one per query of {MNIST}",
    ),
    "bool": (lambda t: t[:QUERIES] > 4, "true_labels has shape (640,) and dtype bool"),
}


@pytest.mark.parametrize("case", list(LABELS_CASES))
def test_true_labels_from_a_file_or_an_array(tmp_path, votes, probs, truth, case):
    make, tail = LABELS_CASES[case]
    from_file, from_array = _both(
        tmp_path, votes, "true_labels", make(truth), student_probs=probs[:QUERIES]
    )
    assert from_file == from_array
    if tail is None:
        assert from_file[0] == "ok" and from_file[1]["accuracy"] is not None
    else:
        assert from_file[0] == "InputError"
        assert from_file[1].startswith(tail)


def test_messages_name_the_row_given_when_the_votes_are_a_selection(tmp_path, probs, truth):
    """Rows of the votes file, with the votes' --indices applied: a message names the row of
    the array as given (the file's query), from a file as from an array."""
    selected = load_votes(str(MNIST), indices=str(MNIST_INDICES))
    assert selected.selection is not None
    row = int(selected.selection[7])
    bad_probs = _changed(probs, (row, 0), np.inf)
    from_file, from_array = _both(tmp_path, selected, "student_probs", bad_probs)
    assert from_file == from_array
    assert from_file[1].startswith(f"student_probs of query {row}, class 0 is inf;")
    bad_truth = _changed(truth, row, 11)
    from_file, from_array = _both(tmp_path, selected, "true_labels", bad_truth, student_probs=probs)
    assert from_file == from_array
    assert from_file[1].startswith(f"true_labels of query {row} is 11;")

"""The library under ``pate inspect`` and ``pate aggregate``: same numbers, no files, no CLI.

``inspect_votes`` and ``aggregate_votes`` are what the commands call; their reports'
``to_dict()`` must be exactly what the commands print with ``--json`` when called as the
commands call them (inside ``spelling.command_line()``; from Python only the warnings differ,
naming keywords where the commands name flags), a library call must write nothing, and
importing and calling them must not load the terminal libraries.
"""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap

import numpy as np
import pytest

from pate_cli.choices import Conversion
from pate_cli.common import spelling
from pate_cli.errors import ExitCode, InputError, UsageError
from pate_cli.jobs.aggregation import AggregateResult, aggregate_votes, check_parameters
from pate_cli.jobs.analysis import analysis_report
from pate_cli.jobs.inspection import inspect_votes
from pate_cli.mechanisms import ConfidentGNMax, GNMax, InteractiveGNMax, LNMax
from pate_cli.orders import parse_orders
from pate_cli.reports.models import dumps
from pate_cli.votes import load_votes
from tests.conftest import MNIST, MNIST_INDICES, MNIST_LABELS, ROOT, run_cli


def _plain(payload: dict) -> dict:
    """A report dictionary as the CLI prints it, parsed back."""
    return json.loads(dumps(payload))


@pytest.fixture(scope="module")
def mnist_640():
    return load_votes(str(MNIST), queries=640)


@pytest.fixture(scope="module")
def student_probs(mnist_640):
    """A student that agrees with the plurality on most queries, confidently."""
    counts = mnist_640.counts
    probs = np.full(counts.shape, 0.02)
    probs[np.arange(len(counts)), counts.argmax(axis=1)] = 0.82
    probs[::5] = np.random.default_rng(5).dirichlet(np.ones(10), size=len(probs[::5]))
    return probs


# ---------------------------------------------------------------------------
# inspect


@pytest.mark.parametrize(
    ("path", "flags", "selection"),
    [
        (MNIST, [], {}),
        (MNIST, ["--queries", 100], {"queries": 100}),
        (  # 250 x 9000 labels read both ways: --teachers 250 picks the layout
            MNIST_LABELS,
            ["--teachers", 250, "--indices", MNIST_INDICES, "--queries", 40],
            {"teachers": 250, "indices": str(MNIST_INDICES), "queries": 40},
        ),
    ],
    ids=["counts", "counts-queries", "labels-indices"],
)
def test_inspect_report_is_the_cli_json(path, flags, selection):
    report = inspect_votes(load_votes(str(path), **selection))
    cli = run_cli(["inspect", path, *flags, "--json"]).json
    assert _plain(report.to_dict()) == cli
    assert report.to_json_dict() == report.to_dict()


def test_inspect_of_an_npz_with_a_given_format(tmp_path):
    path = tmp_path / "votes.npz"
    np.savez(path, votes=np.array([[3, 1], [2, 2]], dtype=np.int16))
    report = inspect_votes(load_votes(str(path), fmt="counts"))
    assert report.dtype == "int16" and not report.input.detected
    assert (
        _plain(report.to_dict()) == run_cli(["inspect", path, "--format", "counts", "--json"]).json
    )


# ---------------------------------------------------------------------------
# aggregate: the library result is the command's JSON


def _cli_aggregate(tmp_path, args, mechanism_flags, extra=()):
    labels, mask = tmp_path / "labels.npy", tmp_path / "mask.npy"
    payload = run_cli(
        [
            "aggregate",
            *args,
            *mechanism_flags,
            "--seed",
            0,
            "--output",
            labels,
            "--answered-output",
            mask,
            "--json",
            *extra,
        ]
    ).json
    return payload, labels, mask


MNIST_640 = [MNIST, "--queries", 640, "--delta", 1e-5]


@pytest.mark.parametrize(
    ("mechanism", "flags"),
    [
        (GNMax(40.0), ["--sigma", 40]),
        (ConfidentGNMax(200.0, 150.0, 40.0), ["--threshold", 200, "--sigma1", 150, "--sigma", 40]),
        (LNMax(0.1), ["--gamma", 0.1]),
    ],
    ids=["gnmax", "confident-gnmax", "lnmax"],
)
def test_aggregate_result_is_the_cli_json(tmp_path, mnist_640, mechanism, flags):
    with spelling.command_line():
        result = aggregate_votes(mnist_640, mechanism, delta=1e-5, seed=0)
    cli, labels, mask = _cli_aggregate(tmp_path, MNIST_640, flags)
    assert _plain(result.to_dict(output=str(labels), answered_mask=str(mask))) == cli
    # From Python the same call gives the same result; only its warnings name keywords.
    python = aggregate_votes(mnist_640, mechanism, delta=1e-5, seed=0)
    payload = _plain(python.to_dict(output=str(labels), answered_mask=str(mask)))
    assert {k: v for k, v in payload.items() if k != "warnings"} == {
        k: v for k, v in cli.items() if k != "warnings"
    }
    note = (
        "anyone who knows the seed can recompute the noise; the outputs are not a private release"
    )
    assert cli["warnings"] == [f"--seed 0: {note} (use --seed-file, or no seed, for one)"]
    assert payload["warnings"] == [f"seed=0: {note} (use seed_file, or no seed, for one)"]
    assert np.array_equal(np.load(labels), result.labels) and result.labels.dtype == np.int64
    assert np.array_equal(np.load(mask), result.answered) and result.answered.dtype == bool


def test_interactive_with_probabilities_as_an_array_or_a_file(tmp_path, mnist_640, student_probs):
    probs_path = tmp_path / "probs.npy"
    np.save(probs_path, student_probs)
    mechanism = InteractiveGNMax(100.0, 50.0, 40.0)
    common = {"delta": 1e-5, "seed": 0, "student_confidence": 0.5}
    with spelling.command_line():
        from_array = aggregate_votes(mnist_640, mechanism, student_probs=student_probs, **common)
        from_file = aggregate_votes(mnist_640, mechanism, student_probs=str(probs_path), **common)
    flags = ["--threshold", 100, "--sigma1", 50, "--sigma", 40, "--student-probs", probs_path]
    cli, labels, mask = _cli_aggregate(tmp_path, MNIST_640, flags, ["--student-confidence", 0.5])
    for result in (from_array, from_file):
        assert _plain(result.to_dict(output=str(labels), answered_mask=str(mask))) == cli
    assert from_array.student_labelled > 0
    assert (
        from_array.num_answered + from_array.student_labelled + from_array.abstained
        == from_array.num_queries
    )


def test_lnmax_on_labels_with_a_selection_orders_and_true_labels(tmp_path):
    votes = load_votes(str(MNIST_LABELS), teachers=250, indices=str(MNIST_INDICES))
    truth = np.load(MNIST).argmax(axis=1)  # one per query of the file: selected like the votes
    truth_path = tmp_path / "truth.npy"
    np.save(truth_path, truth)
    call = {"delta": 1e-5, "seed": 0, "orders": np.arange(2, 10), "true_labels": truth}
    result = aggregate_votes(votes, LNMax(0.1), **call)
    assert result.accuracy == result.agreement_with_plurality
    args = [MNIST_LABELS, "--teachers", 250, "--indices", MNIST_INDICES, "--delta", 1e-5]
    args += ["--orders", "2:10:1"]
    cli, labels, mask = _cli_aggregate(
        tmp_path, args, ["--gamma", 0.1], ["--true-labels", truth_path]
    )
    with spelling.command_line():
        shown = aggregate_votes(votes, LNMax(0.1), **call)
    assert _plain(shown.to_dict(output=str(labels), answered_mask=str(mask))) == cli
    # From Python the warnings name the keywords the caller wrote.
    assert result.warnings[0].startswith("seed=0: anyone who knows the seed")
    edge = "the best order 9 is at the edge of the order grid; extend {} to be sure"
    assert any(warning.startswith(edge.format("orders")) for warning in result.warnings)
    assert any(warning.startswith(edge.format("--orders")) for warning in shown.warnings)


def test_stop_conditions_conversion_and_rounding(tmp_path, mnist_640):
    with spelling.command_line():
        result = aggregate_votes(
            mnist_640,
            ConfidentGNMax(200.0, 150.0, 40.0),
            delta=1e-5,
            seed=0,
            orders="2:64:0.5",
            conversion="improved",
            max_answered=50,
            half_even=True,
        )
    assert result.num_answered == 50 and result.num_seen < 640
    assert result.answered.shape == (result.num_seen,)
    assert np.all(result.labels[result.num_seen :] == -1)
    flags = ["--threshold", 200, "--sigma1", 150, "--sigma", 40]
    extra = ["--max-answered", 50, "--orders", "2:64:0.5", "--conversion", "improved"]
    cli, labels, mask = _cli_aggregate(tmp_path, MNIST_640, flags, [*extra, "--round-half-even"])
    assert _plain(result.to_dict(output=str(labels), answered_mask=str(mask))) == cli


def test_the_realised_cost_is_the_analysis_of_the_mask(mnist_640):
    mechanism = ConfidentGNMax(200.0, 150.0, 40.0)
    result = aggregate_votes(mnist_640, mechanism, delta=1e-5, seed=3)
    again = analysis_report(
        mnist_640, mechanism, parse_orders(None), 1e-5, Conversion.CLASSIC, answered=result.answered
    )
    assert again.data_dependent.epsilon == result.privacy.data_dependent.epsilon
    assert result.privacy.realized and not result.expected_privacy.realized


# ---------------------------------------------------------------------------
# aggregate: randomness


def test_a_generator_is_drawn_from_in_turn_and_a_seed_derives_its_own_streams(mnist_640):
    mechanism = ConfidentGNMax(200.0, 150.0, 40.0)
    seeded = aggregate_votes(mnist_640, mechanism, delta=1e-5, seed=7)
    drawn = aggregate_votes(mnist_640, mechanism, delta=1e-5, seed=np.random.default_rng(7))
    again = aggregate_votes(mnist_640, mechanism, delta=1e-5, seed=np.random.default_rng(7))
    assert np.array_equal(drawn.labels, again.labels)  # the caller's generator, reproducibly
    # A seed is not used as a generator's seed: each purpose derives its own stream from it.
    assert not np.array_equal(seeded.labels, drawn.labels)
    assert seeded.noise.public_seed == 7 and drawn.noise.public_seed is None
    payload = drawn.to_dict()
    # pate cannot vouch for a caller's generator: not reported as private, no seed shown.
    assert payload["noise"] == {"source": "generator", "private": False}
    assert payload["output"] is None and payload["answered_mask"] is None
    assert seeded.to_dict()["noise"] == {"source": "seed", "private": False, "seed": 7}


def test_without_a_seed_the_noise_is_private_and_a_seed_file_reproduces_the_run(
    mnist_640, tmp_path
):
    first = aggregate_votes(mnist_640, GNMax(40.0), delta=1e-5, max_queries=20)
    assert first.noise.source == "os-entropy" and first.noise.public_seed is None
    assert first.to_dict()["noise"] == {"source": "os-entropy", "private": True}
    seed_file = tmp_path / "run.seed"
    kept = aggregate_votes(mnist_640, GNMax(4.0), delta=1e-5, seed_file=seed_file)
    again = aggregate_votes(mnist_640, GNMax(4.0), delta=1e-5, seed_file=seed_file)
    assert np.array_equal(kept.labels, again.labels)
    assert kept.to_dict()["noise"] == {"source": "seed-file", "private": True}


def test_result_arrays_are_read_only(mnist_640):
    result = aggregate_votes(mnist_640, GNMax(40.0), delta=1e-5, seed=0)
    assert isinstance(result, AggregateResult)
    for array in (result.labels, result.answered):
        with pytest.raises(ValueError):
            array[0] = array[0]


# ---------------------------------------------------------------------------
# No files, no terminal libraries


def test_library_calls_write_no_file(tmp_path, monkeypatch, mnist_640, student_probs):
    monkeypatch.chdir(tmp_path)
    inspect_votes(load_votes(str(MNIST), queries=640))
    aggregate_votes(mnist_640, ConfidentGNMax(200.0, 150.0, 40.0), delta=1e-5, seed=0)
    aggregate_votes(
        mnist_640,
        InteractiveGNMax(100.0, 50.0, 40.0),
        delta=1e-5,
        seed=0,
        student_probs=student_probs,
        student_confidence=0.5,
    )
    assert list(tmp_path.iterdir()) == []


def test_importing_and_calling_loads_no_terminal_library():
    code = textwrap.dedent(
        f"""
        import sys
        import pate_cli.jobs.aggregation as aggregate_run
        import pate_cli.jobs.inspection as inspection
        from pate_cli.mechanisms import ConfidentGNMax
        from pate_cli.votes import load_votes

        votes = load_votes({str(MNIST)!r}, queries=200)
        inspection.inspect_votes(votes).to_dict()
        result = aggregate_run.aggregate_votes(
            votes, ConfidentGNMax(200.0, 150.0, 40.0), delta=1e-5, seed=0
        )
        result.to_dict()
        loaded = {{"typer", "rich", "click", "matplotlib"}} & {{
            name.split(".")[0] for name in sys.modules
        }}
        print(sorted(loaded))
        """
    )
    done = subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, check=False
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "[]"


# ---------------------------------------------------------------------------
# Errors: raised, never printed; named as the caller wrote them (a keyword, or the
# command line's flag)


@pytest.mark.parametrize(
    ("kwargs", "flag", "words"),
    [
        ({"max_answered": 0}, "--max-answered", "0: expected a whole number of at least 1"),
        ({"max_queries": 0}, "--max-queries", "0: expected a whole number of at least 1"),
        ({"seed": -1}, "--seed", "-1: expected a non-negative integer"),
        ({"student_confidence": 3.0}, "--student-confidence", "3.0: expected a number in [0, 1]"),
        ({"delta": 2.0}, "--delta", "2.0: expected a number strictly between 0 and 1"),
    ],
    ids=["max-answered", "max-queries", "seed", "student-confidence", "delta"],
)
def test_bad_parameters_name_the_parameter(tmp_path, mnist_640, kwargs, flag, words):
    call = {"delta": 1e-5, "seed": 0, **kwargs}
    ((keyword, value),) = kwargs.items()
    with pytest.raises(UsageError) as raised:
        aggregate_votes(mnist_640, GNMax(40.0), **call)
    assert raised.value.message == f"{keyword}={words}"
    # The same check under the command line names the flag, and is what pate prints.
    with pytest.raises(UsageError) as shown, spelling.command_line():
        aggregate_votes(mnist_640, GNMax(40.0), **call)
    assert shown.value.message == f"{flag} {words}"
    args = ["aggregate", *MNIST_640, "--sigma", 40, "--output", tmp_path / "l.npy"]
    cli = run_cli([*args, flag, value], expect=ExitCode.BAD_INPUT)
    assert cli.stderr == f"pate: error: {shown.value.message}\n"
    assert list(tmp_path.iterdir()) == []


def test_check_parameters_skips_what_is_not_given():
    check_parameters()
    check_parameters(max_answered=1, max_queries=1, student_confidence=0.0)
    with pytest.raises(UsageError):
        check_parameters(student_confidence=-0.1)


def test_student_probabilities_go_with_interactive_gnmax_only(mnist_640, student_probs):
    with pytest.raises(UsageError, match="interactive-gnmax needs"):
        aggregate_votes(mnist_640, InteractiveGNMax(100.0, 50.0, 40.0), delta=1e-5, seed=0)
    with pytest.raises(UsageError, match="interactive-gnmax only"):
        aggregate_votes(mnist_640, GNMax(40.0), delta=1e-5, seed=0, student_probs=student_probs)


@pytest.mark.parametrize(
    ("kwargs", "words"),
    [
        ({"student_probs": np.full((640, 9), 1 / 9)}, "student_probs has shape (640, 9)"),
        ({"student_probs": np.full((640, 10), 0.2)}, "student_probs of query 0"),
        ({"true_labels": np.zeros(17, dtype=int)}, "true_labels has shape (17,)"),
        ({"true_labels": np.full(640, 12)}, "true_labels of query 0 is 12"),
        ({"true_labels": np.full(640, 1.5)}, "true_labels of query 0 is 1.5"),
        ({"student_probs": np.full((640, 10), np.nan)}, "student_probs of query 0"),
        ({"true_labels": np.full(640, np.nan)}, "true_labels of query 0 is nan"),
    ],
    ids=[
        "probs-shape",
        "probs-not-summing-to-1",
        "truth-length",
        "truth-range",
        "truth-whole",
        "probs-nan",
        "truth-nan",
    ],
)
def test_bad_arrays_raise_input_errors(mnist_640, kwargs, words):
    mechanism = InteractiveGNMax(100.0, 50.0, 40.0) if "student_probs" in kwargs else GNMax(40.0)
    with pytest.raises(InputError) as raised:
        aggregate_votes(mnist_640, mechanism, delta=1e-5, seed=0, **kwargs)
    assert words in raised.value.message


def test_bad_orders_and_conversion(mnist_640):
    with pytest.raises(UsageError, match="orders"):
        aggregate_votes(mnist_640, GNMax(40.0), delta=1e-5, seed=0, orders=[0.5, 2.0])
    with pytest.raises(UsageError, match=r"^orders='2:x': expected a comma list such as 2,4,8"):
        aggregate_votes(mnist_640, GNMax(40.0), delta=1e-5, seed=0, orders="2:x")
    with pytest.raises(
        UsageError, match=r"^conversion='optimal': expected one of classic, improved"
    ):
        aggregate_votes(mnist_640, GNMax(40.0), delta=1e-5, seed=0, conversion="optimal")

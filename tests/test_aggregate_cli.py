"""`pate aggregate` through the CLI: determinism, realised accounting, outputs, bad inputs."""

from __future__ import annotations

import json

import numpy as np
import pytest

from pate_cli.errors import ExitCode
from tests.conftest import MNIST, SAMPLE, run_cli

CONFIDENT = ["--threshold", 200, "--sigma1", 150, "--sigma", 40]
MNIST_640 = [MNIST, "--queries", 640, "--delta", 1e-5]


def _aggregate(tmp_path, *extra, seed=0, name="labels.npy", expect=ExitCode.OK):
    out = tmp_path / name
    args = ["aggregate", *MNIST_640, *CONFIDENT, "--seed", seed, "--output", out, "--json", *extra]
    return run_cli(args, expect=expect), out


def test_same_seed_same_labels_byte_for_byte(tmp_path):
    _, first = _aggregate(tmp_path, name="a.npy")
    _, second = _aggregate(tmp_path, name="b.npy")
    _, other = _aggregate(tmp_path, seed=1, name="c.npy")
    assert first.read_bytes() == second.read_bytes()
    assert not np.array_equal(np.load(first), np.load(other))
    labels = np.load(first)
    assert labels.dtype == np.int64 and labels.shape == (640,)
    assert set(np.unique(labels)) <= set(range(-1, 10))


def test_paper_setting_and_analyze_of_the_mask_agree(tmp_path):
    """MNIST, T=200, sigma1=150, sigma=40, 640 queries: near the paper's 286 answered, eps ~2."""
    mask_path = tmp_path / "mask.npy"
    result, labels_path = _aggregate(tmp_path, "--answered-output", mask_path)
    report = result.json
    assert report["command"] == "aggregate"
    assert abs(report["answered"] - 286) < 3 * np.sqrt(286)
    assert report["privacy"]["accounting"] == "realized"
    assert report["expected_privacy"]["accounting"] == "expected"
    assert report["expected_privacy"]["expected_answered"] == pytest.approx(282.72, abs=0.01)
    assert abs(report["privacy"]["data_dependent"]["epsilon"] - 2.0) < 0.1
    mask = np.load(mask_path)
    labels = np.load(labels_path)
    assert mask.dtype == bool and mask.sum() == report["answered"]
    assert np.array_equal(labels >= 0, mask)
    analyzed = run_cli(["analyze", *MNIST_640, *CONFIDENT, "--answered", mask_path, "--json"]).json
    assert analyzed["data_dependent"] == report["privacy"]["data_dependent"]
    assert analyzed["data_independent"] == report["privacy"]["data_independent"]
    assert analyzed["expected_answered"] == report["answered"]


def test_max_answered_stops_and_the_mask_covers_the_prefix(tmp_path):
    mask_path = tmp_path / "mask.npy"
    result, labels_path = _aggregate(tmp_path, "--max-answered", 50, "--answered-output", mask_path)
    report = result.json
    assert report["answered"] == 50 and report["num_seen"] < 640
    mask = np.load(mask_path)
    assert mask.shape == (report["num_seen"],) and mask[-1]
    assert np.all(np.load(labels_path)[report["num_seen"] :] == -1)
    analyzed = run_cli(["analyze", *MNIST_640, *CONFIDENT, "--answered", mask_path, "--json"]).json
    assert analyzed["data_dependent"]["epsilon"] == report["privacy"]["data_dependent"]["epsilon"]
    assert analyzed["num_queries_seen"] == report["num_seen"]


@pytest.mark.parametrize(
    "flags",
    [["--sigma", 40], ["--gamma", 0.05], CONFIDENT],
    ids=["gnmax", "lnmax", "confident"],
)
def test_every_mechanism_runs_and_accounts(tmp_path, flags):
    out = tmp_path / "labels.npy"
    report = run_cli(["aggregate", *MNIST_640, *flags, "--seed", 3, "--output", out, "--json"]).json
    assert (
        report["privacy"]["data_dependent"]["epsilon"]
        <= report["privacy"]["data_independent"]["epsilon"]
    )
    assert report["agreement_with_plurality"] > 0.8
    assert np.load(out).shape == (640,)


def test_interactive_with_student_probabilities(tmp_path, write_npy):
    counts = np.load(MNIST)[:640]
    rng = np.random.default_rng(5)
    # A student that agrees with the plurality on most queries, confidently.
    probs = np.full((640, 10), 0.02)
    probs[np.arange(640), counts.argmax(axis=1)] = 0.82
    probs[::5] = rng.dirichlet(np.ones(10), size=len(probs[::5]))
    probs_path = write_npy(probs, "probs.npy")
    out, mask_path = tmp_path / "labels.npy", tmp_path / "mask.npy"
    args = [
        "aggregate",
        *MNIST_640,
        "--threshold",
        100,
        "--sigma1",
        50,
        "--sigma",
        40,
        "--student-probs",
        probs_path,
        "--student-confidence",
        0.5,
        "--seed",
        1,
        "--output",
        out,
        "--answered-output",
        mask_path,
        "--json",
    ]
    report = run_cli(args).json
    assert report["mechanism"]["name"] == "interactive-gnmax"
    assert report["student_labelled"] > 0 and report["answered"] > 0
    assert report["answered"] + report["student_labelled"] + report["abstained"] == 640
    analyzed = run_cli(
        [
            "analyze",
            *MNIST_640,
            "--threshold",
            100,
            "--sigma1",
            50,
            "--sigma",
            40,
            "--baseline",
            probs_path,
            "--answered",
            mask_path,
            "--json",
        ]
    ).json
    assert analyzed["data_dependent"] == report["privacy"]["data_dependent"]


def test_true_labels_give_accuracy(tmp_path, write_npy):
    truth = np.load(MNIST)[:640].argmax(axis=1)
    report, _ = _aggregate(tmp_path, "--true-labels", write_npy(truth, "truth.npy"))
    assert report.json["accuracy"] == report.json["agreement_with_plurality"]


@pytest.mark.parametrize(
    ("make", "culprit"),
    [
        (
            lambda t, w: [
                "--student-probs",
                w(np.full((640, 9), 1 / 9), "p.npy"),
                "--student-confidence",
                0.5,
            ],
            "p.npy",
        ),
        (lambda t, w: ["--student-probs", w(np.full((640, 10), 0.2), "p.npy")], "p.npy"),
        (lambda t, w: ["--true-labels", w(np.zeros(17, dtype=int), "truth.npy")], "truth.npy"),
        (lambda t, w: ["--true-labels", w(np.full(640, 12), "truth.npy")], "truth.npy"),
        (lambda t, w: ["--answered-output", str(t / "missing" / "mask.npy")], "missing"),
    ],
    ids=["probs-shape", "probs-not-summing-to-1", "truth-length", "truth-range", "mask-folder"],
)
def test_bad_inputs_exit_2_and_write_nothing(tmp_path, write_npy, make, culprit):
    before = set(tmp_path.iterdir())
    extra = make(tmp_path, write_npy)
    written = set(tmp_path.iterdir()) - before
    out = tmp_path / "labels.npy"
    args = ["aggregate", *MNIST_640, *CONFIDENT, "--seed", 0, "--output", out, *extra]
    result = run_cli(args, expect=ExitCode.BAD_INPUT)
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and culprit in lines[0]
    assert set(tmp_path.iterdir()) == before | written  # no labels, no mask


def test_output_in_a_missing_folder(tmp_path):
    target = tmp_path / "nowhere" / "labels.npy"
    result = run_cli(
        ["aggregate", *MNIST_640, *CONFIDENT, "--output", target], expect=ExitCode.BAD_INPUT
    )
    assert str(target) in result.stderr and not target.parent.exists()


def test_budget_gate_on_the_realised_run(tmp_path):
    mask = tmp_path / "mask.npy"
    record = tmp_path / "run.record.json"
    extra = ["--max-epsilon", 1.0, "--answered-output", mask, "--record", record]
    result, out = _aggregate(tmp_path, *extra, expect=ExitCode.BUDGET_EXCEEDED)
    printed = json.loads(result.stdout)
    assert printed["gate"]["on"] == "publishable" and printed["gate"]["passed"] is False
    assert printed["gate"]["epsilon"] == printed["publishable"][0]["epsilon"] > 1.0
    # Nothing over budget is released: no labels, no mask, no record; the report says so.
    assert printed["output"] is None and printed["answered_mask"] is None
    assert not out.exists() and not mask.exists() and not record.exists()
    within, out = _aggregate(tmp_path, "--max-epsilon", 5.0)
    assert out.exists() and within.json["output"] == str(out)


def test_the_student_votes_are_baseline_in_every_command(tmp_path):
    """aggregate takes --baseline as analyze does (probabilities, or M times them), and the
    old --student-probs still works: the same labels from the same seed."""
    probs = np.load(SAMPLE / "mnist_student_probs.npy")
    scaled = tmp_path / "scaled.npy"
    np.save(scaled, probs * 250)
    args = ["aggregate", *MNIST_640, *CONFIDENT, "--seed", 3, "--student-confidence", 0.7]
    outputs = []
    for flag, path in (
        ("--baseline", SAMPLE / "mnist_student_probs.npy"),
        ("--baseline", scaled),
        ("--student-probs", SAMPLE / "mnist_student_probs.npy"),
    ):
        out = tmp_path / f"{len(outputs)}.npy"
        report = run_cli([*args, flag, path, "--output", out, "--json"]).json
        assert report["mechanism"]["name"] == "interactive-gnmax"
        outputs.append(out.read_bytes())
    assert outputs[0] == outputs[1] == outputs[2]


@pytest.mark.parametrize("existing", ["--output", "--answered-output"])
def test_existing_labels_or_mask_are_not_replaced_without_force(tmp_path, existing):
    """A second run is a second use of the votes: it stops before reading them (a file that is
    not votes is not even opened) and before any noise is drawn."""
    out, mask = tmp_path / "labels.npy", tmp_path / "mask.npy"
    target = out if existing == "--output" else mask
    target.write_bytes(b"the first run's release")
    not_votes = tmp_path / "votes.npy"
    not_votes.write_bytes(b"not votes")
    seed_file = tmp_path / "run.seed"
    args = ["aggregate", not_votes, "--queries", 640, "--delta", 1e-5, *CONFIDENT]
    args += ["--seed-file", seed_file, "--output", out, "--answered-output", mask]
    result = run_cli(args, expect=ExitCode.BAD_INPUT)
    assert result.stderr == (
        f"pate: error: {target} exists: a second run spends the privacy budget again; "
        "pass --force to replace it\n"
    )
    assert target.read_bytes() == b"the first run's release"
    assert not seed_file.exists()  # no noise: not even its seed file was made
    assert sorted(tmp_path.iterdir()) == sorted([target, not_votes])


def test_force_replaces_the_labels_of_an_earlier_run(tmp_path):
    _, out = _aggregate(tmp_path, seed=0)
    first = out.read_bytes()
    again, _ = _aggregate(tmp_path, seed=1, expect=ExitCode.BAD_INPUT)
    assert "labels.npy exists: a second run spends the privacy budget again" in again.stderr
    assert out.read_bytes() == first
    _aggregate(tmp_path, "--force", seed=1)
    assert out.read_bytes() != first
    assert sorted(p.name for p in tmp_path.iterdir()) == ["labels.npy"]  # no temporary left


def test_force_never_replaces_an_input(tmp_path):
    votes = tmp_path / "votes.npy"
    np.save(votes, np.load(MNIST)[:640])
    before = votes.read_bytes()
    args = ["aggregate", votes, "--delta", 1e-5, *CONFIDENT, "--output", votes, "--force"]
    result = run_cli(args, expect=ExitCode.BAD_INPUT)
    assert "is the same file as the input VOTES" in result.stderr
    assert votes.read_bytes() == before

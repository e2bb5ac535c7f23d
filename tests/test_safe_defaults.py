"""Plausible inputs and options that once crashed (exit 70) or hung: exit 2 or numbers now."""

from __future__ import annotations

import json
import os
from pathlib import Path

import numpy as np
import pytest

import pate_cli as pate
from pate_cli.errors import ExitCode
from tests.conftest import MNIST, TABLE2, run_cli

SMOOTH = ["smooth-sensitivity", MNIST, *TABLE2, "--beta", 0.01]


def one_line(result) -> str:
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    return lines[0]


@pytest.mark.parametrize(
    ("args", "message"),
    [
        ([*SMOOTH, "--sigma-ss", 0], "--sigma-ss 0.0: expected a finite number greater than 0"),
        ([*SMOOTH, "--sigma-ss", -1], "--sigma-ss -1.0: expected a finite number greater than 0"),
        ([*SMOOTH, "--sigma-ss", "nan"], "--sigma-ss nan: expected a finite number greater than 0"),
        (["analyze", MNIST, *TABLE2, "--seed", -3], "--seed -3: expected a non-negative integer"),
        (["analyze", MNIST, *TABLE2, "--max-epsilon", "nan"], "--max-epsilon nan: expected"),
        (["analyze", MNIST, *TABLE2, "--max-epsilon", -1], "--max-epsilon -1.0: expected"),
        (["compare", MNIST, "--sigma", 40, "--delta", 1e-5, "--max-epsilon", "inf"], "finite"),
    ],
)
def test_bad_options_are_exit_2_before_any_work(args, message):
    line = one_line(run_cli(args, expect=ExitCode.BAD_INPUT))
    assert line.startswith("pate: error: ") and message in line


def test_a_failed_aggregate_option_writes_no_labels(tmp_path: Path):
    out = tmp_path / "labels.npy"
    run_cli(
        ["aggregate", MNIST, "--sigma", 40, "--delta", 1e-5, "--output", out, "--max-epsilon", -2],
        expect=ExitCode.BAD_INPUT,
    )
    assert not out.exists()


@pytest.mark.parametrize("beta", [[], ["--beta", 0.01]], ids=["beta-chosen", "beta-given"])
@pytest.mark.parametrize("sigma_ss", [1e300, 1e-300])
def test_extreme_sigma_ss_gives_numbers(sigma_ss, beta):
    args = ["smooth-sensitivity", MNIST, *TABLE2, *beta, "--sigma-ss", sigma_ss, "--json"]
    out = run_cli(args).json
    gnss = out["gnss_cost"]
    if sigma_ss > 1:  # no noise cost left but the fixed part of Theorem 23
        assert 0 < float(gnss) < 1
    else:  # the noise term overflows: an unbounded cost, printed as such
        assert gnss == "inf" and out["epsilon_expected_release"] == "inf"


DEGENERATE = {
    "fractional": (np.full((5, 4), 62.5), "whole vote counts"),
    "one-class": (np.full((5, 1), 250.0), "single class"),
    "all-zero": (np.zeros((5, 4)), "single class"),
}
# All zeros are labels of one class read both ways (5 x 4 or 4 x 5), and counts of no vote
# under --teachers: --format labels reads them as (teachers, queries).
READ_AS = {"all-zero": "labels"}


@pytest.mark.parametrize("name", sorted(DEGENERATE))
def test_degenerate_votes_release_nothing_with_a_reason(name, tmp_path: Path):
    votes, reason = DEGENERATE[name]
    path = tmp_path / f"{name}.npy"
    np.save(path, votes)
    fmt = READ_AS.get(name, "auto")
    out = run_cli(["analyze", path, "--format", fmt, "--sigma", 40, "--delta", 1e-5, "--json"]).json
    assert out["release"]["released"] is False and reason in out["release"]["reason"]
    args = ["smooth-sensitivity", path, "--format", fmt, "--sigma", 40, "--delta", 1e-5]
    assert reason in one_line(run_cli(args, expect=2))
    report = pate.analyze(str(path), pate.GNMax(40), delta=1e-5, format=fmt)  # the library alike
    assert report.release is not None and reason in report.release.to_json_dict()["reason"]


def test_verify_refuses_deep_json_devices_and_fifos_at_once(tmp_path: Path):
    deep = tmp_path / "deep.json"
    deep.write_text("[" * 100_000 + "]" * 100_000)
    assert "nested too deeply" in one_line(run_cli(["verify", deep], expect=2))
    assert "not a regular file" in one_line(run_cli(["verify", os.devnull], expect=2))
    fifo = tmp_path / "record.fifo"
    os.mkfifo(fifo)
    assert "not a regular file" in one_line(run_cli(["verify", fifo], expect=2))


def test_verify_refuses_a_record_larger_than_the_cap(tmp_path: Path, monkeypatch):
    import pate_cli.records.record as record

    big = tmp_path / "big.json"
    big.write_text(json.dumps({"schema": "pate-record", "pad": "x" * 2000}))
    monkeypatch.setattr(record, "MAX_RECORD_BYTES", 1000)
    assert "larger than" in one_line(run_cli(["verify", big], expect=2))


def _votes_copy(tmp_path: Path) -> Path:
    path = tmp_path / "votes.npy"
    np.save(path, np.load(MNIST)[:64])
    return path


AGGREGATE = ["aggregate", "--sigma", 40, "--delta", 1e-5, "--seed", 0]


def test_an_output_never_replaces_its_input(tmp_path: Path):
    votes = _votes_copy(tmp_path)
    before = votes.read_bytes()
    link = tmp_path / "hard.npy"
    os.link(votes, link)
    soft = tmp_path / "soft.npy"
    soft.symlink_to(votes)
    for target in (votes, link, soft):
        result = run_cli([AGGREGATE[0], votes, *AGGREGATE[1:], "--output", target], expect=2)
        assert "is the same file as the input VOTES" in one_line(result)
    assert votes.read_bytes() == before  # nothing was written over the votes


def test_two_outputs_never_overwrite_each_other(tmp_path: Path):
    votes = _votes_copy(tmp_path)
    same = tmp_path / "out.json"
    result = run_cli(
        ["analyze", votes, "--sigma", 40, "--delta", 1e-5, "--ledger", same, "--record", same],
        expect=2,
    )
    assert "--record" in one_line(result) and "the output --ledger" in one_line(result)
    labels = tmp_path / "labels.npy"
    result = run_cli(
        [AGGREGATE[0], votes, *AGGREGATE[1:], "--output", labels, "--answered-output", labels],
        expect=2,
    )
    assert "the output --output" in one_line(result)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["votes.npy"]


def test_a_delta_above_one_over_the_queries_is_warned_about():
    out = run_cli(["analyze", MNIST, "--sigma", 40, "--queries", 640, "--delta", 0.5, "--json"])
    assert any("delta 0.5 is above 1/num_queries" in w for w in out.json["warnings"])
    quiet = run_cli(["analyze", MNIST, "--sigma", 40, "--queries", 640, "--delta", 1e-5, "--json"])
    assert not any("1/num_queries" in w for w in quiet.json["warnings"])
    compared = run_cli(
        ["compare", MNIST, "--sigma", 40, "--queries", 640, "--delta", 0.5, "--json"]
    )
    assert any("1/num_queries" in w for w in compared.json["warnings"])


def test_aggregate_refuses_a_gate_it_cannot_compute_before_any_work(tmp_path: Path):
    out = tmp_path / "labels.npy"
    args = ["aggregate", MNIST, "--sigma", 40, "--delta", 1e-5, "--output", out]
    line = one_line(run_cli([*args, "--gate-on", "released", "--max-epsilon", 1], expect=2))
    assert line.startswith("pate: error:") and "--gate-on" in line
    assert not out.exists()
    help_text = run_cli(["aggregate", "--help"]).stdout
    assert "worst-case" in help_text and "|released" not in help_text
    run_cli([*args, "--gate-on", "worst-case", "--max-epsilon", 100])
    assert out.exists()

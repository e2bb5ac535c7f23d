"""--round-half-even: refused where it would move the threshold statistic by 2 between
neighbours (no figure accounts that), a no-op elsewhere."""

from __future__ import annotations

import numpy as np
import pytest

from pate_cli.errors import ExitCode
from tests.conftest import MNIST, TABLE2, run_cli

# The case that once printed a publishable 4.377 where the truth is 9.997: one query
# (6, 1) with baseline (3.5, 3.5), so votes - baseline = (2.5, -2.5): half to even rounds
# 2.5 to 2, and the neighbour (7, 0) gives 3.5, rounded to 4.
FLAGS = ["--threshold", 8, "--sigma1", 1, "--sigma", 1, "--delta", 1e-5]


@pytest.fixture
def halves(write_npy):
    votes = write_npy(np.array([[6.0, 1.0]]))
    baseline = write_npy(np.array([[3.5, 3.5]]), "baseline.npy")
    return votes, baseline


@pytest.mark.parametrize("command", ["analyze", "smooth-sensitivity", "compare"])
def test_refused_at_an_exact_half(halves, command):
    votes, baseline = halves
    args = [command, votes, "--baseline", baseline, *FLAGS, "--round-half-even"]
    result = run_cli(args, expect=ExitCode.BAD_INPUT)
    assert "--round-half-even" in result.stderr and "by 2" in result.stderr
    assert result.stderr.count("\n") == 1


def test_aggregate_refused_before_any_draw(halves, tmp_path):
    votes, baseline = halves
    output = tmp_path / "labels.npy"
    args = ["aggregate", votes, "--baseline", baseline, *FLAGS, "--output", output]
    result = run_cli([*args, "--round-half-even"], expect=ExitCode.BAD_INPUT)
    assert "--round-half-even" in result.stderr
    assert not output.exists()


def test_half_up_accounts_the_same_case(halves):
    votes, baseline = halves
    out = run_cli(["analyze", votes, "--baseline", baseline, *FLAGS, "--json"]).json
    assert out["publishable"][0]["epsilon"] > 0


def test_a_no_op_without_halves():
    # Whole votes: half to even and half up round alike, so the numbers are the same.
    args = ["analyze", MNIST, *TABLE2, "--no-release", "--json"]
    plain = run_cli(args).json
    even = run_cli([*args, "--round-half-even"]).json
    assert even["data_dependent"] == plain["data_dependent"]
    assert even["publishable"] == plain["publishable"]

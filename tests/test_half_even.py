"""--round-half-even: where votes - baseline reaches an exact half, half to even moves the
rounded threshold statistic by 2 between neighbours, and every figure accounts a move of 2;
elsewhere it rounds as half up does and changes nothing."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest

from tests.conftest import MNIST, TABLE2, run_cli

# One query (6, 1) with baseline (3.5, 3.5): votes - baseline = (2.5, -2.5), rounded half to
# even to 2, and the neighbour (7, 0) gives 3.5, rounded to 4. Accounted as a move of 1, the
# publishable figures were below the mechanism's exact epsilon, 9.997.
FLAGS = ["--threshold", 8, "--sigma1", 1, "--sigma", 1, "--delta", 1e-5, "--json"]
TRUTH = 9.997


@pytest.fixture
def halves(write_npy):
    votes = write_npy(np.array([[6.0, 1.0]]))
    baseline = write_npy(np.array([[3.5, 3.5]]), "baseline.npy")
    return votes, baseline


def test_every_publishable_figure_accounts_a_move_of_2(halves):
    votes, baseline = halves
    args = ["analyze", votes, "--baseline", baseline, *FLAGS]
    even = run_cli([*args, "--round-half-even"])
    out = even.json
    assert all(p["epsilon"] >= TRUTH for p in out["publishable"])
    # The Gaussian DP of the run: the threshold step at sigma1 / 2, one answer at sigma.
    assert out["data_independent_exact"]["mu"] == pytest.approx(math.sqrt(2**2 / 1 + 2 / 1))
    assert "moves the threshold statistic by 2" in even.stderr
    up = run_cli(args).json  # half up: a move of 1 is exact, and every figure is smaller
    assert up["data_independent_exact"]["mu"] == pytest.approx(math.sqrt(1 + 2))
    for figure in ("data_dependent", "guaranteed", "data_independent"):
        assert out[figure]["epsilon"] > up[figure]["epsilon"]


def test_smooth_sensitivity_compare_and_aggregate_account_it_too(halves, tmp_path):
    votes, baseline = halves
    analyze = run_cli(["analyze", votes, "--baseline", baseline, *FLAGS, "--round-half-even"])
    publishable = min(p["epsilon"] for p in analyze.json["publishable"])
    smooth = run_cli(
        ["smooth-sensitivity", votes, "--baseline", baseline, *FLAGS, "--round-half-even"]
    ).json
    assert min(p["epsilon"] for p in smooth["publishable"]) == publishable
    compare = run_cli(["compare", votes, "--baseline", baseline, *FLAGS, "--round-half-even"])
    rows = {row["mechanism"]["name"]: row for row in compare.json["rows"]}
    # The interactive row moves by 2; confident-gnmax sees the whole votes alone: by 1.
    assert rows["confident-gnmax"]["data_independent_exact"]["mu"] == pytest.approx(math.sqrt(3))
    assert rows["interactive-gnmax"]["data_independent_exact"]["epsilon"] == pytest.approx(
        analyze.json["data_independent_exact"]["epsilon"], rel=1e-12
    )
    labels = tmp_path / "labels.npy"
    aggregate = run_cli(
        ["aggregate", votes, "--baseline", baseline, *FLAGS, "--round-half-even"]
        + ["--output", labels, "--seed", 3]
    ).json
    assert min(p["epsilon"] for p in aggregate["publishable"]) >= TRUTH


def test_the_release_tables_take_the_move_of_2():
    # The threshold step's local sensitivity covers tops 2 apart, and the ball of a
    # histogram d teachers away reaches d + 1: never below the table of a move of 1.
    from pate_cli.core.smooth import local_sensitivity_total

    votes = np.array([[6.0, 1.0]])
    step1 = votes - 3.5
    common = {"threshold": 8.0, "sigma1": 1.0, "step1_votes": step1, "half_even": True}
    two = local_sensitivity_total(votes, 7, 8.0, 1.0, **common)
    one = local_sensitivity_total(votes, 7, 8.0, 1.0, **common, threshold_sensitivity=1)
    assert np.all(two >= one) and np.any(two > one)
    assert np.all(np.diff(two) >= 0)


def test_a_no_op_without_halves():
    # Whole votes: half to even and half up round alike, so the numbers are the same.
    args = ["analyze", MNIST, *TABLE2, "--no-release", "--json"]
    plain = run_cli(args).json
    even = run_cli([*args, "--round-half-even"]).json
    for figure in ("data_dependent", "guaranteed", "data_independent_exact", "publishable"):
        assert even[figure] == plain[figure]
    assert even["warnings"] == plain["warnings"]


def test_the_ledger_accounts_the_move_of_2_too(halves, tmp_path):
    # The running epsilon of the last query is the run's: with a slice of the terms that
    # forgot the move of 2, the ledger printed the half-up figures.
    votes, baseline = halves
    ledger = tmp_path / "ledger.json"
    args = ["analyze", votes, "--baseline", baseline, *FLAGS, "--round-half-even", "--no-release"]
    out = run_cli([*args, "--ledger", ledger]).json
    last = json.loads(ledger.read_text())["queries"][-1]
    assert last["running_epsilon"] == pytest.approx(out["data_dependent"]["epsilon"], rel=1e-12)
    assert last["running_epsilon_data_independent"] == pytest.approx(
        out["data_independent"]["epsilon"], rel=1e-12
    )

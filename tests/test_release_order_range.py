"""A GNSS release's order outside (1, 1/(2 beta)), the range of Theorem 23 (Papernot et al.
2018): one line, exit 2, before any work, in every command and call that fixes it.

``smooth-sensitivity --order`` is checked with the flags, before the votes are read (a file
that is no votes shows it); ``analyze --orders`` of one order after the order grid is read,
as every flag of the grid, and before its charge and its analysis; the library refuses the
same (``UsageError``), and so does a budget's preview of the charge.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

import pate_cli as pate
from pate_cli.budget import Budget
from pate_cli.errors import ExitCode, UsageError
from tests.conftest import MNIST, run_cli

DELTA = 1e-5
GNMAX = ["--sigma", 40, "--queries", 20, "--delta", DELTA]
# (order, beta) outside the range: at and above 1/(2 beta), at and below 1, not a number.
OUTSIDE = [(14, 0.05), (10, 0.05), (1e300, 0.01), (2, 0.25), (1, 0.01), (0.5, 0.01)]
OUTSIDE += [(math.inf, 0.01), (math.nan, 0.01)]


@pytest.fixture
def no_votes(tmp_path):
    """A file the votes reader refuses: an error about it means it was read."""
    path = tmp_path / "votes.npy"
    path.write_text("not votes")
    return path


@pytest.fixture
def budget(tmp_path):
    path = tmp_path / "b.jsonl"
    run_cli(["budget", "init", path, "--delta", DELTA, "--max-epsilon", 1e9])
    return path


def _one_line(stderr: str) -> str:
    errors = [line for line in stderr.splitlines() if line.startswith("pate: ")]
    assert len(errors) == 1, stderr
    return errors[0]


@pytest.mark.parametrize(("order", "beta"), OUTSIDE)
def test_smooth_sensitivity_refuses_the_order_before_reading_the_votes(
    no_votes, budget, order, beta
):
    before = budget.read_bytes()
    release = ["--order", order, "--beta", beta, "--sigma-ss", 5]
    for charged in ([], ["--budget", budget]):
        args = ["smooth-sensitivity", no_votes, *GNMAX, *release, *charged]
        line = _one_line(run_cli(args, expect=ExitCode.BAD_INPUT).stderr)
        assert line.startswith(f"pate: error: --order {float(order)}")
        if math.isfinite(order) and order > 1:
            assert (
                f"with --beta {beta}: expected 1 < order < 1/(2 beta) = {1 / (2 * beta):.6g}"
                in line
            )
        else:
            assert "expected a finite Renyi order greater than 1" in line
    assert budget.read_bytes() == before


@pytest.mark.parametrize("beta", [0.0, -1.0, math.inf, math.nan])
def test_a_beta_outside_its_domain_is_refused_before_the_votes(no_votes, beta):
    args = ["smooth-sensitivity", no_votes, *GNMAX, "--beta", beta]
    line = _one_line(run_cli(args, expect=ExitCode.BAD_INPUT).stderr)
    assert line == f"pate: error: --beta {beta}: expected a finite number greater than 0"


def test_analyze_refuses_a_grid_of_one_order_outside_the_range_before_its_charge(budget):
    before = budget.read_bytes()
    release = ["--orders", 14, "--beta", 0.05, "--sigma-ss", 5]
    for charged in ([], ["--budget", budget]):
        args = ["analyze", MNIST, *GNMAX, *release, *charged]
        line = _one_line(run_cli(args, expect=ExitCode.BAD_INPUT).stderr)
        assert line.startswith("pate: error: --orders 14.0 with --beta 0.05: expected 1 < order")
    assert budget.read_bytes() == before
    # Without a release the order and beta are not a release's: the analysis runs.
    run_cli(["analyze", MNIST, *GNMAX, *release, "--no-release"])


def test_the_library_and_a_preview_refuse_the_same(budget):
    votes = np.load(MNIST)[:20]
    mechanism = pate.GNMax(40.0)
    release = {"order": 14.0, "beta": 0.05, "sigma_ss": 5.0}
    with pytest.raises(UsageError, match=r"order=14\.0 with beta=0\.05: expected 1 < order"):
        pate.smooth_sensitivity(votes, mechanism, delta=DELTA, **release)
    with pytest.raises(UsageError, match=r"orders=14\.0 with beta=0\.05"):
        pate.analyze(votes, mechanism, delta=DELTA, orders=[14.0], beta=0.05, sigma_ss=5.0)
    opened = Budget.open(budget)
    with pytest.raises(UsageError, match=r"order=14\.0 with beta=0\.05"):
        opened.preview(votes, mechanism, command="smooth_sensitivity", **release)
    with pytest.raises(UsageError, match=r"orders=14\.0 with beta=0\.05"):
        sample = {"orders": [14.0], "beta": 0.05, "sigma_ss": 5.0, "release": "sample"}
        opened.preview(votes, mechanism, command="analyze", **sample)


@pytest.mark.parametrize(("order", "beta"), [(9.99, 0.05), (1.01, 0.49), (100, 0.004)])
def test_an_order_inside_the_range_is_released_at_theorem_23_s_cost(budget, order, beta):
    args = ["smooth-sensitivity", MNIST, *GNMAX, "--order", order, "--beta", beta]
    out = run_cli([*args, "--sigma-ss", 5, "--skip-conditions", "--json"]).json
    assert out["order"] == order
    assert out["released"] is True
    # Theorem 23: lambda e^(2 beta) / sigma_ss^2 + (beta lambda - log(1 - 2 lambda beta) / 2)
    # / (lambda - 1).
    cost = order * math.exp(2 * beta) / 25 + (
        beta * order - 0.5 * math.log1p(-2 * order * beta)
    ) / (order - 1)
    assert out["gnss_cost"] == pytest.approx(cost, rel=1e-12)

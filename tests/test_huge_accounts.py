"""Accounts at the edge of double precision: a figure no lower than the truth, or one line.

A budget line whose Gaussian account has mu 1.4e154 or more (its mu^2 past 1.8e308) is
made the forger's way (its digest and every ``prev`` after it recomputed), from parameters
that give that account, so that only its total is out of reach: ``budget show`` and a
charging run refuse it in one line (exit 2, nothing written) and ``verify`` says the total
differs (exit 1). Below the edge the composition's figure is held against the closed form
and mpmath at several hundred digits.
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import mpmath
import pytest

from pate_cli.budget.accounts import compose
from pate_cli.choices import Conversion
from pate_cli.errors import AccountError, ExitCode
from tests.conftest import MNIST, run_cli
from tests.test_budget import canonical_digest, lines_of

DELTA = 1e-5
QUERIES = 50  # sqrt(2 Q) = 10: GNMax's sigma for a mu is 10 / mu
HUGE = (1.4e154, 1e200, 1e308)


def _forged(tmp_path: Path, mu: float) -> Path:
    """A budget of one charge whose GNMax sigma gives ``mu``, its digests made anew."""
    budget = tmp_path / "b.jsonl"
    run_cli(["budget", "init", budget, "--delta", DELTA, "--max-epsilon", 1e9])
    charge = [*("aggregate", MNIST, "--sigma", 40, "--queries", QUERIES), "--delta", DELTA]
    run_cli([*charge, "--output", tmp_path / "labels.npy", "--budget", budget])
    header, line = lines_of(budget)
    sigma = 10 / mu
    line["mechanism"]["sigma"] = sigma
    line["account"]["mu"] = 10 / sigma  # as pate composes it: sqrt(2 Q) / sigma
    line["prev"] = header["digest"]
    line["digest"] = canonical_digest(line)
    budget.write_text("".join(json.dumps(x) + "\n" for x in (header, line)))
    return budget


def _one_line(stderr: str) -> str:
    errors = [line for line in stderr.splitlines() if line.startswith("pate: ")]
    assert len(errors) == 1, stderr
    return errors[0]


@pytest.mark.parametrize("mu", HUGE)
def test_budget_show_refuses_a_huge_account_in_one_line(tmp_path, mu):
    budget = _forged(tmp_path, mu)
    for extra in ([], ["--json"]):
        result = run_cli(["budget", "show", budget, *extra], expect=ExitCode.BAD_INPUT)
        line = _one_line(result.stderr)
        assert line.startswith(f"pate: error: {budget}: charge 1 (gaussian, mu {mu:.3g})")
        assert "past double precision" in line


@pytest.mark.parametrize("mu", HUGE)
def test_a_charging_run_on_a_huge_account_is_one_line_and_writes_nothing(tmp_path, mu):
    budget = _forged(tmp_path, mu)
    before = budget.read_bytes()
    run = ["aggregate", MNIST, "--sigma", 40, "--queries", 20, "--delta", DELTA]
    result = run_cli(
        [*run, "--output", tmp_path / "more.npy", "--budget", budget], expect=ExitCode.BAD_INPUT
    )
    assert f"charge 1 (gaussian, mu {mu:.3g}) is past double precision" in _one_line(result.stderr)
    assert budget.read_bytes() == before
    assert not (tmp_path / "more.npy").exists()


@pytest.mark.parametrize("mu", HUGE)
def test_verify_says_a_huge_account_s_total_differs(tmp_path, mu):
    budget = _forged(tmp_path, mu)
    report = run_cli(["verify", budget, "--json"], expect=ExitCode.BUDGET_EXCEEDED).json
    checks = {check["name"]: check for check in report["checks"]}
    assert checks["chain"]["status"] == "verified"  # the account is its own parameters'
    total = checks["total within the limit"]
    assert total["status"] == "differs"
    assert f"charge 1 (gaussian, mu {mu:.3g}) is past double precision" in total["detail"]


def test_a_run_whose_own_account_overflows_is_one_line_and_charges_nothing(tmp_path):
    budget = tmp_path / "b.jsonl"
    run_cli(["budget", "init", budget, "--delta", DELTA, "--max-epsilon", 1e9])
    before = budget.read_bytes()
    run = ["aggregate", MNIST, "--sigma", 1e-300, "--queries", 20, "--delta", DELTA]
    result = run_cli(
        [*run, "--output", tmp_path / "a.npy", "--budget", budget], expect=ExitCode.BAD_INPUT
    )
    # mu = sqrt(40) / 1e-300: a double, whose square is not.
    assert "this run's charge (gaussian, mu 6.32e+300)" in _one_line(result.stderr)
    assert budget.read_bytes() == before


# ----------------------------------------------------------------------------- the figures


def _gaussian_epsilon(mu: float, delta: float) -> mpmath.mpf:
    """The epsilon of mu-Gaussian DP at delta (Dong, Roth and Su 2022, Corollary 2.13) by
    mpmath, as eps = mu^2 / 2 + mu t: delta = Phi(-t) - e^(mu^2/2 + mu t) Phi(-mu - t), the
    second term in log space, t bisected to 60 digits."""
    mpmath.mp.dps = 60
    m = mpmath.mpf(mu)

    def excess(t: mpmath.mpf) -> mpmath.mpf:
        second = mpmath.exp(m * m / 2 + m * t + mpmath.log(mpmath.ncdf(-m - t)))
        return mpmath.ncdf(-t) - second - mpmath.mpf(delta)

    low, high = mpmath.mpf(0), mpmath.mpf(20)  # delta falls as t grows: bisection
    for _ in range(80):  # t to 1e-23: eps to far below its last digit
        middle = (low + high) / 2
        low, high = (middle, high) if excess(middle) > 0 else (low, middle)
    return m * m / 2 + m * high


def test_the_exact_curve_at_mu_1e150_is_mpmath_s_figure_rounded_up():
    total = compose([{"kind": "gaussian", "mu": 1e150}], DELTA, Conversion.CLASSIC)
    assert total.method == "gaussian-dp"
    truth = _gaussian_epsilon(1e150, DELTA)
    assert total.epsilon >= truth
    assert total.epsilon <= truth * (1 + 1e-9)


@pytest.mark.parametrize(
    "mus",
    [[1e152], [1e153, 1e153], [1.3e154]],  # mu^2 (summed) is a double; the exact root is not
)
def test_past_the_exact_curve_the_renyi_figure_is_the_closed_form(mus):
    """Beyond mu ~ 1.4e150 the exact curve's epsilon is past 1e300 (its bisection stops
    there): the figure is Renyi DP's at the grid's lowest order 1.1, lambda mu^2 / 2 +
    log(1 / delta) / (lambda - 1), never below mpmath's exact one."""
    accounts = [{"kind": "gaussian", "mu": mu} for mu in mus]
    total = compose(accounts, DELTA, Conversion.CLASSIC)
    assert total.method == "rdp"
    mpmath.mp.dps = 60
    squared = mpmath.fsum(mpmath.mpf(mu) ** 2 for mu in mus)
    closed = mpmath.mpf("1.1") * squared / 2 + mpmath.log(1 / mpmath.mpf(DELTA)) / mpmath.mpf("0.1")
    assert total.epsilon >= closed
    assert total.epsilon <= closed * (1 + 1e-9)
    assert total.epsilon >= _gaussian_epsilon(math.sqrt(float(squared)), DELTA)


@pytest.mark.parametrize(
    "accounts",
    [
        [{"kind": "gaussian", "mu": 1.4e154}],
        [{"kind": "gaussian", "mu": 1e200}, {"kind": "pure", "epsilon0": 0.1, "count": 3}],
        [{"kind": "gaussian", "mu": 1e154}] * 4,  # their RDP sums past 1.8e308 at every order
        [{"kind": "pure", "epsilon0": 1e308, "count": 2}],
        [{"kind": "rdp", "orders": [2.0], "rdp": [1e308]}] * 2,
        [{"kind": "pure", "epsilon0": 0.1, "count": 10**400}],
    ],
)
def test_a_total_past_double_precision_is_an_account_error(accounts):
    for conversion in Conversion:
        with pytest.raises(AccountError, match="past double precision"):
            compose(accounts, DELTA, conversion)

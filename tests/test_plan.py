"""`pate plan`: each answer is checked by analysing at the returned value."""

from __future__ import annotations

import math
import re

import numpy as np
import pytest

import pate_cli as pate
from pate_cli.errors import ExitCode, UsageError
from pate_cli.mechanisms import ConfidentGNMax, GNMax, LNMax
from tests.conftest import MNIST, run_cli

PLAN = ["plan", "--delta", 1e-5, "--epsilon", 2]


def _analysed(flags: list, accountant: str) -> float:
    """The data-independent epsilon of `analyze` at the planned setting (every query
    answered: --data-independent), by the same accountant."""
    report = run_cli(
        ["analyze", MNIST, "--delta", 1e-5, "--data-independent", "--json", *flags]
    ).json
    if accountant == "exact":
        return report["data_independent_exact"]["epsilon"]
    return report["data_independent_worst_case"]["epsilon"]


@pytest.mark.parametrize("accountant", ["exact", "rdp"])
def test_plan_sigma_for_640_queries_meets_the_target_from_below(accountant):
    """Acceptance: the returned sigma analyses to <= 2 and within 1e-4 of it."""
    out = run_cli([*PLAN, "--queries", 640, "--accountant", accountant, "--json"]).json
    assert out["solve_for"] == "sigma" and out["accountant"] == accountant
    contract = {"command", "solve_for", "value", "epsilon", "delta", "accountant", "mechanism"}
    assert contract <= set(out) and out["command"] == "plan"
    assert out["mechanism"] == {"name": "gnmax", "sigma": out["value"]}
    assert out["epsilon"] <= 2
    analysed = _analysed(["--queries", 640, "--sigma", repr(out["value"])], accountant)
    assert analysed <= 2 and analysed >= 2 * (1 - 1e-4)
    assert analysed == pytest.approx(out["epsilon"], rel=1e-12)


def test_plan_queries_is_the_largest_count_within_the_target():
    out = run_cli([*PLAN, "--sigma", 40, "--json"]).json
    count = out["value"]
    assert out["solve_for"] == "queries" and isinstance(count, int)
    assert _analysed(["--queries", count, "--sigma", 40], "exact") <= 2
    assert _analysed(["--queries", count + 1, "--sigma", 40], "exact") > 2


def test_plan_sigma_of_confident_gnmax_is_its_worst_case():
    args = [*PLAN, "--queries", 640, "--threshold", 200, "--sigma1", 150, "--json"]
    out = run_cli(args).json
    assert out["mechanism"]["name"] == "confident-gnmax"
    flags = ["--queries", 640, "--threshold", 200, "--sigma1", 150, "--sigma", out["value"]]
    analysed = run_cli(["analyze", MNIST, "--delta", 1e-5, "--json", "--no-release", *flags]).json
    assert analysed["publishable"][0]["basis"] == "data-independent-exact"
    assert 2 * (1 - 1e-4) <= analysed["publishable"][0]["epsilon"] <= 2


def test_plan_gamma_and_sigma1():
    gamma = run_cli(
        [
            "plan",
            "--delta",
            1e-6,
            "--epsilon",
            2,
            "--queries",
            100,
            "--mechanism",
            "lnmax",
            "--json",
        ]
    ).json
    assert gamma["solve_for"] == "gamma" and gamma["epsilon"] <= 2
    again = pate.plan(delta=1e-6, epsilon=2, gamma=gamma["value"] * (1 + 1e-4))
    assert again.solve_for == "queries" and again.value == 99  # a larger gamma fits fewer
    sigma1 = pate.plan(delta=1e-5, epsilon=5, queries=640, threshold=200, sigma=40)
    assert sigma1.solve_for == "sigma1" and 5 * (1 - 1e-4) <= sigma1.epsilon <= 5


@pytest.mark.parametrize(
    ("args", "words"),
    [
        (["--queries", 640, "--sigma", 40], "exactly one of --sigma, --queries"),
        ([], "exactly one of --sigma, --queries"),
        (["--queries", 640, "--threshold", 200, "--sigma", 40], "no sigma1 reaches it"),
        (["--queries", 640, "--gamma", 1], "--gamma: gnmax has no such parameter"),
        (["--sigma", 1e-3], "even one query costs"),
    ],
)
def test_plan_refuses_what_it_cannot_solve(args, words):
    if "--gamma" in args:
        args = [*args, "--mechanism", "gnmax"]
    result = run_cli([*PLAN, *args], expect=ExitCode.BAD_INPUT)
    assert result.stderr.startswith("pate: error: ") and words in result.stderr


def test_plan_on_pilot_votes_says_they_were_looked_at():
    args = ["plan", "--delta", 1e-5, "--epsilon", 4, "--threshold", 200, "--sigma1", 150]
    out = run_cli([*args, "--votes", MNIST, "--json"]).json
    assert out["votes_looked_at"] == str(MNIST) and out["warnings"]
    report = pate.analyze(
        pate.load_votes(MNIST),
        pate.ConfidentGNMax(200, 150, out["value"]),
        delta=1e-5,
        release=False,
    )
    assert report.data_dependent.epsilon <= 4
    assert math.isclose(report.data_dependent.epsilon, out["epsilon"], rel_tol=1e-12)


@pytest.mark.parametrize(
    ("args", "words"),
    [
        (["--epsilon", 0, "--queries", 640], "--epsilon 0.0: expected a finite number"),
        (["--epsilon", "nan", "--queries", 640], "--epsilon nan: expected a finite number"),
        (["--epsilon", 2, "--queries", 0], "--queries 0: expected a whole number of at least 1"),
        (["--epsilon", 2, "--queries", 640, "--accountant", "x"], "--accountant: 'x' is not one"),
        (["--epsilon", 2, "--queries", 640, "--delta", 2], "--delta"),
        (["--epsilon", 2, "--queries", 640, "--sigma1", 150], "confident-gnmax needs --threshold"),
        (["--epsilon", 2, "--votes", MNIST], "give --threshold"),
        (
            ["--epsilon", 2, "--threshold", 200, "--sigma1", 150, "--votes", MNIST, "--queries", 9],
            "--votes: the pilot votes fix the number of queries",
        ),
        (["--epsilon", 2, "--votes", "missing.npy", "--threshold", 200], "missing.npy"),
    ],
)
def test_plan_refuses_bad_values_in_one_line(args, words):
    delta = [] if "--delta" in args else ["--delta", 1e-5]
    result = run_cli(["plan", *delta, *args], expect=ExitCode.BAD_INPUT)
    (line,) = result.stderr.splitlines()
    assert line.startswith("pate: error: ") and words in line and result.stdout == ""


def test_votes_plans_on_the_guaranteed_figure_not_the_average(write_npy):
    # 100 rows of (3, 1): the paper's expected cost is 2.52 where the exact epsilon of the
    # run is 6.60; the guaranteed figure (14.28) is a bound, and plan meets the target on it.
    votes = write_npy(np.tile([[3.0, 1.0]], (100, 1)))
    delta, threshold, sigma1 = 1.7912e-8, 34.8171, 9.50428
    before = pate.analyze(
        votes, pate.ConfidentGNMax(threshold, sigma1, 0.97634), delta=delta, release=False
    )
    assert before.data_dependent.epsilon < 6.60 < before.guaranteed.epsilon
    plan = pate.plan(delta=delta, epsilon=2.2, threshold=threshold, sigma1=sigma1, votes=votes)
    after = pate.analyze(
        votes, pate.ConfidentGNMax(threshold, sigma1, plan.value), delta=delta, release=False
    )
    assert after.guaranteed.epsilon == pytest.approx(plan.epsilon, rel=1e-12)
    assert 2.2 * (1 - 1e-4) <= after.guaranteed.epsilon <= 2.2


# A target no value reaches: the message says what the rest costs and the smallest reachable
# epsilon, both the plan's own accountant's figures, rounded up (never below the truth).

_UNREACHABLE = (
    r"(\S+): no (sigma|sigma1|gamma|number of queries) reaches it: "
    r"(?:the other steps alone|even one query) costs? epsilon (\S+) at delta 1e-05; "
    r"the smallest reachable is (\S+) \((.+)\)$"
)
UNREACHABLE = re.compile(r"^pate: error: --epsilon " + _UNREACHABLE)
# The same message from Python names the keyword: epsilon=0.05.
UNREACHABLE_FROM_PYTHON = re.compile(r"^epsilon=" + _UNREACHABLE)


@pytest.mark.parametrize(
    ("args", "solved", "limit", "setting", "accountant"),
    [
        # Confident-GNMax without sigma1: the answer step alone, GNMax(40) on 640 queries.
        (
            ["--queries", 640, "--threshold", 200, "--sigma", 40],
            "sigma1",
            "sigma1 -> infinity",
            ["--queries", 640, "--sigma", 40],
            "exact",
        ),
        # ... without sigma: the threshold step alone (sigma at the limit).
        (
            ["--epsilon", 0.5, "--queries", 640, "--threshold", 200, "--sigma1", 40],
            "sigma",
            "sigma -> infinity",
            ["--queries", 640, "--threshold", 200, "--sigma1", 40, "--sigma", "1e300"],
            "exact",
        ),
        # GNMax and LNMax under rdp: the conversion alone costs log(1/delta) / (alpha - 1).
        (
            ["--epsilon", 1e-3, "--queries", 100, "--accountant", "rdp"],
            "sigma",
            "sigma -> infinity",
            ["--queries", 100, "--sigma", "1e300"],
            "rdp",
        ),
        (
            ["--epsilon", 1e-3, "--queries", 100, "--mechanism", "lnmax", "--accountant", "rdp"],
            "gamma",
            "gamma -> 0",
            ["--queries", 100, "--gamma", "1e-300"],
            "rdp",
        ),
        # Without the number of queries: one query is the cheapest run.
        (
            ["--sigma", 1e-3],
            "number of queries",
            "queries = 1",
            ["--queries", 1, "--sigma", 1e-3],
            "exact",
        ),
    ],
    ids=["sigma1", "sigma-confident", "sigma-rdp", "gamma-rdp", "queries"],
)
def test_an_unreachable_target_says_what_the_rest_costs(args, solved, limit, setting, accountant):
    if "--epsilon" in args:
        args = ["plan", "--delta", 1e-5, *args]
    else:
        args = [*PLAN, *args]
    result = run_cli([*args, "--accountant", accountant], expect=ExitCode.BAD_INPUT)
    (line,) = result.stderr.splitlines()
    match = UNREACHABLE.match(line)
    assert match, line
    target, name, rest, smallest, said = match.groups()
    assert (name, said) == (solved, limit) and rest == smallest
    truth = _analysed(setting, accountant)  # the limiting setting, by the same accountant
    assert truth <= float(smallest) <= truth * 1.01  # three digits, rounded up
    assert float(target) < truth
    _assert_reachable_at(args, accountant, float(smallest), name)


def _assert_reachable_at(args: list, accountant: str, smallest: float, name: str) -> None:
    """The printed smallest epsilon is reachable as a target (it lies above the infimum)."""
    at = args.index("--epsilon") + 1 if "--epsilon" in args else None
    args = list(args)
    if at is None:
        args += ["--epsilon", smallest]
    else:
        args[at] = smallest
    out = run_cli([*args, "--accountant", accountant, "--json"]).json
    assert out["epsilon"] <= smallest
    assert out["solve_for"] == ("queries" if name == "number of queries" else name)


def test_an_unreachable_target_on_pilot_votes_says_what_the_rest_costs(write_npy):
    votes = write_npy(np.tile([[3.0, 1.0]], (100, 1)))
    threshold, sigma1 = 34.8171, 9.50428
    with pytest.raises(pate.UsageError) as caught:
        pate.plan(delta=1e-5, epsilon=0.05, threshold=threshold, sigma1=sigma1, votes=votes)
    match = UNREACHABLE_FROM_PYTHON.match(str(caught.value))
    assert match and match[1] == "0.05", caught.value
    assert match[2] == "sigma" and match[3] == match[4] and match[5] == "sigma -> infinity"
    # The threshold step alone: the guaranteed cost with sigma at the limit.
    at_limit = pate.ConfidentGNMax(threshold, sigma1, 1e300)
    limit = pate.analyze(votes, at_limit, delta=1e-5, release=False)
    truth = limit.guaranteed.epsilon
    assert truth <= float(match[4]) <= truth * 1.01
    smallest = float(match[4])
    again = pate.plan(delta=1e-5, epsilon=smallest, threshold=threshold, sigma1=sigma1, votes=votes)
    assert again.epsilon <= smallest


@pytest.mark.parametrize(
    ("args", "setting"),
    [
        (["--queries", 640], lambda v: (GNMax(v), 640, "exact")),
        (["--queries", 640, "--accountant", "rdp"], lambda v: (GNMax(v), 640, "rdp")),
        (
            ["--queries", 640, "--threshold", 200, "--sigma1", 150],
            lambda v: (ConfidentGNMax(200, 150, v), 640, "exact"),
        ),
        (
            ["--queries", 640, "--threshold", 200, "--sigma", 100],
            lambda v: (ConfidentGNMax(200, v, 100), 640, "exact"),
        ),
        (["--queries", 100, "--mechanism", "lnmax"], lambda v: (LNMax(v), 100, "exact")),
        (["--sigma", 40], lambda v: (GNMax(40), int(v), "exact")),
    ],
    ids=["sigma", "sigma-rdp", "confident-sigma", "sigma1", "gamma", "queries"],
)
def test_a_printed_value_copied_back_keeps_the_target(args, setting):
    """The table's value, copied as printed, costs at most the target, by the accountant's
    own figure computed here from the printed text."""
    from pate_cli.accountant.compose import data_independent_rdp
    from pate_cli.accountant.figures import epsilon_result, exact_bound
    from pate_cli.choices import Conversion
    from pate_cli.orders import DEFAULT_ORDERS

    delta = 1e-6 if "lnmax" in args else 1e-5
    table = run_cli(["plan", "--delta", delta, "--epsilon", 2, *args]).stdout
    name, printed = re.match(r"(\w+) = (\S+)", table).groups()
    assert f"{name}=" not in table or f"{name}={printed}" in table  # one value, both places
    assert len(printed.replace(".", "").strip("0")) <= 8  # short enough to copy
    mechanism, queries, accountant = setting(float(printed))
    if accountant == "exact":
        cost = exact_bound(mechanism, queries, queries, delta).epsilon
    else:
        rdp = data_independent_rdp(mechanism, DEFAULT_ORDERS, queries, queries)
        cost = epsilon_result(DEFAULT_ORDERS, rdp, delta, Conversion.CLASSIC).epsilon
    assert cost <= 2.0
    assert cost >= 2.0 * (1 - 1e-6) or name == "queries"  # and close to the boundary


@pytest.mark.parametrize(
    ("args", "words"),
    [
        (["--queries", 640, "--sigma", 40], "all are given: leave out the one to solve for"),
        (["--threshold", 200], "3 are left out (--sigma1, --sigma, --queries): give all but"),
    ],
)
def test_plan_says_which_unknowns_are_wrong(args, words):
    result = run_cli(["plan", "--delta", 1e-5, "--epsilon", 2, *args], expect=ExitCode.BAD_INPUT)
    assert words in result.stderr and "missing: none" not in result.stderr


@pytest.mark.parametrize("rising", [False, True])
def test_a_target_no_value_reaches_is_judged_in_few_evaluations_at_the_same_last_value(rising):
    """The bracket doubles near 1 and leaps 2^64 at a time beyond: about 110 evaluations of
    the cost, not 1,000, and the floor reported is the cost at the same last value, 2^996
    (or 2^-996) as when it only doubled."""
    from pate_cli.jobs.planning import _boundary

    seen: list[float] = []

    def cost(value: float) -> float:
        seen.append(value)
        return 3.0  # a floor above the target whatever the value

    with pytest.raises(UsageError, match="the smallest reachable is 3"):
        _boundary(cost, 2.0, 1e-5, rising=rising, name="sigma")
    assert len(seen) < 130
    assert seen[-1] == (2.0**-996 if rising else 2.0**996)  # the reported floor's value
    assert sorted(seen, reverse=rising) == seen  # one way only

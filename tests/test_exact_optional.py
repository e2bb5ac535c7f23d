"""A mechanism whose steps have no exact joint account still runs every command, and pure
steps of different epsilon0 join (issue item 2). Two plugins (tests/plugins/laplace_threshold.py):
Laplace-threshold, a (1/b1)-DP threshold beside a (2/b)-DP answer, whose exact figure is the
optimal composition of the two; and a Gaussian threshold beside LNMax's answer, which has
none: its publishable figure and its charge are the Renyi-DP worst case, and its reports say
why in words that name the parts. Each through analyze, compare, plan, aggregate --record,
verify and --budget; the figures between an independent lower bound (a pair of neighbouring
votes of the mechanism itself) and the Renyi-DP worst case."""

from __future__ import annotations

import math
from collections.abc import Iterator

import mpmath
import numpy as np
import pytest
from scipy.optimize import brentq
from scipy.stats import norm

from pate_cli.errors import ExitCode
from pate_cli.mechanisms import register
from pate_cli.mechanisms.registry import unregister
from pate_cli.mechanisms.steps import GaussianPart, PurePart, PureParts, joined
from pate_cli.orders import DEFAULT_ORDERS
from tests.conftest import MNIST, run_cli
from tests.plugins.laplace_threshold import GaussianThresholdLNMax, LaplaceThreshold

QUERIES = 640
DELTA = 1e-5
LAPLACE = ["--threshold", 200, "--threshold-scale", 100, "--answer-scale", 20]
MIXED = ["--threshold", 200, "--threshold-sigma", 100, "--gamma", 0.05]


@pytest.fixture(scope="module", autouse=True)
def registered() -> Iterator[None]:
    register(LaplaceThreshold)
    register(GaussianThresholdLNMax)
    yield
    unregister(LaplaceThreshold.name)
    unregister(GaussianThresholdLNMax.name)


def analyze(flags: list, *extra: object, queries: int = QUERIES) -> dict:
    return run_cli(
        ["analyze", MNIST, *flags, "--queries", queries, "--delta", DELTA, *extra, "--json"]
    ).json


def publishable(report: dict) -> float:
    return min(figure["epsilon"] for figure in report["publishable"])


def pair_epsilon(p: float, p_other: float, count: int, delta: float) -> float:
    """The epsilon at ``delta`` of ``count`` copies of one binary pair of outcome
    distributions (p, 1 - p) against (p_other, 1 - p_other), at 50 digits: delta(eps) =
    sum_j C(count, j) p^j (1 - p)^(count - j) [1 - e^(eps - L_j)]_+, L_j the privacy loss of
    j first outcomes. A lower bound on the epsilon of any mechanism that has this pair."""
    mpmath.mp.dps = 50
    a, b = mpmath.mpf(p), mpmath.mpf(p_other)
    first, second = mpmath.log(a / b), mpmath.log((1 - a) / (1 - b))
    terms = [
        (
            mpmath.binomial(count, j) * a**j * (1 - a) ** (count - j),
            j * first + (count - j) * second,
        )
        for j in range(count + 1)
    ]

    def excess(eps: float) -> float:
        found = sum(w * (1 - mpmath.e ** (eps - loss)) for w, loss in terms if loss > eps)
        return float(found) - delta

    return brentq(excess, 0.0, float(max(loss for _, loss in terms)), xtol=1e-12)


def test_pure_parts_join_and_pure_with_gaussian_does_not():
    one, other = PurePart(0.1, 3), PurePart(0.2, 4)
    assert joined([one, PurePart(0.1, 5)]) == PurePart(0.1, 8)
    both = joined([one, other, PurePart(0.1, 2)])
    assert both == PureParts((PurePart(0.1, 5), PurePart(0.2, 4)))
    assert joined([GaussianPart.of(2.0, 40.0), one]) is None
    assert joined([both, GaussianPart.of(2.0, 40.0)]) is None
    # A share of no step joins anything: a realised run that answered nothing.
    assert joined([GaussianPart.of(2.0, 40.0), PurePart(0.1, 0)]) == GaussianPart.of(2.0, 40.0)
    assert joined([PurePart(0.2, 0), one]) == one


@pytest.mark.parametrize("extra", [(), ("--no-release",), ("--data-independent",)])
def test_pure_parts_of_two_epsilon0_have_an_exact_figure(extra):
    """The exact figure is the optimal composition of 640 0.01-DP and 640 0.1-DP steps:
    below the Renyi-DP worst case and the basic sum, the headline figure."""
    report = analyze(LAPLACE, *extra)
    exact = report["data_independent_exact"]
    assert exact["method"] == "pure-dp-heterogeneous"
    assert exact["parts"] == [{"eps0": 0.01, "count": QUERIES}, {"eps0": 0.1, "count": QUERIES}]
    assert "data_independent_exact_absent" not in report
    worst = report["data_independent_worst_case"]["epsilon"]
    assert exact["epsilon"] == publishable(report) < worst < QUERIES * 0.11
    assert exact["epsilon"] == pytest.approx(13.4283, abs=1e-4)
    assert worst == pytest.approx(15.4525, abs=1e-4)


def test_the_exact_figure_holds_its_delta_by_the_double_sum():
    """On 60 queries, delta at the exact figure by the sum over both counts at 50 digits
    (the two steps' randomised-response pairs composed) is within the target."""
    report = analyze(LAPLACE, "--no-release", queries=60)
    eps = mpmath.mpf(report["data_independent_exact"]["epsilon"])
    e1, e2 = mpmath.mpf("0.01"), mpmath.mpf("0.1")
    q1, q2 = 1 / (1 + mpmath.e**e1), 1 / (1 + mpmath.e**e2)
    total = mpmath.mpf(0)
    for l1 in range(61):
        w1 = mpmath.binomial(60, l1) * q1**l1 * (1 - q1) ** (60 - l1)
        for l2 in range(61):
            loss = (60 - 2 * l1) * e1 + (60 - 2 * l2) * e2
            if loss > eps:
                w2 = mpmath.binomial(60, l2) * q2**l2 * (1 - q2) ** (60 - l2)
                total += w1 * w2 * (1 - mpmath.e ** (eps - loss))
    assert total <= DELTA


def test_the_publishable_figure_lies_between_a_pair_of_the_mechanism_and_rdp():
    """A threshold noise far below the answer's: its threshold alone, on votes whose top
    count is T against T - 1 (one teacher's vote moved), is a pair of the mechanism; the
    composition of 640 of them bounds its epsilon from below."""
    flags = ["--threshold", 200, "--threshold-scale", 5, "--answer-scale", 200]
    report = analyze(flags, "--no-release")
    # Pr[T + Lap(5) >= T] = 1/2 against Pr[T - 1 + Lap(5) >= T] = e^(-1/5) / 2.
    lower = pair_epsilon(0.5, math.exp(-0.2) / 2, QUERIES, DELTA)
    assert 0.8 * publishable(report) < lower <= publishable(report)
    assert publishable(report) < report["data_independent_worst_case"]["epsilon"]


def test_gaussian_beside_pure_has_no_exact_figure_and_says_why():
    report = analyze(MIXED)
    assert report["data_independent_exact"] is None
    reason = report["data_independent_exact_absent"]
    assert reason == (
        "gaussian-threshold-lnmax: no exact account joins the threshold step 'threshold' "
        "(Gaussian DP, mu 0.01 a step) and the answer step 'lnmax' (pure 0.1-DP a step): its "
        "exact data-independent figure is absent, and its publishable figure is the Renyi-DP "
        "worst case"
    )
    worst = report["data_independent_worst_case"]["epsilon"]
    assert [(f["basis"], f["epsilon"]) for f in report["publishable"]] == [("worst-case", worst)]
    # Its threshold alone is sqrt(640) / 100-Gaussian DP (Dong, Roth and Su 2022,
    # Corollary 2.13, solved here by scipy): a lower bound on the whole.
    mu = math.sqrt(QUERIES) / 100

    def excess(eps: float) -> float:
        return norm.cdf(-eps / mu + mu / 2) - math.exp(eps) * norm.cdf(-eps / mu - mu / 2) - DELTA

    assert brentq(excess, 0.0, 50.0) < worst
    for extra in ("--no-release", "--data-independent"):
        assert analyze(MIXED, extra)["data_independent_exact_absent"] == reason
    text = run_cli(["analyze", MNIST, *MIXED, "--queries", QUERIES, "--delta", DELTA])
    assert (text.stdout + text.stderr).count(reason) == 1


def test_compare_gives_each_row_its_exact_figure_or_why_not():
    rows = run_cli(["compare", MNIST, *LAPLACE, "--queries", QUERIES, "--delta", DELTA, "--json"])
    (laplace,) = rows.json["rows"]
    assert laplace["data_independent_exact"]["method"] == "pure-dp-heterogeneous"
    assert laplace["publishable"][0]["basis"] == "data-independent-exact"
    mixed = run_cli(["compare", MNIST, *MIXED, "--queries", QUERIES, "--delta", DELTA, "--json"])
    row = next(
        r for r in mixed.json["rows"] if r["mechanism"]["name"] == "gaussian-threshold-lnmax"
    )
    assert row["data_independent_exact"] is None
    assert "no exact account joins" in row["data_independent_exact_absent"]
    assert [f["basis"] for f in row["publishable"]] == ["worst-case"]


def test_plan_solves_on_the_exact_figure_or_on_renyi_dp_and_says_so():
    base = ["plan", "--threshold", 200, "--queries", QUERIES, "--epsilon", 20, "--delta", DELTA]
    laplace = run_cli([*base, "--mechanism", "laplace-threshold", "--threshold-scale", 100,
                       "--json"]).json  # fmt: skip
    assert (laplace["solve_for"], laplace["accountant"]) == ("answer_scale", "exact")
    assert 20 * (1 - 1e-7) <= laplace["epsilon"] <= 20
    mixed = run_cli([*base, "--mechanism", "gaussian-threshold-lnmax", "--threshold-sigma", 100,
                     "--json"]).json  # fmt: skip
    assert (mixed["solve_for"], mixed["accountant"]) == ("gamma", "rdp")
    assert 20 * (1 - 1e-7) <= mixed["epsilon"] <= 20
    (note,) = mixed["warnings"]
    assert "no exact account joins" in note and note.endswith("planned on it (the rdp accountant)")
    # The epsilon at the value solved is analyze's worst case there.
    at = ["--threshold", 200, "--threshold-sigma", 100, "--gamma", mixed["value"]]
    worst = analyze(at, "--data-independent")["data_independent_worst_case"]["epsilon"]
    assert worst == pytest.approx(mixed["epsilon"], rel=1e-12)


@pytest.mark.parametrize(("flags", "name"), [(LAPLACE, "laplace"), (MIXED, "mixed")])
def test_aggregate_records_charges_its_worst_case_and_verifies(tmp_path, flags, name):
    """aggregate --record --budget, analyze --budget, verify of the record and of the
    budget: the charge is the worst case's Renyi DP at the default orders, every query
    answered, which the budget's total reads as analyze's worst-case figure."""
    budget, record, seed = tmp_path / "b.jsonl", tmp_path / "run.json", tmp_path / "seed"
    run_cli(["budget", "init", budget, "--max-epsilon", 100, "--delta", DELTA])
    base = [MNIST, *flags, "--queries", QUERIES, "--delta", DELTA]
    done = run_cli(["aggregate", *base, "--seed-file", seed, "--output", tmp_path / "l.npy",
                    "--record", record, "--budget", budget, "--json"]).json  # fmt: skip
    labels = np.load(tmp_path / "l.npy")
    assert labels.shape == (QUERIES,) and 0 < done["answered"] < QUERIES
    assert np.count_nonzero(labels >= 0) == done["answered"]
    worst = analyze(flags, "--no-release")["data_independent_worst_case"]["epsilon"]
    assert done["budget"]["method"] == "rdp"
    assert done["budget"]["spent"] == pytest.approx(worst, rel=1e-9)
    assert done["budget"]["spent"] >= worst
    verified = run_cli(["verify", record, "--seed-file", seed, "--json"]).json
    assert verified["verdict"] == "verified", verified
    charged = analyze(flags, "--no-release", "--budget", budget)["budget"]
    assert charged["charge_index"] == 2
    audit = run_cli(["verify", budget, "--json"], expect=ExitCode.NOT_CHECKED).json
    assert audit["differs"] == []
    shown = run_cli(["budget", "show", budget, "--json"]).json
    account = shown["entries"][0]["account"]
    assert account["kind"] == "rdp" and account["orders"] == DEFAULT_ORDERS.tolist()
    text = run_cli(["budget", "show", budget]).stdout
    assert text.count(f"RDP at {DEFAULT_ORDERS.size} orders (1.1 to 500)") == 2

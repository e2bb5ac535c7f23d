"""`pate smooth-sensitivity` reproduces every smooth-sensitivity case of the 2018 reference.

Tolerances of tests/data/reference/README.md: booleans and the order exactly; rdp_at_order,
eps_before_ss and answered to 1e-9; beta to 1e-12; SS, sigma_ss, GNSS cost, noise std and
eps_with_ss to 1e-6.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from pate_cli.errors import ExitCode
from pate_cli.orders import DEFAULT_ORDERS
from tests.conftest import MNIST, REFERENCE, TABLE2, reference_json, reference_votes, run_cli

FILES = sorted(
    p.name for p in REFERENCE.glob("*.expected.json") if not p.name.startswith("labels2017")
)
CASES = [
    pytest.param(name, case, id=f"{name.split('.')[0]}")
    for name in FILES
    for case in reference_json(name)["cases"]
    if case["kind"] == "smooth_sensitivity"
]


def _args(name: str, case: dict, *extra) -> list:
    data = reference_json(name)
    params = case["params"]
    args = [
        "smooth-sensitivity",
        reference_votes(name),
        "--threshold",
        params["threshold"],
        "--sigma1",
        params["sigma1"],
        "--sigma",
        params["sigma2"],
        "--delta",
        params["delta"],
        "--seed",
        0,
        "--json",
        *extra,
    ]
    if "--strict-local-sensitivity" not in extra:
        args.append("--reference-local-sensitivity")
    if "queries" in params:
        args += ["--queries", params["queries"]]
    if params.get("teachers"):
        args += ["--teachers", params["teachers"]]
    if params["baseline"]:
        args += ["--baseline", REFERENCE / data["baseline_file"], "--round-half-even"]
    return args


def _check_release(out: dict, result: dict) -> None:
    assert out["released"] is True
    assert out["beta"] == pytest.approx(result["beta_opt"], rel=1e-12)
    for ours, theirs in [
        ("smooth_sensitivity", "ss_opt"),
        ("sigma_ss", "sigma_ss_opt"),
        ("gnss_cost", "rdp_of_ss_release"),
        ("noise_std", "noise_std"),
        ("epsilon_expected_release", "eps_with_ss"),
    ]:
        assert out[ours] == pytest.approx(result[theirs], rel=1e-6, abs=1e-12), ours


@pytest.mark.parametrize(("name", "case"), CASES)
def test_smooth_sensitivity_matches_reference(name, case):
    result = case["result"]
    stopped_on_condition = result["cond6"] is False or result["cond5"] is False
    expect = ExitCode.BAD_INPUT if stopped_on_condition else ExitCode.OK
    first = run_cli(_args(name, case), expect=expect)
    if stopped_on_condition:
        assert "condition C6" in first.stderr and len(first.stderr.strip().splitlines()) == 1
        out = run_cli(_args(name, case, "--skip-conditions")).json
        assert any("--skip-conditions" in w for w in out["warnings"])
    else:
        out = first.json
    assert out["order"] == pytest.approx(result["order"], rel=1e-12)
    assert out["data_independent_steps"] == {
        "threshold": result["ind_step1"],
        "gnmax": result["ind_step2"],
    }
    assert out["expected_answered"] == pytest.approx(result["answered_expected"], rel=1e-9)
    assert out["rdp_at_order"] == pytest.approx(result["rdp_at_order"], rel=1e-9)
    assert out["epsilon_data_dependent"] == pytest.approx(result["eps_before_ss"], rel=1e-9)
    if result["ind_step1"] and result["ind_step2"]:
        assert out["released"] is False and "data-independent" in out["reason"]
        assert out["epsilon_data_independent"] >= out["epsilon_data_dependent"]
        # The number answered depends on the votes: what can be published is every query
        # answered, Prop. 8 for both steps (lambda / (2 sigma1^2) + lambda / sigma2^2 each),
        # at its own best order.
        params, queries = case["params"], out["input"]["num_queries"]
        worst = min(
            queries * (order / (2 * params["sigma1"] ** 2) + order / params["sigma2"] ** 2)
            + math.log(1 / params["delta"]) / (order - 1)
            for order in DEFAULT_ORDERS
        )
        assert "worst-case" in out["reason"]
        assert out["epsilon_worst_case"] == pytest.approx(worst, rel=1e-12)
        assert out["epsilon_worst_case"] > out["epsilon_data_independent"]
        gate = ["--max-epsilon", (out["epsilon_data_independent"] + worst) / 2]
        gate += ["--gate-on", "worst-case"]
        run_cli([*_args(name, case), *gate], expect=ExitCode.BUDGET_EXCEEDED)
        return
    assert out["conditions"] == {"c5": result["cond5"], "c6": result["cond6"]}
    _check_release(out, result)
    # Expected released = data-dependent + GNSS cost (classic conversion).
    assert out["epsilon_expected_release"] == pytest.approx(
        out["epsilon_data_dependent"] + out["gnss_cost"], rel=1e-12
    )


@pytest.mark.parametrize(("name", "case"), CASES)
def test_sound_local_sensitivity_on_reference_cases(name, case):
    """The sound local sensitivity (the default) against the reference's, on its own cases.

    The sound bounds cover the change of the published per-query cost, Pr[answered] weight
    included, so the smooth sensitivity and the released epsilon are never below the
    reference's: within 5% on the realistic runs, within 30% on the edge cases of contested
    votes (where Pr[answered] moves most, and C6 fails with the sound q0).
    """
    result = case["result"]
    if result["ind_step1"] and result["ind_step2"]:
        pytest.skip("nothing to release")
    out = run_cli(_args(name, case, "--skip-conditions", "--strict-local-sensitivity")).json
    assert out["strict_local_sensitivity"] is True
    assert out["rdp_at_order"] == pytest.approx(result["rdp_at_order"], rel=1e-9)
    assert out["smooth_sensitivity"] >= result["ss_opt"] * (1 - 1e-9)
    assert out["epsilon_expected_release"] >= result["eps_with_ss"] * (1 - 1e-9)
    slack = 1.3 if name.startswith("edge_") else 1.05
    assert out["epsilon_expected_release"] <= slack * result["eps_with_ss"]


def test_paper_mnist_release_numbers():
    """The 2018 MNIST setting: order 14, beta 0.0329, E[SS] 0.0618, sigma_ss 6.23, 2.516 +/- 0.385.

    Reproduced with the reference's local sensitivity; the sound default is larger.
    """
    args = [
        "smooth-sensitivity",
        MNIST,
        *TABLE2,
        "--seed",
        0,
        "--json",
    ]
    out = run_cli([*args, "--reference-local-sensitivity"]).json
    assert out["order"] == 14
    assert round(out["beta"], 4) == 0.0329
    # The paper prints 0.0618; the reference computes 0.061747 on these votes.
    assert out["smooth_sensitivity"] == pytest.approx(0.06174653215675217, rel=1e-9)
    assert round(out["sigma_ss"], 2) == 6.23
    assert round(out["epsilon_expected_release"], 3) == 2.516
    assert round(out["noise_std"], 3) == 0.385
    assert out["parameters_chosen_on_data"] is True
    assert any("not itself differentially private" in w for w in out["warnings"])
    sound = run_cli([*args, "--walk-local-sensitivity"]).json
    assert sound["strict_local_sensitivity"] is True
    # The answer step's Pr[answered] weight moves with the votes: SS 0.0617 -> 0.0737.
    assert sound["smooth_sensitivity"] == pytest.approx(0.07372, rel=1e-4)
    assert round(sound["epsilon_expected_release"], 3) == 2.577
    assert sound["rdp_at_order"] == out["rdp_at_order"]
    # The default tabulated bound: never below the walk, 0.14% above it in SS here.
    tabulated = run_cli(args).json
    assert tabulated["local_sensitivity_bound"] == "tabulated"
    assert tabulated["smooth_sensitivity"] == pytest.approx(0.073825, rel=1e-4)
    assert tabulated["smooth_sensitivity"] >= sound["smooth_sensitivity"]
    assert round(tabulated["epsilon_expected_release"], 3) == 2.577


def test_released_epsilon_is_reproducible_from_the_seed():
    base = [
        "smooth-sensitivity",
        MNIST,
        *TABLE2,
        "--json",
    ]
    a = run_cli([*base, "--seed", 7]).json
    b = run_cli([*base, "--seed", 7]).json
    c = run_cli([*base, "--seed", 8]).json
    assert a["epsilon_released"] == b["epsilon_released"] != c["epsilon_released"]
    draws = np.array([run_cli([*base, "--seed", s]).json["epsilon_released"] for s in range(60)])
    # The sampled release is N(expected, noise_std^2): its spread matches the stated std.
    assert abs(draws.mean() - a["epsilon_expected_release"]) < 4 * a["noise_std"] / np.sqrt(60)
    assert 0.6 * a["noise_std"] < draws.std() < 1.4 * a["noise_std"]


def test_fixed_beta_and_sigma_ss_are_used_and_not_flagged():
    args = [
        "smooth-sensitivity",
        MNIST,
        *TABLE2,
        "--seed",
        0,
        "--beta",
        0.03,
        "--sigma-ss",
        6.0,
        "--json",
    ]
    out = run_cli(args).json
    assert out["beta"] == 0.03 and out["sigma_ss"] == 6.0
    assert out["parameters_chosen_on_data"] is False
    run_cli([*args[:-5], "--beta", 0.5, "--json"], expect=ExitCode.BAD_INPUT)  # beta >= 1/(2 order)


def test_gate_on_released_epsilon():
    args = ["smooth-sensitivity", MNIST, *TABLE2, "--seed", 0, "--gate-on", "released"]
    passed = run_cli([*args, "--max-epsilon", 2.6])
    # The expected release is computed from the votes: a gate on it says so.
    assert "warning: --gate-on released: the gate checks a figure that depends" in passed.stderr
    result = run_cli([*args, "--max-epsilon", 2.5], expect=ExitCode.BUDGET_EXCEEDED)
    assert "released epsilon 2.57693" in result.stderr


def test_default_gate_is_publishable_as_analyze():
    # Table 2: the expected release is 2.577 and the publishable worst case 3.9, so a budget
    # of 3 fails on what may be published, with no warning.
    args = ["smooth-sensitivity", MNIST, *TABLE2, "--max-epsilon", 3, "--json"]
    result = run_cli(args, expect=ExitCode.BUDGET_EXCEEDED)
    gate = result.json["gate"]
    assert gate["on"] == "publishable" and gate["passed"] is False
    assert gate["epsilon"] == min(p["epsilon"] for p in result.json["publishable"])
    assert "--gate-on" not in result.stderr


def test_warnings_go_to_stderr_with_json_on_one_line_each():
    # Off a terminal (the runner's stderr) each warning is one line, whatever its length,
    # so that grep finds it in a CI log; with --json it is in the JSON as well.
    result = run_cli(["smooth-sensitivity", MNIST, *TABLE2, "--json"])
    warnings = result.json["warnings"]
    assert any(len(w) > 100 for w in warnings)
    lines = result.stderr.splitlines()
    for warning in warnings:
        assert f"warning: {warning}" in lines


def test_lnmax_has_no_reference_local_sensitivity():
    result = run_cli(
        ["smooth-sensitivity", MNIST, "--gamma", 0.1, "--delta", 1e-5, "--queries", 100]
        + ["--reference-local-sensitivity"],
        expect=ExitCode.BAD_INPUT,
    )
    assert "LNMax has only its sound bound" in result.stderr


def test_analyze_carries_the_release():
    args = [
        "analyze",
        MNIST,
        *TABLE2,
        "--seed",
        0,
        "--json",
    ]
    out = run_cli(args).json
    assert out["release"]["released"] is True
    assert round(out["release"]["epsilon_expected_release"], 3) == 2.577
    reference = run_cli([*args, "--reference-local-sensitivity"]).json
    assert round(reference["release"]["epsilon_expected_release"], 3) == 2.516
    assert "release" not in run_cli([*args, "--no-release"]).json
    lnmax = run_cli(
        ["analyze", MNIST, "--gamma", 0.1, "--delta", 1e-5, "--queries", 100, "--json"]
    ).json
    assert lnmax["release"]["released"] is True and "conditions" not in lnmax["release"]
    gated = run_cli(
        [*args, "--max-epsilon", 2.5, "--gate-on", "released"], expect=ExitCode.BUDGET_EXCEEDED
    )
    assert "released epsilon" in gated.stderr


@pytest.mark.parametrize(
    ("flags", "steps"),
    [
        (["--sigma", 40], "none"),  # plain GNMax has no threshold step to call data-independent
        (["--threshold", 200, "--sigma1", 150, "--sigma", 40], "threshold"),
    ],
)
def test_human_report_names_the_data_independent_steps(flags, steps):
    args = ["smooth-sensitivity", MNIST, *flags, "--queries", 640, "--delta", 1e-5, "--seed", 0]
    out = run_cli(args).stdout
    (row,) = [line for line in out.splitlines() if "data-independent steps" in line]
    assert row.strip("│ ").endswith(steps)

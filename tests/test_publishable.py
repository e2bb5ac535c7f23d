"""What may be published, --public, and budget gates on what may be claimed."""

from __future__ import annotations

import math
import re

import pytest

from pate_cli.errors import ExitCode
from tests.conftest import MNIST, PUBLIC_REPORT_KEYS, TABLE2, run_cli

# Prop. 8 on all 640 queries, lambda / (2 sigma1^2) + lambda / sigma^2 each: Table 2's worst case.
WORST_CASE = 4.785703619893576
# Gaussian DP of the same run, mu^2 = 640 / 150^2 + 2 * 640 / 40^2: the exact worst case.
EXACT = 3.926701201162359
FIXED = ["--beta", 0.0336, "--sigma-ss", 5.88]


def _worst_case(order: float) -> float:
    return 640 * (order / (2 * 150.0**2) + order / 40.0**2) + math.log(1e5) / (order - 1)


def test_the_table_2_analysis_publishes_its_worst_case_only():
    report = run_cli(["analyze", MNIST, *TABLE2, "--json"]).json
    exact, figure = report["publishable"]
    assert exact["basis"] == "data-independent-exact"
    assert exact["epsilon"] == pytest.approx(EXACT, rel=1e-9)
    assert figure["basis"] == "worst-case" and figure["delta"] == 1e-5
    order = report["data_independent_worst_case"]["order"]
    assert figure["epsilon"] == pytest.approx(_worst_case(order), rel=1e-12)
    assert figure["epsilon"] == pytest.approx(WORST_CASE, rel=1e-12)
    # The release's order, beta and sigma_ss were chosen on the votes: not publishable.
    assert report["release"]["order_chosen_on_data"] is True


def test_gnmax_and_lnmax_publish_their_data_independent_bound():
    for flags in (["--sigma", 40], ["--gamma", 0.1]):
        args = ["analyze", MNIST, "--queries", 640, "--delta", 1e-5, *flags, "--json"]
        report = run_cli(args).json
        bases = {f["basis"]: f["epsilon"] for f in report["publishable"]}
        assert set(bases) == {"data-independent", "data-independent-exact"}
        assert bases["data-independent"] == report["data_independent"]["epsilon"]
        assert bases["data-independent-exact"] == report["data_independent_exact"]["epsilon"]
        assert bases["data-independent-exact"] < bases["data-independent"]


def test_a_release_fixed_in_advance_with_private_noise_is_publishable():
    args = ["smooth-sensitivity", MNIST, *TABLE2, "--order", 14, *FIXED, "--json"]
    report = run_cli([*args, "--gate-on", "publishable", "--max-epsilon", 100]).json
    bases = [f["basis"] for f in report["publishable"]]
    assert bases == ["gnss-release", "data-independent-exact", "worst-case"]
    assert report["publishable"][0]["epsilon"] == report["epsilon_released"]
    # The gate checks what answers the same on every run: not the sample.
    assert report["gate"]["epsilon"] == pytest.approx(EXACT, rel=1e-12)
    # analyze releases at a fixed order when its grid has one order.
    single = run_cli(["analyze", MNIST, *TABLE2, "--orders", "14", *FIXED, "--json"]).json
    bases = [f["basis"] for f in single["publishable"]]
    assert "gnss-release" in bases and single["release"]["order_chosen_on_data"] is False


@pytest.mark.parametrize(
    ("extra", "why"),
    [
        (["--beta", 0.0336, "--sigma-ss", 5.88], "its order was chosen on the votes"),
        (["--order", 14], "beta and sigma_ss were chosen on the votes"),
        (["--order", 14, *FIXED, "--seed", 3], "its noise is public"),
        (["--order", 14, *FIXED, "--reference-local-sensitivity"], "the reference's local"),
    ],
    ids=["order-chosen", "parameters-chosen", "public-seed", "reference-sensitivity"],
)
def test_a_release_not_fixed_in_advance_stays_private_and_says_why(extra, why):
    args = ["smooth-sensitivity", MNIST, *TABLE2, *extra]
    report = run_cli([*args, "--json"]).json
    assert [f["basis"] for f in report["publishable"]] == ["data-independent-exact", "worst-case"]
    table = " ".join(run_cli(args).stdout.split())
    assert f"the sample is private: {why}" in table


def test_public_json_holds_only_what_may_be_published():
    report = run_cli(["analyze", MNIST, *TABLE2, "--public", "--json"]).json
    assert set(report) == PUBLIC_REPORT_KEYS
    assert "path" not in report["input"] and "sha256" not in report["input"]
    assert report["num_queries"] == 640
    assert report["publishable"][0]["epsilon"] == pytest.approx(EXACT, rel=1e-12)
    table = run_cli(["analyze", MNIST, *TABLE2, "--public"])
    text = table.stdout + table.stderr
    assert "3.9268" in text and "4.7858" in text  # each rounded up
    assert "1.9988" not in text and "1.9989" not in text and "282" not in text


@pytest.mark.parametrize("command", ["smooth-sensitivity", "aggregate"])
def test_public_on_the_other_commands(tmp_path, command):
    args = [command, MNIST, *TABLE2, "--public", "--json"]
    if command == "aggregate":
        args += ["--output", tmp_path / "labels.npy"]
    report = run_cli(args).json
    assert report["command"] == command and "noise" not in report
    assert report["publishable"][-1]["basis"] == "worst-case"


def test_public_refuses_a_gate_on_a_private_figure_before_any_work(tmp_path):
    out = tmp_path / "labels.npy"
    for args in (
        ["analyze", MNIST, *TABLE2],
        ["aggregate", MNIST, *TABLE2, "--output", out],
    ):
        result = run_cli(
            [*args, "--public", "--max-epsilon", 3, "--gate-on", "data-dependent"],
            expect=ExitCode.BAD_INPUT,
        )
        assert result.stdout == "" and "--public with --gate-on data-dependent" in result.stderr
    assert not out.exists()
    gated = run_cli(["analyze", MNIST, *TABLE2, "--public", "--max-epsilon", 5, "--json"]).json
    assert gated["gate"] == {
        "on": "publishable",
        "epsilon": pytest.approx(EXACT, rel=1e-12),
        "limit": 5.0,
        "passed": True,
    }


def test_smooth_sensitivity_gates_on_the_publishable_figure_by_default():
    report = run_cli(["smooth-sensitivity", MNIST, *TABLE2, "--max-epsilon", 5, "--json"]).json
    assert report["gate"]["on"] == "publishable"
    assert report["gate"]["epsilon"] == report["publishable"][0]["epsilon"]
    public = run_cli(
        ["smooth-sensitivity", MNIST, *TABLE2, "--max-epsilon", 5, "--public", "--json"]
    ).json
    assert public["gate"]["on"] == "publishable"


@pytest.mark.parametrize(
    "flags",
    [
        ["--threshold", 200, "--sigma1", 150, "--sigma", 40, "--no-release"],
        ["--gamma", 0.1, "--data-independent"],
    ],
    ids=["no-release", "lnmax-data-independent"],
)
def test_a_gate_on_a_release_that_is_not_made_is_exit_2_before_any_work(flags):
    args = ["analyze", MNIST, "--queries", 640, "--delta", 1e-5, *flags]
    result = run_cli(
        [*args, "--gate-on", "released", "--max-epsilon", 9, "--json"], expect=ExitCode.BAD_INPUT
    )
    assert result.stdout == "" and "--gate-on released" in result.stderr


def test_every_gate_choice_in_each_help_works(tmp_path):
    """Every --gate-on a command's help lists gates that command, at a budget no run exceeds."""
    commands = {
        "analyze": ["analyze", MNIST, *TABLE2],
        "smooth-sensitivity": ["smooth-sensitivity", MNIST, *TABLE2],
        "compare": ["compare", MNIST, *TABLE2],
        "aggregate": ["aggregate", MNIST, *TABLE2, "--output", tmp_path / "l.npy", "--force"],
    }
    for name, args in commands.items():
        help_text = " ".join(run_cli([name, "--help"]).stdout.split())
        (listed,) = re.findall(r"--gate-on [<\[{]([a-z|-]+)[>\]}]", help_text)
        choices = listed.split("|")
        assert "publishable" in choices, name
        for choice in choices:
            report = run_cli([*args, "--gate-on", choice, "--max-epsilon", 100, "--json"]).json
            assert report["gate"]["on"] == choice and report["gate"]["passed"] is True


def test_the_gate_help_names_the_figure_the_gate_checks():
    """--gate-on's help says publishable is the exact data-independent figure where it is the
    smallest; on the Table-2 setting the gate checks exactly that one (3.9267, not the worst
    case 4.7857), so --max-epsilon 4.5 passes."""
    words = " ".join(run_cli(["analyze", "--help"]).stdout.split())
    assert "the smallest of the exact data-independent figure" in words
    report = run_cli(["analyze", MNIST, *TABLE2, "--max-epsilon", 4.5, "--json"]).json
    exact = {f["basis"]: f["epsilon"] for f in report["publishable"]}["data-independent-exact"]
    assert report["gate"]["epsilon"] == exact == pytest.approx(3.9267, abs=1e-4)
    assert report["gate"]["passed"] and exact < report["data_independent_worst_case"]["epsilon"]

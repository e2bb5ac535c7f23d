"""LNMax's data-dependent epsilon released through GNSS: the 2017 MNIST setting end to end.

The bound itself is proven against brute force in tests/oracle/test_lnmax_sensitivity_oracle.py;
here: the figures of the 2017 setting, the record and its verification, the API, the order and
parameters fixed in advance, and realised runs.
"""

from __future__ import annotations

import json

import numpy as np
import pytest

import pate_cli as pate
from pate_cli.errors import ExitCode
from pate_cli.records.record import record_digest
from pate_cli.reports.rounding import bound
from tests.conftest import SAMPLE, run_cli

LABELS = str(SAMPLE / "mnist_250_teachers_labels.npy")
STUDENT = str(SAMPLE / "mnist_250_teachers_100_indices_used_by_student.npy")
# The 250 x 9000 labels read both ways: --teachers 250 picks the (teachers, queries) layout.
SETTING = [LABELS, "--teachers", 250, "--indices", STUDENT, "--gamma", 0.05, "--delta", 1e-5]
FIXED = ["--order", 27, "--beta", 0.018, "--sigma-ss", 5.5]


def test_the_2017_setting_releases_its_data_dependent_epsilon():
    out = run_cli(["smooth-sensitivity", *SETTING, *FIXED, "--seed", 0, "--json"]).json
    assert out["released"] is True and "conditions" not in out
    assert out["epsilon_data_dependent"] == pytest.approx(1.43709, abs=1e-5)
    assert out["smooth_sensitivity"] == pytest.approx(0.16702, abs=1e-5)
    assert out["gnss_cost"] == pytest.approx(1.01273, abs=1e-5)
    assert out["epsilon_expected_release"] == pytest.approx(2.44982, abs=1e-5)
    assert out["noise_std"] == pytest.approx(out["smooth_sensitivity"] * 5.5, rel=1e-12)
    # Released in expectation below the data-independent figures the user could publish.
    exact = {f["basis"]: f["epsilon"] for f in out["publishable"]}
    assert exact["data-independent-exact"] == pytest.approx(4.30679, abs=1e-5)
    assert out["epsilon_expected_release"] < exact["data-independent-exact"]


def test_a_release_fixed_in_advance_with_private_noise_is_publishable():
    out = run_cli(["smooth-sensitivity", *SETTING, *FIXED, "--json"]).json
    bases = {figure["basis"]: figure for figure in out["publishable"]}
    assert bases["gnss-release"]["epsilon"] == out["epsilon_released"]
    table = run_cli(["smooth-sensitivity", *SETTING, *FIXED]).stdout
    assert "not needed (LNMax" in table
    (steps,) = [line for line in table.splitlines() if "data-independent steps" in line]
    assert "none" in steps and "threshold" not in steps  # LNMax has no threshold step


def test_the_record_verifies_and_its_sample_replays_with_the_seed_file(tmp_path):
    record, seed_file = tmp_path / "lnmax.record.json", tmp_path / "noise.seed"
    args = ["smooth-sensitivity", *SETTING, *FIXED, "--seed-file", seed_file, "--json"]
    out = run_cli([*args, "--record", record]).json
    saved = json.loads(record.read_text())
    assert saved["report"]["epsilon_released"] == out["epsilon_released"]
    # Without the seed file the sample and the publishable figure it decided are not checked.
    plain = run_cli(["verify", record, "--json"], expect=ExitCode.NOT_CHECKED).json
    assert plain["verdict"] == "incomplete" and plain["ok"] is False and plain["differs"] == []
    sampled = ["random sample", "epsilon_released", "publishable gnss-release"]
    assert plain["not_checked"] == sampled
    replayed = run_cli(["verify", record, "--seed-file", seed_file, "--json"]).json
    assert replayed["verdict"] == "verified" and replayed["ok"] is True
    statuses = {c["name"]: c["status"] for c in replayed["checks"]}
    assert set(statuses.values()) == {"verified"} and "epsilon_released" in statuses
    edited = json.loads(record.read_text())
    edited["report"]["smooth_sensitivity"] *= 0.5
    record.write_text(json.dumps(edited))
    caught = run_cli(["verify", record, "--json"], expect=ExitCode.BUDGET_EXCEEDED).json
    assert caught["verdict"] == "differs" and caught["ok"] is False
    assert caught["differs"][0] == "digest" and "smooth_sensitivity" in caught["differs"]


def test_its_steps_are_named_and_a_record_of_0_1_0_still_verifies(tmp_path):
    """``data_independent_steps`` is keyed by each step's own name; 0.1.0 called every
    answer step "gnmax", and verify compares the entries in their order."""
    record = tmp_path / "lnmax.record.json"
    args = ["smooth-sensitivity", *SETTING, *FIXED, "--seed", 0, "--json", "--record", record]
    assert run_cli(args).json["data_independent_steps"] == {"threshold": True, "lnmax": False}

    def as_of_0_1_0(answer: bool) -> None:
        old = json.loads(record.read_text())
        old["report"]["data_independent_steps"] = {"threshold": True, "gnmax": answer}
        old["digest"] = record_digest(old)
        record.write_text(json.dumps(old))

    as_of_0_1_0(False)
    verified = run_cli(["verify", record, "--json"]).json
    assert verified["verdict"] == "verified", verified["summary"]
    as_of_0_1_0(True)  # an entry that differs still does
    caught = run_cli(["verify", record, "--json"], expect=ExitCode.BUDGET_EXCEEDED).json
    details = " ".join(check["detail"] for check in caught["checks"])
    assert "data_independent_steps.lnmax: recorded True, recomputed False" in details


def test_analyze_carries_the_lnmax_release_and_the_api_matches_the_cli():
    cli = run_cli(["analyze", *SETTING, "--seed", 0, "--json"]).json
    labels = np.load(LABELS, allow_pickle=False)
    indices = np.load(STUDENT, allow_pickle=False)
    votes = pate.load_votes(labels, format="labels", indices=indices)
    report = pate.analyze(votes, pate.LNMax(0.05), delta=1e-5, release="sample", seed=0)
    assert report.release.released and report.release.conditions_apply is False
    assert report.to_dict()["release"]["epsilon_released"] == cli["release"]["epsilon_released"]
    assert cli["release"]["order"] == cli["data_dependent"]["order"]


def test_a_realised_run_is_released_over_the_queries_it_saw(tmp_path):
    mask = tmp_path / "mask.npy"
    np.save(mask, np.arange(100) < 60)
    args = ["smooth-sensitivity", *SETTING, *FIXED, "--seed", 0, "--json"]
    seen = run_cli([*args, "--answered", mask]).json
    assert seen["expected_answered"] == 60
    full = run_cli(args).json
    assert 0 < seen["smooth_sensitivity"] < full["smooth_sensitivity"]
    assert seen["epsilon_data_dependent"] < full["epsilon_data_dependent"]


def test_fractional_votes_are_refused_for_the_release():
    counts = np.tile([1.5, 0.5, 1.0], (5, 1))
    with pytest.raises(pate.ConditionError, match="whole vote counts"):
        pate.smooth_sensitivity(pate.load_votes(counts), pate.LNMax(0.1), delta=1e-5)


def test_the_readme_table_is_what_the_commands_print():
    readme = (SAMPLE.parent / "README.md").read_text()
    chosen = run_cli(["smooth-sensitivity", *SETTING, "--json"]).json
    fixed = run_cli(["smooth-sensitivity", *SETTING, *FIXED, "--json"]).json
    bases = {figure["basis"]: figure["epsilon"] for figure in fixed["publishable"]}

    # Epsilons rounded up at their digits, the noise's spread to nearest (reports.rounding).
    def up(value: float) -> str:
        return bound(value, 3)

    rows = {
        f"| data-dependent (order 27) | {up(chosen['epsilon_data_dependent'])} |": chosen["order"]
        == 27,
        "| released, beta and sigma_ss chosen on the votes | "
        f"{up(chosen['epsilon_expected_release'])} +/- {chosen['noise_std']:.3f} |": True,
        "| released, order 27, beta 0.018 and sigma_ss 5.5 fixed in advance | "
        f"{up(fixed['epsilon_expected_release'])} +/- {fixed['noise_std']:.3f} |": True,
        "| data-independent exact (optimal composition of 100 (0.1)-DP steps) | "
        f"{up(bases['data-independent-exact'])} |": True,
        f"| data-independent (RDP, order 6) | {up(bases['data-independent'])} |": True,
    }
    for row, holds in rows.items():
        assert row in readme and holds, row


def test_an_aggregated_lnmax_run_is_released_through_its_answered_mask(tmp_path):
    """aggregate writes the run's mask; smooth-sensitivity --answered releases that run."""
    labels, mask = tmp_path / "labels.npy", tmp_path / "mask.npy"
    run_cli(
        ["aggregate", *SETTING, "--max-queries", 40, "--output", labels]
        + ["--answered-output", mask]
    )
    assert np.load(mask, allow_pickle=False).tolist() == [True] * 40
    args = ["smooth-sensitivity", *SETTING, *FIXED, "--seed", 0, "--json"]
    run = run_cli([*args, "--answered", mask]).json
    first = run_cli([*args, "--queries", 40]).json
    assert run["expected_answered"] == 40
    assert run["smooth_sensitivity"] == first["smooth_sensitivity"]
    assert run["epsilon_expected_release"] == first["epsilon_expected_release"]
    analysed = run_cli(["analyze", *SETTING, "--answered", mask, "--seed", 0, "--json"]).json
    assert analysed["release"]["expected_answered"] == 40
    assert analysed["release"]["smooth_sensitivity"] > 0


def test_the_release_builds_its_tables_once_for_all_its_blocks(monkeypatch):
    """Blocks of queries share one increment table: built once, the same total as one block."""
    from pate_cli.choices import Conversion
    from pate_cli.core import ls_lnmax
    from pate_cli.release.gnss import gnss_release

    counts = np.load(SAMPLE / "mnist_250_teachers.npy", allow_pickle=False)[:300]
    built = []
    original = ls_lnmax._sensitivity_table
    monkeypatch.setattr(
        ls_lnmax, "_sensitivity_table", lambda *args: built.append(args) or original(*args)
    )

    def release(chunk_size):
        return gnss_release(
            counts, 250, pate.LNMax(0.05), 20.0, 1e-5, Conversion.CLASSIC,
            epsilon_data_independent=1.0, epsilon_worst_case=1.0, beta=0.02, sigma_ss=5.0,
            chunk_size=chunk_size, noise=None,
        )  # fmt: skip

    blocks = release(chunk_size=64)
    assert len(built) == 1
    whole = release(chunk_size=1 << 16)
    np.testing.assert_allclose(blocks.local_sensitivity, whole.local_sensitivity, rtol=1e-12)
    assert blocks.smooth_sensitivity == pytest.approx(whole.smooth_sensitivity, rel=1e-12)


@pytest.mark.parametrize(
    ("flags", "message"),
    [
        (["--gamma", 0], "--gamma"),
        (["--gamma", "nan"], "--gamma"),
        (["--gamma", 0.05, "--sigma", 40], "--gamma"),
        (["--gamma", 0.05, "--reference-local-sensitivity"], "LNMax has only its sound bound"),
    ],
)
def test_bad_lnmax_release_flags_are_one_line_and_write_nothing(tmp_path, flags, message):
    record = tmp_path / "run.record.json"
    args = ["smooth-sensitivity", LABELS, "--teachers", 250, "--indices", STUDENT, "--delta", 1e-5]
    args += flags
    result = run_cli([*args, "--record", record], expect=ExitCode.BAD_INPUT)
    assert result.stdout == "" and message in result.stderr
    assert len(result.stderr.strip().splitlines()) == 1
    assert list(tmp_path.iterdir()) == []


def test_the_core_refuses_a_count_above_the_teachers():
    from pate_cli.core import ls_lnmax

    with pytest.raises(ValueError, match="exceeds the 3 teachers"):
        ls_lnmax.local_sensitivity_lnmax([[5, 0]], 3, 0.1, 2.0)

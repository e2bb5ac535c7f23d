"""One rule, two vocabularies: a library message names keywords from Python, flags from pate.

Each mistake is made twice, through the library and through the command line, and each
message must name what that caller wrote (``pate_cli.common.spelling``).
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

import pate_cli as pate
from pate_cli.common import spelling
from pate_cli.errors import ExitCode, InputError, UsageError
from tests.conftest import MNIST, run_cli

BAD = ExitCode.BAD_INPUT
GNMAX = ["--sigma", 40, "--delta", 1e-5, "--queries", 50]


@pytest.fixture(scope="module")
def votes() -> pate.Votes:
    return pate.load_votes(MNIST, queries=50)


def error_line(args: list[object]) -> str:
    """The error the command line prints for ``args`` (exit code 2)."""
    stderr = run_cli(args, expect=BAD).stderr
    (line,) = [line for line in stderr.splitlines() if line.startswith("pate: error: ")]
    return line.removeprefix("pate: error: ")


def cli_warnings(args: list[object]) -> list[str]:
    return json.loads(run_cli([*args, "--json"]).stdout)["warnings"]


# ---------------------------------------------------------------------- seeds


def test_a_seed_file_that_is_a_folder(votes, tmp_path: Path) -> None:
    with pytest.raises(InputError) as python:
        pate.analyze(votes, pate.GNMax(40), delta=1e-5, release="sample", seed_file=tmp_path)
    assert (
        str(python.value)
        == f"seed_file={str(tmp_path)!r}: not a regular file; expected a seed file"
    )
    cli = error_line(["analyze", MNIST, *GNMAX, "--seed-file", tmp_path])
    assert cli == f"--seed-file {tmp_path}: not a regular file; expected a seed file"


def test_a_public_seed_note(votes) -> None:
    report = pate.analyze(votes, pate.GNMax(40), delta=1e-5, release="sample", seed=3)
    note = (
        "anyone who knows the seed can recompute the noise; the outputs are not a private release"
    )
    assert f"seed=3: {note} (use seed_file, or no seed, for one)" in report.warnings
    cli = cli_warnings(["analyze", MNIST, *GNMAX, "--seed", 3])
    assert f"--seed 3: {note} (use --seed-file, or no seed, for one)" in cli


def test_a_seed_and_a_seed_file(votes, tmp_path: Path) -> None:
    seed_file = tmp_path / "seed"
    with pytest.raises(UsageError) as python:
        pate.analyze(
            votes, pate.GNMax(40), delta=1e-5, release="sample", seed=3, seed_file=seed_file
        )
    assert str(python.value) == "seed and seed_file: give one (seed_file keeps the noise private)"
    cli = error_line(["analyze", MNIST, *GNMAX, "--seed", 3, "--seed-file", seed_file])
    assert cli == "--seed and --seed-file: give one (--seed-file keeps the noise private)"


# ----------------------------------------------------------------------- gnss


def test_beta_out_of_range(votes) -> None:
    with pytest.raises(UsageError, match=r"^beta=1\.0: expected 0 < beta < 1/\(2 order\)"):
        pate.smooth_sensitivity(votes, pate.GNMax(40), delta=1e-5, beta=1.0)
    cli = error_line(["smooth-sensitivity", MNIST, *GNMAX, "--beta", 1.0])
    assert cli.startswith("--beta 1.0: expected 0 < beta < 1/(2 order)")


def test_beta_and_sigma_ss_chosen_on_the_votes(votes) -> None:
    chosen = "beta and sigma_ss were chosen by looking at the private votes"
    report = pate.analyze(votes, pate.GNMax(40), delta=1e-5)
    (python,) = [w for w in report.warnings if w.startswith(chosen)]
    assert python.endswith("(fix them with beta=... and sigma_ss=...)")
    assert "--" not in python
    (cli,) = [w for w in cli_warnings(["analyze", MNIST, *GNMAX]) if w.startswith(chosen)]
    assert cli.endswith("(fix them with --beta and --sigma-ss)")


def test_reference_local_sensitivity_of_lnmax(votes) -> None:
    lnmax = "reproduces the 2018 reference's GNMax bounds; LNMax has only its sound bound"
    with pytest.raises(UsageError, match=f"^reference_local_sensitivity=True {lnmax}"):
        pate.smooth_sensitivity(
            votes, pate.LNMax(0.1), delta=1e-5, reference_local_sensitivity=True
        )
    args = ["smooth-sensitivity", MNIST, "--gamma", 0.1, "--delta", 1e-5, "--queries", 50]
    assert error_line([*args, "--reference-local-sensitivity"]).startswith(
        f"--reference-local-sensitivity {lnmax}"
    )


# ---------------------------------------------------------------------- votes


def test_counts_or_labels_suggests_format_and_teachers(write_npy) -> None:
    path = write_npy(np.array([[1, 2, 0], [0, 0, 4]]))
    with pytest.raises(InputError) as python:
        pate.load_votes(path)
    message = str(python.value)
    assert "; pass format='labels'), or counts" in message
    assert message.endswith("pass format='counts', teachers=M, M at least 4)")
    cli = error_line(["analyze", path, "--sigma", 40, "--delta", 1e-5])
    assert "; pass --format labels), or counts" in cli
    assert cli.endswith("pass --format counts --teachers M, M at least 4)")


def test_rows_with_different_sums_suggest_teachers(write_npy) -> None:
    path = write_npy(np.array([[1.0, 2.0, 0.5], [1.0, 1.0, 1.0]]))
    expected = "expected every row to sum to the number of teachers M, or pass {}"
    with pytest.raises(InputError) as python:
        pate.load_votes(path, format="counts")
    assert str(python.value).endswith(expected.format("teachers=M"))
    cli = error_line(["analyze", path, "--format", "counts", "--sigma", 40, "--delta", 1e-5])
    assert cli.endswith(expected.format("--teachers M"))


def test_a_row_above_teachers(write_npy) -> None:
    path = write_npy(np.array([[1, 2, 3], [3, 2, 1]]))
    with pytest.raises(InputError, match=r"more than teachers=2; teachers must be at least"):
        pate.load_votes(path, format="counts", teachers=2)
    args = ["analyze", path, "--format", "counts", "--teachers", 2, "--sigma", 40, "--delta", 1e-5]
    assert "more than --teachers 2; --teachers must be at least" in error_line(args)


def test_num_classes_that_does_not_match() -> None:
    with pytest.raises(InputError, match=r"but num_classes is 7$"):
        pate.load_votes(MNIST, num_classes=7)
    cli = error_line(["analyze", MNIST, "--num-classes", 7, "--sigma", 40, "--delta", 1e-5])
    assert cli.endswith("but --num-classes is 7")


def test_more_queries_than_the_file_has() -> None:
    with pytest.raises(InputError, match=r"has only 9000 queries, queries asks for 10000$"):
        pate.load_votes(MNIST, queries=10000)
    cli = error_line(["analyze", MNIST, "--queries", 10000, "--sigma", 40, "--delta", 1e-5])
    assert cli.endswith("has only 9000 queries, --queries asks for 10000")


def test_a_bad_number_of_queries() -> None:
    with pytest.raises(UsageError) as python:
        pate.load_votes(MNIST, queries=0)
    assert str(python.value) == "queries=0: expected a positive number of queries"
    assert error_line(["analyze", MNIST, "--queries", 0, "--sigma", 40, "--delta", 1e-5]) == (
        "--queries 0: expected a positive number of queries"
    )


def test_a_format_that_does_not_fit_the_array() -> None:
    with pytest.raises(InputError, match=r"but format='auto' expects \(queries, classes\)"):
        pate.load_votes(np.zeros((2, 2, 2, 2)))


# ------------------------------------------------------------------- planning


def test_plan_with_a_bad_epsilon() -> None:
    with pytest.raises(UsageError) as python:
        pate.plan(delta=1e-5, epsilon=-1, sigma=40)
    assert str(python.value) == "epsilon=-1: expected a finite number greater than 0"
    cli = error_line(["plan", "--delta", 1e-5, "--epsilon=-1", "--sigma", 40])
    assert cli == "--epsilon -1.0: expected a finite number greater than 0"


def test_plan_with_an_unreachable_epsilon() -> None:
    with pytest.raises(UsageError, match=r"^epsilon=0\.05: no sigma reaches it: "):
        pate.plan(delta=1e-5, epsilon=0.05, queries=100, threshold=200, sigma1=150)
    args = ["plan", "--delta", 1e-5, "--epsilon", 0.05, "--queries", 100]
    cli = error_line([*args, "--threshold", 200, "--sigma1", 150])
    assert cli.startswith("--epsilon 0.05: no sigma reaches it: ")


def test_plan_with_a_parameter_the_mechanism_lacks() -> None:
    with pytest.raises(UsageError) as python:
        pate.plan(delta=1e-5, epsilon=1, gamma=0.1, sigma1=3)
    assert str(python.value) == "sigma1: lnmax has no such parameter"
    args = ["plan", "--delta", 1e-5, "--epsilon", 1, "--gamma", 0.1, "--sigma1", 3]
    assert error_line(args) == "--sigma1: lnmax has no such parameter"


# --------------------------------------------------------------------- budget


def test_a_budget_needs_a_fixed_release(votes, tmp_path: Path) -> None:
    budget = tmp_path / "budget.jsonl"
    pate.Budget.init(budget, delta=1e-5, max_epsilon=5)
    with pytest.raises(UsageError) as python:
        pate.analyze(votes, pate.GNMax(40), delta=1e-5, release="sample", budget=budget)
    assert str(python.value).startswith("budget: the release's order, beta and sigma_ss")
    assert str(python.value).endswith(
        ": pass one order (orders), beta and sigma_ss, or release=False"
    )
    cli = error_line(["analyze", MNIST, *GNMAX, "--budget", budget])
    assert cli.startswith("--budget: the release's order, beta and sigma_ss")
    assert cli.endswith(": pass one order (--orders), --beta and --sigma-ss, or --no-release")


def test_a_budget_is_not_replaced_without_force(tmp_path: Path) -> None:
    budget = tmp_path / "budget.jsonl"
    pate.Budget.init(budget, delta=1e-5, max_epsilon=5)
    with pytest.raises(UsageError, match=r"pass force=True to start it again$"):
        pate.Budget.init(budget, delta=1e-5, max_epsilon=5)
    cli = error_line(["budget", "init", budget, "--delta", 1e-5, "--max-epsilon", 5])
    assert cli.endswith("pass --force to start it again")


def test_a_gate_on_released_without_a_release(votes) -> None:
    with pytest.raises(UsageError) as python:
        pate.compare(votes, [pate.GNMax(40)], delta=1e-5, gate_on="released", max_epsilon=1)
    assert str(python.value) == "gate_on='released': compare releases no epsilon"


def test_a_gate_on_a_private_figure(votes) -> None:
    gated = {"max_epsilon": 0.001, "gate_on": "data-dependent"}
    report = pate.analyze(votes, pate.GNMax(40), delta=1e-5, release=False, **gated)
    assert any(w.startswith("gate_on='data-dependent': the gate checks") for w in report.warnings)
    assert report.gate is not None and report.gate.message.endswith("exceeds max_epsilon=0.001")
    args = ["analyze", MNIST, *GNMAX, "--no-release", "--max-epsilon", 0.001]
    result = run_cli([*args, "--gate-on", "data-dependent"], expect=ExitCode.BUDGET_EXCEEDED)
    assert "warning: --gate-on data-dependent: the gate checks" in result.stderr
    assert "exceeds --max-epsilon 0.001" in result.stderr


# --------------------------------------------------------------------- verify


def test_verify_with_a_missing_opening(tmp_path: Path) -> None:
    record = tmp_path / "record.json"
    run_cli(["analyze", MNIST, *GNMAX, "--no-release", "--record", record])
    opening = tmp_path / "nope.json"
    with pytest.raises(InputError) as python:
        pate.verify(record, opening=opening)
    expected = "{}: no such file; expected the opening of the record"
    assert str(python.value) == expected.format(f"opening={str(opening)!r}")
    cli = error_line(["verify", record, "--opening", opening])
    assert cli == expected.format(f"--opening {opening}")


def test_verify_without_the_votes_file(tmp_path: Path, mnist_counts) -> None:
    votes = tmp_path / "votes.npy"
    np.save(votes, mnist_counts[:20])
    record = tmp_path / "record.json"
    run_cli(["analyze", votes, "--sigma", 40, "--delta", 1e-5, "--no-release", "--record", record])
    votes.rename(tmp_path / "moved.npy")
    missing = f"{record}: the votes file {votes} is not found; give it with "
    with pytest.raises(InputError) as python:
        pate.verify(record)
    assert str(python.value) == missing + "votes=PATH"
    assert error_line(["verify", record]) == missing + "--votes"


def test_verify_a_budget_with_records_that_are_no_folder(tmp_path: Path) -> None:
    budget = tmp_path / "budget.jsonl"
    pate.Budget.init(budget, delta=1e-5, max_epsilon=5)
    with pytest.raises(InputError) as python:
        pate.verify(budget, records=MNIST)
    assert str(python.value) == f"records={str(MNIST)!r}: not a folder of records"
    cli = error_line(["verify", budget, "--records", MNIST])
    assert cli == f"--records {MNIST}: not a folder of records"


# ---------------------------------------------------------------- the context


def test_the_command_line_leaves_python_its_words(votes) -> None:
    assert not spelling.on_command_line()
    error_line(["smooth-sensitivity", MNIST, *GNMAX, "--beta", 1.0])  # a failed run
    cli_warnings(["analyze", MNIST, *GNMAX, "--seed", 3])  # and a run that succeeds
    assert not spelling.on_command_line()
    with pytest.raises(UsageError, match=r"^beta=1\.0: "):
        pate.smooth_sensitivity(votes, pate.GNMax(40), delta=1e-5, beta=1.0)
    report = pate.analyze(votes, pate.GNMax(40), delta=1e-5, release="sample", seed=3)
    assert report.warnings and not any("--" in warning for warning in report.warnings)


def test_command_line_spells_flags_inside_the_block_only(votes) -> None:
    with spelling.command_line():
        with pytest.raises(UsageError, match=r"^--beta 1\.0: "):
            pate.smooth_sensitivity(votes, pate.GNMax(40), delta=1e-5, beta=1.0)
    with pytest.raises(UsageError, match=r"^beta=1\.0: "):
        pate.smooth_sensitivity(votes, pate.GNMax(40), delta=1e-5, beta=1.0)

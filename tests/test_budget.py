"""One privacy budget across releases: ``pate budget``, ``--budget``, ``pate verify BUDGET``.

The CLI and the library: a budget's round trip (init, charge, show, verify), a run over the
limit that writes and appends nothing (checked before any noise and again when the run
commits), the runs that have no account to charge (a release tuned on the votes, a public
seed, a seed file that already drew the same noise), the reports' ``budget`` block and
``pate verify RECORD``'s budget charge, every tampering of the file caught by ``pate verify
BUDGET``, and eight processes charging one budget at once. The composed totals themselves
are checked against an independent oracle in ``tests/oracle/test_budget_oracle.py``.
"""

from __future__ import annotations

import hashlib
import json
import math
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import pate_cli as pate
from pate_cli.budget import compose
from pate_cli.choices import Conversion
from pate_cli.errors import ExitCode, PateError, UsageError
from tests.conftest import MNIST, run_cli

DELTA = 1e-5
QUERIES = 20
GNMAX = ["--sigma", 40]
CONFIDENT = ["--threshold", 200, "--sigma1", 150, "--sigma", 40]
LNMAX = ["--gamma", 0.05]
# A GNSS release fixed in advance: one order, beta and sigma_ss.
RELEASE = ["--beta", 0.01, "--sigma-ss", 10]
BUDGET_BLOCK = {
    "path",
    "id",
    "name",
    "charge_index",
    "head",
    "spent",
    "limit",
    "remaining",
    "method",
    "delta",
    "conversion",
    "entries",
    "lines",
}
SHOW_KEYS = {
    "command",
    "path",
    "id",
    "name",
    "delta",
    "limit",
    "conversion",
    "entries",
    "notes",
    "lines",
    "head",
    "total",
    "spent",
    "method",
    "remaining",
}
# One budget vocabulary: what a run's block and ``budget show --json`` both say, by one name.
SHARED = {"path", "id", "head", "spent", "remaining", "limit", "delta", "method", "conversion"}


# ----------------------------------------------------------------------------- helpers


def gaussian(queries: int, sigma: float) -> dict:
    return {"kind": "gaussian", "mu": math.sqrt(2 * queries) / sigma}


def epsilon_of(accounts: list[dict], delta: float = DELTA) -> float:
    return compose(accounts, delta, Conversion.CLASSIC).epsilon


def canonical_digest(line: dict) -> str:
    """SHA-256 of the line's canonical JSON without its digest, written out here."""
    content = {key: value for key, value in line.items() if key != "digest"}
    text = json.dumps(content, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(text.encode()).hexdigest()


def lines_of(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def assert_chain(path: Path, entries: int) -> None:
    """Header then ``entries`` charges, every digest its content's, every prev the line before."""
    header, *charges = lines_of(path)
    assert header["schema"] == "pate-budget"
    assert header["digest"] == canonical_digest(header)
    assert len(charges) == entries
    prev = header["digest"]
    for charge in charges:
        assert charge["prev"] == prev
        assert charge["digest"] == canonical_digest(charge)
        prev = charge["digest"]


def init(path: Path, limit: float = 100.0, *extra) -> dict:
    args = ["budget", "init", path, "--delta", DELTA, "--max-epsilon", limit, "--json", *extra]
    return run_cli(args).json


def show(path: Path, *extra, expect: int = ExitCode.OK) -> dict:
    return run_cli(["budget", "show", path, "--json", *extra], expect=expect).json


def verify(path: Path, *extra, expect: int = ExitCode.OK) -> dict:
    return run_cli(["verify", path, "--json", *extra], expect=expect).json


def pinned(budget: Path) -> list:
    """``--head`` with the budget's head now: what its owner published after the last charge."""
    return ["--head", lines_of(budget)[-1]["digest"]]


def statuses(report: dict) -> dict[str, str]:
    return {check["name"]: check["status"] for check in report["checks"]}


def aggregate(
    folder: Path,
    name: str,
    budget: Path,
    *extra,
    mechanism: list = GNMAX,
    expect: int = ExitCode.OK,
):
    args = ["aggregate", MNIST, *mechanism, "--queries", QUERIES, "--delta", DELTA, "--json"]
    args += ["--output", folder / f"{name}.npy", "--budget", budget, *extra]
    return run_cli(args, expect=expect)


def analyze(budget: Path, *extra, expect: int = ExitCode.OK):
    args = ["analyze", MNIST, *GNMAX, "--queries", QUERIES, "--delta", DELTA, "--json"]
    return run_cli([*args, "--budget", budget, *extra], expect=expect)


def smooth(budget: Path, *extra, expect: int = ExitCode.OK):
    args = ["smooth-sensitivity", MNIST, *GNMAX, "--queries", QUERIES, "--delta", DELTA]
    return run_cli([*args, "--json", "--budget", budget, *extra], expect=expect)


def folder_state(folder: Path) -> dict[str, bytes]:
    """Every file under ``folder`` and its bytes."""
    return {
        str(p.relative_to(folder)): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()
    }


@pytest.fixture
def votes():
    return pate.load_votes(MNIST, queries=QUERIES)


# ----------------------------------------------------------------------------- init, show, verify


def test_init_show_and_verify_round_trip(tmp_path):
    budget = tmp_path / "team.budget.jsonl"
    made = init(budget, 8.0, "--name", "MNIST teachers", "--conversion", "improved")
    assert set(made) == SHOW_KEYS | {"kept"} and made["kept"] is None
    assert made["command"] == "budget" and made["name"] == "MNIST teachers"
    assert (made["delta"], made["limit"], made["conversion"]) == (DELTA, 8.0, "improved")
    assert made["entries"] == [] and made["remaining"] == 8.0
    assert made["total"] == {"epsilon": 0.0, "delta": DELTA, "method": "none"}
    assert_chain(budget, 0)
    header = lines_of(budget)[0]
    assert (header["delta"], header["max_epsilon"], header["name"]) == (
        DELTA,
        8.0,
        "MNIST teachers",
    )
    assert show(budget) == {key: value for key, value in made.items() if key != "kept"}
    assert made["head"] == made["id"] == header["digest"] and made["lines"] == 1
    # Without its records nothing shows a charge removed: never fully verified.
    report = verify(budget, expect=ExitCode.NOT_CHECKED)
    assert report["verdict"] == "incomplete"
    assert statuses(report) == {
        "file": "verified",
        "header": "verified",
        "chain": "verified",
        "no charge missing": "not-checked",
        "charges pinned": "verified",  # no charge to pin
        "total within the limit": "verified",
    }
    assert verify(budget, "--records", tmp_path)["verdict"] == "verified"


def test_a_budget_is_never_replaced_without_force(tmp_path):
    budget = tmp_path / "b.jsonl"
    init(budget)
    aggregate(tmp_path, "labels", budget)
    content = budget.read_bytes()
    refused = run_cli(
        ["budget", "init", budget, "--delta", DELTA, "--max-epsilon", 3], expect=ExitCode.BAD_INPUT
    )
    assert "--force" in refused.stderr
    assert budget.read_bytes() == content
    with pytest.raises(UsageError):
        pate.Budget.init(budget, delta=DELTA, max_epsilon=3)
    assert budget.read_bytes() == content
    head = lines_of(budget)[-1]["digest"]
    again = init(budget, 3.0, "--force")
    assert again["entries"] == [] and again["limit"] == 3.0
    assert_chain(budget, 0)
    # no charge is ever destroyed: the old budget is kept beside it, named by its head
    kept = tmp_path / f"b.{head[:12]}.jsonl"
    assert again["kept"] == str(kept) and kept.read_bytes() == content
    text = run_cli(["budget", "init", budget, "--delta", DELTA, "--max-epsilon", 2, "--force"])
    assert f"the old budget was kept as {tmp_path / 'b.'}" in text.stdout
    assert kept.read_bytes() == content  # the second start kept the first restart beside it
    assert len(list(tmp_path.glob("b.*.jsonl"))) == 2


@pytest.mark.parametrize(
    "args",
    [["--max-epsilon", "inf"], ["--max-epsilon", -1], ["--max-epsilon", "nan"]],
    ids=["inf", "negative", "nan"],
)
def test_init_refuses_a_limit_out_of_domain(tmp_path, args):
    budget = tmp_path / "b.jsonl"
    run_cli(["budget", "init", budget, "--delta", DELTA, *args], expect=ExitCode.BAD_INPUT)
    assert not budget.exists()


def test_init_refuses_an_unknown_conversion(tmp_path):
    budget = tmp_path / "b.jsonl"
    args = ["budget", "init", budget, "--delta", DELTA, "--max-epsilon", 1]
    run_cli([*args, "--conversion", "bogus"], expect=ExitCode.BAD_INPUT)
    assert not budget.exists()


def test_charges_of_every_command_compose_in_show_and_verify(tmp_path):
    """Each command's charge is its account; show lists them and their total, the reports
    carry the budget block, verify with --records matches every charge and record."""
    budget = tmp_path / "b.jsonl"
    init(budget, 50.0)
    reports = [
        aggregate(tmp_path, "gnmax", budget, "--record", tmp_path / "r1.json").json,
        aggregate(
            tmp_path,
            "confident",
            budget,
            "--max-queries",
            5,
            "--record",
            tmp_path / "r2.json",
            mechanism=CONFIDENT,
        ).json,
        analyze(budget, "--no-release", "--record", tmp_path / "r3.json").json,
        analyze(budget, "--orders", 20, *RELEASE, "--record", tmp_path / "r4.json").json,
        smooth(budget, "--order", 20, *RELEASE, "--record", tmp_path / "r5.json").json,
    ]
    payload = show(budget)
    entries = payload["entries"]
    assert [e["command"] for e in entries] == [
        "aggregate",
        "aggregate",
        "analyze",
        "analyze",
        "smooth-sensitivity",
    ]
    assert entries[0]["account"] == pytest.approx(gaussian(QUERIES, 40))
    # aggregate charges min(Q, --max-queries): 5 queries of Confident-GNMax, threshold step too
    assert entries[1]["num_queries"] == 5
    assert entries[1]["account"]["mu"] == pytest.approx(math.sqrt(5 / 150**2 + 10 / 40**2))
    assert entries[2]["account"] == pytest.approx(gaussian(QUERIES, 40))
    for released in entries[3:]:
        assert released["release"] == {"order": 20.0, "beta": 0.01, "sigma_ss": 10.0}
        assert released["account"]["kind"] == "rdp" and released["account"]["orders"] == [20.0]
        assert released["purposes"] == ["gnss-sample"]
    assert [e["record_digest"] for e in entries] == [
        json.loads((tmp_path / f"r{i}.json").read_text())["digest"] for i in range(1, 6)
    ]
    assert_chain(budget, 5)
    total = payload["total"]
    assert total["method"] == "rdp" and total["delta"] == DELTA
    assert total["epsilon"] == pytest.approx(epsilon_of([e["account"] for e in entries]), rel=1e-12)
    assert payload["remaining"] == pytest.approx(50.0 - total["epsilon"])
    # every report says what the budget had spent with it
    for number, report in enumerate(reports, start=1):
        block = report["budget"]
        assert set(block) == BUDGET_BLOCK | {"place"}  # each run wrote a record
        assert block["path"] == str(budget) and block["limit"] == 50.0
        assert block["entries"] == number
        spent = epsilon_of([e["account"] for e in entries[:number]])
        assert block["spent"] == pytest.approx(spent, rel=1e-12)
    # every charge carries its number, the one its run's block gave it
    assert [e["charge_index"] for e in entries] == [1, 2, 3, 4, 5]
    assert [r["budget"]["charge_index"] for r in reports] == [1, 2, 3, 4, 5]
    # one vocabulary: the last run's block says what show says, by the same names
    last = reports[-1]["budget"]
    assert {key: last[key] for key in SHARED} == {key: payload[key] for key in SHARED}
    assert payload["spent"] == total["epsilon"] and payload["method"] == total["method"]
    assert last["lines"] == payload["lines"] == 6 and last["entries"] == len(entries)
    # the library reads the same budget (its entries are the lines: no number added)
    opened = pate.Budget.open(budget)
    numbered = [{k: v for k, v in e.items() if k != "charge_index"} for e in entries]
    assert len(opened.entries) == 5 and opened.entries == numbered
    assert opened.total().epsilon == total["epsilon"] and opened.total().method == "rdp"
    assert opened.remaining == pytest.approx(payload["remaining"])
    # verify: the records are named, so without --records something is not checked
    unchecked = verify(budget, expect=ExitCode.NOT_CHECKED)
    assert unchecked["not_checked"] == ["no charge missing", "charges pinned"]
    verify(budget, "--allow-unchecked")
    # with them every charge is recomputed, yet rests on the owner's files until a head
    # published later pins it
    loose = verify(budget, "--records", tmp_path, expect=ExitCode.NOT_CHECKED)
    assert loose["not_checked"] == ["charges pinned"]
    report = verify(budget, "--records", tmp_path, *pinned(budget))
    assert report["verdict"] == "verified"
    assert statuses(report)["charges and their records"] == "verified"
    assert statuses(report)["records of this budget"] == "verified"
    assert statuses(report)["charges pinned"] == "verified"


def test_show_gates_the_total(tmp_path):
    budget = tmp_path / "b.jsonl"
    init(budget)
    aggregate(tmp_path, "labels", budget)
    spent = show(budget)["total"]["epsilon"]
    passed = show(budget, "--max-epsilon", spent * 1.01)
    assert passed["gate"] == {
        "on": "total",
        "epsilon": spent,
        "limit": spent * 1.01,
        "passed": True,
    }
    failed = show(budget, "--max-epsilon", spent * 0.99, expect=ExitCode.BUDGET_EXCEEDED)
    assert failed["gate"]["passed"] is False


# ----------------------------------------------------------------------------- over the limit


@pytest.fixture
def full_budget(tmp_path):
    """A budget whose one charge (GNMax sigma 40 on 100 queries) leaves room for nothing."""
    budget = tmp_path / "b.jsonl"
    spent = epsilon_of([gaussian(100, 40)])
    init(budget, spent * (1 + 1e-6))
    aggregate(tmp_path, "first", budget, "--queries", 100)
    return budget


@pytest.mark.parametrize(
    "command",
    [
        ["aggregate", *GNMAX, "--output", "labels.npy", "--answered-output", "mask.npy"],
        ["aggregate", *LNMAX, "--output", "labels.npy", "--seed-file", "fresh.seed"],
        ["analyze", *GNMAX, "--no-release"],
        ["analyze", *CONFIDENT, "--orders", 20, *RELEASE],
        ["smooth-sensitivity", *GNMAX, "--order", 20, *RELEASE],
    ],
    ids=["aggregate", "aggregate-seed-file", "analyze", "analyze-release", "smooth-sensitivity"],
)
def test_a_run_over_the_limit_writes_and_appends_nothing(
    tmp_path, full_budget, command, monkeypatch
):
    """Exit 4 (a refused charge, not a failed gate) before any noise is drawn (the aggregator
    never runs), with no file written, none left behind, and the budget's bytes as they
    were."""

    def never(*args, **kwargs):
        raise AssertionError("the aggregator ran")

    monkeypatch.setattr("pate_cli.jobs.aggregation._run", never)
    name, *options = command
    out = tmp_path / "out"
    out.mkdir()
    options = [out / o if str(o).endswith((".npy", ".seed")) else o for o in options]
    before, content = folder_state(tmp_path), full_budget.read_bytes()
    refused = run_cli(
        [name, MNIST, *options, "--queries", 3, "--delta", DELTA, "--budget", full_budget]
        + ["--record", out / "record.json"],
        expect=ExitCode.CHARGE_REFUSED,
    )
    assert "over the limit" in refused.stderr and "nothing was written" in refused.stderr
    assert refused.stdout == ""
    assert full_budget.read_bytes() == content
    assert folder_state(tmp_path) == before
    assert list(out.iterdir()) == []


def test_the_library_refuses_before_drawing_any_noise(tmp_path, full_budget, votes, monkeypatch):
    """pate.aggregate over the limit: BudgetExceeded (a UsageError, a ValueError) before the
    aggregator runs, and nothing appended."""

    def never(*args, **kwargs):
        raise AssertionError("the aggregator ran")

    monkeypatch.setattr("pate_cli.jobs.aggregation._run", never)
    content = full_budget.read_bytes()
    for budget in (full_budget, str(full_budget), pate.Budget.open(full_budget)):
        with pytest.raises(pate.BudgetExceeded, match="over the limit") as refused:
            pate.aggregate(votes, pate.GNMax(sigma=40), delta=DELTA, budget=budget)
        assert isinstance(refused.value, UsageError) and isinstance(refused.value, ValueError)
    with pytest.raises(pate.BudgetExceeded):
        pate.analyze(votes, pate.GNMax(sigma=40), delta=DELTA, release=False, budget=full_budget)
    with pytest.raises(pate.BudgetExceeded):
        pate.smooth_sensitivity(
            votes,
            pate.GNMax(sigma=40),
            delta=DELTA,
            order=20,
            beta=0.01,
            sigma_ss=10,
            budget=full_budget,
        )
    assert full_budget.read_bytes() == content
    assert issubclass(pate.BudgetExceeded, UsageError)
    assert pate.BudgetExceeded(".").exit_code == ExitCode.CHARGE_REFUSED == 4


def _spend_the_rest_meanwhile(budget: Path, monkeypatch) -> None:
    """While the run draws its noise, another run spends what the budget had left."""
    from pate_cli.budget import Charge
    from pate_cli.jobs import aggregation

    drawn = aggregation._run

    def meanwhile(*args, **kwargs):
        result = drawn(*args, **kwargs)
        pate.Budget.open(budget).charge(Charge("aggregate", pate.GNMax(sigma=40), 200))
        return result

    monkeypatch.setattr(aggregation, "_run", meanwhile)


def test_the_limit_is_checked_again_when_the_run_commits(tmp_path, monkeypatch):
    budget = tmp_path / "b.jsonl"
    # room for GNMax sigma 40 on 200 queries, not on 220
    init(budget, (epsilon_of([gaussian(200, 40)]) + epsilon_of([gaussian(220, 40)])) / 2)
    _spend_the_rest_meanwhile(budget, monkeypatch)
    out = tmp_path / "out"
    out.mkdir()
    refused = aggregate(
        out, "labels", budget, "--record", out / "r.json", expect=ExitCode.CHARGE_REFUSED
    )
    assert "over the limit" in refused.stderr
    assert list(out.iterdir()) == []
    # refused after the call: its JSON shows nothing it computed, as a refusal before it
    assert refused.json["answered"] is None and refused.json["privacy"] is None
    assert refused.json["budget"]["charge_index"] is None
    assert refused.json["budget"]["head"] == lines_of(budget)[-1]["digest"]
    assert_chain(budget, 1)
    assert lines_of(budget)[1]["num_queries"] == 200


def test_the_library_checks_the_limit_again_when_it_charges(tmp_path, monkeypatch, votes):
    budget = tmp_path / "b.jsonl"
    pate.Budget.init(
        budget,
        delta=DELTA,
        max_epsilon=(epsilon_of([gaussian(200, 40)]) + epsilon_of([gaussian(220, 40)])) / 2,
    )
    _spend_the_rest_meanwhile(budget, monkeypatch)
    with pytest.raises(pate.BudgetExceeded):
        pate.aggregate(votes, pate.GNMax(sigma=40), delta=DELTA, budget=budget)
    assert_chain(budget, 1)


# ----------------------------------------------------------------------------- no account to charge


@pytest.mark.parametrize(
    "args",
    [
        ["analyze"],  # a release whose order, beta and sigma_ss are chosen on the votes
        ["analyze", "--orders", "10,20", *RELEASE],  # two orders: chosen on the votes
        ["analyze", "--orders", 20, "--sigma-ss", 10],  # no beta
        ["analyze", "--orders", 20, "--beta", 0.01],  # no sigma_ss
        ["smooth-sensitivity", *RELEASE],  # no order
        ["smooth-sensitivity", "--order", 20, "--beta", 0.01],  # no sigma_ss
    ],
    ids=["analyze", "two-orders", "no-beta", "no-sigma-ss", "smooth-no-order", "smooth-no-ss"],
)
def test_a_release_not_fixed_in_advance_is_refused(tmp_path, args):
    budget = tmp_path / "b.jsonl"
    init(budget)
    content = budget.read_bytes()
    name, *options = args
    refused = run_cli(
        [name, MNIST, *GNMAX, "--queries", QUERIES, "--delta", DELTA, *options]
        + ["--budget", budget, "--record", tmp_path / "r.json"],
        expect=ExitCode.BAD_INPUT,
    )
    assert "fixed in advance" in refused.stderr
    assert budget.read_bytes() == content
    assert not (tmp_path / "r.json").exists()


def test_the_library_refuses_a_release_not_fixed_in_advance(tmp_path, votes):
    budget = tmp_path / "b.jsonl"
    pate.Budget.init(budget, delta=DELTA, max_epsilon=100)
    content = budget.read_bytes()
    with pytest.raises(UsageError, match="fixed in advance"):
        pate.analyze(votes, pate.GNMax(sigma=40), delta=DELTA, release="sample", budget=budget)
    with pytest.raises(UsageError, match="fixed in advance"):
        pate.smooth_sensitivity(votes, pate.GNMax(sigma=40), delta=DELTA, budget=budget)
    assert budget.read_bytes() == content
    # no release, the expected release (no draw) and a sample fixed in advance are charged
    pate.analyze(votes, pate.GNMax(sigma=40), delta=DELTA, release=False, budget=budget)
    expected = pate.analyze(votes, pate.GNMax(sigma=40), delta=DELTA, budget=budget)
    assert expected.release.epsilon_released is None
    report = pate.analyze(
        votes,
        pate.GNMax(sigma=40),
        delta=DELTA,
        orders=[20],
        beta=0.01,
        sigma_ss=10,
        release="sample",
        budget=budget,
    )
    assert report.budget["entries"] == 3
    assert_chain(budget, 3)
    _, no_release, expected_only, sampled = lines_of(budget)
    assert no_release["release"] is None and expected_only["release"] is None
    assert sampled["release"] == {"order": 20.0, "beta": 0.01, "sigma_ss": 10.0}


@pytest.mark.parametrize(
    "args",
    [
        ["aggregate", *GNMAX, "--output", "labels.npy"],
        ["analyze", *GNMAX, "--no-release"],
        ["smooth-sensitivity", *GNMAX, "--order", 20, *RELEASE],
    ],
    ids=["aggregate", "analyze", "smooth-sensitivity"],
)
def test_a_public_seed_is_refused(tmp_path, args):
    budget = tmp_path / "b.jsonl"
    init(budget)
    content = budget.read_bytes()
    name, *options = args
    options = [tmp_path / o if str(o).endswith(".npy") else o for o in options]
    refused = run_cli(
        [name, MNIST, *options, "--queries", QUERIES, "--delta", DELTA, "--seed", 7]
        + ["--budget", budget],
        expect=ExitCode.BAD_INPUT,
    )
    assert "--seed" in refused.stderr and "not a private release" in refused.stderr
    assert budget.read_bytes() == content
    assert not (tmp_path / "labels.npy").exists()


def test_the_library_refuses_a_public_seed_or_a_callers_generator(tmp_path, votes):
    budget = tmp_path / "b.jsonl"
    pate.Budget.init(budget, delta=DELTA, max_epsilon=100)
    content = budget.read_bytes()
    for seed in (7, np.random.default_rng(7)):
        with pytest.raises(UsageError, match="not a private release") as refused:
            pate.aggregate(votes, pate.GNMax(sigma=40), delta=DELTA, seed=seed, budget=budget)
        assert not isinstance(refused.value, pate.BudgetExceeded)
    assert budget.read_bytes() == content


def test_a_seed_file_is_charged_once_per_noise_purpose(tmp_path):
    budget = tmp_path / "b.jsonl"
    init(budget)
    seed = tmp_path / "run.seed"
    aggregate(tmp_path, "first", budget, "--seed-file", seed)
    assert lines_of(budget)[1]["purposes"] == ["aggregate-answer"]
    assert lines_of(budget)[1]["seed_commitment"] is not None
    content = budget.read_bytes()
    # the same seed file would draw the same answer noise: refused, naming the charge
    again = aggregate(tmp_path, "second", budget, "--seed-file", seed, expect=ExitCode.BAD_INPUT)
    assert "for charge 1 " in again.stderr and "aggregate-answer" in again.stderr
    assert not (tmp_path / "second.npy").exists()
    assert budget.read_bytes() == content
    # ... whatever the mechanism that would draw it (Confident-GNMax: threshold and answer)
    aggregate(
        tmp_path,
        "third",
        budget,
        "--seed-file",
        seed,
        mechanism=CONFIDENT,
        expect=ExitCode.BAD_INPUT,
    )
    # another purpose of the same seed file (the GNSS sample) is another stream
    smooth(budget, "--order", 20, *RELEASE, "--seed-file", seed)
    assert lines_of(budget)[2]["purposes"] == ["gnss-sample"]
    refused = smooth(budget, "--order", 20, *RELEASE, "--seed-file", seed, expect=2)
    assert "for charge 2 " in refused.stderr and "gnss-sample" in refused.stderr
    # a Confident-GNMax run's seed file drew both streams of the aggregator
    other = tmp_path / "other.seed"
    aggregate(tmp_path, "fourth", budget, "--seed-file", other, mechanism=CONFIDENT)
    assert lines_of(budget)[3]["purposes"] == ["aggregate-threshold", "aggregate-answer"]
    aggregate(tmp_path, "fifth", budget, "--seed-file", other, expect=ExitCode.BAD_INPUT)
    assert_chain(budget, 3)


def test_the_library_refuses_a_seed_file_already_charged(tmp_path, votes):
    budget = tmp_path / "b.jsonl"
    pate.Budget.init(budget, delta=DELTA, max_epsilon=100)
    seed = tmp_path / "run.seed"
    result = pate.aggregate(votes, pate.GNMax(sigma=40), delta=DELTA, seed_file=seed, budget=budget)
    assert result.budget["entries"] == 1
    content = budget.read_bytes()
    with pytest.raises(UsageError, match="for charge 1 ") as refused:
        pate.aggregate(votes, pate.LNMax(gamma=0.05), delta=DELTA, seed_file=seed, budget=budget)
    assert not isinstance(refused.value, pate.BudgetExceeded)
    assert budget.read_bytes() == content


# ----------------------------------------------------------------------------- the library


def test_the_library_round_trip(tmp_path, votes):
    path = tmp_path / "lib.jsonl"
    budget = pate.Budget.init(path, delta=DELTA, max_epsilon=5.0, name="library")
    assert budget.entries == [] and budget.remaining == 5.0
    assert (budget.total().epsilon, budget.total().method) == (0.0, "none")
    result = pate.aggregate(votes, pate.GNMax(sigma=40), delta=DELTA, budget=path)
    assert result.labels.shape == (QUERIES,)
    assert set(result.budget) == BUDGET_BLOCK and result.budget["entries"] == 1
    report = pate.analyze(votes, pate.LNMax(gamma=0.05), delta=DELTA, release=False, budget=budget)
    assert report.budget["entries"] == 2
    assert report.to_dict()["budget"] == report.budget
    smoothed = pate.smooth_sensitivity(
        votes, pate.GNMax(sigma=40), delta=DELTA, order=20, beta=0.01, sigma_ss=10, budget=budget
    )
    assert smoothed.budget["entries"] == 3
    opened = pate.Budget.open(path)
    assert [e["command"] for e in opened.entries] == [
        "aggregate",
        "analyze",
        "smooth-sensitivity",
    ]
    assert opened.entries[1]["account"] == {"kind": "pure", "epsilon0": 0.1, "count": QUERIES}
    total = opened.total()
    assert total.method == "rdp" and total.delta == DELTA
    assert total.epsilon == pytest.approx(smoothed.budget["spent"], rel=1e-12)
    assert opened.remaining == pytest.approx(5.0 - total.epsilon)
    assert opened.header["name"] == "library"
    assert_chain(path, 3)
    # library charges write no record: nothing to recompute them from, said by name
    checked = pate.verify(path, records=tmp_path)
    assert checked.verdict == "incomplete"
    assert checked.not_checked == ("charges without a record", "charges pinned")
    unrecorded = next(c for c in checked.checks if c.name == "charges without a record")
    assert unrecorded.detail.startswith("charges 1, 2, 3: no record was written")
    with pytest.raises(PateError):
        pate.Budget.open(tmp_path / "missing.jsonl")
    (tmp_path / "not.jsonl").write_text('{"schema": "something else"}\n')
    with pytest.raises(PateError, match="not a budget"):
        pate.Budget.open(tmp_path / "not.jsonl")


def test_an_aggregate_results_dict_carries_its_budget_block(tmp_path, votes):
    budget = tmp_path / "b.jsonl"
    pate.Budget.init(budget, delta=DELTA, max_epsilon=100)
    result = pate.aggregate(votes, pate.GNMax(sigma=40), delta=DELTA, budget=budget)
    assert result.to_dict()["budget"] == result.budget


def test_a_run_without_budget_leaves_the_report_without_a_block(tmp_path, votes):
    result = pate.aggregate(votes, pate.GNMax(sigma=40), delta=DELTA)
    assert result.budget is None
    report = run_cli(
        ["aggregate", MNIST, *GNMAX, "--queries", 5, "--delta", DELTA, "--json"]
        + ["--output", tmp_path / "l.npy"]
    ).json
    assert report.get("budget") is None


def test_a_charged_run_says_what_it_charged(tmp_path):
    """The text ends with the charge (spent rounded up, what is left rounded down, the head);
    the JSON block carries the same, and the record the budget's id, place and head."""
    budget = tmp_path / "b.jsonl"
    init(budget, 10.0)
    record = tmp_path / "r.json"
    text = aggregate(tmp_path, "l", budget, "--record", record)
    block = text.json["budget"]
    spent, head = block["spent"], block["head"]
    assert head == lines_of(budget)[-1]["digest"] and block["charge_index"] == 1
    assert block["remaining"] == pytest.approx(10.0 - spent, rel=1e-12)
    assert block["method"] == "gaussian-dp"
    args = ["aggregate", MNIST, *GNMAX, "--queries", QUERIES, "--delta", DELTA]
    shown = run_cli([*args, "--output", tmp_path / "m.npy", "--budget", budget]).stdout
    last = shown.splitlines()[-1]
    total = show(budget)["total"]["epsilon"]
    up = math.ceil(total * 1e4) / 1e4
    down = math.floor((10.0 - total) * 1e4) / 1e4
    assert last.startswith(f"charged {budget}: epsilon {up:.4f} of 10 spent, {down:.4f} left")
    assert last.endswith(f"(gaussian-dp); head {lines_of(budget)[-1]['digest']}")
    stored = json.loads(record.read_text())["report"]["budget"]
    assert stored == block and block["place"] == "b.jsonl"  # the budget from the record's folder


def test_would_charge_previews_a_run_and_draws_nothing(tmp_path, monkeypatch):
    """``budget show --would-charge -- <run>`` and ``Budget.preview``: the total the run would
    leave, nothing drawn or written; exit 4 when it would be refused, as the run would be."""

    def never(*args, **kwargs):
        raise AssertionError("the aggregator ran")

    monkeypatch.setattr("pate_cli.jobs.aggregation._run", never)
    budget = tmp_path / "b.jsonl"
    init(budget, epsilon_of([gaussian(150, 40)]))
    content = budget.read_bytes()
    run = ["aggregate", MNIST, *GNMAX, "--delta", DELTA, "--output", tmp_path / "l.npy"]
    fits = show(budget, "--would-charge", "--", *run, "--queries", 100)
    preview = fits["would_charge"]
    assert preview["account"] == pytest.approx(gaussian(100, 40))
    assert preview["would_spend"] == pytest.approx(epsilon_of([gaussian(100, 40)]), rel=1e-12)
    assert preview["within_limit"] is True and preview["total"]["method"] == "gaussian-dp"
    over = show(budget, "--would-charge", "--", *run, "--queries", 200, expect=4)
    assert over["would_charge"]["within_limit"] is False
    assert budget.read_bytes() == content and not (tmp_path / "l.npy").exists()
    # the library: the same numbers
    votes = pate.load_votes(MNIST, queries=100)
    library = pate.Budget.open(budget).preview(votes, pate.GNMax(sigma=40))
    assert library.to_dict() == preview
    smoothed = pate.Budget.open(budget).preview(
        MNIST,
        pate.GNMax(sigma=40),
        command="smooth_sensitivity",
        queries=100,
        order=20,
        beta=0.01,
        sigma_ss=10,
    )
    assert smoothed.account["kind"] == "rdp" and smoothed.account["orders"] == [20.0]
    with pytest.raises(UsageError, match="fixed in advance"):
        pate.Budget.open(budget).preview(
            votes, pate.GNMax(sigma=40), command="analyze", release="sample"
        )
    for bad in ([], ["inspect", MNIST], ["aggregate", MNIST, "--sigma"]):
        refused = run_cli(["budget", "show", budget, "--would-charge", "--", *bad], expect=2)
        assert (
            refused.stderr.startswith("pate: error: --would-charge")
            and refused.stderr.count("\n") == 1
        )
    run_cli(["budget", "show", budget, "--", *run], expect=ExitCode.BAD_INPUT)
    assert budget.read_bytes() == content


# ----------------------------------------------------------------------------- verify RECORD


def test_verify_record_checks_its_budget_charge(tmp_path):
    budget = tmp_path / "b.jsonl"
    init(budget)
    seed = tmp_path / "run.seed"
    record = tmp_path / "r.json"
    aggregate(tmp_path, "labels", budget, "--seed-file", seed, "--record", record)
    report = verify(record, "--seed-file", seed)
    assert report["verdict"] == "verified"
    assert statuses(report)["budget charge"] == "verified"
    # the charge's line removed (the last one: the chain alone cannot see it)
    header = budget.read_text().splitlines(keepends=True)[0]
    budget.write_text(header)
    report = verify(record, "--seed-file", seed, expect=ExitCode.BUDGET_EXCEEDED)
    assert report["verdict"] == "differs" and statuses(report)["budget charge"] == "differs"


def test_verify_record_of_a_run_without_budget_has_no_budget_check(tmp_path):
    record = tmp_path / "r.json"
    run_cli(
        ["aggregate", MNIST, *GNMAX, "--queries", 5, "--delta", DELTA]
        + ["--output", tmp_path / "l.npy", "--record", record, "--quiet"]
    )
    report = verify(record, expect=ExitCode.NOT_CHECKED)
    assert "budget charge" not in statuses(report)


# ----------------------------------------------------------------------------- tampering


@pytest.fixture(scope="module")
def charged(tmp_path_factory) -> tuple[Path, Path, bytes]:
    """A budget of four charges, each with its record in the budget's folder."""
    folder = tmp_path_factory.mktemp("charged")
    budget = folder / "b.jsonl"
    init(budget, 100.0, "--name", "team")
    aggregate(folder, "gnmax", budget, "--record", folder / "r1.json")
    aggregate(folder, "lnmax", budget, "--record", folder / "r2.json", mechanism=LNMAX)
    analyze(budget, "--no-release", "--record", folder / "r3.json")
    smooth(budget, "--order", 20, *RELEASE, "--record", folder / "r4.json")
    verify(budget, "--records", folder, *pinned(budget))
    return budget, folder, budget.read_bytes()


def _flip(text: str) -> str:
    """A hex digest with its last digit changed; other text with a letter added."""
    if text and all(c in "0123456789abcdef" for c in text):
        return text[:-1] + ("0" if text[-1] != "0" else "1")
    return text + "x"


def mutated(key: str, value):
    """The value of ``key`` changed, in a form a budget line can hold."""
    if key == "conversion":
        return "improved" if value == "classic" else "classic"
    if key == "release":
        return (
            {"order": 21.0, "beta": 0.01, "sigma_ss": 10.0}
            if value is None
            else {**value, "order": value["order"] + 1}
        )
    if key == "purposes":
        return value[:-1] if value else ["aggregate-answer"]
    if isinstance(value, dict):  # mechanism, account: every number scaled
        return {
            k: ([x * 1.5 for x in v] if isinstance(v, list) else v * 1.5)
            if isinstance(v, float | list)
            else v
            for k, v in value.items()
        } | ({"count": value["count"] + 1} if "count" in value else {})
    if isinstance(value, bool):
        return not value
    if isinstance(value, int):
        return value + 1
    if isinstance(value, float):
        return value * 2
    if isinstance(value, str):
        return _flip(value)
    return "x"  # None


def edited(raw: str, key: str, *, recompute: bool) -> str:
    line = json.loads(raw)
    line[key] = mutated(key, line[key])
    assert json.loads(raw)[key] != line[key]
    if recompute:
        line["digest"] = canonical_digest(line)
    return json.dumps(line) + "\n"


def _editable(raw: str, *, recompute: bool) -> list[str]:
    # "schema" makes the file no budget at all; a digest recomputed undoes its own edit
    return [k for k in json.loads(raw) if k != "schema" and not (recompute and k == "digest")]


TAMPERINGS = [
    "edit",
    "edit-and-digest",
    "delete",
    "delete-last",
    "duplicate",
    "swap",
]


@pytest.mark.parametrize("kind", TAMPERINGS)
@settings(max_examples=60, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_every_tampering_is_caught_by_verify(charged, kind, data):
    """Any one line edited (its digest left, or recomputed on a line that has a next), any
    line but the first removed (the last: seen with --records), a line duplicated anywhere,
    two lines swapped: pate verify BUDGET exits 1."""
    budget, folder, original = charged
    lines = original.decode().splitlines(keepends=True)
    last = len(lines) - 1
    extra: list = []
    if kind == "edit":
        i = data.draw(st.integers(0, last), label="line")
        key = data.draw(st.sampled_from(_editable(lines[i], recompute=False)), label="key")
        lines[i] = edited(lines[i], key, recompute=False)
    elif kind == "edit-and-digest":
        i = data.draw(st.integers(0, last - 1), label="line")
        key = data.draw(st.sampled_from(_editable(lines[i], recompute=True)), label="key")
        lines[i] = edited(lines[i], key, recompute=True)
    elif kind == "delete":
        del lines[data.draw(st.integers(1, last - 1), label="line")]
    elif kind == "delete-last":
        del lines[last]
        extra = ["--records", folder]
    elif kind == "duplicate":
        i = data.draw(st.integers(1, last), label="line")
        lines.insert(data.draw(st.integers(1, last + 1), label="at"), lines[i])
    else:
        i, j = sorted(data.draw(st.sets(st.integers(1, last), min_size=2, max_size=2), "lines"))
        lines[i], lines[j] = lines[j], lines[i]
    try:
        budget.write_text("".join(lines))
        report = verify(budget, *extra, expect=ExitCode.BUDGET_EXCEEDED)
        assert report["verdict"] == "differs"
    finally:
        budget.write_bytes(original)


def test_a_last_line_removed_is_seen_only_with_the_records(charged):
    budget, folder, original = charged
    try:
        budget.write_bytes(b"".join(original.splitlines(keepends=True)[:-1]))
        report = verify(budget, expect=ExitCode.NOT_CHECKED)
        assert statuses(report)["chain"] == "verified"
        report = verify(budget, "--records", folder, expect=ExitCode.BUDGET_EXCEEDED)
        assert statuses(report)["records of this budget"] == "differs"
        detail = next(
            c["detail"] for c in report["checks"] if c["name"] == "records of this budget"
        )
        assert "r4.json" in detail
    finally:
        budget.write_bytes(original)


@pytest.mark.parametrize("change", ["delete", "swap", "duplicate"])
def test_the_header_moved_or_removed_is_caught_as_a_difference(charged, change):
    budget, _, original = charged
    lines = original.decode().splitlines(keepends=True)
    if change == "delete":
        del lines[0]
    elif change == "swap":
        lines[0], lines[1] = lines[1], lines[0]
    else:
        lines.insert(2, lines[0])
    try:
        budget.write_text("".join(lines))
        verify(budget, expect=ExitCode.BUDGET_EXCEEDED)
    finally:
        budget.write_bytes(original)


@pytest.mark.parametrize(
    ("line", "key", "value"),
    [
        (0, "conversion", "bogus"),
        (0, "max_epsilon", "x"),
        (1, "account", {"kind": "bogus", "mu": 0.1}),
        (1, "account", {"kind": "gaussian"}),
        (1, "account", {"kind": "gaussian", "mu": "x"}),
    ],
    ids=["conversion", "max-epsilon", "account-kind", "account-no-mu", "account-mu-text"],
)
def test_a_value_edited_into_another_form_is_caught(charged, line, key, value):
    budget, _, original = charged
    lines = original.decode().splitlines(keepends=True)
    content = json.loads(lines[line])
    content[key] = value
    lines[line] = json.dumps(content) + "\n"
    try:
        budget.write_text("".join(lines))
        result = run_cli(["verify", budget, "--json"], expect=ExitCode.BUDGET_EXCEEDED)
        assert json.loads(result.stdout)["verdict"] == "differs"
    finally:
        budget.write_bytes(original)


def test_a_last_line_removed_is_seen_from_another_working_directory(tmp_path, monkeypatch):
    run = tmp_path / "run"
    run.mkdir()
    monkeypatch.chdir(run)
    init(Path("b.jsonl"))
    for i in (1, 2):
        aggregate(Path("."), f"l{i}", Path("b.jsonl"), "--record", f"r{i}.json")
    budget = run / "b.jsonl"
    budget.write_bytes(b"".join(budget.read_bytes().splitlines(keepends=True)[:-1]))
    monkeypatch.chdir(tmp_path)
    verify(budget, "--records", run, expect=ExitCode.BUDGET_EXCEEDED)


# ----------------------------------------------------------------------------- eight at once


def _eight_at_once(folder: Path, budget: Path) -> list[subprocess.CompletedProcess]:
    """Eight processes charging GNMax sigma 40 on 100 queries to one budget, started together."""
    processes = [
        subprocess.Popen(
            [sys.executable, "-m", "pate_cli", "aggregate", str(MNIST), "--sigma", "40"]
            + ["--queries", "100", "--delta", str(DELTA), "--quiet"]
            + ["--output", str(folder / f"labels{i}.npy"), "--budget", str(budget)],
            cwd=folder,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for i in range(8)
    ]
    done = []
    for process in processes:
        stdout, stderr = process.communicate(timeout=120)
        done.append(subprocess.CompletedProcess(process.args, process.returncode, stdout, stderr))
    return done


def test_eight_processes_charging_at_once_leave_eight_entries(tmp_path):
    budget = tmp_path / "b.jsonl"
    init(budget)
    done = _eight_at_once(tmp_path, budget)
    assert [p.returncode for p in done] == [0] * 8, [p.stderr for p in done]
    assert_chain(budget, 8)
    assert verify(budget, expect=ExitCode.NOT_CHECKED)["differs"] == []
    total = show(budget)["total"]
    assert total["method"] == "gaussian-dp"
    assert total["epsilon"] == pytest.approx(epsilon_of([gaussian(800, 40)]), rel=1e-12)


def test_eight_processes_at_once_on_a_limit_that_fits_five(tmp_path):
    one = gaussian(100, 40)  # mu = sqrt(200) / 40: five compose to sqrt(5) mu
    five, six = epsilon_of([one] * 5), epsilon_of([one] * 6)
    assert five == pytest.approx(epsilon_of([{"kind": "gaussian", "mu": math.sqrt(5) * one["mu"]}]))
    budget = tmp_path / "b.jsonl"
    init(budget, (five + six) / 2)
    done = _eight_at_once(tmp_path, budget)
    codes = [p.returncode for p in done]
    assert sorted(codes) == [0] * 5 + [ExitCode.CHARGE_REFUSED] * 3, [p.stderr for p in done]
    for i, process in enumerate(done):
        labels = tmp_path / f"labels{i}.npy"
        if process.returncode == 0:
            assert labels.exists()
        else:
            assert "over the limit" in process.stderr
            assert not labels.exists()
    assert_chain(budget, 5)
    report = verify(budget, expect=ExitCode.NOT_CHECKED)
    assert report["differs"] == [] and report["not_checked"] == [
        "no charge missing",
        "charges pinned",
    ]
    assert show(budget)["total"]["epsilon"] == pytest.approx(five, rel=1e-12)


def test_new_inputs_and_options_refused_with_one_line_and_nothing_written(tmp_path):
    """--budget, --opening and verify's --records and --opening, each given something they
    cannot use: exit 2, one line naming it, nothing written."""
    folder = tmp_path / "out"
    folder.mkdir()
    labels = folder / "l.npy"
    aggregate = ["aggregate", MNIST, "--sigma", 40, "--delta", DELTA, "--queries", 50]
    budget = tmp_path / "b.jsonl"
    pate.Budget.init(budget, delta=DELTA, max_epsilon=100)
    record = folder / "r.json"
    run_cli([*aggregate, "--output", labels, "--record", record, "--budget", budget])
    before = {p.name: p.read_bytes() for p in folder.iterdir()}
    not_a_budget = tmp_path / "nb.jsonl"
    not_a_budget.write_text('{"schema": "something else"}\n')
    cases = [
        (
            [*aggregate, "--output", folder / "x.npy", "--budget", tmp_path / "none.jsonl"],
            "none.jsonl",
        ),
        ([*aggregate, "--output", folder / "x.npy", "--budget", not_a_budget], "nb.jsonl"),
        ([*aggregate, "--output", folder / "x.npy", "--opening", folder / "o.json"], "--opening"),
        (["verify", budget, "--records", tmp_path / "nowhere"], "--records"),
        (["verify", record, "--records", folder], "--records"),
        (["verify", record, "--opening", not_a_budget], "--opening"),
        (["budget", "init", budget, "--delta", DELTA, "--max-epsilon", 1], "exists"),
    ]
    for args, named in cases:
        result = run_cli(args, expect=ExitCode.BAD_INPUT)
        line = result.stderr.strip()
        assert "\n" not in line and named in line and line.startswith("pate: error: "), args
    assert {p.name: p.read_bytes() for p in folder.iterdir()} == before
    assert len(budget.read_text().splitlines()) == 2

"""One JSON for CI and one budget vocabulary.

A charge refused over the budget's limit exits 4 (a failed gate exits 1) and, with
``--json``, prints the object the run prints: what the run read and was given as the run
prints it, everything the call computes null. A run's ``budget`` block and ``budget show
--json`` say ``spent``, ``remaining``, ``limit`` and ``delta`` by the same names, and every
charge carries its number, 1 for the first, notes not counted: the same number in the run's
block, ``budget show`` (JSON and text), its record and ``verify``. A record made before
charges were numbered apart from notes (its ``charge_index`` the line's place after the
header, its block without ``lines``) still verifies.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from pate_cli.errors import ExitCode
from pate_cli.records.record import record_digest
from tests.conftest import MNIST, run_cli
from tests.test_budget_audit import rechain, write_lines
from tests.test_budget_faults import aggregate, kill_at, lines_of

DELTA = 1e-5
RELEASE = ["--beta", 0.01, "--sigma-ss", 10]
CONFIDENT = ["--threshold", 200, "--sigma1", 150, "--sigma", 40]
RUNS = {
    "analyze": ["analyze", MNIST, "--sigma", 40, "--no-release"],
    "analyze-release": ["analyze", MNIST, *CONFIDENT, "--orders", 20, *RELEASE],
    "smooth-sensitivity": ["smooth-sensitivity", MNIST, "--sigma", 40, "--order", 20, *RELEASE],
    "aggregate": ["aggregate", MNIST, *CONFIDENT, "--output", "labels.npy"],
}
# What the run read and was given: a refused run prints them as the run does.
READ = ("command", "input", "mechanism", "delta", "conversion")
# The budget block of a charged run, and what a refusal adds to it.
BLOCK = {"path", "id", "charge_index", "head", "spent", "limit", "remaining", "method"}
BLOCK |= {"delta", "conversion", "entries", "lines"}
REFUSAL = BLOCK | {"refused", "would_spend"}


def init(budget: Path, limit: float) -> dict:
    args = ["budget", "init", budget, "--delta", DELTA, "--max-epsilon", limit, "--json"]
    return run_cli(args).json


def command(name: str, folder: Path, *extra) -> list:
    """The run ``name`` of ``RUNS`` on 20 queries, its outputs in ``folder``."""
    args = [folder / a if a == "labels.npy" else a for a in RUNS[name]]
    return [*args, "--queries", 20, "--delta", DELTA, "--json", *extra]


# ----------------------------------------------------------------------------- a refused charge


@pytest.mark.parametrize("gate", [False, True], ids=["no-gate", "gate"])
@pytest.mark.parametrize("name", list(RUNS))
def test_a_refused_run_prints_the_runs_object_with_null_for_what_it_did_not_compute(
    tmp_path, name, gate
):
    budget = tmp_path / "b.jsonl"
    made = init(budget, 0.01)  # no run fits
    before = budget.read_bytes()
    gated = ["--max-epsilon", 5] if gate else []
    (tmp_path / "refused").mkdir()
    refused = run_cli(
        command(name, tmp_path / "refused", *gated, "--budget", budget),
        expect=ExitCode.CHARGE_REFUSED,
    )
    assert refused.stderr.startswith("pate: error: ") and "over the limit" in refused.stderr
    assert budget.read_bytes() == before and not list((tmp_path / "refused").iterdir())
    (tmp_path / "run").mkdir()
    ran = run_cli(command(name, tmp_path / "run", *gated)).json
    payload = refused.json
    # every key the run prints, none absent: one filter reads both
    assert set(ran) <= set(payload)
    assert {key: payload[key] for key in READ} == {key: ran[key] for key in READ}
    computed = set(payload) - set(READ) - {"gate", "budget"}
    assert computed and all(payload[key] is None for key in computed), payload
    if gate:
        assert ran["gate"]["limit"] == 5.0
        on = ran["gate"]["on"]
        assert payload["gate"] == {"on": on, "epsilon": None, "limit": 5.0, "passed": None}
    else:
        assert "gate" not in payload and "gate" not in ran
    # the budget as it stands, in a charged run's words, and what the run would have left
    block = payload["budget"]
    assert set(block) == REFUSAL and block["refused"] is True
    assert block["charge_index"] is None and block["head"] == block["id"] == made["id"]
    assert (block["spent"], block["remaining"], block["limit"]) == (0.0, 0.01, 0.01)
    assert (block["entries"], block["lines"], block["delta"]) == (0, 1, DELTA)
    assert block["would_spend"] > 0.01


def test_a_refused_public_run_prints_the_public_object(tmp_path):
    budget = tmp_path / "b.jsonl"
    init(budget, 0.01)
    (tmp_path / "run").mkdir()
    (tmp_path / "refused").mkdir()
    public = ["--public", "--max-epsilon", 5]
    payload = run_cli(
        command("aggregate", tmp_path / "refused", *public, "--budget", budget),
        expect=ExitCode.CHARGE_REFUSED,
    ).json
    ran = run_cli(command("aggregate", tmp_path / "run", *public)).json
    assert set(payload) == set(ran) | {"budget"}
    assert {key: payload[key] for key in (*READ, "num_queries")} == {
        key: ran[key] for key in (*READ, "num_queries")
    }
    assert "path" not in payload["input"] and "sha256" not in payload["input"]
    assert payload["publishable"] is None and payload["gate"]["passed"] is None


def test_a_refused_charge_and_a_failed_gate_exit_apart(tmp_path):
    """CI tells them apart by the code: a gate over its --max-epsilon is 1 (the run is
    charged and its report printed), a charge over the budget's limit 4 (nothing ran)."""
    budget = tmp_path / "b.jsonl"
    init(budget, 1.0)
    failed = run_cli(
        command("analyze", tmp_path, "--max-epsilon", 0.001, "--budget", budget),
        expect=ExitCode.BUDGET_EXCEEDED,
    )
    assert failed.json["gate"]["passed"] is False and failed.json["budget"]["charge_index"] == 1
    refused = run_cli(
        command("analyze", tmp_path, "--queries", 2000, "--budget", budget),
        expect=ExitCode.CHARGE_REFUSED,
    )
    assert refused.json["budget"]["spent"] == failed.json["budget"]["spent"]
    assert refused.json["budget"]["head"] == failed.json["budget"]["head"]
    assert len(lines_of(budget)) == 2


# ----------------------------------------------------------------------------- charge numbers


@pytest.fixture
def noted(tmp_path) -> tuple[Path, Path, dict]:
    """A budget whose first charge's run was killed before its release (noted no-release on
    line 3) and whose second charge (line 4) has its record ``out/labels.json``."""
    votes = tmp_path / "votes.npy"
    np.save(votes, np.random.default_rng(0).multinomial(250, np.full(10, 0.1), size=20))
    out = tmp_path / "out"
    out.mkdir()
    budget = tmp_path / "b.jsonl"
    init(budget, 50.0)
    kill_at("append", aggregate(votes, out, budget, name="killed"))
    report = run_cli(aggregate(votes, out, budget)).json
    return budget, out, report


def test_charges_are_numbered_apart_from_notes_everywhere(noted):
    budget, out, report = noted
    _, first, note, second = lines_of(budget)
    assert note["note"] == "no-release" and note["charge"] == first["digest"]
    block = report["budget"]
    assert (block["charge_index"], block["entries"], block["lines"]) == (2, 2, 4)
    shown = run_cli(["budget", "show", budget, "--json"]).json
    assert [entry["charge_index"] for entry in shown["entries"]] == [1, 2]
    assert shown["lines"] == block["lines"] and shown["spent"] == block["spent"]
    rows = [row.split() for row in run_cli(["budget", "show", budget]).stdout.splitlines()]
    numbered = [row[1] for row in rows if len(row) > 2 and row[3] == "aggregate"]
    assert numbered == ["1", "2"]
    checked = run_cli(["verify", budget, "--records", out, "--json"], expect=3).json
    details = {check["name"]: check["detail"] for check in checked["checks"]}
    assert checked["differs"] == []
    assert details["charged, no release"].startswith("charge 1 (noted on line 3)")
    record = run_cli(["verify", out / "labels.json", "--json"], expect=3).json
    charge = next(c for c in record["checks"] if c["name"] == "budget charge")
    assert charge["status"] == "verified" and "charge 2 is this record's charge" in charge["detail"]


def _restamp(budget: Path, record_path: Path, edit, version: int | None = None) -> None:
    """The record's budget block edited (and its version set), its digest recomputed, its
    line made to name it and the chain recomputed, the head after it stamped back into the
    block."""
    record = json.loads(record_path.read_text())
    edit(record["report"]["budget"])
    record["version"] = version or record["version"]
    record["digest"] = record_digest(record)
    lines = lines_of(budget)
    lines[-1]["record_digest"] = record["digest"]
    lines = rechain(lines)
    write_lines(budget, lines)
    record["report"]["budget"]["head"] = lines[-1]["digest"]
    record_path.write_text(json.dumps(record, indent=2))


def test_a_record_made_before_charge_numbers_still_verifies(noted):
    """Its ``charge_index`` counted the note (3, the line's place after the header), its block
    has no ``lines`` and it is of version 5: read as it was written, it verifies."""
    budget, out, _ = noted

    def older(block: dict) -> None:
        block["charge_index"] = 3
        for field in ("lines", "place", "name"):
            del block[field]

    _restamp(budget, out / "labels.json", older, version=5)
    checked = run_cli(["verify", budget, "--records", out, "--json"], expect=3).json
    assert checked["differs"] == [], checked
    record = run_cli(["verify", out / "labels.json", "--json"], expect=3).json
    assert "budget charge" not in record["differs"]
    # The same block in a record of version 6, which holds them all, differs: a field taken
    # out makes no record older.
    _restamp(budget, out / "labels.json", lambda block: None, version=6)
    checked = run_cli(["verify", budget, "--records", out, "--json"], expect=1).json
    details = {check["name"]: check["detail"] for check in checked["checks"]}
    assert (
        "its record's budget block lacks place, name, lines"
        in (details["charges and their records"])
    )


def test_a_record_numbering_its_charge_by_its_line_differs(noted):
    """A record of today (its block has ``lines``) whose ``charge_index`` is its line's place
    rather than its number differs, by name."""
    budget, out, _ = noted

    def misnumbered(block: dict) -> None:
        block["charge_index"] = 3

    _restamp(budget, out / "labels.json", misnumbered)
    checked = run_cli(["verify", budget, "--records", out, "--json"], expect=1).json
    details = {check["name"]: check["detail"] for check in checked["checks"]}
    assert "its charge number is 2 here, its record says 3" in details["records of this budget"]
    assert "charge 2 (" in details["charges and their records"]
    assert "its charge number is 2 here, its record says 3" in details["charges and their records"]


# ----------------------------------------------------------------------------- nothing released


def test_a_charged_run_that_released_nothing_says_why_it_was_charged(tmp_path):
    budget = tmp_path / "b.jsonl"
    init(budget, 100.0)
    why = "nothing was released, yet the run is charged its GNSS release"
    base = ["smooth-sensitivity", MNIST, "--queries", 20, "--delta", DELTA, *RELEASE]
    # At order 2 both steps of GNMax sigma 200 are data-independent: nothing to release.
    nothing = run_cli([*base, "--sigma", 200, "--order", 2, "--budget", budget]).stdout
    assert "nothing to release" in nothing
    last = nothing.splitlines()[-1]
    assert last.startswith(why) and "depends on the votes" in last
    released = run_cli([*base, "--sigma", 40, "--order", 20, "--budget", budget]).stdout
    assert "nothing to release" not in released and why not in released
    uncharged = run_cli([*base, "--sigma", 200, "--order", 2]).stdout
    assert why not in uncharged


def test_aggregate_json_names_its_delta_and_conversion(tmp_path):
    report = run_cli(command("aggregate", tmp_path)).json
    assert (report["delta"], report["conversion"]) == (DELTA, "classic")
    assert report["delta"] == report["privacy"]["delta"]

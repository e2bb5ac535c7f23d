"""What pins a budget, and what rests on its owner's word: the forger's moves.

The forger holds the budget and every record: each move edits them, then recomputes every
public digest (the records' and the chain's) so that nothing is left for a checksum to
catch. ``pate verify BUDGET`` must say ``differs`` (exit 1) or "not fully verified" (exit 3)
naming the charges, from any working folder and whatever the file is called now; it exits 0
only where a head or a record published outside the owner's reach pins the charges, or
their records were replayed from their votes.
"""

from __future__ import annotations

import json
import math
import os
import shutil
from pathlib import Path

import pytest

import pate_cli as pate
from pate_cli.errors import ExitCode
from pate_cli.records.record import record_digest
from tests.conftest import MNIST, run_cli
from tests.test_budget import canonical_digest, lines_of
from tests.test_budget_audit import rechain, write_lines

DELTA = 1e-5
RUNS = 4  # charges, one record each: releases/<n>/record.json


def verify(budget: Path, *extra, expect: int) -> dict:
    return run_cli(["verify", budget, "--json", *extra], expect=expect).json


def check(report: dict, name: str) -> dict:
    (found,) = [c for c in report["checks"] if c["name"] == name]
    return found


def head_after(budget: Path, number: int) -> list:
    """``--head`` with the head after charge ``number`` (no note in these budgets)."""
    return ["--head", lines_of(budget)[number]["digest"]]


def record_of(folder: Path, number: int) -> Path:
    return folder / "releases" / str(number) / "record.json"


@pytest.fixture(scope="module")
def made(tmp_path_factory) -> Path:
    folder = tmp_path_factory.mktemp("pinned")
    budget = folder / "team.budget.jsonl"
    run_cli(["budget", "init", budget, "--delta", DELTA, "--max-epsilon", 50, "--name", "team"])
    for n in range(1, RUNS + 1):
        out = folder / "releases" / str(n)
        out.mkdir(parents=True)
        run_cli(
            ["aggregate", MNIST, "--sigma", 40, "--queries", 100, "--delta", DELTA, "-q"]
            + ["--output", out / "labels.npy", "--record", out / "record.json"]
            + ["--budget", budget]
        )
    return folder


@pytest.fixture
def team(made, tmp_path) -> Path:
    """A fresh copy of the team's folder (the budget and its releases) to forge."""
    folder = tmp_path / "team"
    shutil.copytree(made, folder)
    return folder


def restamp(folder: Path, number: int, edit) -> None:
    """The forger's move on charge ``number``'s record: ``edit(record)``, its digest
    recomputed, its line made to name it, the chain recomputed from there, and every later
    record's head stamped again (each record names the head after its charge)."""
    budget = folder / "team.budget.jsonl"
    record = json.loads(record_of(folder, number).read_text())
    edit(record)
    record["digest"] = record_digest(record)
    lines = lines_of(budget)
    lines[number]["record_digest"] = record["digest"]
    lines = rechain(lines)
    write_lines(budget, lines)
    record_of(folder, number).write_text(json.dumps(record))
    for later in range(number, RUNS + 1):
        path = record_of(folder, later)
        if path.exists():
            kept = json.loads(path.read_text())
            kept["report"]["budget"]["head"] = lines[later]["digest"]
            path.write_text(json.dumps(kept))


# ----------------------------------------------------------------------------- the verdict


def test_charges_rest_on_the_owners_files_until_a_head_pins_them(team):
    budget, releases = team / "team.budget.jsonl", team / "releases"
    loose = verify(budget, "--records", releases, expect=ExitCode.NOT_CHECKED)
    assert loose["differs"] == [] and loose["not_checked"] == ["charges pinned"]
    assert check(loose, "charges pinned")["detail"].startswith(
        "charges 1, 2, 3, 4 rest on the owner's files"
    )
    half = verify(budget, "--records", releases, *head_after(budget, 2), expect=3)
    detail = check(half, "charges pinned")["detail"]
    assert detail.startswith("charges 3, 4 rest on the owner's files")
    assert "charges 1, 2 pinned by head" in detail
    whole = verify(budget, "--records", releases, *head_after(budget, RUNS), expect=0)
    assert check(whole, "charges pinned")["detail"].startswith("charges 1, 2, 3, 4 pinned by head")
    assert whole["verdict"] == "verified"
    # An auditor may accept what rests on the owner's files, and the verdict still says so.
    accepted = verify(budget, "--records", releases, "--allow-unchecked", expect=0)
    assert accepted["verdict"] == "incomplete"


def test_a_published_record_pins_its_charge_and_those_before(team):
    budget, releases = team / "team.budget.jsonl", team / "releases"
    published = team / "published"
    published.mkdir()
    shutil.copy(record_of(team, 3), published / "record.json")
    report = verify(budget, "--records", releases, "--published-records", published, expect=3)
    detail = check(report, "charges pinned")["detail"]
    assert (
        detail.startswith("charge 4 rests") and "charges 1, 2, 3 pinned by the published" in detail
    )
    # The forger rewrites the history before it (charge 2's queries cut, record and line
    # alike): the published record's head is no longer in the chain.
    restamp(team, 2, lambda record: record["call"]["votes"].update(queries=10))
    forged = verify(budget, "--records", releases, "--published-records", published, expect=1)
    assert check(forged, f"published record {published / 'record.json'}")["status"] == "differs"


def test_records_replayed_from_their_votes_pin_their_charges(tmp_path):
    """Runs that draw no noise (analyze --no-release: its figures are the votes') are
    recomputed from their votes whole, every check made: their charges are pinned."""
    budget = tmp_path / "seeded.budget.jsonl"
    run_cli(["budget", "init", budget, "--delta", DELTA, "--max-epsilon", 50, "--name", "seeded"])
    for n in (1, 2):
        out = tmp_path / "releases" / str(n)
        out.mkdir(parents=True)
        run_cli(
            ["analyze", MNIST, "--sigma", 40 * n, "--queries", 100, "--delta", DELTA, "-q"]
            + ["--no-release", "--record", out / "record.json", "--budget", budget]
        )
    report = verify(budget, "--records", tmp_path / "releases", "--votes", MNIST, expect=0)
    assert check(report, "records replayed")["detail"].startswith("charges 1, 2 recomputed")
    assert check(report, "charges pinned")["detail"].startswith("charges 1, 2 replayed")


def test_a_replay_whose_random_sample_cannot_be_drawn_again_pins_nothing(team):
    """The team's runs drew their noise from OS entropy: a replay recomputes their figures
    from the votes but cannot check that the labels came from the recorded sigma, so a
    forger who rewrites sigma in a charge and its record alike would pass it. They are named
    among the records not replayed, and rest on the owner's files."""
    budget, releases = team / "team.budget.jsonl", team / "releases"
    report = verify(budget, "--records", releases, "--votes", MNIST, expect=3)
    skipped = check(report, "records not replayed")
    assert skipped["status"] == "not-checked"
    assert skipped["detail"].startswith("charges 1, 2, 3, 4: charge 1: random sample not checked")
    assert check(report, "charges pinned")["detail"].startswith("charges 1, 2, 3, 4 rest on")
    assert all(c["name"] != "records replayed" for c in report["checks"])


def test_a_record_lowered_with_its_line_rests_on_the_owner_or_differs(team):
    """Charge 4 lowered from 100 queries to 10, record, report and line alike: without a head
    after it or a replay, not fully verified naming it; replayed, it differs; against a head
    published after it, the chain differs."""
    budget, releases = team / "team.budget.jsonl", team / "releases"
    honest_head = head_after(budget, RUNS)

    def lowered(record: dict) -> None:
        record["call"]["votes"]["queries"] = 10
        record["report"]["input"]["num_queries"] = 10
        record["argv"] = [("10" if a == "100" else a) for a in record["argv"]]

    restamp(team, 4, lowered)
    line = lines_of(budget)[4]
    line["num_queries"], line["account"]["mu"] = 10, line["account"]["mu"] / 10**0.5
    write_lines(budget, rechain(lines_of(budget)[:4] + [line]))
    kept = json.loads(record_of(team, 4).read_text())
    kept["report"]["budget"]["spent"] = pate.Budget.open(budget).total().epsilon
    kept["digest"] = record_digest(kept)
    record_of(team, 4).write_text(json.dumps(kept))
    lines = lines_of(budget)
    lines[4]["record_digest"] = kept["digest"]
    write_lines(budget, rechain(lines))
    kept["report"]["budget"]["head"] = lines_of(budget)[4]["digest"]
    record_of(team, 4).write_text(json.dumps(kept))
    loose = verify(budget, "--records", releases, *head_after(budget, 3), expect=3)
    assert check(loose, "charges pinned")["detail"].startswith("charge 4 rests")
    replayed = verify(budget, "--records", releases, "--votes", MNIST, expect=1)
    assert check(replayed, "records replayed")["detail"].startswith("charge 4 (")
    pinned = verify(budget, "--records", releases, *honest_head, expect=1)
    assert pinned["differs"][0].startswith("head ")


# ----------------------------------------------------------------------------- records by content


def _recreate(budget: Path, name: str | None = "team") -> None:
    """The forger's restart: a new header (a new id), every charge dropped."""
    header = {**lines_of(budget)[0], "created": "2026-12-02T00:00:00+00:00", "name": name}
    header["digest"] = canonical_digest(header)
    write_lines(budget, [header])


@pytest.mark.parametrize("where", ["its folder", "the parent folder", "renamed"])
def test_a_budget_re_created_here_differs_from_any_folder(team, monkeypatch, where):
    budget = team / "team.budget.jsonl"
    _recreate(budget)
    if where == "renamed":
        budget = budget.rename(team / "other.jsonl")
    monkeypatch.chdir(team.parent if where == "the parent folder" else team)
    relative = Path(os.path.relpath(budget)), Path(os.path.relpath(team / "releases"))
    report = verify(relative[0], "--records", relative[1], expect=1)
    assert report["differs"] == ["a budget re-created here"]
    assert (
        "charged to a budget at this place or of this name"
        in (check(report, "a budget re-created here")["detail"])
    )


def test_a_budget_re_created_with_an_honest_charge_still_differs(team):
    budget = team / "team.budget.jsonl"
    _recreate(budget)
    out = team / "releases" / "new"
    out.mkdir()
    run_cli(
        ["aggregate", MNIST, "--sigma", 40, "--queries", 20, "--delta", DELTA, "-q"]
        + ["--output", out / "labels.npy", "--record", out / "record.json", "--budget", budget]
    )
    report = verify(budget, "--records", team / "releases", *head_after(budget, 1), expect=1)
    assert report["differs"] == ["a budget re-created here"]
    assert check(report, "records of this budget")["detail"].startswith("1 records")


def test_a_budget_re_created_renamed_and_unnamed_is_not_fully_verified(team):
    """No name, and not at the place its records give: nothing ties them to it, and nothing
    lets it pass for their budget either."""
    budget = team / "team.budget.jsonl"
    _recreate(budget, name=None)
    renamed = budget.rename(team / "other.jsonl")
    report = verify(renamed, "--records", team / "releases", expect=3)
    assert report["differs"] == []
    assert "records of a budget not at its place" in report["not_checked"]


def test_a_budget_started_again_keeps_the_old_one_for_its_records(team):
    """``budget init --force``: the new header names the budget it replaces, kept beside it,
    whose records are then neither this budget's nor a forgery."""
    budget = team / "team.budget.jsonl"
    old = lines_of(budget)
    run_cli(["budget", "init", budget, "--delta", DELTA, "--max-epsilon", 50, "--force", "-q"])
    replaces = lines_of(budget)[0]["replaces"]
    assert replaces == {
        "id": old[0]["digest"],
        "head": old[-1]["digest"],
        "kept": f"team.budget.{old[-1]['digest'][:12]}.jsonl",
    }
    report = verify(budget, "--records", team / "releases", *head_after(budget, 0), expect=0)
    assert check(report, "records of the budget started again from")["status"] == "verified"
    (team / replaces["kept"]).unlink()  # the old budget gone: its records are unaccounted for
    gone = verify(budget, "--records", team / "releases", *head_after(budget, 0), expect=1)
    assert gone["differs"] == ["records of the budget started again from"]


@pytest.mark.parametrize("rechained", [False, True], ids=["digests left", "rechained"])
def test_a_kept_budget_edited_is_not_the_one_started_again_from(team, rechained):
    """The budget kept beside one started again is read as a budget is: a charge lowered in
    it, its digests left as they were (its first and last lines untouched) or every digest
    recomputed (the forger's move), is found."""
    budget = team / "team.budget.jsonl"
    run_cli(["budget", "init", budget, "--delta", DELTA, "--max-epsilon", 50, "--force", "-q"])
    kept = team / lines_of(budget)[0]["replaces"]["kept"]
    lines = lines_of(kept)
    assert len(lines) >= 3  # a charge between the header and the last line
    middle = dict(lines[1])
    middle["account"] = {**middle["account"], "epsilon": 0.001}
    edited = [*lines[:1], middle, *lines[2:]]
    write_lines(kept, rechain(edited) if rechained else edited)
    report = verify(budget, "--records", team / "releases", *head_after(budget, 0), expect=1)
    assert report["differs"] == ["records of the budget started again from"]
    detail = check(report, "records of the budget started again from")["detail"]
    assert detail.startswith(kept.name + ": ")
    if not rechained:
        assert "line 2: its digest does not match its content (edited)" in detail


def test_records_of_another_budget_at_its_place_are_listed(team, tmp_path):
    other = tmp_path / "other.jsonl"
    run_cli(["budget", "init", other, "--delta", DELTA, "--max-epsilon", 5, "-q"])
    out = team / "releases" / "theirs"
    out.mkdir()
    run_cli(
        ["aggregate", MNIST, "--sigma", 40, "--queries", 20, "--delta", DELTA, "-q"]
        + ["--output", out / "labels.npy", "--record", out / "record.json", "--budget", other]
    )
    budget = team / "team.budget.jsonl"
    report = verify(budget, "--records", team / "releases", *head_after(budget, RUNS), expect=0)
    assert check(report, "records of other budgets")["detail"].startswith(
        f"{out / 'record.json'} (budget "
    )


# ----------------------------------------------------------------------------- current records


def test_a_middle_charge_deleted_and_later_records_stripped_differs(team):
    """Charge 2 and its record deleted, the budget fields taken out of the later records (as
    if made before pate recorded them), every digest recomputed: a record of the current
    version holds them all, so both verify BUDGET and verify RECORD say it differs."""
    budget = team / "team.budget.jsonl"
    shutil.rmtree(record_of(team, 2).parent)
    lines = lines_of(budget)
    del lines[2]
    write_lines(budget, rechain(lines))
    for number in (3, 4):
        path = record_of(team, number)
        record = json.loads(path.read_text())
        for field in ("charge_index", "spent", "head"):
            del record["report"]["budget"][field]
        record["digest"] = record_digest(record)
        path.write_text(json.dumps(record))
    lines = lines_of(budget)
    for place, number in ((2, 3), (3, 4)):
        lines[place]["record_digest"] = json.loads(record_of(team, number).read_text())["digest"]
    write_lines(budget, rechain(lines))
    report = verify(budget, "--records", team / "releases", expect=1)
    detail = check(report, "charges and their records")["detail"]
    assert "its record's budget block lacks charge_index, head, spent" in detail
    record = run_cli(["verify", record_of(team, 3), "--json"], expect=1).json
    assert "budget charge" in record["differs"]


def test_a_charge_made_a_note_differs(team):
    """A charge line given a note's keys (``note``, ``charge``: an earlier charge), the chain
    recomputed: its account would leave the total; a note holds no account."""
    budget = team / "team.budget.jsonl"
    lines = lines_of(budget)
    lines[3] = {**lines[3], "note": "no-release", "charge": lines[2]["digest"]}
    write_lines(budget, rechain(lines))
    report = verify(budget, "--records", team / "releases", expect=1)
    assert report["differs"][0] == "chain"
    assert check(report, "chain")["detail"].startswith("line 4: a note with a charge's fields")
    shown = run_cli(["budget", "show", budget], expect=ExitCode.BAD_INPUT)
    assert "a note with a charge's fields" in shown.stderr


# ----------------------------------------------------------------------------- the charge map


def _gaussian_epsilon(mu: float, delta: float) -> float:
    """The epsilon of mu-GDP at ``delta`` (Dong, Roth and Su, Corollary 2.13), solved here."""
    from scipy.optimize import brentq
    from scipy.stats import norm

    def excess(eps: float) -> float:
        return norm.cdf(-eps / mu + mu / 2) - math.exp(eps) * norm.cdf(-eps / mu - mu / 2) - delta

    return brentq(excess, 0.0, 100.0, xtol=1e-14)


def test_budget_show_maps_every_charge_to_its_record(team):
    budget = team / "team.budget.jsonl"
    shutil.rmtree(record_of(team, 2).parent)  # charge 2's record lost
    extra = team / "releases" / "stray"
    extra.mkdir()
    removed = lines_of(budget)[:4]  # charge 4 removed with the chain kept: its record remains
    write_lines(budget, removed)
    shown = run_cli(["budget", "show", budget, "--records", team / "releases", "--json"]).json
    rows = shown["charges"]
    assert [row["charge_index"] for row in rows] == [1, 2, 3]
    assert [row["record"] for row in rows] == [
        str(record_of(team, 1)),
        None,
        str(record_of(team, 3)),
    ]
    mu = lines_of(budget)[1]["account"]["mu"]
    for k, row in enumerate(rows, start=1):
        assert row["epsilon"] == pytest.approx(_gaussian_epsilon(mu, DELTA), rel=1e-6)
        assert row["epsilon"] >= _gaussian_epsilon(mu, DELTA)  # never below the truth
        running = _gaussian_epsilon(mu * math.sqrt(k), DELTA)
        assert row["running_epsilon"] == pytest.approx(running, rel=1e-6)
    assert rows[-1]["running_epsilon"] == shown["total"]["epsilon"]
    assert shown["records_of_no_charge"] == [
        {
            "record": str(record_of(team, 4)),
            "budget_id": lines_of(budget)[0]["digest"],
            "kind": "this",
        }
    ]
    text = run_cli(["budget", "show", budget, "--records", team / "releases"]).stdout
    assert f"record of no charge: {record_of(team, 4)}: names this budget" in " ".join(text.split())


def test_budget_show_refuses_records_that_are_not_a_folder(team):
    budget = team / "team.budget.jsonl"
    for given in (record_of(team, 1), team / "missing"):
        done = run_cli(["budget", "show", budget, "--records", given], expect=ExitCode.BAD_INPUT)
        assert done.stderr == f"pate: error: --records {given}: not a folder of records\n"
        assert done.stdout == ""


def test_a_sample_from_the_seed_file_its_command_line_names_is_replayed(tmp_path):
    """A run drawn from --seed-file: the budget's replay reads the seed file the record's
    command line names, where it is, and so checks the random sample too (pinned); with the
    seed file gone, the sample is not checked and the charge rests on the owner's files."""
    budget = tmp_path / "seeded.budget.jsonl"
    run_cli(["budget", "init", budget, "--delta", DELTA, "--max-epsilon", 50, "--name", "seeded"])
    out = tmp_path / "releases" / "1"
    out.mkdir(parents=True)
    seed = tmp_path / "march.seed"
    run_cli(
        ["aggregate", MNIST, "--sigma", 40, "--queries", 100, "--delta", DELTA, "-q"]
        + ["--seed-file", seed, "--output", out / "labels.npy", "--record", out / "record.json"]
        + ["--budget", budget]
    )
    report = verify(budget, "--records", tmp_path / "releases", "--votes", MNIST, expect=0)
    assert check(report, "charges pinned")["detail"].startswith("charge 1 replayed")
    seed.unlink()
    report = verify(budget, "--records", tmp_path / "releases", "--votes", MNIST, expect=3)
    detail = check(report, "records not replayed")["detail"]
    assert detail.startswith("charge 1: charge 1: random sample not checked")

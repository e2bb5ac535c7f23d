"""A budget that cannot lie: every charge checked against its record, heads that pin the past,
verdicts that do not reward deletion.

Each forgery is made the forger's way: a field of a budget line (or of the header) edited,
then every digest and ``prev`` after it recomputed, so the chain holds. ``pate verify BUDGET
--records DIR`` must still say ``differs`` (exit 1) and name what differs, and so must the
budget check of ``pate verify RECORD`` for the record of the edited line. The corpus is
every field of every line; the forgeries of the issue that found the gap are tests of their
own.
"""

from __future__ import annotations

import json
import math
import shutil
from pathlib import Path

import pytest

import pate_cli as pate
from pate_cli.budget.audit import record_charge_checks
from pate_cli.errors import ExitCode, UsageError
from pate_cli.records.record import load_record, record_digest
from tests.conftest import MNIST, run_cli
from tests.test_budget import canonical_digest, lines_of

DELTA = 1e-5
LIMIT = 50.0
GNMAX = ["--sigma", 40]
CONFIDENT = ["--threshold", 200, "--sigma1", 150, "--sigma", 40]
LNMAX = ["--gamma", 0.05]
RELEASE = ["--order", 14, "--beta", 0.03, "--sigma-ss", 6]


# ----------------------------------------------------------------------------- the forger's tools


def write_lines(path: Path, lines: list[dict]) -> None:
    path.write_text("".join(json.dumps(line) + "\n" for line in lines))


def rechain(lines: list[dict]) -> list[dict]:
    """Every digest recomputed from the top and every ``prev`` relinked: the forger's move."""
    out, prev = [], None
    for number, line in enumerate(lines):
        line = dict(line)
        if number:
            line["prev"] = prev
        line["digest"] = canonical_digest(line)
        prev = line["digest"]
        out.append(line)
    return out


def forge(path: Path, edit) -> None:
    """Apply ``edit`` to the parsed lines, rechain, write back."""
    lines = lines_of(path)
    edit(lines)
    write_lines(path, rechain(lines))


def changed(key: str, value):
    """Another value of the same kind, as a forger would write it."""
    if isinstance(value, bool):
        return not value
    if isinstance(value, int):
        return value + 1 if key != "num_queries" else max(value // 10, 1)
    if isinstance(value, float):
        return value / 10 if key in ("mu", "gamma", "epsilon0") else value * 2
    if isinstance(value, str):
        if key == "conversion":
            return "improved" if value == "classic" else "classic"
        if key == "command":
            return "analyze" if value != "analyze" else "aggregate"
        return value[:-1] + ("0" if value[-1:] != "0" else "1")
    if isinstance(value, list) and value and all(isinstance(v, float) for v in value):
        return [v * 2 for v in value]  # an RDP account's orders or values
    if isinstance(value, list):
        return value[:-1] if value else ["aggregate-answer"]
    if isinstance(value, dict):
        if "kind" in value:  # an account: every number scaled down
            return {k: changed(k, v) if k != "kind" else v for k, v in value.items()}
        if "order" in value:  # a release
            return {**value, "sigma_ss": value["sigma_ss"] * 2}
        return {k: changed(k, v) if k != "name" else v for k, v in value.items()}  # a mechanism
    if value is None:
        return "0" * 64
    raise AssertionError(f"no edit for {key}={value!r}")


def verify(path: Path, *extra, expect: int) -> dict:
    return run_cli(["verify", path, "--json", *extra], expect=expect).json


def pinned(budget: Path) -> list:
    """``--head`` with the budget's head now: what its owner published after the last charge."""
    return ["--head", lines_of(budget)[-1]["digest"]]


def status(report: dict, name: str) -> str:
    return next(c["status"] for c in report["checks"] if c["name"] == name)


def detail(report: dict, name: str) -> str:
    return next(c["detail"] for c in report["checks"] if c["name"] == name)


def charge_of_record(path: Path) -> list:
    """The budget check of ``pate verify RECORD --budget BUDGET`` (the copy's budget)."""
    budget = path.parent.parent.parent / "team.budget.jsonl"
    return record_charge_checks(load_record(str(path)), str(path), str(budget))


# ----------------------------------------------------------------------------- a budget and its records


def _charged_folder(folder: Path) -> tuple[Path, Path]:
    """A budget of five charges, each with its record under ``releases/<run>/`` (records in
    subfolders, as a CI pipeline keeps them), one of them public."""
    budget, releases = folder / "team.budget.jsonl", folder / "releases"
    run_cli(["budget", "init", budget, "--delta", DELTA, "--max-epsilon", LIMIT, "-q"])
    runs = {
        "gnmax": ["aggregate", MNIST, *GNMAX, "--queries", 100, "--seed-file", folder / "a.seed"],
        "confident": ["aggregate", MNIST, *CONFIDENT, "--queries", 200],
        "lnmax": ["analyze", MNIST, *LNMAX, "--queries", 50, "--no-release"],
        "release": ["smooth-sensitivity", MNIST, *CONFIDENT, "--queries", 200, *RELEASE],
        "public": [
            "smooth-sensitivity",
            MNIST,
            *GNMAX,
            "--queries",
            100,
            *RELEASE,
            "--seed-file",
            folder / "p.seed",
            "--public",
        ],
    }
    for name, args in runs.items():
        run = releases / name
        run.mkdir(parents=True)
        outputs = ["--output", run / "labels.npy"] if args[0] == "aggregate" else []
        run_cli(
            [*args, "--delta", DELTA, *outputs, "--record", run / "record.json"]
            + ["--budget", budget, "-q"]
        )
    return budget, releases


@pytest.fixture(scope="module")
def original(tmp_path_factory) -> Path:
    return tmp_path_factory.mktemp("audit")


@pytest.fixture(scope="module")
def made(original) -> tuple[Path, Path]:
    return _charged_folder(original)


@pytest.fixture
def charged(made, tmp_path) -> tuple[Path, Path]:
    """A fresh copy of the budget and its records for one test to forge."""
    budget, releases = made
    folder = tmp_path / "copy"
    shutil.copytree(budget.parent, folder)
    return folder / budget.name, folder / releases.name


RECORD_OF_LINE = {2: "gnmax", 3: "confident", 4: "lnmax", 5: "release", 6: "public"}


def test_the_honest_budget_verifies_with_its_records(charged):
    budget, releases = charged
    report = verify(budget, "--records", releases, *pinned(budget), expect=ExitCode.OK)
    assert report["verdict"] == "verified", report
    assert "5 charges recomputed" in detail(report, "charges and their records")
    assert detail(report, "records of this budget").startswith("5 records name this budget")
    for name in RECORD_OF_LINE.values():
        (check,) = charge_of_record(releases / name / "record.json")
        assert check.ok, check
    # each record names the budget's id, its place in the chain and the head after it
    lines = lines_of(budget)
    for number, name in RECORD_OF_LINE.items():
        record = json.loads((releases / name / "record.json").read_text())
        block = record["report"]["budget"]
        assert block["id"] == lines[0]["digest"]
        assert block["charge_index"] == number - 1  # no note: charge n on line n + 1
        assert block["lines"] == number
        assert block["head"] == lines[number - 1]["digest"]
        assert lines[number - 1]["record_digest"] == record["digest"] == record_digest(record)
        assert (block["delta"], block["limit"], block["conversion"]) == (DELTA, LIMIT, "classic")


# ----------------------------------------------------------------------------- the corpus


def _line_fields() -> list[tuple[int, str]]:
    """(line, key) of every field of every charge line but its digest and prev (the forger
    recomputes those)."""
    example = {
        "command",
        "created",
        "mechanism",
        "num_queries",
        "half_even",
        "release",
        "account",
        "record_digest",
        "seed_commitment",
        "purposes",
    }
    return [(line, key) for line in RECORD_OF_LINE for key in sorted(example)]


@pytest.mark.parametrize(("number", "key"), _line_fields(), ids=lambda v: str(v))
def test_every_field_of_every_charge_edited_and_rechained_differs(charged, number, key):
    """The forger's move on one field of one line: ``verify BUDGET --records`` exits 1
    naming the charge by its number, and the budget check of that line's record differs."""
    budget, releases = charged

    def edit(lines):
        line = lines[number - 1]
        line[key] = changed(key, line[key])

    forge(budget, edit)
    report = verify(budget, "--records", releases, expect=ExitCode.BUDGET_EXCEEDED)
    record = releases / RECORD_OF_LINE[number] / "record.json"
    if key == "record_digest":  # the line names no record: the record has no line
        assert status(report, "records of this budget") == "differs"
        assert str(record) in detail(report, "records of this budget")
    else:
        assert status(report, "charges and their records") == "differs"
        named = detail(report, "charges and their records")
        assert named.startswith(f"charge {number - 1} "), named
        what = "the head after it" if key == "created" else key
        assert what in named.split(";")[0], named
    (check,) = charge_of_record(record)
    assert check.status == "differs", check


HEADER_EDITS = {
    "version": 2,
    "name": "another budget",
    "delta": 0.5,
    "max_epsilon": 1e9,
    "conversion": "improved",
    "created": "2020-01-01T00:00:00+00:00",
}


@pytest.mark.parametrize(("key", "value"), HEADER_EDITS.items(), ids=list(HEADER_EDITS))
def test_every_field_of_the_header_edited_and_rechained_differs(charged, key, value):
    """A header edited and the whole chain recomputed: its digest is no longer the id every
    record names, so every charge differs from its record."""
    budget, releases = charged

    def edit(lines):
        lines[0][key] = value

    forge(budget, edit)
    report = verify(budget, "--records", releases, expect=ExitCode.BUDGET_EXCEEDED)
    if key == "version":  # a version pate does not read is a header it refuses outright
        assert status(report, "header") == "differs"
        return
    assert status(report, "charges and their records") == "differs"
    assert "the budget's id" in detail(report, "charges and their records")
    for name in RECORD_OF_LINE.values():
        (check,) = charge_of_record(releases / name / "record.json")
        assert check.status == "differs"


def test_a_full_verify_record_names_the_edited_field(charged):
    """The whole ``pate verify RECORD`` (its replay and its budget check) of the record of
    an edited line exits 1 on its budget charge, naming the field."""
    budget, releases = charged

    def edit(lines):
        lines[2]["num_queries"] = 20  # line 3: Confident-GNMax, 200 queries
        lines[2]["account"]["mu"] = math.sqrt(20 / 150**2 + 40 / 40**2)

    forge(budget, edit)
    record = releases / "confident" / "record.json"
    report = verify(record, "--budget", budget, expect=ExitCode.BUDGET_EXCEEDED)
    assert report["differs"] == ["budget charge"]
    assert "num_queries is 20, its record gives 200" in detail(report, "budget charge")


# ----------------------------------------------------------------------------- the forgeries


def _spent(budget: Path) -> float:
    return run_cli(["budget", "show", budget, "--json"]).json["total"]["epsilon"]


def test_a_confident_charge_cut_from_200_to_20_queries_differs(charged):
    budget, releases = charged
    before = _spent(budget)

    def edit(lines):
        lines[2]["num_queries"] = 20
        lines[2]["account"]["mu"] = math.sqrt(20 / 150**2 + 40 / 40**2)  # self-consistent

    forge(budget, edit)
    assert _spent(budget) < before  # the forgery would hide spending
    report = verify(budget, "--records", releases, expect=ExitCode.BUDGET_EXCEEDED)
    assert status(report, "chain") == "verified"  # its own account matches its own fields
    assert "charge 2 " in detail(report, "charges and their records")
    assert "num_queries is 20, its record gives 200" in detail(report, "charges and their records")


def test_an_lnmax_gamma_divided_by_ten_differs(charged):
    budget, releases = charged

    def edit(lines):
        lines[3]["mechanism"]["gamma"] /= 10
        lines[3]["account"]["epsilon0"] /= 10

    forge(budget, edit)
    report = verify(budget, "--records", releases, expect=ExitCode.BUDGET_EXCEEDED)
    assert status(report, "chain") == "verified"
    assert "charge 3 " in detail(report, "charges and their records")
    assert "mechanism" in detail(report, "charges and their records")


def test_sigma_and_sigma1_doubled_differ(charged):
    """The issue's numbers: doubling sigma1 and sigma of a Confident charge shrinks what it
    spends; the record still says what was run."""
    budget, releases = charged

    def edit(lines):
        line = lines[2]
        line["mechanism"]["sigma1"] *= 2
        line["mechanism"]["sigma"] *= 2
        line["account"]["mu"] /= 2

    forge(budget, edit)
    report = verify(budget, "--records", releases, expect=ExitCode.BUDGET_EXCEEDED)
    assert status(report, "chain") == "verified"
    assert "charge 2 " in detail(report, "charges and their records")


@pytest.mark.parametrize(
    ("key", "value"),
    [("delta", 0.5), ("max_epsilon", 1e9), ("conversion", "improved")],
)
def test_the_header_raised_or_reconverted_differs(charged, key, value):
    budget, releases = charged

    def edit(lines):
        lines[0][key] = value

    forge(budget, edit)
    report = verify(budget, "--records", releases, expect=ExitCode.BUDGET_EXCEEDED)
    assert status(report, "header") == "verified"  # a header that holds in itself
    assert "the budget's id" in detail(report, "charges and their records")
    (check,) = charge_of_record(releases / "gnmax" / "record.json")
    assert check.status == "differs"


def test_a_seed_commitment_zeroed_differs_and_a_second_release_is_refused(charged):
    """Zeroing a line's seed commitment would let the same seed file draw the same noise
    again: the audit sees the zeroed line; the seed file's second use is refused as long as
    the line is honest."""
    budget, releases = charged
    seed = budget.parent / "a.seed"
    again = ["aggregate", MNIST, *GNMAX, "--queries", 10, "--delta", DELTA, "--seed-file", seed]
    out = budget.parent / "again.npy"
    run_cli([*again, "--output", out, "--budget", budget], expect=ExitCode.BAD_INPUT)
    assert not out.exists()

    def edit(lines):
        lines[1]["seed_commitment"] = None

    forge(budget, edit)
    report = verify(budget, "--records", releases, expect=ExitCode.BUDGET_EXCEEDED)
    assert "seed_commitment" in detail(report, "charges and their records")


def test_an_own_account_edited_on_the_last_line_differs(charged):
    """The last charge's account alone edited, its digest recomputed: its own parameters and
    its record both give another account (the check that only lines with a next line were
    ever tampered in would miss it)."""
    budget, releases = charged

    def edit(lines):
        lines[-1]["account"]["rdp"] = [r / 10 for r in lines[-1]["account"]["rdp"]]

    forge(budget, edit)
    alone = verify(budget, expect=ExitCode.BUDGET_EXCEEDED)
    assert "charge 5 (line 6): its account is not its own parameters'" in detail(alone, "chain")
    report = verify(budget, "--records", releases, expect=ExitCode.BUDGET_EXCEEDED)
    assert report["verdict"] == "differs"


def test_the_last_charge_rewritten_consistently_differs_only_against_its_record(charged):
    """The last charge's queries and account rewritten together: the line holds in itself,
    so only its record shows it."""
    budget, releases = charged

    def edit(lines):
        line = lines[-1]
        line["num_queries"] = 10
        line["account"] = pate.budget.account_of(
            pate.GNMax(sigma=40), 10, release=pate.budget.Release(14.0, 0.03, 6.0)
        )

    forge(budget, edit)
    alone = verify(budget, expect=ExitCode.NOT_CHECKED)
    assert alone["differs"] == []
    report = verify(budget, "--records", releases, expect=ExitCode.BUDGET_EXCEEDED)
    assert "charge 5 " in detail(report, "charges and their records")
    assert "account" in detail(report, "charges and their records")


def test_a_consistent_chain_over_its_limit_differs(charged):
    """A limit rewritten below what was spent, the chain recomputed: the total is composed
    again and is over it."""
    budget, _ = charged

    def edit(lines):
        lines[0]["max_epsilon"] = 1.0

    forge(budget, edit)
    report = verify(budget, expect=ExitCode.BUDGET_EXCEEDED)
    assert status(report, "total within the limit") == "differs"
    assert "of 1 at delta" in detail(report, "total within the limit")


# ----------------------------------------------------------------------------- deletion is never rewarded


def test_a_budget_cut_back_to_its_header_is_never_cleaner(charged):
    budget, releases = charged
    honest = verify(budget, expect=ExitCode.NOT_CHECKED)
    assert honest["not_checked"] == ["no charge missing", "charges pinned"]
    budget.write_text(budget.read_text().splitlines(keepends=True)[0])
    emptied = verify(budget, expect=ExitCode.NOT_CHECKED)
    assert emptied["not_checked"] == ["no charge missing"]  # never "verified"
    report = verify(budget, "--records", releases, expect=ExitCode.BUDGET_EXCEEDED)
    assert status(report, "records of this budget") == "differs"


@pytest.mark.parametrize("drop", [2, 4, 6])
def test_a_charge_removed_is_seen_through_the_records_in_subfolders(charged, drop):
    """A line removed (the last one too) and the chain recomputed: the record that names it,
    found in its own subfolder, has no line."""
    budget, releases = charged

    def edit(lines):
        del lines[drop - 1]

    forge(budget, edit)
    report = verify(budget, "--records", releases, expect=ExitCode.BUDGET_EXCEEDED)
    assert status(report, "records of this budget") == "differs"
    assert RECORD_OF_LINE[drop] in detail(report, "records of this budget")


def test_several_records_folders(charged):
    budget, releases = charged
    folders = [releases / name for name in RECORD_OF_LINE.values()]
    args = [item for folder in folders for item in ("--records", folder)]
    assert verify(budget, *args, *pinned(budget), expect=ExitCode.OK)["verdict"] == "verified"
    report = verify(budget, *args[:-2], expect=ExitCode.NOT_CHECKED)
    assert detail(report, "charges whose record is not given").startswith("charge 5: ")


def test_a_record_whose_line_is_noted_released_nothing_but_is_there_differs(charged):
    """A no-release note names a charge whose record was released: the note lies."""
    budget, releases = charged

    def edit(lines):
        lines.append({"note": "no-release", "charge": lines[1]["digest"], "created": "x"})

    forge(budget, edit)
    report = verify(budget, "--records", releases, expect=ExitCode.BUDGET_EXCEEDED)
    assert "noted as released nothing" in detail(report, "charges and their records")


# ----------------------------------------------------------------------------- heads


def test_a_published_head_pins_the_history_before_it(charged):
    budget, releases = charged
    head = run_cli(["budget", "show", budget, "--json"]).json["head"]
    assert head == lines_of(budget)[-1]["digest"]
    early = lines_of(budget)[2]["digest"]
    report = verify(budget, "--records", releases, "--head", head, "--head", early, expect=0)
    assert status(report, f"head {head[:12]}") == "verified"
    assert "(the head after charge 2)" in detail(report, f"head {early[:12]}")
    # a later charge keeps every earlier head
    run_cli(
        ["analyze", MNIST, *GNMAX, "--queries", 5, "--delta", DELTA, "--no-release"]
        + ["--budget", budget, "-q"]
    )
    verify(budget, "--head", head, expect=ExitCode.NOT_CHECKED)

    # history rewritten before the head: the head is gone from the chain
    def edit(lines):
        lines[1]["created"] = "2020-01-01T00:00:00+00:00"

    forge(budget, edit)
    report = verify(budget, "--head", head, expect=ExitCode.BUDGET_EXCEEDED)
    assert status(report, f"head {head[:12]}") == "differs"


def test_the_text_of_show_ends_with_the_head(charged):
    budget, _ = charged
    text = run_cli(["budget", "show", budget]).stdout
    assert text.splitlines()[-1] == f"head {lines_of(budget)[-1]['digest']}"


@pytest.mark.parametrize("head", ["abc", "g" * 64, "0" * 63])
def test_a_head_that_is_not_a_digest_is_refused(charged, head):
    budget, _ = charged
    result = run_cli(["verify", budget, "--head", head], expect=ExitCode.BAD_INPUT)
    assert result.stderr.startswith("pate: error: --head") and result.stderr.count("\n") == 1


def test_record_options_are_refused_for_a_budget(charged):
    budget, releases = charged
    for extra in (["--seed-file", budget.parent / "a.seed"], ["--input", f"indices={MNIST}"]):
        result = run_cli(["verify", budget, *extra], expect=ExitCode.BAD_INPUT)
        assert "a budget file is checked against its records" in result.stderr
    # Its records are replayed from their votes: with --records only.
    result = run_cli(["verify", budget, "--votes", MNIST], expect=ExitCode.BAD_INPUT)
    assert "replayed from their votes: give them with --records" in result.stderr
    record = releases / "gnmax" / "record.json"
    run_cli(["verify", record, "--head", "0" * 64], expect=ExitCode.BAD_INPUT)
    # A record replays one votes file: a second --votes is one line, exit 2.
    result = run_cli(
        ["verify", record, "--votes", MNIST, "--votes", MNIST], expect=ExitCode.BAD_INPUT
    )
    assert result.stderr.startswith("pate: error: --votes")
    assert "a record reads one votes file" in result.stderr and result.stderr.count("\n") == 1


# ----------------------------------------------------------------------------- the library


def test_the_library_verifies_a_budget_with_records_and_heads(charged):
    budget, releases = charged
    opened = pate.Budget.open(budget)
    report = pate.verify(budget, records=[releases], heads=[opened.head, opened.id])
    assert report.verdict == "verified", report.to_dict()
    with pytest.raises(UsageError, match="heads="):
        pate.verify(budget, heads=["nope"])

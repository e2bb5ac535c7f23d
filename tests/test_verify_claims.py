"""What a record says in words and in numbers is recomputed, never read: its first sentence
(``privacy``), a number that is not finite, and the bound data-dependent <= data-independent
of each block that states one (issue "A budget that cannot lie")."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

import pate_cli as pate
from pate_cli.api import replay as verification
from pate_cli.errors import ExitCode
from pate_cli.records.record import PRIVACY_NOTES, EditedRecordError, record_digest
from tests.conftest import MNIST, CliResult, run_cli
from tests.test_verify import _differing, _not_checked, _record, _rewrite, _verify

NO_RELEASE = ["--no-release"]  # nothing drawn: every check of an analyze record is made


@pytest.fixture
def votes(tmp_path):
    """A private copy of the real MNIST votes."""
    path = tmp_path / "votes.npy"
    shutil.copy(MNIST, path)
    return path


def _load(path) -> dict:
    record: dict = json.loads(Path(path).read_text())
    return record


# ----------------------------------------------------------------------------- privacy


@pytest.mark.parametrize(
    "sentence",
    [
        PRIVACY_NOTES["public"],  # a private record passed off as publishable
        "public: nothing computed from the votes",
        None,  # the sentence deleted
    ],
    ids=["public-sentence", "edited", "deleted"],
)
def test_an_edited_privacy_sentence_differs(tmp_path, votes, sentence):
    record_path = _record(tmp_path, "analyze", votes, *NO_RELEASE)
    record = _load(record_path)
    checks = {c["name"]: c for c in _verify(record_path)["checks"]}
    assert checks["privacy"] == {
        "name": "privacy",
        "status": "verified",
        "detail": "the sentence of a private record",
    }
    if sentence is None:
        del record["privacy"]
    else:
        record["privacy"] = sentence
    _rewrite(record_path, record)  # the digest recomputed, as a forger would
    out = _verify(record_path, expect=ExitCode.BUDGET_EXCEEDED)
    assert out["verdict"] == "differs"
    assert _differing(out) == ["privacy"] and _not_checked(out) == []
    (check,) = [c for c in out["checks"] if c["name"] == "privacy"]
    assert check["detail"] == (
        f"recorded {sentence!r}, but a private record states {PRIVACY_NOTES['private']!r}"
    )


def test_a_public_record_must_say_it_is_public(tmp_path, votes):
    record_path = _record(tmp_path, "analyze", votes, *NO_RELEASE, "--public")
    record = _load(record_path)
    assert record["privacy"] == PRIVACY_NOTES["public"]
    record["privacy"] = PRIVACY_NOTES["private"]
    _rewrite(record_path, record)
    out = _verify(record_path, expect=ExitCode.BUDGET_EXCEEDED)
    assert _differing(out) == ["privacy"]


def test_an_edited_note_of_a_publishable_figure_differs(tmp_path, votes):
    record_path = _record(tmp_path, "analyze", votes, *NO_RELEASE)
    record = _load(record_path)
    record["report"]["publishable"][0]["note"] = "depends on nothing at all"
    _rewrite(record_path, record)
    out = _verify(record_path, expect=ExitCode.BUDGET_EXCEEDED)
    assert _differing(out) == ["every other recorded number and note"]


# ----------------------------------------------------------------------------- non-finite

SENTINEL = "@@ not finite @@"


def _with_number(record_path: str, where: tuple[str | int, ...], token: str) -> None:
    """Write the record with the JSON number ``token`` (NaN, 1e999...) at ``where``, its
    digest recomputed over everything else."""
    record = _load(record_path)
    block = record
    for key in where[:-1]:
        block = block[key]
    block[where[-1]] = SENTINEL
    record["digest"] = record_digest(record)
    text = json.dumps(record).replace(json.dumps(SENTINEL), token)
    Path(record_path).write_text(text)


PLACES = {
    "report.data_dependent.epsilon": ("report", "data_dependent", "epsilon"),
    "report.data_independent.epsilon": ("report", "data_independent", "epsilon"),
    "report.orders[0]": ("report", "orders", 0),
    "call.options.delta": ("call", "options", "delta"),
    "call.mechanism.sigma": ("call", "mechanism", "sigma"),
    "version": ("version",),
}
TOKENS = {"NaN": "NaN", "Infinity": "Infinity", "-Infinity": "-Infinity", "1e999": "Infinity"}


@pytest.mark.parametrize("place", sorted(PLACES))
@pytest.mark.parametrize("token", sorted(TOKENS))
def test_a_number_that_is_not_finite_is_refused_as_an_edit(tmp_path, votes, token, place):
    record_path = _record(tmp_path, "analyze", votes, *NO_RELEASE)
    _with_number(record_path, PLACES[place], token)
    result = _run_verify(record_path)
    assert result.stdout == ""  # a refusal: never a crash (70), never a pass
    assert result.stderr == (
        f"pate: error: {record_path}: {place} is {TOKENS[token]}, not a finite number; pate "
        'writes none (an infinite figure is the string "inf"): the record was edited after '
        "the run, and does not verify\n"
    )


def _run_verify(record_path: str) -> CliResult:
    return run_cli(["verify", record_path, "--json"], expect=ExitCode.BUDGET_EXCEEDED)


def test_an_integer_beyond_a_float_is_refused_as_an_edit(tmp_path, votes):
    record_path = _record(tmp_path, "analyze", votes, *NO_RELEASE)
    _with_number(record_path, ("report", "input", "num_queries"), "9" * 400)
    result = _run_verify(record_path)
    assert "report.input.num_queries is an integer of 400 digits, not a finite number" in (
        result.stderr
    )


def test_the_library_raises_the_edit_with_exit_code_1(tmp_path, votes):
    record_path = _record(tmp_path, "analyze", votes, *NO_RELEASE)
    _with_number(record_path, ("report", "data_dependent", "epsilon"), "NaN")
    with pytest.raises(EditedRecordError) as raised:
        pate.verify(record_path)
    assert raised.value.exit_code == ExitCode.BUDGET_EXCEEDED == 1
    assert "report.data_dependent.epsilon is NaN, not a finite number" in raised.value.message


# ----------------------------------------------------------------------------- the bound


@pytest.mark.parametrize(
    ("block", "name"),
    [
        ("privacy", "realised privacy: data-dependent <= data-independent"),
        ("expected_privacy", "expected privacy: data-dependent <= data-independent"),
    ],
)
def test_a_data_dependent_epsilon_above_the_data_independent_one_differs(
    tmp_path, votes, monkeypatch, block, name
):
    """The replay and the record agree on a data-dependent epsilon 5 against a
    data-independent 3: every number is reproduced, and only that block's bound fails."""
    record_path = _record(tmp_path, "aggregate", votes, "--seed", 3)  # everything replayed
    assert _verify(record_path)["verdict"] == "verified"

    def above(report: dict) -> None:
        report[block]["data_dependent"]["epsilon"] = 5.0
        report[block]["data_independent"]["epsilon"] = 3.0

    record = _load(record_path)
    above(record["report"])
    _rewrite(record_path, record)
    replay = verification.replay

    def replay_above(*args):
        recomputed, written, unreplayed = replay(*args)
        above(recomputed)
        return recomputed, written, unreplayed

    monkeypatch.setattr(verification, "replay", replay_above)
    out = _verify(record_path, expect=ExitCode.BUDGET_EXCEEDED)
    assert _differing(out) == [name] and _not_checked(out) == []
    checks = {c["name"]: c for c in out["checks"]}
    assert checks[name]["detail"] == "5.0 > 3.0"
    other = next(n for n in checks if n.endswith("<= data-independent") and n != name)
    assert checks[other]["status"] == "verified"

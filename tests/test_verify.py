"""Release records and `pate verify`: records hold, edits are caught, failed runs leave none."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import pytest

import pate_cli
from pate_cli.errors import ExitCode
from pate_cli.records.record import record_digest
from pate_cli.records.verify import DIFFERS, NOT_CHECKED, VERIFIED
from tests.conftest import MNIST, ROOT, SAMPLE, TABLE2, run_cli


@pytest.fixture
def votes(tmp_path):
    """A private copy of the real MNIST votes, so that tests can change it."""
    path = tmp_path / "votes.npy"
    shutil.copy(MNIST, path)
    return path


def _record(tmp_path, command: str, votes, *extra) -> str:
    record = tmp_path / f"{command}.record.json"
    args = [command, votes, *TABLE2, "--json", "--record", record, *extra]
    if command == "aggregate":
        args += ["--output", tmp_path / "labels.npy", "--answered-output", tmp_path / "mask.npy"]
    run_cli(args)
    return str(record)


def _rewrite(record_path, record) -> None:
    """Write an edited record with its digest recomputed, as anyone can: the digest only
    catches an accidental change, the replay is what an edit must get past."""
    record["digest"] = record_digest(record)
    Path(record_path).write_text(json.dumps(record))


def _verify(record, *extra, expect=ExitCode.OK):
    result = run_cli(["verify", record, "--json", *extra], expect=expect)
    return result.json


def _differing(out) -> list[str]:
    """The checks that were made and do not hold (as the JSON's "differs" lists them)."""
    names = [c["name"] for c in out["checks"] if c["status"] == DIFFERS]
    assert out["differs"] == names
    return names


def _not_checked(out) -> list[str]:
    """The checks that could not be made (as the JSON's "not_checked" lists them)."""
    names = [c["name"] for c in out["checks"] if c["status"] == NOT_CHECKED]
    assert out["not_checked"] == names
    return names


# Without the run's seed file, what its OS-entropy noise decided is not checked (exit 3).
UNREPLAYED = {
    "analyze": ["random sample", "release.epsilon_released"],
    "smooth-sensitivity": ["random sample", "epsilon_released"],
    "aggregate": [
        "random sample",
        "answered",
        "privacy.data_dependent.epsilon",
        "privacy.data_dependent.order",
        "privacy.data_independent.epsilon",
        "warnings",  # the realised run's own
    ],
}


@pytest.mark.parametrize("command", ["analyze", "smooth-sensitivity", "aggregate"])
def test_a_record_of_each_command_verifies(tmp_path, votes, command):
    record_path = _record(tmp_path, command, votes)
    record = json.loads(Path(record_path).read_text())
    assert record["schema"] == "pate-record" and record["version"] == 7
    assert record["kind"] == "private" and record["privacy"].startswith("private: ")
    assert record["command"] == command
    # The library call that verify replays (no command line is run again).
    assert record["call"]["function"] == command.replace("-", "_")
    assert record["call"]["mechanism"] == record["report"]["mechanism"]
    assert record["inputs"]["votes"]["sha256"] == record["report"]["input"]["sha256"]
    assert set(record["versions"]) == {"pate", "numpy", "scipy", "python"}
    # No --seed: the noise came from OS entropy and no seed exists to record.
    assert record["seed"] is None and record["seed_commitment"] is None
    assert record["noise"] == {"source": "os-entropy", "private": True}
    if command == "aggregate":
        assert set(record["outputs"]) == {"labels", "answered_mask"}
    # Every check is made and holds but those of the sample: nothing differs, exit 3.
    out = _verify(record_path, expect=ExitCode.NOT_CHECKED)
    assert out["verdict"] == "incomplete" and out["ok"] is False
    assert _differing(out) == [] and _not_checked(out) == UNREPLAYED[command]
    statuses = {c["name"]: c["status"] for c in out["checks"]}
    assert {statuses[name] for name in statuses if name not in UNREPLAYED[command]} == {VERIFIED}
    names = [check["name"] for check in out["checks"]]
    assert "sha256 of votes" in names and "privacy" in names
    # The bound is checked once per block that states both: an aggregate states two.
    bounds = [name for name in names if name.endswith("data-dependent <= data-independent")]
    assert bounds == (
        [
            "realised privacy: data-dependent <= data-independent",
            "expected privacy: data-dependent <= data-independent",
        ]
        if command == "aggregate"
        else ["data-dependent <= data-independent"]
    )
    assert "random sample" in names and "command line" in names
    if command == "aggregate":
        assert "sha256 of output labels" in names
        assert "expected_privacy.data_dependent.epsilon" in names


def test_changing_one_vote_is_caught(tmp_path, votes):
    record = _record(tmp_path, "analyze", votes)
    counts = np.load(votes)
    counts[3, [0, 1]] += [1, -1] if counts[3, 1] > 0 else [-1, 1]
    np.save(votes, counts)
    out = _verify(record, expect=ExitCode.BUDGET_EXCEEDED)
    assert _differing(out)[0] == "sha256 of votes"


def test_changing_one_parameter_is_caught(tmp_path, votes):
    record_path = _record(tmp_path, "analyze", votes)
    record = json.loads(Path(record_path).read_text())
    record["call"]["mechanism"]["sigma"] = 41.0
    _rewrite(record_path, record)
    out = _verify(record_path, expect=ExitCode.BUDGET_EXCEEDED)
    failed = {c["name"]: c["detail"] for c in out["checks"] if c["status"] == DIFFERS}
    assert list(failed) == _differing(out)
    assert "data_dependent.epsilon" in failed
    assert any("mechanism.sigma" in detail for detail in failed.values())
    assert failed["command line"] == (
        "does not match the recorded call: call.mechanism.sigma: the command line gives 40.0, "
        "the record has 41.0"
    )


@pytest.mark.parametrize("digit", [3, -1], ids=["4th-digit", "last-digit"])
def test_changing_one_digit_of_an_epsilon_is_caught(tmp_path, votes, digit):
    """--rtol 0 catches every digit; the default (1e-12, same software) and 1e-9 the 4th only."""
    record_path = _record(tmp_path, "smooth-sensitivity", votes)
    record = json.loads(Path(record_path).read_text())
    text = repr(record["report"]["epsilon_expected_release"])
    position = digit if digit >= 0 else len(text) + digit
    changed = text[:position] + str((int(text[position]) + 5) % 10) + text[position + 1 :]
    assert float(changed) != float(text)
    record["report"]["epsilon_expected_release"] = float(changed)
    _rewrite(record_path, record)
    out = _verify(record_path, "--rtol", 0, expect=ExitCode.BUDGET_EXCEEDED)
    assert _differing(out) == ["epsilon_expected_release"]
    # Under a tolerance (the last bit can depend on the CPU) the last digit passes, the 4th not;
    # passed, the record is still incomplete: its sample was not replayed (exit 3, not 0).
    for tolerance in ([], ["--rtol", 1e-9]):
        run_cli(
            ["verify", record_path, *tolerance],
            expect=ExitCode.NOT_CHECKED if digit < 0 else ExitCode.BUDGET_EXCEEDED,
        )


@pytest.mark.parametrize(("relative", "holds"), [(1e-13, True), (1e-10, False)])
def test_same_versions_verify_to_1e_12_relative(tmp_path, votes, relative, holds):
    """Same software: 1e-12 relative, stated in the check; other versions: 1e-9."""
    record_path = _record(tmp_path, "analyze", votes)
    record = json.loads(Path(record_path).read_text())
    rdp = record["report"]["data_dependent"]["rdp"]
    assert rdp[-1] > 10  # large enough that the absolute floor of 1e-12 decides nothing
    rdp[-1] *= 1 + relative
    _rewrite(record_path, record)
    out = _verify(record_path, expect=ExitCode.NOT_CHECKED if holds else ExitCode.BUDGET_EXCEEDED)
    (other,) = [c for c in out["checks"] if c["name"] == "every other recorded number and note"]
    assert _differing(out) == ([] if holds else [other["name"]])
    assert other["status"] == (VERIFIED if holds else DIFFERS)
    if holds:
        assert other["detail"] == "reproduced within rtol 1e-12, atol 1e-12"
    else:
        last = len(rdp) - 1
        assert other["detail"].startswith(f"1 differ: data_dependent.rdp[{last}]: recorded ")
    # The same record made with other versions of the software is held to 1e-9.
    record["versions"]["numpy"] = "0.0"
    _rewrite(record_path, record)
    again = _verify(record_path, expect=ExitCode.NOT_CHECKED)
    (other,) = [c for c in again["checks"] if c["name"] == other["name"]]
    assert other["detail"] == "reproduced within rtol 1e-09, atol 1e-12"
    assert other["status"] == VERIFIED


def test_a_changed_label_file_is_caught(tmp_path, votes):
    record_path = _record(tmp_path, "aggregate", votes)
    original = Path(record_path).read_text()
    record = json.loads(original)
    record["outputs"]["labels"]["sha256"] = "0" * 64
    _rewrite(record_path, record)
    out = _verify(record_path, expect=ExitCode.BUDGET_EXCEEDED)
    assert _differing(out) == ["sha256 of output labels"]
    # The file on disk is compared with the record's hash even without the seed file.
    Path(record_path).write_text(original)
    labels = tmp_path / "labels.npy"
    labels.write_bytes(labels.read_bytes() + b"\0")
    out = _verify(record_path, expect=ExitCode.BUDGET_EXCEEDED)
    assert _differing(out) == ["sha256 of output labels"]
    (check,) = [c for c in out["checks"] if c["name"] == "sha256 of output labels"]
    assert check["detail"] == f"{labels} differs from the file the run wrote"
    # A file that is neither where the record says nor beside it: not checked, never passed.
    labels.unlink()
    out = _verify(record_path, expect=ExitCode.NOT_CHECKED)
    assert _not_checked(out) == [*UNREPLAYED["aggregate"], "sha256 of output labels"]
    (check,) = [c for c in out["checks"] if c["name"] == "sha256 of output labels"]
    assert check["detail"] == f"{labels}: not found, here or beside the record"


def test_moved_votes_are_given_with_votes_flag(tmp_path, votes):
    record = _record(tmp_path, "analyze", votes)
    moved = tmp_path / "elsewhere"
    moved.mkdir()
    shutil.move(votes, moved / "renamed.npy")
    run_cli(["verify", record], expect=ExitCode.BAD_INPUT)  # not found: unusable input
    out = _verify(record, "--votes", moved / "renamed.npy", expect=ExitCode.NOT_CHECKED)
    assert _differing(out) == [] and _not_checked(out) == UNREPLAYED["analyze"]
    (votes_check,) = [c for c in out["checks"] if c["name"] == "sha256 of votes"]
    assert votes_check == {
        "name": "sha256 of votes",
        "status": VERIFIED,
        "detail": str(moved / "renamed.npy"),
    }


def test_sample_record_verifies():
    """The shipped record drew no sample: every check is made and holds (exit 0)."""
    out = _verify(str(SAMPLE / "mnist_table2.record.json"))
    assert out["verdict"] == "verified" and out["ok"] is True
    assert out["summary"] == "the record holds: every check was made"
    assert {c["status"] for c in out["checks"]} == {VERIFIED}


@pytest.mark.parametrize(
    "args",
    [
        ["analyze", "missing.npy", "--sigma", 40, "--delta", 1e-5],
        ["analyze", MNIST, "--sigma", 40, "--delta", 2],
        ["smooth-sensitivity", MNIST, "--gamma", 0.1, "--delta", 1e-5, "--beta", 1],
        ["aggregate", MNIST, "--sigma", 40, "--delta", 1e-5, "--output", "{missing}/x.npy"],
        ["aggregate", MNIST, "--sigma", 40, "--delta", 1e-5, "--output", "{file}/x.npy"],
    ],
    ids=["missing-votes", "bad-delta", "bad-beta", "missing-folder", "folder-is-a-file"],
)
def test_a_failed_run_leaves_no_record(tmp_path, args):
    """Every place the run cannot use is made here, under the test's own folder: a folder
    that does not exist, and a "folder" that is a file."""
    record = tmp_path / "out" / "run.record.json"
    record.parent.mkdir()
    (tmp_path / "file").write_text("not a folder")
    places = {"missing": tmp_path / "missing", "file": tmp_path / "file"}
    args = [a.format(**places) if isinstance(a, str) else a for a in args]
    run_cli([*args, "--record", record], expect=ExitCode.BAD_INPUT)
    assert list(record.parent.iterdir()) == []
    assert sorted(p.name for p in tmp_path.iterdir()) == ["file", "out"]


def test_a_crashed_run_leaves_no_record(tmp_path, monkeypatch):
    import pate_cli.cli.render as render

    def boom(*args, **kwargs):
        raise RuntimeError("kaboom")

    monkeypatch.setattr(render, "analysis", boom)
    record = tmp_path / "run.record.json"
    run_cli(["analyze", MNIST, *TABLE2, "--record", record], expect=ExitCode.INTERNAL)
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize(
    "content",
    [
        "not json",
        json.dumps({"schema": "other"}),
        json.dumps({"schema": "pate-record", "version": 99}),
    ],
    ids=["not-json", "not-a-record", "future-version"],
)
def test_unusable_records_are_exit_2(tmp_path, content):
    path = tmp_path / "bad.json"
    path.write_text(content)
    result = run_cli(["verify", path], expect=ExitCode.BAD_INPUT)
    assert str(path) in result.stderr and len(result.stderr.strip().splitlines()) == 1


def test_a_record_older_than_a_field_still_verifies_but_a_dropped_claim_fails(tmp_path, votes):
    """Fields added by a newer pate are not in an older record: its claims are what is checked."""
    record_path = _record(tmp_path, "analyze", votes)
    record = json.loads(Path(record_path).read_text())
    del record["report"]["data_independent_worst_case"]
    _rewrite(record_path, record)
    out = _verify(record_path, expect=ExitCode.NOT_CHECKED)  # its sample: not replayed
    assert _differing(out) == [] and _not_checked(out) == UNREPLAYED["analyze"]
    record["report"]["a_claim_pate_never_makes"] = 1.0
    _rewrite(record_path, record)
    out = _verify(record_path, expect=ExitCode.BUDGET_EXCEEDED)
    (failed,) = [c for c in out["checks"] if c["status"] == DIFFERS]
    assert failed["name"] == "every other recorded number and note"
    assert "a_claim_pate_never_makes: in the record but not in the recomputed" in failed["detail"]


@pytest.mark.parametrize(
    ("version", "words"), [(1, "replay their command line"), (2, "hold the seed of every run")]
)
def test_an_old_record_is_refused_with_a_hint(tmp_path, votes, version, words):
    record_path = _record(tmp_path, "analyze", votes)
    record = json.loads(Path(record_path).read_text())
    record["version"] = version
    del record["call"]
    _rewrite(record_path, record)
    result = run_cli(["verify", record_path], expect=ExitCode.BAD_INPUT)
    assert f"version {version} records {words}" in result.stderr
    assert "record the run again" in result.stderr


def test_a_call_that_names_no_library_function_is_refused(tmp_path, votes):
    record_path = _record(tmp_path, "analyze", votes)
    record = json.loads(Path(record_path).read_text())
    record["call"]["function"] = "os.system"
    _rewrite(record_path, record)
    result = run_cli(["verify", record_path], expect=ExitCode.BAD_INPUT)
    assert "the record's call is not one of analyze" in result.stderr


@pytest.mark.parametrize(
    ("field", "value"),
    [("command", "rm"), ("argv", ["analyze", "other.npy"]), ("created", "2001-01-01T00:00:00")],
)
def test_any_edited_field_fails_verify(tmp_path, votes, field, value):
    record_path = _record(tmp_path, "analyze", votes)
    record = json.loads(Path(record_path).read_text())
    record[field] = value
    Path(record_path).write_text(json.dumps(record))  # edited, digest left as written
    out = _verify(record_path, expect=ExitCode.BUDGET_EXCEEDED)
    failed = _differing(out)
    assert failed[0] == "digest"
    (digest,) = [c for c in out["checks"] if c["name"] == "digest"]
    assert digest["detail"] == "does not match the content: the record changed after the run"
    _rewrite(record_path, record)  # the digest recomputed, as anyone can
    out = _verify(
        record_path,
        expect=ExitCode.NOT_CHECKED if field == "created" else ExitCode.BUDGET_EXCEEDED,
    )
    failed = _differing(out)
    # The sample is never checked here (under the command "rm" its field is no key field).
    sample = UNREPLAYED["analyze"][:1] if field == "command" else UNREPLAYED["analyze"]
    assert _not_checked(out) == sample
    if field == "command":  # the command must be the call's and the command line's
        assert failed == ["command line", "command of the recorded call"]
    elif field == "argv":  # the command line must be the recorded call
        assert failed == ["command line"]
    else:
        assert failed == []


def test_a_record_of_pate_0_1_0_verifies_on_its_own_orders(monkeypatch):
    """0.1.0's default grid started at order 2 (298 orders; now 302, from 1.1): its records
    replay on the orders they list, so they still verify (they were failing on the count)."""
    old = Path(__file__).parent / "data" / "records" / "mnist_table2-0.1.0.record.json"
    assert len(json.loads(old.read_text())["report"]["orders"]) == 298
    monkeypatch.chdir(ROOT)  # the record names its votes relative to the repository
    shown = run_cli(["verify", old, "--json"]).json
    assert shown["verdict"] == "verified", shown
    # It drew no release, so no bound of the local sensitivity is replayed for it.
    assert not [c for c in shown["checks"] if c["name"] == "local-sensitivity bound"]


def test_a_release_that_names_no_bound_is_replayed_with_the_walk(tmp_path):
    """A record made before releases named their local-sensitivity bound (made here as one:
    the walk's record with the flag, its call's key and the report's field taken out, the
    digest recomputed) verifies by replaying the walk, and says which pate made it; the same
    edit of a tabulated record differs, since its figures are not the walk's."""
    for walk, verdict in ((True, "verified"), (False, "differs")):
        extra = ["--walk-local-sensitivity"] if walk else []
        directory = tmp_path / ("walk" if walk else "tabulated")
        directory.mkdir()
        path = _record(
            directory, "smooth-sensitivity", MNIST, "--order", "14", "--seed", "0", *extra
        )
        record = json.loads(Path(path).read_text())
        record["call"]["options"].pop("walk_local_sensitivity", None)
        record["argv"] = [a for a in record["argv"] if a != "--walk-local-sensitivity"]
        assert record["report"].pop("local_sensitivity_bound") == ("walk" if walk else "tabulated")
        _rewrite(path, record)
        out = _verify(path, expect=ExitCode.OK if walk else ExitCode.BUDGET_EXCEEDED)
        assert out["verdict"] == verdict, out
        assert ("smooth_sensitivity" in _differing(out)) is not walk
        (bound,) = [c for c in out["checks"] if c["name"] == "local-sensitivity bound"]
        assert f"made by pate {pate_cli.__version__}" in bound["detail"]

"""Release records: what `pate verify` proves without the seed, what an edit cannot get past,
the two kinds of record, and release files that are never replaced without --force."""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import stat
from pathlib import Path

import numpy as np
import pytest

import pate_cli.files.seeds as seeds
from pate_cli.errors import ExitCode
from pate_cli.records.record import record_digest
from pate_cli.records.verify import DIFFERS, NOT_CHECKED, VERIFIED
from tests.conftest import MNIST, PUBLIC_REPORT_KEYS, TABLE2, run_cli

# Order, beta and sigma_ss fixed in advance: the sampled released epsilon is publishable, so it
# is also one of the report's "publishable" figures, at a place in the list that the draw decides.
FIXED = ["--order", 14, "--beta", 0.0336, "--sigma-ss", 5.878]


@pytest.fixture
def votes(tmp_path):
    path = tmp_path / "votes.npy"
    shutil.copy(MNIST, path)
    return path


@pytest.fixture
def os_draws(monkeypatch):
    """Count the generators seeded from OS entropy: each is a fresh draw of noise."""
    made: list[int] = []
    make = np.random.default_rng

    def spy(seed=None):
        if seed is None:
            made.append(1)
        return make(seed)

    monkeypatch.setattr(seeds.np.random, "default_rng", spy)
    return made


def _run(tmp_path, command, votes, *extra, name="run.record.json", expect=ExitCode.OK):
    record = tmp_path / name
    args = [command, votes, *TABLE2, "--record", record, "--json", *extra]
    if command == "aggregate" and "--output" not in extra:
        args += ["--output", tmp_path / "labels.npy", "--answered-output", tmp_path / "mask.npy"]
    result = run_cli(args, expect=expect)
    return record, result


def _load(path) -> dict:
    return json.loads(Path(path).read_text())


def _forge(path, record) -> None:
    """Write an edited record with its digest recomputed, as anyone can."""
    record["digest"] = record_digest(record)
    Path(path).write_text(json.dumps(record))


def _verify(record, *extra, expect=ExitCode.OK) -> dict:
    return run_cli(["verify", record, "--json", *extra], expect=expect).json


def _checks(out) -> dict[str, dict]:
    return {check["name"]: check for check in out["checks"]}


def _differing(out) -> list[str]:
    """The checks that were made and do not hold (the JSON's "differs" says the same)."""
    names = [check["name"] for check in out["checks"] if check["status"] == DIFFERS]
    assert out["differs"] == names
    return names


def _not_checked(out) -> list[str]:
    """The checks that could not be made (never counted as passed)."""
    names = [check["name"] for check in out["checks"] if check["status"] == NOT_CHECKED]
    assert out["not_checked"] == names
    return names


# ------------------------------------------------------------------ an honest release verifies


# What the run's noise decided, for each command: not checked without the run's seed.
SAMPLED = {
    "smooth-sensitivity": ["epsilon_released"],
    "analyze": ["release.epsilon_released"],
    "aggregate": [
        "answered",
        "privacy.data_dependent.epsilon",
        "privacy.data_dependent.order",
        "privacy.data_independent.epsilon",
        "warnings",  # the realised run's own warnings
    ],
}


@pytest.mark.parametrize(
    ("command", "extra", "sample"),
    [
        ("smooth-sensitivity", [], "the sampled released epsilon"),
        ("smooth-sensitivity", FIXED, "the sampled released epsilon"),
        ("analyze", [], "the sampled released epsilon"),
        ("aggregate", [], "the noisy labels, the answered mask"),
    ],
    ids=["smooth-sensitivity", "smooth-sensitivity-fixed", "analyze", "aggregate"],
)
def test_a_default_release_verifies_all_but_its_sample_which_is_not_checked(
    tmp_path, votes, command, extra, sample
):
    """Noise from OS entropy and no seed file: every deterministic number is verified, and
    the sample (and every figure it decided) is not checked: exit 3, never exit 0."""
    record_path, result = _run(tmp_path, command, votes, *extra)
    record = _load(record_path)
    assert list(record)[:5] == ["private", "privacy", "schema", "version", "kind"]
    assert record["private"] is True
    assert record["privacy"].startswith("private: ") and "do not publish" in record["privacy"]
    assert record["kind"] == "private" and record["version"] == 7
    sampled = ["random sample", *SAMPLED[command]]
    if command == "smooth-sensitivity" and extra:
        bases = [figure["basis"] for figure in result.json["publishable"]]
        assert "gnss-release" in bases  # the sample is a publishable figure here
        sampled.append("publishable gnss-release")
    first = _verify(record_path, expect=ExitCode.NOT_CHECKED)
    again = _verify(record_path, expect=ExitCode.NOT_CHECKED)
    assert first == again and first["record_kind"] == "private"
    assert first["verdict"] == "incomplete" and first["ok"] is False
    assert _differing(first) == [] and _not_checked(first) == sampled
    assert first["summary"].startswith("nothing differs, but the record is not fully verified")
    checks = _checks(first)
    assert all(checks[name]["status"] == VERIFIED for name in checks if name not in sampled)
    random = checks["random sample"]
    assert random["detail"].startswith(sample)
    assert "not re-derivable" in random["detail"]
    assert "OS entropy and was never kept" in random["detail"]
    for name in SAMPLED[command]:
        assert "decided by noise from OS entropy, which was never kept" in checks[name]["detail"]
    assert checks["command line"]["status"] == checks["sha256 of votes"]["status"] == VERIFIED
    assert checks["every other recorded number and note"]["detail"].startswith("reproduced within")
    if command == "aggregate":
        # The labels on disk are the run's; without the noise they are not regenerated.
        labels = checks["sha256 of output labels"]
        assert labels["detail"] == f"{tmp_path / 'labels.npy'} is the file the run wrote"
        assert not any(name.startswith("regenerated output") for name in checks)
        assert checks["expected_privacy.data_dependent.epsilon"]["status"] == VERIFIED
    else:
        key = (
            "epsilon_data_dependent"
            if command == "smooth-sensitivity"
            else "data_dependent.epsilon"
        )
        detail = checks[key]["detail"]
        assert detail.startswith("reproduced: ")
        # The last bit may depend on the CPU (verify's own tolerance is 1e-12 relative).
        assert float(detail.removeprefix("reproduced: ")) == pytest.approx(
            1.998816592268984, rel=1e-12
        )
    table = run_cli(["verify", record_path], expect=ExitCode.NOT_CHECKED).stdout
    flat = " ".join(table.split())
    assert f"private {command} record" in flat and "the record holds" not in flat
    assert "nothing differs, but the record is not fully verified" in flat
    assert f"command line: pate {command} {votes}" in flat
    # A pipeline that accepts an unreplayed sample on purpose says so.
    accepted = _verify(record_path, "--allow-unchecked")
    assert accepted == first


def test_a_seed_file_record_names_its_commitment_and_replays_with_it(tmp_path, votes):
    seed_file = tmp_path / "run.seed"
    record_path, _ = _run(tmp_path, "smooth-sensitivity", votes, "--seed-file", seed_file)
    record = _load(record_path)
    plain = _verify(record_path, expect=ExitCode.NOT_CHECKED)
    assert _not_checked(plain) == ["random sample", "epsilon_released"]
    sample = _checks(plain)["random sample"]
    assert "not re-derivable without the seed file" in sample["detail"]
    assert record["seed_commitment"] in sample["detail"]
    replayed = _verify(record_path, "--seed-file", seed_file, "--rtol", 0)
    assert replayed["verdict"] == "verified" and replayed["ok"] is True
    assert _differing(replayed) == [] and _not_checked(replayed) == []
    checks = _checks(replayed)
    assert checks["seed file"]["detail"] == "matches the record's commitment"
    assert checks["random sample"]["detail"].endswith("replayed from the seed file")
    assert checks["epsilon_released"]["status"] == VERIFIED
    assert checks["epsilon_released"]["detail"].startswith("reproduced")
    # A sample that is not the run's: not checked without the seed (exit 3), caught with it.
    record["report"]["epsilon_released"] += 0.5
    _forge(record_path, record)
    forged = _verify(record_path, expect=ExitCode.NOT_CHECKED)
    assert _checks(forged)["epsilon_released"]["status"] == NOT_CHECKED
    assert _differing(forged) == []
    caught = _verify(record_path, "--seed-file", seed_file, expect=ExitCode.BUDGET_EXCEEDED)
    assert caught["verdict"] == "differs" and _differing(caught) == ["epsilon_released"]
    # --allow-unchecked accepts what was not checked, never what differs.
    _verify(record_path, "--allow-unchecked", expect=ExitCode.OK)
    _verify(
        record_path, "--seed-file", seed_file, "--allow-unchecked",
        expect=ExitCode.BUDGET_EXCEEDED,
    )  # fmt: skip


def test_a_public_seed_record_is_replayed_and_must_match(tmp_path, votes):
    record_path, _ = _run(tmp_path, "smooth-sensitivity", votes, "--seed", 7)
    out = _verify(record_path, "--rtol", 0)  # nothing left unchecked: exit 0
    assert out["verdict"] == "verified" and _not_checked(out) == []
    sample = _checks(out)["random sample"]
    assert sample["status"] == VERIFIED
    assert "replayed from the record's public seed 7" in sample["detail"]
    assert _checks(out)["epsilon_released"]["status"] == VERIFIED
    record = _load(record_path)
    record["report"]["epsilon_released"] += 0.5
    _forge(record_path, record)
    assert _differing(_verify(record_path, expect=ExitCode.BUDGET_EXCEEDED)) == ["epsilon_released"]


SAMPLED_OF_ANALYZE = ["random sample", "release.epsilon_released"]


def test_verify_of_an_aggregate_record_draws_no_noise(tmp_path, votes, os_draws):
    record_path, _ = _run(tmp_path, "aggregate", votes)
    drawn = len(os_draws)
    assert drawn == 2  # the run's own draws: one stream for the threshold, one for the answers
    out = _verify(record_path, expect=ExitCode.NOT_CHECKED)
    assert _checks(out)["random sample"]["status"] == NOT_CHECKED
    assert len(os_draws) == drawn  # verify drew none


# ------------------------------------------------------------------ an edit does not get past


def test_a_forged_command_line_fails_even_with_its_digest_recomputed(tmp_path, votes):
    """The issue's forgery: argv says --sigma 400 and another pate, the digest recomputed."""
    record_path, _ = _run(tmp_path, "smooth-sensitivity", votes)
    record = _load(record_path)
    record["argv"][record["argv"].index("--sigma") + 1] = "400"
    record["versions"]["pate"] = "9.9"
    _forge(record_path, record)
    out = _verify(record_path, expect=ExitCode.BUDGET_EXCEEDED)
    assert _differing(out) == ["command line"]
    detail = _checks(out)["command line"]["detail"]
    assert detail == (
        "does not match the recorded call: call.mechanism.sigma: the command line gives 400.0, "
        "the record has 40.0"
    )
    assert _checks(out)["digest"]["status"] == VERIFIED  # a digest is no seal
    table = run_cli(["verify", record_path], expect=ExitCode.BUDGET_EXCEEDED).stdout
    flat = " ".join(table.split())
    assert "--sigma 400" not in flat  # the forged command line is never shown
    assert "command line: not shown (it does not match the recorded call)" in flat


@pytest.mark.parametrize(
    ("edit", "failed"),
    [
        # The call alone: it no longer matches the command line, nor recomputes to the numbers.
        (lambda r: r["call"]["mechanism"].update(sigma=41.0), "command line"),
        # A file, a seed source or the kind that the command line does not give.
        (lambda r: r["inputs"]["votes"].update(path=str(MNIST)), "command line"),
        (lambda r: r.update(noise={"source": "seed-file", "private": True}), "command line"),
        (lambda r: r.update(kind="public", private=False), "command line"),
        (lambda r: r["argv"].append("--no-release"), "command line"),
        (lambda r: r["argv"].append("--help"), "command line"),
    ],
    ids=["call", "input-path", "noise-source", "kind", "argv-flag", "argv-help"],
)
def test_an_edited_call_or_command_line_fails(tmp_path, votes, edit, failed):
    record_path, _ = _run(tmp_path, "analyze", votes)
    record = _load(record_path)
    edit(record)
    _forge(record_path, record)
    out = run_cli(["verify", record_path, "--json"], expect=ExitCode.BUDGET_EXCEEDED).json
    assert failed in _differing(out)
    assert _checks(out)["command line"]["detail"].startswith("does not match the recorded call")


def test_argv_and_call_edited_together_do_not_recompute(tmp_path, votes):
    record_path, _ = _run(tmp_path, "analyze", votes)
    record = _load(record_path)
    record["argv"][record["argv"].index("--sigma") + 1] = "41"
    record["call"]["mechanism"]["sigma"] = 41.0
    _forge(record_path, record)
    out = _verify(record_path, expect=ExitCode.BUDGET_EXCEEDED)
    assert _checks(out)["command line"]["status"] == VERIFIED  # they agree with each other ...
    assert "data_dependent.epsilon" in _differing(out)  # ... but not with the numbers


def test_an_edited_number_or_hash_fails_with_its_digest_recomputed(tmp_path, votes):
    record_path, _ = _run(tmp_path, "smooth-sensitivity", votes)
    original = _load(record_path)
    record = json.loads(json.dumps(original))
    record["report"]["smooth_sensitivity"] *= 0.5
    _forge(record_path, record)
    out = _verify(record_path, expect=ExitCode.BUDGET_EXCEEDED)
    assert _differing(out) == ["smooth_sensitivity"]
    record = json.loads(json.dumps(original))
    record["inputs"]["votes"]["sha256"] = "0" * 64
    _forge(record_path, record)
    assert _differing(_verify(record_path, expect=ExitCode.BUDGET_EXCEEDED)) == ["sha256 of votes"]


def test_a_version_3_record_is_still_read_as_a_private_one(tmp_path, votes):
    record_path, _ = _run(tmp_path, "analyze", votes)
    record = _load(record_path)
    del record["private"], record["privacy"], record["kind"]
    record["version"] = 3
    _forge(record_path, record)
    out = _verify(record_path, expect=ExitCode.NOT_CHECKED)  # its sample: not checked
    assert out["verdict"] == "incomplete" and out["record_kind"] == "private"
    assert _differing(out) == [] and _not_checked(out) == SAMPLED_OF_ANALYZE
    record["version"] = 4  # but a version 4 record must say its kind
    _forge(record_path, record)
    result = run_cli(["verify", record_path], expect=ExitCode.BAD_INPUT)
    assert "the record's kind is None" in result.stderr
    record |= {"kind": "private", "private": False}  # a first field that contradicts the kind
    _forge(record_path, record)
    result = run_cli(["verify", record_path], expect=ExitCode.BAD_INPUT)
    assert "first field private is False but its kind is 'private'" in result.stderr


def test_the_sample_of_a_version_4_record_is_never_replayed(tmp_path, votes):
    """Before version 5 every purpose drew from one stream: even its own seed file does not
    replay the sample (not checked, exit 3), though the seed file is still checked."""
    seed_file = tmp_path / "run.seed"
    record_path, _ = _run(tmp_path, "analyze", votes, "--seed-file", seed_file)
    record = _load(record_path)
    record["version"] = 4
    _forge(record_path, record)
    out = _verify(record_path, "--seed-file", seed_file, expect=ExitCode.NOT_CHECKED)
    assert _differing(out) == [] and _not_checked(out) == SAMPLED_OF_ANALYZE
    checks = _checks(out)
    assert checks["seed file"]["status"] == VERIFIED
    why = "not replayed: a version 4 record drew every purpose from one stream"
    assert why in checks["random sample"]["detail"]
    assert checks["data_dependent.epsilon"]["status"] == VERIFIED


# ------------------------------------------------------------------ public records


def _numbers(value) -> list[float]:
    if isinstance(value, dict):
        return [n for v in value.values() for n in _numbers(v)]
    if isinstance(value, list):
        return [n for v in value for n in _numbers(v)]
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return [float(value)]
    return []


@pytest.mark.parametrize("command", ["analyze", "smooth-sensitivity", "aggregate"])
def test_a_public_record_holds_no_figure_of_the_votes_and_verifies(tmp_path, votes, command):
    extra = FIXED if command == "smooth-sensitivity" else []
    private_path, private = _run(tmp_path, command, votes, *extra, name="private.record.json")
    if command == "aggregate":
        outputs = ["--output", tmp_path / "public-labels.npy"]
        extra = [*extra, *outputs]
    public_path, public = _run(tmp_path, command, votes, *extra, "--public", name="public.json")
    record = _load(public_path)
    assert list(record)[:5] == ["private", "privacy", "schema", "version", "kind"]
    assert record["private"] is False
    assert record["privacy"].startswith("public: ") and record["kind"] == "public"
    assert record["report"] == public.json  # exactly what --public prints
    assert set(record["report"]) == PUBLIC_REPORT_KEYS
    assert record["inputs"] == {"votes": {"path": str(votes)}}  # no hash of the votes
    text = Path(public_path).read_text()
    full = private.json
    assert full["input"]["sha256"] not in text
    if command == "aggregate":
        full = full["expected_privacy"]
        secret = [full["data_dependent"]["epsilon"], full["expected_answered"]]
        secret += [private.json["privacy"]["data_dependent"]["epsilon"]]
    elif command == "analyze":
        release = full["release"]
        secret = [full["data_dependent"]["epsilon"], full["expected_answered"]]
        secret += [release["smooth_sensitivity"], release["noise_std"]]
        secret += [release["epsilon_expected_release"], release["epsilon_released"]]
    else:
        secret = [full["epsilon_data_dependent"], full["expected_answered"]]
        secret += [full["smooth_sensitivity"], full["noise_std"], full["gnss_cost"]]
        secret += [full["epsilon_expected_release"], full["rdp_at_order"]]
    numbers = _numbers(record)
    for value in secret:
        assert isinstance(value, float)
        assert value not in numbers and repr(value) not in text, value
    # It binds the votes with a salted commitment, whose salt is in a private opening file.
    opening = tmp_path / "public.opening.json"
    assert record["seed_commitment"] is None and record["opening"] == str(opening)
    assert set(record["commitments"]) == {"votes"}
    assert stat.S_IMODE(os.stat(opening).st_mode) == 0o600
    salt = bytes.fromhex(_load(opening)["salts"]["votes"])
    salted = hashlib.sha256(salt + Path(votes).read_bytes()).hexdigest()
    assert record["commitments"]["votes"] == salted
    # The sample of an OS-entropy run is never checked; without the opening, nor the binding.
    # (Fixed in advance, the sample is also a publishable figure of smooth-sensitivity; a
    # public analyze record states nothing its draw decided, so it has no sample to check.)
    drawn = {
        "smooth-sensitivity": ["random sample", "publishable gnss-release"],
        "aggregate": ["random sample"],  # the hash of its labels, drawn with private noise
        "analyze": [],
    }[command]
    out = _verify(public_path, expect=ExitCode.NOT_CHECKED)
    assert out["verdict"] == "incomplete" and out["record_kind"] == "public"
    assert _differing(out) == []
    assert _not_checked(out) == [*drawn[:1], "binding of votes", *drawn[1:]]
    checks = _checks(out)
    assert checks["publishable"]["status"] == VERIFIED
    assert checks["publishable"]["detail"].startswith("reproduced: ")
    assert "give --opening" in checks["binding of votes"]["detail"]
    assert not any(name.startswith("sha256 of votes") for name in checks)
    opened = _verify(
        public_path, "--opening", opening, expect=ExitCode.NOT_CHECKED if drawn else ExitCode.OK
    )
    assert _differing(opened) == [] and _not_checked(opened) == drawn
    binding = _checks(opened)["binding of votes"]
    assert binding == {
        "name": "binding of votes",
        "status": VERIFIED,
        "detail": f"{votes} is the file the run read",
    }
    # Its publishable figures are recomputed: one changed is caught.
    record["report"]["publishable"][-1]["epsilon"] += 0.01
    _forge(public_path, record)
    assert _differing(_verify(public_path, expect=ExitCode.BUDGET_EXCEEDED)) == ["publishable"]
    # Other votes are not the run's: the opening shows it.
    _forge(public_path, _load(public_path) | {"report": public.json})
    counts = np.load(votes)
    counts[3, [0, 1]] += [1, -1] if counts[3, 1] > 0 else [-1, 1]
    np.save(votes, counts)
    other = _verify(public_path, "--opening", opening, expect=ExitCode.BUDGET_EXCEEDED)
    assert _differing(other) == ["binding of votes"]
    assert _checks(other)["binding of votes"]["detail"].startswith(f"{votes} is not the file")


def test_a_full_report_under_a_public_label_fails(tmp_path, votes):
    record_path, _ = _run(tmp_path, "analyze", votes, "--public")
    record = _load(record_path)
    record["report"]["data_dependent"] = {"epsilon": 1.0}
    _forge(record_path, record)
    out = _verify(record_path, expect=ExitCode.BUDGET_EXCEEDED)
    assert (
        "data_dependent: in the record but not"
        in _checks(out)["every other recorded number and note"]["detail"]
    )


# ------------------------------------------------------------------ --force


@pytest.mark.parametrize("command", ["analyze", "smooth-sensitivity", "aggregate"])
def test_an_existing_record_is_not_replaced_without_force(tmp_path, command, os_draws):
    record = tmp_path / "run.record.json"
    record.write_bytes(b"the first release's record\n")
    bad_votes = tmp_path / "votes.npy"
    bad_votes.write_bytes(b"not votes")  # exit 2 on the record, before the votes are read
    seed_file = tmp_path / "run.seed"  # and before the seed file is made
    args = [command, bad_votes, *TABLE2, "--record", record, "--seed-file", seed_file]
    if command == "aggregate":
        args += ["--output", tmp_path / "labels.npy"]
    result = run_cli(args, expect=ExitCode.BAD_INPUT)
    # Each of these runs draws a sample, analyze too (without --no-release or
    # --data-independent): a second run spends the budget again.
    why = "exists: a second run spends the privacy budget again; pass --force to replace it"
    assert result.stderr == f"pate: error: {record} {why}\n"
    assert record.read_bytes() == b"the first release's record\n"
    assert not seed_file.exists() and not (tmp_path / "labels.npy").exists()
    assert os_draws == []
    # With --force the record is replaced by the new run's.
    args[1] = MNIST
    run_cli([*args, "--force"])
    assert _load(record)["command"] == command


def test_a_record_replaced_with_force_verifies(tmp_path, votes):
    record_path, _ = _run(tmp_path, "smooth-sensitivity", votes)
    first = _load(record_path)
    _run(tmp_path, "smooth-sensitivity", votes, expect=ExitCode.BAD_INPUT)
    assert _load(record_path) == first
    _, forced = _run(tmp_path, "smooth-sensitivity", votes, "--force")
    second = _load(record_path)
    assert second["created"] >= first["created"] and "--force" in second["argv"]
    # The replaced release counts too: said on stderr and in the report's warnings.
    spent = f"--force replaced {record_path}: the privacy budget was spent again"
    assert spent in " ".join(forced.stderr.split())
    assert [w for w in second["report"]["warnings"] if "spent again" in w] == [
        w for w in forced.json["warnings"] if w.startswith(spent)
    ]
    out = _verify(record_path, expect=ExitCode.NOT_CHECKED)  # its sample: not checked
    assert _differing(out) == [] and _not_checked(out) == ["random sample", "epsilon_released"]
    # The warning about the run's circumstances is kept, but not recomputed by the replay.
    warnings = _checks(out)["warnings"]
    assert warnings["status"] == VERIFIED
    assert warnings["detail"] == "1 reproduced (1 about the run's circumstances, not recomputed)"


def test_a_public_record_keeps_the_labels_hash_only_of_private_noise(tmp_path, votes):
    private_noise, _ = _run(tmp_path, "aggregate", votes, "--public", name="a.json")
    labels = _load(private_noise)["outputs"]["labels"]
    assert labels == {"path": str(tmp_path / "labels.npy"), "sha256": labels["sha256"]}
    extra = ["--public", "--seed", 3, "--output", tmp_path / "seeded.npy"]
    public_noise, _ = _run(tmp_path, "aggregate", votes, *extra, name="b.json")
    # With a public seed the labels are a function of the votes: their hash is not published.
    assert _load(public_noise)["outputs"] == {"labels": {"path": str(tmp_path / "seeded.npy")}}
    # The sample is replayed from the public seed; the votes are bound by the opening.
    out = _verify(public_noise, expect=ExitCode.NOT_CHECKED)
    assert _differing(out) == [] and _not_checked(out) == ["binding of votes"]
    assert _checks(out)["random sample"]["status"] == VERIFIED
    opening = _load(public_noise)["opening"]
    out = _verify(public_noise, "--opening", opening)
    assert out["verdict"] == "verified" and _not_checked(out) == []
    assert not any(c["name"].startswith(("sha256", "regenerated")) for c in out["checks"])
    # With private noise the labels on disk are checked against the kept hash.
    opening = _load(private_noise)["opening"]
    out = _verify(private_noise, "--opening", opening, expect=ExitCode.NOT_CHECKED)
    assert _not_checked(out) == ["random sample"]
    assert _checks(out)["sha256 of output labels"]["status"] == VERIFIED


def test_the_quiet_flag_of_a_recorded_command_line_does_not_silence_verify(tmp_path, votes):
    record_path, _ = _run(tmp_path, "analyze", votes, "--quiet")
    table = run_cli(["verify", record_path, "--allow-unchecked"]).stdout
    flat = " ".join(table.split())
    assert "nothing differs, but the record is not fully verified" in flat and "--quiet" in flat

"""Release records: what `pate verify` proves without the seed, what an edit cannot get past,
the two kinds of record, and release files that are never replaced without --force."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import pytest

import pate_cli.seeds as seeds
from pate_cli.errors import ExitCode
from pate_cli.records.record import record_digest
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


def _failed(out) -> list[str]:
    return [check["name"] for check in out["checks"] if not check["ok"]]


# ------------------------------------------------------------------ an honest release verifies


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
def test_a_default_release_verifies_and_names_its_sample_as_not_re_derivable(
    tmp_path, votes, command, extra, sample
):
    """Noise from OS entropy and no seed file: the auditor's usual case is exit 0, every
    deterministic number checked, and the sample named as not re-derivable."""
    record_path, result = _run(tmp_path, command, votes, *extra)
    record = _load(record_path)
    assert list(record)[:5] == ["private", "privacy", "schema", "version", "kind"]
    assert record["private"] is True
    assert record["privacy"].startswith("private: ") and "do not publish" in record["privacy"]
    assert record["kind"] == "private" and record["version"] == 4
    if command == "smooth-sensitivity" and extra:
        bases = [figure["basis"] for figure in result.json["publishable"]]
        assert "gnss-release" in bases  # the sample is a publishable figure here
    first, again = _verify(record_path), _verify(record_path)
    assert first == again and first["ok"] is True and first["record_kind"] == "private"
    checks = _checks(first)
    random = checks["random sample"]
    assert random["ok"] is True and random["detail"].startswith(sample)
    assert "not re-derivable without the seed file" in random["detail"]
    assert "OS entropy and was never kept" in random["detail"]
    assert checks["command line"]["ok"] and checks["sha256 of votes"]["ok"]
    assert checks["every other recorded number"]["detail"].startswith("reproduced within")
    if command == "aggregate":
        assert checks["sha256 of output labels"]["detail"].endswith("(not regenerated)")
        assert checks["expected_privacy.data_dependent.epsilon"]["ok"]
    else:
        key = (
            "epsilon_data_dependent"
            if command == "smooth-sensitivity"
            else "data_dependent.epsilon"
        )
        assert checks[key]["detail"] == "reproduced: 1.998816592268984"
    table = run_cli(["verify", record_path]).stdout
    flat = " ".join(table.split())
    assert f"private {command} record" in flat and "the record holds" in flat
    assert f"command line: pate {command} {votes}" in flat


def test_a_seed_file_record_names_its_commitment_and_replays_with_it(tmp_path, votes):
    seed_file = tmp_path / "run.seed"
    record_path, _ = _run(tmp_path, "smooth-sensitivity", votes, "--seed-file", seed_file)
    record = _load(record_path)
    plain = _checks(_verify(record_path))["random sample"]
    assert "not re-derivable without the seed file" in plain["detail"]
    assert record["seed_commitment"] in plain["detail"]
    replayed = _verify(record_path, "--seed-file", seed_file, "--rtol", 0)
    assert _checks(replayed)["epsilon_released"]["detail"].startswith("reproduced")
    # A sample that is not the run's: not compared without the seed (exit 0), caught with it.
    record["report"]["epsilon_released"] += 0.5
    _forge(record_path, record)
    assert _verify(record_path)["ok"] is True
    caught = _verify(record_path, "--seed-file", seed_file, expect=ExitCode.BUDGET_EXCEEDED)
    assert _failed(caught) == ["epsilon_released"]


def test_a_public_seed_record_is_replayed_and_must_match(tmp_path, votes):
    record_path, _ = _run(tmp_path, "smooth-sensitivity", votes, "--seed", 7)
    out = _verify(record_path, "--rtol", 0)
    assert "replayed from the record's public seed 7" in _checks(out)["random sample"]["detail"]
    record = _load(record_path)
    record["report"]["epsilon_released"] += 0.5
    _forge(record_path, record)
    assert _failed(_verify(record_path, expect=ExitCode.BUDGET_EXCEEDED)) == ["epsilon_released"]


def test_verify_of_an_aggregate_record_draws_no_noise(tmp_path, votes, os_draws):
    record_path, _ = _run(tmp_path, "aggregate", votes)
    assert len(os_draws) == 1  # the run's own draw
    assert _verify(record_path)["ok"] is True
    assert len(os_draws) == 1  # verify drew none


# ------------------------------------------------------------------ an edit does not get past


def test_a_forged_command_line_fails_even_with_its_digest_recomputed(tmp_path, votes):
    """The issue's forgery: argv says --sigma 400 and another pate, the digest recomputed."""
    record_path, _ = _run(tmp_path, "smooth-sensitivity", votes)
    record = _load(record_path)
    record["argv"][record["argv"].index("--sigma") + 1] = "400"
    record["versions"]["pate"] = "9.9"
    _forge(record_path, record)
    out = _verify(record_path, expect=ExitCode.BUDGET_EXCEEDED)
    assert _failed(out) == ["command line"]
    detail = _checks(out)["command line"]["detail"]
    assert detail == (
        "does not match the recorded call: call.mechanism.sigma: the command line gives 400.0, "
        "the record has 40.0"
    )
    assert _checks(out)["digest"]["ok"] is True  # a digest is no seal
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
    assert failed in _failed(out)
    assert _checks(out)["command line"]["detail"].startswith("does not match the recorded call")


def test_argv_and_call_edited_together_do_not_recompute(tmp_path, votes):
    record_path, _ = _run(tmp_path, "analyze", votes)
    record = _load(record_path)
    record["argv"][record["argv"].index("--sigma") + 1] = "41"
    record["call"]["mechanism"]["sigma"] = 41.0
    _forge(record_path, record)
    out = _verify(record_path, expect=ExitCode.BUDGET_EXCEEDED)
    assert _checks(out)["command line"]["ok"] is True  # they agree with each other ...
    assert "data_dependent.epsilon" in _failed(out)  # ... but not with the numbers


def test_an_edited_number_or_hash_fails_with_its_digest_recomputed(tmp_path, votes):
    record_path, _ = _run(tmp_path, "smooth-sensitivity", votes)
    original = _load(record_path)
    record = json.loads(json.dumps(original))
    record["report"]["smooth_sensitivity"] *= 0.5
    _forge(record_path, record)
    out = _verify(record_path, expect=ExitCode.BUDGET_EXCEEDED)
    assert _failed(out) == ["smooth_sensitivity"]
    record = json.loads(json.dumps(original))
    record["inputs"]["votes"]["sha256"] = "0" * 64
    _forge(record_path, record)
    assert _failed(_verify(record_path, expect=ExitCode.BUDGET_EXCEEDED)) == ["sha256 of votes"]


def test_a_version_3_record_is_still_read_as_a_private_one(tmp_path, votes):
    record_path, _ = _run(tmp_path, "analyze", votes)
    record = _load(record_path)
    del record["private"], record["privacy"], record["kind"]
    record["version"] = 3
    _forge(record_path, record)
    out = _verify(record_path)
    assert out["ok"] is True and out["record_kind"] == "private"
    record["version"] = 4  # but a version 4 record must say its kind
    _forge(record_path, record)
    result = run_cli(["verify", record_path], expect=ExitCode.BAD_INPUT)
    assert "the record's kind is None" in result.stderr
    record |= {"kind": "private", "private": False}  # a first field that contradicts the kind
    _forge(record_path, record)
    result = run_cli(["verify", record_path], expect=ExitCode.BAD_INPUT)
    assert "first field private is False but its kind is 'private'" in result.stderr


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
    out = _verify(public_path)
    assert out["ok"] is True and out["record_kind"] == "public"
    checks = _checks(out)
    assert checks["publishable"]["detail"].startswith("reproduced: ")
    assert checks["inputs"]["detail"].startswith("a public record holds no hash of its inputs")
    assert not any(name.startswith("sha256 of votes") for name in checks)
    # Its publishable figures are recomputed: one changed is caught.
    record["report"]["publishable"][-1]["epsilon"] += 0.01
    _forge(public_path, record)
    assert _failed(_verify(public_path, expect=ExitCode.BUDGET_EXCEEDED)) == ["publishable"]


def test_a_full_report_under_a_public_label_fails(tmp_path, votes):
    record_path, _ = _run(tmp_path, "analyze", votes, "--public")
    record = _load(record_path)
    record["report"]["data_dependent"] = {"epsilon": 1.0}
    _forge(record_path, record)
    out = _verify(record_path, expect=ExitCode.BUDGET_EXCEEDED)
    assert (
        "data_dependent: in the record but not"
        in _checks(out)["every other recorded number"]["detail"]
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
    why = (
        "exists; pass --force to replace it"
        if command == "analyze"
        else "exists: a second run spends the privacy budget again; pass --force to replace it"
    )
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
    _run(tmp_path, "smooth-sensitivity", votes, "--force")
    second = _load(record_path)
    assert second["created"] >= first["created"] and "--force" in second["argv"]
    assert _verify(record_path)["ok"] is True


def test_a_public_record_keeps_the_labels_hash_only_of_private_noise(tmp_path, votes):
    private_noise, _ = _run(tmp_path, "aggregate", votes, "--public", name="a.json")
    labels = _load(private_noise)["outputs"]["labels"]
    assert labels == {"path": str(tmp_path / "labels.npy"), "sha256": labels["sha256"]}
    extra = ["--public", "--seed", 3, "--output", tmp_path / "seeded.npy"]
    public_noise, _ = _run(tmp_path, "aggregate", votes, *extra, name="b.json")
    # With a public seed the labels are a function of the votes: their hash is not published.
    assert _load(public_noise)["outputs"] == {"labels": {"path": str(tmp_path / "seeded.npy")}}
    out = _verify(public_noise)
    assert out["ok"] is True and not any(c["name"].startswith("sha256") for c in out["checks"])


def test_the_quiet_flag_of_a_recorded_command_line_does_not_silence_verify(tmp_path, votes):
    record_path, _ = _run(tmp_path, "analyze", votes, "--quiet")
    table = run_cli(["verify", record_path]).stdout
    assert "the record holds" in table and "--quiet" in table

"""The noise stays secret: OS entropy by default, seed files, public seeds, and their replay."""

from __future__ import annotations

import hashlib
import json
import os
import stat
from pathlib import Path

import numpy as np
import pytest

import pate_cli as pate
import pate_cli.files.seeds as seeds
from pate_cli.errors import ExitCode
from pate_cli.records.verify import DIFFERS, NOT_CHECKED, VERIFIED
from tests.conftest import MNIST, TABLE2, run_cli

AGGREGATE = ["aggregate", MNIST, *TABLE2]


@pytest.fixture
def drawn_entropy(monkeypatch):
    """Every OS-entropy generator the run makes, so a test can look for its seed."""
    entropies: list[int] = []
    make = np.random.default_rng

    def spy(seed=None):
        generator = make(seed)
        if seed is None:
            entropies.append(int(generator.bit_generator.seed_seq.entropy))
        return generator

    monkeypatch.setattr(seeds.np.random, "default_rng", spy)
    return entropies


def _spellings(seed: int) -> list[str]:
    """How a seed could appear in a text: decimal, hex, and as a float."""
    return [str(seed), f"{seed:x}", f"{seed:032x}", repr(float(seed))]


def _keys(value) -> set[str]:
    """Every key of a JSON value, at any depth."""
    if isinstance(value, dict):
        return set(value).union(*(_keys(v) for v in value.values()))
    if isinstance(value, list):
        return set().union(*(_keys(v) for v in value))
    return set()


def _texts(tmp_path: Path, *results) -> str:
    """Everything a run left: stdout, stderr and every file it wrote."""
    files = [p.read_bytes().decode(errors="replace") for p in tmp_path.iterdir() if p.is_file()]
    streams = [r.stdout + r.stderr for r in results]
    return "\n".join(streams + files)


@pytest.mark.parametrize("command", ["analyze", "smooth-sensitivity", "aggregate"])
def test_without_a_seed_no_output_holds_the_noise_seed(tmp_path, drawn_entropy, command):
    args = [command, MNIST, *TABLE2]
    if command == "aggregate":
        args += ["--output", tmp_path / "l.npy", "--answered-output", tmp_path / "m.npy"]
    as_json = run_cli([*args, "--record", tmp_path / "run.record.json", "--json"])
    table = run_cli([*args, "--record", tmp_path / "again.record.json", "--force"])
    # Every run draws from the OS, a fresh generator per purpose: aggregate's Confident-GNMax
    # has two (its threshold step and its answers), a release one (its GNSS sample).
    assert len(drawn_entropy) == (4 if command == "aggregate" else 2)
    assert len(set(drawn_entropy)) == len(drawn_entropy)  # never one seed twice
    everything = _texts(tmp_path, as_json, table)
    for entropy in drawn_entropy:
        for spelling in _spellings(entropy):
            assert spelling not in everything
    report = as_json.json
    noise = report["noise"] if command != "analyze" else report["release"]["noise"]
    assert noise == {"source": "os-entropy", "private": True}
    assert "seed" not in _keys(report)
    record = json.loads((tmp_path / "run.record.json").read_text())
    assert record["seed"] is None and record["seed_commitment"] is None


def test_a_seed_file_is_created_private_and_reused(tmp_path, drawn_entropy):
    seed_file = tmp_path / "run.seed"
    labels = [tmp_path / "a.npy", tmp_path / "b.npy"]
    first = run_cli([*AGGREGATE, "--seed-file", seed_file, "--output", labels[0], "--json"])
    content = seed_file.read_bytes()
    assert stat.S_IMODE(os.stat(seed_file).st_mode) == 0o600
    assert len(content) == 33 and int(content, 16) >= 0
    run_cli([*AGGREGATE, "--seed-file", seed_file, "--output", labels[1], "--json"])
    assert seed_file.read_bytes() == content  # read, never rewritten
    assert labels[0].read_bytes() == labels[1].read_bytes()
    assert first.json["noise"] == {"source": "seed-file", "private": True}
    seed = int(content, 16)
    everything = _texts(tmp_path, first).replace(content.decode(), "")  # but the seed file
    assert not any(spelling in everything for spelling in _spellings(seed))


def test_a_seed_file_record_holds_only_its_commitment_and_verify_replays_it(tmp_path):
    seed_file, record = tmp_path / "run.seed", tmp_path / "run.record.json"
    outputs = ["--output", tmp_path / "labels.npy", "--answered-output", tmp_path / "mask.npy"]
    run_cli([*AGGREGATE, "--seed-file", seed_file, *outputs, "--record", record])
    stored = json.loads(record.read_text())
    assert stored["seed"] is None
    assert stored["seed_commitment"] == hashlib.sha256(seed_file.read_bytes()).hexdigest()
    replayed = run_cli(["verify", record, "--seed-file", seed_file, "--rtol", 0, "--json"]).json
    checks = {c["name"]: c for c in replayed["checks"]}
    assert replayed["verdict"] == "verified" and replayed["ok"] is True
    assert {c["status"] for c in replayed["checks"]} == {VERIFIED}
    assert checks["seed file"]["detail"] == "matches the record's commitment"
    for role, path in (("labels", "labels.npy"), ("answered_mask", "mask.npy")):
        on_disk = checks[f"sha256 of output {role}"]["detail"]
        assert on_disk == f"{tmp_path / path} is the file the run wrote"
        assert checks[f"regenerated output {role}"]["detail"] == "regenerated byte for byte"
    assert checks["answered"]["detail"].startswith("reproduced")
    # Another seed file is not this run's: exit 1, the check says why, and nothing is
    # replayed from it (the sample is not checked, never verified).
    other = tmp_path / "other.seed"
    seeds.from_seed_file(other)
    failed = run_cli(
        ["verify", record, "--seed-file", other, "--json"], expect=ExitCode.BUDGET_EXCEEDED
    ).json
    bad = [c for c in failed["checks"] if c["status"] == DIFFERS]
    assert [c["name"] for c in bad] == failed["differs"] == ["seed file"]
    assert bad[0]["detail"] == (
        f"{other}: it does not match the record's commitment; it is not the seed file of this run"
    )
    assert failed["not_checked"][:2] == ["random sample", "answered"]
    assert not any(c["name"].startswith("regenerated") for c in failed["checks"])


@pytest.mark.parametrize("command", ["analyze", "smooth-sensitivity"])
def test_verify_replays_the_released_epsilon_from_the_seed_file_bit_for_bit(tmp_path, command):
    seed_file, record = tmp_path / "run.seed", tmp_path / "run.record.json"
    report = run_cli(
        [command, MNIST, *TABLE2, "--seed-file", seed_file, "--record", record, "--json"]
    ).json
    released = report["release" if command == "analyze" else "noise"]
    assert released is not None
    out = run_cli(["verify", record, "--seed-file", seed_file, "--rtol", 0, "--json"]).json
    checks = {c["name"]: c for c in out["checks"]}
    field = "release.epsilon_released" if command == "analyze" else "epsilon_released"
    assert out["verdict"] == "verified" and out["not_checked"] == []
    assert checks[field]["status"] == VERIFIED
    assert checks[field]["detail"].startswith("reproduced")
    # Without the seed file, everything but the sample is checked; the sample is not (exit 3).
    plain = run_cli(["verify", record, "--json"], expect=ExitCode.NOT_CHECKED).json
    names = {c["name"]: c for c in plain["checks"]}
    assert plain["verdict"] == "incomplete" and plain["differs"] == []
    assert plain["not_checked"] == ["random sample", field]
    assert names[field]["status"] == names["random sample"]["status"] == NOT_CHECKED
    assert "not re-derivable without the seed file" in names["random sample"]["detail"]
    assert "give it with --seed-file" in names["random sample"]["detail"]


def test_verify_with_the_wrong_seed_file_for_a_release_is_exit_1(tmp_path):
    seed_file, record = tmp_path / "run.seed", tmp_path / "run.record.json"
    run_cli(["analyze", MNIST, *TABLE2, "--seed-file", seed_file, "--record", record])
    other = tmp_path / "other.seed"
    seeds.from_seed_file(other)
    result = run_cli(
        ["verify", record, "--seed-file", other, "--json"], expect=ExitCode.BUDGET_EXCEEDED
    )
    (failed,) = [check for check in result.json["checks"] if check["status"] == DIFFERS]
    assert failed["name"] == "seed file" and "not the seed file of this run" in failed["detail"]
    assert result.json["not_checked"] == ["random sample", "release.epsilon_released"]


def test_a_public_seed_is_reported_as_not_private(tmp_path):
    record = tmp_path / "run.record.json"
    result = run_cli(["analyze", MNIST, *TABLE2, "--seed", 7, "--record", record, "--json"])
    assert result.json["release"]["noise"] == {"source": "seed", "private": False, "seed": 7}
    assert any("not a private release" in warning for warning in result.json["warnings"])
    stored = json.loads(record.read_text())
    assert stored["seed"] == 7 and stored["noise"]["private"] is False
    out = run_cli(["verify", record, "--rtol", 0, "--json"]).json
    (replayed,) = [c for c in out["checks"] if c["name"] == "random sample"]
    assert out["verdict"] == "verified" and replayed["status"] == VERIFIED
    assert "replayed from the record's public seed 7" in replayed["detail"]
    table = run_cli(["analyze", MNIST, *TABLE2, "--seed", 7])
    assert "public seed 7, not private" in " ".join(table.stdout.split())


def test_a_seed_beyond_2_53_is_a_string_in_json():
    big = 2**100 + 1
    result = run_cli(["smooth-sensitivity", MNIST, *TABLE2, "--seed", big, "--json"])
    assert result.json["noise"]["seed"] == str(big)
    assert seeds.json_seed(2**53 - 1) == 2**53 - 1 and seeds.json_seed(2**53) == str(2**53)


def test_seed_and_seed_file_together_are_a_usage_error(tmp_path):
    result = run_cli(
        [*AGGREGATE, "--seed", 1, "--seed-file", tmp_path / "s", "--output", tmp_path / "l.npy"],
        expect=ExitCode.BAD_INPUT,
    )
    assert "--seed and --seed-file: give one" in result.stderr
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize(
    "content",
    [b"0\n", b"not a seed", b"0" * 33 + b"\n", b"\x00" * 200],
    ids=["short", "text", "long", "binary"],
)
def test_a_file_that_is_not_a_seed_file_is_refused(tmp_path, content):
    seed_file = tmp_path / "run.seed"
    seed_file.write_bytes(content)
    result = run_cli(
        ["analyze", MNIST, *TABLE2, "--seed-file", seed_file], expect=ExitCode.BAD_INPUT
    )
    line = result.stderr.strip()
    assert line.count("\n") == 0 and f"--seed-file {seed_file}" in line
    assert seed_file.read_bytes() == content  # never overwritten


def test_a_seed_file_others_can_read_is_warned_about(tmp_path):
    seed_file = tmp_path / "run.seed"
    seeds.from_seed_file(seed_file)
    seed_file.chmod(0o644)
    result = run_cli(["smooth-sensitivity", MNIST, *TABLE2, "--seed-file", seed_file])
    assert "others than its owner may read it" in " ".join(result.stderr.split())


def test_the_seed_file_may_not_be_an_output_of_the_run(tmp_path):
    seed_file = tmp_path / "run.seed"
    seeds.from_seed_file(seed_file)
    content = seed_file.read_bytes()
    run_cli(
        ["analyze", MNIST, *TABLE2, "--seed-file", seed_file, "--ledger", seed_file],
        expect=ExitCode.BAD_INPUT,
    )
    assert seed_file.read_bytes() == content


def test_verify_with_a_seed_file_for_a_record_without_one_is_a_usage_error(tmp_path):
    record = tmp_path / "run.record.json"
    run_cli(["analyze", MNIST, *TABLE2, "--record", record])
    seeds.from_seed_file(tmp_path / "run.seed")
    result = run_cli(
        ["verify", record, "--seed-file", tmp_path / "run.seed"], expect=ExitCode.BAD_INPUT
    )
    assert "was not made with a seed file" in result.stderr


def test_the_library_keeps_the_noise_secret_too(tmp_path):
    votes = pate.load_votes(MNIST, queries=640)
    mechanism = pate.ConfidentGNMax(200, 150, 40)
    report = pate.analyze(votes, mechanism, delta=1e-5, release="sample")
    assert report.to_dict()["release"]["noise"] == {"source": "os-entropy", "private": True}
    assert "seed" not in repr(report.release.noise).lower().replace("source", "")
    seed_file = tmp_path / "lib.seed"
    first = pate.analyze(votes, mechanism, delta=1e-5, release="sample", seed_file=seed_file)
    again = pate.analyze(votes, mechanism, delta=1e-5, release="sample", seed_file=seed_file)
    assert first.release.epsilon_released == again.release.epsilon_released
    record = tmp_path / "r.json"
    run_cli(["analyze", MNIST, *TABLE2, "--seed-file", seed_file, "--record", record])
    # The library replays the sample too; only the command line it cannot re-parse is left.
    verified = pate.verify(record, seed_file=seed_file, rtol=0)
    assert verified.verdict == "incomplete" and verified.not_checked == ("command line",)
    assert verified.differing == ()
    (released,) = [c for c in verified.checks if c.name == "release.epsilon_released"]
    assert released.status == VERIFIED and released.ok


def test_verify_with_a_missing_seed_file_is_exit_2(tmp_path):
    record = tmp_path / "run.record.json"
    run_cli(["analyze", MNIST, *TABLE2, "--seed-file", tmp_path / "run.seed", "--record", record])
    missing = tmp_path / "gone.seed"
    result = run_cli(["verify", record, "--seed-file", missing], expect=ExitCode.BAD_INPUT)
    assert f"--seed-file {missing}: no such file" in result.stderr
    assert not missing.exists()  # verify never creates a seed file

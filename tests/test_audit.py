"""Records an auditor can trust: three verdicts, everything derived recomputed, public records
bound to their votes, independent noise per purpose, a second spend said, a sampled figure on
a grid."""

from __future__ import annotations

import json
import math
import os
import re
import stat
from pathlib import Path

import numpy as np
import pytest

import pate_cli as pate
from pate_cli.errors import ExitCode
from pate_cli.files.seeds import PURPOSES, from_seed, from_seed_file
from pate_cli.records.record import record_digest
from pate_cli.release.gnss import on_grid
from tests.conftest import MNIST, TABLE2, run_cli

# The release of the issue: order, beta and sigma_ss fixed in advance, so it is publishable.
FIXED = ["--order", 14, "--beta", 0.03, "--sigma-ss", 6]


def _statuses(report: dict) -> dict[str, str]:
    return {check["name"]: check["status"] for check in report["checks"]}


def _forge(path: Path, edit) -> Path:
    """The record with ``edit`` applied and its digest recomputed, as a forger would."""
    record = json.loads(path.read_text())
    edit(record)
    record["digest"] = record_digest(record)
    forged = path.with_name("forged.json")
    forged.write_text(json.dumps(record))
    return forged


@pytest.fixture
def votes(tmp_path) -> Path:
    path = tmp_path / "v.npy"
    path.write_bytes(Path(MNIST).read_bytes())
    return path


@pytest.fixture
def public_release(tmp_path, votes) -> tuple[Path, Path, Path]:
    """The issue's public record of a GNSS release: (record, opening, seed file)."""
    seed, record = tmp_path / "team.seed", tmp_path / "pub.json"
    args = ["smooth-sensitivity", votes, *TABLE2, *FIXED, "--seed-file", seed]
    run_cli([*args, "--public", "--record", record])
    return record, tmp_path / "pub.opening.json", seed


def test_a_public_record_verifies_whole_only_with_its_opening_and_seed_file(public_release, votes):
    record, opening, seed = public_release
    assert stat.S_IMODE(os.stat(opening).st_mode) == 0o600
    stored = json.loads(record.read_text())
    assert set(stored["commitments"]) == {"votes", "seed"}
    assert stored["opening"] == str(opening) and stored["seed_commitment"] is None
    assert "sha256" not in stored["inputs"]["votes"]
    alone = run_cli(["verify", record, "--votes", votes, "--json"], expect=ExitCode.NOT_CHECKED)
    statuses = _statuses(alone.json)
    assert alone.json["verdict"] == "incomplete" and not alone.json["ok"]
    for name in ("random sample", "binding of votes", "publishable gnss-release"):
        assert statuses[name] == "not-checked", name
    assert set(alone.json["not_checked"]) == {n for n, s in statuses.items() if s == "not-checked"}
    assert all("ok" not in check for check in alone.json["checks"])
    assert "not checked: random sample, binding of votes" in alone.json["summary"]
    whole = run_cli(
        ["verify", record, "--votes", votes, "--opening", opening, "--seed-file", seed, "--json"]
    ).json
    assert whole["verdict"] == "verified" and set(_statuses(whole).values()) == {"verified"}
    # On purpose, a pipeline accepts the unchecked sample: 3 becomes 0, a difference stays 1.
    run_cli(["verify", record, "--votes", votes, "--allow-unchecked"])


def test_a_forged_sampled_figure_is_never_verified(public_release, votes):
    record, opening, seed = public_release
    sampled = json.loads(record.read_text())["report"]["publishable"][0]
    assert sampled["basis"] == "gnss-release"

    def edit(r):
        r["report"]["publishable"][0]["epsilon"] = 0.5

    forged = _forge(record, edit)
    alone = run_cli(["verify", forged, "--votes", votes, "--json"], expect=ExitCode.NOT_CHECKED)
    assert _statuses(alone.json)["publishable gnss-release"] == "not-checked"
    assert alone.json["verdict"] == "incomplete" and "publishable" not in alone.json["differs"]
    caught = run_cli(
        ["verify", forged, "--votes", votes, "--opening", opening, "--seed-file", seed, "--json"],
        expect=ExitCode.BUDGET_EXCEEDED,
    ).json
    assert caught["verdict"] == "differs" and caught["differs"] == ["publishable"]


def test_a_forged_released_epsilon_of_a_full_record_is_caught_with_the_seed_file(tmp_path, votes):
    seed, record = tmp_path / "run.seed", tmp_path / "full.json"
    run_cli(["smooth-sensitivity", votes, *TABLE2, *FIXED, "--seed-file", seed, "--record", record])
    forged = _forge(record, lambda r: r["report"].__setitem__("epsilon_released", 1.0))
    alone = run_cli(["verify", forged, "--json"], expect=ExitCode.NOT_CHECKED).json
    assert _statuses(alone)["epsilon_released"] == "not-checked"
    caught = run_cli(
        ["verify", forged, "--seed-file", seed, "--json"], expect=ExitCode.BUDGET_EXCEEDED
    ).json
    assert "epsilon_released" in caught["differs"]


@pytest.mark.parametrize("edit", ["deleted", "edited"])
def test_deleted_or_edited_warnings_differ(tmp_path, votes, edit):
    record = tmp_path / "full.json"
    report = run_cli(
        ["smooth-sensitivity", votes, *TABLE2, "--record", record, "--json"]
    ).json  # beta and sigma_ss chosen on the votes: a warning says so
    assert any("chosen by looking at the private votes" in w for w in report["warnings"])

    def change(r):
        if edit == "deleted":
            r["report"]["warnings"] = []
        else:
            r["report"]["warnings"][0] = "all is well"

    forged = _forge(record, change)
    out = run_cli(["verify", forged, "--json"], expect=ExitCode.BUDGET_EXCEEDED).json
    assert out["differs"] == ["warnings"]
    detail = {c["name"]: c["detail"] for c in out["checks"]}["warnings"]
    assert "chosen by looking at the private votes" in detail


def test_an_edited_note_of_the_publishable_list_differs(tmp_path, votes):
    record = tmp_path / "full.json"
    run_cli(["analyze", votes, *TABLE2, "--no-release", "--record", record])
    forged = _forge(record, lambda r: r["report"]["publishable"][0].__setitem__("note", "fine"))
    out = run_cli(["verify", forged, "--json"], expect=ExitCode.BUDGET_EXCEEDED).json
    assert out["differs"] == ["every other recorded number and note"]


def test_a_public_record_checked_against_another_vote_file_differs_with_its_opening(
    public_release, votes
):
    record, opening, seed = public_release
    swapped = votes.with_name("w.npy")
    counts = np.load(votes, allow_pickle=False)
    np.save(swapped, counts[[1, 0, *range(2, counts.shape[0])]])  # the same shape and figures
    alone = run_cli(
        ["verify", record, "--votes", swapped, "--seed-file", seed, "--json"],
        expect=ExitCode.NOT_CHECKED,
    ).json
    assert _statuses(alone)["binding of votes"] == "not-checked"
    bound = run_cli(
        ["verify", record, "--votes", swapped, "--opening", opening, "--seed-file", seed, "--json"],
        expect=ExitCode.BUDGET_EXCEEDED,
    ).json
    assert bound["differs"] == ["binding of votes"]


def test_a_seed_file_that_is_not_the_public_records_differs_with_the_opening(
    public_release, votes, tmp_path
):
    record, opening, _ = public_release
    other = tmp_path / "other.seed"
    from_seed_file(other)
    out = run_cli(
        ["verify", record, "--votes", votes, "--opening", opening, "--seed-file", other, "--json"],
        expect=ExitCode.BUDGET_EXCEEDED,
    ).json
    assert out["differs"] == ["seed file"]


def test_the_seed_file_never_makes_verify_less_strict(tmp_path, votes):
    """The labels on disk replaced by a later --force run differ, with or without the seed."""
    seed, record, labels = tmp_path / "run.seed", tmp_path / "agg.json", tmp_path / "labels.npy"
    aggregate = ["aggregate", votes, *TABLE2, "--output", labels]
    run_cli([*aggregate, "--seed-file", seed, "--record", record])
    assert run_cli(["verify", record, "--seed-file", seed, "--json"]).json["verdict"] == "verified"
    run_cli([*aggregate, "--force"])  # new noise from the OS: other labels
    for extra in ([], ["--seed-file", seed]):
        out = run_cli(["verify", record, *extra, "--json"], expect=ExitCode.BUDGET_EXCEEDED).json
        assert "sha256 of output labels" in out["differs"], extra
    regenerated = _statuses(out)["regenerated output labels"]
    assert regenerated == "verified"  # the replay still gives the run's own labels


def test_a_missing_output_is_not_checked_rather_than_passed(tmp_path, votes):
    seed, record, labels = tmp_path / "run.seed", tmp_path / "agg.json", tmp_path / "labels.npy"
    run_cli(
        ["aggregate", votes, *TABLE2, "--output", labels, "--seed-file", seed, "--record", record]
    )
    labels.unlink()
    out = run_cli(["verify", record, "--json"], expect=ExitCode.NOT_CHECKED).json
    assert _statuses(out)["sha256 of output labels"] == "not-checked"


def test_the_library_says_not_checked_for_the_command_line_it_cannot_parse(tmp_path, votes):
    record = tmp_path / "full.json"
    run_cli(["analyze", votes, *TABLE2, "--no-release", "--record", record])
    report = pate.verify(record)
    assert report.verdict == "incomplete" and report.not_checked == ("command line",)
    assert not report.ok and [c.status for c in report.checks].count("not-checked") == 1


def test_every_purpose_draws_from_its_own_stream():
    noise = from_seed(7)
    first = {p: noise.generator(p).standard_normal(4) for p in PURPOSES}
    plain = np.random.default_rng(7).standard_normal(4)
    values = [*first.values(), plain]
    for i, a in enumerate(values):
        for b in values[i + 1 :]:
            assert not np.intersect1d(a, b).size  # no shared draw
    # A purpose's stream is the same on every call: a record's replay finds it again.
    assert np.array_equal(noise.generator("gnss-sample").standard_normal(4), first["gnss-sample"])
    assert sorted(PURPOSES.values()) == [1, 2, 3]


def test_the_labels_and_the_gnss_sample_are_not_the_plain_streams_of_the_seed(mnist_counts):
    counts = mnist_counts[:640]
    sigma = 40.0
    run = pate.aggregate(pate.load_votes(counts), pate.GNMax(sigma), delta=1e-5, seed=7)
    z = np.random.default_rng(7).standard_normal(counts.shape)
    assert np.mean(run.labels == np.argmax(counts + sigma * z, axis=1)) < 0.99
    votes = pate.load_votes(MNIST, queries=640)
    mechanism = pate.ConfidentGNMax(200, 150, 40)
    report = pate.smooth_sensitivity(
        votes, mechanism, delta=1e-5, seed=7, order=14.0, beta=0.03, sigma_ss=6
    ).to_dict()
    # The classic conversion is linear in the RDP: the sample moves the expected release by
    # the draw itself.
    expected, std = report["epsilon_expected_release"], report["noise_std"]
    own = from_seed(7).generator("gnss-sample").normal(0.0, std)
    shared = np.random.default_rng(7).normal(0.0, std)
    assert report["epsilon_released"] == on_grid(expected + own)
    assert report["epsilon_released"] != on_grid(expected + shared)


def test_force_over_a_release_says_the_budget_was_spent_again(tmp_path, votes):
    labels = tmp_path / "labels.npy"
    aggregate = ["aggregate", votes, *TABLE2, "--output", labels]
    first = run_cli([*aggregate, "--json"])
    assert not any("spent again" in w for w in first.json["warnings"])
    again = run_cli([*aggregate, "--force", "--json"])
    assert any("spent again" in w and str(labels) in w for w in again.json["warnings"])
    assert "spent again" in again.stderr
    public = run_cli([*aggregate, "--force", "--public", "--json"])
    assert any("spent again" in w for w in public.json["warnings"])
    assert "spent again" in public.stderr


def test_force_with_nothing_to_replace_says_nothing(tmp_path, votes):
    result = run_cli(["aggregate", votes, *TABLE2, "--output", tmp_path / "l.npy", "--force"])
    assert "spent again" not in result.stderr


@pytest.mark.parametrize(
    "value", [0.0, 1.0, 1.23456789, 0.30000000000000004, 2.00005, 1e-9, -0.5, 1e6 + 0.123456]
)
def test_a_sampled_figure_is_rounded_up_to_four_decimals(value):
    up = on_grid(value)
    assert up >= value and up - value < 1e-4 + 1e-12
    assert f"{up:.4f}" == repr(up) or float(f"{up:.4f}") == up
    assert on_grid(math.inf) == math.inf


def test_the_released_epsilon_is_published_on_the_grid(tmp_path, votes):
    record = tmp_path / "pub.json"
    out = run_cli(
        ["smooth-sensitivity", votes, *TABLE2, *FIXED, "--public", "--record", record, "--json"]
    ).json
    sampled = out["publishable"][0]["epsilon"]
    assert float(f"{sampled:.4f}") == sampled
    full = run_cli(["smooth-sensitivity", votes, *TABLE2, *FIXED, "--json"]).json
    assert float(f"{full['epsilon_released']:.4f}") == full["epsilon_released"]
    table = run_cli(["smooth-sensitivity", votes, *TABLE2, *FIXED])
    assert not re.search(r"\d\.\d{5,}", table.stdout.split("sampled", 1)[-1].split("\n")[0])


def test_no_seed_salt_or_opening_appears_in_any_output(tmp_path, votes):
    """Every release of the suite's kinds, private and public, with a seed file: the seed,
    the salts and the opening's content appear on no stream, in no JSON and no public record."""
    seed = tmp_path / "team.seed"
    outputs: list[str] = []
    publics: list[Path] = []
    for command in ("analyze", "smooth-sensitivity", "aggregate"):
        for public in (False, True):
            name = f"{command}-{'public' if public else 'private'}"
            args = [command, votes, *TABLE2, *(FIXED[2:] if command != "aggregate" else [])]
            args += ["--seed-file", seed, "--record", tmp_path / f"{name}.json"]
            if command == "aggregate":
                args += ["--output", tmp_path / f"{name}.labels.npy"]
            if public:
                args += ["--public"]
                publics.append(tmp_path / f"{name}.json")
            for as_json in ([], ["--json"]):
                result = run_cli([*args, *as_json, "--force"])
                outputs += [result.stdout, result.stderr]
            verified = run_cli(
                ["verify", tmp_path / f"{name}.json", "--seed-file", seed, "--json"]
                + (["--opening", tmp_path / f"{name}.opening.json"] if public else []),
            )
            outputs += [verified.stdout, verified.stderr]
    secret = seed.read_text().strip()
    salts = [
        salt
        for opening in tmp_path.glob("*.opening.json")
        for salt in json.loads(opening.read_text())["salts"].values()
    ]
    assert len(salts) == 3 * 2  # votes and seed, for each public record
    texts = outputs + [p.read_text() for p in publics]
    for text in texts:
        assert secret not in text and str(int(secret, 16)) not in text
        for salt in salts:
            assert salt not in text
        assert '"salts"' not in text

"""``aggregate`` draws its noise a block of queries at a time, each block from its own streams
of the seed: a run of at most a block draws the labels it drew before, and any block's labels
are its own call's, drawn without the blocks before it (what a shard of a run needs); the stop
conditions apply to the whole run; records name the layout and old ones replay as drawn."""

from __future__ import annotations

import json

import numpy as np
import pytest

import pate_cli as pate
from pate_cli.files.seeds import PURPOSES, from_seed
from pate_cli.jobs.aggregation import NOISE_BLOCK
from pate_cli.mechanisms import Run
from pate_cli.records.record import record_digest
from tests.conftest import MNIST, run_cli

MECHANISMS = [
    pate.GNMax(sigma=40),
    pate.ConfidentGNMax(threshold=200, sigma1=150, sigma=40),
    pate.LNMax(gamma=0.1),
]


@pytest.fixture(scope="module")
def votes() -> pate.Votes:
    return pate.load_votes(MNIST, queries=640)


def _one_call(votes: pate.Votes, mechanism, noise, rows=slice(None)):  # type: ignore[no-untyped-def]
    run = Run(None, 1.0, votes.num_teachers, None, None, False)
    return mechanism.run(votes.counts[rows], noise, run).labels


@pytest.mark.parametrize("mechanism", MECHANISMS, ids=repr)
def test_a_run_of_one_block_draws_from_the_purposes_own_streams(votes, mechanism):
    drawn = pate.aggregate(votes, mechanism, delta=1e-5, seed=7)
    assert drawn.to_dict()["noise_block"] == NOISE_BLOCK == 65_536
    np.testing.assert_array_equal(drawn.labels, _one_call(votes, mechanism, from_seed(7)))
    whole = pate.aggregate(votes, mechanism, delta=1e-5, seed=7, noise_block=None)
    np.testing.assert_array_equal(whole.labels, drawn.labels)
    assert whole.to_dict()["noise_block"] is None


@pytest.mark.parametrize("mechanism", MECHANISMS, ids=repr)
def test_each_block_draws_its_own_noise_alone(votes, mechanism):
    drawn = pate.aggregate(votes, mechanism, delta=1e-5, seed=7, noise_block=100)
    for index, start in enumerate(range(0, 640, 100)):
        rows = slice(start, start + 100)
        alone = _one_call(votes, mechanism, from_seed(7).block(index), rows)
        np.testing.assert_array_equal(drawn.labels[rows], alone)
    whole = pate.aggregate(votes, mechanism, delta=1e-5, seed=7, noise_block=None)
    assert not np.array_equal(drawn.labels[100:], whole.labels[100:])  # other streams


def test_blocks_are_streams_of_their_own():
    noise = from_seed(11)
    draws = [noise.block(b).generator("aggregate-answer").standard_normal(4) for b in range(3)]
    assert len({tuple(d) for d in draws}) == 3
    assert np.array_equal(draws[0], noise.generator("aggregate-answer").standard_normal(4))
    key = PURPOSES["aggregate-answer"]
    expected = np.random.default_rng(np.random.SeedSequence(11, spawn_key=(key, 2)))
    assert np.array_equal(draws[2], expected.standard_normal(4))


def test_the_stop_conditions_apply_to_the_whole_run(votes):
    mechanism = pate.ConfidentGNMax(threshold=200, sigma1=150, sigma=40)
    free = pate.aggregate(votes, mechanism, delta=1e-5, seed=3, noise_block=100)
    stopped = pate.aggregate(
        votes, mechanism, delta=1e-5, seed=3, noise_block=100, max_answered=150
    )
    answered_before = np.cumsum(free.answered) - free.answered
    seen = int(np.count_nonzero(answered_before < 150))
    assert 100 < seen < 640  # the stop falls past the first block
    np.testing.assert_array_equal(stopped.labels[:seen], free.labels[:seen])
    assert (stopped.labels[seen:] == -1).all()
    assert stopped.answered.size == seen and stopped.answered.sum() == 150


def _as_version_6(record) -> None:  # type: ignore[no-untyped-def]
    """The record as pate wrote it before the blocks: version 6, no ``noise_block``."""
    written = json.loads(record.read_text())
    old = {key: value for key, value in written.items() if key != "digest"}
    old["version"] = 6
    old["report"] = {k: v for k, v in old["report"].items() if k != "noise_block"}
    old["digest"] = record_digest(old)
    record.write_text(json.dumps(old))


@pytest.mark.parametrize("one_stream", [True, False], ids=["drawn from one stream", "by blocks"])
def test_an_old_record_replays_from_one_stream(tmp_path, write_npy, monkeypatch, one_stream):
    """A record names the blocks its noise was drawn by; one without them (pate before version
    7) is replayed from one stream a purpose, so labels drawn so verify, and labels drawn by
    blocks do not."""
    contested = [[130, 120, 0, 0, 0, 0, 0, 0, 0, 0]]  # sigma 40 draws either label often
    rows = np.tile(contested, (NOISE_BLOCK + 2_000, 1))  # two blocks, the second contested
    path = write_npy(rows, "long.npy")
    record, seed_file = tmp_path / "run.json", tmp_path / "run.seed"
    with monkeypatch.context() as patch:
        if one_stream:  # as pate drew before the blocks
            patch.setitem(pate.aggregate.__kwdefaults__, "noise_block", None)
        run_cli(["aggregate", path, "--sigma", 40, "--delta", 1e-5, "--seed-file", seed_file,
                 "--output", tmp_path / "labels.npy", "--record", record, "-q"])  # fmt: skip
    written = json.loads(record.read_text())
    assert written["version"] == 7
    assert written["report"]["noise_block"] == (None if one_stream else NOISE_BLOCK)
    verify = ["verify", record, "--seed-file", seed_file, "--json"]
    assert json.loads(run_cli(verify).stdout)["verdict"] == "verified"
    _as_version_6(record)
    report = json.loads(run_cli(verify, expect=0 if one_stream else 1).stdout)
    if one_stream:
        assert report["verdict"] == "verified"
    else:
        assert "regenerated output labels" in report["differs"]


@pytest.mark.parametrize("block", [0, -5, 1.5, True])
def test_a_bad_noise_block_is_refused(votes, block):
    with pytest.raises(pate.UsageError, match="noise_block"):
        pate.aggregate(votes, pate.GNMax(sigma=40), delta=1e-5, seed=1, noise_block=block)

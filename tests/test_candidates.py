"""Candidate sets, abstentions and what is refused over a vocabulary.

A query's candidates (``--candidates``, ``candidates=`` or a ``candidates`` member beside a
sparse matrix) give it its own number of classes n: its classes are 0 .. n - 1. Every figure
is then that of each query's dense row cut to its n classes, computed here one query at a
time through the dense code; labels with abstentions (-1) over a vocabulary count as the
dense histogram does; and what has no answer over a vocabulary is one line, exit 2.
"""

from __future__ import annotations

import json

import numpy as np
import pytest
import scipy.sparse

import pate_cli as pate
import pate_cli.votes
from pate_cli.core.compact import Compact
from pate_cli.core.gnmax import logq_gnmax
from pate_cli.errors import ExitCode, InputError, UnsupportedError
from tests.conftest import run_cli

TEACHERS, VOCABULARY, QUERIES = 40, 6000, 120


def candidate_votes(seed: int) -> tuple[np.ndarray, np.ndarray]:
    """(queries, vocabulary) counts of 40 teachers on 1-4 of each query's first n classes,
    and n per query (from 2 to the vocabulary)."""
    rng = np.random.default_rng(seed)
    candidates = rng.integers(2, VOCABULARY + 1, QUERIES)
    candidates[:3] = (2, 5, VOCABULARY)
    dense = np.zeros((QUERIES, VOCABULARY))
    for q, n in enumerate(candidates):
        voted = rng.choice(n, size=min(n, rng.integers(1, 5)), replace=False)
        dense[q, voted] = rng.multinomial(TEACHERS, rng.dirichlet(np.ones(voted.size)))
    return dense, candidates


@pytest.fixture(scope="module")
def votes(tmp_path_factory):
    folder = tmp_path_factory.mktemp("candidates")
    dense, candidates = candidate_votes(5)
    matrix = scipy.sparse.csr_matrix(dense)
    paths = {"sparse": folder / "votes.npz", "candidates": folder / "candidates.npy"}
    scipy.sparse.save_npz(paths["sparse"], matrix)
    np.save(paths["candidates"], candidates)
    paths["with member"] = folder / "with_member.npz"
    np.savez(
        paths["with member"],
        format=np.array("csr"),
        shape=np.array(matrix.shape),
        data=matrix.data,
        indices=matrix.indices,
        indptr=matrix.indptr,
        candidates=candidates,
    )
    return dense, candidates, paths


def per_query_logq(dense: np.ndarray, candidates: np.ndarray, sigma: float) -> np.ndarray:
    """Prop. 7 of each query over its own classes, one dense row at a time."""
    return np.array([logq_gnmax(dense[q : q + 1, :n], sigma)[0] for q, n in enumerate(candidates)])


@pytest.mark.parametrize("given", ["file", "array", "member"])
def test_each_query_is_analysed_over_its_candidates(votes, given):
    dense, candidates, paths = votes
    source = paths["with member"] if given == "member" else paths["sparse"]
    extra = {"file": {"candidates": paths["candidates"]}, "array": {"candidates": candidates}}
    read = pate.load_votes(source, **extra.get(given, {}))
    assert isinstance(read.counts, Compact)
    np.testing.assert_array_equal(read.counts.num_classes, candidates)
    np.testing.assert_array_equal(read.counts.dense(VOCABULARY), dense)
    assert read.num_classes == VOCABULARY
    want = per_query_logq(dense, candidates, 8.0)
    got = logq_gnmax(read.counts, 8.0)
    np.testing.assert_allclose(got, want, rtol=1e-12)
    # Fewer classes than the vocabulary: a smaller q than over every class.
    assert np.all(got[:2] < logq_gnmax(dense[:2], 8.0))
    (note,) = read.warnings
    assert "candidates, 2 to 6000 per query" in note and "without the private votes" in note


def test_the_analysis_is_the_per_query_accounting(votes):
    dense, candidates, paths = votes
    report = pate.analyze(
        paths["sparse"], pate.GNMax(8.0), delta=1e-5, candidates=candidates, release=False
    )
    orders = report.orders
    rdp = pate.GNMax(8.0).answer_step.cost(orders)(per_query_logq(dense, candidates, 8.0))
    total = np.minimum(rdp.sum(axis=0), report.data_independent.rdp)
    np.testing.assert_allclose(report.data_dependent.rdp, total, rtol=1e-12)


def test_candidates_follow_the_query_selection(votes, tmp_path):
    dense, candidates, paths = votes
    indices = np.array([7, 0, 42, 3])
    np.save(tmp_path / "indices.npy", indices)
    read = pate.load_votes(
        paths["sparse"], candidates=candidates, indices=tmp_path / "indices.npy", queries=3
    )
    np.testing.assert_array_equal(read.counts.num_classes, candidates[indices[:3]])
    np.testing.assert_array_equal(read.counts.dense(VOCABULARY), dense[indices[:3]])


def test_dense_counts_take_candidates_too(votes, tmp_path):
    dense, candidates, _ = votes
    np.save(tmp_path / "small.npy", dense[:, :50])
    small = np.minimum(candidates, 50)
    read = pate.load_votes(tmp_path / "small.npy", format="counts", teachers=40, candidates=small)
    np.testing.assert_array_equal(read.counts.num_classes, small)
    np.testing.assert_allclose(
        logq_gnmax(read.counts, 3.0), per_query_logq(dense[:, :50], small, 3.0), rtol=1e-12
    )


@pytest.mark.parametrize(
    ("candidates", "message"),
    [
        (np.full(QUERIES - 1, 10), "expected one count per query"),
        (np.zeros(QUERIES, dtype=int), "candidate count of query 0 is 0"),
        (np.full(QUERIES, VOCABULARY + 1), "expected a whole number of classes in [1, 6000]"),
        (np.full(QUERIES, 2.5), "candidate count of query 0 is 2.5"),
        (np.full(QUERIES, 1), "query 0 has votes for class"),
    ],
)
def test_bad_candidates_are_one_line(votes, candidates, message):
    _, _, paths = votes
    with pytest.raises(InputError) as error:
        pate.load_votes(paths["sparse"], candidates=candidates)
    assert message in str(error.value) and "\n" not in str(error.value)


def test_the_command_line_reads_candidates_and_records_them(votes, tmp_path):
    _, candidates, paths = votes
    record = tmp_path / "run.record.json"
    result = run_cli(
        [
            "analyze",
            paths["sparse"],
            "--candidates",
            paths["candidates"],
            "--sigma",
            "8",
            "--delta",
            "1e-5",
            "--no-release",
            "--json",
            "--record",
            record,
        ]
    )
    report = json.loads(result.stdout)
    library = pate.analyze(
        paths["sparse"], pate.GNMax(8.0), delta=1e-5, candidates=candidates, release=False
    )
    assert report["data_dependent"]["epsilon"] == library.data_dependent.epsilon
    assert "candidates" in json.loads(record.read_text())["inputs"]
    verified = json.loads(run_cli(["verify", record, "--json"]).stdout)
    assert verified["verdict"] == "verified"


@pytest.mark.parametrize(
    ("votes_file", "candidates_file", "message"),
    [
        ("with member", "candidates", "holds its candidates"),
        ("sparse", "ones", "query 0 has votes for class"),
    ],
)
def test_bad_candidates_on_the_command_line_exit_2(
    votes, tmp_path, votes_file, candidates_file, message
):
    _, _, paths = votes
    np.save(tmp_path / "ones.npy", np.ones(QUERIES, dtype=int))
    files = {**paths, "ones": tmp_path / "ones.npy"}
    flags = ["--candidates", files[candidates_file], "--sigma", "8", "--delta", "1e-5"]
    record = tmp_path / "run.record.json"
    result = run_cli(
        ["analyze", files[votes_file], *flags, "--record", record], expect=ExitCode.BAD_INPUT
    )
    assert result.stderr.count("\n") == 1 and message in result.stderr
    assert not record.exists()


def test_a_vocabulary_past_the_limit_is_one_line_and_exit_2(tmp_path):
    """The vocabulary is a number in the file (a sparse shape) or a flag: past 2^24 classes
    nothing is allocated for it."""
    wide = scipy.sparse.csr_matrix(([5.0], ([0], [3])), shape=(1, (1 << 24) + 1))
    scipy.sparse.save_npz(tmp_path / "wide.npz", wide)
    np.save(tmp_path / "labels.npy", np.zeros((5, 4), dtype=np.int32))
    cases = [
        ([tmp_path / "wide.npz"], "a sparse matrix of 16777217 classes"),
        (
            [tmp_path / "labels.npy", "--format", "labels", "--num-classes", 1 << 25],
            "--num-classes 33554432",
        ),
    ]
    for votes_args, message in cases:
        result = run_cli(["inspect", *votes_args], expect=ExitCode.BAD_INPUT)
        assert result.stderr.count("\n") == 1 and message in result.stderr
        assert "at most 16777216 classes" in result.stderr


def test_the_release_with_candidates_is_not_made_and_says_why(votes):
    _, candidates, paths = votes
    report = pate.analyze(paths["sparse"], pate.GNMax(8.0), delta=1e-5, candidates=candidates)
    assert report.release.to_json_dict()["released"] is False
    assert "candidate sets" in report.release.to_json_dict()["reason"]
    with pytest.raises(UnsupportedError, match="candidate sets"):
        pate.smooth_sensitivity(
            paths["sparse"], pate.GNMax(8.0), delta=1e-5, candidates=candidates, seed=1
        )


def test_interactive_gnmax_over_a_vocabulary_is_refused_in_one_line(votes, tmp_path):
    dense, _, paths = votes
    np.save(tmp_path / "baseline.npy", np.zeros_like(dense))
    result = run_cli(
        [
            "analyze",
            paths["sparse"],
            "--threshold",
            "30",
            "--sigma1",
            "10",
            "--sigma",
            "8",
            "--delta",
            "1e-5",
            "--baseline",
            tmp_path / "baseline.npy",
        ],
        expect=ExitCode.BAD_INPUT,
    )
    assert result.stderr.count("\n") == 1
    assert "--baseline: Interactive-GNMax over votes held by query" in result.stderr


def test_labels_with_abstentions_over_a_vocabulary_count_as_dense(tmp_path, monkeypatch):
    rng = np.random.default_rng(9)
    labels = rng.integers(0, VOCABULARY, (TEACHERS, 300)).astype(np.int32)
    labels[:, :100] = rng.integers(0, 3, (TEACHERS, 100))  # agreeing queries
    labels[rng.random(labels.shape) < 0.2] = -1  # abstentions
    labels[:, 5] = -1  # a query every teacher abstains on
    np.save(tmp_path / "labels.npy", labels)
    read = pate.load_votes(tmp_path / "labels.npy", format="labels", num_classes=VOCABULARY)
    assert isinstance(read.counts, Compact)
    expected = np.zeros((300, VOCABULARY))
    for q in range(300):
        voted = labels[:, q][labels[:, q] >= 0]
        np.add.at(expected[q], voted, 1)
    np.testing.assert_array_equal(read.counts.dense(VOCABULARY), expected)
    monkeypatch.setattr(pate_cli.votes, "COMPACT_MIN_CLASSES", 10**9)
    dense = pate.load_votes(tmp_path / "labels.npy", format="labels", num_classes=VOCABULARY)
    assert isinstance(dense.counts, np.ndarray)
    for mechanism in (pate.GNMax(5.0), pate.LNMax(0.3)):
        compact_report = pate.analyze(read, mechanism, delta=1e-5, release=False).to_dict()
        dense_report = pate.analyze(dense, mechanism, delta=1e-5, release=False).to_dict()
        for key in ("data_dependent", "data_independent", "data_independent_exact"):
            assert compact_report[key]["epsilon"] == pytest.approx(
                dense_report[key]["epsilon"], rel=1e-12
            )


def test_lnmax_release_over_a_vocabulary_is_the_dense_one(tmp_path, monkeypatch):
    rng = np.random.default_rng(4)
    dense = np.zeros((60, 4500))
    for q in range(60):
        voted = rng.choice(4500, size=3, replace=False)
        dense[q, voted] = rng.multinomial(30, [0.8, 0.15, 0.05])
    np.save(tmp_path / "wide.npy", dense)
    compact = pate.load_votes(tmp_path / "wide.npy")
    assert isinstance(compact.counts, Compact)
    monkeypatch.setattr(pate_cli.votes, "COMPACT_MIN_CLASSES", 10**9)
    plain = pate.load_votes(tmp_path / "wide.npy")
    assert isinstance(plain.counts, np.ndarray)
    mechanism = pate.LNMax(0.5)
    got = pate.smooth_sensitivity(compact, mechanism, delta=1e-5, order=3.0, seed=1).to_dict()
    want = pate.smooth_sensitivity(plain, mechanism, delta=1e-5, order=3.0, seed=1).to_dict()
    assert got["smooth_sensitivity"] == pytest.approx(want["smooth_sensitivity"], rel=1e-12)
    assert got["smooth_sensitivity"] > 0

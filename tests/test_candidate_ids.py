"""Candidate sets as token ids (``--candidates``, ``candidates=``, a ``candidates`` member).

A next-token run holds each query's top-k token ids. Given as a (queries x k) integer array
(-1 pads a shorter row) or a sparse queries x vocabulary matrix whose non-zeros mark them,
a query's classes are its candidates in increasing token id order; its votes for other
tokens are dropped and reported once; the teachers stay the file's. The oracle is the count
form on the same votes renumbered by hand: every figure is the same, and ``aggregate``
releases the same classes, as token ids.
"""

from __future__ import annotations

import json

import numpy as np
import pytest
import scipy.sparse
from scipy.stats import chi2_contingency

import pate_cli as pate
import pate_cli.votes
from pate_cli.core.compact import Compact
from pate_cli.errors import ExitCode, InputError, UnsupportedError
from tests.conftest import run_cli

TEACHERS, VOCABULARY, QUERIES, WIDTH = 40, 5000, 90, 6
CONFIDENT = pate.ConfidentGNMax(threshold=25.0, sigma1=8.0, sigma=5.0)


class IdVotes:
    """Labels of token ids (teachers x queries) mostly on each query's candidates, every
    third query with some votes elsewhere; the candidates padded, sorted by id, as a sparse
    matrix, and the same votes renumbered by hand (the count form's input)."""

    def __init__(self, seed: int, uniform: bool) -> None:
        rng = np.random.default_rng(seed)
        self.sizes = np.full(QUERIES, WIDTH) if uniform else rng.integers(2, WIDTH + 1, QUERIES)
        self.padded = np.full((QUERIES, WIDTH), -1, dtype=np.int64)
        self.labels = np.empty((TEACHERS, QUERIES), dtype=np.int64)
        for q, k in enumerate(self.sizes):
            ids = np.sort(rng.choice(VOCABULARY, size=k, replace=False))
            self.padded[q, :k] = ids
            self.labels[:, q] = rng.choice(ids, TEACHERS, p=rng.dirichlet(np.full(k, 0.4)))
            if q % 3 == 0:
                away = rng.random(TEACHERS) < 0.15
                self.labels[away, q] = rng.integers(0, VOCABULARY, int(away.sum()))
        self.counts = np.zeros((QUERIES, VOCABULARY))
        for q in range(QUERIES):
            np.add.at(self.counts[q], self.labels[:, q], 1)
        self.renumbered = np.take_along_axis(self.counts, np.maximum(self.padded, 0), axis=1)
        self.renumbered[self.padded < 0] = 0
        inside = self.renumbered.sum(axis=1)
        self.dropped = (int(TEACHERS * QUERIES - inside.sum()), int(np.sum(inside < TEACHERS)))
        rows = np.repeat(np.arange(QUERIES), self.sizes)
        marks = np.ones(rows.size)
        self.marks = scipy.sparse.csr_matrix(
            (marks, (rows, self.padded[self.padded >= 0])), shape=(QUERIES, VOCABULARY)
        )

    def sparse_votes(self) -> scipy.sparse.csr_matrix:
        return scipy.sparse.csr_matrix(self.counts)

    def by_count(self, **kwargs: object) -> pate.Votes:
        """The oracle: the renumbered counts over each query's first n classes."""
        return pate.load_votes(
            self.renumbered, format="counts", teachers=TEACHERS, candidates=self.sizes, **kwargs
        )


@pytest.fixture(scope="module")
def varied():
    return IdVotes(3, uniform=False)


@pytest.fixture(scope="module")
def uniform():
    return IdVotes(4, uniform=True)


@pytest.fixture(scope="module")
def files(tmp_path_factory, varied):
    folder = tmp_path_factory.mktemp("candidate_ids")
    paths = {
        "votes": folder / "votes.npz",
        "labels": folder / "labels.npy",
        "ids": folder / "ids.npy",
        "marks": folder / "marks.npz",
        "with member": folder / "with_member.npz",
    }
    matrix = varied.sparse_votes()
    scipy.sparse.save_npz(paths["votes"], matrix)
    np.save(paths["labels"], varied.labels)
    np.save(paths["ids"], varied.padded)
    scipy.sparse.save_npz(paths["marks"], varied.marks)
    np.savez(
        paths["with member"],
        format=np.array("csr"),
        shape=np.array(matrix.shape),
        data=matrix.data,
        indices=matrix.indices,
        indptr=matrix.indptr,
        candidates=varied.padded,
    )
    return paths


def _figures(report: pate.AnalysisReport) -> dict[str, float]:
    out = report.to_dict()
    keys = ("data_dependent", "data_independent", "data_independent_exact", "guaranteed")
    return {key: out[key]["epsilon"] for key in keys if isinstance(out.get(key), dict)}


def _readings(varied: IdVotes, files: dict) -> dict[str, pate.Votes]:
    shuffled = np.array(
        [np.random.default_rng(q).permutation(row) for q, row in enumerate(varied.padded)]
    )
    return {
        "sparse votes, padded ids file": pate.load_votes(files["votes"], candidates=files["ids"]),
        "sparse votes, ids in any order": pate.load_votes(files["votes"], candidates=shuffled),
        "sparse votes, marks file": pate.load_votes(files["votes"], candidates=files["marks"]),
        "sparse votes, marks in memory": pate.load_votes(files["votes"], candidates=varied.marks),
        "sparse votes, candidates member": pate.load_votes(files["with member"]),
        "labels of token ids": pate.load_votes(
            files["labels"], format="labels", num_classes=VOCABULARY, candidates=files["ids"]
        ),
        "dense counts in memory": pate.load_votes(
            varied.counts, format="counts", candidates=varied.padded
        ),
        "sparse matrix in memory": pate.load_votes(varied.sparse_votes(), candidates=varied.padded),
    }


def test_every_form_of_ids_holds_the_renumbered_counts(varied, files):
    want = varied.by_count().counts
    assert isinstance(want, Compact)
    for name, read in _readings(varied, files).items():
        assert isinstance(read.counts, Compact), name
        np.testing.assert_array_equal(read.counts.num_classes, varied.sizes, err_msg=name)
        np.testing.assert_array_equal(read.counts.dense(WIDTH), varied.renumbered, err_msg=name)
        assert read.counts.vocabulary == WIDTH, name
        assert read.num_teachers == TEACHERS and read.num_classes == VOCABULARY, name


@pytest.mark.parametrize("mechanism", [pate.GNMax(6.0), CONFIDENT, pate.LNMax(0.4)])
def test_ids_and_the_renumbered_counts_give_identical_figures(varied, files, mechanism):
    want = _figures(pate.analyze(varied.by_count(), mechanism, delta=1e-5, release=False))
    assert want
    read = pate.load_votes(files["votes"], candidates=files["ids"])
    got = _figures(pate.analyze(read, mechanism, delta=1e-5, release=False))
    assert got == want


def test_the_release_over_ids_is_that_of_the_renumbered_counts(uniform):
    """Every query has k candidates: the release runs over k classes, as over the renumbered
    counts; with k varying by query it is refused alike."""
    by_ids = pate.load_votes(uniform.sparse_votes(), candidates=uniform.padded)
    for mechanism in (pate.GNMax(6.0), CONFIDENT):
        got = pate.smooth_sensitivity(by_ids, mechanism, delta=1e-5, order=8.0, seed=5)
        want = pate.smooth_sensitivity(uniform.by_count(), mechanism, delta=1e-5, order=8.0, seed=5)
        assert _without_input(got.to_dict()) == _without_input(want.to_dict())
        assert got.to_dict()["epsilon_released"] is not None
        got_release = pate.analyze(by_ids, mechanism, delta=1e-5, release="sample", seed=5)
        want_release = pate.analyze(
            uniform.by_count(), mechanism, delta=1e-5, release="sample", seed=5
        )
        assert got_release.to_dict()["release"] == want_release.to_dict()["release"]


def _without_input(report: dict) -> dict:
    return {key: value for key, value in report.items() if key not in ("input", "warnings")}


def test_the_release_over_varied_candidate_ids_is_refused_as_over_counts(varied):
    by_ids = pate.load_votes(varied.sparse_votes(), candidates=varied.padded)
    messages = []
    for votes in (by_ids, varied.by_count()):
        with pytest.raises(UnsupportedError) as error:
            pate.smooth_sensitivity(votes, pate.GNMax(6.0), delta=1e-5, order=8.0, seed=1)
        messages.append(str(error.value))
    assert messages[0] == messages[1]


def test_dropped_votes_are_reported_once_and_the_teachers_stay_the_files(varied, files):
    votes, queries = varied.dropped
    assert votes > 0
    read = pate.load_votes(files["votes"], candidates=files["ids"])
    dropped = [w for w in read.warnings if "dropped" in w]
    assert dropped == [
        f"{files['votes']}: {votes} votes of {queries} queries lie outside their query's "
        f"candidate token ids and were dropped; the teachers stay {TEACHERS}"
    ]
    assert not any("sum to" in w for w in read.warnings)
    report = run_cli(
        [
            "analyze",
            files["votes"],
            "--candidates",
            files["ids"],
            "--sigma",
            "6",
            "--delta",
            "1e-5",
            "--no-release",
            "--json",
        ]
    )
    assert json.loads(report.stdout)["warnings"].count(dropped[0]) == 1
    assert report.stderr.count(" were dropped;") == 1
    assert json.loads(report.stdout)["input"]["num_teachers"] == TEACHERS


def test_nothing_dropped_says_nothing(varied):
    kept = varied.labels.copy()
    for q in range(QUERIES):
        kept[:, q] = varied.padded[q, 0]
    read = pate.load_votes(kept, format="labels", num_classes=VOCABULARY, candidates=varied.padded)
    assert not any("dropped" in w for w in read.warnings)
    (note,) = read.warnings
    assert "candidate token ids, 2 to 6 per query" in note


def test_ids_follow_the_query_selection(varied, files, tmp_path):
    indices = np.array([7, 0, 42, 3, 88])
    np.save(tmp_path / "indices.npy", indices)
    read = pate.load_votes(
        files["votes"], candidates=files["ids"], indices=tmp_path / "indices.npy", queries=4
    )
    np.testing.assert_array_equal(read.counts.num_classes, varied.sizes[indices[:4]])
    np.testing.assert_array_equal(read.counts.dense(WIDTH), varied.renumbered[indices[:4]])
    result = pate.aggregate(read, pate.GNMax(2.0), delta=1e-5, seed=3)
    for q, label in enumerate(result.labels):
        assert label in varied.padded[indices[q]]


@pytest.mark.parametrize("mechanism", [pate.GNMax(3.0), CONFIDENT, pate.LNMax(0.3)])
def test_aggregate_releases_token_ids_of_the_same_classes(varied, files, mechanism):
    """The same seed draws the same classes as over the renumbered counts; the labels are
    their token ids, always in the query's candidate set."""
    by_ids = pate.aggregate(files["votes"], mechanism, delta=1e-5, seed=11, candidates=files["ids"])
    by_count = pate.aggregate(varied.by_count(), mechanism, delta=1e-5, seed=11)
    released = by_count.labels >= 0
    np.testing.assert_array_equal(by_ids.labels >= 0, released)
    rows = np.flatnonzero(released)
    np.testing.assert_array_equal(by_ids.labels[rows], varied.padded[rows, by_count.labels[rows]])
    for q in rows:
        assert by_ids.labels[q] in varied.padded[q, : varied.sizes[q]]
    assert by_ids.agreement_with_plurality == by_count.agreement_with_plurality
    truth = varied.padded[np.arange(QUERIES), np.argmax(varied.renumbered, axis=1)]
    with_truth = pate.aggregate(
        files["votes"], mechanism, delta=1e-5, seed=11, candidates=files["ids"], true_labels=truth
    )
    assert with_truth.accuracy == by_count.agreement_with_plurality


def test_the_label_distribution_is_the_count_forms(uniform):
    """Four queries, each repeated: the labels over ids (mapped back to classes) and over the
    renumbered counts, with different seeds, follow one distribution (chi-square)."""
    repeats, picked = 1500, np.array([0, 1, 3, 6])
    index = np.repeat(picked, repeats)
    ids, counts = uniform.padded[index], uniform.counts[index]
    by_ids = pate.aggregate(
        scipy.sparse.csr_matrix(counts), pate.GNMax(4.0), delta=1e-5, seed=21, candidates=ids
    )
    renumbered = uniform.renumbered[index]
    by_count = pate.aggregate(
        renumbered, pate.GNMax(4.0), delta=1e-5, seed=22, format="counts", teachers=TEACHERS
    )
    classes = np.argmax(ids[:, :, None] == by_ids.labels[:, None, None], axis=1)[:, 0]
    assert np.all(ids[np.arange(index.size), classes] == by_ids.labels)
    for i in range(picked.size):
        part = slice(i * repeats, (i + 1) * repeats)
        table = np.stack(
            [
                np.bincount(classes[part], minlength=WIDTH),
                np.bincount(by_count.labels[part], minlength=WIDTH),
            ]
        )
        table = table[:, table.sum(axis=0) > 0]
        assert table.shape[1] > 1, table
        assert chi2_contingency(table).pvalue > 1e-4, table


def test_the_command_line_writes_token_ids(varied, files, tmp_path):
    out = tmp_path / "labels.npy"
    result = run_cli(
        [
            "aggregate",
            files["votes"],
            "--candidates",
            files["ids"],
            "--sigma",
            "3",
            "--delta",
            "1e-5",
            "--seed",
            "4",
            "--output",
            out,
            "--json",
        ]
    )
    labels = np.load(out)
    assert labels.shape == (QUERIES,) and np.all(labels >= 0)
    for q, label in enumerate(labels):
        assert label in varied.padded[q, : varied.sizes[q]]
    assert sum(" were dropped;" in w for w in json.loads(result.stdout)["warnings"]) == 1
    assert result.stderr.count(" were dropped;") == 1


def test_a_vocabulary_of_2_24_tokens_is_never_held_dense():
    """16.7M tokens, 2000 queries: a dense queries x vocabulary array would be 268 GB."""
    vocabulary, queries = 1 << 24, 2000
    rng = np.random.default_rng(2)
    ids = np.sort(rng.choice(vocabulary, size=(queries, 4)), axis=1)
    ids[:, 1:][ids[:, 1:] == ids[:, :-1]] = -1
    rows = np.repeat(np.arange(queries), 3)
    columns = np.concatenate(
        [ids[:, :1], ids[:, :1], rng.integers(0, vocabulary, (queries, 1))], axis=1
    )
    data = np.tile([20.0, 15.0, 5.0], queries)
    matrix = scipy.sparse.csr_matrix((data, (rows, columns.ravel())), shape=(queries, vocabulary))
    read = pate.load_votes(matrix, candidates=ids)
    assert read.num_classes == vocabulary and read.counts.vocabulary == 4
    assert read.num_teachers == 40
    result = pate.aggregate(read, pate.GNMax(2.0), delta=1e-5, seed=1)
    assert np.all(result.labels == ids[:, 0])


def _bad_cases() -> list[tuple[str, object, str]]:
    padded = IdVotes(3, uniform=False).padded
    out_of_range, negative, duplicate, empty, floats = (padded.copy() for _ in range(5))
    out_of_range[4, 0] = VOCABULARY
    negative[2, 1] = -2
    duplicate[5, 1] = duplicate[5, 0]
    empty[6] = -1
    floats = floats.astype(float)
    floats[1, 0] = 2.5
    wide = scipy.sparse.csr_matrix((QUERIES, VOCABULARY + 1))
    no_mark = scipy.sparse.lil_matrix((QUERIES, VOCABULARY))
    no_mark[np.arange(1, QUERIES), 0] = 1
    return [
        (
            "out of the vocabulary",
            out_of_range,
            "token id of query 4 is 5000; expected token ids in [0, 5000)",
        ),
        ("below -1", negative, "token id of query 2 is -2; expected token ids in [0, 5000)"),
        ("duplicate", duplicate, "query 5 lists token id"),
        ("a row of only -1", empty, "query 6 has no candidates (a row of only -1)"),
        (
            "fewer rows",
            padded[:-1],
            "has shape (89, 6); expected one row of candidate token ids per query",
        ),
        ("more rows", np.vstack([padded, padded[:1]]), "has shape (91, 6); expected one row"),
        ("one column", padded[:, :1], "has shape (90, 1): one candidate per query, or counts"),
        (
            "three dimensions",
            padded[:, :, None],
            "has shape (90, 6, 1); expected one count per query",
        ),
        ("bool", padded > 0, "has dtype bool"),
        ("not whole", floats, "token id of query 1 is 2.5"),
        ("sparse of another shape", wide, "candidates matrix has shape (90, 5001); expected"),
        ("a sparse row without a mark", no_mark.tocsr(), "query 0 has no candidates (no non-zero"),
    ]


@pytest.mark.parametrize(
    ("case", "candidates", "message"),
    _bad_cases(),
    ids=lambda x: x if isinstance(x, str) and len(x) < 30 else "",
)
def test_what_cannot_be_read_one_way_is_refused_in_one_line(varied, case, candidates, message):
    for votes in (varied.sparse_votes(), varied.counts):
        with pytest.raises(InputError) as error:
            pate.load_votes(votes, format="counts", candidates=candidates)
        text = str(error.value)
        assert message in text and "\n" not in text, (case, text)
        assert text.startswith("<candidates array>: "), (case, text)


def test_a_bad_ids_file_is_one_line_and_exit_2(varied, files, tmp_path):
    bad = varied.padded.copy()
    bad[3, 0] = VOCABULARY + 7
    np.save(tmp_path / "bad.npy", bad)
    record = tmp_path / "run.record.json"
    result = run_cli(
        [
            "analyze",
            files["votes"],
            "--candidates",
            tmp_path / "bad.npy",
            "--sigma",
            "6",
            "--delta",
            "1e-5",
            "--record",
            record,
        ],
        expect=ExitCode.BAD_INPUT,
    )
    assert result.stderr.count("\n") == 1
    assert f"{tmp_path / 'bad.npy'}: token id of query 3 is 5007" in result.stderr
    assert not record.exists()


def test_the_record_of_an_ids_run_verifies(files, tmp_path):
    record = tmp_path / "run.record.json"
    run_cli(
        [
            "analyze",
            files["votes"],
            "--candidates",
            files["marks"],
            "--sigma",
            "6",
            "--delta",
            "1e-5",
            "--no-release",
            "--record",
            record,
        ]
    )
    assert json.loads(run_cli(["verify", record, "--json"]).stdout)["verdict"] == "verified"


def test_help_names_both_forms():
    text = " ".join(run_cli(["analyze", "--help"]).stdout.split())
    assert "token ids" in text and "-1" in text


def test_dense_counts_read_a_block_at_a_time_take_ids_too(varied, tmp_path, monkeypatch):
    """A large counts file is streamed by blocks of queries: each block's votes are found
    among their queries' candidates, and the result is that of the file read whole."""
    monkeypatch.setattr(pate_cli.votes, "STREAM_MIN_ROWS", 8)
    monkeypatch.setattr(pate_cli.votes, "_BLOCK_ROWS", 7)
    monkeypatch.setattr(pate_cli.votes, "COMPACT_MIN_CLASSES", 10**9)  # stream dense rows
    np.save(tmp_path / "counts.npy", varied.counts)
    read = pate.load_votes(tmp_path / "counts.npy", format="counts", candidates=varied.padded)
    np.testing.assert_array_equal(read.counts.dense(WIDTH), varied.renumbered)
    assert read.num_teachers == TEACHERS
    assert (
        [w for w in read.warnings if "dropped" in w][0]
        .split(": ", 1)[1]
        .startswith(f"{varied.dropped[0]} votes of {varied.dropped[1]} queries")
    )


def test_inspect_names_the_vocabulary_and_the_candidate_sets(uniform):
    """Over token ids the classes of a query are its candidates' positions; inspect still
    names the vocabulary of the votes, and the sets even when every query has k."""
    report = pate.inspect(pate.load_votes(uniform.sparse_votes(), candidates=uniform.padded))
    vocabulary = report.to_dict()["vocabulary"]
    assert vocabulary["classes"] == VOCABULARY
    assert vocabulary["candidates"] == {"min": WIDTH, "max": WIDTH}


# Marks as scipy reads the matrix: a place marks a candidate when its value (the entries
# stored there summed) is not zero, whatever its sign; an entry stored as 0 marks nothing.
MARKED_VOTES = np.array([[3.0, 2.0, 0.0, 0.0], [0.0, 4.0, 1.0, 0.0], [1.0, 1.0, 1.0, 2.0]])
MARK_ENTRIES = (
    # query 0: -1.0 marks token 1 as 1.0 marks token 0; token 3 is stored as 0.0.
    ([0, 0, 0], [0, 1, 3], [1.0, -1.0, 0.0]),
    # query 1: -0.5 marks token 0; token 2 is stored twice, 1.0 and -1.0: it sums to 0.
    ([1, 1, 1, 1], [0, 1, 2, 2], [-0.5, 2.0, 1.0, -1.0]),
    # query 2: -3 marks token 3; token 0 is stored as 0.0.
    ([2, 2], [3, 0], [-3.0, 0.0]),
)
MARKED_IDS = [[0, 1], [0, 1], [3]]


def _mark_matrix(entries=MARK_ENTRIES) -> scipy.sparse.coo_matrix:
    rows, columns, values = (np.concatenate([np.array(e[i]) for e in entries]) for i in range(3))
    return scipy.sparse.coo_matrix((values, (rows, columns)), shape=MARKED_VOTES.shape)


def _coo_archive(path, matrix: scipy.sparse.coo_matrix):
    """A save_npz archive written field by field: its entries as stored, duplicates kept
    (save_npz itself sums them)."""
    np.savez(
        path,
        format=np.array("coo"),
        shape=np.array(matrix.shape),
        row=matrix.row,
        col=matrix.col,
        data=matrix.data,
    )
    return path


def test_a_mark_is_a_non_zero_value_whatever_its_sign(tmp_path):
    """Every form of a sparse candidates matrix reads the marks scipy counts with
    ``count_nonzero``, not the entries it stores: -1.0 marks, a stored 0.0 does not, and
    entries stored twice at one place are summed first."""
    counted = _mark_matrix()
    assert counted.nnz == 9 and counted.count_nonzero() == 5  # stored, and non-zero
    assert counted.nnz == 8  # count_nonzero summed the duplicates in place
    dense = _mark_matrix().toarray()
    assert [list(np.flatnonzero(row)) for row in dense] == MARKED_IDS  # scipy's reading
    scipy.sparse.save_npz(tmp_path / "summed.npz", _mark_matrix().tocsr(), compressed=False)
    forms = {
        "coo in memory, duplicates kept": _mark_matrix,
        "csr in memory": lambda: _mark_matrix().tocsr(),
        "coo archive, duplicates kept": lambda: _coo_archive(tmp_path / "kept.npz", _mark_matrix()),
        "save_npz file": lambda: tmp_path / "summed.npz",
    }
    for name, marks in forms.items():
        for votes in (MARKED_VOTES, scipy.sparse.csr_matrix(MARKED_VOTES)):
            read = pate.load_votes(votes, format="counts", teachers=5, candidates=marks())
            ids = read.candidate_ids
            assert ids.sizes.tolist() == [2, 2, 1], name
            assert ids.ids.tolist() == [i for row in MARKED_IDS for i in row], name


def test_the_command_line_reads_a_negative_mark_and_not_a_stored_zero(tmp_path):
    np.save(tmp_path / "votes.npy", MARKED_VOTES)
    marks = _coo_archive(tmp_path / "marks.npz", _mark_matrix())
    result = run_cli(["inspect", tmp_path / "votes.npy", "--candidates", marks, "--json"])
    warnings = " ".join(result.json["warnings"])
    assert "each query's classes are its candidate token ids, 1 to 2 per query" in warnings
    # Query 1's vote for token 2 (stored 1.0 and -1.0 in the marks) lies outside, as do
    # query 2's for tokens 0 to 2 (its token 0 stored as 0.0).
    assert "4 votes of 2 queries lie outside their query's candidate token ids" in warnings


@pytest.mark.parametrize(
    ("entries", "message"),
    [
        (
            (([0, 1], [0, 1], [1.0, 1.0]), ([2, 2], [3, 0], [0.0, 0.0])),
            "query 2 has no candidates (no non-zero in its row of the candidates matrix)",
        ),
        (
            (([0, 1, 2], [0, 1, 1], [1.0, 1.0, 2.0]), ([2], [1], [-2.0])),
            "query 2 has no candidates (no non-zero in its row of the candidates matrix)",
        ),
        (
            (([0, 1, 2], [0, 1, 3], [1.0, np.nan, 1.0]),),
            "a candidates matrix entry is nan; expected numbers, a non-zero marking a candidate",
        ),
    ],
    ids=["stored zeros", "a sum of 0", "nan"],
)
def test_a_row_without_a_non_zero_value_or_a_nan_is_one_line_and_exit_2(tmp_path, entries, message):
    np.save(tmp_path / "votes.npy", MARKED_VOTES)
    marks = _coo_archive(tmp_path / "marks.npz", _mark_matrix(entries))
    args = ["inspect", tmp_path / "votes.npy", "--candidates", marks]
    result = run_cli(args, expect=ExitCode.BAD_INPUT)
    assert result.stderr.startswith(f"pate: error: {marks}: {message}")
    assert result.stderr.count("\n") == 1
    with pytest.raises(InputError, match="^<candidates array>: "):
        pate.load_votes(MARKED_VOTES, format="counts", candidates=_mark_matrix(entries))


def test_marks_that_are_not_numbers_are_refused():
    """Marks of a dtype other than numbers are refused, never compared with 0 (a file's
    strings are refused by the array reader before)."""
    from pate_cli.votes.candidates import ids_of_marks

    entries = (np.array([0, 1]), np.array([0, 1]), np.array(["1", "0"], dtype=object))
    with pytest.raises(InputError, match=r"^<x>: a candidates matrix of dtype object; expected"):
        ids_of_marks(entries, "<x>", (2, 3))

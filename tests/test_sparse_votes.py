"""Votes over a vocabulary: the same votes as a dense .npy, a ``scipy.sparse.save_npz``
archive (CSR, CSC, COO), a labels file of token ids and a sparse matrix in memory give the
same analysis, to 1e-12, as the dense counts in memory (which the dense code analyses);
bad archives are one line and exit 2; and the aggregators, which draw the unlisted zero-vote
classes' noise as one maximum, draw labels from the same distribution as the dense ones.
"""

from __future__ import annotations

import io
import zipfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import scipy.sparse
from scipy.stats import chi2_contingency, chisquare, ks_2samp
from typer.testing import CliRunner

import pate_cli as pate
import pate_cli.votes
from pate_cli.cli.app import app
from pate_cli.core.compact import Compact
from pate_cli.errors import ExitCode, InputError, PateError, UsageError
from pate_cli.mechanisms import aggregators, samplers
from tests.conftest import run_cli

TEACHERS = 200
CASES = {"small": (300, 5000), "large": (200, 60000)}  # (queries, vocabulary)
GNMAX = pate.GNMax(15)
CONFIDENT = pate.ConfidentGNMax(threshold=150, sigma1=40, sigma=15)


def token_labels(seed: int, num_queries: int, vocabulary: int) -> np.ndarray:
    """(teachers, queries) int32 token ids: each query's teachers vote on 1-5 tokens."""
    rng = np.random.default_rng(seed)
    labels = np.empty((TEACHERS, num_queries), dtype=np.int32)
    for q in range(num_queries):
        tokens = rng.choice(vocabulary, size=rng.integers(1, 6), replace=False)
        share = rng.dirichlet(np.full(tokens.size, 0.3))
        labels[:, q] = rng.choice(tokens, size=TEACHERS, p=share)
    return labels


def coo_of_labels(labels: np.ndarray, vocabulary: int) -> scipy.sparse.coo_matrix:
    """One entry of 1 per teacher's vote (duplicates not summed, queries x vocabulary)."""
    rows = np.broadcast_to(np.arange(labels.shape[1]), labels.shape).ravel()
    ones = np.ones(labels.size, dtype=np.int64)
    return scipy.sparse.coo_matrix(
        (ones, (rows, labels.ravel())), shape=(labels.shape[1], vocabulary)
    )


class Votes:
    """One case's votes in every form, written to a folder."""

    def __init__(self, folder: Path, name: str, seed: int) -> None:
        num_queries, vocabulary = CASES[name]
        self.vocabulary = vocabulary
        self.labels = token_labels(seed, num_queries, vocabulary)
        duplicates = coo_of_labels(self.labels, vocabulary)
        self.csr = duplicates.tocsr().astype(np.float64)
        self.forms: dict[str, tuple[Any, dict[str, Any]]] = {}
        for form, matrix in [
            ("csr", self.csr),
            ("csc", self.csr.tocsc()),
            ("coo", self.csr.tocoo()),
            ("coo-duplicates", duplicates),
        ]:
            path = folder / f"{name}-{form}.npz"
            scipy.sparse.save_npz(path, matrix)
            self.forms[form] = (path, {})
        path = folder / f"{name}-labels.npy"
        np.save(path, self.labels)
        self.forms["labels"] = (path, {"format": "labels", "num_classes": vocabulary})
        self.forms["memory"] = (self.csr, {})
        self.dense: np.ndarray | None = None
        if vocabulary <= 5000:  # small enough for a dense file and the dense analysis
            self.dense = self.csr.toarray()
            path = folder / f"{name}-dense.npy"
            np.save(path, self.dense.astype(np.int32))
            self.forms["npy"] = (path, {})

    def oracle(self) -> Any:
        """The dense counts read by the dense code where small enough (see ``dense_code``),
        else the CSR file."""
        if self.dense is None:
            return self.forms["csr"][0]
        read = pate.load_votes(self.dense)
        assert isinstance(read.counts, np.ndarray)  # the dense code indeed
        return read


@contextmanager
def dense_code() -> Iterator[None]:
    """Counts of many classes read dense, as below ``COMPACT_MIN_CLASSES``: the dense code,
    which never sees a ``Compact``, is the oracle of the compact one."""
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(pate_cli.votes, "COMPACT_MIN_CLASSES", 1 << 62)
        yield


@pytest.fixture(scope="module")
def votes(tmp_path_factory) -> dict[str, Votes]:
    folder = tmp_path_factory.mktemp("sparse")
    return {name: Votes(folder, name, seed) for seed, name in enumerate(CASES)}


def numbers(tree: Any, where: str = "") -> dict[str, Any]:
    """Every leaf of a report's dict by its path."""
    if isinstance(tree, dict):
        return {
            k: v for key, sub in tree.items() for k, v in numbers(sub, f"{where}.{key}").items()
        }
    if isinstance(tree, list):
        return {
            k: v for i, sub in enumerate(tree) for k, v in numbers(sub, f"{where}[{i}]").items()
        }
    return {where: tree}


def assert_same_report(got: dict[str, Any], want: dict[str, Any], rtol: float = 1e-12) -> None:
    """Every figure of two reports' dicts equal to ``rtol`` (text exactly), but the
    ``input`` block, which names the file, and there the queries, teachers and classes."""
    for key in ("num_queries", "num_teachers", "num_classes"):
        assert got["input"][key] == want["input"][key], key
    got_leaves = numbers({k: v for k, v in got.items() if k != "input"})
    want_leaves = numbers({k: v for k, v in want.items() if k != "input"})
    assert got_leaves.keys() == want_leaves.keys()
    for key, value in want_leaves.items():
        if isinstance(value, float):
            assert got_leaves[key] == pytest.approx(value, rel=rtol, abs=0), key
        else:
            assert got_leaves[key] == value, key


# --- reading ------------------------------------------------------------------------------


def as_sparse(counts: Compact) -> scipy.sparse.csr_matrix:
    """The voted (non-zero) entries of compact counts, as a CSR matrix of the dense shape."""
    voted = (counts.classes >= 0) & (counts.values != 0)
    rows = np.nonzero(voted)[0]
    return scipy.sparse.csr_matrix(
        (counts.values[voted], (rows, counts.classes[voted])), shape=counts.shape
    )


@pytest.mark.parametrize("case", CASES)
def test_every_form_reads_the_same_counts(votes, case):
    data = votes[case]
    voted = np.diff(data.csr.indptr)  # each query's number of voted tokens
    assert voted.min() >= 1 and voted.max() <= 5
    for form, (source, options) in data.forms.items():
        read = pate.load_votes(source, **options)
        assert isinstance(read.counts, Compact), form
        assert (read.num_teachers, read.num_classes, read.num_queries) == (
            TEACHERS,
            data.vocabulary,
            data.csr.shape[0],
        ), form
        assert (as_sparse(read.counts) != data.csr).nnz == 0, form
        # Each query keeps its 1-5 voted tokens and one zero class; the rest are counted.
        assert read.counts.values.shape[1] <= 6
        assert np.array_equal(read.counts.zeros, data.vocabulary - voted - 1), form
        if data.dense is not None:
            assert np.array_equal(read.counts.dense(data.vocabulary), data.dense), form
    if data.dense is not None:  # the dense array in memory is held compact too...
        assert isinstance(pate.load_votes(data.dense).counts, Compact)
        with dense_code():  # ...but for the oracle
            assert np.array_equal(data.oracle().counts, data.dense)


def test_a_sparse_matrix_in_memory_reads_like_its_file(votes):
    data = votes["small"]
    from_file = pate.load_votes(data.forms["csr"][0])
    for matrix in (data.csr, data.csr.tocsc(), data.csr.tocoo(), data.csr.tolil()):
        in_memory = pate.load_votes(matrix)
        assert in_memory.path == "<array>" and in_memory.num_teachers == TEACHERS
        for field in ("values", "classes", "zeros"):
            assert np.array_equal(
                getattr(in_memory.counts, field), getattr(from_file.counts, field)
            )
    report = pate.analyze(data.csr, GNMAX, delta=1e-5, release=False).to_dict()
    assert report["input"]["source"] == "memory" and report["input"]["shape"] == [300, 5000]
    assert_same_report(
        report, pate.analyze(data.forms["csr"][0], GNMAX, delta=1e-5, release=False).to_dict()
    )
    first = pate.load_votes(data.csr, queries=100)
    assert first.num_queries == 100
    assert np.array_equal(first.counts.dense(5000), data.csr.toarray()[:100])


def test_explicit_zeros_and_duplicate_entries_read_as_scipy_sums_them(tmp_path):
    row = np.array([1, 0, 1, 1, 0, 0, 0])
    column = np.array([4000, 2, 4000, 3, 2, 17, 9])
    value = np.array([1.0, 1.0, 1.0, 1.0, 1.0, 0.0, 1.0])  # (0, 17): an explicit zero
    matrix = scipy.sparse.coo_matrix((value, (row, column)), shape=(2, 5000))
    path = tmp_path / "duplicates.npz"
    scipy.sparse.save_npz(path, matrix)
    read = pate.load_votes(path)
    assert read.num_teachers == 3 and read.warnings == ()
    assert read.counts.values.tolist() == [[2.0, 1.0, 0.0], [1.0, 2.0, 0.0]]
    assert read.counts.classes.tolist() == [[2, 9, 0], [3, 4000, 0]]
    assert read.counts.zeros.tolist() == [4997, 4997]
    assert np.array_equal(read.counts.dense(5000), matrix.toarray())


# --- the analysis ---------------------------------------------------------------------------


@pytest.mark.parametrize("release", [False, "expected"])
@pytest.mark.parametrize("mechanism", [GNMAX, CONFIDENT], ids=["gnmax", "confident"])
@pytest.mark.parametrize("case", CASES)
def test_analysis_is_the_same_in_every_form(votes, case, mechanism, release):
    data = votes[case]
    with dense_code():
        want = pate.analyze(data.oracle(), mechanism, delta=1e-5, release=release).to_dict()
    # Figures that depend on the votes: not the data-independent bound everywhere.
    assert want["data_dependent"]["epsilon"] < 0.6 * want["data_independent"]["epsilon"]
    if release:
        assert want["release"]["released"] and want["release"]["smooth_sensitivity"] > 0
    for form, (source, options) in data.forms.items():
        report = pate.analyze(source, mechanism, delta=1e-5, release=release, **options)
        got = report.to_dict()
        assert_same_report(got, want)
        assert report.data_dependent.order == want["data_dependent"]["order"], form


@pytest.mark.parametrize("case", CASES)
def test_compare_rows_agree_in_every_form(votes, case):
    """On the first 60 queries: the dense agreement (by quadrature over every class) is slow."""
    data = votes[case]
    settings = [GNMAX, CONFIDENT, pate.GNMax(40), pate.LNMax(0.05)]
    with dense_code():
        oracle = data.oracle()
        first = pate.load_votes(oracle.counts if data.dense is not None else oracle, queries=60)
        want = pate.compare(first, settings, delta=1e-5).to_dict()
    assert len(want["rows"]) == 4 and want["input"]["num_queries"] == 60
    for source, options in data.forms.values():
        first = pate.load_votes(source, queries=60, **options)
        assert_same_report(pate.compare(first, settings, delta=1e-5).to_dict(), want)


# --- the command line ---------------------------------------------------------------------


@pytest.mark.parametrize("sigma", [40, 15])
def test_the_command_line_analyses_a_sparse_file_as_the_dense_one(votes, sigma):
    data = votes["small"]
    args = ["--sigma", sigma, "--delta", 1e-5, "--no-release", "--json"]
    sparse = run_cli(["analyze", data.forms["csr"][0], *args]).json
    dense_file = run_cli(["analyze", data.forms["npy"][0], *args]).json
    with dense_code():
        in_memory = pate.analyze(data.oracle(), pate.GNMax(sigma), delta=1e-5, release=False)
    in_memory = in_memory.to_dict()
    assert sparse["input"]["path"] == str(data.forms["csr"][0])
    assert_same_report(sparse, dense_file)
    assert_same_report(sparse, in_memory)
    labels = run_cli(
        ["analyze", data.forms["labels"][0], "--format", "labels", "--num-classes", 5000, *args]
    ).json
    assert_same_report(labels, in_memory)


def test_the_command_line_inspects_a_sparse_file(votes):
    data = votes["small"]
    out = run_cli(["inspect", data.forms["coo"][0], "--json"]).json
    assert out["input"]["num_classes"] == 5000 and out["input"]["num_teachers"] == TEACHERS
    # Compact votes add what the vocabulary holds; the rest is the dense report.
    vocabulary = out.pop("vocabulary")
    voted = np.diff(data.csr.indptr)
    assert vocabulary["classes"] == 5000
    assert vocabulary["nonzeros_per_query"] == {
        "min": int(voted.min()),
        "mean": pytest.approx(voted.mean(), rel=1e-12),
        "max": int(voted.max()),
    }
    with dense_code():
        assert_same_report(out, pate.inspect(data.oracle()).to_dict())
    large = run_cli(["inspect", votes["large"].forms["csr"][0], "--json"]).json
    assert large["input"]["num_classes"] == 60000 and large["input"]["num_queries"] == 200
    assert large["vocabulary"]["classes"] == 60000


# --- bad inputs -----------------------------------------------------------------------------

GOOD = scipy.sparse.csr_matrix(np.array([[3.0, 0, 1], [0, 4, 0]]))


def _csr_archive(path: Path, **members: Any) -> None:
    parts = {
        "format": np.array("csr"),
        "shape": np.array([2, 3]),
        "data": np.array([3.0, 1.0, 4.0]),
        "indices": np.array([0, 2, 1]),
        "indptr": np.array([0, 2, 3]),
    }
    parts.update(members)
    np.savez(path, **parts)


def _negative(path: Path) -> None:
    matrix = GOOD.copy()
    matrix.data[1] = -1
    scipy.sparse.save_npz(path, matrix)


def _nan(path: Path) -> None:
    matrix = GOOD.copy()
    matrix.data[2] = np.nan
    scipy.sparse.save_npz(path, matrix)


BAD_ARCHIVES = {
    "negative": (_negative, [], "votes row 0, column 2 is -1.0; expected non-negative counts"),
    "nan": (_nan, [], "votes row 1, column 1 is nan; expected non-negative counts"),
    "column-outside": (
        lambda p: _csr_archive(p, indices=np.array([0, 3, 1])),
        [],
        "a sparse matrix entry lies outside its shape (2, 3)",
    ),
    "row-outside": (
        lambda p: np.savez(
            p,
            format=np.array("coo"),
            shape=np.array([2, 3]),
            data=np.array([1.0, 2.0]),
            row=np.array([0, 2]),
            col=np.array([0, 1]),
        ),
        [],
        "a sparse matrix entry lies outside its shape (2, 3)",
    ),
    "indptr-too-short": (
        lambda p: _csr_archive(p, indptr=np.array([0, 2])),
        [],
        "the sparse matrix's indptr does not fit its shape",
    ),
    "indptr-decreasing": (
        lambda p: _csr_archive(p, indptr=np.array([0, 3, 2])),
        [],
        "the sparse matrix's indptr does not fit its shape",
    ),
    "indptr-past-the-data": (
        lambda p: _csr_archive(p, indptr=np.array([0, 2, 4])),
        [],
        "the sparse matrix's indices do not fit its data",
    ),
    "three-axes": (
        lambda p: _csr_archive(p, shape=np.array([2, 3, 1])),
        [],
        "a sparse matrix of shape (2, 3, 1); expected queries x classes",
    ),
    "bsr": (
        lambda p: scipy.sparse.save_npz(p, scipy.sparse.bsr_matrix(GOOD)),
        [],
        "a sparse matrix in bsr format; expected csr, csc or coo",
    ),
    "float-indices": (
        lambda p: _csr_archive(p, indices=np.array([0.0, 2.0, 1.0])),
        [],
        "the sparse matrix's indices are not integers",
    ),
    "format-labels": (
        lambda p: scipy.sparse.save_npz(p, GOOD),
        ["--format", "labels", "--num-classes", 3],
        "a sparse matrix holds counts (queries x classes); --format labels reads it no other way",
    ),
    "num-classes-differs": (
        lambda p: scipy.sparse.save_npz(p, GOOD),
        ["--num-classes", 5],
        "the sparse matrix has 3 classes (columns) but --num-classes 5",
    ),
}
# The library's options for the flags above, and its words for them in the message.
LIBRARY = {
    "format-labels": (
        {"format": "labels", "num_classes": 3},
        ("--format labels", "format='labels'"),
    ),
    "num-classes-differs": ({"num_classes": 5}, ("--num-classes 5", "num_classes=5")),
}


@pytest.mark.parametrize("name", BAD_ARCHIVES)
def test_a_bad_archive_is_one_line_and_exit_2_with_nothing_written(tmp_path, name):
    build, flags, message = BAD_ARCHIVES[name]
    path = tmp_path / "votes.npz"
    build(path)
    record = tmp_path / "run.record.json"
    args = ["analyze", path, *flags, "--sigma", 40, "--delta", 1e-5, "--record", record]
    result = run_cli(args, expect=ExitCode.BAD_INPUT)
    assert result.stderr == f"pate: error: {path}: {message}\n"
    assert result.stdout == ""
    assert sorted(p.name for p in tmp_path.iterdir()) == ["votes.npz"]
    options, (flag, keyword) = LIBRARY.get(name, ({}, ("", "")))
    error = UsageError if name == "format-labels" else InputError
    with pytest.raises(error) as raised:
        pate.load_votes(path, **options)
    assert str(raised.value) == f"{path}: {message.replace(flag, keyword)}"


def test_a_truncated_or_damaged_archive_is_an_error_not_a_crash(tmp_path):
    outcomes = {"read": 0, "refused": 0}
    for compressed in (True, False):
        good = tmp_path / "good.npz"
        scipy.sparse.save_npz(good, GOOD, compressed=compressed)
        raw = good.read_bytes()
        damaged = tmp_path / "damaged.npz"
        variants = [raw[:n] for n in range(len(raw))]
        variants += [raw[:i] + b"\xff" + raw[i + 1 :] for i in range(len(raw)) if raw[i] != 0xFF]
        for content in variants:
            damaged.write_bytes(content)
            try:
                read = pate.load_votes(damaged)
            except PateError as error:
                assert "\n" not in str(error) and str(error).startswith(str(damaged))
                outcomes["refused"] += 1
            else:
                assert read.num_classes == 3  # a byte that changed nothing that is read
                outcomes["read"] += 1
    assert outcomes["refused"] > 2000
    path = tmp_path / "truncated.npz"
    scipy.sparse.save_npz(path, GOOD)
    path.write_bytes(path.read_bytes()[:-40])
    for command in (["analyze", path, "--sigma", 40, "--delta", 1e-5], ["inspect", path]):
        result = run_cli(command, expect=ExitCode.BAD_INPUT)
        assert result.stderr.count("\n") == 1 and result.stderr.startswith(f"pate: error: {path}:")


def _members_without_suffix(path: Path) -> None:
    """The five members of a CSR archive named without ``.npy`` (np.load reads them)."""
    with zipfile.ZipFile(path, "w") as archive:
        for name, array in [
            ("format", np.array("csr")),
            ("shape", np.array([2, 3])),
            ("data", GOOD.data),
            ("indices", GOOD.indices),
            ("indptr", GOOD.indptr),
        ]:
            buffer = io.BytesIO()
            np.lib.format.write_array(buffer, array)
            archive.writestr(name, buffer.getvalue())


def _nul_in_a_member_name(path: Path) -> None:
    """A save_npz archive whose central directory names ``format\\0npy`` (one damaged byte):
    zipfile reads the name as ``format``."""
    scipy.sparse.save_npz(path, GOOD, compressed=False)
    raw = bytearray(path.read_bytes())
    at = raw.rindex(b"format.npy") + len("format")
    raw[at] = 0
    path.write_bytes(bytes(raw))


@pytest.mark.parametrize("build", [_members_without_suffix, _nul_in_a_member_name])
def test_an_archive_whose_members_lack_npy_is_read_or_refused_in_one_line(tmp_path, build):
    path = tmp_path / "votes.npz"
    build(path)
    result = CliRunner().invoke(app, ["inspect", str(path), "--json"])
    assert result.exit_code in (ExitCode.OK, ExitCode.BAD_INPUT), result.stderr[-300:]
    if result.exit_code == ExitCode.BAD_INPUT:
        assert result.stderr.count("\n") == 1 and result.stderr.startswith(f"pate: error: {path}:")
    try:
        read = pate.load_votes(path)
    except InputError as error:
        assert "\n" not in str(error)
    else:
        assert np.array_equal(read.counts.dense(3), GOOD.toarray())


# --- the aggregators' distribution ------------------------------------------------------------

DRAWS = 20000
# Six classes; each query votes on one or two, so that zero-vote classes, listed (the first)
# and unlisted, win often at sigma 3 (gamma 0.3) against a top count of 4-5.
ROWS = np.array(
    [
        [0, 5, 0, 0, 0, 0],  # class 0 the listed zero class, 2-5 unlisted
        [0, 0, 4, 0, 3, 0],
        [5, 0, 0, 0, 0, 2],  # class 0 voted: class 1 listed, 2-4 unlisted
        [1, 3, 0, 2, 0, 4],  # one unlisted class (4): its "largest of 1" is its own noise
    ],
    dtype=np.float64,
)


def _repeated(rows: np.ndarray) -> tuple[np.ndarray, Compact]:
    dense = np.repeat(rows, DRAWS, axis=0)
    index, column = np.nonzero(dense)
    compact = Compact.from_sorted_entries(
        index.astype(np.int64), column.astype(np.int64), dense[index, column], *dense.shape
    )
    return dense, compact


def _labels(name: str, counts: np.ndarray | Compact, seed: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    if name == "gnmax":
        return aggregators.aggregate_gnmax(counts, 3.0, rng).labels
    if name == "lnmax":
        return aggregators.aggregate_lnmax(counts, 0.3, rng).labels
    return aggregators.aggregate_confident_gnmax(counts, 4.0, 2.0, 3.0, rng).labels


def _frequencies(labels: np.ndarray, num_classes: int) -> np.ndarray:
    """Per query, the count of each label (-1, an abstention, last). Shapes: -> (Q, C + 1)."""
    per_query = labels.reshape(-1, DRAWS)
    return np.stack(
        [
            np.bincount(np.where(row < 0, num_classes, row), minlength=num_classes + 1)
            for row in per_query
        ]
    )


@pytest.mark.parametrize("name", ["gnmax", "lnmax", "confident"])
def test_compact_aggregators_draw_the_dense_distribution(name):
    dense, compact = _repeated(ROWS)
    num_classes = ROWS.shape[1]
    want = _frequencies(_labels(name, dense, 1), num_classes)
    got = _frequencies(_labels(name, compact, 2), num_classes)
    for q, row in enumerate(ROWS):
        table = np.stack([got[q], want[q]])
        table = table[:, table.sum(axis=0) > 0]
        assert chi2_contingency(table).pvalue > 1e-4, (q, table)
        # The unlisted zero classes (the zero classes but the first) win often, uniformly.
        zero = np.flatnonzero(row == 0)
        unlisted = got[q, zero[1:]]
        answered = DRAWS - got[q, num_classes]
        assert unlisted.sum() > 0.04 * answered, (q, got[q])
        if unlisted.size > 1:
            assert chisquare(unlisted).pvalue > 1e-4, (q, unlisted)
    if name == "confident":
        assert 0.05 * DRAWS < got[:, num_classes].min()  # some abstentions


def test_a_wide_vocabulary_splits_like_the_dense_one():
    """60 classes, many unlisted: how often the voted class, the listed zero class and an
    unlisted one win, and each unlisted class about as often."""
    rows = np.zeros((2, 60))
    rows[0, 7] = 9
    rows[1, [0, 30]] = [6, 5]
    dense, compact = _repeated(rows)
    want = _frequencies(_labels("gnmax", dense, 3), 60)
    got = _frequencies(_labels("gnmax", compact, 4), 60)
    for q, row in enumerate(rows):
        voted, zero = np.flatnonzero(row), np.flatnonzero(row == 0)
        groups = [*voted, zero[0]]
        table = np.array([[f[q, c] for c in groups] + [f[q, zero[1:]].sum()] for f in (got, want)])
        assert chi2_contingency(table).pvalue > 1e-4, (q, table)
        assert table[0, -1] > 0.2 * DRAWS
        assert chisquare(got[q, zero[1:]]).pvalue > 1e-4


@pytest.mark.parametrize("noise", ["gaussian", "laplace"])
def test_the_largest_of_k_noises_is_distributed_as_the_maximum_of_k_draws(noise):
    """One draw per query stands for the k unlisted classes' noises: the inverse CDF of their
    maximum (``samplers._largest_*``) against the maximum of k draws (two-sample KS)."""
    draws = 20000
    largest = getattr(samplers, f"_largest_{noise}")(np.random.default_rng(8))
    rng = np.random.default_rng(9)
    for k in (1, 2, 7, 300):
        got = largest(np.full(draws, k, dtype=np.int64))
        if noise == "gaussian":
            want = rng.standard_normal((draws, k)).max(axis=1)
        else:
            want = rng.laplace(0.0, 1.0, (draws, k)).max(axis=1)
        assert ks_2samp(got, want).pvalue > 1e-4, k
    assert np.all(np.isneginf(largest(np.zeros(3, dtype=np.int64))))  # no class: never wins


def test_the_unlisted_class_of_a_rank_skips_every_listed_class():
    rng = np.random.default_rng(5)
    classes = np.full((500, 5), -1, dtype=np.int64)
    ranks = np.empty(500, dtype=np.int64)
    want = np.empty(500, dtype=np.int64)
    for q in range(500):
        listed = rng.choice(30, size=rng.integers(1, 6), replace=False)
        classes[q, : listed.size] = rng.permutation(listed)
        unlisted = np.setdiff1d(np.arange(30), listed)
        ranks[q] = rng.integers(0, unlisted.size)
        want[q] = unlisted[ranks[q]]
    got = samplers._unlisted_class(classes, ranks)
    assert np.array_equal(got, want)


def test_a_library_aggregate_over_a_sparse_file_answers_with_the_plurality(votes):
    data = votes["large"]
    result = pate.aggregate(data.forms["csr"][0], GNMAX, delta=1e-5, seed=7)
    assert result.labels.shape == (200,) and np.all(result.answered)
    plurality = np.asarray(data.csr.argmax(axis=1)).ravel()
    lead = np.empty(200)
    for q in range(200):
        row = np.sort(data.csr.data[data.csr.indptr[q] : data.csr.indptr[q + 1]])[::-1]
        lead[q] = row[0] - (row[1] if row.size > 1 else 0)
    # A lead of 150 votes is 7.07 sds of the difference of two noises (15 sqrt 2): against
    # 60000 classes the plurality loses with probability below 1e-7 per query.
    clear = lead >= 150
    assert clear.sum() > 40
    assert np.array_equal(result.labels[clear], plurality[clear])
    assert np.all((result.labels >= 0) & (result.labels < 60000))

"""The accountant's pass as a pair: parts of blocks, merged in any order of arrival, finish
with ``analyze``'s figures to the last bit; parts that do not tile the run are refused."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import scipy.sparse

import pate_cli as pate
from pate_cli.errors import UsageError
from tests.conftest import MNIST, SAMPLE

MECHANISMS = [
    pytest.param(pate.ConfidentGNMax(threshold=200, sigma1=150, sigma=40), id="confident"),
    pytest.param(pate.GNMax(sigma=40), id="gnmax"),
    pytest.param(pate.LNMax(gamma=0.05), id="lnmax"),
]
FIGURES = ("data_dependent", "data_independent", "worst_case", "guaranteed")


def _assert_same(report: pate.AnalysisReport, account) -> None:
    for name in FIGURES:
        mine, theirs = getattr(report, name), getattr(account, name)
        assert mine.epsilon == theirs.epsilon and mine.order == theirs.order, name
        assert np.array_equal(mine.rdp, theirs.rdp), name
    assert report.expected_answered == account.rdp.expected_answered
    assert report.exact == account.exact


@pytest.mark.parametrize("mechanism", MECHANISMS)
def test_parts_in_any_order_finish_with_the_analysis_figures(mechanism):
    votes = np.load(MNIST)
    cuts = [0, 1, 1234, 5000, len(votes)]
    blocks = zip(cuts[:-1], cuts[1:], strict=True)
    parts = [pate.partial_account(votes[a:b], mechanism, start=a) for a, b in blocks]
    merged = pate.merge_partials(parts[::-1])
    assert (merged.start, merged.num_queries) == (0, len(votes))
    account = pate.finish_account(merged, mechanism, delta=1e-5)
    _assert_same(pate.analyze(votes, mechanism, delta=1e-5, release=False), account)


def test_parts_of_sparse_shards(tmp_path: Path):
    """Next-token votes over 50,257 tokens, each shard read from its own file."""
    whole = scipy.sparse.load_npz(SAMPLE / "next_token_votes.npz").tocsr()
    mechanism = pate.ConfidentGNMax(threshold=190, sigma1=60, sigma=20)
    parts, start = [], 0
    for i, (a, b) in enumerate([(0, 700), (700, whole.shape[0])]):
        shard = tmp_path / f"s{i}.npz"
        scipy.sparse.save_npz(shard, whole[a:b])
        parts.append(pate.partial_account(shard, mechanism, start=start))
        start = b
    account = pate.finish_account(pate.merge_partials(parts), mechanism, delta=1e-5)
    report = pate.analyze(SAMPLE / "next_token_votes.npz", mechanism, delta=1e-5, release=False)
    _assert_same(report, account)


@pytest.mark.parametrize(
    ("starts", "message"),
    [
        ([0, 200], "a gap at query 100"),
        ([0, 50], "an overlap at query 100"),
        ([100, 200], "a gap at query 0"),
    ],
)
def test_parts_that_do_not_tile_the_run_are_refused(starts, message):
    votes, mechanism = np.load(MNIST)[:100], pate.GNMax(sigma=40)
    parts = [pate.partial_account(votes, mechanism, start=s) for s in starts]
    with pytest.raises(UsageError, match=message):
        pate.merge_partials(parts)


def test_parts_of_two_mechanisms_and_unmerged_parts_are_refused():
    votes = np.load(MNIST)[:100]
    gnmax = pate.partial_account(votes, pate.GNMax(sigma=40))
    confident = pate.ConfidentGNMax(threshold=200, sigma1=150, sigma=40)
    other = pate.partial_account(votes, confident, start=100)
    with pytest.raises(UsageError, match="holds other terms than the first"):
        pate.merge_partials([gnmax, other])
    with pytest.raises(UsageError, match="expected at least one part"):
        pate.merge_partials([])
    with pytest.raises(UsageError, match="merge them first"):
        pate.finish_account(other, confident, delta=1e-5)
    with pytest.raises(UsageError, match="start"):
        pate.partial_account(votes, confident, start=-1)

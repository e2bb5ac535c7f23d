"""An .npz of several arrays: the votes are picked by name (``member=``, ``--member``), and
an .npz that needs a name says which arrays it holds."""

from __future__ import annotations

import numpy as np
import pytest

import pate_cli as pate
from pate_cli.errors import ExitCode, InputError, UsageError
from tests.conftest import MNIST, run_cli

COUNTS = np.load(MNIST, allow_pickle=False)[:100]


@pytest.fixture
def archive(tmp_path):
    path = tmp_path / "run.npz"
    np.savez(path, votes=COUNTS, truth=np.arange(100))
    return path


def test_a_member_is_read_by_name(archive):
    votes = pate.load_votes(archive, member="votes")
    assert np.array_equal(votes.counts, COUNTS) and votes.num_teachers == 250
    report = pate.analyze(archive, pate.GNMax(40), delta=1e-5, member="votes", release=False)
    alone = pate.analyze(COUNTS, pate.GNMax(40), delta=1e-5, release=False)
    assert report.data_dependent.epsilon == alone.data_dependent.epsilon


def test_several_arrays_without_a_name_are_refused_with_their_names(archive):
    with pytest.raises(InputError) as error:
        pate.load_votes(archive)
    assert str(error.value) == (
        f"{archive}: the .npz holds 2 arrays ('votes', 'truth'); name the votes array with member"
    )
    cli = run_cli(["inspect", archive], expect=ExitCode.BAD_INPUT)
    assert cli.stderr.strip().endswith(
        "the .npz holds 2 arrays ('votes', 'truth'); name the votes array with --member"
    )


def test_an_unknown_member_lists_the_arrays(archive):
    with pytest.raises(
        InputError, match=r"holds no array 'counts'; its arrays are 'votes', 'truth'"
    ):
        pate.load_votes(archive, member="counts")


def test_a_member_of_a_npy_or_an_array_is_refused(tmp_path):
    path = tmp_path / "votes.npy"
    np.save(path, COUNTS)
    with pytest.raises(InputError, match=r"a \.npy holds one array; member='votes' names an array"):
        pate.load_votes(path, member="votes")
    with pytest.raises(UsageError, match=r"member='votes': names an array of an \.npz file"):
        pate.load_votes(COUNTS, member="votes")


def test_the_command_line_reads_a_member_and_records_it(archive, tmp_path):
    record = tmp_path / "run.record.json"
    args = ["analyze", archive, "--member", "votes", "--sigma", 40, "--delta", 1e-5]
    out = run_cli([*args, "--no-release", "--json", "--record", record]).json
    alone = pate.analyze(COUNTS, pate.GNMax(40), delta=1e-5, release=False)
    assert out["data_dependent"]["epsilon"] == alone.data_dependent.epsilon
    verified = run_cli(["verify", record, "--json"]).json
    assert verified["verdict"] == "verified", verified["summary"]


def test_the_command_line_refuses_an_unknown_member_in_one_line(archive, tmp_path):
    record = tmp_path / "run.record.json"
    args = ["analyze", archive, "--member", "counts", "--sigma", 40, "--delta", 1e-5]
    result = run_cli([*args, "--record", record], expect=ExitCode.BAD_INPUT)
    assert result.stderr.strip() == (
        f"pate: error: {archive}: the .npz holds no array 'counts'; its arrays are 'votes', 'truth'"
    )
    assert not record.exists() and sorted(p.name for p in tmp_path.iterdir()) == ["run.npz"]

"""``pate inspect``: format, size and the teachers' agreement of a votes file."""

from __future__ import annotations

import numpy as np
import pytest
from rich.console import Console

from pate_cli.errors import ExitCode
from pate_cli.jobs.inspection import profile_votes
from tests.conftest import MNIST, MNIST_INDICES, MNIST_LABELS, run_cli


def test_profile_of_a_hand_made_histogram():
    counts = np.array(
        [
            [10.0, 0.0, 0.0],  # unanimous
            [5.0, 5.0, 0.0],  # tied at the top
            [6.0, 3.0, 1.0],
            [0.0, 2.0, 8.0],
        ]
    )
    profile = profile_votes(counts, 10)
    assert profile.num_queries == 4
    assert profile.unanimous == 1 and profile.tied == 1
    assert profile.plurality_counts == (3, 0, 1)  # the tie goes to the first class, as argmax
    np.testing.assert_allclose(
        [profile.top_share.quantiles[k] for k in ("min", "p50", "max")], [0.5, 0.7, 1.0]
    )
    assert profile.top_share.mean == pytest.approx((1.0 + 0.5 + 0.6 + 0.8) / 4)
    assert profile.gap.quantiles["min"] == 0 and profile.gap.quantiles["max"] == 10
    # Shares 1.0, 0.5, 0.6, 0.8 -> buckets [0.9, 1], [0.5, 0.6), [0.6, 0.7), [0.8, 0.9).
    assert profile.top_share.histogram.queries == (0, 1, 1, 0, 1, 1)
    # Gaps 10, 0, 3, 6 in bins of width 1 over [0, 10].
    assert profile.gap.histogram.queries == (1, 0, 0, 1, 0, 0, 1, 0, 0, 1)
    assert (
        profile.gap.histogram.labels[0] == "[0, 1)"
        and profile.gap.histogram.labels[-1] == "[9, 10]"
    )


def test_one_class_is_never_tied():
    profile = profile_votes(np.array([[3.0], [3.0]]), 3)
    assert profile.tied == 0 and profile.unanimous == 2


def test_mnist_json():
    result = run_cli(["inspect", MNIST, "--json"])
    assert result.stdout.endswith("}\n") and result.stdout.count("\n") == 1
    payload = result.json
    assert payload["command"] == "inspect"
    source = payload["input"]
    assert source["format"] == "counts" and source["format_detected"] is True
    assert (source["num_queries"], source["num_teachers"], source["num_classes"]) == (9000, 250, 10)
    assert source["dtype"] == "float64"
    counts = np.load(MNIST)
    top = counts.max(axis=1)
    second = np.sort(counts, axis=1)[:, -2]
    share = payload["top_share"]
    assert share["quantiles"]["p50"] == pytest.approx(np.median(top / 250))
    assert share["quantiles"]["max"] == pytest.approx(215 / 250)
    assert share["mean"] == pytest.approx(np.mean(top / 250))
    assert sum(b["queries"] for b in share["histogram"]) == 9000
    assert sum(b["fraction"] for b in share["histogram"]) == pytest.approx(1.0)
    # The buckets the cost ledger uses (and the 2018 paper's Figure 5).
    assert [b["queries"] for b in share["histogram"]] == [836, 706, 1137, 3327, 2994, 0]
    gap = payload["top2_gap"]
    assert gap["quantiles"]["p25"] == pytest.approx(np.quantile(top - second, 0.25))
    assert sum(b["queries"] for b in gap["histogram"]) == 9000
    assert payload["tied"] == int(np.sum(top == second)) == 6
    assert payload["unanimous"] == 0
    assert sum(payload["plurality_counts"]) == 9000


def test_labels_with_a_selection():
    # 250 x 9000 labels read both ways: --teachers 250 picks the (teachers, queries) layout.
    payload = run_cli(
        ["inspect", MNIST_LABELS, "--teachers", 250, "--indices", MNIST_INDICES]
        + ["--queries", 40, "--json"]
    ).json
    source = payload["input"]
    assert source["format"] == "labels" and source["num_queries"] == 40
    assert source["num_file_queries"] == 9000 and source["num_teachers"] == 250
    assert source["dtype"] == str(np.load(MNIST_LABELS, mmap_mode="r").dtype)
    assert sum(b["queries"] for b in payload["top_share"]["histogram"]) == 40


def test_npz_dtype(tmp_path):
    path = tmp_path / "votes.npz"
    np.savez(path, votes=np.array([[3, 1], [2, 2]], dtype=np.int16))
    payload = run_cli(["inspect", path, "--format", "counts", "--json"]).json
    assert payload["input"]["dtype"] == "int16" and payload["input"]["format_detected"] is False
    assert payload["tied"] == 1


def test_human_output():
    out = run_cli(["inspect", MNIST]).stdout
    flat = " ".join(out.split())
    assert "format counts (detected), dtype float64" in flat
    assert "Top vote share" in flat and "Gap between the top two counts" in flat
    assert "[0.7, 0.8)" in out and "tied at the top: 6" in flat


def test_render_into_a_recording_console():
    from pate_cli.cli.render import render_inspect
    from pate_cli.jobs.inspection import InspectReport
    from pate_cli.reports.models import InputSummary
    from pate_cli.votes import load_votes

    votes = load_votes(MNIST, queries=100)
    report = InspectReport(
        InputSummary.from_votes(votes), "float64", profile_votes(votes.counts, 250)
    )
    console = Console(record=True, width=100)
    console.print(render_inspect(report))
    assert "100 of the file's 9000 queries" in " ".join(console.export_text().split())


@pytest.mark.parametrize(
    ("args", "words"),
    [
        (["missing.npy"], "missing.npy"),
        ([MNIST, "--queries", 0], "--queries"),
        ([MNIST, "--format", "probs"], "--format probs expects"),
    ],
)
def test_bad_input_is_exit_2_with_one_line(args, words):
    result = run_cli(["inspect", *args, "--json"], expect=ExitCode.BAD_INPUT)
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("pate: error:") and words in lines[0]
    assert result.stdout == ""

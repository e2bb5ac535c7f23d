"""The per-query ledger: its terms add up to the analysis, on the real MNIST votes and in edge cases."""

from __future__ import annotations

import csv
import json
import os

import numpy as np
import pytest
from rich.console import Console

from pate_cli.choices import Conversion
from pate_cli.cli import render
from pate_cli.errors import ExitCode, InputError, UsageError
from pate_cli.jobs.analysis import analysis_report
from pate_cli.mechanisms import ConfidentGNMax, GNMax, InteractiveGNMax, LNMax
from pate_cli.orders import parse_orders
from pate_cli.reports import ledger
from pate_cli.reports.models import dumps
from pate_cli.votes import load_votes
from tests.conftest import MNIST, MNIST_INDICES, run_cli

ORDERS = parse_orders(None)
DELTA = 1e-5
MECHANISMS = [
    ConfidentGNMax(200.0, 150.0, 40.0),
    ConfidentGNMax(300.0, 200.0, 40.0),  # mostly unanswered: the threshold step dominates
    GNMax(40.0),
    LNMax(0.05),
]


@pytest.fixture(scope="module")
def mnist():
    return load_votes(MNIST)


def _check_totals(per_query: ledger.Ledger, report) -> None:
    """The acceptance criteria: the RDP column sums to the analysis, the running epsilon ends there."""
    at = report.data_dependent.order_index
    np.testing.assert_allclose(per_query.rdp.sum(), report.data_dependent.rdp[at], rtol=1e-9)
    np.testing.assert_allclose(
        per_query.running_epsilon[-1], report.data_dependent.epsilon, rtol=1e-9
    )
    np.testing.assert_allclose(
        per_query.running_epsilon_data_independent[-1], report.data_independent.epsilon, rtol=1e-9
    )
    assert per_query.order == report.data_dependent.order
    assert np.all(np.diff(per_query.running_epsilon) >= 0)
    assert np.all(per_query.rdp >= 0)


@pytest.mark.parametrize("conversion", list(Conversion))
@pytest.mark.parametrize("mechanism", MECHANISMS, ids=repr)
def test_ledger_adds_up_to_the_analysis_on_real_mnist(mnist, mechanism, conversion):
    report = analysis_report(mnist, mechanism, ORDERS, DELTA, conversion)
    per_query = ledger.build_ledger(mnist, mechanism, report)
    assert per_query.num_queries == 9000
    _check_totals(per_query, report)
    np.testing.assert_array_equal(per_query.index, np.arange(9000))
    np.testing.assert_allclose(per_query.pr_answered.sum(), report.expected_answered, rtol=1e-12)


def test_paper_setting_on_640_queries(mnist):
    """Table 2 of the 2018 paper: the running epsilon ends at 1.9988 (order 14)."""
    votes = load_votes(MNIST, queries=640)
    mechanism = ConfidentGNMax(200.0, 150.0, 40.0)
    report = analysis_report(votes, mechanism, ORDERS, DELTA, Conversion.CLASSIC)
    per_query = ledger.build_ledger(votes, mechanism, report)
    _check_totals(per_query, report)
    assert per_query.order == 14.0
    assert per_query.running_epsilon[-1] == pytest.approx(1.9988, abs=5e-5)


def test_realised_run_uses_the_mask_and_only_its_prefix(mnist):
    mask = np.random.default_rng(3).random(700) < 0.4
    mechanism = ConfidentGNMax(200.0, 150.0, 40.0)
    report = analysis_report(mnist, mechanism, ORDERS, DELTA, Conversion.CLASSIC, answered=mask)
    per_query = ledger.build_ledger(mnist, mechanism, report, answered=mask)
    assert per_query.num_queries == 700 and per_query.realized
    np.testing.assert_array_equal(per_query.pr_answered, mask.astype(float))
    _check_totals(per_query, report)
    # Unanswered queries pay the threshold step only, never the answer step.
    threshold_only = ledger.build_ledger(mnist, mechanism, report, answered=np.zeros(700, bool))
    np.testing.assert_array_less(threshold_only.rdp[mask] - 1e-300, per_query.rdp[mask])
    np.testing.assert_array_equal(threshold_only.rdp[~mask], per_query.rdp[~mask])


def test_forced_data_independent_bounds(mnist):
    mechanism = ConfidentGNMax(200.0, 150.0, 40.0)
    report = analysis_report(
        mnist, mechanism, ORDERS, DELTA, Conversion.CLASSIC, data_independent=True
    )
    per_query = ledger.build_ledger(mnist, mechanism, report)
    _check_totals(per_query, report)


def test_interactive_baseline_and_index_selection():
    votes = load_votes(MNIST, indices=MNIST_INDICES)
    baseline = np.random.default_rng(0).dirichlet(np.ones(10), size=votes.num_queries) * 250
    mechanism = InteractiveGNMax(200.0, 150.0, 40.0)
    report = analysis_report(votes, mechanism, ORDERS, DELTA, Conversion.CLASSIC, baseline=baseline)
    per_query = ledger.build_ledger(votes, mechanism, report, baseline=baseline)
    _check_totals(per_query, report)
    np.testing.assert_array_equal(per_query.index, np.load(MNIST_INDICES))


def test_buckets_add_up_to_the_totals(mnist):
    mechanism = ConfidentGNMax(200.0, 150.0, 40.0)
    report = analysis_report(mnist, mechanism, ORDERS, DELTA, Conversion.CLASSIC)
    per_query = ledger.build_ledger(mnist, mechanism, report)
    groups = ledger.buckets(per_query)
    assert [g.label for g in groups] == [
        "[0.0, 0.5)",
        "[0.5, 0.6)",
        "[0.6, 0.7)",
        "[0.7, 0.8)",
        "[0.8, 0.9)",
        "[0.9, 1.0]",
    ]
    assert sum(g.queries for g in groups) == 9000
    assert sum(g.expected_answered for g in groups) == pytest.approx(report.expected_answered)
    assert sum(g.rdp for g in groups) == pytest.approx(per_query.total_rdp, rel=1e-12)
    assert sum(g.share for g in groups) == pytest.approx(1.0)
    # Each bucket's queries really have their top share in its range.
    share = np.load(MNIST).max(axis=1) / 250
    for g in groups:
        inside = (share >= g.low) & ((share < g.high) if g.high < 1 else (share <= g.high))
        assert g.queries == int(inside.sum())


def test_agreement_buckets_edges_and_overflow():
    shares = np.array([0.0, 0.49, 0.5, 0.599, 0.6, 0.9, 1.0, 1.3])
    np.testing.assert_array_equal(ledger.agreement_bucket(shares), [0, 0, 1, 1, 2, 5, 5, 5])


def test_top_two_with_ties_and_one_class():
    top, gap = ledger.top_two(np.array([[3.0, 5.0, 5.0], [0.0, 0.0, 7.0], [2.0, 1.0, 0.0]]))
    np.testing.assert_array_equal(top, [5, 7, 2])
    np.testing.assert_array_equal(gap, [0, 7, 1])
    top, gap = ledger.top_two(np.array([[4.0], [0.0]]))
    np.testing.assert_array_equal(top, [4, 0])
    np.testing.assert_array_equal(gap, [4, 0])


def test_a_free_run_has_no_nan_shares(write_npy):
    """One class: every answer is fixed (log q = -inf), so the GNMax ledger costs nothing."""
    votes = load_votes(write_npy(np.full((5, 1), 7.0)))
    report = analysis_report(votes, GNMax(10.0), ORDERS, DELTA, Conversion.CLASSIC)
    per_query = ledger.build_ledger(votes, GNMax(10.0), report)
    assert per_query.total_rdp == 0
    np.testing.assert_array_equal(per_query.share, 0.0)
    np.testing.assert_array_equal(per_query.logq, -np.inf)
    summary = ledger.ledger_summary(per_query)
    assert json.loads(dumps(summary))["most_expensive"][0]["logq"] == "-inf"


def test_summary_lists_the_most_expensive_first(mnist):
    mechanism = GNMax(40.0)
    report = analysis_report(mnist, mechanism, ORDERS, DELTA, Conversion.CLASSIC)
    per_query = ledger.build_ledger(mnist, mechanism, report)
    summary = json.loads(dumps(ledger.ledger_summary(per_query)))
    top = summary["most_expensive"]
    assert len(top) == 10
    costs = [row["rdp"] for row in top]
    assert costs == sorted(costs, reverse=True)
    assert costs[0] == pytest.approx(per_query.rdp.max())
    assert summary["total_rdp"] == pytest.approx(
        report.data_dependent.rdp[report.data_dependent.order_index], rel=1e-9
    )
    assert sum(b["queries"] for b in summary["by_agreement"]) == 9000


def test_render_ledger_shows_both_tables(mnist):
    mechanism = ConfidentGNMax(200.0, 150.0, 40.0)
    report = analysis_report(mnist, mechanism, ORDERS, DELTA, Conversion.CLASSIC)
    console = Console(record=True, width=100)
    console.print(render.render_ledger(ledger.build_ledger(mnist, mechanism, report)))
    text = console.export_text()
    assert "Most expensive queries" in text and "Pr[ans]" in text
    assert "Cost by teacher agreement" in text and "[0.9, 1.0]" in text
    assert "-> epsilon 10.0377" in text  # rounded up


@pytest.fixture(scope="module")
def small_ledger():
    votes = load_votes(MNIST, queries=50)
    mechanism = ConfidentGNMax(200.0, 150.0, 40.0)
    report = analysis_report(votes, mechanism, ORDERS, DELTA, Conversion.CLASSIC)
    return ledger.build_ledger(votes, mechanism, report)


def test_write_csv_round_trip(small_ledger, tmp_path):
    path = tmp_path / "ledger.csv"
    ledger.write_ledger(small_ledger, str(path))
    with open(path, newline="") as f:
        rows = list(csv.DictReader(f))
    assert list(rows[0]) == list(ledger.COLUMNS)
    assert len(rows) == 50
    np.testing.assert_array_equal([float(r["rdp"]) for r in rows], small_ledger.rdp)
    np.testing.assert_array_equal(
        [float(r["running_epsilon"]) for r in rows], small_ledger.running_epsilon
    )
    assert [int(r["index"]) for r in rows] == list(range(50))
    assert sorted(os.listdir(tmp_path)) == ["ledger.csv"]  # no temporary file left


def test_write_json_round_trip(small_ledger, tmp_path):
    path = tmp_path / "ledger.JSON"  # the suffix is case-insensitive
    ledger.write_ledger(small_ledger, str(path))
    payload = json.loads(path.read_text())
    assert payload["order"] == small_ledger.order
    assert len(payload["queries"]) == 50
    assert [q["rdp"] for q in payload["queries"]] == small_ledger.rdp.tolist()


def test_write_rejects_bad_suffix_and_missing_folder(small_ledger, tmp_path):
    with pytest.raises(UsageError, match=r"--ledger .*ledger\.txt: expected .*\.csv or \.json"):
        ledger.write_ledger(small_ledger, str(tmp_path / "ledger.txt"))
    with pytest.raises(InputError, match="does not exist"):
        ledger.write_ledger(small_ledger, str(tmp_path / "nope" / "ledger.csv"))
    (tmp_path / "folder.csv").mkdir()
    with pytest.raises(InputError, match="is a directory"):
        ledger.write_ledger(small_ledger, str(tmp_path / "folder.csv"))
    assert os.listdir(tmp_path) == ["folder.csv"]


def test_a_failed_write_leaves_the_old_file(small_ledger, tmp_path, monkeypatch):
    path = tmp_path / "ledger.csv"
    path.write_text("old")

    def refuse(src, dst):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(os, "replace", refuse)
    with pytest.raises(InputError, match="No space left"):
        ledger.write_ledger(small_ledger, str(path))
    assert path.read_text() == "old"
    assert os.listdir(tmp_path) == ["ledger.csv"]


# Through ``pate analyze``, which calls this module.

ANALYZE = ["analyze", MNIST, "--threshold", 200, "--sigma1", 150, "--sigma", 40, "--delta", 1e-5]


def test_analyze_breakdown_and_ledger_file(tmp_path):
    out = tmp_path / "ledger.csv"
    result = run_cli([*ANALYZE, "--no-release", "--ledger", out, "--json"])
    payload = result.json
    breakdown = payload["breakdown"]
    at = payload["data_dependent"]["order_index"]
    assert breakdown["total_rdp"] == pytest.approx(payload["data_dependent"]["rdp"][at], rel=1e-9)
    assert breakdown["epsilon"] == pytest.approx(payload["data_dependent"]["epsilon"], rel=1e-9)
    with open(out, newline="") as f:
        rows = list(csv.DictReader(f))
    assert len(rows) == 9000
    assert float(rows[-1]["running_epsilon"]) == pytest.approx(
        payload["data_dependent"]["epsilon"], rel=1e-9
    )
    human = " ".join(run_cli([*ANALYZE, "--no-release", "--breakdown"]).stdout.split())
    assert "Most expensive queries" in human and "Cost by teacher agreement" in human


@pytest.mark.parametrize(
    ("name", "words"),
    [
        ("ledger.txt", "expected a file name ending in .csv or .json"),
        ("nope/l.csv", "does not exist"),
    ],
)
def test_analyze_bad_ledger_path_is_exit_2_with_one_line(tmp_path, name, words):
    result = run_cli(
        [*ANALYZE, "--queries", 100, "--no-release", "--ledger", tmp_path / name],
        expect=ExitCode.BAD_INPUT,
    )
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("pate: error:") and words in lines[0]
    assert result.stdout == "" and os.listdir(tmp_path) == []


PREFIXES = (1, 2, 3, 7, 50, 100, 283, 500, 639, 640)


def test_the_running_epsilon_of_k_queries_is_their_analysis(tmp_path):
    """Table 2: for a sample of k, the ledger's running epsilon (and its order) is what
    `analyze --queries k` reports, to 1e-12 relative; both curves start at one query."""
    table2 = ["--threshold", 200, "--sigma1", 150, "--sigma", 40, "--delta", DELTA]
    path = tmp_path / "ledger.json"
    run_cli(["analyze", MNIST, *table2, "--queries", 640, "--no-release", "--ledger", path])
    rows = json.loads(path.read_text())["queries"]
    for k in PREFIXES:
        alone = run_cli(["analyze", MNIST, *table2, "--queries", k, "--no-release", "--json"]).json
        row = rows[k - 1]
        assert row["running_epsilon"] == pytest.approx(
            alone["data_dependent"]["epsilon"], rel=1e-12
        )
        assert row["running_order"] == alone["data_dependent"]["order"]
        assert row["running_epsilon_data_independent"] == pytest.approx(
            alone["data_independent"]["epsilon"], rel=1e-12
        )
    # The figures: 0.129 for the first query and 0.754 after 100, not 0.886 and 1.046.
    assert rows[0]["running_epsilon"] == pytest.approx(0.128752, abs=1e-6)
    assert rows[99]["running_epsilon"] == pytest.approx(0.754176, abs=1e-6)


@pytest.mark.parametrize("mechanism", MECHANISMS, ids=lambda m: m.to_json_dict()["name"])
def test_running_epsilon_is_each_prefix_analysed_alone(mnist, mechanism):
    """Every mechanism, prefixes of 60 queries, against analysis_report of the prefix."""
    votes = load_votes(MNIST, queries=60)
    report = analysis_report(votes, mechanism, ORDERS, DELTA, Conversion.CLASSIC)
    per_query = ledger.build_ledger(votes, mechanism, report, terms=report.terms)
    for k in (*range(1, 12), 25, 47, 60):
        alone = analysis_report(
            load_votes(MNIST, queries=k), mechanism, ORDERS, DELTA, Conversion.CLASSIC
        )
        assert per_query.running_epsilon[k - 1] == pytest.approx(
            alone.data_dependent.epsilon, rel=1e-12
        )
        assert per_query.running_epsilon_data_independent[k - 1] == pytest.approx(
            alone.data_independent.epsilon, rel=1e-12
        )


@pytest.mark.parametrize("keep", [True, False], ids=["running-kept", "running-recomputed"])
def test_the_file_is_the_same_however_the_rows_are_computed(tmp_path, monkeypatch, keep):
    """Streamed block by block (a summing pass, then a writing pass that reuses or recomputes
    the running epsilons) or from the whole columns: the same bytes, and the same summary."""
    import pate_cli.reports.breakdown as breakdown

    monkeypatch.setattr(ledger, "_ROWS", 7)  # many blocks, one of them short
    monkeypatch.setattr(breakdown, "_SUMMARY_BLOCK", 16)  # sums over other blocks still
    monkeypatch.setattr(breakdown, "KEEP_RUNNING", 10**9 if keep else 0)
    votes = load_votes(MNIST, queries=50)
    mechanism = ConfidentGNMax(200.0, 150.0, 40.0)
    report = analysis_report(votes, mechanism, ORDERS, DELTA, Conversion.CLASSIC)
    streamed = ledger.build_ledger(votes, mechanism, report)
    summary = streamed.summary()  # the summing pass first, as the CLI does
    assert "_columns" not in streamed.__dict__  # never held whole
    assert (streamed.totals.running is not None) == keep
    for suffix in (".csv", ".json"):
        ledger.write_ledger(streamed, str(tmp_path / f"streamed{suffix}"))
    whole = ledger.build_ledger(votes, mechanism, report)
    assert whole.rdp.size == 50  # the whole columns, computed once and kept
    for suffix in (".csv", ".json"):
        ledger.write_ledger(whole, str(tmp_path / f"whole{suffix}"))
        assert (tmp_path / f"streamed{suffix}").read_bytes() == (
            tmp_path / f"whole{suffix}"
        ).read_bytes()
    assert summary == whole.summary()
    assert summary["epsilon"] == whole.running_epsilon[-1]
    assert [row["index"] for row in summary["most_expensive"]] == list(
        np.argsort(-whole.rdp, kind="stable")[: ledger.TOP_QUERIES]
    )


def test_an_infinite_total_gives_shares_not_nan(tmp_path):
    """A vanishing sigma makes every query's RDP infinite: inf / inf would be NaN, which no
    output may hold; each infinite query's share is 1 (alone it makes the total infinite)."""
    ledger_file = tmp_path / "ledger.csv"
    args = ["analyze", MNIST, "--sigma", 1e-200, "--queries", 5, "--delta", 1e-5]
    out = run_cli(
        [
            *args,
            "--data-independent",
            "--no-release",
            "--breakdown",
            "--json",
            "--ledger",
            ledger_file,
        ]
    ).json
    buckets = out["breakdown"]["by_agreement"]
    assert {bucket["share"] for bucket in buckets if bucket["queries"]} == {1.0}
    assert {row["share"] for row in out["breakdown"]["most_expensive"]} == {1.0}
    rows = ledger_file.read_text().splitlines()
    share = rows[0].split(",").index("share")
    assert {row.split(",")[share] for row in rows[1:]} == {"1.0"}

"""``pate compare``: every row is what ``analyze`` says for that setting; sorting, files, gate, errors."""

from __future__ import annotations

import csv
import itertools
import os
import re

import numpy as np
import pytest
from rich.console import Console

from pate_cli.choices import Conversion
from pate_cli.cli import render
from pate_cli.common import spelling
from pate_cli.core import agreement, gnmax, threshold
from pate_cli.errors import ExitCode, UsageError
from pate_cli.jobs import comparison
from pate_cli.jobs.analysis import analysis_report
from pate_cli.mechanisms import (
    ConfidentGNMax,
    GNMax,
    InteractiveGNMax,
    LNMax,
)
from pate_cli.orders import parse_orders
from pate_cli.reports.rounding import bound
from pate_cli.votes import load_votes
from tests.conftest import MNIST, MNIST_INDICES, run_cli

ORDERS = parse_orders(None)
DELTA = 1e-5


@pytest.fixture(scope="module")
def mnist():
    return load_votes(MNIST)


# ---------------------------------------------------------------------------
# Flags -> grid.


def test_parse_list():
    assert comparison.parse_list("--sigma", "20, 40,80") == (20.0, 40.0, 80.0)
    assert comparison.parse_list("--sigma", "40,40,1e1") == (40.0, 10.0)
    assert comparison.parse_list("--sigma", None) == ()


@pytest.mark.parametrize("text", ["20,,x", "", "20,", "abc", "inf", "nan", "20;40"])
def test_parse_list_rejects(text):
    with pytest.raises(UsageError, match="--sigma .*expected a comma list of numbers"):
        comparison.parse_list("--sigma", text)


def test_grid_infers_every_mechanism_whose_flags_are_given():
    grid = comparison.mechanism_grid(
        None, sigma=(20.0, 40.0), threshold=(200.0,), sigma1=(100.0, 150.0), gamma=(0.1,)
    )
    assert grid == [
        GNMax(20.0),
        GNMax(40.0),
        ConfidentGNMax(200.0, 100.0, 20.0),
        ConfidentGNMax(200.0, 100.0, 40.0),
        ConfidentGNMax(200.0, 150.0, 20.0),
        ConfidentGNMax(200.0, 150.0, 40.0),
        LNMax(0.1),
    ]
    restricted = comparison.mechanism_grid(
        "confident-gnmax", sigma=(20.0,), threshold=(200.0,), sigma1=(100.0,)
    )
    assert restricted == [ConfidentGNMax(200.0, 100.0, 20.0)]
    interactive = comparison.mechanism_grid(
        None, sigma=(20.0,), threshold=(200.0,), sigma1=(100.0,), has_baseline=True
    )
    assert [m.name for m in interactive] == [
        "gnmax",
        "confident-gnmax",
        "interactive-gnmax",
    ]
    assert isinstance(interactive[2], InteractiveGNMax)


@pytest.mark.parametrize(
    ("name", "flags", "words"),
    [
        (None, {}, "nothing to compare"),
        (None, {"threshold": (200.0,), "sigma": (40.0,)}, "confident-gnmax needs --sigma1"),
        (None, {"sigma": (40.0,), "has_baseline": True}, "interactive-gnmax needs --threshold"),
        ("gnmax", {"sigma": (40.0,), "gamma": (0.1,)}, "--gamma cannot be used"),
        ("lnmax", {"sigma": (40.0,)}, "--sigma cannot be used"),
        (
            "interactive-gnmax",
            {"sigma": (1.0,), "threshold": (1.0,), "sigma1": (1.0,)},
            "needs --baseline",
        ),
        (None, {"sigma": (-1.0,)}, "--sigma -1.0"),
    ],
)
def test_grid_rejects(name, flags, words):
    # The grid is pate compare's, built from its flags: its messages name flags, as the
    # command that calls it (inside spelling.command_line()) prints them.
    with pytest.raises(UsageError, match=words), spelling.command_line():
        comparison.mechanism_grid(name, **flags)


def test_grid_size_is_capped():
    values = tuple(float(v) for v in range(1, 30))
    with pytest.raises(UsageError, match="more than"):
        comparison.mechanism_grid(None, sigma=values, threshold=values, sigma1=values)


# ---------------------------------------------------------------------------
# Rows are the analysis, exactly.


def _assert_row_is_analysis(row, report, rtol=1e-12):
    for name in ("data_dependent", "data_independent"):
        mine, theirs = getattr(row, name), getattr(report, name)
        assert mine.order == theirs.order
        np.testing.assert_allclose(mine.epsilon, theirs.epsilon, rtol=rtol)
        np.testing.assert_allclose(mine.rdp, theirs.rdp, rtol=rtol)
    np.testing.assert_allclose(row.expected_answered, report.expected_answered, rtol=rtol)


@pytest.fixture(scope="module")
def analyses(mnist):
    """Each setting's analysis on the MNIST votes, computed once per module and conversion
    (the chunk size changes compare's rows, not the analysis they must equal)."""
    found: dict = {}

    def analysis(mechanism, conversion):
        key = (mechanism, conversion)
        if key not in found:
            found[key] = analysis_report(mnist, mechanism, ORDERS, DELTA, conversion)
        return found[key]

    return analysis


@pytest.mark.parametrize("conversion", list(Conversion))
@pytest.mark.parametrize("chunk_size", [65536, 1000])
def test_rows_equal_the_analysis_on_real_mnist(mnist, analyses, conversion, chunk_size):
    grid = comparison.mechanism_grid(
        None,
        sigma=(20.0, 40.0),
        threshold=(150.0, 250.0),
        sigma1=(100.0, 200.0),
        gamma=(0.05, 0.5),
    )
    rows = comparison.compare_rows(
        mnist.counts, grid, ORDERS, DELTA, conversion, chunk_size=chunk_size
    )
    assert len(rows) == len(grid) == 2 + 8 + 2
    for mechanism, row in zip(grid, rows, strict=True):
        assert row.mechanism == mechanism
        _assert_row_is_analysis(row, analyses(mechanism, conversion))


def test_rows_equal_the_analysis_beyond_one_accounting_chunk(write_npy):
    """More queries than ``accounting.DEFAULT_CHUNK_SIZE``: account sums chunk by chunk."""
    rng = np.random.default_rng(7)
    counts = rng.multinomial(50, rng.dirichlet(np.full(4, 0.3), size=70_000))
    votes = load_votes(write_npy(counts))
    grid = [GNMax(5.0), ConfidentGNMax(30.0, 10.0, 5.0), LNMax(0.5)]
    orders = parse_orders("2:64:2")
    rows = comparison.compare_rows(votes.counts, grid, orders, DELTA, Conversion.CLASSIC)
    for mechanism, row in zip(grid, rows, strict=True):
        report = analysis_report(votes, mechanism, orders, DELTA, Conversion.CLASSIC)
        _assert_row_is_analysis(row, report)


@pytest.mark.parametrize("half_even", [False, True])
def test_interactive_rows_equal_the_analysis(half_even):
    votes = load_votes(MNIST, indices=MNIST_INDICES)
    # A fractional baseline, so that exact halves (and the rounding rule) can matter.
    baseline = np.round(np.random.default_rng(1).dirichlet(np.ones(10), size=100) * 250) / 2
    grid = comparison.mechanism_grid(
        "interactive-gnmax",
        sigma=(20.0, 40.0),
        threshold=(100.0, 150.0),
        sigma1=(50.0,),
        has_baseline=True,
    )
    rows = comparison.compare_rows(
        votes.counts,
        grid,
        ORDERS,
        DELTA,
        Conversion.CLASSIC,
        baseline=baseline,
        half_even=half_even,
    )
    for mechanism, row in zip(grid, rows, strict=True):
        report = analysis_report(
            votes,
            mechanism,
            ORDERS,
            DELTA,
            Conversion.CLASSIC,
            baseline=baseline,
            half_even=half_even,
        )
        _assert_row_is_analysis(row, report)


def test_each_row_of_a_2x2x2_grid_is_what_analyze_prints():
    """Through the CLI: the compare JSON row for each setting equals the analyze JSON."""
    common = [MNIST, "--queries", 1000, "--delta", DELTA, "--conversion", "improved"]
    rows = run_cli(
        [
            "compare",
            *common,
            "--threshold",
            "150,200",
            "--sigma1",
            "100,150",
            "--sigma",
            "20,40",
            "--json",
        ]
    ).json["rows"]
    assert len(rows) == 2 + 8
    grid = itertools.product(("150", "200"), ("100", "150"), ("20", "40"))
    for t, s1, s in grid:
        analyzed = run_cli(
            [
                "analyze",
                *common,
                "--threshold",
                t,
                "--sigma1",
                s1,
                "--sigma",
                s,
                "--no-release",
                "--json",
            ]
        ).json
        (row,) = [r for r in rows if r["mechanism"] == analyzed["mechanism"]]
        assert row["expected_answered"] == pytest.approx(analyzed["expected_answered"], rel=1e-12)
        for block in ("data_dependent", "data_independent"):
            assert row[block]["order"] == analyzed[block]["order"]
            assert row[block]["epsilon"] == pytest.approx(analyzed[block]["epsilon"], rel=1e-12)


def test_agreement_is_the_expected_agreement_with_the_plurality(mnist):
    counts = mnist.counts
    rows = comparison.compare_rows(
        counts,
        [GNMax(40.0), ConfidentGNMax(200.0, 150.0, 40.0), LNMax(0.05)],
        ORDERS,
        DELTA,
        Conversion.CLASSIC,
    )
    exact = agreement.gaussian_agreement(counts, 40.0)
    answered = np.exp(threshold.log_pr_answered_threshold(counts, 200.0, 150.0))
    assert rows[0].agreement == pytest.approx(exact.mean(), rel=1e-12)
    # Of the answered queries: weighted by Pr[answered].
    assert rows[1].agreement == pytest.approx(np.sum(answered * exact) / answered.sum(), rel=1e-12)
    assert rows[2].agreement == pytest.approx(
        agreement.laplace_agreement(counts, 0.05).mean(), rel=1e-12
    )
    # Never below the old figure, 1 - q with q the privacy analysis's upper bound of a miss.
    q = np.exp(gnmax.logq_gnmax(counts, 40.0))
    assert rows[0].agreement >= 1 - q.mean()
    assert 0 <= rows[1].agreement <= 1


# ---------------------------------------------------------------------------
# Sorting and rendering.


@pytest.fixture(scope="module")
def rows(mnist):
    grid = comparison.mechanism_grid(
        None, sigma=(20.0, 40.0, 80.0), threshold=(150.0, 250.0), sigma1=(100.0,), gamma=(0.05,)
    )
    return comparison.compare_rows(mnist.counts[:2000], grid, ORDERS, DELTA, Conversion.CLASSIC)


@pytest.mark.parametrize(
    ("column", "key", "reverse"),
    [
        (comparison.SortColumn.EPSILON, lambda r: r.data_dependent.epsilon, False),
        (comparison.SortColumn.DATA_INDEPENDENT, lambda r: r.data_independent.epsilon, False),
        (comparison.SortColumn.ANSWERED, lambda r: r.expected_answered, True),
        (comparison.SortColumn.AGREEMENT, lambda r: r.agreement, True),
    ],
)
def test_sort_puts_the_best_first(rows, column, key, reverse):
    ordered = comparison.sort_rows(rows, column)
    values = [key(r) for r in ordered]
    assert values == sorted(values, reverse=reverse)
    assert sorted(map(repr, ordered)) == sorted(map(repr, rows))


def test_every_sort_column_has_a_key():
    assert set(comparison._SORT_KEYS) == set(comparison.SortColumn)


def test_table_highlights_the_best_of_each_column(rows, mnist):
    from pate_cli.reports.models import InputSummary

    report = comparison.CompareReport(
        input=InputSummary.from_votes(mnist),
        delta=DELTA,
        conversion="classic",
        orders=ORDERS,
        sort=comparison.SortColumn.EPSILON,
        rows=tuple(comparison.sort_rows(rows, comparison.SortColumn.EPSILON)),
    )
    console = Console(record=True, width=100, force_terminal=True, color_system="standard")
    console.print(render.render_compare(report))
    styled = console.export_text(styles=True, clear=False)
    plain = console.export_text()
    # Bold marks the best of a column; the colour says what a number is: yellow private
    # (the data-dependent epsilon), green publishable (the worst case).
    best = min(r.data_dependent.epsilon for r in rows)
    assert re.search(rf"\x1b\[1;33m *{bound(best)}\x1b", styled)
    most = max(r.agreement for r in rows)
    assert re.search(rf"\x1b\[1m *{most:.4f}\x1b", styled)
    worst = max(r.data_dependent.epsilon for r in rows)
    assert re.search(rf"\x1b\[33m *{bound(worst)}\x1b", styled)
    cheapest = min(r.epsilons()[comparison.GateOn.PUBLISHABLE] for r in rows)
    assert re.search(rf"\x1b\[1;32m *{bound(cheapest)}\x1b", styled)
    assert "note: choosing parameters" in " ".join(plain.split())
    assert "confident" in plain and "lnmax" in plain


def test_table_fits_80_columns(monkeypatch):
    monkeypatch.setenv("COLUMNS", "80")  # a terminal's width, as the environment gives it
    result = run_cli(
        [
            "compare",
            MNIST,
            "--queries",
            500,
            "--delta",
            DELTA,
            "--threshold",
            "150,200",
            "--sigma1",
            "100",
            "--sigma",
            "20,40",
        ]
    )
    assert "…" not in result.stdout
    assert max(len(line) for line in result.stdout.splitlines()) <= 80


# ---------------------------------------------------------------------------
# The command: JSON, CSV, gate, errors, speed.

SMALL = ["compare", MNIST, "--queries", 640, "--delta", DELTA]
GRID = ["--threshold", "150,200", "--sigma1", "100,150", "--sigma", "40"]


def test_json_shape_follows_the_contract():
    result = run_cli([*SMALL, *GRID, "--sort", "answered", "--json"])
    assert result.stdout.endswith("}\n") and result.stdout.count("\n") == 1
    payload = result.json
    assert payload["command"] == "compare"
    assert set(payload["input"]) >= {
        "path",
        "sha256",
        "format",
        "num_queries",
        "num_teachers",
        "num_classes",
    }
    assert payload["delta"] == DELTA and payload["conversion"] == "classic"
    assert "private data" in payload["note"]
    assert payload["sort"] == "answered"
    rows = payload["rows"]
    assert len(rows) == 5
    for row in rows:
        assert set(row) >= {
            "mechanism",
            "expected_answered",
            "data_dependent",
            "data_independent",
            "agreement",
        }
        assert set(row["data_dependent"]) >= {"epsilon", "order"}
        assert set(row["data_independent"]) >= {"epsilon", "order"}
    answered = [r["expected_answered"] for r in rows]
    assert answered == sorted(answered, reverse=True)
    assert rows[0]["mechanism"] == {"name": "gnmax", "sigma": 40.0}


def test_paper_setting_row():
    """The 2018 paper's MNIST setting appears with its published epsilon (1.9988 at order 14)."""
    rows = run_cli(
        [
            *SMALL,
            "--threshold",
            "200",
            "--sigma1",
            "150",
            "--sigma",
            "40",
            "--mechanism",
            "confident-gnmax",
            "--json",
        ]
    ).json["rows"]
    (row,) = rows
    assert row["data_dependent"]["order"] == 14
    assert row["data_dependent"]["epsilon"] == pytest.approx(1.9988, abs=5e-5)
    assert row["expected_answered"] == pytest.approx(282.7, abs=0.05)


def test_csv_file_matches_the_json(tmp_path):
    out = tmp_path / "grid.csv"
    payload = run_cli([*SMALL, *GRID, "--gamma", "0.05", "--csv", out, "--json"]).json
    with open(out, newline="") as f:
        table = list(csv.DictReader(f))
    assert len(table) == len(payload["rows"]) == 6
    for line, row in zip(table, payload["rows"], strict=True):
        assert line["mechanism"] == row["mechanism"]["name"]
        assert float(line["epsilon"]) == row["data_dependent"]["epsilon"]
        assert float(line["data_independent_order"]) == row["data_independent"]["order"]
        assert float(line["agreement"]) == row["agreement"]
        assert (line["gamma"] == "") == ("gamma" not in row["mechanism"])
    assert payload["csv"] == str(out)
    assert os.listdir(tmp_path) == ["grid.csv"]


def test_gate_passes_when_some_setting_is_within_budget():
    """By default each row's smallest publishable figure (its exact worst case) is gated:
    the GNMax baseline's 3.849 is within 3.9, the Confident rows' 3.927 and 4.023 are not."""
    payload = run_cli([*SMALL, *GRID, "--max-epsilon", 3.9, "--json"]).json
    within = {row["mechanism"]["name"]: row["within_budget"] for row in payload["rows"]}
    assert within == {"confident-gnmax": False, "gnmax": True}
    assert payload["gate"] == {
        "on": "publishable",
        "epsilon": pytest.approx(3.8486102825409034, rel=1e-9),
        "limit": 3.9,
        "passed": True,
    }
    assert all(
        row["publishable"][0]["basis"] == "data-independent-exact" for row in payload["rows"]
    )
    result = run_cli(
        [*SMALL, *GRID, "--max-epsilon", 3.8, "--json"], expect=ExitCode.BUDGET_EXCEEDED
    )
    assert result.json["rows"] and result.json["gate"]["passed"] is False  # printed first
    assert "publishable epsilon 3.84862 exceeds --max-epsilon 3.8" in result.stderr  # rounded up
    # A gate on what depends on the votes works when asked for, and says so.
    dependent = run_cli([*SMALL, *GRID, "--max-epsilon", 2.5, "--gate-on", "data-dependent"])
    assert "depends on the votes" in " ".join(dependent.stderr.split())
    run_cli(
        [*SMALL, *GRID, "--max-epsilon", 2.5, "--gate-on", "data-independent"],
        expect=ExitCode.BUDGET_EXCEEDED,
    )


@pytest.mark.parametrize(
    ("args", "words"),
    [
        (["--sigma", "20,,x"], "--sigma '20,,x'"),
        (["--sigma", "40", "--sort", "nope"], "--sort: 'nope' is not one of"),
        (["--sigma", "40", "--csv", "out.txt"], "expected a file name ending in .csv"),
        (["--sigma", "40", "--csv", "missing/out.csv"], "does not exist"),
        (["--sigma", "40", "--plot", "out.gif"], "expected a file name ending in .png"),
        (
            ["--sigma", "40", "--gate-on", "released", "--max-epsilon", "1"],
            "--gate-on: 'released' is not one of",
        ),
        (["--threshold", "200", "--sigma", "40"], "needs --sigma1"),
        (
            ["--mechanism", "gnmax", "--gamma", "0.1"],
            "--gamma cannot be used with --mechanism gnmax",
        ),
        (["--mechanism", "lnmax"], "--mechanism lnmax needs --gamma"),
        ([], "nothing to compare"),
        (["--sigma", "40", "--orders", "0.5"], "--orders"),
        (
            ["--sigma", "40", "--baseline", "nope.npy", "--threshold", "1", "--sigma1", "1"],
            "nope.npy",
        ),
    ],
)
def test_bad_input_is_exit_2_with_one_line(args, words, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    result = run_cli([*SMALL, *args, "--json"], expect=ExitCode.BAD_INPUT)
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("pate: error:"), result.stderr
    assert words in lines[0]
    assert result.stdout == "" and os.listdir(tmp_path) == []


def test_plot_is_written(tmp_path):
    pytest.importorskip("matplotlib")
    out = tmp_path / "grid.png"
    payload = run_cli([*SMALL, *GRID, "--gamma", "0.05", "--plot", out, "--json"]).json
    assert payload["plot"] == str(out)
    assert out.read_bytes().startswith(b"\x89PNG\r\n\x1a\n")


def test_a_3x3x3_grid_on_all_of_mnist_has_a_row_per_setting():
    """27 Confident-GNMax settings on 9,000 queries: one row each, every setting once."""
    payload = run_cli(
        [
            "compare",
            MNIST,
            "--delta",
            DELTA,
            "--mechanism",
            "confident-gnmax",
            "--threshold",
            "150,200,250",
            "--sigma1",
            "100,150,200",
            "--sigma",
            "20,40,80",
            "--json",
        ]
    ).json
    settings = {
        (row["mechanism"]["threshold"], row["mechanism"]["sigma1"], row["mechanism"]["sigma"])
        for row in payload["rows"]
    }
    assert settings == set(itertools.product([150, 200, 250], [100, 150, 200], [20, 40, 80]))


def test_every_gate_its_help_lists_works_and_worst_case_is_reported():
    args = ["compare", MNIST, "--threshold", 200, "--sigma1", 150, "--sigma", 40]
    args += ["--queries", 640, "--delta", 1e-5, "--json"]
    out = run_cli(args).json
    (row,) = [r for r in out["rows"] if r["mechanism"]["name"] == "confident-gnmax"]
    worst = row["data_independent_worst_case"]
    # Every query answered, Prop. 8 for both steps: the figure that does not depend on the votes.
    assert worst["epsilon"] == pytest.approx(4.785703619893576, rel=1e-12)
    assert worst["epsilon"] > row["data_independent"]["epsilon"]
    assert (
        "only the worst-case epsilon" in out["note"]
        and "data-independent columns" not in out["note"]
    )
    help_text = run_cli(["compare", "--help"]).stdout
    for choice in ("data-dependent", "data-independent", "worst-case"):
        assert choice in help_text
        run_cli([*args, "--gate-on", choice, "--max-epsilon", 100])
    assert "released" not in help_text.split("--gate-on", 1)[1].split("\n", 1)[0]
    # compare passes when any setting is within budget: alone, Confident-GNMax's worst case fails.
    only = [*args, "--mechanism", "confident-gnmax", "--gate-on", "worst-case"]
    run_cli([*only, "--max-epsilon", 4.7], expect=ExitCode.BUDGET_EXCEEDED)
    run_cli([*only, "--max-epsilon", 4.8])

"""Figures: valid files of the kind asked for, matplotlib optional and imported lazily."""

from __future__ import annotations

import os
import subprocess
import sys
import xml.etree.ElementTree as ET

import pytest

from pate_cli import plots
from pate_cli.analysis import analysis_report
from pate_cli.choices import Conversion
from pate_cli.errors import ExitCode, InputError, UsageError
from pate_cli.mechanisms import ConfidentGNMax
from pate_cli.orders import parse_orders
from pate_cli.reports import ledger
from pate_cli.votes import load_votes
from tests.conftest import MNIST, run_cli

ANALYZE = ["analyze", MNIST, "--threshold", 200, "--sigma1", 150, "--sigma", 40, "--delta", 1e-5]
COMPARE = [
    "compare",
    MNIST,
    "--queries",
    640,
    "--delta",
    1e-5,
    "--sigma",
    "20,40",
    "--gamma",
    "0.05",
]


def _assert_image(path, kind: str) -> None:
    data = path.read_bytes()
    if kind == "png":
        assert data.startswith(b"\x89PNG\r\n\x1a\n")
        from matplotlib.image import imread

        image = imread(str(path))
        assert image.ndim == 3 and image.shape[0] > 100 and image.shape[1] > 100
    elif kind == "svg":
        root = ET.fromstring(data)
        assert root.tag.endswith("svg")
    elif kind == "pdf":
        assert data.startswith(b"%PDF-") and data.rstrip().endswith(b"%%EOF")
    else:  # pragma: no cover
        raise AssertionError(kind)


@pytest.fixture(scope="module")
def analysed():
    votes = load_votes(MNIST, queries=640)
    mechanism = ConfidentGNMax(200.0, 150.0, 40.0)
    report = analysis_report(votes, mechanism, parse_orders(None), 1e-5, Conversion.CLASSIC)
    return report, ledger.build_ledger(votes, mechanism, report)


@pytest.mark.parametrize("kind", ["png", "svg", "pdf"])
def test_plot_analysis_writes_a_valid_image(analysed, tmp_path, kind):
    pytest.importorskip("matplotlib")
    path = tmp_path / f"analysis.{kind}"
    plots.plot_analysis(str(path), *analysed)
    _assert_image(path, kind)
    assert os.listdir(tmp_path) == [path.name]


@pytest.mark.parametrize("kind", ["png", "svg", "pdf"])
def test_cli_plots(tmp_path, kind):
    pytest.importorskip("matplotlib")
    out = tmp_path / f"a.{kind.upper()}"  # suffixes are case-insensitive
    payload = run_cli([*ANALYZE, "--queries", 640, "--no-release", "--plot", out, "--json"]).json
    assert payload["plot"] == str(out)
    _assert_image(out, kind)
    out = tmp_path / f"c.{kind}"
    run_cli([*COMPARE, "--threshold", "150,200", "--sigma1", "100", "--plot", out])
    _assert_image(out, kind)


def test_svg_and_pdf_are_reproducible(analysed, tmp_path):
    pytest.importorskip("matplotlib")
    for kind in ("svg", "pdf"):
        first, second = tmp_path / f"1.{kind}", tmp_path / f"2.{kind}"
        plots.plot_analysis(str(first), *analysed)
        plots.plot_analysis(str(second), *analysed)
        assert first.read_bytes() == second.read_bytes()


def test_compare_plot_skips_infinite_points(tmp_path):
    pytest.importorskip("matplotlib")
    rows = [
        {
            "mechanism": {"name": "gnmax", "sigma": 40.0},
            "expected_answered": 100.0,
            "data_dependent": {"epsilon": 1.5, "order": 8.0},
            "data_independent": {"epsilon": float("inf"), "order": 2.0},
            "agreement": 0.9,
        }
    ]
    path = tmp_path / "c.png"
    plots.plot_compare(str(path), rows)
    _assert_image(path, "png")


def test_pareto_front():
    def row(answered, epsilon):
        return {"expected_answered": answered, "data_dependent": {"epsilon": epsilon}}

    rows = [
        row(100, 2.0),
        row(200, 1.5),
        row(300, 3.0),
        row(300, 2.5),
        row(50, 1.0),
        row(400, float("inf")),
        row(200, 1.5),
    ]
    # (100, 2.0) is beaten by (200, 1.5); (300, 3.0) by (300, 2.5); inf is never on the front;
    # of two equal rows the first is kept.
    assert plots.pareto_front(rows) == [4, 1, 3]
    assert plots.pareto_front([]) == []


def test_check_plot_path_rejects_bad_paths(tmp_path):
    with pytest.raises(
        UsageError,
        match=r"--plot .*fig\.jpg: expected a file name ending in \.png or \.svg or \.pdf",
    ):
        plots.check_plot_path(str(tmp_path / "fig.jpg"))
    with pytest.raises(InputError, match="does not exist"):
        plots.check_plot_path(str(tmp_path / "missing" / "fig.png"))


def test_missing_matplotlib_is_a_usage_error(monkeypatch, tmp_path):
    # A None entry makes `import matplotlib` raise ImportError, as when it is not installed.
    monkeypatch.setitem(sys.modules, "matplotlib", None)
    with pytest.raises(
        UsageError, match=r"matplotlib is not installed; pip install 'pate-cli\[plot\]'"
    ):
        plots.check_plot_path(str(tmp_path / "fig.png"))


@pytest.mark.parametrize("command", [ANALYZE, COMPARE], ids=["analyze", "compare"])
def test_missing_matplotlib_is_exit_2_with_one_line(monkeypatch, tmp_path, command):
    monkeypatch.setitem(sys.modules, "matplotlib", None)
    result = run_cli(
        [*command, "--plot", tmp_path / "fig.png", "--json"], expect=ExitCode.BAD_INPUT
    )
    lines = result.stderr.strip().splitlines()
    assert lines == ["pate: error: matplotlib is not installed; pip install 'pate-cli[plot]'"]
    assert result.stdout == "" and os.listdir(tmp_path) == []


def test_matplotlib_is_not_imported_until_a_plot_is_asked_for():
    code = (
        "import sys, pate_cli.cli.app, pate_cli.plots, pate_cli.reports.ledger;"
        "print(any(m == 'matplotlib' or m.startswith('matplotlib.') for m in sys.modules))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


def test_a_failed_plot_leaves_no_file(analysed, tmp_path, monkeypatch):
    pytest.importorskip("matplotlib")

    def refuse(src, dst):
        raise OSError(13, "Permission denied")

    monkeypatch.setattr(os, "replace", refuse)
    with pytest.raises(InputError, match="Permission denied"):
        plots.plot_analysis(str(tmp_path / "fig.png"), *analysed)
    assert os.listdir(tmp_path) == []

"""Figures: valid files of the kind asked for, matplotlib optional and imported lazily."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import xml.etree.ElementTree as ET
from dataclasses import replace

import pytest

from pate_cli import plots
from pate_cli.choices import Conversion
from pate_cli.errors import ExitCode, InputError, UsageError
from pate_cli.jobs.analysis import analysis_report
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
    return replace(report, ledger=ledger.build_ledger(votes, mechanism, report))


@pytest.mark.parametrize("kind", ["png", "svg", "pdf"])
def test_plot_analysis_writes_a_valid_image(analysed, tmp_path, kind):
    pytest.importorskip("matplotlib")
    path = tmp_path / f"analysis.{kind}"
    plots.save(plots.plot_analysis(analysed), str(path))
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
        plots.save(plots.plot_analysis(analysed), str(first))
        plots.save(plots.plot_analysis(analysed), str(second))
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
    plots.save(plots.plot_compare(rows), str(path))
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
        plots.save(plots.plot_analysis(analysed), str(tmp_path / "fig.png"))
    assert os.listdir(tmp_path) == []


# The library's figures: `pate.plot_analysis` and `pate.plot_compare` return the Figure that
# `--plot` saves.


@pytest.fixture(scope="module")
def library_reports():
    import pate_cli as pate

    votes = pate.load_votes(MNIST, queries=640)
    analysis = pate.analyze(
        votes, pate.ConfidentGNMax(200, 150, 40), delta=1e-5, release=False, breakdown=True
    )
    comparison = pate.compare(votes, [pate.GNMax(20), pate.GNMax(40), pate.LNMax(0.05)], delta=1e-5)
    return analysis, comparison


def test_plot_analysis_returns_the_figure(library_reports):
    pytest.importorskip("matplotlib")
    from matplotlib.figure import Figure

    import pate_cli as pate

    report = library_reports[0]
    figure = pate.plot_analysis(report)
    assert isinstance(figure, Figure)
    left, right = figure.axes
    assert (left.get_xlabel(), right.get_xlabel()) == ("queries", "top vote share n_max / M")
    assert left.get_ylabel() == "epsilon (delta = 1e-05, classic)"
    assert left.get_title() == "confident-gnmax T=200 s1=150 s=40"
    dependent, independent = left.get_lines()
    assert list(dependent.get_xdata()) == list(range(1, 641))
    assert list(dependent.get_ydata()) == list(report.ledger.running_epsilon)
    assert dependent.get_ydata()[-1] == pytest.approx(report.data_dependent.epsilon, rel=1e-9)
    assert list(independent.get_ydata()) == list(report.ledger.running_epsilon_data_independent)
    groups = ledger.buckets(report.ledger)
    assert len(right.patches) == 2 * len(groups)  # a bar of queries and one of cost per bucket
    assert [label.get_text() for label in right.get_xticklabels()] == [b.label for b in groups]
    assert [t.get_text() for t in right.get_legend().get_texts()] == ["queries", "privacy cost"]


def test_plot_analysis_needs_no_breakdown(library_reports):
    """A report made without breakdown=True keeps its (lazy) ledger: the same figure, and the
    JSON still without the breakdown it did not ask for."""
    pytest.importorskip("matplotlib")
    import pate_cli as pate

    plain = pate.analyze(
        pate.load_votes(MNIST, queries=640),
        pate.ConfidentGNMax(200, 150, 40),
        delta=1e-5,
        release=False,
    )
    assert "breakdown" not in plain.to_dict()
    assert "breakdown" in library_reports[0].to_dict()
    drawn = [pate.plot_analysis(report).axes[0].lines[0] for report in (plain, library_reports[0])]
    assert drawn[0].get_ydata().tolist() == drawn[1].get_ydata().tolist()
    assert len(drawn[0].get_ydata()) == 640


def test_plot_analysis_of_another_report_says_what_it_needs(library_reports):
    import pate_cli as pate

    with pytest.raises(UsageError, match=r"needs a report of analyze"):
        pate.plot_analysis(replace(library_reports[0], ledger=None))


def test_plot_compare_returns_the_figure(library_reports):
    pytest.importorskip("matplotlib")
    from matplotlib.figure import Figure

    import pate_cli as pate

    report = library_reports[1]
    figure = pate.plot_compare(report)
    assert isinstance(figure, Figure)
    axes, _key = figure.axes
    assert (axes.get_xlabel(), axes.get_ylabel()) == ("expected answered queries", "epsilon")
    assert axes.get_title() == "3 settings: epsilon against expected answered"
    # One scatter per mechanism and block (filled: data-dependent), one line for the front.
    labels = [t.get_text() for t in axes.get_legend().get_texts()]
    assert labels == [
        "gnmax, data-dependent",
        "gnmax, data-independent",
        "lnmax, data-dependent",
        "lnmax, data-independent",
        "best trade-off",
    ]
    (front,) = axes.get_lines()
    rows = report.to_dict()["rows"]
    assert len(front.get_xdata()) == len(plots.pareto_front(rows))
    # The rows of the JSON draw the same figure.
    assert plots.plot_compare(rows).axes[0].get_legend_handles_labels()[1] == labels


@pytest.mark.parametrize("command", ["analyze", "compare"])
def test_the_cli_saves_the_library_figure(library_reports, tmp_path, command):
    """`--plot` writes exactly the figure the library returns, saved (same SVG bytes)."""
    pytest.importorskip("matplotlib")
    import pate_cli as pate

    cli_file, library_file = tmp_path / "cli.svg", tmp_path / "library.svg"
    if command == "analyze":
        run_cli([*ANALYZE, "--queries", 640, "--no-release", "--plot", cli_file])
        figure = pate.plot_analysis(library_reports[0])
    else:
        run_cli([*COMPARE, "--plot", cli_file])
        figure = pate.plot_compare(library_reports[1])
    plots.save(figure, str(library_file))
    assert cli_file.read_bytes() == library_file.read_bytes()
    _assert_image(cli_file, "svg")


def test_the_figures_leave_no_pyplot_state():
    """Drawing never imports pyplot or picks a backend; pyplot, imported after, holds no
    figure. Importing the names does not import matplotlib."""
    pytest.importorskip("matplotlib")
    code = f"""
import sys
import pate_cli as pate
pate.plot_analysis, pate.plot_compare
assert not any(m.split('.')[0] == 'matplotlib' for m in sys.modules)
votes = pate.load_votes({str(MNIST)!r}, queries=100)
report = pate.analyze(votes, pate.GNMax(40), delta=1e-5, release=False, breakdown=True)
pate.plot_analysis(report)
pate.plot_compare(pate.compare(votes, [pate.GNMax(20), pate.GNMax(40)], delta=1e-5))
import matplotlib
assert 'matplotlib.pyplot' not in sys.modules
assert matplotlib.rcParams._get_backend_or_none() is None  # no backend was forced
import matplotlib.pyplot as plt
print(plt.get_fignums())
"""
    env = {k: v for k, v in os.environ.items() if k != "MPLBACKEND"}
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, env=env
    )
    assert out.stdout.strip() == "[]"


def test_missing_matplotlib_names_the_extra(library_reports, monkeypatch):
    import pate_cli as pate

    monkeypatch.setitem(sys.modules, "matplotlib", None)
    for draw, report in zip((pate.plot_analysis, pate.plot_compare), library_reports, strict=True):
        with pytest.raises(UsageError, match=r"pip install 'pate-cli\[plot\]'"):
            draw(report)


def test_the_figures_are_documented_with_their_arguments():
    import inspect

    import pate_cli as pate
    from tests.conftest import ROOT

    text = (ROOT / "docs" / "api.md").read_text().split("## Figures", 1)[1].split("\n## ")[0]
    rows = re.findall(r"^\| `(\w+)\(([^)]*)\) -> Figure` \| ", text, flags=re.M)
    assert [name for name, _ in rows] == ["plot_analysis", "plot_compare"]
    for name, arguments in rows:
        assert name in pate.__all__
        assert list(inspect.signature(getattr(pate, name)).parameters) == arguments.split(", ")


def test_a_figure_shows_as_an_image_in_a_notebook_without_magic(analysed):
    """Built without pyplot, a figure is registered with no display hook: it draws itself as
    a PNG for a notebook (IPython calls ``_repr_png_``)."""
    figure = plots.plot_analysis(analysed)
    png = figure._repr_png_()
    assert png.startswith(b"\x89PNG\r\n\x1a\n") and len(png) > 10_000
    formatters = pytest.importorskip("IPython.core.formatters")
    shown, _ = formatters.DisplayFormatter().format(figure)
    assert shown["image/png"].startswith(b"\x89PNG")


def test_plot_compare_numbers_every_point_without_overlap():
    """Three GNMax sigmas answer every query (one x): each point still carries its row's
    number, no two numbers overlap, and the key names every setting in the table's order."""
    pytest.importorskip("matplotlib")
    import pate_cli as pate

    votes = pate.load_votes(MNIST, queries=640)
    settings = [pate.GNMax(s) for s in (40, 80, 120)] + [pate.LNMax(0.05), pate.LNMax(0.1)]
    settings += [pate.ConfidentGNMax(t, s1, 40) for t in (150, 200) for s1 in (100, 150)]
    report = pate.compare(votes, settings, delta=1e-5)
    figure = pate.plot_compare(report)
    axes, key_axes = figure.axes
    renderer = figure.canvas.get_renderer()
    numbers = [t for t in axes.texts if t.get_text().isdigit()]
    assert sorted(int(t.get_text()) for t in numbers) == list(range(1, len(settings) + 1))
    boxes = [t.get_window_extent(renderer) for t in numbers]
    for i, box in enumerate(boxes):
        assert not any(box.overlaps(other) for other in boxes[i + 1 :])
    (key,) = key_axes.texts
    lines = key.get_text().splitlines()
    assert lines[0].startswith("1  ") and len(lines) == len(settings)
    names = [row["mechanism"]["name"] for row in report.to_dict()["rows"]]
    assert [line.split()[1] for line in lines] == names
    assert "gnmax s=120" in key.get_text()

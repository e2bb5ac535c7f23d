"""Figures of an analysis and of a comparison: ``pate.plot_analysis`` and ``pate.plot_compare``
return them, ``analyze --plot`` and ``compare --plot`` save them (:func:`save`).

matplotlib is an optional extra (``pip install 'pate-cli[plot]'``). It is imported
inside the functions, never when this module is imported, so ``pate`` starts
as fast without it and works without it until a figure is requested; then
:func:`check_plot_path`, called before any work, turns its absence into a
one-line ``UsageError`` (exit 2). Figures are ``matplotlib.figure.Figure`` objects
with an Agg canvas of their own (no ``pyplot``: no global figure state, no GUI
backend, and no ``matplotlib.use`` forced on a notebook), so one function draws each
figure for the library and the command line alike. :func:`save` renders one to memory
in the format the file's suffix names and writes it atomically: a failed run never
leaves a partial image. SVG and PDF are written without a creation date, so the same
inputs give the same bytes.

The figures are views of data the commands already computed: the analysis
report and its per-query ledger, or the rows of a comparison as they appear
in the JSON output.
"""

from __future__ import annotations

import functools
import io
import math
from collections.abc import Mapping, Sequence
from types import ModuleType
from typing import TYPE_CHECKING, Any

import numpy as np

from pate_cli.errors import UsageError
from pate_cli.reports.ledger import Ledger, buckets
from pate_cli.reports.models import AnalysisReport
from pate_cli.votes import check_output_path, write_atomic

if TYPE_CHECKING:  # pragma: no cover - typing only; matplotlib stays optional
    from matplotlib.figure import Figure

    from pate_cli.jobs.comparison import CompareReport

PLOT_SUFFIXES = (".png", ".svg", ".pdf")
MISSING = "matplotlib is not installed; pip install 'pate-cli[plot]'"
_METADATA: dict[str, dict[str, Any]] = {
    ".png": {},
    ".svg": {"Date": None},
    ".pdf": {"CreationDate": None},
}
#: At most this many settings of the trade-off front are labelled next to their point.
_MAX_KEY_LINES = 40


def _matplotlib() -> ModuleType:
    """Import matplotlib, or fail with the one-line install hint."""
    try:
        import matplotlib
    except ImportError:
        raise UsageError(MISSING) from None
    return matplotlib


def check_plot_path(path: str) -> None:
    """Check a ``--plot`` path before any work: suffix, folder and matplotlib.

    Raises:
        UsageError: The suffix is not .png, .svg or .pdf, or matplotlib is missing.
        InputError: The folder does not exist, or the path is a folder.
    """
    check_output_path(path, "--plot", PLOT_SUFFIXES)
    _matplotlib()


def _figure(width: float, height: float) -> Figure:
    _matplotlib()
    from matplotlib.backends.backend_agg import FigureCanvasAgg

    figure = _displayable()(figsize=(width, height), layout="constrained")
    FigureCanvasAgg(figure)
    return figure


@functools.cache
def _displayable() -> type[Figure]:
    """A matplotlib Figure that a notebook shows as an image with no magic: built without
    pyplot, nothing registers it for display, so it says how to draw itself (IPython calls
    ``_repr_png_``)."""
    from matplotlib import figure

    class Figure(figure.Figure):  # the name a user sees (a matplotlib Figure, and it is one)
        def _repr_png_(self) -> bytes:
            buffer = io.BytesIO()
            self.savefig(buffer, format="png", dpi=100)
            return buffer.getvalue()

    return Figure


def save(figure: Figure, path: str) -> None:
    """Write a figure to ``path`` (.png, .svg or .pdf), atomically and reproducibly.

    Raises:
        UsageError: Bad suffix or matplotlib missing.
        InputError: The file cannot be written.
    """
    suffix = check_output_path(path, "--plot", PLOT_SUFFIXES)
    buffer = io.BytesIO()
    # A fixed salt makes the SVG element ids, hence the file, the same from run to run.
    with _matplotlib().rc_context({"svg.hashsalt": "pate"}):
        figure.savefig(buffer, format=suffix[1:], metadata=_METADATA[suffix], dpi=120)
    write_atomic(path, lambda stream: stream.write(buffer.getvalue()))


def _setting(mechanism: Mapping[str, Any]) -> str:
    """A short label of a setting: "T=200 s1=150 s=40", a plugin's numbers by their names
    ("temperature=4")."""
    short = {"threshold": "T", "sigma1": "s1", "sigma": "s", "gamma": "g"}
    known = [f"{short[k]}={mechanism[k]:g}" for k in short if k in mechanism]
    others = [
        f"{k}={v:g}"
        for k, v in mechanism.items()
        if k not in short and isinstance(v, int | float) and not isinstance(v, bool)
    ]
    return " ".join(known + others)


def _ledger(report: AnalysisReport) -> Ledger:
    """The report's per-query ledger (every report of ``analyze`` keeps one)."""
    if report.ledger is None:
        raise UsageError("plot_analysis needs a report of analyze (pate.analyze(...))")
    return report.ledger


def plot_analysis(report: AnalysisReport) -> Figure:
    """Epsilon against the number of queries, and the cost by teacher agreement.

    Left: for every k, the epsilon of the first k queries analysed alone (the
    best order for each k), data-dependent and data-independent; the curves
    start at the one-query epsilon and end at the report's epsilons. Right: for
    each agreement bucket (top vote share n_max / M), its share of the queries
    and of the privacy cost. ``analyze --plot`` saves this figure.

    Args:
        report: A report of ``pate.analyze`` (no ``breakdown=True`` needed).

    Returns:
        A ``matplotlib.figure.Figure`` (no pyplot state): ``figure.savefig(...)`` or
        display it in a notebook.

    Raises:
        UsageError: The report is not one of ``analyze``, or matplotlib is missing.
    """
    per_query = _ledger(report)
    figure = _figure(11.0, 4.2)
    left, right = figure.subplots(1, 2)
    seen = np.arange(1, per_query.num_queries + 1)
    left.plot(
        seen,
        per_query.running_epsilon,
        label="data-dependent (best order for each k)",
        color="tab:blue",
    )
    left.plot(
        seen,
        per_query.running_epsilon_data_independent,
        label="data-independent (best order for each k)",
        color="tab:orange",
        linestyle="--",
    )
    left.set_xlabel("queries seen" if report.realized else "queries")
    left.set_ylabel(f"epsilon (delta = {report.delta:g}, {report.conversion})")
    mechanism = report.mechanism
    left.set_title(f"{mechanism['name']} {_setting(mechanism)}".strip())
    left.grid(alpha=0.3)
    left.legend(loc="upper left")

    groups = buckets(per_query)
    position = np.arange(len(groups))
    width = 0.4
    num = max(per_query.num_queries, 1)
    query_share = [100 * b.queries / num for b in groups]
    cost_share = [100 * b.share for b in groups]
    right.bar(position - width / 2, query_share, width, label="queries", color="tab:gray")
    right.bar(position + width / 2, cost_share, width, label="privacy cost", color="tab:red")
    right.set_xticks(position, [b.label for b in groups])
    right.set_xlabel("top vote share n_max / M")
    right.set_ylabel("% of total")
    right.set_title(f"cost by teacher agreement (RDP at order {per_query.order:g})")
    right.legend(loc="upper left")
    return figure


def _finite(value: Any) -> float | None:
    number = float(value)
    return number if math.isfinite(number) else None


def pareto_front(rows: Sequence[Mapping[str, Any]]) -> list[int]:
    """Indices of the rows no other row beats on both axes, by increasing expected answered.

    A row is on the front when every row that answers at least as many queries costs a
    larger data-dependent epsilon (rows with an infinite epsilon never are).
    """
    points = [
        (float(row["expected_answered"]), _finite(row["data_dependent"]["epsilon"]), i)
        for i, row in enumerate(rows)
    ]
    finite = sorted(((-x, y, i) for x, y, i in points if y is not None))
    front: list[int] = []
    cheapest = math.inf
    for _, y, i in finite:  # most answered first, then the cheapest among equals
        if y < cheapest:
            front.append(i)
            cheapest = y
    return front[::-1]


# Offsets (points) tried in turn for a point's label, nearest first.
_OFFSETS = tuple(
    (dx, dy)
    for ring in (1, 2, 3, 4, 6)
    for dx, dy in ((4, 3), (4, -11), (-10, 3), (-10, -11), (-3, 8), (-3, -16))
    for dx, dy in [(dx * ring, dy * ring)]
)


def _label_every_point(axes: Any, labels: Sequence[tuple[str, float, float]]) -> None:
    """Write each label beside its point, at the first offset of :data:`_OFFSETS` where its
    box overlaps no label placed before it (the last offset when none is free)."""
    renderer = axes.figure.canvas.get_renderer()
    placed: list[Any] = []
    for text, x, y in labels:
        for offset in _OFFSETS:
            note = axes.annotate(
                text, (x, y), textcoords="offset points", xytext=offset, fontsize=7
            )
            box = note.get_window_extent(renderer)
            if not any(box.overlaps(other) for other in placed) or offset == _OFFSETS[-1]:
                placed.append(box)
                break
            note.remove()


def _key(axes: Any, rows: Sequence[Mapping[str, Any]]) -> None:
    """The settings of the numbered points, in axes of their own beside the plot (the rows'
    order, as the table)."""
    lines = [f"{rank}  {_row_name(row)}" for rank, row in enumerate(rows, start=1)]
    if len(lines) > _MAX_KEY_LINES:
        lines = [*lines[: _MAX_KEY_LINES - 1], f"... {len(rows) - _MAX_KEY_LINES + 1} more"]
    axes.axis("off")
    axes.text(0.0, 1.0, "\n".join(lines), fontsize=7, va="top", family="monospace")


def _row_name(row: Mapping[str, Any]) -> str:
    """A row's mechanism and setting: "confident-gnmax T=200 s1=150 s=40"."""
    return f"{row['mechanism']['name']} {_setting(row['mechanism'])}".strip()


def plot_compare(report: CompareReport | Sequence[Mapping[str, Any]]) -> Figure:
    """Epsilon against expected answered queries, one point per setting.

    Filled markers are data-dependent epsilons, hollow ones data-independent, one
    colour per mechanism; infinite values are left out. A line joins the
    settings on the trade-off front (:func:`pareto_front`). Every filled point carries its
    row's number (as in the table, no two numbers overlapping), and a key beside the axes
    names each row's setting.
    ``compare --plot`` saves this figure.

    Args:
        report: A comparison (``pate.compare``), or the rows of its JSON (before encoding).

    Returns:
        A ``matplotlib.figure.Figure`` (no pyplot state).

    Raises:
        UsageError: matplotlib is missing.
    """
    rows = report if isinstance(report, Sequence) else report.to_dict()["rows"]
    figure = _figure(10.0, 5.0)
    axes, key = figure.subplots(1, 2, width_ratios=(3, 1))
    names = list(dict.fromkeys(str(row["mechanism"]["name"]) for row in rows))
    colours = {name: f"C{i % 10}" for i, name in enumerate(names)}
    for name in names:
        mine = [row for row in rows if row["mechanism"]["name"] == name]
        for block, filled in (("data_dependent", True), ("data_independent", False)):
            points = [
                (float(row["expected_answered"]), _finite(row[block]["epsilon"])) for row in mine
            ]
            xs = [x for x, y in points if y is not None]
            ys = [y for _, y in points if y is not None]
            axes.scatter(
                xs,
                ys,
                marker="o",
                s=36,
                facecolors=colours[name] if filled else "none",
                edgecolors=colours[name],
                label=f"{name}, {block.replace('_', '-')}",
            )
    front = pareto_front(rows)
    if front:
        xs = [float(rows[i]["expected_answered"]) for i in front]
        ys = [float(rows[i]["data_dependent"]["epsilon"]) for i in front]
        axes.plot(xs, ys, color="black", linewidth=0.8, alpha=0.5, label="best trade-off")
    axes.margins(x=0.12, y=0.1)  # room for the labels of the extreme settings
    axes.set_xlabel("expected answered queries")
    axes.set_ylabel("epsilon")
    axes.set_title(f"{len(rows)} settings: epsilon against expected answered")
    axes.grid(alpha=0.3)
    axes.legend(fontsize=8)
    _key(key, rows)
    # Lay the figure out once and keep it: the labels are placed in its final pixels.
    figure.canvas.draw()
    figure.set_layout_engine("none")
    # Every point with a finite data-dependent epsilon is numbered by its row, as in the table.
    numbered = [
        (str(rank), float(row["expected_answered"]), _finite(row["data_dependent"]["epsilon"]))
        for rank, row in enumerate(rows, start=1)
    ]
    _label_every_point(axes, [(text, x, y) for text, x, y in numbered if y is not None])
    return figure

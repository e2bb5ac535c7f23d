"""``pate inspect``: what a votes file holds, before any privacy analysis.

The data-dependent analysis of PATE is cheap where teachers agree and
expensive where they do not, so the first thing to know about a votes file is
how strongly its teachers agree. ``inspect`` reads the file exactly as the
other commands do (same format detection and selection flags) and reports:

- the format (detected or given), the stored dtype, Q queries, M teachers,
  C classes;
- the distribution of the top vote share n_max / M (quantiles, and the
  agreement buckets of the 2018 paper's Figure 5, as in the cost ledger of
  ``analyze --breakdown``);
- the distribution of the gap between the top two vote counts (quantiles,
  and ten equal bins over [0, M]);
- how many queries are unanimous (every vote in one class) or tied at the
  top, and how often each class is the plurality vote.

The statistics are a pure function of the counts (:func:`profile_votes`);
rendering and the command are thin layers over it.
"""

from __future__ import annotations

import zipfile
from dataclasses import dataclass
from typing import Any

import numpy as np
from numpy.typing import NDArray
from rich.console import Group, RenderableType
from rich.table import Table
from rich.text import Text

from pate_cli._options import (
    FormatOpt,
    IndicesOpt,
    JsonOpt,
    NumClassesOpt,
    QueriesOpt,
    TeachersOpt,
    VotesArg,
    emit,
    selection_options,
    summary,
)
from pate_cli.accounting import DEFAULT_CHUNK_SIZE
from pate_cli.ledger import BUCKET_EDGES, agreement_bucket, bucket_labels, top_two
from pate_cli.report import InputSummary
from pate_cli.votes import VoteFormat, Votes, load_array

FloatArray = NDArray[np.float64]

#: Quantile levels reported, with their JSON keys.
QUANTILES: tuple[tuple[str, float], ...] = (
    ("min", 0.0),
    ("p05", 0.05),
    ("p25", 0.25),
    ("p50", 0.5),
    ("p75", 0.75),
    ("p95", 0.95),
    ("max", 1.0),
)
GAP_BINS = 10


@dataclass(frozen=True)
class Histogram:
    """Counts of values in consecutive bins [low, high) (the last one closed)."""

    labels: tuple[str, ...]
    low: tuple[float, ...]
    high: tuple[float, ...]
    queries: tuple[int, ...]

    def to_json_dict(self, total: int) -> list[dict[str, Any]]:
        return [
            {
                "range": [lo, hi],
                "label": label,
                "queries": n,
                "fraction": n / total if total else 0.0,
            }
            for label, lo, hi, n in zip(self.labels, self.low, self.high, self.queries, strict=True)
        ]


@dataclass(frozen=True)
class Distribution:
    """Quantiles, mean and a histogram of one per-query statistic."""

    quantiles: dict[str, float]
    mean: float
    histogram: Histogram

    def to_json_dict(self, total: int) -> dict[str, Any]:
        return {
            "quantiles": dict(self.quantiles),
            "mean": self.mean,
            "histogram": self.histogram.to_json_dict(total),
        }


@dataclass(frozen=True)
class VoteProfile:
    """How strongly the teachers agree, query by query, summarised."""

    num_queries: int
    top_share: Distribution
    """Top vote share n_max / M."""
    gap: Distribution
    """Top vote count minus the runner-up's, in votes."""
    unanimous: int
    """Queries whose votes all went to one class."""
    tied: int
    """Queries whose top two classes have the same count (never with one class)."""
    plurality_counts: tuple[int, ...]
    """How many queries each class wins (ties go to the first class, as argmax)."""


def _distribution(values: FloatArray, histogram: Histogram) -> Distribution:
    levels = np.array([q for _, q in QUANTILES])
    points = np.quantile(values, levels)
    return Distribution(
        quantiles={key: float(v) for (key, _), v in zip(QUANTILES, points, strict=True)},
        mean=float(values.mean()),
        histogram=histogram,
    )


def _gap_histogram(gap: FloatArray, num_teachers: int) -> Histogram:
    """Ten equal bins over [0, M]; gaps above M (``--teachers``) go to the last."""
    edges = np.linspace(0.0, float(num_teachers), GAP_BINS + 1)
    which = np.clip(np.searchsorted(edges, gap, side="right") - 1, 0, GAP_BINS - 1)
    queries = np.bincount(which, minlength=GAP_BINS)
    labels = tuple(
        f"[{edges[i]:g}, {edges[i + 1]:g}{']' if i == GAP_BINS - 1 else ')'}"
        for i in range(GAP_BINS)
    )
    return Histogram(
        labels,
        tuple(float(e) for e in edges[:-1]),
        tuple(float(e) for e in edges[1:]),
        tuple(int(n) for n in queries),
    )


def profile_votes(counts: FloatArray, num_teachers: int) -> VoteProfile:
    """Agreement statistics of a (Q, C) vote histogram with M teachers.

    Shapes: counts (Q, C).
    """
    num_queries, num_classes = counts.shape
    top, gap, totals = np.empty(num_queries), np.empty(num_queries), np.empty(num_queries)
    winner = np.empty(num_queries, dtype=np.intp)
    for start in range(0, num_queries, DEFAULT_CHUNK_SIZE):  # bounded memory on large files
        block = np.asarray(counts[start : start + DEFAULT_CHUNK_SIZE], dtype=np.float64)
        rows = slice(start, start + len(block))
        top[rows], gap[rows] = top_two(block)
        totals[rows] = block.sum(axis=1)
        winner[rows] = block.argmax(axis=1)
    share = top / num_teachers
    which = agreement_bucket(share)
    size = len(BUCKET_EDGES)
    share_histogram = Histogram(
        tuple(bucket_labels()),
        BUCKET_EDGES,
        (*BUCKET_EDGES[1:], 1.0),
        tuple(int(n) for n in np.bincount(which, minlength=size)),
    )
    tied = 0 if num_classes == 1 else int(np.sum(gap == 0))
    plurality = np.bincount(winner, minlength=num_classes)
    return VoteProfile(
        num_queries=num_queries,
        top_share=_distribution(share, share_histogram),
        gap=_distribution(gap, _gap_histogram(gap, num_teachers)),
        unanimous=int(np.sum((top == totals) & (totals > 0))),
        tied=tied,
        plurality_counts=tuple(int(n) for n in plurality),
    )


@dataclass(frozen=True)
class InspectReport:
    """``pate inspect``: the input, its stored dtype and the teachers' agreement."""

    input: InputSummary
    dtype: str
    profile: VoteProfile
    warnings: tuple[str, ...] = ()

    def to_json_dict(self) -> dict[str, Any]:
        profile, total = self.profile, self.profile.num_queries
        return {
            "command": "inspect",
            "input": {**self.input.to_json_dict(), "dtype": self.dtype},
            "top_share": profile.top_share.to_json_dict(total),
            "top2_gap": profile.gap.to_json_dict(total),
            "unanimous": profile.unanimous,
            "tied": profile.tied,
            "plurality_counts": list(profile.plurality_counts),
            "warnings": list(self.warnings),
        }


def stored_dtype(votes: Votes) -> str:
    """The dtype of the array as stored in the votes file (already validated by ``load_votes``).

    A .npy is memory-mapped, so only its header is read; an .npz member is read whole.
    """
    if zipfile.is_zipfile(votes.path):
        return str(load_array(votes.path, "votes").dtype)
    return str(np.load(votes.path, mmap_mode="r", allow_pickle=False).dtype)


def _quantile_table(report: InspectReport) -> Table:
    table = Table(title="Teacher agreement per query", title_justify="left", header_style="bold")
    table.add_column("statistic")
    for key, _ in QUANTILES:
        table.add_column(key, justify="right")
    table.add_column("mean", justify="right")
    for name, dist, digits in (
        ("top vote share n_max/M", report.profile.top_share, 3),
        ("top-2 gap (votes)", report.profile.gap, 1),
    ):
        table.add_row(
            name,
            *(f"{dist.quantiles[key]:.{digits}f}" for key, _ in QUANTILES),
            f"{dist.mean:.{digits}f}",
        )
    return table


def _histogram_table(title: str, column: str, histogram: Histogram, total: int) -> Table:
    table = Table(title=title, title_justify="left", header_style="bold")
    table.add_column(column, justify="right")
    table.add_column("queries", justify="right")
    table.add_column("fraction", justify="right")
    table.add_column("", justify="left")
    widest = max(histogram.queries) or 1
    for label, n in zip(histogram.labels, histogram.queries, strict=True):
        table.add_row(
            Text(label),
            str(n),
            f"{100 * n / total:.1f}%" if total else "-",
            Text("#" * round(20 * n / widest), style="cyan"),
        )
    return table


def render_inspect(report: InspectReport) -> RenderableType:
    """The inspection as Rich renderables: input line, quantiles, two histograms, counts."""
    source, profile = report.input, report.profile
    how = "detected" if source.detected else "given"
    header = Text()
    header.append(source.path, style="bold")
    header.append(
        f"  format {source.format} ({how}), dtype {report.dtype}, {source.num_queries} queries"
        f" x {source.num_classes} classes, {source.num_teachers} teachers"
    )
    if source.num_queries != source.num_file_queries:
        header.append(f" (of {source.num_file_queries} in the file)")
    total = profile.num_queries
    plurality = ", ".join(f"{c}: {n}" for c, n in enumerate(profile.plurality_counts))
    return Group(
        header,
        _quantile_table(report),
        _histogram_table(
            "Top vote share (2018 paper, Figure 5 buckets)",
            "n_max/M",
            profile.top_share.histogram,
            total,
        ),
        _histogram_table("Gap between the top two counts", "gap", profile.gap.histogram, total),
        Text(
            f"unanimous: {profile.unanimous} of {total} queries; tied at the top: "
            f"{profile.tied}; plurality class counts: {plurality}"
        ),
    )


def inspect(
    votes_path: VotesArg,
    fmt: FormatOpt = VoteFormat.AUTO,
    num_classes: NumClassesOpt = None,
    teachers: TeachersOpt = None,
    queries: QueriesOpt = None,
    indices: IndicesOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """Describe a votes file: its format, size and how strongly the teachers agree.

    Reads the file as the other commands do (format detection, --queries,
    --indices) and reports the format, dtype, queries, teachers and classes,
    the distribution of the top vote share n_max/M and of the gap between
    the top two counts (quantiles and histograms), and how many queries are
    unanimous or tied at the top. Strong agreement is what makes the
    data-dependent analysis cheap.

    Example:

        pate inspect sample_data/mnist_250_teachers.npy
    """
    votes = selection_options(votes_path, fmt, num_classes, teachers, queries, indices)
    report = InspectReport(
        input=summary(votes),
        dtype=stored_dtype(votes),
        profile=profile_votes(votes.counts, votes.num_teachers),
        warnings=votes.warnings,
    )
    emit(report.to_json_dict(), render_inspect(report), report.warnings, as_json)

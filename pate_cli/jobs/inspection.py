"""What a votes file holds, before any privacy analysis: the model behind ``pate inspect``.

The data-dependent analysis of PATE is cheap where teachers agree and
expensive where they do not, so the first thing to know about a votes file is
how strongly its teachers agree. :func:`inspect_votes` takes votes read as
every command reads them (same format detection and selection) and reports:

- the format (detected or given), the stored dtype, Q queries, M teachers,
  C classes;
- the distribution of the top vote share n_max / M (quantiles, and the
  agreement buckets of the 2018 paper's Figure 5, as in the cost ledger of
  ``analyze --breakdown``);
- the distribution of the gap between the top two vote counts (quantiles,
  and ten equal bins over [0, M]);
- how many queries are unanimous (every vote in one class) or tied at the
  top, and how often each class is the plurality vote;
- the readings of the file that were weighed (``readings``): for labels whose layout their
  agreement decided, both layouts with how the labels agree by query and by teacher, and
  which one was taken.

A file that reads more than one plausible way is described, not refused
(:func:`inspect_reading`): its readings, each with what picks it, and why no command reads
it without one of those flags; the agreement statistics are then null.

The statistics are a pure function of the counts (:func:`profile_votes`).
The report is a frozen model whose ``to_dict()`` is what ``pate inspect
--json`` prints; the Rich rendering lives with the command. Nothing here
prints or imports a terminal library.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any

import numpy as np
from numpy.typing import NDArray

from pate_cli.accountant.terms import DEFAULT_CHUNK_SIZE
from pate_cli.choices import VoteFormat
from pate_cli.core.compact import Compact, read_rows, row_sums
from pate_cli.core.compact import plurality as plurality_of
from pate_cli.reports.breakdown import BUCKET_EDGES, agreement_bucket, bucket_labels, top_two
from pate_cli.reports.encoding import plain
from pate_cli.reports.models import InputSummary
from pate_cli.reports.reprs import short_repr
from pate_cli.votes import AmbiguousFormatError, Votes
from pate_cli.votes.detection import Reading, labels_reading

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
#: Equal-width bins of the top-two gap over [0, M].
GAP_BINS = 10


# ---------------------------------------------------------------------------
# The report model.


@dataclass(frozen=True)
class Histogram:
    """Counts of values in consecutive bins [low, high) (the last one closed)."""

    labels: tuple[str, ...]
    """How each bin is shown, e.g. "[0.5, 0.6)"."""
    low: tuple[float, ...]
    """Lower edge of each bin."""
    high: tuple[float, ...]
    """Upper edge of each bin."""
    queries: tuple[int, ...]
    """How many queries fall in each bin."""

    def to_dict(self, total: int) -> list[dict[str, Any]]:
        """One JSON object per bin; ``fraction`` is of ``total`` queries (0 when there are none)."""
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
    """Keyed as in :data:`QUANTILES` ("min", "p05", ..., "max")."""
    mean: float
    histogram: Histogram

    def to_dict(self, total: int) -> dict[str, Any]:
        """The JSON block of one statistic (``total``: the number of queries)."""
        return {
            "quantiles": dict(self.quantiles),
            "mean": self.mean,
            "histogram": self.histogram.to_dict(total),
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
    vocabulary: VocabularyProfile | None = None
    """Votes held by query over a vocabulary (sparse, labels of token ids, many classes)."""


@dataclass(frozen=True)
class VocabularyProfile:
    """The shape of votes over a vocabulary: how many classes a query votes on, how many
    distinct vote rows there are (each is analysed once), and the candidate sets."""

    classes: int
    """The vocabulary: the most classes a query has."""
    nonzeros: tuple[int, float, int]
    """Classes with votes per query: (min, mean, max)."""
    distinct_rows: int
    """Distinct vote rows (classes and counts)."""
    candidates: tuple[int, int] | None
    """(min, max) classes per query when they differ (candidate sets), else None."""

    def to_dict(self) -> dict[str, Any]:
        low, mean, high = self.nonzeros
        out: dict[str, Any] = {
            "classes": self.classes,
            "nonzeros_per_query": {"min": low, "mean": mean, "max": high},
            "distinct_rows": self.distinct_rows,
        }
        if self.candidates is not None:
            out["candidates"] = {"min": self.candidates[0], "max": self.candidates[1]}
        return out


@dataclass(frozen=True)
class Unread:
    """A votes file of several plausible readings, none taken: what describes it."""

    path: str
    sha256: str
    shape: tuple[int, ...]
    dtype: str

    def to_json_dict(self) -> dict[str, Any]:
        """The ``input`` block of a read file, with what only a reading gives as null."""
        unknown = ("layout", "num_queries", "num_teachers", "num_classes")
        return {
            "path": self.path,
            "sha256": self.sha256,
            "format": None,
            "format_detected": True,
            **dict.fromkeys(unknown),
            "num_classes_from": None,
            "num_file_queries": None,
            "shape": list(self.shape),
        }


@dataclass(frozen=True)
class InspectReport:
    """``pate inspect``: the input, its stored dtype and the teachers' agreement; or, for a
    file that reads more than one plausible way, its readings."""

    input: InputSummary | Unread
    """What was read and how it was interpreted (:class:`Unread`: no reading taken)."""
    dtype: str
    """The dtype of the array as stored in the file (before conversion to counts)."""
    profile: VoteProfile | None
    """The agreement statistics (None: no reading taken)."""
    warnings: tuple[str, ...] = ()
    """One-line notes from reading the votes."""
    readings: tuple[Reading, ...] = ()
    """The readings weighed: the one taken, and for labels whose agreement decided their
    layout, the other layout too; every plausible one of an unread file."""
    taken: int | None = None
    """The index in ``readings`` of the one every command takes (None: none)."""
    refusal: str | None = None
    """Why no command reads the file as it is (None: it is read)."""

    def _repr_markdown_(self) -> str:
        """The report in a notebook (Jupyter renders Markdown)."""
        from pate_cli.reports import markdown

        return markdown.inspect(self.to_dict())

    def to_dict(self) -> dict[str, Any]:
        """Exactly what ``pate inspect --json`` prints."""
        profile = self.profile
        readings = [
            {**reading.to_dict(), "taken": i == self.taken}
            for i, reading in enumerate(self.readings)
        ]
        head = {
            "command": "inspect",
            "input": {**self.input.to_json_dict(), "dtype": self.dtype},
            "readings": readings,
            "reading": self.taken,
            "refusal": self.refusal,
        }
        if profile is None:
            nothing = ("top_share", "top2_gap", "unanimous", "tied", "plurality_counts")
            return plain({**head, **dict.fromkeys(nothing), "warnings": list(self.warnings)})
        total = profile.num_queries
        return plain(
            {
                **head,
                "top_share": profile.top_share.to_dict(total),
                "top2_gap": profile.gap.to_dict(total),
                "unanimous": profile.unanimous,
                "tied": profile.tied,
                "plurality_counts": list(profile.plurality_counts),
                **(
                    {}
                    if profile.vocabulary is None
                    else {"vocabulary": profile.vocabulary.to_dict()}
                ),
                "warnings": list(self.warnings),
            }
        )

    def __repr__(self) -> str:
        summary, profile = self.input, self.profile
        if isinstance(summary, Unread) or profile is None:
            return short_repr("InspectReport", readings=len(self.readings), taken=None)
        return short_repr(
            "InspectReport",
            format=summary.format,
            queries=summary.num_queries,
            teachers=summary.num_teachers,
            classes=summary.num_classes,
            median_top_share=profile.top_share.quantiles.get("p50"),
            unanimous=profile.unanimous,
            tied=profile.tied,
        )

    # The name the other reports of ``pate_cli.reports.models`` use.
    to_json_dict = to_dict


# ---------------------------------------------------------------------------
# The computation.


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


def profile_votes(counts: FloatArray | Compact, num_teachers: int) -> VoteProfile:
    """Agreement statistics of a (Q, C) vote histogram with M teachers.

    Args:
        counts: the vote histograms (a memory map is read block by block).
        num_teachers: M, the denominator of the top vote share and the range of the gap bins.

    Returns:
        Quantiles, means and histograms of the top share and the top-two gap, and the
        unanimous, tied and plurality counts.

    Shapes: counts (Q, C).
    """
    num_queries, num_classes = counts.shape
    top, gap, totals = np.empty(num_queries), np.empty(num_queries), np.empty(num_queries)
    winner = np.empty(num_queries, dtype=np.intp)
    for start in range(0, num_queries, DEFAULT_CHUNK_SIZE):  # bounded memory on large files
        block = read_rows(counts, start, start + DEFAULT_CHUNK_SIZE)
        rows = slice(start, start + len(block))
        top[rows], gap[rows] = top_two(block)
        totals[rows] = row_sums(block) if isinstance(block, Compact) else block.sum(axis=1)
        winner[rows] = plurality_of(block)
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
        vocabulary=vocabulary_profile(counts) if isinstance(counts, Compact) else None,
    )


def _vocabulary_dict(vocabulary: VocabularyProfile | None) -> dict[str, Any]:
    return {} if vocabulary is None else {"vocabulary": vocabulary.to_dict()}


def vocabulary_profile(counts: Compact) -> VocabularyProfile:
    """Classes with votes per query, distinct rows and candidate sets of compact votes."""
    voted = (counts.classes >= 0) & (counts.values > 0)
    nonzeros = np.count_nonzero(voted, axis=1)
    rows = np.concatenate(
        [np.where(voted, counts.classes, -1), np.where(voted, counts.values, 0)], axis=1
    )
    distinct = int(np.unique(rows, axis=0).shape[0]) if len(counts) else 0
    classes = counts.num_classes
    differ = classes.size and int(classes.min()) != int(classes.max())
    return VocabularyProfile(
        classes=counts.vocabulary,
        nonzeros=(
            (int(nonzeros.min()), float(nonzeros.mean()), int(nonzeros.max()))
            if nonzeros.size
            else (0, 0.0, 0)
        ),
        distinct_rows=distinct,
        candidates=(int(classes.min()), int(classes.max())) if differ else None,
    )


def stored_dtype(votes: Votes) -> str:
    """The dtype of the array as stored in the votes file, as ``load_votes`` read it from
    the header (of an array in memory: its dtype; of a sparse matrix: its data's)."""
    return votes.stored_dtype


def readings_of(votes: Votes) -> tuple[tuple[Reading, ...], int]:
    """The readings of the votes' file that were weighed, and the index of the one taken:
    both layouts of labels whose agreement decided it, else the reading taken alone."""
    shape, evidence = votes.file_shape, votes.layout_evidence
    if evidence is not None and len(shape) == 2:
        rows, columns = shape
        layouts = tuple(
            labels_reading((rows, columns), votes.num_classes, transposed, evidence)
            for transposed in (False, True)
        )
        return layouts, int(votes.transposed)
    if votes.format is VoteFormat.LABELS and len(shape) == 2:
        return (labels_reading((shape[0], shape[1]), votes.num_classes, votes.transposed),), 0
    teachers, queries, classes = votes.num_teachers, votes.num_file_queries, votes.num_classes
    what = f"{votes.format.value} of {queries} queries x {classes} classes from {teachers} teachers"
    reading = Reading(
        votes.format,
        False,
        num_queries=queries,
        num_classes=classes,
        num_teachers=teachers,
        what=f"{what} ({votes.layout}",
        flags=(("format", votes.format.value),),
    )
    return (reading,), 0


def unread_report(error: AmbiguousFormatError) -> InspectReport:
    """The report of a file that reads more than one plausible way: its readings."""
    digest = "" if error.digest is None else error.digest.result()
    return InspectReport(
        input=Unread(error.where, digest, error.shape, error.dtype),
        dtype=error.dtype,
        profile=None,
        readings=error.readings,
        refusal=error.message,
    )


def inspect_reading(load: Callable[[], Votes]) -> InspectReport:
    """``pate inspect`` of the votes ``load`` reads: :func:`inspect_votes`, or for a file
    that reads more than one plausible way, :func:`unread_report` (described, not refused).

    Raises:
        InputError: any other problem with the votes.
    """
    try:
        votes = load()
    except AmbiguousFormatError as error:
        return unread_report(error)
    return inspect_votes(votes)


def inspect_votes(votes: Votes) -> InspectReport:
    """What ``pate inspect`` computes: the format, size and teacher agreement of the votes.

    Args:
        votes: votes as read by ``load_votes`` (the stored dtype is read again from their
            file's header).

    Returns:
        The report; ``to_dict()`` is ``pate inspect --json``.

    Raises:
        InputError: the votes file can no longer be read.
    """
    profile = profile_votes(votes.counts, votes.num_teachers)
    ids = votes.candidate_ids
    if ids is not None and profile.vocabulary is not None:
        # Over candidate token ids a class is a position among the query's candidates: the
        # vocabulary is the votes file's, and the candidate sets are always shown.
        sizes = ids.sizes
        vocabulary = replace(
            profile.vocabulary,
            classes=votes.num_classes,
            candidates=(int(sizes.min()), int(sizes.max())),
        )
        profile = replace(profile, vocabulary=vocabulary)
    readings, taken = readings_of(votes)
    return InspectReport(
        input=InputSummary.from_votes(votes),
        dtype=stored_dtype(votes),
        profile=profile,
        warnings=votes.warnings,
        readings=readings,
        taken=taken,
    )

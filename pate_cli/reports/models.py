"""The result model of every command.

Reports are frozen dataclasses; ``to_json_dict`` gives plain Python values whose keys are
those of the CLI contract (``docs/cli.md``), and ``dumps`` (``encoding``'s, the one JSON
encoder, also importable from here) writes them: infinities become the strings "inf"/"-inf",
and a NaN is a bug (it raises), so no output can ever carry one.

Dependencies run one way: the models use ``budget`` (what may be published) and the
ledger's data (``breakdown``); ``_repr_markdown_`` hands the report's JSON dictionary to
``markdown``, which imports no model. ``ledger`` (which splits an analysis) and the
renderers import the models, never the reverse.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np
from numpy.typing import NDArray

from pate_cli.accountant.compose import RdpAccount
from pate_cli.accountant.figures import EpsilonResult, ExactBound
from pate_cli.accountant.pld import PldFigure
from pate_cli.accountant.terms import QueryTerms
from pate_cli.choices import GateOn
from pate_cli.files.outputs import SPENT_AGAIN
from pate_cli.release.gnss import gated_epsilon
from pate_cli.reports.encoding import dumps as dumps
from pate_cli.reports.encoding import plain
from pate_cli.reports.publishable import Figure, Gate, figures, gate_figure
from pate_cli.reports.reprs import cost_fields, epsilon_at, short_repr

if TYPE_CHECKING:
    from pate_cli.files.seeds import Noise
    from pate_cli.release.gnss import GnssRelease, Release
    from pate_cli.reports.breakdown import Ledger
    from pate_cli.votes import Votes


def report_dict(
    command: str,
    report: AnalysisReport | SmoothSensitivityReport | AggregateReport,
    public: bool,
) -> dict[str, Any]:
    """A report's ``to_dict``: what ``--json`` prints (``--public --json`` when ``public``),
    JSON-native values only, so ``json.dumps`` of it is the CLI's output byte for byte."""
    out = (
        public_json(command, report, report.publishable, report.gate)
        if public
        else report.to_json_dict()
    )
    if report.budget is not None:  # what the run spent of a budget depends on no vote
        out["budget"] = report.budget
    if report.engine is not None:  # where the passes ran: the same figures anywhere
        out["engine"] = report.engine
    return plain(out)


def public_json(
    command: str,
    report: AnalysisReport | SmoothSensitivityReport | AggregateReport,
    found: tuple[Figure, ...],
    gate: Gate | None,
) -> dict[str, Any]:
    """``--public --json``: what may be published and nothing else derived from the votes.

    The input keeps its format and sizes; its path and sha256 are left out (a hash of the
    votes lets whoever holds all but one teacher's votes test every guess of the rest)."""
    summary = report.input.to_json_dict()
    for key in ("path", "sha256"):
        summary.pop(key)
    out: dict[str, Any] = {
        "command": command,
        "input": summary,
        "mechanism": report.mechanism,
        "delta": report.delta,
        "conversion": report.conversion,
        "num_queries": report.input.num_queries,
        "publishable": [figure.to_json_dict() for figure in found],
    }
    if gate is not None:
        out["gate"] = gate.to_json_dict()
    spent = [warning for warning in report.warnings if SPENT_AGAIN in warning]
    if spent:  # about the run, not the votes: a second release of them is public knowledge
        out["warnings"] = spent
    return out


@dataclass(frozen=True)
class InputSummary:
    """What was read and how it was interpreted.

    Votes given as an array (``source`` "memory") add to the JSON ``"source": "memory"``,
    the array's ``shape`` and ``dtype``; ``path`` is then ``"<array>"`` and ``sha256`` the
    digest of the array's dtype, shape and bytes. A folder of shards adds ``"source":
    "folder"`` and ``"shards"``, their number; ``sha256`` is then the folder's digest
    (``pate_cli.votes.folder``). The block of a file is unchanged (no
    ``source`` key): the command line's JSON stays as it was.
    """

    path: str
    sha256: str
    format: str
    detected: bool
    num_queries: int
    num_teachers: int
    num_classes: int
    num_file_queries: int
    layout: str = ""
    file_shape: tuple[int, ...] = ()
    source: str = "file"
    dtype: str = ""
    classes_from: str = "shape"
    """Where ``num_classes`` came from: "given" (``--num-classes``), "largest label" (one
    more than the largest label of the file) or "shape" (the array's classes)."""
    shards: int = 0
    """The shards of a folder read as the votes (JSON ``"source": "folder"`` and
    ``"shards"``); 0 for a file."""

    @classmethod
    def from_votes(cls, votes: Votes) -> InputSummary:
        """What was read and how: the ``input`` block of every report."""
        return cls(
            path=votes.path,
            sha256=votes.sha256,
            format=votes.format.value,
            detected=votes.detected,
            num_queries=votes.num_queries,
            num_teachers=votes.num_teachers,
            num_classes=votes.num_classes,
            num_file_queries=votes.num_file_queries,
            layout=votes.layout,
            file_shape=votes.file_shape,
            source=votes.source,
            dtype=votes.stored_dtype,
            classes_from=votes.classes_from,
            shards=votes.shards,
        )

    def to_json_dict(self) -> dict[str, Any]:
        memory: dict[str, Any] = (
            {"source": "memory", "shape": list(self.file_shape), "dtype": self.dtype}
            if self.source == "memory"
            else {}
        )
        if self.shards:
            memory = {"source": "folder", "shards": self.shards}
        return {
            "path": self.path,
            "sha256": self.sha256,
            **memory,
            "format": self.format,
            "format_detected": self.detected,
            "layout": self.layout,
            "num_queries": self.num_queries,
            "num_teachers": self.num_teachers,
            "num_classes": self.num_classes,
            "num_classes_from": self.classes_from,
            "num_file_queries": self.num_file_queries,
        }


def epsilon_json(result: EpsilonResult) -> dict[str, Any]:
    """The {"epsilon", "order", "rdp"} block of the contract, plus the per-order epsilon."""
    return {
        "epsilon": result.epsilon,
        "order": result.order,
        "order_index": result.order_index,
        "at_grid_edge": result.at_grid_edge,
        "rdp": result.rdp,
        "eps": result.eps,
    }


@dataclass(frozen=True)
class AnalysisReport:
    """``pate analyze``: data-dependent and data-independent costs of one setting."""

    input: InputSummary
    mechanism: dict[str, Any]
    delta: float
    conversion: str
    orders: np.ndarray
    realized: bool
    forced_data_independent: bool
    expected_answered: float
    num_queries_seen: int
    data_dependent: EpsilonResult
    """The data-dependent epsilon. For Confident/Interactive-GNMax in expectation it is the
    2018 paper's expected cost (each answer weighted by Pr[answered]), an average over the
    threshold noise and not a bound on the run; ``guaranteed`` is one."""
    data_independent: EpsilonResult
    worst_case: EpsilonResult
    """Data-independent with every query answered: the bound to publish without GNSS."""
    exact: ExactBound | None = None
    """The exact data-independent epsilon of the run (a realised run: its mask's count)."""
    exact_worst_case: ExactBound | None = None
    """The same with every query of the votes answered: publishable as it is."""
    exact_absent: str | None = None
    """Why there is no exact figure (the steps' parts have no exact joint account); None
    where there is one, or where none was asked for."""
    guaranteed: EpsilonResult | None = None
    """Without averaging over the threshold noise (the joint outcome and label, by the
    chain rule); ``data_dependent`` for mechanisms without a threshold step."""
    release: Release | None = None
    """The GNSS release of the data-dependent epsilon, or why there is none (None: not asked)."""
    data_dependent_pld: PldFigure | None = None
    """The data-dependent epsilon from privacy-loss distributions, both directions (``pld``);
    private like ``data_dependent``. None: not asked."""
    warnings: tuple[str, ...] = field(default_factory=tuple)
    account: RdpAccount | None = field(default=None, repr=False, compare=False)
    """The totals behind the numbers, step by step (not part of the JSON)."""
    terms: QueryTerms | None = field(default=None, repr=False, compare=False)
    """The per-query terms they were composed from, for the release and the ledger."""
    answered_mask: NDArray[np.bool_] | None = field(default=None, repr=False, compare=False)
    """A realised run's answered mask (the queries it saw), as it was accounted."""
    ledger: Ledger | None = field(default=None, repr=False, compare=False)
    """The per-query ledger (``pate_cli.reports.breakdown.Ledger``), built lazily: its rows
    are computed when read (a plot, a ledger file), from the votes the analysis read."""
    breakdown: bool = field(default=False, repr=False)
    """Whether the JSON (and the Markdown) hold the ledger's summary (``breakdown=True``)."""
    files: tuple[tuple[str, str], ...] = ()
    """(key, path) of the files the command wrote from this report (ledger, plot)."""
    gate: Gate | None = None
    """The budget gate's verdict, when a limit was given."""
    budget: dict[str, Any] | None = None
    """The budget the run charged (``--budget``): its path, the total spent with this run,
    the limit and the number of charges; None without one."""
    engine: dict[str, Any] | None = None
    """Where the passes over the queries ran (``engine="dask"``: its name and workers);
    None: in this process."""

    @property
    def num_queries(self) -> int:
        """Q, the queries of the selection (a realised run may have seen fewer)."""
        return self.input.num_queries

    @property
    def publishable(self) -> tuple[Figure, ...]:
        """The figures that may be published as they are, best first (docs/cli.md)."""
        return figures(
            self.mechanism, self.worst_case.epsilon, self.delta, self.release, self.exact_worst_case
        )

    def epsilons(self) -> dict[GateOn, float | None]:
        """What the report offers to the gate (``--gate-on``); None where it has no such figure."""
        return {
            GateOn.PUBLISHABLE: gate_figure(self.publishable),
            GateOn.DATA_DEPENDENT: self.data_dependent.epsilon,
            GateOn.DATA_INDEPENDENT: self.data_independent.epsilon,
            GateOn.WORST_CASE: self.worst_case.epsilon,
            GateOn.EXACT_DATA_INDEPENDENT: None if self.exact is None else self.exact.epsilon,
            GateOn.GUARANTEED: None if self.guaranteed is None else self.guaranteed.epsilon,
            GateOn.RELEASED: None if self.release is None else gated_epsilon(self.release),
        }

    def _repr_markdown_(self) -> str:
        """The report in a notebook (Jupyter renders Markdown)."""
        from pate_cli.reports import markdown

        return markdown.analysis(self.to_json_dict())

    def to_dict(self, *, public: bool = False) -> dict[str, Any]:
        """Exactly what ``pate analyze --json`` prints (with ``--public`` when ``public``)."""
        return report_dict("analyze", self, public)

    def __repr__(self) -> str:
        return short_repr(
            "AnalysisReport",
            **cost_fields(
                self.mechanism["name"], self.num_queries, self.publishable, self.data_dependent
            ),
            expected_answered=self.expected_answered,
            accounting="realized" if self.realized else "expected",
            warnings=len(self.warnings),
        )

    def to_json_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "command": "analyze",
            "input": self.input.to_json_dict(),
            "mechanism": self.mechanism,
            "delta": self.delta,
            "conversion": self.conversion,
            "accounting": "realized" if self.realized else "expected",
            "data_independent_forced": self.forced_data_independent,
            "orders": self.orders,
            "num_queries_seen": self.num_queries_seen,
            "expected_answered": self.expected_answered,
            "data_dependent": epsilon_json(self.data_dependent),
            "data_independent": epsilon_json(self.data_independent),
            "data_independent_worst_case": epsilon_json(self.worst_case),
        }
        if self.exact is not None:
            out["data_independent_exact"] = self.exact.to_json_dict()
        elif self.exact_absent is not None:
            out["data_independent_exact"] = None
        if self.exact_absent is not None:  # (a realised run with none answered may have one)
            out["data_independent_exact_absent"] = self.exact_absent
        if self.guaranteed is not None:
            out["guaranteed"] = {
                key: value
                for key, value in epsilon_json(self.guaranteed).items()
                if key in ("epsilon", "order", "rdp")
            }
        if self.data_dependent_pld is not None:
            out["data_dependent_pld"] = self.data_dependent_pld.to_json_dict()
        if self.release is not None:
            out["release"] = self.release.to_json_dict()
        out["publishable"] = [figure.to_json_dict() for figure in self.publishable]
        if self.gate is not None:
            out["gate"] = self.gate.to_json_dict()
        out["warnings"] = list(self.warnings)
        if self.breakdown and self.ledger is not None:
            out["breakdown"] = self.ledger.summary()
        out.update(self.files)
        return out


@dataclass(frozen=True)
class AggregateReport:
    """``pate aggregate``: what the aggregator released, and what the run cost."""

    input: InputSummary
    mechanism: dict[str, Any]
    noise: Noise
    """Where the labels' noise came from (the seed only when it was public)."""
    num_queries: int
    num_seen: int
    answered: int
    student_labelled: int
    output: str | None
    """Where the labels were written (None: a library call, nothing written)."""
    answered_mask: str | None
    agreement_with_plurality: float | None
    accuracy: float | None
    privacy: AnalysisReport
    expected_privacy: AnalysisReport
    warnings: tuple[str, ...] = field(default_factory=tuple)
    gate: Gate | None = None
    budget: dict[str, Any] | None = None
    """The budget the run charged (``--budget``): its path, the total spent with this run,
    the limit and the number of charges; None without one."""
    noise_block: int | None = None
    """Queries a block of streams drew; None: one stream a purpose (records before version 7)."""
    engine: dict[str, Any] | None = None
    """Where the blocks ran (``engine="dask"``: its name and workers); None: this process."""

    @property
    def abstained(self) -> int:
        return self.num_seen - self.answered - self.student_labelled

    @property
    def delta(self) -> float:
        return self.privacy.delta

    @property
    def conversion(self) -> str:
        return self.privacy.conversion

    @property
    def publishable(self) -> tuple[Figure, ...]:
        """As the realised run's: the worst case over every query of the votes."""
        return self.privacy.publishable

    def _repr_markdown_(self) -> str:
        """The report in a notebook (Jupyter renders Markdown)."""
        from pate_cli.reports import markdown

        return markdown.aggregate(self.to_json_dict())

    def to_dict(self, *, public: bool = False) -> dict[str, Any]:
        """Exactly what ``pate aggregate --json`` prints (with ``--public`` when ``public``)."""
        return report_dict("aggregate", self, public)

    def __repr__(self) -> str:
        realised = self.privacy.data_dependent
        return short_repr(
            "AggregateReport",
            **cost_fields(self.mechanism["name"], self.num_queries, self.publishable, realised),
            answered=self.answered,
            output=self.output,
        )

    def to_json_dict(self) -> dict[str, Any]:
        def privacy(report: AnalysisReport) -> dict[str, Any]:
            block = report.to_json_dict()
            for key in ("command", "input", "mechanism", "warnings", "publishable", "gate"):
                block.pop(key, None)
            return block

        return {
            "command": "aggregate",
            "input": self.input.to_json_dict(),
            "mechanism": self.mechanism,
            "delta": self.delta,
            "conversion": self.conversion,
            "noise": self.noise.to_dict(),
            "noise_block": self.noise_block,
            "num_queries": self.num_queries,
            "num_seen": self.num_seen,
            "answered": self.answered,
            "student_labelled": self.student_labelled,
            "abstained": self.abstained,
            "output": self.output,
            "answered_mask": self.answered_mask,
            "agreement_with_plurality": self.agreement_with_plurality,
            "accuracy": self.accuracy,
            "privacy": privacy(self.privacy),
            "expected_privacy": privacy(self.expected_privacy),
            "publishable": [figure.to_json_dict() for figure in self.publishable],
            **({} if self.gate is None else {"gate": self.gate.to_json_dict()}),
            "warnings": list(self.warnings),
        }


@dataclass(frozen=True)
class SmoothSensitivityReport:
    """``pate smooth-sensitivity``: the GNSS release of the data-dependent epsilon."""

    input: InputSummary
    mechanism: dict[str, Any]
    delta: float
    conversion: str
    realized: bool
    release: GnssRelease
    warnings: tuple[str, ...] = field(default_factory=tuple)
    analysis: AnalysisReport | None = field(default=None, repr=False, compare=False)
    """The analysis the release was taken from (its data-independent figures)."""
    gate: Gate | None = None
    budget: dict[str, Any] | None = None
    """The budget the run charged (``--budget``): its path, the total spent with this run,
    the limit and the number of charges; None without one."""
    engine: dict[str, Any] | None = None
    """Where the passes over the queries ran (``engine="dask"``: its name and workers);
    None: in this process."""

    @property
    def publishable(self) -> tuple[Figure, ...]:
        """The figures that may be published as they are, best first (docs/cli.md)."""
        if self.analysis is None:
            raise ValueError("a smooth-sensitivity report without its analysis")
        analysis = self.analysis
        return figures(
            self.mechanism,
            analysis.worst_case.epsilon,
            self.delta,
            self.release,
            analysis.exact_worst_case,
        )

    def epsilons(self) -> dict[GateOn, float | None]:
        """What the report offers to the gate: its analysis's figures, but the data-dependent
        and the released epsilon of the release (at the release's order)."""
        if self.analysis is None:
            raise ValueError("a smooth-sensitivity report without its analysis")
        return {
            **self.analysis.epsilons(),
            GateOn.PUBLISHABLE: gate_figure(self.publishable),
            GateOn.DATA_DEPENDENT: self.release.epsilon_data_dependent,
            GateOn.RELEASED: gated_epsilon(self.release),
        }

    def _repr_markdown_(self) -> str:
        """The report in a notebook (Jupyter renders Markdown)."""
        from pate_cli.reports import markdown

        return markdown.smooth_sensitivity(self.to_json_dict())

    def to_dict(self, *, public: bool = False) -> dict[str, Any]:
        """Exactly what ``pate smooth-sensitivity --json`` prints (``--public``: ``public``)."""
        return report_dict("smooth-sensitivity", self, public)

    def __repr__(self) -> str:
        release = self.release
        return short_repr(
            "SmoothSensitivityReport",
            mechanism=self.mechanism["name"],
            queries=self.input.num_queries,
            data_dependent=epsilon_at(release.epsilon_data_dependent, release.order),
            released=release.epsilon_expected_release if release.released else release.reason,
            sampled=release.epsilon_released,
        )

    def to_json_dict(self) -> dict[str, Any]:
        return {
            "command": "smooth-sensitivity",
            "input": self.input.to_json_dict(),
            "mechanism": self.mechanism,
            "delta": self.delta,
            "conversion": self.conversion,
            "accounting": "realized" if self.realized else "expected",
            **self.release.to_json_dict(),
            "publishable": [figure.to_json_dict() for figure in self.publishable],
            **({} if self.gate is None else {"gate": self.gate.to_json_dict()}),
            "warnings": list(self.warnings),
        }

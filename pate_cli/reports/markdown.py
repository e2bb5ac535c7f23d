"""Markdown renderings of the reports, for notebooks: ``_repr_markdown_`` of each report
calls one of these. Plain strings, no terminal library; the publishable figures first and
every private one said to be so, as in the command line's tables.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from pate_cli.comparison import CompareReport
    from pate_cli.inspection import InspectReport
    from pate_cli.records.record import VerifyReport
    from pate_cli.reports.budget import Figure
    from pate_cli.reports.models import (
        AggregateReport,
        AnalysisReport,
        InputSummary,
        SmoothSensitivityReport,
    )


def number(value: float | None) -> str:
    """A figure for people: four decimals, ``inf``, or a dash when there is none."""
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "-"
    if math.isinf(value):
        return "inf" if value > 0 else "-inf"
    return f"{value:.4f}"


def _table(header: tuple[str, ...], rows: list[tuple[Any, ...]]) -> str:
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(str(cell) for cell in row) + " |" for row in rows]
    return "\n".join(lines)


def _input(summary: InputSummary) -> str:
    return (
        f"`{summary.path}`: {summary.format}, {summary.num_queries} queries "
        f"(of {summary.num_file_queries} in the file) x {summary.num_classes} classes, "
        f"{summary.num_teachers} teachers"
    )


def _mechanism(mechanism: dict[str, Any]) -> str:
    params = ", ".join(f"{k}={v:g}" for k, v in mechanism.items() if isinstance(v, float))
    return f"**{mechanism['name']}** {params}".strip()


def _publishable(figures: tuple[Figure, ...]) -> str:
    rows = [(f.basis, f"**{number(f.epsilon)}**", f"{f.delta:g}", f.note) for f in figures]
    return "Publishable:\n\n" + _table(("basis", "epsilon", "delta", "note"), rows)


def _warnings(warnings: tuple[str, ...]) -> str:
    return "\n".join(f"> warning: {w}" for w in warnings)


def _join(*parts: str) -> str:
    return "\n\n".join(part for part in parts if part)


def analysis(report: AnalysisReport) -> str:
    dependent, independent, worst = (
        report.data_dependent,
        report.data_independent,
        report.worst_case,
    )
    every_query = report.mechanism["name"] in ("gnmax", "lnmax")
    independent_name = "data-independent" + ("" if every_query else " (private)")
    rows = [
        ("data-dependent (private)", number(dependent.epsilon), f"{dependent.order:g}"),
        (independent_name, number(independent.epsilon), f"{independent.order:g}"),
        ("worst case (every query answered)", number(worst.epsilon), f"{worst.order:g}"),
    ]
    release = report.release
    if release is not None and getattr(release, "released", False):
        rows.append(
            (
                "GNSS-released, expected (private)",
                number(release.epsilon_expected_release),  # type: ignore[union-attr]
                f"{release.order:g}",  # type: ignore[union-attr]
            )
        )
    answered = "answered" if report.realized else "expected answered"
    return _join(
        f"### pate analyze: epsilon {number(report.publishable[0].epsilon)} publishable "
        f"at delta {report.delta:g}",
        _input(report.input),
        _mechanism(report.mechanism)
        + f"; {answered} {report.expected_answered:.1f} of {report.num_queries_seen}",
        _table(("epsilon", "value", "order"), rows),
        _publishable(report.publishable),
        _warnings(report.warnings),
    )


def smooth_sensitivity(report: SmoothSensitivityReport) -> str:
    release = report.release
    rows = [
        ("order", f"{release.order:g}"),
        ("data-dependent epsilon (private)", number(release.epsilon_data_dependent)),
    ]
    if release.released:
        rows += [
            ("beta", number(release.beta)),
            ("smooth sensitivity", number(release.smooth_sensitivity)),
            ("sigma_ss", number(release.sigma_ss)),
            ("GNSS cost (RDP)", number(release.gnss_cost)),
            ("expected released epsilon (private)", number(release.epsilon_expected_release)),
            ("noise std", number(release.noise_std)),
            ("sampled released epsilon", number(release.epsilon_released)),
        ]
    else:
        rows.append(("nothing to release", release.reason or ""))
    return _join(
        f"### pate smooth-sensitivity at delta {report.delta:g}",
        _input(report.input),
        _mechanism(report.mechanism),
        _table(("quantity", "value"), rows),
        _publishable(report.publishable),
        _warnings(report.warnings),
    )


def aggregate(report: AggregateReport) -> str:
    rows = [
        (name, f"{block.expected_answered:.1f}", number(block.data_dependent.epsilon))
        for name, block in (("realised run", report.privacy), ("expected", report.expected_privacy))
    ]
    return _join(
        f"### pate aggregate: {report.answered} answered of {report.num_seen} seen",
        _input(report.input),
        _mechanism(report.mechanism),
        _table(("accounting", "answered", "data-dependent epsilon (private)"), rows),
        _publishable(report.publishable),
        _warnings(report.warnings),
    )


def compare(report: CompareReport) -> str:
    rows = []
    for rank, row in enumerate(report.rows, start=1):
        spec = row.mechanism.to_json_dict()
        worst = None if row.worst_case is None else row.worst_case.epsilon
        rows.append(
            (
                rank,
                _mechanism(spec),
                f"{row.expected_answered:.1f}",
                number(row.data_dependent.epsilon),
                number(row.data_independent.epsilon),
                number(worst),
                f"{row.agreement:.4f}",
            )
        )
    header = ("#", "setting", "answered", "epsilon (private)", "indep.", "worst", "agree")
    return _join(
        f"### pate compare: {len(report.rows)} settings at delta {report.delta:g}",
        _input(report.input),
        _table(header, rows),
        _warnings(report.warnings),
    )


def inspect(report: InspectReport) -> str:
    profile = report.profile
    quantiles = profile.top_share.quantiles
    rows = [(key, f"{value:.3f}") for key, value in quantiles.items()]
    return _join(
        "### pate inspect",
        _input(report.input) + f", dtype {report.dtype}",
        f"unanimous: {profile.unanimous} of {profile.num_queries}; tied at the top: {profile.tied}",
        "Top vote share n_max/M:\n\n" + _table(("quantile", "share"), rows),
        _warnings(report.warnings),
    )


def verify(report: VerifyReport) -> str:
    rows = [(c.name, "ok" if c.ok else "**DIFFERS**", c.detail) for c in report.checks]
    verdict = "the record holds" if report.ok else "the record does not hold"
    return _join(
        f"### pate verify `{report.record_path}`: {verdict}",
        _table(("check", "result", "detail"), rows),
    )

"""Markdown renderings of the reports, for notebooks: ``_repr_markdown_`` of each report
calls one of these. Plain strings, no terminal library; the publishable figures first and
every private one said to be so, as in the command line's tables.

Each function renders a report's JSON dictionary (its ``to_json_dict()``, what ``--json``
prints), never the report object: this module imports no report model, so the models may
call it and nothing loops back.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

from pate_cli.mechanisms import answers_every_query
from pate_cli.reports import rounding

Report = Mapping[str, Any]
"""A report's JSON dictionary, or one block of it."""


def number(value: float | None) -> str:
    """A figure that bounds nothing (beta, sigma_ss, noise std): four decimals rounded to
    nearest, ``inf``, or a dash when there is none."""
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "-"
    if math.isinf(value):
        return "inf" if value > 0 else "-inf"
    return f"{value + 0.0:.4f}"  # + 0.0: never "-0.0000"


def cost(value: float | None) -> str:
    """A privacy figure (an epsilon, a sensitivity, the GNSS cost) as the command line's
    tables print it: rounded up at the digits shown (``rounding.bound``), ``inf``, or a
    dash when there is none."""
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "-"
    return rounding.bound(value)


def answered_count(value: float, realized: bool) -> str:
    """How many queries were answered: a realised run's count is a whole number ("284"), an
    expected one keeps its decimal ("282.7")."""
    return f"{value:.0f}" if realized else f"{value:.1f}"


def noise_words(noise: Report | None) -> str:
    """Where a sample's noise came from, in a few words, from a report's ``noise`` block
    (the seed shown only when public): the label the command line's tables print too."""
    if noise is None:
        return "no noise"
    if noise.get("seed") is not None:
        return f"public seed {noise['seed']}, not private"
    return {
        "os-entropy": "private noise from OS entropy",
        "seed-file": "private noise from the seed file",
    }.get(noise["source"], f"{noise['source']}, not private")


def _table(header: tuple[str, ...], rows: list[tuple[Any, ...]]) -> str:
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(str(cell) for cell in row) + " |" for row in rows]
    return "\n".join(lines)


# Where a class count came from, when the shape does not say it.
_CLASSES_FROM = {"given": " (`--num-classes`)", "largest label": " (largest label + 1)"}


def _input(summary: Report) -> str:
    return (
        f"`{summary['path']}`: {summary['format']}, {summary['num_queries']} queries "
        f"(of {summary['num_file_queries']} in the file) x {summary['num_classes']} classes"
        f"{_CLASSES_FROM.get(summary.get('num_classes_from', ''), '')}, "
        f"{summary['num_teachers']} teachers"
    )


def _mechanism(mechanism: Report) -> str:
    params = ", ".join(f"{k}={v:g}" for k, v in mechanism.items() if isinstance(v, float))
    return f"**{mechanism['name']}** {params}".strip()


def _publishable(figures: list[Report]) -> str:
    rows = [
        (f["basis"], f"**{cost(f['epsilon'])}**", f"{f['delta']:g}", f["note"]) for f in figures
    ]
    return "Publishable:\n\n" + _table(("basis", "epsilon", "delta", "note"), rows)


def _warnings(warnings: list[str]) -> str:
    return "\n".join(f"> warning: {w}" for w in warnings)


def _join(*parts: str) -> str:
    return "\n\n".join(part for part in parts if part)


def analysis(report: Report) -> str:
    """``pate analyze`` (``AnalysisReport.to_json_dict()``)."""
    dependent, independent, worst = (
        report["data_dependent"],
        report["data_independent"],
        report["data_independent_worst_case"],
    )
    every_query = answers_every_query(report["mechanism"])
    independent_name = "data-independent" + ("" if every_query else " (private)")
    rows = [
        ("data-dependent (private)", cost(dependent["epsilon"]), f"{dependent['order']:g}"),
        (independent_name, cost(independent["epsilon"]), f"{independent['order']:g}"),
        ("worst case (every query answered)", cost(worst["epsilon"]), f"{worst['order']:g}"),
    ]
    release = report.get("release")
    if release is not None and release["released"]:
        rows.append(
            (
                "GNSS-released, expected (private)",
                cost(release["epsilon_expected_release"]),
                f"{release['order']:g}",
            )
        )
        if release["epsilon_released"] is None:
            sampled = ("GNSS-released, sampled", 'not drawn (release="sample" draws it)')
        else:
            sampled = (
                f"GNSS-released, sampled ({noise_words(release['noise'])})",
                cost(release["epsilon_released"]),
            )
        rows.append((*sampled, f"{release['order']:g}"))
    realized = report["accounting"] == "realized"
    answered = "answered" if realized else "expected answered"
    publishable = report["publishable"]
    return _join(
        f"### pate analyze: epsilon {cost(publishable[0]['epsilon'])} publishable "
        f"at delta {report['delta']:g}",
        _input(report["input"]),
        _mechanism(report["mechanism"])
        + f"; {answered} {answered_count(report['expected_answered'], realized)} "
        f"of {report['num_queries_seen']}",
        _table(("epsilon", "value", "order"), rows),
        _publishable(publishable),
        _warnings(report["warnings"]),
    )


def smooth_sensitivity(report: Report) -> str:
    """``pate smooth-sensitivity`` (``SmoothSensitivityReport.to_json_dict()``: the release's
    fields at the top level)."""
    rows = [
        ("order", f"{report['order']:g}"),
        ("data-dependent epsilon (private)", cost(report["epsilon_data_dependent"])),
    ]
    if report["released"]:
        rows += [
            ("beta", number(report["beta"])),
            ("smooth sensitivity", cost(report["smooth_sensitivity"])),
            ("sigma_ss", number(report["sigma_ss"])),
            ("GNSS cost (RDP)", cost(report["gnss_cost"])),
            ("expected released epsilon (private)", cost(report["epsilon_expected_release"])),
            ("noise std", number(report["noise_std"])),
            (
                f"sampled released epsilon ({noise_words(report['noise'])})",
                cost(report["epsilon_released"]),
            ),
        ]
    else:
        rows.append(("nothing to release", report["reason"] or ""))
    return _join(
        f"### pate smooth-sensitivity at delta {report['delta']:g}",
        _input(report["input"]),
        _mechanism(report["mechanism"]),
        _table(("quantity", "value"), rows),
        _publishable(report["publishable"]),
        _warnings(report["warnings"]),
    )


def aggregate(report: Report) -> str:
    """``pate aggregate`` (``AggregateReport.to_json_dict()``)."""
    rows = [
        (
            name,
            answered_count(block["expected_answered"], block["accounting"] == "realized"),
            cost(block["data_dependent"]["epsilon"]),
        )
        for name, block in (
            ("realised run", report["privacy"]),
            ("expected", report["expected_privacy"]),
        )
    ]
    return _join(
        f"### pate aggregate: {report['answered']} answered of {report['num_seen']} seen",
        _input(report["input"]),
        _mechanism(report["mechanism"]),
        _table(("accounting", "answered", "data-dependent epsilon (private)"), rows),
        _publishable(report["publishable"]),
        _warnings(report["warnings"]),
    )


def compare(report: Report) -> str:
    """``pate compare`` (``CompareReport.to_json_dict()``)."""
    rows = []
    for rank, row in enumerate(report["rows"], start=1):
        publishable = [figure["epsilon"] for figure in row.get("publishable", [])]
        rows.append(
            (
                rank,
                _mechanism(row["mechanism"]),
                f"{row['expected_answered']:.1f}",
                cost(min(publishable) if publishable else None),
                cost(row["data_dependent"]["epsilon"]),
                cost(row["data_independent"]["epsilon"]),
                f"{row['agreement']:.4f}",
            )
        )
    header = ("#", "setting", "answered", "publishable", "epsilon (private)", "indep.", "agree")
    return _join(
        f"### pate compare: {len(report['rows'])} settings at delta {report['delta']:g}, "
        f"sorted by {report['sort']} (best first)",
        _input(report["input"]),
        _table(header, rows),
        _warnings(report["warnings"]),
    )


def inspect(report: Report) -> str:
    """``pate inspect`` (``InspectReport.to_dict()``)."""
    summary = report["input"]
    if report["top_share"] is None:  # several plausible readings, none taken
        readings = [
            (r["format"], r["layout"], r["num_teachers"], r["num_queries"], r["num_classes"])
            for r in report["readings"]
        ]
        return _join(
            f"### pate inspect: `{summary['path']}` is not read: {report['refusal']}",
            _table(("format", "layout", "teachers", "queries", "classes"), readings),
            _warnings(report["warnings"]),
        )
    quantiles = report["top_share"]["quantiles"]
    rows = [(key, f"{value:.3f}") for key, value in quantiles.items()]
    return _join(
        "### pate inspect",
        _input(summary) + f", dtype {summary['dtype']}",
        f"unanimous: {report['unanimous']} of {summary['num_queries']}; "
        f"tied at the top: {report['tied']}",
        "Top vote share n_max/M:\n\n" + _table(("quantile", "share"), rows),
        _warnings(report["warnings"]),
    )


def verify(report: Report) -> str:
    """``pate verify`` (``VerifyReport.to_dict()``)."""
    words = {"verified": "verified", "differs": "**DIFFERS**", "not-checked": "*not checked*"}
    rows = [(c["name"], words[c["status"]], c["detail"]) for c in report["checks"]]
    return _join(
        f"### pate verify `{report['record']}`: {report['verdict']}",
        _table(("check", "result", "detail"), rows),
        report["summary"],
    )

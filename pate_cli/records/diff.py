"""Comparing a recorded report with the recomputed one, number by number.

``pate verify`` (``pate_cli.records.verify``) replays a record's call and compares what it
recorded with what the replay computes: :func:`differences` walks both JSON reports and
names every place they disagree beyond the tolerance; files and free text are not compared.
A public record is compared with the public form of the recomputed report
(:func:`public_view`), and a replay without the run's noise leaves the randomly drawn
figures out of both (:func:`without_sampled_figures`).
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from typing import Any

from pate_cli.files.outputs import SPENT_AGAIN
from pate_cli.files.seeds import READABLE_SEED_FILE

# Report fields that name files (where they are now is not a figure of the run), the
# warnings, which ``verify`` compares on their own lines (``warning_lists``), and the budget
# the run charged, which ``verify`` finds in the budget file (``budget_check``).
UNCHECKED = {"path", "output", "answered_mask", "ledger", "plot", "csv", "warnings", "budget"}

# Objects whose keys name the parts of a mechanism, compared entry by entry in their order:
# a release's ``data_independent_steps`` (threshold step, answer step) is keyed by each
# step's name, where 0.1.0 called the answer step "gnmax" whatever it was (LNMax's too).
BY_POSITION = {"data_independent_steps"}

#: Warnings about the circumstances of a run rather than its votes and parameters: a replay
#: cannot recompute them, and they claim nothing about a figure.
CIRCUMSTANCES = (SPENT_AGAIN, READABLE_SEED_FILE)


def circumstantial(warning: str) -> bool:
    """Whether a warning is about the run's circumstances (``CIRCUMSTANCES``)."""
    return any(phrase in warning for phrase in CIRCUMSTANCES)


def warning_lists(report: Any, where: str = "") -> Iterator[tuple[str, list[Any]]]:
    """Every ``warnings`` list of a report, by its dotted path (``warnings``,
    ``privacy.warnings``...)."""
    if not isinstance(report, dict):
        return
    for key, value in report.items():
        path = f"{where}.{key}" if where else key
        if key == "warnings" and isinstance(value, list):
            yield path, value
        elif isinstance(value, dict):
            yield from warning_lists(value, path)


def as_number(value: Any) -> float | None:
    """Numbers and the encoder's "inf"/"-inf" strings as floats; anything else None."""
    if isinstance(value, bool):
        return None
    if isinstance(value, (int, float)):
        return float(value)
    if value in ("inf", "-inf"):
        return math.inf if value == "inf" else -math.inf
    return None


def differences(
    recorded: Any,
    recomputed: Any,
    *,
    rtol: float,
    atol: float,
    where: str = "",
    skip: frozenset[str] = frozenset(),
) -> Iterator[str]:
    """Dotted paths where the recomputed report differs from the recorded one; the paths in
    ``skip`` (and below them) are not compared."""
    if isinstance(recorded, dict) and isinstance(recomputed, dict):
        for key in sorted(set(recorded) | set(recomputed)):
            path = f"{where}.{key}" if where else key
            if key in UNCHECKED or path in skip:
                continue
            if key not in recorded:
                continue  # a field this record predates: the record's claims are what is checked
            if key not in recomputed:
                yield f"{path}: in the record but not in the recomputed report"
                continue
            if key in BY_POSITION:
                yield from _by_position(
                    recorded[key], recomputed[key], rtol=rtol, atol=atol, where=path, skip=skip
                )
                continue
            yield from differences(
                recorded[key], recomputed[key], rtol=rtol, atol=atol, where=path, skip=skip
            )
        return
    if isinstance(recorded, list) and isinstance(recomputed, list):
        if len(recorded) != len(recomputed):
            yield f"{where}: {len(recorded)} entries recorded, {len(recomputed)} recomputed"
            return
        for i, (a, b) in enumerate(zip(recorded, recomputed, strict=True)):
            yield from differences(a, b, rtol=rtol, atol=atol, where=f"{where}[{i}]", skip=skip)
        return
    a, b = as_number(recorded), as_number(recomputed)
    if a is not None and b is not None:
        same = a == b or (
            math.isfinite(a) and math.isfinite(b) and math.isclose(a, b, rel_tol=rtol, abs_tol=atol)
        )
        if not same:
            yield f"{where}: recorded {recorded!r}, recomputed {recomputed!r}"
        return
    if recorded != recomputed:
        yield f"{where}: recorded {recorded!r}, recomputed {recomputed!r}"


def _by_position(
    recorded: Any, recomputed: Any, *, rtol: float, atol: float, where: str, skip: frozenset[str]
) -> Iterator[str]:
    """``differences`` of two objects' entries in their order, whatever their keys, each
    named by the recomputed one's key (``BY_POSITION``)."""
    if not (isinstance(recorded, dict) and isinstance(recomputed, dict)):
        yield from differences(recorded, recomputed, rtol=rtol, atol=atol, where=where, skip=skip)
        return
    if len(recorded) != len(recomputed):
        yield f"{where}: {len(recorded)} entries recorded, {len(recomputed)} recomputed"
        return
    for value, (key, again) in zip(recorded.values(), recomputed.items(), strict=True):
        path = f"{where}.{key}"
        if path not in skip:
            yield from differences(value, again, rtol=rtol, atol=atol, where=path, skip=skip)


def lookup(report: dict[str, Any], dotted: str) -> Any:
    """The value at a dotted path of a report, or None where there is none."""
    value: Any = report
    for part in dotted.split("."):
        if not isinstance(value, dict) or part not in value:
            return None
        value = value[part]
    return value


# The numbers an auditor looks for first; each gets its own line in the table.
KEY_FIELDS = {
    "analyze": [
        "data_dependent.epsilon",
        "data_dependent.order",
        "data_independent.epsilon",
        "data_independent.order",
        "expected_answered",
        "release.epsilon_expected_release",
        "release.epsilon_released",
        "release.conditions",
    ],
    "smooth-sensitivity": [
        "order",
        "epsilon_data_dependent",
        "gnss_cost",
        "smooth_sensitivity",
        "epsilon_expected_release",
        "epsilon_released",
        "conditions",
    ],
    "aggregate": [
        "answered",
        "privacy.data_dependent.epsilon",
        "privacy.data_dependent.order",
        "privacy.data_independent.epsilon",
        "expected_privacy.data_dependent.epsilon",
    ],
}


def public_view(report: dict[str, Any]) -> dict[str, Any]:
    """What ``--public --json`` prints of a full report's JSON (``report.public_json``): a
    recomputed report in the form a public record holds."""
    privacy = report.get("privacy") or report.get("expected_privacy") or {}
    summary = {k: v for k, v in report["input"].items() if k not in ("path", "sha256")}
    out = {
        "command": report["command"],
        "input": summary,
        "mechanism": report["mechanism"],
        "delta": report.get("delta", privacy.get("delta")),
        "conversion": report.get("conversion", privacy.get("conversion")),
        "num_queries": summary["num_queries"],
        "publishable": report["publishable"],
    }
    if "gate" in report:
        out["gate"] = report["gate"]
    return out


#: The publishable figure that is one draw of the release's noise.
SAMPLED_BASIS = "gnss-release"


def sampled_figures(report: dict[str, Any]) -> list[dict[str, Any]]:
    """The publishable figures of a report that are one draw of the release's noise."""
    found = report.get("publishable")
    if not isinstance(found, list):
        return []
    return [f for f in found if isinstance(f, dict) and f.get("basis") == SAMPLED_BASIS]


def without_sampled_figures(report: Any) -> Any:
    """The report without the publishable figures drawn at random (their place in the
    best-first list depends on the draw too)."""
    if isinstance(report, dict):
        return {
            key: [f for f in value if not (isinstance(f, dict) and f.get("basis") == SAMPLED_BASIS)]
            if key == "publishable" and isinstance(value, list)
            else without_sampled_figures(value)
            for key, value in report.items()
        }
    return report

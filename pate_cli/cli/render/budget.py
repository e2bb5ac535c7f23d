"""``pate budget``: the charges of a budget, one row each, their total and its head; and the
line of a charged run."""

from __future__ import annotations

from typing import Any

from rich.console import Group, RenderableType
from rich.table import Table
from rich.text import Text

from pate_cli.cli.render.common import fmt_bound


def _account(account: dict[str, Any]) -> str:
    """A charge's account, its mu, epsilon0 or RDP rounded up (each a cost)."""
    if account["kind"] == "gaussian":
        return f"Gaussian mu={fmt_bound(account['mu'])}"
    if account["kind"] == "pure":
        return f"{account['count']} x {fmt_bound(account['epsilon0'])}-DP"
    if len(account["orders"]) > 3:  # a worst case at the default orders: its range
        listed = account["orders"]
        return f"RDP at {len(listed)} orders ({listed[0]:g} to {listed[-1]:g})"
    orders = ", ".join(f"{o:g}" for o in account["orders"])
    return f"RDP at order {orders}: {', '.join(fmt_bound(r) for r in account['rdp'])}"


def render_budget(payload: dict[str, Any]) -> RenderableType:
    """The charges of a budget, their total (spent rounded up, what is left rounded down),
    its head, and what a run would leave (``--would-charge``)."""
    name = f" ({payload['name']})" if payload.get("name") else ""
    table = Table(
        title=f"Budget {payload['path']}{name}", title_justify="left", header_style="bold"
    )
    for column in ("charge", "command", "created", "mechanism", "queries", "account", "record"):
        table.add_column(column, overflow="fold")
    unreleased = {note["charge"] for note in payload.get("notes", ())}
    for entry in payload["entries"]:
        mechanism = entry["mechanism"]
        parameters = ", ".join(f"{k}={v:g}" for k, v in mechanism.items() if k != "name")
        record = (entry.get("record_digest") or "-")[:12]
        digest = entry["digest"]
        table.add_row(
            str(entry["charge_index"]),
            Text(entry["command"]),
            Text(entry["created"]),
            Text(f"{mechanism['name']} {parameters}"),
            str(entry["num_queries"]),
            Text(_account(entry["account"])),
            Text(record + (" (no release)" if digest in unreleased else "")),
        )
    total, count = payload["total"], len(payload["entries"])
    parts: list[RenderableType] = []
    if payload.get("kept"):
        parts.append(Text(f"the old budget was kept as {payload['kept']}"))
    parts.append(table)
    parts.append(
        Text(
            f"spent epsilon {fmt_bound(total['epsilon'])} of {payload['limit']:g} at delta "
            f"{payload['delta']:g} ({total['method']}, {count} charge{'' if count == 1 else 's'}); "
            f"remaining {fmt_bound(payload['remaining'], up=False)}",
            style="bold",
        )
    )
    for group in total.get("groups", ()):
        charges = ", ".join(map(str, group["charges"]))
        parts.append(
            Text(
                f"  group of charges {charges}: epsilon {fmt_bound(group['epsilon'])} at delta "
                f"{fmt_bound(group['delta'], 6, significant=True)} ({group['method']})"
            )
        )
    preview = payload.get("would_charge")
    if preview is not None:
        verdict = "within the limit" if preview["within_limit"] else "over the limit: refused"
        parts.append(
            Text(
                f"the run ({preview['command']}, {_account(preview['account'])}) would leave "
                f"epsilon {fmt_bound(preview['would_spend'])} spent of {preview['limit']:g}, "
                f"{fmt_bound(preview['remaining'], up=False)} left "
                f"({preview['total']['method']}): {verdict}"
            )
        )
    if "charges" in payload:
        parts.extend(_charge_map(payload))
    parts.append(Text(f"head {payload['head']}"))
    return Group(*parts)


def _charge_map(payload: dict[str, Any]) -> list[RenderableType]:
    """Which record is which charge (``--records``): each charge's record, its own epsilon and
    the running total (both rounded up), then the records no charge names."""
    table = Table(title="Charges and their records", title_justify="left", header_style="bold")
    for column in ("charge", "record", "epsilon alone", "running total"):
        table.add_column(column, overflow="fold")
    for row in payload["charges"]:
        table.add_row(
            str(row["charge_index"]),
            Text(row["record"] or "-"),
            fmt_bound(row["epsilon"]),
            fmt_bound(row["running_epsilon"]),
        )
    parts: list[RenderableType] = [table]
    for item in payload["records_of_no_charge"]:
        why = (
            "names this budget, and no charge names it (removed?)"
            if item["kind"] == "this"
            else f"names budget {str(item['budget_id'])[:12]}, re-created at this place"
        )
        parts.append(Text(f"record of no charge: {item['record']}: {why}"))
    return parts


def charge_lines(block: dict[str, Any], release: Any, covers_release: bool) -> list[Text]:
    """What a charged run says of its charge (``charged_line``) and, when the charge covers
    the run's GNSS release (``covers_release``) and ``release`` (the report's) released
    nothing, why the run was charged all the same."""
    lines = [charged_line(block)]
    if covers_release and not getattr(release, "released", False):
        lines.append(
            Text(
                "nothing was released, yet the run is charged its GNSS release: whether there "
                "is anything to release depends on the votes, so the charge, fixed before they "
                "were read, is the same either way"
            )
        )
    return lines


def charged_line(block: dict[str, Any]) -> Text:
    """What a charged run says of its charge: spent rounded up, what is left rounded down."""
    return Text(
        f"charged {block['path']}: epsilon {fmt_bound(block['spent'])} of {block['limit']:g} "
        f"spent, {fmt_bound(block['remaining'], up=False)} left ({block['method']}); head "
        f"{block['head']}"
    )

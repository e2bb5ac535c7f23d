"""``pate budget``: the charges of a budget, one row each, and their total."""

from __future__ import annotations

from typing import Any

from rich.console import Group, RenderableType
from rich.table import Table
from rich.text import Text

from pate_cli.cli.render.common import fmt


def _account(account: dict[str, Any]) -> str:
    if account["kind"] == "gaussian":
        return f"Gaussian mu={fmt(account['mu'])}"
    if account["kind"] == "pure":
        return f"{account['count']} x {fmt(account['epsilon0'])}-DP"
    orders = ", ".join(f"{o:g}" for o in account["orders"])
    return f"RDP at order {orders}: {', '.join(fmt(r) for r in account['rdp'])}"


def render_budget(payload: dict[str, Any]) -> RenderableType:
    name = f" ({payload['name']})" if payload.get("name") else ""
    table = Table(
        title=f"Budget {payload['path']}{name}", title_justify="left", header_style="bold"
    )
    for column in ("#", "command", "created", "mechanism", "queries", "account", "record"):
        table.add_column(column, overflow="fold")
    for number, entry in enumerate(payload["entries"], start=1):
        mechanism = entry["mechanism"]
        parameters = ", ".join(f"{k}={v:g}" for k, v in mechanism.items() if k != "name")
        table.add_row(
            str(number),
            Text(entry["command"]),
            Text(entry["created"]),
            Text(f"{mechanism['name']} {parameters}"),
            str(entry["num_queries"]),
            Text(_account(entry["account"])),
            Text((entry.get("record_digest") or "-")[:12]),
        )
    total = payload["total"]
    line = Text(
        f"spent epsilon {fmt(total['epsilon'])} of {payload['limit']:g} at delta "
        f"{payload['delta']:g} ({total['method']}, {len(payload['entries'])} charges); "
        f"remaining {fmt(payload['remaining'])}",
        style="bold",
    )
    return Group(table, line)

"""``pate verify``: one line per check of a record, and the verdict."""

from __future__ import annotations

from typing import Any

from rich.console import Group, RenderableType
from rich.table import Table
from rich.text import Text

from pate_cli.records.verify import Check


def render_verify(record_path: str, record: dict[str, Any], checks: list[Check]) -> RenderableType:
    import shlex

    table = Table(title=f"Verification of {record_path}", title_justify="left", header_style="bold")
    table.add_column("check")
    table.add_column("result")
    table.add_column("detail", overflow="fold")
    for check in checks:
        table.add_row(  # as text: a record's strings are not Rich markup
            Text(check.name),
            Text("ok", style="green") if check.ok else Text("DIFFERS", style="bold red"),
            Text(check.detail),
        )
    failed = [c.name for c in checks if not c.ok]
    verdict = (
        Text("the record holds", style="bold green")
        if not failed
        else Text(f"the record does not hold: {', '.join(failed)}", style="bold red")
    )
    versions = record.get("versions", {})
    made = ", ".join(f"{k} {v}" for k, v in versions.items())
    kind = record.get("kind", "private")
    # The command line is shown only once it is known to be the recorded call.
    matched = any(c.name == "command line" and c.ok for c in checks)
    line = (
        f"command line: pate {shlex.join(record['argv'])}"
        if matched
        else "command line: not shown (it does not match the recorded call)"
    )
    return Group(
        Text(f"{kind} {record['command']} record made with {made}; {line}"),
        table,
        verdict,
    )

"""``pate verify``: one line per check of a record, and the verdict."""

from __future__ import annotations

from rich.console import Group, RenderableType
from rich.table import Table
from rich.text import Text

from pate_cli.records.verdict import DIFFERS, VERIFIED, VerifyReport

_STATUS = {
    VERIFIED: Text("verified", style="green"),
    DIFFERS: Text("DIFFERS", style="bold red"),
}
_NOT_CHECKED = Text("not checked", style="yellow")
_VERDICT_STYLE = {"verified": "bold green", "differs": "bold red", "incomplete": "bold yellow"}


def render_verify(report: VerifyReport) -> RenderableType:
    import shlex

    record_path, record, checks = report.record_path, report.record, report.checks
    table = Table(title=f"Verification of {record_path}", title_justify="left", header_style="bold")
    table.add_column("check")
    table.add_column("result")
    table.add_column("detail", overflow="fold")
    for check in checks:
        table.add_row(  # as text: a record's strings are not Rich markup
            Text(check.name),
            _STATUS.get(check.status, _NOT_CHECKED),
            Text(check.detail),
        )
    verdict = Text(report.summary, style=_VERDICT_STYLE[report.verdict])
    if record.get("command") == "budget":
        return Group(Text(f"budget {record_path}"), table, verdict)
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

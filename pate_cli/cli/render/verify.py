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
    versions = dict(record.get("versions", {}))
    plugins = versions.pop("plugins", None)  # a plugin's mechanism: its distribution's version
    made = ", ".join(f"{k} {v}" for k, v in versions.items())
    if isinstance(plugins, dict) and plugins:
        made += ", plugin " + ", ".join(f"{k} {v}" for k, v in plugins.items())
    kind = record.get("kind", "private")
    # The command line is shown only once it is known to be the recorded call.
    compared = [c for c in checks if c.name == "command line"]
    line = (
        f"command line: pate {shlex.join(record['argv'])}"
        if any(c.ok for c in compared)
        else "command line: not shown (it does not match the recorded call)"
        if compared
        else "command line: not shown (not checked)"
    )
    return Group(
        Text(f"{kind} {record['command']} record made with {made}; {line}"),
        table,
        verdict,
    )

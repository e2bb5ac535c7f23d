"""The docs' tables of the built-in mechanisms and their parameters, made from the
declarations (the tests hold docs/cli.md and the README to them, whatever plugins are
installed)."""

from __future__ import annotations

from pate_cli.mechanisms.parameters import Cost
from pate_cli.mechanisms.registry import BASELINE, builtins


def mechanisms_markdown() -> str:
    """One row a mechanism: its name, its flags with their placeholders, its source."""
    rows = ["| mechanism | flags | source |", "|---|---|---|"]
    for kind in builtins():
        flags = [f"{p.flag} {p.symbol}" for p in kind.parameters]
        flags += [f"{BASELINE} FILE"] if kind.needs_baseline else []
        rows.append(f"| `{kind.name}` | `{' '.join(flags)}` | {kind.source} |")
    return "\n".join(rows)


def parameters_markdown() -> str:
    """One row a parameter: its flag (and aliases), what it is, its unit and domain, whether
    compare takes a list of it and how plan uses it."""
    rows = [
        "| flag | what it is | unit | values | compare | plan |",
        "|---|---|---|---|---|---|",
    ]
    plans = {
        Cost.FALLS: "solves for it (cost falls as it grows)",
        Cost.RISES: "solves for it (cost rises with it)",
        Cost.FIXED: "never solves for it (no planned cost moves with it)",
    }
    declared = {p.name: p for kind in builtins() for p in kind.parameters}
    for p in declared.values():
        flag = " ".join(f"`{f}`" for f in (p.flag, *p.aliases))
        listed = "a comma list" if p.listable else "one value"
        rows.append(
            f"| {flag} | {p.help} | {p.unit} | {p.domain.expected} | {listed} | {plans[p.cost]} |"
        )
    return "\n".join(rows)

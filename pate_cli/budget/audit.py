"""``pate verify BUDGET``: the chain of a budget file, line by line, and its records.

Checks the header's digest, every line's digest and ``prev`` link (an edited, removed,
inserted or moved line breaks them; the first bad line is named), recomputes every
account from its line's parameters, composes the total against the limit, and with a
folder of records, finds each charge's record by its digest and each record's charge (a
record that says it charged this budget as its n-th charge when the budget has fewer lines
reveals lines removed from the end). Every check is verified, differs or not checked.
"""

from __future__ import annotations

import json
import math
import os
from typing import Any

from pate_cli.budget.book import (
    MAX_BYTES,
    Budget,
    entry_problem,
    header_problem,
    is_budget,
    line_digest,
    recomputed_account,
)
from pate_cli.errors import InputError
from pate_cli.records.record import load_record
from pate_cli.records.verdict import Check
from pate_cli.spelling import given, option


def _same_account(a: dict[str, Any], b: dict[str, Any]) -> bool:
    if a.keys() != b.keys():
        return False
    for key in a:
        x, y = a[key], b[key]
        if isinstance(x, list) and isinstance(y, list):
            if len(x) != len(y) or not all(
                math.isclose(float(u), float(v), rel_tol=1e-12) for u, v in zip(x, y, strict=True)
            ):
                return False
        elif isinstance(x, float | int) and isinstance(y, float | int):
            if not math.isclose(float(x), float(y), rel_tol=1e-12):
                return False
        elif x != y:
            return False
    return True


def _lines(path: str) -> list[Any]:
    """Every line of the file, parsed (a line that is not JSON stays its text); a file
    larger than any budget is refused before it is read."""
    if os.path.getsize(path) > MAX_BYTES:
        raise InputError(f"{path}: larger than {MAX_BYTES >> 20} MiB; not a budget file")
    with open(path, "rb") as stream:
        text = stream.read().decode("utf-8", errors="replace")
    lines: list[Any] = []
    for line in text.splitlines():
        if not line.strip():
            continue
        try:
            lines.append(json.loads(line))
        except (ValueError, RecursionError):
            lines.append(line)
    return lines


def _header_check(header: Any) -> Check:
    problem = header_problem(header)
    if problem is not None:
        moved = entry_problem(header) is None
        why = "a charge stands there: the header was removed or moved" if moved else problem
        return Check.made("header", False, f"line 1: {why}")
    if header.get("digest") != line_digest(header):
        return Check.made(
            "header", False, "line 1: its digest does not match its content: the header was edited"
        )
    return Check.made("header", True, "line 1: its digest matches")


def _chain_problem(header: Any, entries: list[Any]) -> str | None:
    """The first line that does not hold, in words (None when every line does)."""
    prev = header.get("digest") if isinstance(header, dict) else None
    for number, entry in enumerate(entries, start=2):
        problem = entry_problem(entry)
        if problem is not None:
            return f"line {number}: {problem}"
        if entry.get("digest") != line_digest(entry):
            return f"line {number}: its digest does not match its content (edited)"
        if entry.get("prev") != prev:
            return (
                f"line {number}: it does not follow line {number - 1} (a line was removed, "
                "inserted or moved before it)"
            )
        try:
            recomputed = recomputed_account(entry)
        except (KeyError, TypeError, ValueError) as error:
            return f"line {number}: its parameters do not give an account ({error})"
        if not _same_account(recomputed, entry["account"]):
            return f"line {number}: its account is not its parameters' ({recomputed})"
        prev = entry.get("digest")
    return None


def verify_budget(path: str, records: str | None = None) -> list[Check]:
    """Every check of a budget file (module docstring)."""
    if not os.path.isfile(path):
        raise InputError(f"{path}: no such budget file")
    lines = _lines(path)
    if not lines:
        raise InputError(f"{path}: empty; not a budget file")
    header, entries = lines[0], lines[1:]
    checks = [_header_check(header)]
    bad = _chain_problem(header, entries)
    checks.append(
        Check.made(
            "chain",
            bad is None,
            bad
            or f"{len(entries)} charges, each following the one before, each account "
            "recomputed from its parameters",
        )
    )
    if checks[0].ok and bad is None:
        budget = Budget(path, header, entries)
        total = budget.total()
        checks.append(
            Check.made(
                "total within the limit",
                total.epsilon <= budget.limit,
                f"epsilon {total.epsilon:.6g} ({total.method}) of {budget.limit:g} at delta "
                f"{budget.delta:g}",
            )
        )
    else:
        checks.append(
            Check.skipped("total within the limit", "not composed: the file does not hold")
        )
    identity = header.get("digest") if isinstance(header, dict) else None
    named = [e for e in entries if isinstance(e, dict) and e.get("record_digest")]
    if records is not None:
        checks.extend(_record_checks(path, identity, named, records))
    elif named:
        checks.append(
            Check.skipped(
                "records",
                f"the charges name records: give their folder with {option('records')} to "
                "match them "
                "(and to find lines removed from the end, which no chain shows)",
            )
        )
    return checks


def _names(block: dict[str, Any], path: str, identity: str | None) -> bool:
    """Whether a record's ``budget`` block names this budget: by its id (the header's
    digest), or for a record without one, by its path."""
    if block.get("id") is not None:
        return bool(block["id"] == identity)
    return os.path.abspath(str(block.get("path"))) == os.path.abspath(path)


def _record_checks(
    path: str, identity: str | None, entries: list[dict[str, Any]], folder: str
) -> list[Check]:
    if not os.path.isdir(folder):
        raise InputError(f"{given('records', folder)}: not a folder of records")
    found: dict[str, dict[str, Any]] = {}
    for name in sorted(os.listdir(folder)):
        if not name.endswith(".json"):
            continue
        try:  # checked as verify checks a record: a regular file of a bounded size
            record = load_record(os.path.join(folder, name))
        except InputError:
            continue  # not a record (an opening, another file)
        found[str(record.get("digest"))] = {**record, "_name": name}
    checks = []
    digests = {entry.get("record_digest") for entry in entries}
    missing = [
        number
        for number, entry in enumerate(entries, start=2)
        if entry.get("record_digest") and entry["record_digest"] not in found
    ]
    named = sum(1 for entry in entries if entry.get("record_digest"))
    checks.append(
        Check.made("records of the charges", True, f"{named} found in {folder}")
        if not missing
        else Check.skipped(
            "records of the charges",
            f"line {missing[0]}'s record is not in {folder} ({len(missing)} missing)",
        )
    )
    claims = [
        r
        for r in found.values()
        if isinstance(r.get("report"), dict)
        and isinstance(r["report"].get("budget"), dict)
        and _names(r["report"]["budget"], path, identity)
    ]
    orphans = [r["_name"] for r in claims if r.get("digest") not in digests]
    checks.append(
        Check.made(
            "charges of the records",
            not orphans,
            f"{len(claims)} records say they charged this budget, each has its line"
            if not orphans
            else f"{orphans[0]} says it charged this budget, which has no line for it "
            "(a line was removed)",
        )
    )
    return checks


def record_charge_checks(record: dict[str, Any], record_path: str) -> list[Check]:
    """A record of a run charged to a budget: the budget holds a charge naming this record."""
    block = record["report"].get("budget")
    if not isinstance(block, dict):
        return []
    path = str(block.get("path"))
    folder = os.path.dirname(os.path.abspath(record_path))
    found = next(
        (c for c in (path, os.path.join(folder, os.path.basename(path))) if os.path.isfile(c)),
        None,
    )
    if found is None or not is_budget(found):
        return [Check.skipped("budget charge", f"{path}: the budget file is not found")]
    lines = [line for line in _lines(found) if isinstance(line, dict)]
    mine = [
        n
        for n, line in enumerate(lines[1:], start=1)
        if line.get("record_digest") == record.get("digest")
        and line.get("digest") == line_digest(line)
    ]
    return [
        Check.made(
            "budget charge",
            bool(mine),
            f"{found}: charge {mine[0]} names this record"
            if mine
            else f"{found}: no charge names this record (its line was removed or edited)",
        )
    ]

"""A charge recomputed from the record of its run, never from what its line says of itself.

:func:`charge_from_record` makes the charge again from the record alone (its call's
mechanism and parameters, its queries, its release, its seed commitment, its digest);
:func:`charge_differences` names every field where a budget line is not that charge, and
every claim of the record's ``budget`` block (the budget's id and name, the charge's number,
the head after it, the budget's delta, limit and conversion, the total with it) that the
budget does not bear out. A record of a version whose budget block is whole
(``WHOLE_BUDGET_VERSION``) lacking a field of it differs: a field taken out makes no record
older.
"""

from __future__ import annotations

import json
import math
from dataclasses import replace
from typing import Any

from pate_cli.budget.accounts import compose
from pate_cli.budget.charges import Charge, charge_of
from pate_cli.budget.claims import budget_block
from pate_cli.budget.lines import is_note
from pate_cli.choices import Conversion
from pate_cli.errors import AccountError, PateError
from pate_cli.mechanisms import mechanism_from_dict
from pate_cli.records.record import BUDGET_FIELDS, WHOLE_BUDGET_VERSION, record_digest
from pate_cli.reports.rounding import bound_significant

# Accounts and totals are recomputed by the same formulas, maybe on another CPU: a last-bit
# difference is not a forgery. A total composes with a searched split of delta: looser.
_ACCOUNT_RTOL = 1e-12
_TOTAL_RTOL = 1e-6


def charge_from_record(record: dict[str, Any]) -> Charge:
    """The charge a record's run made, recomputed from the record alone: its call's function,
    mechanism and options, its report's number of queries, its seed and seed commitment, and
    its recomputed digest.

    Raises:
        ValueError: the record holds no charge (a public seed, a release tuned on the
            votes, a call pate does not charge).
    """
    call = record["call"]
    try:
        report = record["report"]
        queries = int((report.get("input") or {}).get("num_queries", report.get("num_queries")))
        charge = charge_of(
            call["function"],
            record["command"],
            mechanism_from_dict(call["mechanism"]),
            queries,
            call["options"],
            public_seed=record.get("seed") is not None,
            seed_commitment=record.get("seed_commitment"),
        )
    except (PateError, KeyError, TypeError, ValueError) as error:
        message = getattr(error, "message", None) or str(error)
        raise ValueError(f"its record's run charges nothing ({message})") from None
    return replace(charge, record_digest=record_digest(record))


def charge_differences(
    record: dict[str, Any],
    line: dict[str, Any],
    header: dict[str, Any],
    index: int,
    earlier: list[dict[str, Any]],
) -> list[str]:
    """Where the charge at place ``index`` of the chain (``line``, the ``index``-th line after
    the header, after the lines ``earlier``) is not its record's: each field of the charge
    recomputed from the record, the budget's id, the charge's number (``claimed_index``) and
    the head the record names, the header's delta, limit and conversion, and the total the
    record says the budget had spent with it."""
    try:
        expected = charge_from_record(record).fields()
    except ValueError as error:
        return [str(error)]
    found = [
        f"{key} is {_short(line.get(key))}, its record gives {_short(value)}"
        for key, value in expected.items()
        if not same(value, line.get(key))
    ]
    block = budget_block(record) or {}
    found.extend(_incomplete(record, block))
    number = 1 + sum(1 for entry in earlier if not is_note(entry))
    claims = {
        "the budget's id": (block.get("id"), header.get("digest")),
        place_name(block): (block.get("charge_index"), claimed_index(block, number, index)),
        "the head after it": (block.get("head"), line.get("digest")),
        "delta": (block.get("delta"), header.get("delta")),
        "limit": (block.get("limit"), header.get("max_epsilon")),
        "conversion": (block.get("conversion"), header.get("conversion", "classic")),
    }
    if "lines" in block:
        claims["the budget's lines with it"] = (block["lines"], index + 1)
    if "name" in block:
        claims["the budget's name"] = (block["name"], header.get("name"))
    # A record made before pate recorded the charge's place, as its version says.
    older = record.get("version", 0) < WHOLE_BUDGET_VERSION and "charge_index" not in block
    for what, (claimed, actual) in claims.items():
        if older and claimed is None and what not in ("the budget's id", "limit"):
            continue
        if not same(claimed, actual):
            found.append(f"{what} is {_short(actual)} here, its record says {_short(claimed)}")
    spent = _spent(header, [*earlier, line])
    if "spent" in block and not same(block["spent"], spent, rtol=_TOTAL_RTOL):
        found.append(
            f"the total with it is {bound_significant(spent)}, its record says {block['spent']}"
        )
    return found


def _incomplete(record: dict[str, Any], block: dict[str, Any]) -> list[str]:
    """What a record of a version whose budget block is whole lacks of it (a field taken out
    makes no record older: its version says which rules read it)."""
    version = record.get("version", 0)
    if version < WHOLE_BUDGET_VERSION:
        return []
    missing = [field for field in BUDGET_FIELDS if field not in block]
    if not missing:
        return []
    return [
        f"its record's budget block lacks {', '.join(missing)}, which every record of version "
        f"{version} holds"
    ]


def claimed_index(block: dict[str, Any], number: int, index: int) -> int:
    """The ``charge_index`` a record's budget block gives the charge numbered ``number``, on
    the ``index``-th line after the header: its number. A record made before charges were
    numbered apart from notes (a block without ``lines``) counted every line after the
    header, notes too: its place, the same number unless a note stands before it."""
    return number if "lines" in block else index


def place_name(block: dict[str, Any]) -> str:
    return "its charge number" if "lines" in block else "its place after the header"


def _spent(header: dict[str, Any], lines: list[dict[str, Any]]) -> float:
    """The total of the charges of ``lines``; inf when none is finite in double precision (no
    record's total is then the budget's: it differs)."""
    accounts = [line["account"] for line in lines if not is_note(line)]
    conversion = Conversion(header.get("conversion", "classic"))
    try:
        return compose(accounts, float(header["delta"]), conversion).epsilon
    except AccountError:
        return math.inf


def same(a: Any, b: Any, *, rtol: float = _ACCOUNT_RTOL) -> bool:
    """Two JSON values alike: numbers to ``rtol``, everything else exactly."""
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(same(a[k], b[k], rtol=rtol) for k in a)
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(same(x, y, rtol=rtol) for x, y in zip(a, b, strict=True))
    if isinstance(a, bool) or isinstance(b, bool):
        return a is b
    if isinstance(a, int | float) and isinstance(b, int | float):
        x, y = float(a), float(b)
        return x == y or (
            math.isfinite(x) and math.isfinite(y) and math.isclose(x, y, rel_tol=rtol)
        )
    return type(a) is type(b) and bool(a == b)


def _short(value: Any) -> str:
    text = json.dumps(value, sort_keys=True)
    return text if len(text) <= 80 else text[:77] + "..."

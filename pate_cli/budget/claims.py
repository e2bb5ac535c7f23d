"""The records an audit is given, matched to a budget by what they hold, never by where the
audit runs.

A record charged to a budget keeps a ``budget`` block: the budget's id (its header's digest),
its name, and where it is: ``place``, its path from the record's own folder (records of
version 6 on), or the ``path`` the run was given, from the folder the run started in (one of
the folders above the record: each is tried). :func:`claim_of` reads a record's block
against the budget being audited:

- ``THIS``: it names this budget's id;
- ``REPLACED``: it names the budget this one started again from (``pate budget init
  --force`` keeps it beside, and the new header says so: ``replaces``);
- ``RE_CREATED``: it names another id but this budget's place or name: the budget it charged
  was here, and this one is not it (its header was rewritten, or it was made again);
- ``OTHER``: another budget's, found at its place with its id;
- ``LOST``: another budget's, not found at its place (moved, renamed, or re-created under
  another name): nothing tells whether it is this one;
- ``UNCHARGED``: no budget block (a run charged to no budget, or a block taken out).

The same from every working folder and whatever the budget file is called now: a renamed
budget keeps its id, and a budget re-created and renamed leaves its records ``LOST``.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pate_cli.budget.lines import MAX_BYTES, LineError, parse
from pate_cli.common.spelling import given
from pate_cli.errors import InputError
from pate_cli.records.record import MAX_RECORD_BYTES, load_record, record_digest

THIS = "this"
REPLACED = "replaced"
RE_CREATED = "re-created"
OTHER = "other"
LOST = "lost"
UNCHARGED = "uncharged"


@dataclass(frozen=True)
class Claim:
    """A record given to an audit, and what it says of the audited budget."""

    where: str
    """The record file."""
    record: dict[str, Any]
    digest: str
    """The record's recomputed digest (what a charge line names)."""
    kind: str
    """``THIS``, ``REPLACED``, ``RE_CREATED``, ``OTHER``, ``LOST`` or ``UNCHARGED`` (module
    docstring)."""
    published: bool = False
    """Found among the records given as published (outside the owner's reach)."""

    @property
    def block(self) -> dict[str, Any]:
        return budget_block(self.record) or {}


def budget_block(record: dict[str, Any]) -> dict[str, Any] | None:
    """A record's ``budget`` block (None: its run charged no budget)."""
    report = record.get("report")
    block = report.get("budget") if isinstance(report, dict) else None
    return block if isinstance(block, dict) else None


def place_of(budget_path: str, record_path: str) -> str:
    """Where a budget is from the folder of a record of its charge: the path a record keeps
    (``"place"``), so that an audit finds the budget from the record wherever it runs."""
    folder = os.path.dirname(os.path.abspath(record_path))
    return Path(os.path.relpath(os.path.abspath(budget_path), folder)).as_posix()


def places(block: dict[str, Any], where: str) -> list[str]:
    """Where a record's budget may be, from the record's own folder: its ``place`` (version
    6 on), else its ``path`` from the record's folder and each folder above it."""
    folder = os.path.dirname(os.path.abspath(where))
    place, path = block.get("place"), block.get("path")
    if isinstance(place, str):
        return [os.path.normpath(os.path.join(folder, place))]
    if not isinstance(path, str) or not path:
        return []
    if os.path.isabs(path):
        return [os.path.normpath(path)]
    found = []
    while True:
        found.append(os.path.normpath(os.path.join(folder, path)))
        parent = os.path.dirname(folder)
        if parent == folder:
            return found
        folder = parent


def claim_of(
    record: dict[str, Any], where: str, digest: str, budget_path: str, header: dict[str, Any]
) -> Claim:
    """What a record says of the budget at ``budget_path`` (its ``header``)."""
    block = budget_block(record)
    if block is None:
        return Claim(where, record, digest, UNCHARGED)
    named = block.get("id")
    replaces = header.get("replaces")
    if named == header.get("digest"):
        kind = THIS
    elif isinstance(replaces, dict) and named == replaces.get("id"):
        kind = REPLACED
    elif _here(places(block, where), budget_path) or _same_name(block, header):
        kind = RE_CREATED
    elif any(_budget_id(place) == named for place in places(block, where)):
        kind = OTHER
    else:
        kind = LOST
    return Claim(where, record, digest, kind)


def _here(candidates: list[str], budget_path: str) -> bool:
    for place in candidates:
        try:
            if os.path.samefile(place, budget_path):
                return True
        except OSError:
            continue
    return False


def _same_name(block: dict[str, Any], header: dict[str, Any]) -> bool:
    name = header.get("name")
    return isinstance(name, str) and bool(name) and block.get("name") == name


def _budget_id(path: str) -> str | None:
    """The id a budget file at ``path`` names in its header (None: no budget there)."""
    try:
        with open(path, "rb") as stream:
            header = json.loads(stream.readline(1 << 16))
    except (OSError, ValueError):
        return None
    return header.get("digest") if isinstance(header, dict) else None


def kept_budget(budget_path: str, header: dict[str, Any]) -> str | None:
    """Why the budget this one started again from is not kept as its header says (None: it
    is, with the id and head the header names): read as any budget is (at most ``MAX_BYTES``,
    every line's digest and link recomputed), then its id and head compared."""
    replaces = header.get("replaces")
    if not isinstance(replaces, dict):
        return "the header names no budget it started again from"
    name = str(replaces.get("kept"))
    kept = os.path.join(os.path.dirname(os.path.abspath(budget_path)), name)
    try:
        if os.path.getsize(kept) > MAX_BYTES:
            return f"{name}: larger than {MAX_BYTES >> 20} MiB; not a budget file"
        with open(kept, "rb") as stream:
            data = stream.read(MAX_BYTES + 1)
    except OSError:
        return f"{name}: not found beside it"
    try:
        kept_header, lines = parse(data)
    except LineError as error:
        return f"{name}: {error}"
    head = lines[-1].get("digest") if lines else kept_header.get("digest")
    if kept_header.get("digest") != replaces.get("id") or head != replaces.get("head"):
        return f"{name}: not the budget the header names (its id or head)"
    return None


def find_claims(
    folders: Sequence[str],
    budget_path: str,
    header: dict[str, Any],
    *,
    published: Sequence[str] = (),
) -> list[Claim]:
    """Every record under ``folders`` and ``published`` (searched recursively), read against
    this budget; files that are not records (the budget itself too) are passed over, and a
    record found twice is one claim (published if found among ``published``)."""
    claims: dict[str, Claim] = {}
    for folder, is_published in [(f, True) for f in published] + [(f, False) for f in folders]:
        flag = "published-records" if is_published else "records"
        if not os.path.isdir(folder):
            raise InputError(f"{given(flag, folder)}: not a folder of records")
        for where in _json_files(folder):
            if _here([where], budget_path):
                continue
            try:  # as verify reads a record: a regular file of a bounded size
                record = load_record(where)
                digest = record_digest(record)
            except (InputError, ValueError, TypeError):
                continue  # not a record (an opening, another file), or one that cannot be read
            claim = claim_of(record, where, digest, budget_path, header)
            if digest not in claims:
                claims[digest] = Claim(
                    claim.where, claim.record, digest, claim.kind, published=is_published
                )
    return list(claims.values())


def _json_files(folder: str) -> Iterator[str]:
    for root, folders, files in os.walk(folder):
        folders.sort()
        for name in sorted(files):
            where = os.path.join(root, name)
            if name.endswith(".json") and os.path.getsize(where) <= MAX_RECORD_BYTES:
                yield where

"""``pate verify BUDGET`` and the budget check of ``pate verify RECORD``: each charge recomputed
from the record it names, never from what its line says of itself.

What each check proves (docs/cli.md, "Auditing a budget"):

- ``file``, ``header``, ``chain``: the file is UTF-8 and whole; the header and every line
  match their digests and each line follows the one before. A digest is not a seal: anyone
  can rewrite a line and recompute the chain after it, so nothing below rests on it alone.
- ``head``: the chain still passes through a head published earlier (a CI log, a paper, a
  tag): history before it was not rewritten.
- ``charges and their records``: every line naming a record is that record's charge,
  recomputed from the record (its call's mechanism and parameters, its queries, its release,
  its seed commitment), and names the record by its recomputed digest; the record names this
  budget's id, the charge's number (``claimed_index``) and the head after it, and this
  budget's delta, limit and conversion. A line without a record (a library call, a run
  without ``--record``), or whose record was not given, is not checked, by name.
- ``records of this budget``: every record given that names this budget has its line: a
  charge removed (the last one included) or rewritten is seen. Records are matched by what
  they hold (``pate_cli.budget.claims``), never by where the audit runs: one that names
  another id but this budget's place or name was charged to a budget re-created here.
- ``records replayed`` (``--votes``): each record recomputed from its votes and outputs.
- ``charges pinned``: each charge pinned by a published head or record, or replayed; the
  others rest on the owner's files, by number (``pate_cli.budget.pins``).
- ``total within the limit``: the charges composed again.
- Without records, that no charge is missing is never checked: an emptier budget is never a
  cleaner one.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from pate_cli.budget.book import Budget
from pate_cli.budget.charges import recomputed_account
from pate_cli.budget.claims import (
    LOST,
    OTHER,
    RE_CREATED,
    REPLACED,
    THIS,
    Claim,
    budget_block,
    find_claims,
    kept_budget,
    places,
)
from pate_cli.budget.lines import (
    MAX_BYTES,
    LineError,
    chain_problem,
    charge_numbers,
    entry_problem,
    header_problem,
    is_note,
    parse_line,
    split_lines,
)
from pate_cli.budget.pins import Replayer, pin_checks, replay_checks
from pate_cli.budget.recompute import (
    charge_differences,
    claimed_index,
    place_name,
    same,
)
from pate_cli.budget.storage import is_budget
from pate_cli.common.spelling import option
from pate_cli.errors import AccountError, InputError, PateError
from pate_cli.mechanisms import by_name
from pate_cli.records.record import missing_plugin, record_digest
from pate_cli.records.verdict import Check, first_of, listed, numbered
from pate_cli.reports.rounding import bound_significant


@dataclass(frozen=True)
class _File:
    """A budget file as read for an audit: every line parsed where it can be."""

    path: str
    header: Any
    lines: list[Any]
    problem: str | None
    """What is wrong with the file as a whole (not UTF-8, a line not whole), if anything."""

    @property
    def id(self) -> str | None:
        return self.header.get("digest") if isinstance(self.header, dict) else None


def _read(path: str) -> _File:
    if not os.path.isfile(path):
        raise InputError(f"{path}: no such budget file")
    if os.path.getsize(path) > MAX_BYTES:
        raise InputError(f"{path}: larger than {MAX_BYTES >> 20} MiB; not a budget file")
    with open(path, "rb") as stream:
        data = stream.read()
    problem = None
    try:
        texts = split_lines(data)
    except LineError as error:
        problem = f"it {error}"
        texts = [t for t in data.decode("utf-8", errors="replace").splitlines() if t.strip()]
    if not texts:
        raise InputError(f"{path}: empty; not a budget file")
    parsed: list[Any] = []
    for text in texts:
        try:
            parsed.append(parse_line(text))
        except LineError as error:
            parsed.append(f"a line that {error}")
    return _File(path, parsed[0], parsed[1:], problem)


def verify_budget(
    path: str,
    records: Sequence[str] = (),
    heads: Sequence[str] = (),
    *,
    published: Sequence[str] = (),
    votes: Sequence[str] = (),
    replayer: Replayer | None = None,
) -> list[Check]:
    """Every check of a budget file (module docstring): ``records`` and ``published``,
    folders searched for its records (``published``: from outside the owner's reach, each
    pinning its charge like a head), ``heads``: digests published earlier, ``votes``: the
    files the records are replayed from with ``replayer``."""
    budget = _read(path)
    checks = [
        Check.made(
            "file",
            budget.problem is None,
            budget.problem or f"UTF-8, {len(budget.lines) + 1} whole lines",
        ),
        _header_check(budget.header),
    ]
    checks.append(_chain_check(budget))
    if _links(budget):
        checks.extend(_uninstalled_check(budget.lines))
    checks.extend(_head_check(budget, head) for head in heads)
    # A line whose account is not its own parameters' is named above; its record is still
    # compared: only a chain that does not link stops the comparison.
    sound = checks[1].ok and _links(budget)
    given = bool(records or published)
    claims = find_claims(records, path, budget.header, published=published) if sound else []
    found = {claim.digest: claim for claim in claims}
    replayed: set[int] = set()
    if given and sound:
        checks.extend(_charge_checks(budget, found))
        checks.extend(_claim_checks(budget, claims))
        replayed, replays = replay_checks(budget.lines, found, votes, replayer)
        checks.extend(replays)
    elif given:
        checks.append(Check.skipped("charges and their records", "the chain does not hold"))
    else:
        checks.append(
            Check.skipped(
                "no charge missing",
                f"without its records nothing shows a charge removed: give {option('records')} "
                "DIR (every record naming this budget must have its line)",
            )
        )
    if sound:
        checks.extend(pin_checks(budget.lines, str(budget.id), heads, claims, replayed))
    checks.append(_total_check(budget) if sound else _no_total())
    marker = f"{path}.charging"
    if os.path.exists(marker):
        checks.append(
            Check.skipped(
                "charge cut short",
                f"{marker}: a run was cut short while charging; the next charge of this budget "
                "settles it (a line cut short is removed, a release rolled back is noted)",
            )
        )
    return checks


def _header_check(header: Any) -> Check:
    problem = header_problem(header)
    if problem is not None:
        moved = isinstance(header, dict) and entry_problem(header) is None
        why = "a charge stands there: the header was removed or moved" if moved else problem
        return Check.made("header", False, f"line 1: {why}")
    return Check.made(
        "header", True, f"line 1: its digest matches (the budget's id {header['digest'][:12]})"
    )


def _chain_check(budget: _File) -> Check:
    if not isinstance(budget.header, dict):
        return Check.made("chain", False, "line 1 is not a header")
    text = next((n for n, line in enumerate(budget.lines, 2) if isinstance(line, str)), None)
    if text is not None:
        return Check.made("chain", False, f"line {text}: {budget.lines[text - 2]}")
    problem = chain_problem(budget.header, budget.lines) or _own_accounts(budget.lines)
    charges = sum(1 for line in budget.lines if not is_note(line))
    unseen = any(_uninstalled(line) for line in budget.lines if not is_note(line))
    return Check.made(
        "chain",
        problem is None,
        problem
        or f"{charges} charges, each line following the one before, each account its own "
        f"parameters'{' (but those of mechanisms not installed)' if unseen else ''}",
    )


def _links(budget: _File) -> bool:
    """Whether every line is a line pate writes and follows the one before."""
    if not isinstance(budget.header, dict) or any(isinstance(x, str) for x in budget.lines):
        return False
    return chain_problem(budget.header, budget.lines) is None


def _own_accounts(lines: list[dict[str, Any]]) -> str | None:
    """The first charge whose account is not its own parameters' (a line edited into
    inconsistency), named by its number and its line."""
    numbers = charge_numbers(lines)
    for number, line in enumerate(lines, start=2):
        if is_note(line) or _uninstalled(line) is not None:
            continue
        charge = f"charge {numbers[number - 2]} (line {number})"
        try:
            recomputed = recomputed_account(line)
        except (KeyError, TypeError, ValueError, PateError) as error:
            return f"{charge}: its parameters give no account ({error})"
        if not same(recomputed, line["account"]):
            return f"{charge}: its account is not its own parameters' ({recomputed})"
    return None


def _uninstalled(line: dict[str, Any]) -> str | None:
    """The name of a charge's mechanism where no installed mechanism has it (a plugin's, since
    uninstalled): its account cannot be recomputed from its parameters here."""
    name = (line.get("mechanism") or {}).get("name")
    return None if not isinstance(name, str) or name in by_name() else name


def _uninstalled_check(lines: list[dict[str, Any]]) -> list[Check]:
    """The charges whose accounts were not recomputed: their mechanism is not installed."""
    found = [
        f"charge {number} ({name})"
        for line, number in zip(lines, charge_numbers(lines), strict=True)
        if number is not None and (name := _uninstalled(line)) is not None
    ]
    if not found:
        return []
    why = "their mechanisms are not installed: their accounts are taken as written"
    return [Check.skipped("accounts of mechanisms not installed", f"{listed(found)}: {why}")]


def _head_check(budget: _File, head: str) -> Check:
    name = f"head {head[:12]}"
    lines = [line for line in budget.lines if isinstance(line, dict)]
    digests = [budget.id] + [line.get("digest") for line in lines]
    if head in digests:
        where = _head_place(lines, digests.index(head))
        return Check.made(name, True, f"the chain passes through it ({where})")
    return Check.made(
        name,
        False,
        "the chain does not pass through this published head: the history before it was "
        "rewritten, or it is another budget's",
    )


def _head_place(lines: list[dict[str, Any]], at: int) -> str:
    """Where a head stands in the chain: the budget's id (``at`` 0) or the digest of line
    ``at`` after the header, a charge's (by its number) or a note's."""
    if at == 0:
        return "the budget's id: before any charge"
    number = charge_numbers(lines)[at - 1]
    return f"the note on line {at + 1}" if number is None else f"the head after charge {number}"


def _no_total() -> Check:
    return Check.skipped("total within the limit", "not composed: the file does not hold")


# ----------------------------------------------------------------------------- records


def _charge_checks(budget: _File, found: dict[str, Claim]) -> list[Check]:
    """Each line naming a record, against the record; lines without one, by name."""
    differing, matched, unrecorded, absent, unreleased = [], 0, [], [], []
    unrunnable = []  # records whose mechanism's plugin is not installed here
    noted = {line["charge"]: n for n, line in enumerate(budget.lines, 2) if is_note(line)}
    numbers = charge_numbers(budget.lines)
    for index, (line, number) in enumerate(zip(budget.lines, numbers, strict=True), start=1):
        if number is None:
            continue
        charge = f"charge {number}"
        if line["digest"] in noted:
            unreleased.append(f"{charge} (noted on line {noted[line['digest']]})")
        digest = line.get("record_digest")
        if digest is None:
            unrecorded.append(number)
            continue
        if digest not in found:
            if line["digest"] not in noted:
                absent.append(number)
            continue
        where, record = found[digest].where, found[digest].record
        if line["digest"] in noted:
            differing.append(
                f"{charge} is noted as released nothing, but its record {where} is there"
            )
            continue
        gone = missing_plugin(record)
        if gone is not None:  # nothing to recompute its charge with: not checked, not differs
            unrunnable.append(f"{charge} ({where}): {gone}")
            continue
        earlier = budget.lines[: index - 1]
        problems = charge_differences(record, line, budget.header, index, earlier)
        if problems:
            differing.append(f"{charge} ({where}): {first_of(problems)}")
        else:
            matched += 1
    checks = [
        Check.made(
            "charges and their records",
            not differing,
            f"{matched} charges recomputed from their records, each the same"
            if not differing
            else listed(differing),
        )
    ]
    if unrecorded:
        checks.append(
            Check.skipped(
                "charges without a record",
                f"{numbered(unrecorded)}: no record was written (a library call, or a run "
                f"without {option('record')}): nothing to recompute them from",
            )
        )
    if absent:
        checks.append(
            Check.skipped(
                "charges whose record is not given",
                f"{numbered(absent)}: their records are not in the folders given",
            )
        )
    if unrunnable:
        checks.append(Check.skipped("charges whose mechanism is not installed", listed(unrunnable)))
    if unreleased:
        checks.append(
            Check.skipped(
                "charged, no release",
                f"{listed(unreleased)}: spent, nothing out (their runs were cut short before "
                "their release, which a later run rolled back); counted in the total",
            )
        )
    return checks


def _claim_checks(budget: _File, claims: list[Claim]) -> list[Check]:
    """Every record naming this budget has its line; a record naming another id but this
    budget's place or name was charged to a budget re-created here; the budget this one
    started again from is kept as its header says; records of other budgets are listed, and
    those whose budget is not at its place are not accounted for (``pate_cli.budget.claims``)."""
    lines = budget.lines
    numbers = charge_numbers(lines)
    missing = []
    mine = [claim for claim in claims if claim.kind == THIS]
    for claim in mine:
        block, where = claim.block, claim.where
        index = block.get("charge_index")
        named = [
            (number, n)
            for n, (line, number) in enumerate(zip(lines, numbers, strict=True), 1)
            if number is not None and line.get("record_digest") == claim.digest
        ]
        places = [claimed_index(block, number, n) for number, n in named]
        if not named:
            missing.append(f"{where} says it charged this budget, which has no line naming it")
        elif isinstance(index, int) and index not in places:
            missing.append(
                f"{where}: {place_name(block)} is {places[0]} here, its record says {index}"
            )
    checks = [
        Check.made(
            "records of this budget",
            not missing,
            f"{len(mine)} records name this budget, each has its line (a record withheld with "
            "its line removed from the end shows only against a published head)"
            if not missing
            else listed(missing),
        )
    ]
    kinds = {kind: [c for c in claims if c.kind == kind] for kind in (RE_CREATED, REPLACED)}
    kinds |= {kind: [c for c in claims if c.kind == kind] for kind in (OTHER, LOST)}
    if kinds[RE_CREATED]:
        checks.append(
            Check.made(
                "a budget re-created here",
                False,
                f"{listed([_named(c) for c in kinds[RE_CREATED]])}: charged to a budget at this "
                "place or of this name, which this one is not (its header was rewritten, or it "
                "was made again): their charges are not in it",
            )
        )
    if kinds[REPLACED]:
        problem = kept_budget(budget.path, budget.header)
        kept = budget.header["replaces"].get("kept")
        checks.append(
            Check.made(
                "records of the budget started again from",
                problem is None,
                problem
                or f"{len(kinds[REPLACED])} records of the budget this one started again from, "
                f"kept beside it as {kept}: verify them against it",
            )
        )
    if kinds[OTHER]:
        checks.append(
            Check.made(
                "records of other budgets",
                True,
                f"{listed([_named(c) for c in kinds[OTHER]])}: not this budget's, each found at "
                "its place with its id",
            )
        )
    if kinds[LOST]:
        checks.append(
            Check.skipped(
                "records of a budget not at its place",
                f"{listed([_named(c) for c in kinds[LOST]])}: no budget with their id is where "
                "they say (moved, renamed, or made again under another name): give their "
                "budget, or verify them against it",
            )
        )
    return checks


def _named(claim: Claim) -> str:
    """A record and the budget it names: "releases/1/record.json (budget f89747717dec)"."""
    return f"{claim.where} (budget {str(claim.block.get('id'))[:12]})"


def _total_check(budget: _File) -> Check:
    """The charges composed again (their accounts as the lines hold them: each was compared
    with its record above), against the limit."""
    header = budget.header
    opened = Budget(budget.path, header, list(budget.lines))
    try:
        total = opened.total()
    except AccountError as error:  # no finite total bounds the charges: it differs
        return Check.made("total within the limit", False, error.message)
    return Check.made(
        "total within the limit",
        total.epsilon <= opened.limit,
        f"epsilon {bound_significant(total.epsilon)} ({total.method}) of {opened.limit:g} at delta "
        f"{opened.delta:g}",
    )


# ----------------------------------------------------------------------------- verify RECORD


def record_charge_checks(
    record: dict[str, Any], record_path: str, budget_path: str | None = None
) -> list[Check]:
    """A record of a run charged to a budget: the budget it names (or ``budget_path``, where
    it is now) holds its charge, line for line as the record gives it
    (``charge_differences``), in a chain that holds."""
    block = budget_block(record)
    if block is None:
        return []
    path = str(block.get("place") or block.get("path"))
    folder = os.path.dirname(os.path.abspath(record_path))
    # From the record's own folder (its place, or its path from a folder above it), never
    # from where verify runs; then beside the record.
    candidates = [*places(block, record_path), os.path.join(folder, os.path.basename(path))]
    where = budget_path or next((c for c in candidates if is_budget(c)), None)
    if where is None or not is_budget(where):
        return [
            Check.skipped(
                "budget charge",
                f"{where or path}: the budget file is not found"
                + ("" if where else f"; give it with {option('budget')}"),
            )
        ]
    budget = _read(where)
    chain = _chain_check(budget)
    problem = header_problem(budget.header) or (None if chain.ok else chain.detail)
    if problem is not None:
        return [Check.made("budget charge", False, f"{where}: {problem}")]
    try:
        digest = record_digest(record)
    except (ValueError, TypeError):
        return [Check.made("budget charge", False, "the record cannot be encoded again")]
    named = [n for n, line in enumerate(budget.lines, 1) if line.get("record_digest") == digest]
    numbers = charge_numbers(budget.lines)
    if not named:
        return [
            Check.made(
                "budget charge",
                False,
                f"{where}: no charge names this record (its line was removed or rewritten)",
            )
        ]
    index = named[0]
    line = budget.lines[index - 1]
    problems = charge_differences(record, line, budget.header, index, budget.lines[: index - 1])
    return [
        Check.made(
            "budget charge",
            not problems,
            f"{where}: charge {numbers[index - 1]} is this record's charge, recomputed from it"
            if not problems
            else f"{where}: charge {numbers[index - 1]}: {first_of(problems)}",
        )
    ]


# ----------------------------------------------------------------------------- helpers

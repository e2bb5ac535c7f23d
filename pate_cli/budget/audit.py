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
  charge removed (the last one included) or rewritten is seen.
- ``total within the limit``: the charges composed again.
- Without records, that no charge is missing is never checked: an emptier budget is never a
  cleaner one.
"""

from __future__ import annotations

import json
import math
import os
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, replace
from typing import Any

from pate_cli.budget.accounts import compose
from pate_cli.budget.book import Budget
from pate_cli.budget.charges import Charge, charge_of, recomputed_account
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
from pate_cli.budget.storage import is_budget
from pate_cli.choices import Conversion
from pate_cli.common.spelling import given, option
from pate_cli.errors import AccountError, InputError, PateError
from pate_cli.mechanisms import mechanism_from_dict
from pate_cli.records.record import MAX_RECORD_BYTES, load_record, record_digest
from pate_cli.records.verdict import Check
from pate_cli.reports.rounding import bound_significant

# Accounts and totals are recomputed by the same formulas, maybe on another CPU: a last-bit
# difference is not a forgery. A total composes with a searched split of delta: looser.
_ACCOUNT_RTOL = 1e-12
_TOTAL_RTOL = 1e-6
_SHOWN = 3  # differences named in one check line


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


def verify_budget(path: str, records: Sequence[str] = (), heads: Sequence[str] = ()) -> list[Check]:
    """Every check of a budget file (module docstring); ``records``: folders searched for its
    records, ``heads``: digests published earlier."""
    budget = _read(path)
    checks = [
        Check.made(
            "file",
            budget.problem is None,
            budget.problem or f"UTF-8, {len(budget.lines) + 1} whole lines",
        ),
        _header_check(budget.header),
    ]
    chain = _chain_check(budget)
    checks.append(chain)
    checks.extend(_head_check(budget, head) for head in heads)
    # A line whose account is not its own parameters' is named above; its record is still
    # compared: only a chain that does not link stops the comparison.
    sound = checks[1].ok and _links(budget)
    found = _records(records, path) if records else {}
    if records and sound:
        checks.extend(_charge_checks(budget, found))
        checks.extend(_claim_checks(budget, found))
    elif records:
        checks.append(Check.skipped("charges and their records", "the chain does not hold"))
    else:
        checks.append(
            Check.skipped(
                "no charge missing",
                f"without its records nothing shows a charge removed: give {option('records')} "
                "DIR (every record naming this budget must have its line)",
            )
        )
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
    return Check.made(
        "chain",
        problem is None,
        problem
        or f"{charges} charges, each line following the one before, each account its own "
        "parameters'",
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
        if is_note(line):
            continue
        charge = f"charge {numbers[number - 2]} (line {number})"
        try:
            recomputed = recomputed_account(line)
        except (KeyError, TypeError, ValueError, PateError) as error:
            return f"{charge}: its parameters give no account ({error})"
        if not same(recomputed, line["account"]):
            return f"{charge}: its account is not its own parameters' ({recomputed})"
    return None


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


def _records(folders: Sequence[str], budget_path: str) -> dict[str, tuple[str, dict[str, Any]]]:
    """Every record under ``folders`` (searched recursively), by its recomputed digest, with
    its path; files that are not records are passed over."""
    found: dict[str, tuple[str, dict[str, Any]]] = {}
    for folder in folders:
        if not os.path.isdir(folder):
            raise InputError(f"{given('records', folder)}: not a folder of records")
        for where in _json_files(folder):
            if os.path.samefile(where, budget_path) if os.path.exists(where) else False:
                continue
            try:  # as verify reads a record: a regular file of a bounded size
                record = load_record(where)
                digest = record_digest(record)
            except (InputError, ValueError, TypeError):
                continue  # not a record (an opening, another file), or one that cannot be read
            found.setdefault(digest, (where, record))
    return found


def _json_files(folder: str) -> Iterator[str]:
    for root, folders, files in os.walk(folder):
        folders.sort()
        for name in sorted(files):
            where = os.path.join(root, name)
            if name.endswith(".json") and os.path.getsize(where) <= MAX_RECORD_BYTES:
                yield where


def _block(record: dict[str, Any]) -> dict[str, Any] | None:
    report = record.get("report")
    block = report.get("budget") if isinstance(report, dict) else None
    return block if isinstance(block, dict) else None


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
    block = _block(record) or {}
    number = 1 + sum(1 for entry in earlier if not is_note(entry))
    claims = {
        "the budget's id": (block.get("id"), header.get("digest")),
        _place_name(block): (block.get("charge_index"), claimed_index(block, number, index)),
        "the head after it": (block.get("head"), line.get("digest")),
        "delta": (block.get("delta"), header.get("delta")),
        "limit": (block.get("limit"), header.get("max_epsilon")),
        "conversion": (block.get("conversion"), header.get("conversion", "classic")),
    }
    if "lines" in block:
        claims["the budget's lines with it"] = (block["lines"], index + 1)
    older = "charge_index" not in block  # a record made before pate recorded its place
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


def claimed_index(block: dict[str, Any], number: int, index: int) -> int:
    """The ``charge_index`` a record's budget block gives the charge numbered ``number``, on
    the ``index``-th line after the header: its number. A record made before charges were
    numbered apart from notes (a block without ``lines``) counted every line after the
    header, notes too: its place, the same number unless a note stands before it."""
    return number if "lines" in block else index


def _place_name(block: dict[str, Any]) -> str:
    return "its charge number" if "lines" in block else "its place after the header"


def _spent(header: dict[str, Any], lines: list[dict[str, Any]]) -> float:
    accounts = [line["account"] for line in lines if not is_note(line)]
    conversion = Conversion(header.get("conversion", "classic"))
    return compose(accounts, float(header["delta"]), conversion).epsilon


def _charge_checks(budget: _File, found: dict[str, tuple[str, dict[str, Any]]]) -> list[Check]:
    """Each line naming a record, against the record; lines without one, by name."""
    differing, matched, unrecorded, absent, unreleased = [], 0, [], [], []
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
        where, record = found[digest]
        if line["digest"] in noted:
            differing.append(
                f"{charge} is noted as released nothing, but its record {where} is there"
            )
            continue
        earlier = budget.lines[: index - 1]
        problems = charge_differences(record, line, budget.header, index, earlier)
        if problems:
            differing.append(f"{charge} ({where}): {_first(problems)}")
        else:
            matched += 1
    checks = [
        Check.made(
            "charges and their records",
            not differing,
            f"{matched} charges recomputed from their records, each the same"
            if not differing
            else _listed(differing),
        )
    ]
    if unrecorded:
        checks.append(
            Check.skipped(
                "charges without a record",
                f"{_charges(unrecorded)}: no record was written (a library call, or a run "
                f"without {option('record')}): nothing to recompute them from",
            )
        )
    if absent:
        checks.append(
            Check.skipped(
                "charges whose record is not given",
                f"{_charges(absent)}: their records are not in the folders given",
            )
        )
    if unreleased:
        checks.append(
            Check.skipped(
                "charged, no release",
                f"{_listed(unreleased)}: spent, nothing out (their runs were cut short before "
                "their release, which a later run rolled back); counted in the total",
            )
        )
    return checks


def _claim_checks(budget: _File, found: dict[str, tuple[str, dict[str, Any]]]) -> list[Check]:
    """Every record naming this budget has its line; records naming this budget's path with
    another id are another budget's (or this one's header was rewritten)."""
    lines = budget.lines
    numbers = charge_numbers(lines)
    mine, others, missing = 0, [], []
    for digest, (where, record) in found.items():
        block = _block(record)
        if block is None:
            continue
        if block.get("id") == budget.id:
            mine += 1
            index = block.get("charge_index")
            named = [
                (number, n)
                for n, (line, number) in enumerate(zip(lines, numbers, strict=True), 1)
                if number is not None and line.get("record_digest") == digest
            ]
            places = [claimed_index(block, number, n) for number, n in named]
            if not named:
                missing.append(f"{where} says it charged this budget, which has no line naming it")
            elif isinstance(index, int) and index not in places:
                missing.append(
                    f"{where}: {_place_name(block)} is {places[0]} here, its record says {index}"
                )
        elif _same_path(block.get("path"), budget.path) and not any(
            line.get("record_digest") == digest for line in lines
        ):
            others.append(where)
    checks = [
        Check.made(
            "records of this budget",
            not missing,
            f"{mine} records name this budget, each has its line (a record withheld with its "
            "line removed from the end shows only against a published head)"
            if not missing
            else _listed(missing),
        )
    ]
    if others:
        checks.append(
            Check.skipped(
                "records of another budget here",
                f"{_listed(others)}: they name this budget's path but another id (the budget "
                "was started again, the old one kept beside it, or its header was rewritten); "
                "verify them against their own budget",
            )
        )
    return checks


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
    block = _block(record)
    if block is None:
        return []
    path = str(block.get("path"))
    folder = os.path.dirname(os.path.abspath(record_path))
    places = (path, os.path.join(folder, os.path.basename(path)))
    where = budget_path or next((c for c in places if os.path.isfile(c)), None)
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
            else f"{where}: charge {numbers[index - 1]}: {_first(problems)}",
        )
    ]


# ----------------------------------------------------------------------------- helpers


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


def _same_path(named: Any, path: str) -> bool:
    return isinstance(named, str) and os.path.abspath(named) == os.path.abspath(path)


def _short(value: Any) -> str:
    text = json.dumps(value, sort_keys=True)
    return text if len(text) <= 80 else text[:77] + "..."


def _charges(numbers: list[int]) -> str:
    shown = ", ".join(map(str, numbers[:10]))
    more = f" and {len(numbers) - 10} more" if len(numbers) > 10 else ""
    return f"charge{'s' if len(numbers) > 1 else ''} {shown}{more}"


def _first(problems: list[str]) -> str:
    """The first difference in full, and what else differs by name."""
    others = [problem.split(" is ")[0] for problem in problems[1:]]
    return problems[0] + (f" (also {', '.join(others)})" if others else "")


def _listed(items: list[str]) -> str:
    more = f" (and {len(items) - _SHOWN} more)" if len(items) > _SHOWN else ""
    return "; ".join(items[:_SHOWN]) + more

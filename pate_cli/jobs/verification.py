"""``pate verify``'s job: a record checked, its library call replayed by the caller's
``replay`` (the API's, ``pate_cli.api.replay``, which sits above the jobs it replays), or a
budget audited: each charge against the record it names and the chain against heads
published earlier (``pate_cli.budget.audit``).
"""

from __future__ import annotations

import os
import re
from collections.abc import Sequence

from pate_cli.budget import is_budget
from pate_cli.budget.audit import record_charge_checks, verify_budget
from pate_cli.common.spelling import given, option
from pate_cli.errors import UsageError
from pate_cli.records.record import load_record
from pate_cli.records.verify import CommandLine, Replay, VerifyReport
from pate_cli.records.verify import verify as verify_record

PathLike = str | os.PathLike[str]


def verify_file(
    record_path: str,
    *,
    overrides: dict[str, str] | None = None,
    seed_file: str | None = None,
    opening: str | None = None,
    records: Sequence[str] = (),
    heads: Sequence[str] = (),
    budget: str | None = None,
    rtol: float | None = None,
    command_line: CommandLine | None = None,
    replay: Replay,
) -> VerifyReport:
    """Read a record and check it (``pate_cli.records.verify.verify``, its library call made
    again by ``replay``: ``pate_cli.api.replay.replay``), or a budget file against its
    records and published heads (``pate_cli.budget.audit``: ``records`` the folders searched
    for its records, ``heads`` the digests published earlier); ``command_line`` re-parses a
    record's command line (``pate verify`` passes pate's parser)."""
    if rtol is not None and not 0 <= rtol < 1:
        raise UsageError(f"{given('rtol', rtol)}: expected a number in [0, 1)")
    if is_budget(record_path):
        _check_budget_options(overrides, seed_file, opening, rtol, heads, budget)
        header = {"command": "budget", "kind": "budget"}
        checks = verify_budget(record_path, records, heads)
        return VerifyReport(record_path, header, tuple(checks))
    if records:
        raise UsageError(
            f"{given('records', records[0])}: only a budget file's charges have records"
        )
    if heads:
        raise UsageError(f"{given('head', heads[0])}: only a budget file has a head")
    record = load_record(record_path)
    if budget is not None and not isinstance(record["report"].get("budget"), dict):
        raise UsageError(f"{given('budget', budget)}: the record was not charged to a budget")
    checks = verify_record(
        record,
        record_path,
        overrides or {},
        replay,
        seed_file=seed_file,
        opening=opening,
        rtol=rtol,
        command_line=command_line,
    )
    # A run charged to a budget: the budget holds its charge.
    checks.extend(record_charge_checks(record, record_path, budget))
    return VerifyReport(record_path, record, tuple(checks))


_HEAD = re.compile(r"\A[0-9a-f]{64}\Z")


def _check_budget_options(
    overrides: dict[str, str] | None,
    seed_file: str | None,
    opening: str | None,
    rtol: float | None,
    heads: Sequence[str],
    budget: str | None,
) -> None:
    """A budget is checked against its records and heads: the options of a record's replay
    mean nothing for it (refused, rather than ignored)."""
    given_options = {
        "votes": (overrides or {}).get("votes"),
        "input": next(iter((overrides or {}).values()), None) if overrides else None,
        "seed-file": seed_file,
        "opening": opening,
        "rtol": rtol,
        "budget": budget,
    }
    for name, value in given_options.items():
        if value is not None:
            raise UsageError(
                f"{given(name, value)}: a budget file is checked against its records "
                f"({option('records')}) and published heads ({option('head')}), not replayed"
            )
    for head in heads:
        if not _HEAD.match(head):
            raise UsageError(
                f"{given('head', head)}: expected a budget's head, 64 hex digits as "
                "'pate budget show' prints it"
            )


def folders(records: PathLike | Sequence[PathLike] | None) -> tuple[str, ...]:
    """``records=`` as folders: one path, or several."""
    if records is None:
        return ()
    if isinstance(records, str | os.PathLike):
        return (os.fspath(records),)
    return tuple(os.fspath(folder) for folder in records)

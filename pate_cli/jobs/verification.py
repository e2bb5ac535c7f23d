"""``pate verify``'s job: a record checked, its library call replayed by the caller's
``replay`` (the API's, ``pate_cli.api.replay``, which sits above the jobs it replays), or a
budget audited: each charge against the record it names and the chain against heads
published earlier (``pate_cli.budget.audit``).
"""

from __future__ import annotations

import os
import re
from collections.abc import Sequence
from typing import Any

from pate_cli.budget import is_budget
from pate_cli.budget.audit import record_charge_checks, verify_budget
from pate_cli.common.spelling import given, option
from pate_cli.errors import InputError, UsageError
from pate_cli.records.record import load_record, missing_plugin
from pate_cli.records.verdict import Check
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
    published: Sequence[str] = (),
    heads: Sequence[str] = (),
    votes: Sequence[str] = (),
    budget: str | None = None,
    rtol: float | None = None,
    command_line: CommandLine | None = None,
    replay: Replay,
) -> VerifyReport:
    """Read a record and check it (``pate_cli.records.verify.verify``, its library call made
    again by ``replay``: ``pate_cli.api.replay.replay``), or a budget file against its
    records and published heads (``pate_cli.budget.audit``: ``records`` and ``published``
    the folders searched for its records, ``published`` those from outside the owner's
    reach, ``heads`` the digests published earlier, ``votes`` the files its records are
    replayed from); ``command_line`` re-parses a record's command line (``pate verify``
    passes pate's parser). A record takes one ``votes`` file at most (where its votes are
    now), in ``overrides`` or ``votes``."""
    if rtol is not None and not 0 <= rtol < 1:
        raise UsageError(f"{given('rtol', rtol)}: expected a number in [0, 1)")
    if is_budget(record_path):
        _check_budget_options(overrides, seed_file, opening, heads, budget)
        if votes and not (records or published):
            raise UsageError(
                f"{given('votes', votes[0])}: a budget's records are replayed from their votes: "
                f"give them with {option('records')}"
            )

        def replayer(record: dict[str, Any], where: str, path: str) -> list[Check]:
            absent = missing_plugin(record)
            if absent is not None:  # not replayed (budget.pins), never taken as replayed
                raise InputError(f"{where}: {absent}")
            seed = _named_seed_file(record)
            return verify_record(record, where, {"votes": path}, replay, seed_file=seed, rtol=rtol)

        header = {"command": "budget", "kind": "budget"}
        checks = verify_budget(
            record_path, records, heads, published=published, votes=votes, replayer=replayer
        )
        return VerifyReport(record_path, header, tuple(checks))
    for flag, given_value in (("records", records), ("published-records", published)):
        if given_value:
            raise UsageError(
                f"{given(flag, given_value[0])}: only a budget file's charges have records"
            )
    if heads:
        raise UsageError(f"{given('head', heads[0])}: only a budget file has a head")
    if len(votes) > 1:
        raise UsageError(f"{given('votes', votes[1])}: a record reads one votes file")
    overrides = {**(overrides or {}), **({"votes": votes[0]} if votes else {})}
    record = load_record(record_path)
    if budget is not None and not isinstance(record["report"].get("budget"), dict):
        raise UsageError(f"{given('budget', budget)}: the record was not charged to a budget")
    absent = missing_plugin(record)
    if absent is not None:  # its plugin gone or of another version: nothing to replay it with
        return VerifyReport(record_path, record, (Check.skipped("mechanism", absent),))
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


def _named_seed_file(record: dict[str, Any]) -> str | None:
    """The seed file a record's command line names, where it is now (its random sample is
    then replayed, and a file that is not the run's differs against the record's
    commitment); None where it names none or the file is not there (not checked)."""
    argv = [str(arg) for arg in record.get("argv") or []]
    named = [argv[n + 1] for n, arg in enumerate(argv[:-1]) if arg == "--seed-file"]
    named += [arg.split("=", 1)[1] for arg in argv if arg.startswith("--seed-file=")]
    return named[-1] if named and os.path.isfile(named[-1]) else None


def _check_budget_options(
    overrides: dict[str, str] | None,
    seed_file: str | None,
    opening: str | None,
    heads: Sequence[str],
    budget: str | None,
) -> None:
    """A budget is checked against its records and heads, its records replayed from the
    votes given: the options of one record's replay mean nothing for it (refused, rather
    than ignored)."""
    given_options = {
        "input": next(iter((overrides or {}).values()), None) if overrides else None,
        "seed-file": seed_file,
        "opening": opening,
        "budget": budget,
    }
    for name, value in given_options.items():
        if value is not None:
            raise UsageError(
                f"{given(name, value)}: a budget file is checked against its records "
                f"({option('records')}) and published heads ({option('head')}), its records "
                f"replayed from their votes ({option('votes')})"
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

"""What pins each charge of a budget, and what rests on the owner's word.

Whoever holds a budget and its records can rewrite both consistently: a digest is a
checksum, not a seal. A charge is held by more than the owner's files when:

- *pinned*: a head published outside the owner's reach (``--head``: a CI log, a tag, a
  paper) or a record published so (``--published-records``: the head after its charge, which
  it holds) stands at or after its line: the chain cannot be rewritten before it unseen;
- *replayed*: its record was recomputed from its votes and outputs (``--votes``), as ``pate
  verify RECORD`` does, so the charge's parameters are the run's.

Everything else rests on the owner's files, and the verdict says so, charge by charge. What
no check shows: a charge appended after the last published head and removed together with
its record (only a log kept by someone else could).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from pate_cli.budget.claims import THIS, Claim
from pate_cli.budget.lines import charge_numbers
from pate_cli.common.spelling import option
from pate_cli.errors import PateError
from pate_cli.records.verdict import DIFFERS, NOT_CHECKED, Check, listed, numbered
from pate_cli.votes import file_sha256

Replayer = Callable[[dict[str, Any], str, str], list[Check]]
"""replayer(record, record path, votes path) -> the checks of ``pate verify RECORD``."""


def _pins(
    digests: list[str], heads: Sequence[str], claims: Sequence[Claim]
) -> tuple[list[tuple[int, str]], list[Check]]:
    """(place in the chain, what published it) of every published head and record found in
    the chain (``digests``: the id, then each line's digest); a published record whose head
    the chain does not pass through differs."""
    pins = [(digests.index(head), f"head {head[:12]}") for head in heads if head in digests]
    checks = []
    for claim in claims:
        if not (claim.published and claim.kind == THIS):
            continue
        head = claim.block.get("head")
        if head in digests:
            pins.append((digests.index(head), f"the published record {claim.where}"))
        else:
            checks.append(
                Check.made(
                    f"published record {claim.where}",
                    False,
                    "the chain does not pass through the head it holds: the history before "
                    "it was rewritten",
                )
            )
    return pins, checks


def pin_checks(
    lines: list[dict[str, Any]],
    budget_id: str,
    heads: Sequence[str],
    claims: Sequence[Claim],
    replayed: set[int],
) -> list[Check]:
    """Whether every charge is pinned or replayed (module docstring), naming the charges that
    rest on the owner's files."""
    digests = [budget_id] + [str(line["digest"]) for line in lines]
    pins, checks = _pins(digests, heads, claims)
    numbers = charge_numbers(lines)
    upto = max((place for place, _ in pins), default=0)
    pinned = [n for n in numbers[:upto] if n is not None]
    loose = [n for n in numbers[upto:] if n is not None and n not in replayed]
    again = sorted(n for n in numbers[upto:] if n is not None and n in replayed)
    said = []
    if pinned:
        by = max(pins)[1]
        said.append(f"{numbered(pinned)} pinned by {by} (charge {pinned[-1]} and before)")
    if again:
        said.append(f"{numbered(again)} replayed from their votes")
    if loose:
        checks.append(
            Check.skipped(
                "charges pinned",
                f"{numbered(loose)} rest{'s' if len(loose) == 1 else ''} on the owner's files: "
                "no head published later "
                f"({option('head')}) or published record ({option('published-records')}) pins "
                f"them, and their records were not replayed ({option('votes')})"
                + (f"; {'; '.join(said)}" if said else ""),
            )
        )
        return checks
    tail = (
        "a charge appended after the last published head and removed with its record would not show"
    )
    checks.append(
        Check.made(
            "charges pinned",
            True,
            ("; ".join(said) or "no charge to pin") + f" ({tail})",
        )
    )
    return checks


# A check a library replay leaves unmade without leaving the run unchecked: the call is what
# is replayed, not its command line.
_REPLAYED_ANYWAY = frozenset({"command line"})


def replay_checks(
    lines: list[dict[str, Any]],
    found: dict[str, Claim],
    votes: Sequence[str],
    replayer: Replayer | None,
) -> tuple[set[int], list[Check]]:
    """Each charge's record recomputed from its votes (the file of ``votes`` whose SHA-256 the
    record holds, or the only one given), as ``pate verify RECORD`` does: the charges
    replayed, every check of their records made (a replay that leaves one unmade, such as a
    random sample drawn from OS entropy, pins nothing), and a check naming any whose record
    does not replay."""
    if not votes or replayer is None:
        return set(), []
    by_digest = {file_sha256(path): path for path in votes}
    replayed: set[int] = set()
    failed, unmatched, missing = [], [], []
    for line, number in zip(lines, charge_numbers(lines), strict=True):
        claim = found.get(str(line.get("record_digest")))
        if number is None or claim is None or claim.kind != THIS:
            continue
        source = (claim.record.get("inputs") or {}).get("votes") or {}
        path = by_digest.get(str(source.get("sha256"))) or (
            votes[0] if len(votes) == 1 and "sha256" not in source else None
        )
        if path is None:
            unmatched.append(number)
            continue
        try:
            made = replayer(claim.record, claim.where, path)
        except PateError as error:  # a file it needs is not there: not replayed
            unmatched.append(number)
            missing.append(f"charge {number}: {error.message}")
            continue
        wrong = [check for check in made if check.status == DIFFERS]
        unmade = [c for c in made if c.status == NOT_CHECKED and c.name not in _REPLAYED_ANYWAY]
        if wrong:
            failed.append(f"charge {number} ({claim.where}): {wrong[0].name}: {wrong[0].detail}")
        elif unmade:  # in part: what was not checked (its random sample, say) pins nothing
            unmatched.append(number)
            missing.append(f"charge {number}: {unmade[0].name} not checked: {unmade[0].detail}")
        else:
            replayed.add(number)
    checks = []
    if failed or replayed:
        checks.append(
            Check.made(
                "records replayed",
                not failed,
                listed(failed)
                if failed
                else f"{numbered(sorted(replayed))} recomputed from their votes, every figure "
                "and file as recorded",
            )
        )
    if unmatched:
        why = listed(missing) if missing else "none of the votes given is the file they read"
        checks.append(
            Check.skipped(
                "records not replayed",
                f"{numbered(unmatched)}: {why}; their records are taken as written",
            )
        )
    return replayed, checks

"""Which record is which charge: ``pate budget show BUDGET --records DIR``.

Each charge with its number, the record file that names it (matched by the record's digest,
the one its line holds), its own epsilon (the charge alone, composed at the budget's delta)
and the running total after it (the charges up to it composed together, as the budget
composes them); then the records found that no charge names: this budget's (a charge
removed) or a budget's re-created at its place (``pate_cli.budget.claims``). What an auditor
joins by digest, made for them; ``pate verify`` checks it.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from pate_cli.budget.accounts import compose
from pate_cli.budget.book import Budget
from pate_cli.budget.claims import RE_CREATED, THIS, find_claims
from pate_cli.budget.lines import charge_numbers


@dataclass(frozen=True)
class ChargeRow:
    """One charge of the map."""

    number: int
    record: str | None
    """The record file naming it (None: no record found)."""
    epsilon: float
    """The charge alone, at the budget's delta."""
    running: float
    """The total with it and every charge before it."""

    def to_dict(self) -> dict[str, Any]:
        return {
            "charge_index": self.number,
            "record": self.record,
            "epsilon": self.epsilon,
            "running_epsilon": self.running,
        }


@dataclass(frozen=True)
class Unnamed:
    """A record found that no charge of the budget names."""

    record: str
    budget_id: str | None
    kind: str
    """``this``: it names this budget (its charge was removed); ``re-created``: it names a
    budget that was at this place or of this name."""

    def to_dict(self) -> dict[str, Any]:
        return {"record": self.record, "budget_id": self.budget_id, "kind": self.kind}


def charge_map(budget: Budget, folders: Sequence[str]) -> tuple[list[ChargeRow], list[Unnamed]]:
    """Every charge of ``budget`` with its record under ``folders`` (searched recursively),
    its own epsilon and the running total; and the records of no charge."""
    claims = find_claims(folders, budget.path, budget.header)
    by_digest = {claim.digest: claim for claim in claims if claim.kind == THIS}
    delta, conversion = budget.delta, budget.conversion
    rows, accounts, named = [], [], set()
    for line, number in zip(budget.lines, charge_numbers(budget.lines), strict=True):
        if number is None:
            continue
        accounts.append(line["account"])
        claim = by_digest.get(str(line.get("record_digest")))
        if claim is not None:
            named.add(claim.digest)
        rows.append(
            ChargeRow(
                number,
                None if claim is None else claim.where,
                compose([line["account"]], delta, conversion).epsilon,
                compose(accounts, delta, conversion).epsilon,
            )
        )
    unnamed = [
        Unnamed(claim.where, claim.block.get("id"), claim.kind)
        for claim in claims
        if (claim.kind == THIS and claim.digest not in named) or claim.kind == RE_CREATED
    ]
    return rows, unnamed

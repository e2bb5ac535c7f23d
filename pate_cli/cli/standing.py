"""The commit point of a run, and what stands after it.

A run's release is its files (``pate_cli.files.transaction``) and its budget charge
(``pate_cli.budget``), made visible in one commit: the charge is appended first, the files
after it, and a commit that fails rolls the files back and takes the charge back. Once the
commit is done (every file visible, the charge kept) the release stands whatever happens
next: it can no longer be taken back, and a second run would spend the budget again.

So a signal from the commit on stops nothing (``pate_cli.cli.interrupts.commit_point``):
the run prints its report, which for a release without files (``smooth-sensitivity
--budget``) is the release itself, and ends with one line naming what stands, exit 5
(``pate_cli.cli.app``).
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING

from pate_cli.cli.interrupts import commit_point

if TYPE_CHECKING:
    from pate_cli.budget.book import Pending
    from pate_cli.files.transaction import Transaction


@contextmanager
def committing(
    files: Transaction, pending: Pending | None, spends_budget: bool, budget: str | None
) -> Iterator[None]:
    """Around ``files.commit``: the charge kept once the files are visible (a signal held
    during the commit takes nothing back), and the commit point marked for signals.
    ``spends_budget``: the run draws noise (its files are a release); ``budget``: its
    ``--budget`` as given."""

    def stands() -> str | None:
        if not files.committed:
            return None
        if pending is not None:
            pending.keep()
        charge = None if pending is None or not pending.appended else pending.charge_index
        return standing(files.targets, charge, spends_budget, budget)

    with commit_point(stands):
        yield


def standing(
    targets: list[str], charge: int | None, spends_budget: bool, budget: str | None
) -> str | None:
    """What the line of a signal after the commit says stands: the files made visible (as
    the user named them) and the budget charge by its number; None when nothing was
    committed."""
    release = spends_budget or charge is not None
    items = list(targets)
    if charge is not None:
        if not items:  # the report printed is the release (smooth-sensitivity --budget)
            items.append("the release printed")
        items.append(f"its charge (charge {charge} of {budget})")
    if not items:
        return None
    listed = items[0] if len(items) == 1 else f"{', '.join(items[:-1])} and {items[-1]}"
    what = "the release was committed" if release else "its files were committed"
    return f"after {what}: {listed} {'stands' if len(items) == 1 else 'stand'}"

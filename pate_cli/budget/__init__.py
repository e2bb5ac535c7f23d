"""One privacy budget across releases: accounts that depend on no vote and no noise, composed
the tightest sound way (``accounts``), lines in a hash-chained file (``lines``), charged to it
under a lock by appends that survive faults (``book``), and each charge checked against the
record it names (``audit``)."""

from pate_cli.budget.accounts import Account, Group, Release, Total, account_of, compose
from pate_cli.budget.book import Budget, BudgetExceeded, Preview, as_budget
from pate_cli.budget.charges import Charge
from pate_cli.budget.storage import is_budget

__all__ = [
    "Account",
    "Budget",
    "BudgetExceeded",
    "Charge",
    "Group",
    "Preview",
    "Release",
    "Total",
    "account_of",
    "as_budget",
    "compose",
    "is_budget",
]

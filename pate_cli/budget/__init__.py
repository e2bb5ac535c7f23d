"""One privacy budget across releases: accounts that depend on no vote and no noise, composed
exactly (``accounts``), charged to an append-only, hash-chained file under a lock (``book``),
and checked line by line (``audit``)."""

from pate_cli.budget.accounts import Account, Release, Total, account_of, compose
from pate_cli.budget.book import Budget, BudgetExceeded, Charge, as_budget, is_budget

__all__ = [
    "Account",
    "Budget",
    "BudgetExceeded",
    "Charge",
    "Release",
    "Total",
    "account_of",
    "as_budget",
    "compose",
    "is_budget",
]

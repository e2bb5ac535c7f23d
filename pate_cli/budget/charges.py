"""What a run of ``analyze``, ``smooth_sensitivity`` or ``aggregate`` charges to a budget.

The charge depends only on the call's parameters, never on the votes or the noise, so it is
known (and refused when over the limit) before any noise is drawn:

- ``aggregate``: its mechanism on every query it may see (``max_queries`` caps them), every
  one answered;
- ``analyze`` and ``smooth_sensitivity`` stand for a release of the labels made from these
  votes (the mechanism's account on the queries analysed) and, when they draw a GNSS sample,
  that release too, at its order. A sample whose order, beta or sigma_ss would be chosen on
  the votes has no account that does not depend on them: such a run is refused, as is a run
  with a public ``seed`` (its outputs are not a private release).
"""

from __future__ import annotations

import os
from typing import Any

from pate_cli import spelling
from pate_cli.budget.accounts import Release
from pate_cli.budget.book import Budget, Charge, as_budget
from pate_cli.errors import UsageError
from pate_cli.mechanisms import Mechanism
from pate_cli.orders import as_orders

_FIXED = (
    "{what}: the release's order, beta and sigma_ss must be fixed in advance to be charged "
    "to a budget (a release tuned on the votes has no account that does not depend on "
    "them): {how}"
)


def _release(function: str, options: dict[str, Any]) -> Release | None:
    """The GNSS release the call draws, its parameters fixed in advance; None for none."""
    if function == "aggregate":
        return None
    if function == "analyze" and (not options.get("release") or options.get("data_independent")):
        return None
    beta, sigma_ss = options.get("beta"), options.get("sigma_ss")
    if function == "smooth_sensitivity":
        order = options.get("order")
        how = f"pass {spelling.options('order', 'beta', 'sigma-ss')}"
    else:
        grid = as_orders(options.get("orders"))
        order = float(grid[0]) if grid.size == 1 else None
        how = (
            f"pass one order ({spelling.option('orders')}), "
            f"{spelling.options('beta', 'sigma-ss')}, or {spelling.option('no-release')}"
        )
    if order is None or beta is None or sigma_ss is None:
        raise UsageError(_FIXED.format(what=spelling.option("budget"), how=how))
    return Release(float(order), float(beta), float(sigma_ss))


def charge_of(
    function: str,
    command: str,
    mechanism: Mechanism,
    num_queries: int,
    options: dict[str, Any],
    *,
    public_seed: bool = False,
    seed_commitment: str | None = None,
) -> Charge:
    """The charge of one call (module docstring).

    Raises:
        UsageError: the run has no account that depends on neither votes nor noise.
    """
    if public_seed:
        raise UsageError(
            f"{spelling.option('budget')}: a run whose noise is not private "
            f"({spelling.option('seed')}, or a caller's generator) is not a private release, "
            f"so there is nothing to charge (use {spelling.option('seed-file')}, or no seed)"
        )
    queries = num_queries
    if function == "aggregate" and options.get("max_queries") is not None:
        queries = min(queries, int(options["max_queries"]))
    release = _release(function, options)
    if function == "aggregate":
        purposes: tuple[str, ...] = ("aggregate-answer",)
        if mechanism.threshold_step is not None:
            purposes = ("aggregate-threshold", *purposes)
    else:
        purposes = () if release is None else ("gnss-sample",)
    return Charge(
        command,
        mechanism,
        queries,
        half_even=bool(options.get("half_even", False)),
        release=release,
        seed_commitment=seed_commitment if purposes else None,
        purposes=purposes,
    )


def checked_charge(
    budget: Budget | str | os.PathLike[str],
    function: str,
    command: str,
    mechanism: Mechanism,
    num_queries: int,
    options: dict[str, Any],
    *,
    seed: object = None,
    seed_file: str | os.PathLike[str] | None = None,
) -> Charge:
    """The charge of one call, refused before any noise is drawn: over the budget's limit
    (``BudgetExceeded``), without an account, or from a seed file already charged for the
    same noise. A seed file is read only if it exists (a new one is created by the run, and
    was charged nowhere); nothing is written.

    Raises:
        BudgetExceeded, UsageError: as ``charge_of`` and ``Budget.check``.
    """
    from pate_cli.seeds import from_seed_file

    commitment = None
    if seed_file is not None and os.path.isfile(seed_file):
        commitment = from_seed_file(seed_file, create=False).commitment
    charge = charge_of(
        function,
        command,
        mechanism,
        num_queries,
        options,
        public_seed=seed is not None,
        seed_commitment=commitment,
    )
    as_budget(budget).check(charge)
    return charge

"""The accountant's pass as a pair, in the library's words: ``partial_account`` of a block of
votes on any worker, ``merge_partials`` of the parts, ``finish_account`` of the merged part
(``pate_cli.accountant.partials``). The figures are ``analyze``'s, to the last bit.

    parts = [pate.partial_account(block, mechanism, start=s) for s, block in blocks]
    account = pate.finish_account(pate.merge_partials(parts), mechanism, delta=1e-5)
    account.data_dependent.epsilon, account.guaranteed.epsilon
"""

from __future__ import annotations

from numpy.typing import ArrayLike

from pate_cli.accountant.partials import Partial, merge_partials
from pate_cli.accountant.partials import finish_account as _finish
from pate_cli.accountant.partials import partial_account as _partial
from pate_cli.accountant.run import RunAccount
from pate_cli.common import checks
from pate_cli.jobs.analysis import run_inputs
from pate_cli.jobs.arguments import read_votes, reading
from pate_cli.mechanisms import Mechanism, as_mechanism
from pate_cli.orders import as_orders
from pate_cli.votes import Input, VoteFormat, Votes

__all__ = ["Partial", "finish_account", "merge_partials", "partial_account"]


def partial_account(
    votes: Votes | Input,
    mechanism: Mechanism,
    *,
    start: int = 0,
    baseline: Input | None = None,
    half_even: bool = False,
    format: str | VoteFormat | None = None,
    teachers: int | None = None,
    num_classes: int | None = None,
    member: str | None = None,
) -> Partial:
    """The part of one block of a run's queries, the block beginning at query ``start``:
    ``votes`` (a shard's file, an array or ``Votes``, read as ``analyze`` reads votes) and
    ``baseline`` (Interactive-GNMax: the block's rows) as ``analyze``'s."""
    start = checks.whole(start, "start", 0, 1 << 62)
    mechanism = as_mechanism(mechanism)
    block = read_votes(votes, reading(format, teachers, num_classes, member, None))
    baseline_array, _ = run_inputs(block, baseline, None)
    return _partial(
        block.counts, mechanism, start=start, baseline=baseline_array, half_even=half_even
    )


def finish_account(
    merged: Partial,
    mechanism: Mechanism,
    *,
    delta: float,
    orders: str | ArrayLike | None = None,
    conversion: str = "classic",
) -> RunAccount:
    """Every figure of the run whose parts ``merged`` holds (``merge_partials``), as
    ``analyze`` (without a release) computes it: ``.data_dependent``, ``.data_independent``,
    ``.worst_case``, ``.guaranteed``, ``.exact``, ``.rdp`` (each ``EpsilonResult`` with its
    order and its curve)."""
    checks.delta(delta)
    mechanism = as_mechanism(mechanism)
    grid, kind = as_orders(orders), checks.conversion(conversion)
    return _finish(merged, mechanism, grid, delta, kind)

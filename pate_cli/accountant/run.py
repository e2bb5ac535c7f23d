"""The whole account of a run: the accountant's one entry for a command.

``run_account`` reads the votes once for the per-query terms (``terms.py``, shown as
"accounting"), then makes every figure of those terms: the privacy-loss-distribution figure
when one was planned (``pld.py``), the composed RDP (``compose.py``), the exact
data-independent figures of the run and of its worst case or why there are none, the
guaranteed RDP, and each curve's (epsilon, delta) at its best order (``figures.py``).
``pate_cli.jobs`` enters the accountant here and turns the result into a report; nothing here
reads a file, prints or knows a report.
"""

from __future__ import annotations

from collections.abc import Callable
from contextlib import AbstractContextManager, nullcontext
from dataclasses import dataclass
from typing import Any

import numpy as np
from numpy.typing import NDArray

from pate_cli.accountant.compose import RdpAccount, account_terms
from pate_cli.accountant.figures import (
    EpsilonResult,
    ExactBound,
    epsilon_result,
    exact_bounds,
    guaranteed_rdp,
)
from pate_cli.accountant.pld import PldFigure, PldPlan, planned_pld_figure
from pate_cli.accountant.terms import FloatArray, QueryTerms, query_terms
from pate_cli.choices import Conversion
from pate_cli.mechanisms import Mechanism

Progress = Callable[[str, int], AbstractContextManager[Callable[[int], None] | None]]
"""progress(description, total) -> a context manager yielding advance(done), or None."""


def no_progress(description: str, total: int) -> AbstractContextManager[None]:
    """A ``Progress`` that shows nothing."""
    return nullcontext()


@dataclass(frozen=True)
class RunAccount:
    """Every figure of one run, from its per-query terms."""

    terms: QueryTerms
    """The per-query terms of the queries seen, for the release and the ledger."""
    rdp: RdpAccount
    """The composed RDP totals, step by step."""
    data_dependent: EpsilonResult
    data_independent: EpsilonResult
    worst_case: EpsilonResult
    guaranteed: EpsilonResult | None
    """The joint (non-averaged) bound; ``data_dependent`` without a threshold step; None when
    not asked for."""
    exact: ExactBound | None
    exact_worst_case: ExactBound | None
    exact_absent: str | None
    """Why there is no exact figure; None where there is one."""
    pld: PldFigure | None
    """The privacy-loss-distribution figure; None when none was planned."""


def run_account(
    votes: Any,
    mechanism: Mechanism,
    orders: FloatArray,
    delta: float,
    conversion: Conversion,
    *,
    num_queries: int,
    baseline: FloatArray | None = None,
    answered: NDArray[np.bool_] | None = None,
    data_independent: bool = False,
    half_even: bool = False,
    progress: Progress | None = None,
    guaranteed: bool = True,
    terms: QueryTerms | None = None,
    pld: PldPlan | None = None,
    grouped: Any = None,
) -> RunAccount:
    """Account a run of ``mechanism`` on ``votes`` (counts, Q x C) and convert it.

    ``guaranteed`` False leaves out the joint bound, for callers that show none of it.
    ``terms``: the queries' terms when the caller has them (those of the queries seen), so
    that the votes are not walked again; ``pld``: the privacy-loss-distribution figure as
    ``pld.check_pld`` accepted it, before any work (its q-bound pairs' column is read in the
    same pass as the terms). ``answered``: a realised run's mask (L,), L <= Q. ``grouped``:
    the same votes held by distinct row where they are (``Votes.grouped``), which the terms'
    pass reads instead of the rows.
    """
    show = progress or no_progress
    if terms is None:
        with show("accounting", num_queries) as advance:
            terms = query_terms(
                votes if grouped is None else grouped,
                mechanism,
                num_seen=None if answered is None else len(answered),
                baseline=baseline,
                half_even=half_even,
                neighbour=None if pld is None else pld.neighbour,
                progress=advance,
            )
    figure: PldFigure | None = None
    if pld is not None:
        with show("privacy-loss distributions", terms.num_seen) as advance:
            figure = planned_pld_figure(votes, mechanism, pld, terms, delta, advance=advance)
    rdp = account_terms(
        mechanism,
        terms,
        orders,
        num_queries=num_queries,
        answered=answered,
        data_independent=data_independent,
    )
    exact, exact_worst_case, exact_absent = exact_bounds(
        mechanism, num_queries, terms.num_seen, answered, delta, terms.threshold_sensitivity
    )
    joint: FloatArray | None = None
    if guaranteed and mechanism.threshold_step is not None and not data_independent:
        # Never below the paper's figure: both bound the run (the joint one without the
        # averaging), so their maximum does too, and the two never tell different stories.
        joint = np.maximum(guaranteed_rdp(mechanism, terms, orders), rdp.data_dependent)
    dependent = epsilon_result(orders, rdp.data_dependent, delta, conversion)
    independent = epsilon_result(orders, rdp.data_independent, delta, conversion)
    worst_case = epsilon_result(orders, rdp.worst_case, delta, conversion)
    joint_result = dependent if guaranteed else None
    if joint is not None:
        joint_result = epsilon_result(orders, joint, delta, conversion)
    return RunAccount(
        terms=terms,
        rdp=rdp,
        data_dependent=dependent,
        data_independent=independent,
        worst_case=worst_case,
        guaranteed=joint_result,
        exact=exact,
        exact_worst_case=exact_worst_case,
        exact_absent=exact_absent,
        pld=figure,
    )

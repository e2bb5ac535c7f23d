"""The figures of a run besides the composed RDP: (epsilon, delta) at the best order, the
guaranteed (non-averaged) RDP of Confident-GNMax, and the exact data-independent epsilon.

Each reads the per-query terms (``terms.py``) or the parameters and counts alone.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np
from numpy.typing import NDArray

from pate_cli.accountant.terms import FloatArray, QueryTerms
from pate_cli.choices import Conversion
from pate_cli.core import conversion, exact, exact_pure
from pate_cli.engines import map_blocks
from pate_cli.mechanisms import Mechanism, UnsupportedError, assert_never
from pate_cli.mechanisms.steps import (
    GaussianPart,
    Part,
    PurePart,
    PureParts,
    ThresholdStep,
    joined,
)


def delta_warnings(delta: float, num_queries: int) -> list[str]:
    """A warning when delta is no small probability for this many queries (above 1/Q)."""
    if num_queries > 0 and delta > 1 / num_queries:
        return [
            f"delta {delta:g} is above 1/num_queries = {1 / num_queries:.3g}: an (epsilon, "
            "delta) guarantee with such a delta allows a query's votes to leak outright; "
            "choose delta well below 1/num_queries"
        ]
    return []


def eps_curve(kind: Conversion, orders: FloatArray, rdp: FloatArray, delta: float) -> FloatArray:
    """Epsilon per order under the chosen conversion."""
    if kind is Conversion.CLASSIC:
        return conversion.eps_curve_classic(orders, rdp, delta)
    if kind is Conversion.IMPROVED:
        return conversion.eps_curve_improved(orders, rdp, delta)
    assert_never(kind)


@dataclass(frozen=True)
class EpsilonResult:
    """An RDP curve and the (epsilon, delta) guarantee at its best order."""

    epsilon: float
    """Smallest epsilon over the orders."""
    order: float
    """The order that attains it (the first, on ties)."""
    order_index: int
    """Its index in the order list."""
    rdp: FloatArray
    """Total RDP per order, shape (K,)."""
    eps: FloatArray
    """Epsilon per order, shape (K,)."""
    at_grid_edge: bool
    """True when the best order is the smallest or largest of the grid."""


def epsilon_result(
    orders: FloatArray, rdp: FloatArray, delta: float, kind: Conversion
) -> EpsilonResult:
    """Convert an RDP curve to epsilon at the best order."""
    raw = eps_curve(kind, orders, rdp, delta)
    index = conversion.best_order(raw)
    order = float(orders[index])
    edge = len(orders) > 1 and order in (float(orders.min()), float(orders.max()))
    # The improved bound can dip below 0; the order is chosen on the raw curve
    # (as dp_accounting) and epsilon is never reported below 0.
    eps = np.maximum(raw, 0.0)
    return EpsilonResult(float(eps[index]), order, index, rdp, eps, bool(edge))


# (margin, log q) pairs costed per block: (block, K) temporaries of a few MB at most.
_PAIR_BLOCK = 4096


def guaranteed_rdp(
    mechanism: Mechanism,
    terms: QueryTerms,
    orders: FloatArray,
) -> FloatArray:
    """The run's RDP without averaging over the threshold noise: per query, the Renyi
    divergence of the joint (threshold outcome, label) by the chain rule
    (the threshold step's ``joint`` with the answer step's cost), never above the
    data-independent cost of both steps (Prop. 8), summed over the queries seen.

    Each distinct (margin, log q) pair is costed once, a block of pairs at a time (found
    among the distinct rows' pairs, where the terms keep them: the same pairs and counts).

    Shapes: terms (Q,), orders (K,) -> (K,).
    """
    assert terms.margins is not None and terms.logq is not None
    step, answer_step = mechanism.threshold_step, mechanism.answer_step
    if step is None:
        raise UnsupportedError(f"{mechanism.name}: no threshold step to guarantee over")
    orders = np.asarray(orders, dtype=np.float64)
    rows = terms if terms.distinct is None else terms.distinct.terms
    assert rows.margins is not None and rows.logq is not None
    keyed = np.empty(rows.margins.size, dtype=np.complex128)
    keyed.real, keyed.imag = rows.margins, rows.logq  # (not z + 1j * logq: 0 * inf)
    if terms.distinct is None:
        pairs, counts = np.unique(keyed, return_counts=True)
    else:
        pairs, of_row = np.unique(keyed, return_inverse=True)
        held = np.bincount(of_row.reshape(-1), weights=terms.distinct.counts, minlength=pairs.size)
        counts = held.astype(np.int64)
    moves = terms.threshold_sensitivity  # 2 where half to even moves the rounded top by 2
    ceiling = step.data_independent(orders, moves) + answer_step.data_independent(orders)
    answer_cost = answer_step.cost(orders)
    starts = range(0, pairs.size, _PAIR_BLOCK)

    def arguments(index: int) -> tuple[Any, ...]:
        rows = slice(starts[index], starts[index] + _PAIR_BLOCK)
        return step, answer_cost, orders, moves, ceiling, pairs[rows], counts[rows]

    total = np.zeros(orders.size)
    for part in map_blocks(_joint_block, len(starts), arguments):
        total += part  # in block order, wherever each block ran
    return total


def _joint_block(
    step: ThresholdStep,
    answer_cost: Callable[[FloatArray], FloatArray],
    orders: FloatArray,
    moves: int,
    ceiling: FloatArray,
    pairs: NDArray[np.complex128],
    counts: NDArray[np.int64],
) -> FloatArray:
    """One block of ``guaranteed_rdp``'s (margin, log q) pairs: their joint cost, each at
    most ``ceiling``, weighted by ``counts``. Shapes: pairs (B,) -> (K,)."""
    joint = step.joint(pairs.real, orders, answer_cost(pairs.imag), moves)
    # numpy's own loop, not BLAS: a BLAS product's last bits follow its thread count.
    total: FloatArray = np.einsum("b,bk->k", counts.astype(np.float64), np.minimum(joint, ceiling))
    return total


@dataclass(frozen=True)
class ExactBound:
    """A run's exact (epsilon, delta) curve, read at delta: no Renyi DP in between
    (``pate_cli.core.exact``, ``pate_cli.core.exact_pure``). A function of the parameters
    and the counts alone."""

    epsilon: float
    method: str
    """"gaussian" (GNMax family: mu-Gaussian DP), "pure-dp-optimal" (LNMax: pure DP of one
    epsilon0) or "pure-dp-heterogeneous" (pure-DP steps of several epsilon0)."""
    queries: int
    """Queries whose threshold step (or whole step, without one) is composed."""
    answered: int
    """Answer steps composed: every query (worst case) or a realised run's mask count."""
    mu: float | None = None
    eps0: float | None = None
    parts: tuple[tuple[float, int], ...] = ()
    """"pure-dp-heterogeneous": each (epsilon0, count) composed."""

    def to_json_dict(self) -> dict[str, object]:
        out: dict[str, object] = {
            "epsilon": self.epsilon,
            "method": self.method,
            "queries": self.queries,
            "answered": self.answered,
        }
        if self.mu is not None:
            out["mu"] = self.mu
        if self.eps0 is not None:
            out["eps0"] = self.eps0
        if self.parts:
            out["parts"] = [{"eps0": eps0, "count": count} for eps0, count in self.parts]
        return out


def exact_bound(
    mechanism: Mechanism,
    queries: int,
    answered: int,
    delta: float,
    threshold_sensitivity: int = 1,
) -> ExactBound:
    """The exact data-independent epsilon of ``queries`` threshold steps and ``answered``
    answer steps (the ``exact`` family of figures).

    GNMax family: mu^2 = queries s^2 / sigma1^2 + 2 answered / sigma^2, the composition of
    Gaussian mechanisms (the rounded top count moves by s = ``threshold_sensitivity``, 1 but
    2 under half to even at exact halves; a histogram by sqrt(2) in L2; Dong, Roth and Su
    2022, Corollary 3.3). LNMax: the optimal composition of ``answered`` (2 gamma)-DP steps
    (Kairouz, Oh and Viswanath 2015, Theorem 3.5). Pure-DP steps of several epsilon0: their
    optimal composition (Murtagh and Vadhan 2016, Theorem 1.5; ``core.exact_pure``).

    Raises:
        UnsupportedError: no exact account joins the steps' parts (Gaussian and pure DP
            together), in words that say what each part is (:func:`no_exact_reason`).
    """
    part = joined(_parts(mechanism, queries, answered, threshold_sensitivity))
    if part is None:
        raise UnsupportedError(no_exact_reason(mechanism, threshold_sensitivity))
    return part.read(_ExactFigure(queries, answered, delta))


def exact_or_reason(
    mechanism: Mechanism,
    queries: int,
    answered: int,
    delta: float,
    threshold_sensitivity: int = 1,
) -> tuple[ExactBound | None, str | None]:
    """``exact_bound``'s figure, or None and why there is none (its steps' parts have no
    exact joint account): a run without it still runs, its publishable figure the Renyi-DP
    worst case."""
    try:
        return exact_bound(mechanism, queries, answered, delta, threshold_sensitivity), None
    except UnsupportedError as error:
        return None, error.message


def exact_bounds(
    mechanism: Mechanism,
    num_queries: int,
    seen: int,
    answered: NDArray[np.bool_] | None,
    delta: float,
    moves: int,
) -> tuple[ExactBound | None, ExactBound | None, str | None]:
    """The exact bound of the run (the queries it saw and answered) and of the worst case
    (every query answered): the same bound when the run answered every query; None for
    both where the steps' parts have no exact joint account, and why."""
    answered_count = seen if answered is None else int(np.count_nonzero(answered))
    exact, absent = exact_or_reason(mechanism, seen, answered_count, delta, moves)
    if (seen, answered_count) == (num_queries,) * 2:
        return exact, exact, absent
    worst, worst_absent = exact_or_reason(mechanism, num_queries, num_queries, delta, moves)
    return exact, worst, absent or worst_absent


def no_exact_reason(mechanism: Mechanism, threshold_sensitivity: int = 1) -> str:
    """Why ``mechanism``'s steps have no exact joint account, naming what each part is."""
    step = mechanism.threshold_step
    named = (
        []
        if step is None
        else [(f"threshold step {step.name!r}", step.part(1, threshold_sensitivity))]
    )
    named.append((f"answer step {mechanism.answer_step.name!r}", mechanism.answer_step.part(1)))
    what = " and ".join(f"the {name} ({part.read(_Described())})" for name, part in named)
    return (
        f"{mechanism.name}: no exact account joins {what}: its exact data-independent figure "
        "is absent, and its publishable figure is the Renyi-DP worst case"
    )


def _parts(
    mechanism: Mechanism, queries: int, answered: int, threshold_sensitivity: int
) -> list[Part]:
    """The steps' shares of an exact account: the threshold step's on ``queries`` queries
    (when there is one), the answer step's on ``answered``."""
    step = mechanism.threshold_step
    parts = [] if step is None else [step.part(queries, threshold_sensitivity)]
    return [*parts, mechanism.answer_step.part(answered)]


class _Described:
    """What a part is, per step, in a few words (a ``PartReader``): "Gaussian DP, mu 0.025
    a step", "pure 0.01-DP a step"."""

    def gaussian(self, part: GaussianPart) -> str:
        return f"Gaussian DP, mu {part.mu:.3g} a step"

    def pure(self, part: PurePart) -> str:
        return f"pure {part.epsilon0:.3g}-DP a step"

    def pure_parts(self, part: PureParts) -> str:
        each = ", ".join(f"{share.epsilon0:.3g}" for share in part.shares)
        return f"pure DP of epsilon0 {each}"


@dataclass(frozen=True)
class _ExactFigure:
    """The exact figure of the steps' composed share (a ``PartReader``), read at ``delta``."""

    queries: int
    answered: int
    delta: float

    def gaussian(self, part: GaussianPart) -> ExactBound:
        # mu-Gaussian DP read at delta (Dong, Roth and Su 2022, Corollary 2.13).
        mu = part.mu
        epsilon = exact.gaussian_epsilon(mu, self.delta)
        return ExactBound(epsilon, "gaussian", self.queries, self.answered, mu=mu)

    def pure(self, part: PurePart) -> ExactBound:
        # The optimal composition of ``count`` epsilon0-DP steps (Kairouz, Oh and Viswanath
        # 2015, Theorem 3.5).
        epsilon = exact.pure_composition_epsilon(part.epsilon0, part.count, self.delta)
        return ExactBound(
            epsilon, "pure-dp-optimal", self.queries, self.answered, eps0=part.epsilon0
        )

    def pure_parts(self, part: PureParts) -> ExactBound:
        # The optimal composition of pure-DP steps of several epsilon0 (Murtagh and Vadhan
        # 2016, Theorem 1.5), bounded above (core.exact_pure).
        shares = tuple((share.epsilon0, share.count) for share in part.shares)
        epsilon = exact_pure.heterogeneous_epsilon(shares, self.delta)
        return ExactBound(
            epsilon, "pure-dp-heterogeneous", self.queries, self.answered, parts=shares
        )

"""What every smooth-sensitivity release shares: the order it is made at and the costs
there (``AtOrder``), how it is drawn (``Draw``), the pass over the votes that bounds its local
sensitivity (``Walk``), and the sampled GNSS release of a total's local sensitivities
(``sampled``: beta and sigma_ss, Theorem 23's cost, one draw). ``pate_cli.release.gnss``
(the GNMax family's release) and ``pate_cli.release.laplace`` (LNMax's) are made of them.

The walk takes the queries held by row (``HeldRows``): by distinct row where the votes are
held so, else (without a baseline) by distinct sorted row, found a chunk at a time; each row
is walked once and its terms weighted by how many queries hold it. The weights are whole
numbers, so every term is the queries' own, and on votes of one chunk every sum too, to the
last bit. Over several chunks the queries were summed chunk by chunk and the rows are summed
once: the same non-negative terms in another order, so a total can move in its last bits
(measured: the smooth sensitivity 10 ulps up on 1e7 rows in 153 chunks), neither order
being above the other in general. Where the sorted rows outgrow ``SORTED_CELLS``, the walk
goes chunk by chunk.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np
from numpy.typing import NDArray

from pate_cli.accountant.compose import StepCosts, compose
from pate_cli.accountant.figures import eps_curve
from pate_cli.accountant.terms import QueryTerms
from pate_cli.choices import Conversion
from pate_cli.common.spelling import given
from pate_cli.core import smooth as smooth_core
from pate_cli.core.compact import Compact, DenseRows, parts
from pate_cli.core.distinct import DistinctRows, RowTable
from pate_cli.core.horizon import Horizon
from pate_cli.errors import UsageError
from pate_cli.files.seeds import Noise, os_entropy
from pate_cli.mechanisms import Mechanism
from pate_cli.mechanisms.steps import step_names
from pate_cli.release.conditions import ConditionError
from pate_cli.release.model import GnssRelease, not_private_note, on_grid

FloatArray = NDArray[np.float64]

# The most values the rows sorted and grouped by ``HeldRows.sorted`` may hold (256 MB of
# float64); votes with more distinct sorted rows are walked a chunk at a time.
SORTED_CELLS = 1 << 25


def epsilon_at(kind: Conversion, order: float, rdp: float, delta: float) -> float:
    """Epsilon of an RDP value at one order under the chosen conversion (never below 0)."""
    value = eps_curve(kind, np.array([order]), np.array([max(rdp, 0.0)]), delta)[0]
    return float(max(value, 0.0))


def _beta_for_sigma_ss(ls: FloatArray, rdp: float, order: float, sigma_ss: float) -> float:
    """The reference's beta grid, minimising the release cost with sigma_ss fixed (its first
    beta when every cost is infinite, as with a vanishing sigma_ss: the release then reports
    an infinite cost, as it does for a beta given)."""
    grid = smooth_core.beta_grid(order)
    best, best_cost = float(grid[0]), math.inf
    for beta in grid:
        cost = rdp + smooth_core.rdp_gnss(beta, sigma_ss, order)
        cost += 2 * smooth_core.smooth_sensitivity(ls, beta) * sigma_ss
        if cost < best_cost:
            best, best_cost = float(beta), cost
    return best


@dataclass(frozen=True)
class AtOrder:
    """The order of the release, how RDP there becomes epsilon, and the analysis' step costs
    at every order (``steps``, with ``order_index`` the index of ``order``) when it passes
    them."""

    order: float
    delta: float
    conversion: Conversion
    steps: StepCosts | None
    order_index: int | None

    def fields(
        self,
        mechanism: Mechanism,
        terms: QueryTerms,
        weights: FloatArray | None,
        data_independent: tuple[bool, bool],
        num_seen: int,
    ) -> dict[str, Any]:
        """The release's fields known before its sensitivity: the costs at ``order`` (read
        from the analysis' steps when it passes them, else composed), with the steps flagged
        in ``data_independent`` (threshold, answer) at their data-independent bound."""
        if self.steps is not None and self.order_index is not None:
            at_order = self.steps.at(self.order_index, data_independent=data_independent)
        else:
            orders = np.array([self.order])
            at_order = compose(
                mechanism, terms, orders, weights=weights, data_independent=data_independent
            )
        rdp_at_order = float(at_order.data_dependent[0])
        rdp_independent = float(at_order.data_independent[0])
        return {
            "order": self.order,
            "data_independent_steps": data_independent,
            "step_names": step_names(mechanism.threshold_step, mechanism.answer_step),
            "expected_answered": float(num_seen if weights is None else weights.sum()),
            "rdp_at_order": rdp_at_order,
            "epsilon_data_dependent": epsilon_at(
                self.conversion, self.order, rdp_at_order, self.delta
            ),
            "epsilon_data_independent_at_order": epsilon_at(
                self.conversion, self.order, rdp_independent, self.delta
            ),
        }


@dataclass(frozen=True)
class Draw:
    """How the release is sampled: beta and sigma_ss when fixed (None: chosen on the votes),
    the source of its noise, and whether its order was chosen on the votes."""

    beta: float | None
    sigma_ss: float | None
    noise: Noise | None
    order_chosen_on_data: bool


@dataclass(frozen=True)
class Walk:
    """The pass over the votes that bounds the local sensitivity, a chunk at a time."""

    num_teachers: int
    chunk_size: int
    progress: Callable[[int], None] | None

    def local_sensitivity(
        self,
        counts: FloatArray | Compact | DenseRows | DistinctRows,
        num_seen: int,
        block_bound: Callable[[Any, slice, Horizon], Horizon],
        beta: float,
    ) -> Horizon:
        """The local sensitivity of the total RDP at each distance d, over the first
        ``num_seen`` queries: ``block_bound(block, rows, horizon)`` adds each block of whole
        counts (its rows of the votes given as a slice), each walked only over the distances
        that can change the smooth sensitivity at a beta of at least ``beta``
        (``core.horizon``). The horizon after the last block holds the total there and its
        bound past them."""
        # Theorem 24: the bound of the total is the sum of the per-query bounds, chunk by chunk.
        horizon = Horizon.start(beta, self.num_teachers, num_seen)
        for start in range(0, num_seen, self.chunk_size):
            stop = min(start + self.chunk_size, num_seen)
            horizon = block_bound(whole_counts(counts[start:stop]), slice(start, stop), horizon)
            if self.progress is not None:
                self.progress(stop - start)
        return horizon

    def walked(
        self,
        counts: FloatArray | DistinctRows,
        num_seen: int,
        bound: Callable[..., Horizon],
        beta: float,
        baseline: FloatArray | None,
        answered: NDArray[np.bool_] | None,
        *,
        by_row: bool,
    ) -> Horizon:
        """The local sensitivity of the first ``num_seen`` queries: ``bound(rows, their
        baseline, their answered weights, how many queries each row stands for (None: one),
        horizon)`` of each block. With ``by_row``, the queries by distinct row where the
        votes are held so, else by distinct sorted row without a baseline (``HeldRows``);
        otherwise, or past ``SORTED_CELLS``, chunk by chunk."""
        held = None
        if by_row and isinstance(counts, DistinctRows):
            held = HeldRows.of(counts, num_seen, baseline, answered)
        elif by_row and baseline is None:
            held = HeldRows.sorted(counts, num_seen, answered, self.chunk_size)
        if held is not None:

            def held_bound(rows: HeldRows, horizon: Horizon) -> Horizon:
                return bound(rows.rows, rows.baseline, rows.answered, rows.counts, horizon)

            return self.held_local_sensitivity(held, num_seen, held_bound, beta)
        mask = None if answered is None else answered.astype(np.float64)

        def block_bound(block: FloatArray, rows: slice, horizon: Horizon) -> Horizon:
            block_baseline = None if baseline is None else baseline[rows]
            return bound(block, block_baseline, None if mask is None else mask[rows], None, horizon)

        return self.local_sensitivity(counts, num_seen, block_bound, beta)

    def held_local_sensitivity(
        self,
        held: HeldRows,
        num_seen: int,
        bound: Callable[[HeldRows, Horizon], Horizon],
        beta: float,
    ) -> Horizon:
        """``local_sensitivity`` of queries held by distinct row: blocks of ``chunk_size``
        rows, each row weighted by its count (``bound(rows, horizon)``): the same terms as the
        queries' own, each evaluated once. A block's queries are its rows' counts summed, so
        the horizon bounds the queries still to come as it does chunk by chunk."""
        # Theorem 24: the bound of the total is the sum of the per-query bounds, here of the
        # distinct rows' times their counts.
        horizon = Horizon.start(beta, self.num_teachers, num_seen)
        for start in range(0, held.counts.size, self.chunk_size):
            rows = held.block(slice(start, start + self.chunk_size))
            horizon = bound(rows, horizon)
            if self.progress is not None:
                self.progress(int(rows.counts.sum()))
        return horizon


@dataclass(frozen=True)
class HeldRows:
    """The queries seen, held by distinct row (of the votes, or of the votes and the
    baseline side by side): the walk evaluates each row once, its terms weighted by how many
    queries hold it. Every weight is a whole number (a count, a sum of the answered mask), so
    its sums are exact in any order. Shapes: U rows, C classes."""

    rows: FloatArray  # the distinct rows of whole counts (U, C)
    counts: FloatArray  # how many queries seen hold each (U,), each at least 1
    baseline: FloatArray | None  # each row's baseline (U, C), beside the votes
    answered: FloatArray | None  # how many of its queries the realised run answered (U,)

    @classmethod
    def of(
        cls,
        counts: DistinctRows,
        seen: int,
        baseline: FloatArray | None,
        answered: NDArray[np.bool_] | None,
    ) -> HeldRows:
        """The distinct rows of the first ``seen`` queries (with their baseline), their
        counts, and the answered mask summed per row."""
        rows, row_baseline = (counts, None) if baseline is None else counts.paired(baseline)
        held = rows.prefix(seen)
        num = held.num_rows
        index = held.inverse[:seen]
        summed = None
        if answered is not None:
            summed = np.bincount(index, weights=answered[:seen], minlength=num).astype(np.float64)
        return cls(
            np.asarray(whole_counts(held.rows), dtype=np.float64),
            held.counts.astype(np.float64),
            None if row_baseline is None else row_baseline[:num],
            summed,
        )

    def block(self, rows: slice) -> HeldRows:
        """The rows ``rows`` and their weights."""

        def part(values: FloatArray | None) -> FloatArray | None:
            return None if values is None else values[rows]

        return HeldRows(
            self.rows[rows], self.counts[rows], part(self.baseline), part(self.answered)
        )

    @classmethod
    def sorted(
        cls,
        counts: FloatArray | Compact | DenseRows | DistinctRows,
        seen: int,
        answered: NDArray[np.bool_] | None,
        chunk_size: int,
    ) -> HeldRows | None:
        """The queries seen grouped by their row sorted in non-increasing order, read a
        chunk at a time; None for compact votes, or past ``SORTED_CELLS`` values of distinct
        sorted rows (a table of verified 64-bit hashes, ``core.distinct.RowTable``, which
        also gives up at a collision), or when no query was seen. Without a baseline a
        query's local sensitivity reads its votes only through their sorted row: the walk of
        Algorithm 4 runs on the sorted votes, and the threshold step's statistic is their
        largest count."""
        if isinstance(counts, Compact | DenseRows) or seen == 0:
            return None
        table = RowTable(SORTED_CELLS // max(int(counts.shape[1]), 1))
        for start in range(0, seen, chunk_size):
            block = whole_counts(np.asarray(counts[start : min(start + chunk_size, seen)]))
            assert not isinstance(block, Compact)
            # Negated twice: a count of 0 comes back as +0.0, one set of bytes a value.
            if not table.add(-np.sort(-block, axis=1)):
                return None
        rows, inverse = table.distinct()
        index = inverse.astype(np.intp)
        num = rows.shape[0]
        summed = None
        if answered is not None:
            summed = np.bincount(index, weights=answered[:seen], minlength=num).astype(np.float64)
        held = np.bincount(index, minlength=num).astype(np.float64)
        return cls(np.asarray(rows, dtype=np.float64).reshape(num, -1), held, None, summed)


def smallest_beta(draw: Draw, order: float) -> float:
    """The smallest beta the release reads at ``order``: the one given, or the reference's
    grid's first (``core.smooth.beta_grid``)."""
    if draw.beta is not None:
        return float(draw.beta)
    return float(smooth_core.beta_grid(order).min())


def num_seen(counts: FloatArray | DistinctRows, answered: NDArray[np.bool_] | None) -> int:
    """The queries the run saw: every one, or those of the answered mask (a prefix)."""
    return len(counts) if answered is None else answered.shape[0]


def whole_counts(block: FloatArray | Compact) -> FloatArray | Compact:
    """A block of votes as whole counts, or the error: a teacher change moves one vote."""
    block = block if isinstance(block, Compact) else np.asarray(block, dtype=np.float64)
    values, _, _ = parts(block)
    if np.any(np.isfinite(values) & (values != np.round(values))):
        raise ConditionError(
            "the smooth sensitivity needs whole vote counts (a teacher change moves one vote); "
            "these votes are fractional"
        )
    return block


def sampled(
    walked: Horizon, fields: dict[str, Any], warnings: list[str], at: AtOrder, draw: Draw
) -> GnssRelease:
    """beta and sigma_ss (given, or chosen by the reference's rule), the GNSS cost (Theorem
    23) and one sampled release of the total's local sensitivities (``walked``, after
    ``Walk.local_sensitivity``); ``fields`` are the release's other fields
    (``AtOrder.fields`` and how its sensitivity was bounded). The smooth sensitivity is read
    on the distances walked: past them no value can set it at the betas read
    (``core.horizon``), so it is the full walk's."""
    reading = walked.reading
    delta, conversion = at.delta, at.conversion
    beta, sigma_ss, noise = draw.beta, draw.sigma_ss, draw.noise
    order = float(fields["order"])
    rdp_at_order = float(fields["rdp_at_order"])
    chosen_on_data = beta is None or sigma_ss is None
    if beta is not None and not 0 < beta < 1 / (2 * order):
        raise UsageError(
            f"{given('beta', beta)}: expected 0 < beta < 1/(2 order) = {1 / (2 * order):.6g} "
            "(Theorem 23)"
        )
    if beta is None and sigma_ss is None:
        beta, smooth, sigma_ss = smooth_core.optimal_gnss_parameters(reading, rdp_at_order, order)
    else:
        if beta is None:
            assert sigma_ss is not None
            beta = _beta_for_sigma_ss(reading, rdp_at_order, order, sigma_ss)
        smooth = smooth_core.smooth_sensitivity(reading, beta)
        if sigma_ss is None:
            # The minimiser of order e^{2 beta} / s^2 + 2 SS s, as the reference.
            sigma_ss = (order * math.exp(2 * beta) / smooth) ** (1 / 3) if smooth > 0 else math.inf
    if chosen_on_data:
        warnings.append(not_private_note())
    if math.isinf(smooth):
        # An unbounded local sensitivity (a vanishing sigma1, say): no noise makes the
        # release private, so its cost and its sample are infinite.
        gnss_cost, noise_std = math.inf, math.inf
    else:
        gnss_cost = smooth_core.rdp_gnss(beta, sigma_ss, order)
        noise_std = smooth * sigma_ss if smooth > 0 else 0.0
    source = os_entropy() if noise is None else noise
    warnings.extend(source.notes)
    expected_only = source.source == "none"
    drawn = 0 < noise_std < math.inf and not expected_only
    sample = float(source.generator("gnss-sample").normal(0.0, noise_std)) if drawn else noise_std
    return GnssRelease(
        released=True,
        beta=beta,
        smooth_sensitivity=smooth,
        sigma_ss=sigma_ss,
        gnss_cost=gnss_cost,
        epsilon_expected_release=epsilon_at(conversion, order, rdp_at_order + gnss_cost, delta),
        noise_std=noise_std,
        epsilon_released=None
        if expected_only
        else on_grid(epsilon_at(conversion, order, rdp_at_order + gnss_cost + sample, delta)),
        noise=None if expected_only else source,
        parameters_chosen_on_data=chosen_on_data,
        order_chosen_on_data=draw.order_chosen_on_data,
        local_sensitivity=walked.total,
        local_sensitivity_past_walk=walked.bound,
        warnings=tuple(warnings),
        **fields,
    )

"""LNMax's smooth-sensitivity release (2017's Theorem 3 bound, ``core.ls_lnmax``): one step,
every query answered, its bound F(q) non-decreasing in q (proven in ``core.ls_lnmax``), so no
condition to check. It covers no threshold step: a mechanism with one (a plugin putting
LNMax's answer behind a threshold, say) is refused in one line, for the table would take the
number answered as data-independent.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import numpy as np
from numpy.typing import NDArray

from pate_cli.accountant.terms import QueryTerms, query_terms
from pate_cli.common.spelling import option
from pate_cli.core import ls_lnmax
from pate_cli.core.compact import Compact, DenseRows
from pate_cli.core.distinct import DistinctRows
from pate_cli.core.horizon import Horizon
from pate_cli.errors import UnsupportedError, UsageError
from pate_cli.mechanisms import Mechanism
from pate_cli.mechanisms.releases import LaplaceRelease
from pate_cli.release.common import (
    AtOrder,
    Draw,
    HeldRows,
    Walk,
    num_seen,
    sampled,
    smallest_beta,
)
from pate_cli.release.model import GnssRelease, LocalSensitivityBound

FloatArray = NDArray[np.float64]


def _reference_bounds_are_gnmax(local_sensitivity: LocalSensitivityBound) -> None:
    """LNMax has only its sound bound: the reference's bounds and the walk are GNMax's."""
    if local_sensitivity == "reference":
        raise UsageError(
            f"{option('reference-local-sensitivity')} reproduces the 2018 reference's "
            "GNMax bounds; LNMax has only its sound bound "
            f"(leave out {option('reference-local-sensitivity')})"
        )
    if local_sensitivity == "walk":
        raise UsageError(
            f"{option('walk-local-sensitivity')} is the GNMax family's exact walk; LNMax has "
            f"only its tabulated bound (leave out {option('walk-local-sensitivity')})"
        )


_LNMAX_DENSE_CLASSES = 1 << 22  # LNMax's release reads a dense row of every class


def laplace_release(
    release: LaplaceRelease,
    counts: FloatArray | DistinctRows,
    mechanism: Mechanism,
    at: AtOrder,
    draw: Draw,
    walk: Walk,
    *,
    answered: NDArray[np.bool_] | None,
    terms: QueryTerms | None,
    local_sensitivity: LocalSensitivityBound,
    **unused: Any,
) -> GnssRelease:
    """LNMax's release: every query answered (or those of ``answered``), its bound F(q)
    non-decreasing in q (proven in ``core.ls_lnmax``, so no condition to check), the local
    sensitivity of ``ls_lnmax``. The rest of ``gaussian_release``'s arguments (``unused``:
    a baseline, the conditions, the threshold's rounding) have no part in it.

    Raises:
        UnsupportedError: a mechanism with a threshold step, before any work.
        UsageError: another local-sensitivity bound than the tabulated one.
    """
    step = mechanism.threshold_step
    if step is not None:
        raise UnsupportedError(
            f"{mechanism.name}: the smooth-sensitivity release of a Laplace answer step "
            "covers a mechanism that answers every query, and this one has a threshold step "
            f"({step.name!r}): its data-dependent epsilon has no smooth-sensitivity release"
        )
    _reference_bounds_are_gnmax(local_sensitivity)
    seen = num_seen(counts, answered)
    held = (
        HeldRows.of(counts, seen, None, answered)
        if isinstance(counts, DistinctRows)
        else HeldRows.sorted(counts, seen, answered, walk.chunk_size)
    )
    if held is not None:
        return _held_release(release, counts, held, mechanism, at, draw, walk, answered, terms)
    counts = counts[:seen]
    if terms is None:
        terms = query_terms(counts, mechanism, num_seen=len(counts), chunk_size=walk.chunk_size)
    rows: FloatArray | DenseRows = counts
    if isinstance(counts, Compact):  # its bounds read every class: dense blocks of rows
        if counts.vocabulary > _LNMAX_DENSE_CLASSES:
            raise UnsupportedError(
                f"LNMax's release over {counts.vocabulary} classes reads every class of each "
                f"query: at most {_LNMAX_DENSE_CLASSES}; its RDP figures are available"
            )
        rows, walk = DenseRows(counts), replace(walk, chunk_size=counts.dense_block_rows())
    weights = None if answered is None else answered.astype(np.float64)
    fields = at.fields(mechanism, terms, weights, (True, False), len(counts))
    tables = ls_lnmax.LnmaxSensitivity(counts.shape[1], walk.num_teachers, release.gamma, at.order)

    def block_bound(block: FloatArray, rows: slice, horizon: Horizon) -> Horizon:
        """One block's bound of ``ls_lnmax``."""
        return tables.walked(block, None if weights is None else weights[rows], horizon)

    walked = walk.local_sensitivity(rows, len(counts), block_bound, smallest_beta(draw, at.order))
    return sampled(walked, _bounded(fields), [], at, draw)


def _bounded(fields: dict[str, Any]) -> dict[str, Any]:
    """The release's fields with how its sensitivity was bounded (its one sound bound)."""
    fields.update(
        conditions=None,
        conditions_apply=False,
        strict_local_sensitivity=True,
        local_sensitivity_bound="tabulated",
    )
    return fields


def _held_release(
    release: LaplaceRelease,
    counts: FloatArray | DistinctRows,
    held: HeldRows,
    mechanism: Mechanism,
    at: AtOrder,
    draw: Draw,
    walk: Walk,
    answered: NDArray[np.bool_] | None,
    terms: QueryTerms | None,
) -> GnssRelease:
    """``laplace_release`` of the queries seen held by distinct (or distinct sorted) row,
    ``held``: each row walked once, its terms weighted by how many queries seen hold it (and
    how many of them the realised run answered)."""
    seen = num_seen(counts, answered)
    if terms is None:
        terms = query_terms(counts, mechanism, num_seen=seen, chunk_size=walk.chunk_size)
    weights = None if answered is None else answered[:seen].astype(np.float64)
    fields = at.fields(mechanism, terms, weights, (True, False), seen)
    tables = ls_lnmax.LnmaxSensitivity(counts.shape[1], walk.num_teachers, release.gamma, at.order)

    def bound(rows: HeldRows, horizon: Horizon) -> Horizon:
        """The rows' bound of ``ls_lnmax``, each weighted by its count."""
        return tables.walked(rows.rows, rows.answered, horizon, rows.counts)

    walked = walk.held_local_sensitivity(held, seen, bound, smallest_beta(draw, at.order))
    return sampled(walked, _bounded(fields), [], at, draw)

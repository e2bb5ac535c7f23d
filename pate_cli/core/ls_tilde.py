"""LS~(q): GNMax's per-query local sensitivity as a function of log q alone.

Papernot et al. 2018, Appendix B, Algorithm 3 / Prop. 13: a neighbour's log q lies in
[log B_L(q), log B_U(q)], so for fixed sigma, order and C the change of the per-query cost
over neighbours is bounded by a scalar function of log q, constant (the plateau) on
[q1, q0]. ``_GnmaxSensitivity`` holds those constants for the two analyses: the
reference's (LS~ of beta) and the default one, sound for the published bound ``rdp_gnmax``
whether C6 is verified or not (its argument is in the class docstring).

Shapes: N values of log q.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from numpy.typing import ArrayLike, NDArray
from scipy.special import log_ndtr, ndtri_exp

from pate_cli.core._common import _excess
from pate_cli.core.gnmax import rdp_gnmax_data_independent
from pate_cli.core.theorem6 import (
    _beta,
    _log_erfcinv_argument,
    _logq0_scalar,
    _logq0_sound,
    _phi,
    log_bl_gnmax,
    log_bu_gnmax,
)


@dataclass(frozen=True)
class _GnmaxSensitivity:
    """Per-(sigma, order, C) constants of Algorithm 3, and LS~ at the walks' states.

    Two analyses share the walks. ``reference=True`` is the reference's: LS~ of beta(q)
    (Theorem 6 below the Brent root log q0, Prop. 8 above), which is not the per-query
    bound that is published (``rdp_gnmax`` keeps Theorem 6 past a bracket-end q0), and a
    plateau that B_U(q1) can round below. The default is sound for the published bound
    phi = ``rdp_gnmax``, on these facts (Prop. 13: a neighbour's log q lies in
    [log B_L(q), log B_U(q)], capped at Prop. 7's cap; phi is non-decreasing in q, which C5
    checks below q0 and Prop. 8's cap makes hold above):

    * q0 is a lower bound of inf{q : phi(q) = lambda / sigma^2}, found by bisection on phi
      itself, and q1 = B_L(q0) rounded down. For q >= q0 every neighbour's cost is at most
      the data-independent cost and at least phi(B_L(q)): LS <= DI - phi(B_L(q)), which
      bounds LS~ at every larger q too (the left walk's value).
    * For q < q1, LS~(q) = max(phi(B_U(q)) - phi(q), phi(q) - phi(B_L(q))), each argument
      moved a relative 1e-12 towards the larger difference, so no rounding lowers it.
      Under C6 this is non-decreasing up to q1, so it bounds every histogram of the ball
      the right walk spans; without C6 verified, the running maximum of a cell-wise
      bound of the increment is taken as well (``_IncrementBound``).
    * The plateau, DI - phi(q1) (or the global increment bound without C6), bounds LS~
      at every q, so it is used on [q1, q0], after the walks, and at the step where a
      walk reaches or jumps over the plateau.
    """

    sigma: float
    order: float
    num_classes: int
    logq0: float
    logq1: float
    plateau: float  # LS~ on [q1, q0]: its largest value
    log_cap: float  # Prop. 7's cap log(1 - 1/C)
    reference: bool = True
    increments: _IncrementBound | None = None  # sound analysis without C6 verified

    @classmethod
    def build(
        cls,
        sigma: float,
        order: float,
        num_classes: int,
        *,
        reference: bool = False,
        increments_verified: bool = False,
    ) -> _GnmaxSensitivity:
        log_cap = math.log(1 - 1 / num_classes)
        if reference:
            logq0 = _logq0_scalar(sigma, order)
            logq1 = float(log_bl_gnmax(np.array([logq0]), sigma, num_classes)[0])
            partial = cls(sigma, order, num_classes, logq0, logq1, 0.0, log_cap)
            plateau = float(_ls_tilde(np.array([logq1]), partial)[0])
            return cls(sigma, order, num_classes, logq0, logq1, plateau, log_cap)
        logq0 = _logq0_sound(sigma, order, num_classes)
        logq1 = float(_nudge(log_bl_gnmax(np.array([logq0]), sigma, num_classes), -1)[0])
        independent = float(rdp_gnmax_data_independent(sigma, np.array([order]))[0])
        plateau = float(_excess(independent, _phi(np.array([logq1]), sigma, order)[0]))
        increments = None
        if not increments_verified:
            increments = _IncrementBound.build(sigma, order, num_classes, logq1)
            plateau = max(plateau, increments.largest)
        return cls(sigma, order, num_classes, logq0, logq1, plateau, log_cap, False, increments)

    def ls_and_cost(
        self, logq: NDArray[np.float64], left: NDArray[np.bool_]
    ) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
        """At walk states of log q (left walk where ``left``): the LS bound, and a bound of
        the published cost over the ball the state closes. Shapes: (N,) -> (N,), (N,).

        The cost bound: a right-walk state below q1 has the ball's largest q, so phi there
        (rounded up, the same phi as LS~'s); elsewhere Prop. 8's bound.
        """
        logq = np.asarray(logq, dtype=np.float64)
        independent = rdp_gnmax_data_independent(self.sigma, np.array([self.order]))[0]
        cost = np.full(logq.shape, independent)
        # The right walk below q1; the left walk above q0.
        right = ~left & (logq < self.logq1)
        if self.reference:
            above = np.minimum(_nudge(logq[right], 1), self.log_cap)
            cost[right] = _phi(above, self.sigma, self.order)
            return _ls_tilde(logq, self), cost
        # A walk's last state, on or past the plateau, keeps the plateau: the ball it
        # closes spans the plateau.
        ls = np.full(logq.shape, self.plateau)
        ls[right], cost[right] = _ls_tilde_sound(logq[right], self)
        up = left & (logq > self.logq0)
        if np.any(up):
            low = _nudge(log_bl_gnmax(logq[up], self.sigma, self.num_classes), -1)
            ls[up] = _excess(independent, _phi(low, self.sigma, self.order))
        return ls, cost

    def largest(self) -> tuple[float, float]:
        """(LS, cost) no state's ``ls_and_cost`` exceeds, the plateau included. The sound
        bounds' LS is a rounded-up difference (``_excess``) of two published costs, each in
        [0, DI] (phi is ``rdp_gnmax``, never above Prop. 8's DI), or a cost itself: at most
        DI plus five ulps; their cost is phi or DI. The reference's (beta, which is not
        capped) has no such bound: infinite."""
        if self.reference:
            return math.inf, math.inf
        independent = float(rdp_gnmax_data_independent(self.sigma, np.array([self.order]))[0])
        return max(independent * (1 + _ROUNDING), self.plateau), independent * (1 + _ROUNDING)


# A relative allowance above DI for a rounded-up difference of costs (five ulps and more).
_ROUNDING = 1e-12


def _nudge(logq: NDArray[np.float64], direction: int) -> NDArray[np.float64]:
    """log q moved a relative 1e-12 up (direction 1) or down (-1); infinities stay."""
    logq = np.asarray(logq, dtype=np.float64)
    with np.errstate(invalid="ignore"):
        moved = logq + direction * (1e-12 * np.abs(logq) + 1e-300)
    return np.where(np.isfinite(logq), moved, logq)


@dataclass(frozen=True)
class _IncrementBound:
    """A bound of LS~ below q1 that needs no C6: running maximum over cells in z.

    With z = Phi^-1(q / (C-1)), B_U shifts z by delta = sqrt(2)/sigma (Prop. 13), so
    LS~(q) <= max over z' <= z of psi(z') with psi(z) = phi(S(z + delta)) - phi(S(z)),
    S(z) = log((C-1) Phi(z)) capped (the down step phi(q) - phi(B_L(q)) is psi at
    z - delta). phi and S are non-decreasing, so on a cell [z_i, z_i+1] psi is at most
    phi(S(z_i+1 + delta)) - phi(S(z_i)); below the first cell at most phi(S(z_0 + delta)).
    """

    start: float
    width: float
    running: NDArray[np.float64]  # running maximum of the cell bounds, (N + 1,)
    largest: float

    @classmethod
    def build(cls, sigma: float, order: float, num_classes: int, logq1: float) -> _IncrementBound:
        log_c1 = math.log(num_classes - 1)
        log_cap = math.log(1 - 1 / num_classes)
        delta = math.sqrt(2) / sigma
        end = float(ndtri_exp(np.array([min(logq1 - log_c1, 0.0)]))[0]) if logq1 > -np.inf else 0.0
        start = min(end, 0.0) - 40.0
        cells = _INCREMENT_CELLS
        width = max((end - start) / cells, 1e-300)
        edges = start + width * np.arange(cells + 1)

        def at(z: ArrayLike) -> NDArray[np.float64]:
            return np.minimum(log_c1 + log_ndtr(z), log_cap)

        low = _nudge(at(edges[:-1]), -1)
        high = _nudge(at(edges[1:] + delta), 1)
        phi = _phi(np.concatenate([low, high, _nudge(at(edges[:1] + delta), 1)]), sigma, order)
        bounds = np.empty(cells + 1)
        bounds[0] = phi[-1]  # every z below the first edge
        bounds[1:] = _excess(phi[cells : 2 * cells], phi[:cells])
        running = np.maximum.accumulate(bounds)
        return cls(start, width, running, float(running[-1]))

    def bound(self, logq: NDArray[np.float64], num_classes: int) -> NDArray[np.float64]:
        """Bound of LS~ at every log q' <= log q, for log q below q1. Shapes: (N,) -> (N,)."""
        z, _ = _log_erfcinv_argument(logq, num_classes)
        with np.errstate(invalid="ignore", over="ignore"):
            cell = np.floor((z - self.start) / self.width) + 1  # 0: below the first edge
        cell = np.nan_to_num(cell, nan=0.0, neginf=0.0, posinf=self.running.size - 1)
        index = np.clip(cell, 0, self.running.size - 1).astype(np.intp)
        return self.running[index]


# Cells of the C6-free increment bound: its looseness is about one cell's change of phi.
_INCREMENT_CELLS = 1 << 15


def _ls_tilde_sound(
    logq: NDArray[np.float64], params: _GnmaxSensitivity
) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
    """LS~(q) of the published bound below q1, arguments rounded against the user, and
    phi at q rounded up (the largest cost of the state's ball).

    max(phi(B_U(q)) - phi(q), phi(q) - phi(B_L(q))) (Prop. 13), with the cap of Prop. 7
    on B_U; without C6 verified, also the running increment bound. Shapes: (N,) -> (N,).
    """
    if logq.size == 0:
        return np.zeros(0), np.zeros(0)
    sigma, order, num_classes = params.sigma, params.order, params.num_classes
    up = np.minimum(_nudge(log_bu_gnmax(logq, sigma, num_classes), 1), params.log_cap)
    low = _nudge(log_bl_gnmax(logq, sigma, num_classes), -1)
    above = np.minimum(_nudge(logq, 1), params.log_cap)
    below = _nudge(logq, -1)
    phi_up, phi_above, phi_below, phi_low = np.split(
        _phi(np.concatenate([up, above, below, low]), sigma, order), 4
    )
    ls = np.maximum(_excess(phi_up, phi_below), _excess(phi_above, phi_low))
    if params.increments is not None:
        ls = np.maximum(ls, params.increments.bound(logq, num_classes))
    return ls, phi_above


def _ls_tilde(logq: NDArray[np.float64], params: _GnmaxSensitivity) -> NDArray[np.float64]:
    """Algorithm 3 (Prop. 13, Papernot et al. 2018) as the reference: LS~(q) of beta.

    LS~(q) = max(beta(B_U(q)) - beta(q), beta(q) - beta(B_L(q))), with q moved to
    q1 when it lies in [q1, q0]. Shapes: logq (N,) -> (N,).
    """
    sigma = params.sigma
    logq = np.asarray(logq, dtype=np.float64)
    logq = np.where((logq >= params.logq1) & (logq <= params.logq0), params.logq1, logq)
    z, log_c1 = _log_erfcinv_argument(logq, params.num_classes)
    shift = math.sqrt(2) / sigma
    points = np.concatenate(
        [logq, np.minimum(0.0, log_c1 + log_ndtr(z + shift)), log_c1 + log_ndtr(z - shift)]
    )
    beta, beta_up, beta_low = np.split(_beta(points, sigma, params.order, params.logq0), 3)
    return np.maximum(beta_up - beta, beta - beta_low)

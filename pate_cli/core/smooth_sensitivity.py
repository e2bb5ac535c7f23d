"""Smooth sensitivity of the data-dependent PATE epsilon and its GNSS release.

Papernot et al. 2018 ("Scalable Private Learning with PATE"), Appendix B. The
data-dependent RDP of Confident/Interactive GNMax is itself a function of the
votes, so it is released through the Gaussian Noise with Smooth Sensitivity
mechanism (GNSS, Definition 22 / Theorem 23). That needs, for every query and
every distance d = 0 .. M-1 (M teachers), an upper bound on the local
sensitivity of the per-query RDP over histograms at distance d (Theorem 24
sums those bounds over queries, Definition 12 discounts them by exp(-beta d)).

Design. Everything reproduces the reference implementation (tensorflow/privacy
research/pate_2018 ``smooth_sensitivity.py`` and the driver
``ICLR2018/smooth_sensitivity_table.py``), but vectorised:

* GNMax step (Algorithms 3-5). The bound at distance d is LS~(q(n_d)), with
  LS~ of Algorithm 3 a scalar function of log q alone (for fixed sigma, order
  and C), and n_d the histogram reached after d steps of a walk on the sorted
  votes: "right" (q < q1) moves one vote from the leader to the runner-up,
  "left" (q > q0) moves one vote from the largest non-leader to the leader.
  Both walks change log q monotonically, so the walk length is found by a
  bisection that runs for all rows at once. The state at step d has a closed
  form (left: the non-leaders are levelled from the top, "water filling"), so
  every (row, d) pair is evaluated independently. Vote counts are integers,
  hence every gap is an integer and log Pr[N(0, 2 sigma^2) >= gap] comes from a
  table. Prop. 7's union bound is summed relative to its largest term, over
  distinct non-leader counts with multiplicities, in linear space on a shifted
  table, and only over classes whose term is not negligible (a rigorous
  Gaussian-tail bound, ``_TAIL_LOG_CUTOFF``, prunes terms below ~1e-19). On the
  right walk the steps where even the third-largest count is negligible form an
  interval in closed form; there q is the runner-up term alone and LS~ is read
  from a table per integer gap. Equal sorted rows are evaluated once. The
  result equals the reference's union bound to a few ulps.
* Threshold step. Its RDP depends on the votes only through
  h = round(max(votes)), so ThreshLS(h) is tabulated for h = 0 .. M once and
  queries are grouped by h.
* Totals. ``local_sensitivity_total`` never materialises a (Q, M) array: pairs
  are produced in chunks and scattered into the (M,) total with bincount.
* The crossover log q0 (Brent root of Theorem 6 = Prop. 8) is a pure scalar
  function of (sigma, order) and is memoised with ``functools.lru_cache``.
* Conditions C5/C6 are checked as the reference does (bounded minimisation of
  the derivative), with the derivative of Theorem 6's bound written out
  analytically instead of through sympy.

Shapes: Q queries, C classes, K orders, M teachers (distances d = 0 .. M-1).
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Literal

import numpy as np
from numpy.typing import ArrayLike, NDArray
from scipy import special
from scipy.special import log_ndtr, ndtri_exp

from pate_cli.core.gnmax import logq_gnmax, rdp_gnmax, rdp_gnmax_data_independent
from pate_cli.core.threshold import (
    log_pr_answered_threshold,
    logq_threshold,
    rdp_threshold,
    rdp_threshold_data_independent,
    rdp_threshold_joint,
    round_votes,
    statistic_sensitivity,
    threshold_margins,
)


class NumericalRangeError(ArithmeticError):
    """A quantity of the analysis leaves the double range (sigma too small or too large)."""


# A non-leader class whose union-bound term is below exp(-45) * 1.5 of the head
# term is dropped: even 1000 such terms change q by < 1e-16 relative.
_TAIL_LOG_CUTOFF = 45.0
# Work budgets that keep temporaries at a few tens of MB.
_PAIR_CHUNK = 1 << 18
# Cells of a (rows, distances) block of the threshold and Pr[answered] terms: their memory
# stays bounded whatever the number of teachers M (see ``_blocks``).
_ENTRY_CHUNK = 1 << 22
_THRESHOLD_ROW_CHUNK = 256
# Theorem 6 is evaluated on log q clipped to [_LOGQ_FLOOR, log q0]; it is 0 at the floor.
_LOGQ_FLOOR = -1e300
# sigma for which log q0 is computed: sigma^2, 1/sigma^2 and Theorem 6's terms stay normal.
_SIGMA_RANGE = (1e-100, 1e100)

# Tail sums run in linear space on exp(log-tail + _LINEAR_SHIFT) when the head term
# is at least exp(_LINEAR_MIN_LOG_HEAD), so it stays a normal double.
_LINEAR_SHIFT = 650.0
_LINEAR_MIN_LOG_HEAD = -1350.0


# --------------------------------------------------------------------------
# Validation
# --------------------------------------------------------------------------


def _check_positive(name: str, value: float) -> float:
    value = float(value)
    if not (value > 0 and math.isfinite(value)):
        raise ValueError(f"{name} must be positive and finite, got {value}")
    return value


def _check_order(order: float) -> float:
    order = float(order)
    if not (order > 1 and math.isfinite(order)):
        raise ValueError(f"the Renyi order must be finite and greater than 1, got {order}")
    return order


def _check_num_classes(num_classes: int) -> int:
    if int(num_classes) != num_classes or num_classes < 2:
        raise ValueError(f"num_classes must be an integer >= 2, got {num_classes}")
    return int(num_classes)


def _check_num_teachers(num_teachers: int) -> int:
    if int(num_teachers) != num_teachers or num_teachers < 1:
        raise ValueError(f"num_teachers must be a positive integer, got {num_teachers}")
    return int(num_teachers)


def _as_counts(counts: ArrayLike, name: str = "counts") -> NDArray[np.float64]:
    arr = np.asarray(counts, dtype=np.float64)
    if arr.ndim != 2 or arr.shape[1] < 1:
        raise ValueError(f"{name} must have shape (queries, classes), got {arr.shape}")
    if not np.all(np.isfinite(arr)):
        raise ValueError(f"{name} must be finite")
    return arr


def _as_integer_votes(counts: ArrayLike) -> NDArray[np.int64]:
    arr = _as_counts(counts)
    if np.any(arr < 0) or np.any(arr != np.round(arr)):
        raise ValueError(
            "GNMax local sensitivity needs non-negative integer vote counts "
            "(Algorithm 4 walks over integer histograms)"
        )
    return arr.astype(np.int64)


# --------------------------------------------------------------------------
# beta(q) of Appendix B and the plateau [q1, q0] of Algorithm 3
# --------------------------------------------------------------------------


def _rdp_gnmax_theorem6(
    logq: NDArray[np.float64], sigma: float, order: float
) -> NDArray[np.float64]:
    """Theorem 6 with Prop. 10's mu1, mu2, without checking its conditions.

    The caller guarantees -inf < logq <= logq0, where the conditions hold by
    construction of logq0 (log q0 <= -(1 + 1/sigma)^2). Shapes: logq (N,) -> (N,).
    """
    variance = sigma**2
    mu2 = sigma * np.sqrt(-logq)  # Prop. 10
    mu1 = mu2 + 1
    eps1 = mu1 / variance
    eps2 = mu2 / variance
    # log(1 - e^x) as log1p(-e^x): both arguments are <= -1 here, since log q <= -1 and
    # (log q + eps2)(1 - 1/mu2) = -(sqrt(-log q) - 1/sigma)^2 <= -1 for log q <= -(1 + 1/sigma)^2.
    log1q = np.log1p(-np.exp(logq))
    # Theorem 6: A = (1-q) / (1 - (q e^eps2)^((mu2-1)/mu2)), B = e^eps1 / q^(1/(mu1-1)).
    log_a = (order - 1) * (log1q - np.log1p(-np.exp((logq + eps2) * (1 - 1 / mu2))))
    log_b = (order - 1) * (eps1 - logq / (mu1 - 1))
    # Theorem 6: (1/(l-1)) log((1-q) A^(l-1) + q B^(l-1)), summed in log space.
    return np.logaddexp(log1q + log_a, logq + log_b) / (order - 1)


def _beta(
    logq: NDArray[np.float64], sigma: float, order: float, logq0: float
) -> NDArray[np.float64]:
    """beta_sigma(q) of Appendix B (before Corollary 11), as the reference evaluates it.

    Theorem 6 below q0 and the data-independent lambda / sigma^2 (Prop. 8)
    from q0 on; q = 0 (log q = -inf) is a fixed outcome with RDP 0.
    Shapes: logq (N,) -> (N,).
    """
    logq = np.asarray(logq, dtype=np.float64)
    # Clipping keeps Theorem 6 finite everywhere; np.where then picks the right branch
    # (at the floor the bound is exactly 0, the fixed-outcome value).
    dependent = _rdp_gnmax_theorem6(np.clip(logq, _LOGQ_FLOOR, logq0), sigma, order)
    return np.where(logq < logq0, dependent, rdp_gnmax_data_independent(sigma, np.array([order])))


@functools.lru_cache(maxsize=1024)
def _logq0_scalar(sigma: float, order: float) -> float:
    """Brent root of Theorem 6 = Prop. 8 in log q, bracketed as the reference does."""
    # Theorem 6 needs lambda / sigma^2 and (1 + 1/sigma)^2 as normal doubles.
    if not _SIGMA_RANGE[0] <= sigma <= _SIGMA_RANGE[1]:
        raise NumericalRangeError(
            f"log q0 is not computable in double precision for sigma {sigma:g} "
            f"(outside [{_SIGMA_RANGE[0]:g}, {_SIGMA_RANGE[1]:g}])"
        )
    independent = order / sigma**2

    def excess(logq: float) -> float:
        dependent = _rdp_gnmax_theorem6(np.array([logq]), sigma, order)[0]
        return float(dependent - independent)

    # Natural upper bounds on log q0 (they keep Theorem 6's conditions, Lemma 9).
    log_upper = min(-((1 + 1 / sigma) ** 2), -(((order - 0.99) / sigma) ** 2), -1 / sigma**2)
    if excess(log_upper) < 0:
        return log_upper
    log_lower = 2 * log_upper
    while excess(log_lower) > 0:
        if log_lower < -10000:
            raise NumericalRangeError(
                f"cannot bracket log q0 for sigma={sigma}, order={order}: "
                "the lower end passed -10000"
            )
        log_lower *= 1.5
    from scipy import optimize  # 0.2 s to import: only a release needs it

    root, result = optimize.brentq(excess, log_lower, log_upper, full_output=True)
    if not result.converged:
        raise RuntimeError(
            f"the root finder for log q0 did not converge (sigma={sigma}, order={order})"
        )
    return float(root)


def logq0_gnmax(sigma: float, orders: ArrayLike) -> NDArray[np.float64]:
    """log q0: where GNMax's data-independent bound takes over, per order.

    Condition C5, Papernot et al. 2018: beta(q) is Theorem 6's bound for
    q < q0 and lambda / sigma^2 (Prop. 8) for q >= q0. Found with Brent's method
    on the same bracket as the reference (``compute_logq0_gnmax``), so the roots
    agree to the solver tolerance (~1e-12).

    Args:
        sigma: standard deviation of GNMax's Gaussian noise.
        orders: Renyi orders, each > 1.

    Returns:
        log q0 per order.

    Raises:
        ValueError: sigma <= 0 or an order <= 1.
        NumericalRangeError: sigma outside 1e-100 .. 1e100, or no bracket for the root.
        RuntimeError: Brent does not converge.

    Shapes: orders (K,) -> (K,).
    """
    sigma = _check_positive("sigma", sigma)
    orders_arr = np.atleast_1d(np.asarray(orders, dtype=np.float64))
    return np.array([_logq0_scalar(sigma, _check_order(o)) for o in orders_arr])


def _log_erfcinv_argument(logq: ArrayLike, num_classes: int) -> tuple[NDArray[np.float64], float]:
    # erfcinv(2q/(C-1)) = -ndtri(q/(C-1)) / sqrt(2); ndtri_exp keeps tiny q exact.
    log_c1 = math.log(num_classes - 1)
    return ndtri_exp(np.minimum(np.asarray(logq, dtype=np.float64) - log_c1, 0.0)), log_c1


def log_bl_gnmax(logq: ArrayLike, sigma: float, num_classes: int) -> NDArray[np.float64]:
    """log B_L(q): lower bound on q over neighbouring histograms (Algorithm 3).

    B_L(q) = (C-1)/2 erfc(erfcinv(2q/(C-1)) + 1/sigma) (Prop. 13, Papernot et
    al. 2018), evaluated in log space as
    log(C-1) + log Phi(Phi^-1(q/(C-1)) - sqrt(2)/sigma), which stays exact
    where q underflows.

    Shapes: logq (N,) -> (N,).
    """
    sigma = _check_positive("sigma", sigma)
    num_classes = _check_num_classes(num_classes)
    z, log_c1 = _log_erfcinv_argument(logq, num_classes)
    return log_c1 + log_ndtr(z - math.sqrt(2) / sigma)


def log_bu_gnmax(logq: ArrayLike, sigma: float, num_classes: int) -> NDArray[np.float64]:
    """log B_U(q): upper bound on q over neighbouring histograms (Algorithm 3).

    B_U(q) = min(1, (C-1)/2 erfc(erfcinv(2q/(C-1)) - 1/sigma)) (Prop. 13,
    Papernot et al. 2018), in log space like :func:`log_bl_gnmax`.

    Shapes: logq (N,) -> (N,).
    """
    sigma = _check_positive("sigma", sigma)
    num_classes = _check_num_classes(num_classes)
    z, log_c1 = _log_erfcinv_argument(logq, num_classes)
    return np.minimum(0.0, log_c1 + log_ndtr(z + math.sqrt(2) / sigma))


def logq1_gnmax(sigma: float, orders: ArrayLike, num_classes: int) -> NDArray[np.float64]:
    """log q1 = log B_L(q0) per order: the left end of Algorithm 3's plateau.

    Condition C6, Papernot et al. 2018 (the reference's ``_compute_logq1``).

    Shapes: orders (K,) -> (K,).
    """
    return log_bl_gnmax(logq0_gnmax(sigma, orders), sigma, num_classes)


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

    def largest_cost(
        self, logq: NDArray[np.float64], left: NDArray[np.bool_]
    ) -> NDArray[np.float64]:
        """Bound of the published cost over the ball a walk state closes. Shapes: (N,) -> (N,).

        A right-walk state below q1 has the ball's largest q, so phi there (rounded up);
        elsewhere Prop. 8's bound.
        """
        logq = np.asarray(logq, dtype=np.float64)
        independent = rdp_gnmax_data_independent(self.sigma, np.array([self.order]))[0]
        out = np.full(logq.shape, independent)
        right = ~left & (logq < self.logq1)
        out[right] = _phi(np.minimum(_nudge(logq[right], 1), self.log_cap), self.sigma, self.order)
        return out

    def ls(self, logq: NDArray[np.float64], left: NDArray[np.bool_]) -> NDArray[np.float64]:
        """LS bound at walk states of log q (left walk where ``left``). Shapes: (N,) -> (N,)."""
        logq = np.asarray(logq, dtype=np.float64)
        if self.reference:
            return _ls_tilde(logq, self)
        out = np.full(logq.shape, self.plateau)
        # The right walk below q1; the left walk above q0. A walk's last state, on or past
        # the plateau, keeps the plateau: the ball it closes spans the plateau.
        right = ~left & (logq < self.logq1)
        out[right] = _ls_tilde_sound(logq[right], self)
        up = left & (logq > self.logq0)
        if np.any(up):
            low = _nudge(log_bl_gnmax(logq[up], self.sigma, self.num_classes), -1)
            independent = rdp_gnmax_data_independent(self.sigma, np.array([self.order]))[0]
            out[up] = _excess(independent, _phi(low, self.sigma, self.order))
        return out


def _nudge(logq: NDArray[np.float64], direction: int) -> NDArray[np.float64]:
    """log q moved a relative 1e-12 up (direction 1) or down (-1); infinities stay."""
    logq = np.asarray(logq, dtype=np.float64)
    with np.errstate(invalid="ignore"):
        moved = logq + direction * (1e-12 * np.abs(logq) + 1e-300)
    return np.where(np.isfinite(logq), moved, logq)


def _excess(larger: ArrayLike, smaller: ArrayLike) -> NDArray[np.float64]:
    """larger - smaller rounded up: plus four ulps of the larger magnitude (the rounding of
    the subtraction and of each operand), never negative."""
    a = np.asarray(larger, dtype=np.float64)
    b = np.asarray(smaller, dtype=np.float64)
    slack = 4 * np.finfo(np.float64).eps * np.maximum(np.abs(a), np.abs(b))
    return np.maximum(a - b + slack, 0.0)


def _phi(logq: NDArray[np.float64], sigma: float, order: float) -> NDArray[np.float64]:
    """The published per-query GNMax bound (``rdp_gnmax``) at one order. Shapes: (N,) -> (N,)."""
    return rdp_gnmax(np.minimum(logq, 0.0), sigma, np.array([order]))[:, 0]


@functools.lru_cache(maxsize=1024)
def _logq0_sound(sigma: float, order: float, num_classes: int) -> float:
    """A lower bound of inf{log q : rdp_gnmax(log q) = lambda / sigma^2}, by bisection.

    rdp_gnmax is non-decreasing in q and equals Prop. 8's bound from there on; the
    returned point is the largest one found where it is still below, so the infimum is
    never below it. When it never reaches Prop. 8 below the cap, the cap is returned.
    """
    if not _SIGMA_RANGE[0] <= sigma <= _SIGMA_RANGE[1]:
        raise NumericalRangeError(
            f"log q0 is not computable in double precision for sigma {sigma:g} "
            f"(outside [{_SIGMA_RANGE[0]:g}, {_SIGMA_RANGE[1]:g}])"
        )
    independent = float(rdp_gnmax_data_independent(sigma, np.array([order]))[0])
    log_cap = math.log(1 - 1 / num_classes)

    def reached(logq: float) -> bool:
        return bool(_phi(np.array([logq]), sigma, order)[0] >= independent)

    if not reached(log_cap):
        return log_cap
    low = -1.0
    while reached(low):
        low *= 2
        if low < -1e300:
            return low  # Prop. 8 everywhere: any point below every histogram's log q
    high = log_cap
    if low > high:
        low = 2 * high
    while True:
        middle = 0.5 * (low + high)
        if not low < middle < high:
            return low
        if reached(middle):
            high = middle
        else:
            low = middle


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


def _ls_tilde_sound(logq: NDArray[np.float64], params: _GnmaxSensitivity) -> NDArray[np.float64]:
    """LS~(q) of the published bound below q1, arguments rounded against the user.

    max(phi(B_U(q)) - phi(q), phi(q) - phi(B_L(q))) (Prop. 13), with the cap of Prop. 7
    on B_U; without C6 verified, also the running increment bound. Shapes: (N,) -> (N,).
    """
    if logq.size == 0:
        return np.zeros(0)
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
    return ls


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


# --------------------------------------------------------------------------
# GNMax local sensitivity: the walks of Algorithm 4
# --------------------------------------------------------------------------


class _RowSearch:
    """Row-wise searchsorted on (R, W) rows, each non-decreasing, through one flat key array."""

    def __init__(self, ascending_rows: NDArray[np.float64]) -> None:
        num_rows, width = ascending_rows.shape
        low = float(ascending_rows.min()) if ascending_rows.size else 0.0
        self._width = width
        self._offset = low
        self._span = (float(ascending_rows.max()) - low if ascending_rows.size else 0.0) + 2.0
        bands = (np.arange(num_rows) * self._span)[:, None]
        self._keys = ((ascending_rows - low) + bands).ravel()

    def count(
        self, row: NDArray[np.intp], value: NDArray[np.float64], side: Literal["left", "right"]
    ) -> NDArray[np.int64]:
        """Entries of each row < value (side="left") or <= value (side="right")."""
        # Clipping keeps each query inside its own row's band of keys.
        local = np.clip(value - self._offset, -0.5, self._span - 1.5)
        found = np.searchsorted(self._keys, local + row * self._span, side=side)
        return found - row.astype(np.int64) * self._width


class _TailTable:
    """Per-row non-leader values, non-increasing, with multiplicities (None = all 1)."""

    def __init__(self, values: NDArray[np.int64], counts: NDArray[np.float64] | None) -> None:
        self.width = values.shape[1]
        self.values = values.ravel()
        self.counts = None if counts is None else counts.ravel()
        self._search = _RowSearch(-values.astype(np.float64))

    @classmethod
    def distinct(cls, values: NDArray[np.int64]) -> _TailTable:
        """Group equal values of non-increasing rows; pads are value -1 with count 0."""
        num_rows, width = values.shape
        if width == 0:
            return cls(np.full((num_rows, 1), -1, dtype=np.int64), np.zeros((num_rows, 1)))
        is_new = np.ones(values.shape, dtype=bool)
        is_new[:, 1:] = values[:, 1:] != values[:, :-1]
        group = np.cumsum(is_new, axis=1) - 1
        num_groups = int(group[:, -1].max()) + 1
        flat = (np.arange(num_rows)[:, None] * num_groups + group).ravel()
        grouped = np.full(num_rows * num_groups, -1, dtype=np.int64)
        grouped[flat] = values.ravel()
        counts = np.bincount(flat, minlength=num_rows * num_groups).astype(np.float64)
        return cls(grouped.reshape(num_rows, num_groups), counts.reshape(num_rows, num_groups))

    def kept(
        self, row: NDArray[np.intp], start: NDArray[np.int64], min_value: NDArray[np.float64]
    ) -> NDArray[np.int64]:
        """Entries from ``start`` on whose value is >= min_value (a prefix: rows are sorted)."""
        end = self._search.count(row, -min_value, "right")
        return np.maximum(end - start, 0)

    def relative_sum(
        self,
        log_tail: NDArray[np.float64],
        linear_tail: NDArray[np.float64],
        row: NDArray[np.intp],
        start: NDArray[np.int64],
        kept: NDArray[np.int64],
        leader: NDArray[np.int64],
        log_head: NDArray[np.float64],
    ) -> NDArray[np.float64]:
        """sum over kept entries of count * Pr[tail at gap leader - value] / head term.

        Pairs are sorted by how many entries they keep, so the loop over entry
        ranks works on shrinking prefixes (no padding, no per-rank compaction).
        Sums run on the shifted linear table when the head term allows it.
        """
        out = np.zeros(row.size)
        linear = log_head >= _LINEAR_MIN_LOG_HEAD
        for group in (np.flatnonzero(linear & (kept > 0)), np.flatnonzero(~linear & (kept > 0))):
            if group.size == 0:
                continue
            order = group[np.argsort(-kept[group], kind="stable")]
            kept_sorted = kept[order]
            active = np.searchsorted(
                -kept_sorted, -np.arange(1, int(kept_sorted[0]) + 1), side="right"
            )
            base = row[order] * self.width + start[order]
            leader_sorted = leader[order]
            acc = np.zeros(order.size)
            if linear[order[0]]:
                for rank, size in enumerate(active):
                    index = base[:size] + rank
                    terms = linear_tail[leader_sorted[:size] - self.values[index]]
                    if self.counts is not None:
                        terms *= self.counts[index]
                    acc[:size] += terms
                # Linear table values are exp(log tail + shift): divide by the head's.
                out[order] = acc / np.exp(log_head[order] + _LINEAR_SHIFT)
            else:
                head_sorted = log_head[order]
                for rank, size in enumerate(active):
                    index = base[:size] + rank
                    terms = np.exp(
                        log_tail[leader_sorted[:size] - self.values[index]] - head_sorted[:size]
                    )
                    if self.counts is not None:
                        terms *= self.counts[index]
                    acc[:size] += terms
                out[order] = acc
        return out


@dataclass
class _PairState:
    """log q and bookkeeping for a batch of (row, step) pairs of the walks."""

    logq: NDArray[np.float64]
    top_rest: NDArray[np.int64]  # largest non-leader count (left walk's stop test)
    head_gap: NDArray[np.int64]  # leader minus runner-up (right walk)
    is_pure: NDArray[np.bool_]  # right walk whose tail is negligible: q is the runner-up term


class _WalkEvaluator:
    """log q (Prop. 7) of the histogram reached after d steps of Algorithm 4's walk.

    Rows are the distinct sorted vote vectors. Right walk at step d: leader
    v0 - d, runner-up v1 + d, the others unchanged. Left walk: leader v0 + d, and
    d votes taken greedily from the largest non-leader, which levels the top k
    non-leaders to L or L+1 (k from the cumulative "fill cost").
    """

    def __init__(self, sorted_rows: NDArray[np.int64], params: _GnmaxSensitivity) -> None:
        self.params = params
        self.leader = np.ascontiguousarray(sorted_rows[:, 0])
        rest = np.ascontiguousarray(sorted_rows[:, 1:])
        self.runner_up = np.ascontiguousarray(rest[:, 0])
        num_rows, num_rest = rest.shape
        self.num_rest = num_rest
        self.prefix = np.zeros((num_rows, num_rest + 1), dtype=np.int64)
        np.cumsum(rest, axis=1, out=self.prefix[:, 1:])
        below = np.zeros_like(rest)
        below[:, :-1] = rest[:, 1:]
        # fill_cost[:, k-1]: moves that level the top k non-leaders down to the next one.
        fill_cost = self.prefix[:, 1:] - np.arange(1, num_rest + 1) * below
        self.fill_search = _RowSearch(fill_cost.astype(np.float64))
        self.right_tail = _TailTable.distinct(np.ascontiguousarray(rest[:, 1:]))
        self.left_tail = _TailTable(rest, None)
        self.third = rest[:, 1] if num_rest > 1 else None
        self.scale = math.sqrt(2 * params.sigma**2)  # sd of the difference of two noises
        # Every gap a walk reaches is at most a row's total of votes (and one more).
        max_gap = int((self.prefix[:, -1] + self.leader).max()) + 2 if num_rows else 2
        # log Pr[N(0, 2 sigma^2) >= g] for integer gaps g, exactly as Prop. 7 evaluates it.
        self.log_tail = log_ndtr(-np.arange(max_gap + 1, dtype=np.float64) / self.scale)
        # The same tails in linear space, shifted so that they stay normal doubles
        # down to exp(-1350); deeper entries underflow to 0, negligible against a head
        # term above that (see relative_sum).
        self.linear_tail = np.exp(self.log_tail + _LINEAR_SHIFT)
        self._pure_table: tuple[NDArray[np.float64], NDArray[np.float64]] | None = None

    def pure_table(self) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
        """(LS~, largest cost) per integer gap g of a right-walk state whose q is the
        runner-up term alone."""
        if self._pure_table is None:
            size = self.log_tail.size
            ls, cost = np.empty(size), np.empty(size)
            # In chunks: the gaps run to M, and each evaluation takes a few dozen temporaries.
            for start in range(0, size, _PAIR_CHUNK):
                part = np.minimum(self.log_tail[start : start + _PAIR_CHUNK], self.params.log_cap)
                right = np.zeros(part.size, dtype=bool)
                ls[start : start + part.size] = self.params.ls(part, right)
                cost[start : start + part.size] = self.params.largest_cost(part, right)
            self._pure_table = (ls, cost)
        return self._pure_table

    def _reach(self, head_gap: NDArray[np.int64]) -> NDArray[np.float64]:
        # For y2 >= y1 >= 0, log(sf(y2)/sf(y1)) <= -(y2^2 - y1^2)/2 + log 1.5 (Birnbaum's
        # and Sampford's bounds on Mills' ratio): gaps beyond this reach add < 1.5 e^-K.
        return np.sqrt(head_gap.astype(np.float64) ** 2 + 2 * _TAIL_LOG_CUTOFF * self.scale**2)

    def state(
        self, row: NDArray[np.intp], step: NDArray[np.int64], left: NDArray[np.bool_]
    ) -> _PairState:
        logq = np.empty(row.size)
        top_rest = np.empty(row.size, dtype=np.int64)
        head_gap = np.zeros(row.size, dtype=np.int64)
        is_pure = np.zeros(row.size, dtype=bool)
        (right_pairs,) = np.nonzero(~left)
        (left_pairs,) = np.nonzero(left)
        if right_pairs.size:
            r, d = row[right_pairs], step[right_pairs]
            leader = self.leader[r] - d
            runner_up = self.runner_up[r] + d
            gap = leader - runner_up
            log_head = self.log_tail[gap]
            start = np.zeros(r.size, dtype=np.int64)
            kept = self.right_tail.kept(r, start, leader - self._reach(gap))
            tail = self.right_tail.relative_sum(
                self.log_tail, self.linear_tail, r, start, kept, leader, log_head
            )
            # Prop. 7: q = sum of pairwise tails = head term * (1 + relative tail).
            logq[right_pairs] = log_head + np.log1p(tail)
            top_rest[right_pairs] = runner_up
            head_gap[right_pairs] = gap
            is_pure[right_pairs] = kept == 0
        if left_pairs.size:
            r, d = row[left_pairs], step[left_pairs]
            levelled = np.minimum(
                self.fill_search.count(r, d.astype(np.float64), "left") + 1, self.num_rest
            )
            total = self.prefix[r, levelled] - d
            level = total // levelled
            high = total - level * levelled  # this many sit at level + 1
            top = level + (high > 0)
            head_count = np.where(high > 0, high, levelled)
            low_count = np.where(high > 0, levelled - high, 0)
            leader = self.leader[r] + d
            gap = leader - top
            log_head = self.log_tail[gap]
            kept = self.left_tail.kept(r, levelled, leader - self._reach(gap))
            tail = self.left_tail.relative_sum(
                self.log_tail, self.linear_tail, r, levelled, kept, leader, log_head
            )
            head = head_count + low_count * np.exp(self.log_tail[gap + 1] - log_head)
            logq[left_pairs] = log_head + np.log(head + tail)
            top_rest[left_pairs] = top
        # Prop. 7's cap q <= 1 - 1/C.
        return _PairState(np.minimum(logq, self.params.log_cap), top_rest, head_gap, is_pure)

    def pure_steps(
        self, row: NDArray[np.intp], last_step: NDArray[np.int64]
    ) -> tuple[NDArray[np.int64], NDArray[np.int64]]:
        """Inclusive range of right-walk steps whose tail is negligible (empty: lo > hi).

        The third-largest count u bounds every other tail term; it is negligible
        when (x-u)^2 - g^2 > 2 K s^2, i.e. (v1-u+d)(2 v0-v1-u-3d) > 2 K s^2, a
        concave quadratic in d, hence an interval of steps.
        """
        if self.third is None:  # two classes: q is the runner-up term alone
            return np.zeros(row.size, dtype=np.int64), last_step.copy()
        v0 = self.leader[row].astype(np.float64)
        v1 = self.runner_up[row].astype(np.float64)
        u = self.third[row].astype(np.float64)
        offset = v1 - u
        span = 2 * v0 - v1 - u
        linear = span - 3 * offset
        constant = offset * span - 2 * _TAIL_LOG_CUTOFF * self.scale**2
        discriminant = linear**2 + 12 * constant
        root = np.sqrt(np.maximum(discriminant, 0.0))
        lo = np.floor((linear - root) / 6) + 1
        hi = np.ceil((linear + root) / 6) - 1
        lo = np.where(discriminant > 0, np.maximum(lo, 0), np.inf)
        hi = np.minimum(hi, last_step)
        lo = np.minimum(lo, last_step + 1)
        return lo.astype(np.int64), hi.astype(np.int64)


def _walk_lengths(
    evaluator: _WalkEvaluator, row: NDArray[np.intp], left: NDArray[np.bool_]
) -> NDArray[np.int64]:
    """Count the steps until Algorithm 4's loop stops, by bisection (log q is monotone).

    Right walk: continue while log q < log q1. Left walk: continue while
    log q > log q0 and a non-leader vote is left. Step 0 always continues.
    """
    params = evaluator.params
    low = np.zeros(row.size, dtype=np.int64)
    # Right: at most a tie of leader and runner-up (there q >= 1/2 > q1);
    # left: at most every non-leader vote moved.
    high = np.where(
        left, evaluator.prefix[row, -1], (evaluator.leader[row] - evaluator.runner_up[row]) // 2
    )
    while True:
        (open_,) = np.nonzero(high - low > 1)
        if open_.size == 0:
            return high
        middle = (low[open_] + high[open_]) // 2
        state = evaluator.state(row[open_], middle, left[open_])
        go_on = np.where(
            left[open_],
            (state.logq > params.logq0) & (state.top_rest > 0),
            state.logq < params.logq1,
        )
        low[open_] = np.where(go_on, middle, low[open_])
        high[open_] = np.where(go_on, high[open_], middle)


@dataclass
class _Segments:
    """Runs of consecutive distances: row, first distance, length, walk direction."""

    row: NDArray[np.intp]
    start: NDArray[np.int64]
    length: NDArray[np.int64]
    left: NDArray[np.bool_]

    def chunks(self) -> Iterator[tuple[NDArray[np.intp], NDArray[np.int64], NDArray[np.bool_]]]:
        """(row, distance, left) per pair, in chunks of about ``_PAIR_CHUNK`` pairs."""
        keep = self.length > 0
        # A long run (a walk of millions of steps) is cut into pieces of at most a chunk,
        # so that no chunk outgrows ``_PAIR_CHUNK`` pairs, whatever M.
        pieces = -(-self.length[keep] // _PAIR_CHUNK)
        segment = np.repeat(np.flatnonzero(keep), pieces)
        piece = np.arange(segment.size) - np.repeat(np.cumsum(pieces) - pieces, pieces)
        start = self.start[segment] + piece * _PAIR_CHUNK
        length = np.minimum(self.length[segment] - piece * _PAIR_CHUNK, _PAIR_CHUNK)
        row, left = self.row[segment], self.left[segment]
        ends = np.cumsum(length)
        first = 0
        while first < row.size:
            base = ends[first - 1] if first else 0
            last = max(int(np.searchsorted(ends, base + _PAIR_CHUNK, side="right")), first + 1)
            counts = length[first:last]
            owner = np.repeat(np.arange(first, last), counts)
            offset = np.arange(owner.size) - (np.cumsum(counts) - counts)[owner - first]
            yield row[owner], start[owner] + offset, left[owner]
            first = last


@dataclass
class _WalkPlan:
    """Every canonical row's walk: the rows that walk and their filled distances."""

    evaluator: _WalkEvaluator
    walking: NDArray[np.intp]
    last_step: NDArray[np.int64]  # last filled distance per walking row (< M)
    evaluated: _Segments  # distances whose log q is computed
    pure: _Segments  # right-walk distances read from the per-gap LS~ table


def _plan_walks(
    sorted_rows: NDArray[np.int64], num_teachers: int, params: _GnmaxSensitivity
) -> _WalkPlan:
    evaluator = _WalkEvaluator(sorted_rows, params)
    num_rows = sorted_rows.shape[0]
    logq = evaluator.state(
        np.arange(num_rows), np.zeros(num_rows, dtype=np.int64), np.zeros(num_rows, dtype=bool)
    ).logq
    # Algorithm 4, case 1: q in [q1, q0] is on the plateau at every distance.
    (walking,) = np.nonzero((logq < params.logq1) | (logq > params.logq0))
    left = logq[walking] > params.logq0
    last_step = np.minimum(_walk_lengths(evaluator, walking, left), num_teachers - 1)
    lo, hi = evaluator.pure_steps(walking, last_step)
    lo = np.where(left, last_step + 1, lo)
    hi = np.where(left, last_step, hi)
    has_pure = lo <= hi
    evaluated = _Segments(
        np.concatenate([walking, walking]),
        np.concatenate([np.zeros_like(lo), np.where(has_pure, hi + 1, lo)]),
        np.concatenate(
            [np.where(has_pure, lo, last_step + 1), np.where(has_pure, last_step - hi, 0)]
        ),
        np.concatenate([left, left]),
    )
    pure = _Segments(walking, lo, np.where(has_pure, hi - lo + 1, 0), left)
    return _WalkPlan(evaluator, walking, last_step, evaluated, pure)


def _walk_chunks(
    plan: _WalkPlan,
) -> Iterator[tuple[NDArray[np.intp], NDArray[np.int64], NDArray[np.float64], NDArray[np.float64]]]:
    """Yield (canonical row, distance, LS~, largest cost) for every filled distance of
    every walk; the largest cost bounds the published cost over the ball (Prop. 8's bound
    where the walk does not give a better one)."""
    evaluator = plan.evaluator
    params = evaluator.params
    table, cost_table = evaluator.pure_table()
    for row, step, left in plan.evaluated.chunks():
        state = evaluator.state(row, step, left)
        ls = np.empty(row.size)
        cost = np.empty(row.size)
        pure = state.is_pure
        ls[pure] = table[state.head_gap[pure]]
        cost[pure] = cost_table[state.head_gap[pure]]
        ls[~pure] = params.ls(state.logq[~pure], left[~pure])
        cost[~pure] = params.largest_cost(state.logq[~pure], left[~pure])
        yield row, step, ls, cost
    for row, step, _ in plan.pure.chunks():
        gap = evaluator.leader[row] - evaluator.runner_up[row] - 2 * step
        yield row, step, table[gap], cost_table[gap]


# Odd 64-bit multipliers of the row hash (fixed: the grouping is the same on every run).
_HASH_MULTIPLIERS = np.random.default_rng(0x5EED).integers(1, 2**63, 4096, dtype=np.uint64) | 1


def _canonical_rows(votes: NDArray[np.int64]) -> tuple[NDArray[np.int64], NDArray[np.intp]]:
    """Distinct rows after sorting each in non-increasing order, and the inverse map.

    Rows are grouped by a 64-bit hash (a sort of Q integers, not of Q rows), and every
    row is then compared with its group's first row: a collision, however unlikely,
    falls back to the exact grouping of ``np.unique(axis=0)``. The groups come out in
    the order of their hashes, which nothing downstream depends on.
    """
    ordered = -np.sort(-votes, axis=1)
    num_classes = ordered.shape[1]
    if num_classes > _HASH_MULTIPLIERS.size:
        unique, inverse = np.unique(ordered, axis=0, return_inverse=True)
        return unique, inverse.reshape(-1)
    with np.errstate(over="ignore"):  # arithmetic modulo 2**64
        keys = ordered.astype(np.uint64) @ _HASH_MULTIPLIERS[:num_classes]
    _, first, inverse = np.unique(keys, return_index=True, return_inverse=True)
    unique = ordered[first]
    if not np.array_equal(unique[inverse], ordered):
        unique, inverse = np.unique(ordered, axis=0, return_inverse=True)
    return unique, inverse.reshape(-1)


def local_sensitivity_gnmax(
    counts: ArrayLike,
    num_teachers: int,
    sigma: float,
    order: float,
    *,
    reference: bool = False,
    increments_verified: bool = False,
) -> NDArray[np.float64]:
    """Upper bounds on GNMax's local sensitivity at distance d, per query.

    Algorithms 3-5 (Props. 13, 14, 19, Theorem 20), Papernot et al. 2018: entry d
    bounds the local sensitivity of the published per-query bound (``rdp_gnmax``) over
    every histogram within distance d, from the histogram reached after d steps of the
    walk (towards q1 from below, towards q0 from above, each the extreme q at that
    distance); after the walk, and for q in [q1, q0], it is the plateau. The argument is
    in ``_GnmaxSensitivity``. With a single class the outcome is fixed: every entry is 0.

    ``reference=True`` is the reference's ``compute_local_sensitivity_bounds_gnmax``
    (LS~ of beta(q), the step that leaves (q0, 1] keeping its own LS~), which can be
    below the true local sensitivity at small sigma.

    Args:
        counts: integer vote counts.
        num_teachers: M, the number of distances (d = 0 .. M-1).
        sigma: GNMax noise standard deviation.
        order: Renyi order.
        reference: the reference's bounds instead of the sound ones.
        increments_verified: C6 holds at this order (``check_conditions``); without it
            the sound bounds add a cell-wise bound that needs no C6.

    Returns:
        Local-sensitivity bounds per query and distance.

    Raises:
        ValueError: non-integer or negative counts, sigma <= 0, order <= 1, M < 1.

    Shapes: counts (Q, C) -> (Q, M).
    """
    votes = _as_integer_votes(counts)
    num_teachers = _check_num_teachers(num_teachers)
    sigma = _check_positive("sigma", sigma)
    order = _check_order(order)
    num_queries, num_classes = votes.shape
    if num_classes == 1 or num_queries == 0:
        return np.zeros((num_queries, num_teachers))
    params = _GnmaxSensitivity.build(
        sigma, order, num_classes, reference=reference, increments_verified=increments_verified
    )
    unique, inverse = _canonical_rows(votes)
    table = np.full((unique.shape[0], num_teachers), params.plateau)
    plan = _plan_walks(unique, num_teachers, params)
    for row, step, ls, _ in _walk_chunks(plan):
        table[row, step] = ls
    return table[inverse]


@dataclass(frozen=True)
class _AnswerWeights:
    """What multiplies a query's GNMax local sensitivity at distance d.

    ``pr_answered`` is None for a constant weight per query (plain GNMax: 1; a realised
    run: its 0/1 mask). In expectation the cost is thr(n) + P(n) g(n) with P = Pr[answered],
    a non-decreasing function of the rounded top vote h of step 1 (h moves by at most 1 a
    step), so over a histogram n'' within distance d and its neighbour n':
    |P(n') g(n') - P(n'') g(n'')| <= P(n') |g(n') - g(n'')| + |P(n') - P(n'')| g(n''),
    at most P(min(h + d + 1, M)) LS_g[d] + max_{|h'' - h| <= d} |dP(h'')| G[d], with G[d]
    the largest cost over the ball (the right walk's state, else Prop. 8's DI_g).
    """

    weights: NDArray[np.float64]  # per query (Q,)
    tops: NDArray[np.int64] | None = None  # h per query (Q,), with pr_answered
    pr_answered: NDArray[np.float64] | None = None  # P(h) for h = 0 .. M
    change: _ChangeWindow | None = None  # max |dP| within distance d of h, with pr_answered
    independent: float = 0.0  # Prop. 8's bound of the answer step's cost, with change
    sensitivity: int = 1  # how far a neighbour moves h (2: half to even at exact halves)

    @property
    def ahead(self) -> int:
        """How far past h + d the top of a neighbour of a histogram d away can be: h' <= h
        + d + (s - 1), h'' <= h' + s, so 2 s - 1 (1 for s = 1)."""
        return 2 * self.sensitivity - 1

    def change_at(self, top: NDArray[np.int64], distance: NDArray[np.int64]) -> NDArray[np.float64]:
        """A bound of |P(h') - P(h'')| over h' within distance d (+ s - 1) of h and h'' a
        neighbour's (within s of h'): s times the largest single step of P within
        d + 2 (s - 1) of h."""
        assert self.change is not None
        return self.sensitivity * self.change.at(top, distance + 2 * (self.sensitivity - 1))


def _gnmax_total(
    votes: NDArray[np.int64],
    answer: _AnswerWeights,
    num_teachers: int,
    params: _GnmaxSensitivity,
) -> NDArray[np.float64]:
    """sum_q w_q(d) LS_gnmax(q)[d] without a (Q, M) array. Shapes: (Q, C) -> (M,).

    Queries are grouped by (canonical row, h); the walks run once per canonical row.
    """
    live = answer.weights != 0
    if not np.any(live):
        return np.zeros(num_teachers)
    unique, inverse = _canonical_rows(votes[live])
    num_rows = unique.shape[0]
    tops = np.zeros(inverse.size, dtype=np.int64) if answer.tops is None else answer.tops[live]
    pr = answer.pr_answered
    highest = num_teachers if pr is None else pr.size - 1  # the largest top h
    key, pair_of_query = np.unique(inverse * (highest + 1) + tops, return_inverse=True)
    pair_row, pair_top = np.divmod(key, highest + 1)
    pair_weight = np.asarray(
        np.bincount(pair_of_query.reshape(-1), weights=answer.weights[live]), dtype=np.float64
    )
    pair_start = np.searchsorted(pair_row, np.arange(num_rows))
    pair_count = np.diff(np.append(pair_start, pair_row.size))

    def weight_at(pair: NDArray[np.intp], step: NDArray[np.int64]) -> NDArray[np.float64]:
        if pr is None:
            return pair_weight[pair]
        return pair_weight[pair] * pr[np.minimum(pair_top[pair] + step + answer.ahead, highest)]

    plan = _plan_walks(unique, num_teachers, params)
    total = np.zeros(num_teachers)
    for row, step, ls, cost in _walk_chunks(plan):
        counts = pair_count[row]
        owner = np.repeat(np.arange(row.size), counts)
        pair = (
            pair_start[row][owner]
            + np.arange(owner.size)
            - np.repeat(np.cumsum(counts) - counts, counts)
        )
        at = step[owner]
        terms = weight_at(pair, at) * ls[owner]
        if answer.change is not None:
            terms += pair_weight[pair] * answer.change_at(pair_top[pair], at) * cost[owner]
        total += np.bincount(at, weights=terms, minlength=num_teachers)
    # Rows off their walk (or on the plateau throughout) contribute the plateau.
    done_from = np.zeros(num_rows, dtype=np.int64)
    done_from[plan.walking] = plan.last_step + 1
    del plan  # its tail tables and per-gap bounds run to M entries each: no longer needed
    pair_done = done_from[pair_row]
    finished: NDArray[np.float64]
    if pr is None:
        finished = np.cumsum(
            np.bincount(pair_done, weights=pair_weight, minlength=num_teachers + 1)
        )
        return total + params.plateau * finished[:num_teachers]
    distinct, top_index = np.unique(pair_top, return_inverse=True)
    finished = np.zeros((0, num_teachers))
    for block, span in _blocks(distinct.size, num_teachers):
        rows = distinct[block]
        if span.start == 0:
            mine = (top_index >= block.start) & (top_index < block.start + rows.size)
            cells = (top_index[mine] - block.start) * (num_teachers + 1) + pair_done[mine]
            done = np.bincount(
                cells, weights=pair_weight[mine], minlength=rows.size * (num_teachers + 1)
            )
            finished = np.asarray(done, dtype=np.float64).reshape(rows.size, num_teachers + 1)
            np.cumsum(finished, axis=1, out=finished)  # in place: M entries a row
        distance = np.arange(span.start, span.stop)
        weight = params.plateau * pr[np.minimum(rows[:, None] + distance + answer.ahead, highest)]
        if answer.change is not None:
            weight += answer.independent * answer.change_at(rows[:, None], distance)
        total[span] += np.sum(finished[:, span] * weight, axis=0)
    return total


def _blocks(num_rows: int, num_teachers: int) -> Iterator[tuple[slice, slice]]:
    """(rows, distances) blocks of about ``_ENTRY_CHUNK`` cells at most, the distances of
    a block of rows in increasing order (a running quantity can be carried across them)."""
    width = min(num_teachers, _ENTRY_CHUNK)
    height = max(1, min(_THRESHOLD_ROW_CHUNK, _ENTRY_CHUNK // width))
    for first in range(0, num_rows, height):
        for start in range(0, num_teachers, width):
            yield (
                slice(first, min(first + height, num_rows)),
                slice(start, min(start + width, num_teachers)),
            )


def _pr_answered_table(
    num_teachers: int, threshold: float, sigma1: float
) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
    """(P(h), |P(h+1) - P(h)|) for h = 0 .. M (the change has M entries), P = Pr[answered].

    Each change is a difference of the nearer tails, rounded up by four ulps of the larger.
    """
    pr, upper = np.empty(num_teachers + 1), np.empty(num_teachers + 1)
    change = np.empty(num_teachers)
    # By blocks of tops (elementwise, so the same numbers): M can be millions.
    for start in range(0, num_teachers + 1, _PAIR_CHUNK):
        stop = min(start + _PAIR_CHUNK + 1, num_teachers + 1)  # one past: the next change
        margins = threshold_margins(
            np.arange(start, stop, dtype=np.float64)[:, None], threshold, sigma1
        )
        pr[start:stop] = p = special.ndtr(margins)
        upper[start:stop] = u = special.ndtr(-margins)  # Pr[not answered], from its own tail
        near = np.where(margins[:-1] >= 0, u[:-1] - u[1:], p[1:] - p[:-1])
        near = np.abs(near) + 4 * np.finfo(np.float64).eps * np.maximum(p[1:], u[:-1])
        change[start : stop - 1] = near
    return pr, change


@dataclass(frozen=True)
class _ChangeWindow:
    """max over tops h'' within distance d of h of the change of P next to h''.

    From running maxima of the changes next to each top: a window that ends left of the
    peak reads the prefix maximum at its right end, one that starts right of it the suffix
    maximum at its left end, and one that holds the peak the peak.
    """

    prefix: NDArray[np.float64]  # running maximum of max(|dP(h)|, |dP(h-1)|), h = 0 .. M
    suffix: NDArray[np.float64]  # the same from the right
    peak: int
    largest: float  # the change at the peak

    @classmethod
    def build(cls, change: NDArray[np.float64]) -> _ChangeWindow:
        near = np.zeros(change.size + 1)
        near[:-1] = change
        near[1:] = np.maximum(near[1:], change)
        peak = int(np.argmax(near))
        prefix = np.maximum.accumulate(near)
        suffix = np.maximum.accumulate(near[::-1], out=near[::-1])[::-1]
        return cls(prefix, suffix, peak, float(prefix[peak]))

    def at(self, top: NDArray[np.int64], distance: NDArray[np.int64]) -> NDArray[np.float64]:
        """The window maximum, elementwise over broadcast (top, distance)."""
        low = np.maximum(top - distance, 0)
        high = np.minimum(top + distance, self.prefix.size - 1)
        return np.where(
            high < self.peak,
            self.prefix[high],
            np.where(low > self.peak, self.suffix[low], self.largest),
        )

    def total(
        self, tops: NDArray[np.int64], num_teachers: int, extra: int = 0
    ) -> NDArray[np.float64]:
        """sum over queries of the window maximum per distance d (the window reaching d +
        ``extra`` steps). Shapes: (Q,) -> (M,)."""
        distinct, multiplicity = np.unique(tops, return_counts=True)
        total = np.zeros(num_teachers)
        for block, span in _blocks(distinct.size, num_teachers):
            distance = np.arange(span.start, span.stop) + extra
            total[span] += multiplicity[block] @ self.at(distinct[block, None], distance)
        return total


# --------------------------------------------------------------------------
# Threshold local sensitivity
# --------------------------------------------------------------------------


def _threshold_ls_table(
    num_teachers: int,
    threshold: float,
    sigma1: float,
    order: float,
    *,
    rounded_up: bool,
    exact: bool = False,
    sensitivity: int = 1,
) -> NDArray[np.float64]:
    """ThreshLS(h) for h = 0 .. M (Algorithm 5's helper). Shapes: -> (M+1,).

    The threshold step's RDP (Theorem 6 with sigma -> sqrt(2) sigma1, or with ``exact`` the
    divergence of its two outcomes, ``rdp_threshold_joint``) depends on the votes only
    through h = round(max(votes)), and a neighbour moves h by at most ``sensitivity`` (1; 2
    under half to even at exact halves): entry h is the largest change of the cost between
    h and a top within that many steps of it. ``rounded_up`` rounds each difference up (the
    reference subtracts plainly).
    """
    rdp = np.empty(num_teachers + 1)
    orders = np.array([order])
    # By blocks of tops (elementwise, so the same numbers): M can be millions.
    for start in range(0, num_teachers + 1, _PAIR_CHUNK):
        top = np.arange(start, min(start + _PAIR_CHUNK, num_teachers + 1), dtype=np.float64)
        if exact:
            margins = (top - threshold) / sigma1
            part = rdp_threshold_joint(margins, sigma1, orders, shift=float(sensitivity))
        else:
            logq = logq_threshold(top[:, None], threshold, sigma1)
            part = rdp_threshold(logq, sigma1, orders, sensitivity=sensitivity)
        rdp[start : start + top.size] = part[:, 0]
    table = np.zeros(num_teachers + 1)
    for gap in range(1, sensitivity + 1):
        high, low = rdp[gap:], rdp[:-gap]
        if rounded_up:
            step = _excess(np.maximum(high, low), np.minimum(high, low))
        else:
            step = np.abs(high - low)
        np.maximum(table[:-gap], step, out=table[:-gap])  # h and the top gap above it
        np.maximum(table[gap:], step, out=table[gap:])  # h and the top gap below it
    return table


def _threshold_ls_rows(
    tops: NDArray[np.int64],
    table: NDArray[np.float64],
    strict: bool,
    distance: NDArray[np.int64] | None = None,
    carry: NDArray[np.float64] | None = None,
) -> NDArray[np.float64]:
    """ThresholdLocalSensitivity for each h in ``tops`` at ``distance`` (default: every
    distance). ``carry``: with strict, the running maximum over the smaller distances,
    per row. Shapes: (N,), (M+1,), (D,), (N,) -> (N, D)."""
    num_teachers = table.size - 1
    if distance is None:
        distance = np.arange(num_teachers)
    up = tops[:, None] + distance
    down = tops[:, None] - distance
    ls_up = np.where(up <= num_teachers, table[np.minimum(up, num_teachers)], -np.inf)
    ls_down = np.where(down >= 0, table[np.maximum(down, 0)], -np.inf)
    ls = np.maximum(ls_up, ls_down)
    if strict:
        # Theorem 24 needs the max over distances <= d: a running maximum.
        running = np.maximum.accumulate(ls, axis=1)
        return running if carry is None else np.maximum(running, carry[:, None])
    # Reference: only d < max(h, M-h) is filled, the rest stays 0.
    return np.where(distance < np.maximum(tops, num_teachers - tops)[:, None], ls, 0.0)


def _threshold_tops(
    step1_votes: NDArray[np.float64], num_teachers: int, half_even: bool, lowest: int = 0
) -> NDArray[np.int64]:
    # Rounded as log_pr_answered_threshold rounds it (round_votes: half up by default).
    tops = round_votes(step1_votes.max(axis=1), half_even=half_even)
    if np.any(tops < lowest) or np.any(tops > num_teachers):
        raise ValueError(
            f"round(max(votes)) must lie in [{lowest}, num_teachers={num_teachers}] for the "
            "threshold step"
        )
    return tops.astype(np.int64)


def local_sensitivity_threshold(
    counts: ArrayLike,
    num_teachers: int,
    threshold: float,
    sigma1: float,
    order: float,
    *,
    strict: bool = False,
    half_even: bool = False,
    exact: bool = False,
) -> NDArray[np.float64]:
    """Upper bounds on the threshold step's local sensitivity at distance d, per query.

    Algorithm 4's ThresholdLocalSensitivity, Papernot et al. 2018. With
    h = round(max(counts)) (``round_votes``: half up, or half to even as the
    reference with ``half_even``), entry d is
    max(ThreshLS(h+d), ThreshLS(h-d)) over the ends inside [0, M].

    ``strict=False`` reproduces the reference exactly, including two quirks:
    the distance d = max(h, M-h) and beyond are never filled (they stay 0),
    and entry d is the value at distance exactly d, not a running maximum.
    ``strict=True`` is what a strict reading of Theorem 24 needs: every
    distance is filled and entry d is the maximum over distances <= d, so the
    array is non-decreasing in d and never below the default.

    Args:
        counts: votes for step 1 (votes - baseline for Interactive GNMax; may be fractional).
        num_teachers: M.
        threshold: T.
        sigma1: noise standard deviation of the threshold step.
        order: Renyi order.
        strict: see above.
        half_even: round max(counts) half to even, as the reference.
        exact: the cost is the exact divergence of the two outcomes
            (``--threshold-bound exact``), not Theorem 6's.

    Returns:
        Local-sensitivity bounds per query and distance.

    Raises:
        ValueError: sigma1 <= 0, order <= 1, M < 1, or round(max) outside [0, M].

    Shapes: counts (Q, C) -> (Q, M).
    """
    step1 = _as_counts(counts)
    num_teachers = _check_num_teachers(num_teachers)
    sigma1 = _check_positive("sigma1", sigma1)
    order = _check_order(order)
    tops = _threshold_tops(step1, num_teachers, half_even)
    sensitivity = statistic_sensitivity(step1, half_even=half_even)
    table = _threshold_ls_table(
        num_teachers,
        float(threshold),
        sigma1,
        order,
        rounded_up=strict,
        exact=exact,
        sensitivity=sensitivity,
    )
    unique, inverse = np.unique(tops, return_inverse=True)
    # A top d + reach steps away bounds distance d (reach 1 where a neighbour moves h by 2).
    reach = sensitivity - 1
    rows = _threshold_ls_rows(unique, table, strict, np.arange(num_teachers + reach))
    return rows[:, reach:][inverse.reshape(-1)]


def _threshold_total(
    tops: NDArray[np.int64], table: NDArray[np.float64], strict: bool, reach: int = 0
) -> NDArray[np.float64]:
    """sum over queries of ThresholdLocalSensitivity per distance d, the tops within d +
    ``reach`` steps of h (``reach`` 1 where a neighbour moves h by 2: the rounded top of a
    histogram d teachers away is within d + 1 of h). Shapes: (Q,), (M+1,) -> (M,)."""
    unique, multiplicity = np.unique(tops, return_counts=True)
    num_teachers = table.size - 1
    total = np.zeros(num_teachers)
    carry = np.zeros(0)
    for block, span in _blocks(unique.size, num_teachers):
        if span.start == 0:
            carry = np.full(block.stop - block.start, -np.inf)
            if reach and strict:  # the running maximum starts at distance 0
                near = _threshold_ls_rows(unique[block], table, strict, np.arange(reach))
                carry = near[:, -1]
        distance = np.arange(span.start, span.stop) + reach
        ls = _threshold_ls_rows(unique[block], table, strict, distance, carry)
        carry = ls[:, -1]
        total[span] += multiplicity[block].astype(np.float64) @ ls
    return total


# --------------------------------------------------------------------------
# Sum over queries (Theorem 24) and the GNSS release (Theorem 23)
# --------------------------------------------------------------------------


def local_sensitivity_total(
    votes: ArrayLike,
    num_teachers: int,
    order: float,
    sigma: float,
    *,
    threshold: float | None = None,
    sigma1: float | None = None,
    step1_votes: ArrayLike | None = None,
    step2_weights: ArrayLike | None = None,
    data_independent_step1: bool = False,
    data_independent_step2: bool = False,
    reference: bool = False,
    increments_verified: bool = False,
    half_even: bool = False,
    threshold_exact: bool = False,
    threshold_sensitivity: int | None = None,
) -> NDArray[np.float64]:
    """Local-sensitivity bound of the total RDP at each distance d (Theorem 24).

    The sum over queries of a bound on the change of each query's published cost,
    thr(n) + w(n) g(n), over every histogram within distance d and its neighbours:
    the threshold step's (strict: a running maximum, every distance filled) plus the
    answer step's, whose weight w is Pr[answered] in expectation and so moves with the
    votes too (``_AnswerWeights``), or a fixed 0/1 mask for a realised run. A
    data-independent step has no sensitivity of its own, but in expectation its cost
    still moves with Pr[answered]. Never materialises a (Q, M) array: GNMax walks run on
    distinct sorted rows in chunks, and the threshold step is grouped by round(max(step1
    votes)).

    ``reference=True`` accumulates as the reference's
    ``_find_optimal_smooth_sensitivity_parameters``: its GNMax bounds, its threshold
    bounds (distances past max(h, M-h) left at 0, no running maximum), and each
    answer step weighted by Pr[answered] at the votes themselves.

    Args:
        votes: integer teacher vote counts (step 2, GNMax).
        num_teachers: M.
        order: Renyi order.
        sigma: GNMax (step 2) noise standard deviation.
        threshold: T of Confident/Interactive GNMax; None for plain GNMax
            (no step 1, all weights 1).
        sigma1: threshold-step noise standard deviation (required with threshold).
        step1_votes: what step 1 thresholds; votes - baseline for Interactive
            GNMax. Defaults to ``votes``.
        step2_weights: a realised run's 0/1 answered mask (or any fixed weights).
            Defaults to Pr[answered] (the expectation the reference uses), or 1
            without a threshold.
        data_independent_step1: step 1 uses Prop. 8's bound (no sensitivity).
        data_independent_step2: step 2 uses Prop. 8's bound (no sensitivity).
        reference: the reference's bounds, which can be below the truth.
        increments_verified: C6 holds at this order (see ``local_sensitivity_gnmax``).
        half_even: round the threshold statistic half to even, as the reference.
        threshold_sensitivity: how far a neighbour moves the rounded statistic (1, or 2
            under half to even at exact halves); None: from ``step1_votes`` and
            ``half_even`` (``threshold.statistic_sensitivity``).
        threshold_exact: the threshold step is accounted exactly (``--threshold-bound
            exact``): its table is of that cost.

    Returns:
        The summed bound per distance.

    Raises:
        ValueError: inconsistent shapes, missing sigma1, invalid parameters.

    Shapes: votes (Q, C), step1_votes (Q, C), step2_weights (Q,) -> (M,).
    """
    counts = _as_counts(votes, "votes")
    num_queries, num_classes = counts.shape
    num_teachers = _check_num_teachers(num_teachers)
    order = _check_order(order)
    sigma = _check_positive("sigma", sigma)
    total = np.zeros(num_teachers)
    answer = _AnswerWeights(np.ones(num_queries))

    if threshold is None:
        if step2_weights is not None:
            answer = _AnswerWeights(_fixed_weights(step2_weights, num_queries))
    else:
        if sigma1 is None:
            raise ValueError("sigma1 is required together with threshold")
        sigma1 = _check_positive("sigma1", sigma1)
        step1 = counts if step1_votes is None else _as_counts(step1_votes, "step1_votes")
        if step1.shape != counts.shape:
            raise ValueError(f"step1_votes has shape {step1.shape}, votes {counts.shape}")
        # With a baseline, abstaining teachers make votes - baseline sum below 0, and the
        # statistic h of the votes or of a neighbour can be negative, down to -M: the tables
        # then run over h = -M .. M, shifted by M (they depend on h - T alone).
        offset = 0
        if step1_votes is not None and np.any(step1.sum(axis=1) < -0.5):
            offset = num_teachers
        levels = num_teachers + offset  # the largest shifted h
        tops = _threshold_tops(step1, num_teachers, half_even, lowest=-offset) + offset
        shifted = float(threshold) + offset
        if threshold_sensitivity is None:
            threshold_sensitivity = statistic_sensitivity(step1, half_even=half_even)
        reach = threshold_sensitivity - 1
        if not data_independent_step1:
            table = _threshold_ls_table(
                levels,
                shifted,
                sigma1,
                order,
                rounded_up=not reference,
                exact=threshold_exact,
                sensitivity=threshold_sensitivity,
            )
            total += _threshold_total(tops, table, not reference, reach)[:num_teachers]
            del table  # M entries, used
        if step2_weights is not None:
            answer = _AnswerWeights(_fixed_weights(step2_weights, num_queries))
        elif reference:
            pr = np.exp(
                log_pr_answered_threshold(step1, float(threshold), sigma1, half_even=half_even)
            )
            answer = _AnswerWeights(pr)
        else:
            pr, change = _pr_answered_table(levels, shifted, sigma1)
            window = _ChangeWindow.build(change)
            del change  # M entries, no longer needed: the window holds its running maxima
            # The answer step's cost is at most Prop. 8's, whether or not it is data-dependent.
            independent = float(rdp_gnmax_data_independent(sigma, np.array([order]))[0])
            answer = _AnswerWeights(
                np.ones(num_queries), tops, pr, window, independent, threshold_sensitivity
            )
            if data_independent_step2 or num_classes == 1:
                moved = window.total(tops, levels, 2 * reach)[:num_teachers]
                total += independent * threshold_sensitivity * moved

    if not data_independent_step2 and num_classes > 1 and num_queries > 0:
        params = _GnmaxSensitivity.build(
            sigma,
            order,
            num_classes,
            reference=reference,
            increments_verified=increments_verified,
        )
        total += _gnmax_total(_as_integer_votes(counts), answer, num_teachers, params)
    return total


def _fixed_weights(weights: ArrayLike, num_queries: int) -> NDArray[np.float64]:
    out = np.asarray(weights, dtype=np.float64)
    if out.shape != (num_queries,):
        raise ValueError(f"step2_weights must have shape ({num_queries},), got {out.shape}")
    if not np.all(np.isfinite(out)) or np.any(out < 0):
        raise ValueError("step2_weights must be finite and non-negative")
    return out


def smooth_sensitivity(ls_total: ArrayLike, beta: float) -> float:
    """beta-smooth sensitivity from local-sensitivity bounds: max_d e^(-beta d) LS[d].

    Definition 12 / Theorem 24, Papernot et al. 2018.

    Raises:
        ValueError: empty input, NaN, or beta < 0.

    Shapes: ls_total (M,) -> scalar.
    """
    ls = np.asarray(ls_total, dtype=np.float64)
    if ls.ndim != 1 or ls.size == 0 or np.any(np.isnan(ls)):
        raise ValueError("ls_total must be a non-empty 1-D array without NaN")
    if not beta >= 0:
        raise ValueError(f"beta must be non-negative, got {beta}")
    return float(np.max(ls * np.exp(-beta * np.arange(ls.size))))


def rdp_gnss(beta: float, sigma_ss: float, order: float) -> float:
    """RDP of the GNSS release (Theorem 23, Papernot et al. 2018).

    lambda e^(2 beta) / sigma_ss^2 + (beta lambda - log(1 - 2 lambda beta) / 2) / (lambda - 1),
    valid for 1 < lambda < 1 / (2 beta). sigma_ss = inf (no noise needed) is allowed.

    Raises:
        ValueError: beta < 0, sigma_ss <= 0, or the order outside (1, 1/(2 beta)).

    Shapes: scalars -> scalar.
    """
    order = _check_order(order)
    if not (beta >= 0 and math.isfinite(beta)):
        raise ValueError(f"beta must be finite and non-negative, got {beta}")
    if not sigma_ss > 0:
        raise ValueError(f"sigma_ss must be positive, got {sigma_ss}")
    if beta > 0 and not order < 1 / (2 * beta):
        raise ValueError(f"order {order} outside the (1, 1/(2*beta)) range for beta={beta}")
    # Theorem 23, Papernot et al. 2018.
    # In float64: sigma_ss^2 beyond the float range gives a cost of 0 (or inf), not an error.
    with np.errstate(over="ignore", divide="ignore", under="ignore"):
        noise_term = order * np.exp(2 * beta) / np.float64(sigma_ss) ** 2
    return float(noise_term) + (beta * order - 0.5 * math.log1p(-2 * order * beta)) / (order - 1)


def optimal_gnss_parameters(
    ls_total: ArrayLike, rdp_at_order: float, order: float
) -> tuple[float, float, float]:
    """(beta, SS_beta, sigma_ss) minimising the reference's release cost.

    As ``smooth_sensitivity_table._find_optimal_smooth_sensitivity_parameters``:
    beta runs over ``np.arange(.3/order, .495/order, .01/order)``; for each,
    SS = max_d e^(-beta d) LS[d] (Definition 12), sigma_ss = (lambda e^(2 beta) / SS)^(1/3)
    (minimiser of lambda e^(2 beta)/sigma^2 + 2 SS sigma), and the cost is
    rdp_at_order + rdp_gnss(beta, sigma_ss) (Theorem 23) + 2 SS sigma_ss. The first
    strict minimum wins. The choice looks at the sensitive data, so it is not
    itself private (as in the reference). If every LS is 0, SS = 0 and
    sigma_ss = inf with 2 SS sigma_ss treated as 0 (no noise is needed).

    Raises:
        ValueError: empty or NaN ls_total, negative entries, order <= 1.

    Shapes: ls_total (M,) -> (scalar, scalar, scalar).
    """
    ls = np.asarray(ls_total, dtype=np.float64)
    order = _check_order(order)
    if ls.ndim != 1 or ls.size == 0 or np.any(np.isnan(ls)) or np.any(ls < 0):
        raise ValueError("ls_total must be a non-empty 1-D array of non-negative numbers")
    betas = np.arange(0.3 / order, 0.495 / order, 0.01 / order)
    distance = np.arange(ls.size)
    # One beta at a time: M can be millions, and a (betas, M) table would be gigabytes.
    ss = np.array([np.max(np.exp(-(beta * distance)) * ls) for beta in betas])
    growth = order * np.exp(2 * betas)
    # SS = 0: sigma_ss = inf, no noise needed. SS = inf (an unbounded local sensitivity):
    # sigma_ss = 0 and an infinite cost, which no beta improves.
    with np.errstate(divide="ignore", invalid="ignore"):
        sigma_ss = (growth / ss) ** (1 / 3)
        # Theorem 23 per beta; 1/(2 beta) >= order/0.99 > order on this grid.
        rdp_release = growth / sigma_ss**2 + (
            betas * order - 0.5 * np.log1p(-2 * order * betas)
        ) / (order - 1)
        noise = ss * np.where(ss > 0, sigma_ss, 0.0)  # 0 * inf treated as 0
    cost = np.where(np.isinf(ss), np.inf, rdp_at_order + rdp_release + 2 * noise)
    best = int(np.argmin(cost))
    return float(betas[best]), float(ss[best]), float(sigma_ss[best])


# --------------------------------------------------------------------------
# Data-independent shortcuts and conditions C5, C6
# --------------------------------------------------------------------------


def is_data_independent_always_opt_gnmax(
    num_teachers: int, num_classes: int, sigma: float, order: float
) -> bool:
    """Tell whether GNMax's data-dependent bound never beats Prop. 8's at this order.

    As the reference's ``is_data_independent_always_opt_gaussian``: the most
    favourable histogram (unanimous) gives RDP within ``np.isclose`` of lambda/sigma^2
    (its relative tolerance only: see the comment below).

    Shapes: scalars -> bool.
    """
    num_teachers = _check_num_teachers(num_teachers)
    if int(num_classes) != num_classes or num_classes < 1:
        raise ValueError(f"num_classes must be a positive integer, got {num_classes}")
    sigma = _check_positive("sigma", sigma)
    order = _check_order(order)
    unanimous = np.zeros((1, int(num_classes)))
    unanimous[0, 0] = num_teachers
    orders = np.array([order])
    dependent = rdp_gnmax(logq_gnmax(unanimous, sigma), sigma, orders)[0, 0]
    # atol=0: the reference's default atol=1e-8 calls any cost below 1e-8 "close".
    return bool(np.isclose(dependent, rdp_gnmax_data_independent(sigma, orders)[0], atol=0))


def is_data_independent_always_opt_threshold(
    num_teachers: int, threshold: float, sigma1: float, order: float, sensitivity: int = 1
) -> bool:
    """Tell whether the threshold step's data-dependent bound never beats Prop. 8's.

    As the reference's ``is_data_independent_always_opt_threshold``: the RDP
    depends only on max(votes) in [0, M] and is checked at both ends with
    ``np.isclose`` (relative tolerance only) against lambda / (2 sigma1^2).

    Shapes: scalars -> bool.
    """
    num_teachers = _check_num_teachers(num_teachers)
    sigma1 = _check_positive("sigma1", sigma1)
    order = _check_order(order)
    ends = np.array([[0.0], [float(num_teachers)]])
    orders = np.array([order])
    logq = logq_threshold(ends, threshold, sigma1)
    dependent = rdp_threshold(logq, sigma1, orders, sensitivity=sensitivity)
    independent = rdp_threshold_data_independent(sigma1, orders, sensitivity=sensitivity)[0]
    return bool(np.all(np.isclose(dependent[:, 0], independent, atol=0)))


def _theorem6_derivative(q: float, sigma: float, order: float) -> float:
    """d/dq of Theorem 6's bound (Prop. 10's mu1, mu2), unconditional, as sympy would get.

    With L = -log q: mu2 = sigma sqrt(L), mu1 = mu2 + 1, eps_i = mu_i / sigma^2,
    log A = log(1-q) - log(1 - P), P = (q e^eps2)^(1-1/mu2), log B = eps1 - log(q)/(mu1-1),
    beta = log((1-q) A^(l-1) + q B^(l-1)) / (l-1). Evaluated in float64 arithmetic whose
    overflow gives +-inf; NaN (inf - inf) where the value is not representable.
    """
    with np.errstate(all="ignore"):
        q_ = np.float64(q)
        log_q = np.log(q_)
        root = np.sqrt(-log_q)
        mu2 = sigma * root
        mu1 = mu2 + 1
        variance = np.float64(sigma) ** 2
        eps2 = mu2 / variance
        eps1 = mu1 / variance
        d_mu2 = -sigma / (2 * q_ * root)
        d_eps2 = d_mu2 / variance
        exponent = (1 - 1 / mu2) * (log_q + eps2)
        d_exponent = d_mu2 / mu2**2 * (log_q + eps2) + (1 - 1 / mu2) * (1 / q_ + d_eps2)
        power = np.exp(exponent)
        log_a = np.log1p(-q_) - np.log1p(-power)
        d_log_a = -1 / (1 - q_) + power / (1 - power) * d_exponent
        log_b = eps1 - log_q / (mu1 - 1)
        d_log_b = d_eps2 - 1 / (q_ * (mu1 - 1)) + log_q / (mu1 - 1) ** 2 * d_mu2
        first = np.log1p(-q_) + (order - 1) * log_a
        second = log_q + (order - 1) * log_b
        log_s = np.logaddexp(first, second)
        # d log S / dq with the weights of the two terms; q B^(l-1) / q kept in log space.
        derivative = (
            np.exp(first - log_s) * (-1 / (1 - q_) + (order - 1) * d_log_a)
            + np.exp((order - 1) * log_b - log_s)
            + np.exp(second - log_s) * (order - 1) * d_log_b
        )
        return float(derivative / (order - 1))


def _minimum_of(fn: Callable[[float], float], upper: float) -> float:
    from scipy import optimize

    def checked(q: float) -> float:
        value = fn(q)
        if math.isnan(value):
            raise NumericalRangeError(
                f"C5/C6 cannot be checked numerically: the derivative is not representable "
                f"at q = {q:.6g}"
            )
        return value

    result = optimize.minimize_scalar(checked, bounds=(0, upper), method="bounded")
    if not result.success:
        raise RuntimeError("the bounded minimiser did not converge while checking C5/C6")
    return float(result.fun)


def check_conditions(
    sigma: float, num_classes: int, order: float, *, reference: bool = False
) -> tuple[bool, bool]:
    """Conditions C5 and C6 (Appendix B.4.2, Papernot et al. 2018) at one order.

    C5: beta(q) is non-decreasing on [0, q0]. C6: Delta beta(q) =
    beta(B_U(q)) - beta(q) is non-decreasing on [0, q1], q1 = B_L(q0). As the
    reference, a condition holds when the minimum of the derivative found by
    ``scipy.optimize.minimize_scalar(method="bounded")`` is >= 0 (a numerical
    check, not a proof); the derivative is analytic here instead of symbolic
    (sympy), and C6 is only checked when C5 holds. q0 and q1 are those of the
    sound analysis (where the published bound reaches Prop. 8's), or with
    ``reference`` the reference's (the Brent root of Theorem 6 = Prop. 8).

    Returns:
        (C5, C6).

    Raises:
        ValueError: sigma <= 0, num_classes < 2, order <= 1.
        NumericalRangeError: q0 or q1 underflows, so the interval cannot be searched.
        RuntimeError: the minimiser does not converge.

    Shapes: scalars -> (bool, bool).
    """
    sigma = _check_positive("sigma", sigma)
    num_classes = _check_num_classes(num_classes)
    order = _check_order(order)
    logq0 = _logq0_scalar(sigma, order) if reference else _logq0_sound(sigma, order, num_classes)
    q0 = math.exp(logq0)
    if q0 == 0.0:
        raise NumericalRangeError(
            f"C5/C6 cannot be checked numerically: q0 = exp({logq0:.6g}) underflows to 0"
        )
    cond5 = _minimum_of(lambda q: _theorem6_derivative(q, sigma, order), q0) >= 0
    if not cond5:
        return False, False
    logq1 = float(log_bl_gnmax(np.array([logq0]), sigma, num_classes)[0])
    q1 = math.exp(logq1)
    if q1 == 0.0:
        raise NumericalRangeError(
            f"C6 cannot be checked numerically: q1 = exp({logq1:.6g}) underflows to 0"
        )
    half_classes = (num_classes - 1) / 2

    def delta_derivative(q: float) -> float:
        z = float(special.erfcinv(q / half_classes))
        upper = half_classes * float(special.erfc(z - 1 / sigma))  # B_U without the cap
        # dB_U/dq = exp(2 z / sigma - 1 / sigma^2) from d erfc and d erfcinv.
        with np.errstate(all="ignore"):
            slope = np.exp(2 * z / sigma - 1 / np.float64(sigma) ** 2)
            return float(
                _theorem6_derivative(upper, sigma, order) * slope
                - _theorem6_derivative(q, sigma, order)
            )

    cond6 = _minimum_of(delta_derivative, q1) >= 0
    return True, bool(cond6)

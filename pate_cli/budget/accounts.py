"""What one release costs, whatever the votes and the noise, and what releases cost together.

An *account* is a guarantee that depends on neither the votes nor the noise, in one of three
forms (JSON objects, as a budget file holds them):

- ``{"kind": "gaussian", "mu": MU}``: mu-Gaussian DP (Dong, Roth and Su 2022). GNMax on Q
  queries is mu = sqrt(2 Q) / sigma (a histogram moves by sqrt(2) in L2); Confident- and
  Interactive-GNMax, every query answered (the worst case), add Q s^2 / sigma1^2 to mu^2
  for the threshold step, whose statistic moves by s = 1 (2 under half to even rounding);
- ``{"kind": "pure", "epsilon0": E0, "count": K}``: K mechanisms each E0-DP (LNMax: 2 gamma
  per query, Laplace noise on counts of L1 sensitivity 2);
- ``{"kind": "rdp", "orders": [...], "rdp": [...]}``: Renyi DP at the orders listed (a GNSS
  release of a data-dependent epsilon is (lambda, eps)-RDP at its one order, Theorem 23 of
  Papernot et al. 2018, on top of the mechanism's own cost there; a mechanism whose steps
  are of no one form above, Gaussian and pure DP or pure DP of several E0, is its worst
  case's RDP at the default orders, every query answered). At an order not listed,
  the value at the smallest listed order above it holds too (the Renyi divergence does not
  decrease with its order: van Erven and Harremoes 2014, Theorem 3); above the largest,
  nothing is known.

:func:`compose` gives the smallest of the sound ways to compose accounts, and says which:

- ``gaussian-dp``: all Gaussian, mu = sqrt(sum mu_i^2) (Corollary 3.3) on the exact curve;
- ``optimal-pure``: all pure with one E0, the optimal composition (Kairouz, Oh and
  Viswanath 2015);
- ``rdp``: every account as RDP per order (the default grid and every order an account
  lists), summed and converted at the budget's delta;
- ``grouped``: the accounts split by form (the Gaussian ones, the pure ones of each E0, the
  RDP ones), each group composed its best way at a share delta_i of the delta, and the
  groups added as (sum eps_i, sum delta_i). Basic composition; the groups' charges may
  interleave in any order, which concurrent composition allows (Vadhan and Wang 2021, Lyu
  2022). The split is chosen to make the sum small; whichever is chosen, the shares sum to
  at most delta, so the choice moves how tight the total is, never whether it is sound.

A release at another order than an earlier one is never infinite: at the smaller of the two
orders both are known.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from pate_cli.accountant.compose import data_independent_rdp
from pate_cli.accountant.figures import eps_curve
from pate_cli.choices import Conversion
from pate_cli.core import exact
from pate_cli.core.smooth import rdp_gnss
from pate_cli.errors import AccountError
from pate_cli.mechanisms import Mechanism
from pate_cli.mechanisms.steps import GaussianPart, PurePart, PureParts, joined
from pate_cli.orders import DEFAULT_ORDERS

Account = dict[str, Any]

GAUSSIAN = "gaussian"
PURE = "pure"
RDP = "rdp"

# How a total was composed (``Total.method``).
GAUSSIAN_DP = "gaussian-dp"
OPTIMAL_PURE = "optimal-pure"
GROUPED = "grouped"
NONE = "none"
METHODS = (GAUSSIAN_DP, OPTIMAL_PURE, RDP, GROUPED, NONE)

# Each group's share of delta is rounded down by this much, so the shares never sum above it.
_SHARE_MARGIN = 1e-12
# The smallest share of delta the split search gives a group (log10).
_SMALLEST_SHARE = -9.0


@dataclass(frozen=True)
class Release:
    """A GNSS release drawn by the run, its order, beta and sigma_ss fixed in advance."""

    order: float
    beta: float
    sigma_ss: float

    def to_dict(self) -> dict[str, float]:
        return {"order": self.order, "beta": self.beta, "sigma_ss": self.sigma_ss}


def mechanism_account(mechanism: Mechanism, queries: int, *, half_even: bool = False) -> Account:
    """The data-independent account of ``queries`` queries of ``mechanism`` (module docstring):
    every query answered. Steps whose shares join into no one form an account holds
    (Gaussian and pure DP, pure DP of several E0) are charged their worst case's RDP."""
    step, moves = mechanism.threshold_step, 2 if half_even else 1
    parts = [] if step is None else [step.part(queries, float(moves))]
    part = joined([*parts, mechanism.answer_step.part(queries)])
    account = None if part is None else part.read(_AccountOf())
    if account is None:
        # Each step's RDP whatever the votes, every query answered (Mironov 2017, Prop. 1).
        worst = data_independent_rdp(mechanism, DEFAULT_ORDERS, queries, queries, moves)
        account = {"kind": RDP, "orders": DEFAULT_ORDERS.tolist(), "rdp": worst.tolist()}
    return _finite(account)


class _AccountOf:
    """The account of the steps' composed share (a ``PartReader``), as a budget holds it;
    None for a share of no form a budget holds."""

    def gaussian(self, part: GaussianPart) -> Account | None:
        # mu^2 summed over the steps, then the root (Corollary 3.3).
        return {"kind": GAUSSIAN, "mu": part.root_mu}

    def pure(self, part: PurePart) -> Account | None:
        return {"kind": PURE, "epsilon0": part.epsilon0, "count": part.count}

    def pure_parts(self, part: PureParts) -> Account | None:
        return None


def _finite(account: Account) -> Account:
    """``account`` when every number of it is a finite double, as a budget line holds it.

    Raises:
        AccountError: one is not (noise so small that the account overflows)."""
    if _in_range(account):
        return account
    raise AccountError(
        f"the run's {account['kind']} account ({_described(account)}) is past double "
        "precision: its noise is too small for any account to bound it"
    )


def _in_range(account: Account) -> bool:
    """Whether every number of ``account`` is a finite double (a JSON integer past 1.8e308
    is none)."""
    kind = account["kind"]
    numbers = (
        [account["mu"]]
        if kind == GAUSSIAN
        else [account["epsilon0"], account["count"]]
        if kind == PURE
        else [*account["orders"], *account["rdp"]]
    )
    try:
        return all(math.isfinite(float(number)) for number in numbers)
    except OverflowError:  # an integer past the double range
        return False


def _described(account: Account) -> str:
    """An account's figures in a few words: "mu 1.4e+154", "epsilon0 2 x 20", "rdp 3 at
    order 14"."""
    kind = account["kind"]
    if kind == GAUSSIAN:
        return f"mu {float(account['mu']):.3g}"
    if kind == PURE:
        return f"epsilon0 {float(account['epsilon0']):.3g} x {account['count']}"
    pairs = list(zip(account["rdp"], account["orders"], strict=True))
    if len(pairs) > 3:  # the worst case at the default orders: its ends
        (r0, o0), (r1, o1) = pairs[0], pairs[-1]
        return (
            f"rdp at {len(pairs)} orders, {float(r0):.3g} at order {float(o0):g} to "
            f"{float(r1):.3g} at order {float(o1):g}"
        )
    return ", ".join(f"rdp {float(r):.3g} at order {float(o):g}" for r, o in pairs)


def account_of(
    mechanism: Mechanism, queries: int, *, half_even: bool = False, release: Release | None = None
) -> Account:
    """The account of a run: its mechanism's, and with a GNSS release, the mechanism's RDP at
    the release's order plus the release's own (Theorem 23), at that order only."""
    account = mechanism_account(mechanism, queries, half_even=half_even)
    if release is None:
        return account
    order = release.order
    base = float(rdp_of(account, np.array([order]))[0])
    cost = rdp_gnss(release.beta, release.sigma_ss, order)
    return _finite({"kind": RDP, "orders": [order], "rdp": [base + cost]})


def rdp_of(account: Account, orders: np.ndarray) -> np.ndarray:
    """An account as RDP at ``orders`` (inf where it says nothing).

    Gaussian: lambda mu^2 / 2 (mu-GDP is the Gaussian mechanism of sensitivity mu at unit
    noise). Pure E0-DP: min(E0, lambda E0^2 / 2) a step (Mironov 2017, Prop. 3; Bun and
    Steinke 2016, Prop. 1.4, through zCDP), times the count. RDP: at each order, the smallest
    value listed at that order or above (van Erven and Harremoes 2014, Theorem 3)."""
    kind = account["kind"]
    if kind == GAUSSIAN:
        mu = float(account["mu"])
        with np.errstate(over="ignore"):  # inf past the double range: composed to inf
            return orders * (mu * mu / 2)
    if kind == PURE:
        eps0, count = float(account["epsilon0"]), float(account["count"])
        with np.errstate(over="ignore"):
            return count * np.minimum(eps0, orders * (eps0 * eps0 / 2))
    if kind == RDP:
        listed = np.asarray(account["orders"], dtype=np.float64)
        values = np.asarray(account["rdp"], dtype=np.float64)
        above = listed[None, :] >= np.asarray(orders, dtype=np.float64)[:, None]
        return np.min(np.where(above, values[None, :], math.inf), axis=1, initial=math.inf)
    raise ValueError(f"unknown account kind {kind!r}")


@dataclass(frozen=True)
class Group:
    """Charges composed together within a grouped total, at their share of delta."""

    method: str
    epsilon: float
    delta: float
    charges: tuple[int, ...]
    """Their positions among the accounts composed (0 the first)."""

    def to_dict(self) -> dict[str, Any]:
        return {
            "method": self.method,
            "epsilon": self.epsilon,
            "delta": self.delta,
            "charges": [number + 1 for number in self.charges],
        }


@dataclass(frozen=True)
class Total:
    """Accounts composed: the (epsilon, delta) they spend together and how it was found."""

    epsilon: float
    delta: float
    method: str
    """One of ``METHODS`` (module docstring); ``none`` when there is no account."""
    groups: tuple[Group, ...] = ()
    """The groups of a ``grouped`` total (their deltas sum to at most ``delta``)."""

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"epsilon": self.epsilon, "delta": self.delta, "method": self.method}
        if self.groups:
            out["groups"] = [group.to_dict() for group in self.groups]
        return out


# How far above its float value an RDP route's epsilon is taken: the sum over accounts and the
# conversion round each term by a few ulp (1e-12 covers thousands of them).
_ROUNDING_SLACK = 1e-12


def compose(
    accounts: Sequence[Account],
    delta: float,
    conversion: Conversion,
    *,
    names: Sequence[str] | None = None,
) -> Total:
    """The accounts composed at ``delta``: the smallest of the sound ways (module docstring).

    Ties go to the first found: the whole composed one way before any grouping.

    Raises:
        AccountError: no finite epsilon bounds them in double precision (an account, or their
            total, overflows every way); the message names the account by ``names`` (each
            account's, "account 1"... by default).
    """
    if not accounts:
        return Total(0.0, delta, NONE)
    named = list(names) if names is not None else [f"account {n + 1}" for n in range(len(accounts))]
    for name, account in zip(named, accounts, strict=True):
        if not _in_range(account):
            raise AccountError(
                f"{name} ({account['kind']}) holds a number past double precision, so no "
                "total can be given"
            )
    everything = tuple(range(len(accounts)))
    epsilon, method = _Part(accounts, everything, conversion).best(delta)
    candidates = [Total(epsilon, delta, method)]
    parts: dict[tuple[int, ...], _Part] = {}  # a group tried in several groupings, built once
    for members in _partitions(accounts):
        grouping = [parts.setdefault(m, _Part(accounts, m, conversion)) for m in members]
        candidates.append(_grouped(grouping, delta))
    total = min(candidates, key=lambda total: total.epsilon)
    if not math.isfinite(total.epsilon):
        raise AccountError(_past_range(accounts, delta, conversion, named))
    return total


def _past_range(
    accounts: Sequence[Account], delta: float, conversion: Conversion, named: Sequence[str]
) -> str:
    """Why the accounts have no finite total: the first that has none alone, or all of them."""
    for name, account in zip(named, accounts, strict=True):
        alone, _ = _Part([account], (0,), conversion).best(delta)
        if not math.isfinite(alone):
            return (
                f"{name} ({account['kind']}, {_described(account)}) is past double precision: "
                f"no finite epsilon bounds it at delta {delta:g}, so no total can be given"
            )
    return (
        f"the {len(accounts)} accounts together are past double precision: no finite epsilon "
        f"bounds their total at delta {delta:g}"
    )


def _form(account: Account) -> tuple[Any, ...]:
    """What composes exactly with what: Gaussian with Gaussian, pure with pure of one E0."""
    if account["kind"] == GAUSSIAN:
        return (GAUSSIAN,)
    if account["kind"] == PURE:
        return (PURE, float(account["epsilon0"]))
    return (RDP,)


def _partitions(accounts: Sequence[Account]) -> list[list[tuple[int, ...]]]:
    """The groupings tried: every form its own group; and each exact form apart from all
    the rest through RDP (when that differs)."""
    forms: dict[tuple[Any, ...], list[int]] = {}
    for number, account in enumerate(accounts):
        forms.setdefault(_form(account), []).append(number)
    if len(forms) < 2:
        return []
    groups = [tuple(members) for members in forms.values()]
    found = [groups]
    if len(forms) > 2:
        for form, members in forms.items():
            if form[0] == RDP:
                continue
            rest = tuple(n for n in range(len(accounts)) if n not in members)
            found.append([tuple(members), rest])
    return found


class _Part:
    """Some of the accounts, composed their best way at any delta."""

    def __init__(
        self, accounts: Sequence[Account], members: tuple[int, ...], conversion: Conversion
    ) -> None:
        self.members = members
        chosen = [accounts[n] for n in members]
        self._conversion = conversion
        listed = [float(o) for a in chosen if a["kind"] == RDP for o in a["orders"]]
        orders = np.union1d(DEFAULT_ORDERS, np.array(listed, dtype=np.float64))
        with np.errstate(over="ignore"):  # a sum past the double range: no figure there
            total = np.sum([rdp_of(account, orders) for account in chosen], axis=0)
        finite = np.isfinite(total)
        self._orders, self._rdp = orders[finite], total[finite]
        self._exact = _exact_curve(chosen)
        self._estimates: dict[float, tuple[np.ndarray, np.ndarray]] = {}

    def rdp(self, delta: float) -> float:
        """Through RDP: the smallest epsilon over the orders (inf where none is finite)."""
        if self._orders.size == 0:
            return math.inf
        eps = eps_curve(self._conversion, self._orders, self._rdp, delta)
        if self._conversion is Conversion.IMPROVED:
            # Not evaluated at orders <= 1.01 (inf there); the classic one is above it
            # everywhere (Balle et al. 2020, Theorem 21 against Mironov 2017, Prop. 3).
            classic = eps_curve(Conversion.CLASSIC, self._orders, self._rdp, delta)
            eps = np.minimum(eps, classic)
        # Each order's figure is a few roundings of terms no larger than these: moved above.
        sizes = self._rdp + (abs(math.log(delta)) + 5.0) / (self._orders - 1) + 5.0
        return float(max(np.min(eps + _ROUNDING_SLACK * sizes), 0.0))

    def best(self, delta: float) -> tuple[float, str]:
        """The smaller of the exact curve (when there is one) and RDP, and its method."""
        through_rdp = self.rdp(delta)
        if self._exact is None:
            return through_rdp, RDP
        method, _, epsilon_at = self._exact
        exact_epsilon = epsilon_at(delta)
        return (exact_epsilon, method) if exact_epsilon <= through_rdp else (through_rdp, RDP)

    def estimate(self, delta: float) -> Callable[[np.ndarray], np.ndarray]:
        """A cheap estimate of ``best`` at deltas ``delta * share`` (shares from 10^-9 to 1),
        for the split search only (the total is computed by ``best`` at the split found):
        both curves tabulated at a few points and interpolated in log delta (the exact one
        from its delta at a few epsilons, which needs no inversion)."""
        if delta not in self._estimates:
            self._estimates[delta] = self._tabulate(delta)
        log_deltas, epsilons = self._estimates[delta]
        return lambda shares: np.interp(np.log(delta * shares), log_deltas, epsilons)

    def _tabulate(self, delta: float) -> tuple[np.ndarray, np.ndarray]:
        """(log delta, epsilon) of the estimate, log delta increasing."""
        log_deltas = math.log(delta) + np.linspace(_SMALLEST_SHARE, 0, 37) * math.log(10)
        through_rdp = np.array([self.rdp(math.exp(x)) for x in log_deltas])
        if self._exact is None:
            return log_deltas, through_rdp
        _, log_delta_of, epsilon_at = self._exact
        low, high = epsilon_at(delta), epsilon_at(delta * 10.0**_SMALLEST_SHARE)
        if not (math.isfinite(high) and high > low):
            return log_deltas, np.minimum(through_rdp, high)
        grid = np.linspace(low, high, 32)
        exact_log_deltas = np.array([log_delta_of(float(eps)) for eps in grid])
        # log delta falls as epsilon grows: interpolate on the reversed table.
        exact_eps = np.interp(log_deltas, exact_log_deltas[::-1], grid[::-1], left=high, right=low)
        return log_deltas, np.minimum(through_rdp, exact_eps)


ExactCurve = tuple[str, Callable[[float], float], Callable[[float], float]]
"""(method, log delta of epsilon, epsilon at delta) of accounts that compose exactly."""


def _exact_curve(chosen: Sequence[Account]) -> ExactCurve | None:
    """The exact curve of accounts of one form that composes exactly (module docstring)."""
    kinds = {account["kind"] for account in chosen}
    if kinds == {GAUSSIAN}:
        mu = _root_sum_squares([float(a["mu"]) for a in chosen])
        return (
            GAUSSIAN_DP,
            lambda eps: exact.log_delta_gaussian(eps, mu),
            lambda delta: exact.gaussian_epsilon(mu, delta),
        )
    if kinds == {PURE} and len({float(a["epsilon0"]) for a in chosen}) == 1:
        eps0 = float(chosen[0]["epsilon0"])
        count = sum(int(a["count"]) for a in chosen)
        return (
            OPTIMAL_PURE,
            lambda eps: exact.log_delta_pure_composition(eps, eps0, count),
            lambda delta: exact.pure_composition_epsilon(eps0, count, delta),
        )
    return None


def _root_sum_squares(mus: list[float]) -> float:
    """sqrt(sum mu_i^2) (Corollary 3.3), the root rounded up so that mu is never below the
    composition's; inf past the double range (the figure is then inf, never an error)."""
    try:
        return math.nextafter(math.sqrt(math.fsum(mu * mu for mu in mus)), math.inf)
    except OverflowError:  # fsum's partial sums past the double range
        return math.inf


def _grouped(parts: list[_Part], delta: float) -> Total:
    """The groups composed each their best way and added at the split of delta found by
    ``_split`` (module docstring: basic composition)."""
    shares = _split([part.estimate(delta) for part in parts])
    # Each share rounded down a little: the deltas spent never sum above delta.
    deltas = [delta * share * (1 - _SHARE_MARGIN) for share in shares]
    while math.fsum(deltas) > delta:  # pragma: no cover - the margin is far above rounding
        deltas = [d * (1 - _SHARE_MARGIN) for d in deltas]
    groups = []
    for part, share in zip(parts, deltas, strict=True):
        epsilon, method = part.best(share)
        groups.append(Group(method, epsilon, share, part.members))
    try:
        total = math.fsum(group.epsilon for group in groups)
    except OverflowError:  # past the double range: no finite figure this way
        total = math.inf
    # fsum is correctly rounded: one step up keeps the sum at or above the exact one.
    return Total(math.nextafter(total, math.inf), delta, GROUPED, tuple(groups))


def _split(estimates: list[Callable[[np.ndarray], np.ndarray]]) -> list[float]:
    """Shares of delta (summing to 1) that make the estimated sum small: between each pair of
    groups, the best share on a grid refined by a golden-section search (one round for two
    groups, a few for more)."""
    count = len(estimates)
    shares = np.full(count, 1.0 / count)
    for _ in range(3 if count > 2 else 1):
        for i in range(count):
            for j in range(i + 1, count):
                pool = shares[i] + shares[j]

                def cost(
                    given: np.ndarray, i: int = i, j: int = j, pool: float = pool
                ) -> np.ndarray:
                    total = estimates[i](given * pool) + estimates[j]((1 - given) * pool)
                    return np.where(np.isfinite(total), total, math.inf)

                moved = _best_fraction(cost)
                shares[i], shares[j] = moved * pool, (1 - moved) * pool
    shares = np.clip(shares, 10.0**_SMALLEST_SHARE / 2, None)
    return [float(share) for share in shares / shares.sum()]


def _best_fraction(cost: Callable[[np.ndarray], np.ndarray]) -> float:
    """The fraction in (0, 1) that makes ``cost`` smallest: a grid symmetric in its log-odds,
    then a golden-section search between the best point's neighbours."""
    odds = np.linspace(_SMALLEST_SHARE, -_SMALLEST_SHARE, 73) * math.log(10)
    fractions = 1 / (1 + np.exp(-odds))
    values = cost(fractions)
    best = int(np.argmin(values))
    low, high = odds[max(best - 1, 0)], odds[min(best + 1, odds.size - 1)]
    ratio = (math.sqrt(5) - 1) / 2
    for _ in range(20):
        a, b = high - ratio * (high - low), low + ratio * (high - low)
        pair = cost(1 / (1 + np.exp(-np.array([a, b]))))
        if pair[0] <= pair[1]:
            high = b
        else:
            low = a
    middle = (low + high) / 2
    found = 1 / (1 + math.exp(-middle))
    return found if cost(np.array([found]))[0] <= values[best] else float(fractions[best])

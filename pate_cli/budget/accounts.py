"""What one release costs, whatever the votes and the noise, and what releases cost together.

An *account* is a guarantee that depends on neither the votes nor the noise, in one of three
forms (JSON objects, as a budget file holds them):

- ``{"kind": "gaussian", "mu": MU}``: mu-Gaussian DP (Dong, Roth and Su 2022). GNMax on Q
  queries is mu = sqrt(2 Q) / sigma (a histogram moves by sqrt(2) in L2); Confident- and
  Interactive-GNMax, every query answered (the worst case), add Q s^2 / sigma1^2 to mu^2
  for the threshold step, whose statistic moves by s = 1 (2 under half to even rounding);
- ``{"kind": "pure", "epsilon0": E0, "count": K}``: K mechanisms each E0-DP (LNMax: 2 gamma
  per query, Laplace noise on counts of L1 sensitivity 2);
- ``{"kind": "rdp", "orders": [...], "rdp": [...]}``: Renyi DP at the orders listed only
  (a GNSS release of a data-dependent epsilon is (lambda, eps)-RDP at its one order,
  Theorem 23 of Papernot et al. 2018, on top of the mechanism's own cost there).

:func:`compose` composes accounts exactly where their forms allow it: all Gaussian, mu =
sqrt(sum mu_i^2) (Corollary 3.3) and the exact Gaussian curve; all pure with one E0, the
optimal composition (Kairouz, Oh and Viswanath 2015); otherwise every account as RDP per
order, summed and converted at the budget's delta.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np

from pate_cli.accountant.figures import eps_curve
from pate_cli.choices import Conversion
from pate_cli.core import exact
from pate_cli.core.smooth import rdp_gnss
from pate_cli.mechanisms import Mechanism, UnsupportedError
from pate_cli.mechanisms.steps import GaussianPart, PurePart
from pate_cli.orders import DEFAULT_ORDERS

Account = dict[str, Any]

GAUSSIAN = "gaussian"
PURE = "pure"
RDP = "rdp"


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
    every query answered."""
    step, moves = mechanism.threshold_step, 2.0 if half_even else 1.0
    parts = [] if step is None else [step.part(queries, moves)]
    parts.append(mechanism.answer_step.part(queries))
    gaussian = [part for part in parts if isinstance(part, GaussianPart)]
    if len(gaussian) == len(parts):
        return {"kind": GAUSSIAN, "mu": math.sqrt(sum(part.mu_squared for part in gaussian))}
    if len(parts) == 1 and isinstance(parts[0], PurePart):
        return {"kind": PURE, "epsilon0": parts[0].epsilon0, "count": parts[0].count}
    raise UnsupportedError(f"{mechanism.name}: no data-independent account to charge")


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
    return {"kind": RDP, "orders": [order], "rdp": [base + cost]}


def rdp_of(account: Account, orders: np.ndarray) -> np.ndarray:
    """An account as RDP at ``orders`` (inf where it says nothing).

    Gaussian: lambda mu^2 / 2 (mu-GDP is the Gaussian mechanism of sensitivity mu at unit
    noise). Pure E0-DP: min(E0, lambda E0^2 / 2) a step (Mironov 2017, Prop. 3; Bun and
    Steinke 2016, Prop. 1.4, through zCDP), times the count."""
    kind = account["kind"]
    if kind == GAUSSIAN:
        return orders * float(account["mu"]) ** 2 / 2
    if kind == PURE:
        eps0, count = float(account["epsilon0"]), int(account["count"])
        return count * np.minimum(eps0, orders * eps0**2 / 2)
    if kind == RDP:
        listed = dict(zip(map(float, account["orders"]), map(float, account["rdp"]), strict=True))
        return np.array([listed.get(float(order), math.inf) for order in orders])
    raise ValueError(f"unknown account kind {kind!r}")


@dataclass(frozen=True)
class Total:
    """Accounts composed: the (epsilon, delta) they spend together and how it was found."""

    epsilon: float
    delta: float
    method: str
    """``gaussian``, ``pure-dp-optimal``, ``rdp`` or ``none`` (no account)."""

    def to_dict(self) -> dict[str, Any]:
        return {"epsilon": self.epsilon, "delta": self.delta, "method": self.method}


def compose(accounts: list[Account], delta: float, conversion: Conversion) -> Total:
    """The accounts composed at ``delta``: exactly where their forms allow (module docstring),
    otherwise through RDP; never below any of the ways that apply."""
    if not accounts:
        return Total(0.0, delta, "none")
    kinds = {account["kind"] for account in accounts}
    if kinds == {GAUSSIAN}:
        mu = math.sqrt(math.fsum(float(a["mu"]) ** 2 for a in accounts))
        return Total(exact.gaussian_epsilon(mu, delta), delta, "gaussian")
    if kinds == {PURE} and len({float(a["epsilon0"]) for a in accounts}) == 1:
        eps0 = float(accounts[0]["epsilon0"])
        count = sum(int(a["count"]) for a in accounts)
        return Total(exact.pure_composition_epsilon(eps0, count, delta), delta, "pure-dp-optimal")
    listed = [float(o) for a in accounts if a["kind"] == RDP for o in a["orders"]]
    orders = np.union1d(DEFAULT_ORDERS, np.array(listed, dtype=np.float64))
    total = np.sum([rdp_of(account, orders) for account in accounts], axis=0)
    finite = np.isfinite(total)
    if not finite.any():
        return Total(math.inf, delta, "rdp")
    eps = eps_curve(conversion, orders[finite], total[finite], delta)
    return Total(float(np.max([np.min(eps), 0.0])), delta, "rdp")

"""``pate plan``: the one parameter that meets a target (epsilon, delta), before any vote is
seen.

The cost planned is the publishable one: every query answered, data-independent (docs/cli.md,
"pate plan"). It falls as sigma or sigma1 grows and rises with the number of queries and
with gamma, so the unknown is found by bracketing and bisection on that monotone curve,
always from the feasible side: the epsilon reported at the returned value never exceeds
the target, and where the cost meets the target continuously, the epsilon at a continuous
value is within ``CLOSE`` (1e-7) relative of the target (a count is the largest within the
target). With pilot votes (``votes``), Confident-GNMax's guaranteed cost
on them is planned instead (the joint bound, not the paper's expected cost, which averages
over the threshold noise and can lie below the run's true epsilon), and the report says the
votes were looked at.
"""

from __future__ import annotations

import math
import os
from collections.abc import Callable
from dataclasses import dataclass, field
from decimal import ROUND_CEILING, ROUND_FLOOR, Context, Decimal
from typing import Any

import numpy as np
from numpy.typing import NDArray

from pate_cli.accountant.compose import data_independent_rdp
from pate_cli.accountant.figures import epsilon_result, exact_bound, exact_or_reason
from pate_cli.choices import Accountant, Conversion
from pate_cli.common import checks, spelling
from pate_cli.core.bisection import bisect_boundary
from pate_cli.errors import UsageError
from pate_cli.mechanisms import Mechanism, infer_mechanism, registered
from pate_cli.mechanisms.inference import likeliest
from pate_cli.mechanisms.parameters import Cost
from pate_cli.mechanisms.registry import declarations, default
from pate_cli.orders import as_orders
from pate_cli.reports.encoding import plain
from pate_cli.reports.reprs import short_repr
from pate_cli.reports.rounding import bound_significant
from pate_cli.votes import Votes, load_votes

_RELATIVE = 1e-10  # bisection width, relative to the value: far below CLOSE
#: How close below the target the epsilon at a solved parameter is (relative), once copyable.
CLOSE = 1e-7
_MAX_QUERIES = 10**15


@dataclass(frozen=True)
class PlanReport:
    """What ``pate plan`` found: the value of the unknown and the cost there."""

    solve_for: str
    value: float
    epsilon: float
    """The cost at ``value``: never above ``target``."""
    target: float
    delta: float
    accountant: str
    conversion: str | None
    mechanism: dict[str, Any]
    queries: int
    votes: str | None = None
    """The pilot votes planned on (looked at), or None."""
    notes: tuple[str, ...] = field(default_factory=tuple)

    @property
    def warnings(self) -> tuple[str, ...]:
        return self.notes

    def to_dict(self) -> dict[str, Any]:
        """Exactly what ``pate plan --json`` prints."""
        out: dict[str, Any] = {
            "command": "plan",
            "solve_for": self.solve_for,
            "value": int(self.value) if self.solve_for == "queries" else self.value,
            "epsilon": self.epsilon,
            "target_epsilon": float(self.target),  # as the CLI parses it, whatever was given
            "delta": self.delta,
            "accountant": self.accountant,
            "mechanism": self.mechanism,
            "queries": self.queries,
            "votes_looked_at": self.votes,
            "warnings": list(self.notes),
        }
        if self.conversion is not None:
            out["conversion"] = self.conversion
        return plain(out)

    to_json_dict = to_dict

    def __repr__(self) -> str:
        # The value solved for under its own name: "sigma=71.33" (it may be the queries).
        fields = {"queries": self.queries, self.solve_for: self.value, "epsilon": self.epsilon}
        return short_repr(
            "PlanReport", mechanism=self.mechanism.get("name"), **fields, target=self.target
        )

    def _repr_markdown_(self) -> str:
        return (
            f"### pate plan: {self.solve_for} = {self.value:g}\n\n"
            f"epsilon {bound_significant(self.epsilon)} <= {self.target:g} at delta {self.delta:g} "
            f"({self.accountant} accountant)"
        )


def _mechanism(kind: type[Mechanism], values: dict[str, float | int | None]) -> Mechanism:
    """The mechanism of the plan, as the command line builds it; an unknown (None) stands
    at 1 until it is solved for (a parameter the planned cost does not depend on, as the
    threshold T, must be given)."""
    setting = {
        p.name: 1.0 if values.get(p.name) is None and p.solvable else values.get(p.name)
        for p in kind.parameters
    }
    return infer_mechanism(kind.name, setting, has_baseline=kind.needs_baseline)


def _which(mechanism: str | None, given: dict[str, float | int | None]) -> type[Mechanism]:
    """The mechanism named, or the smallest whose flags hold those given (``--gamma``:
    LNMax; ``--threshold`` or ``--sigma1``: Confident-GNMax; else GNMax)."""
    if mechanism is not None:
        return registered(mechanism)
    on = {
        "--" + key.replace("_", "-")  # a parameter's flag (--exp-scale for exp_scale)
        for key, value in given.items()
        if value is not None and key != "queries"
    }
    return likeliest(on) if on else default()


def _unknown(
    kind: type[Mechanism], given: dict[str, float | int | None]
) -> tuple[str, tuple[str, ...]]:
    # The mechanism's own parameters that the cost moves with, and the query count.
    wanted = (*(p.name for p in kind.parameters if p.solvable), "queries")
    takes = {*kind.keywords(), "queries"}
    extra = [k for k, v in given.items() if v is not None and k not in takes]
    if extra:
        raise UsageError(f"{spelling.option(extra[0])}: {kind.name} has no such parameter")
    missing = [k for k in wanted if given[k] is None]
    if len(missing) != 1:
        said = (
            "all are given: leave out the one to solve for"
            if not missing
            else f"{len(missing)} are left out ({', '.join(map(spelling.option, missing))}): "
            "give all but the one to solve for"
        )
        raise UsageError(
            f"plan solves for exactly one of {', '.join(map(spelling.option, wanted))} "
            f"({kind.name}); {said}"
        )
    return missing[0], wanted


def plan(
    *,
    delta: float,
    epsilon: float,
    mechanism: str | None = None,
    queries: int | None = None,
    accountant: str | Accountant = Accountant.EXACT,
    conversion: str | Conversion = "classic",
    orders: str | NDArray[np.float64] | None = None,
    votes: Votes | str | os.PathLike[str] | None = None,
    **parameters: float | None,
) -> PlanReport:
    """What ``pate plan`` computes: the value of the one parameter left out.

    Args:
        delta: target delta, in (0, 1).
        epsilon: target epsilon, finite and > 0.
        mechanism: the mechanism, when the flags leave it open.
        queries: the number of queries (None: solve for it).
        parameters: the mechanism's parameters by keyword (``sigma=40``; the built-ins'
            are sigma, threshold, sigma1 and gamma, a plugin's its own); exactly one of
            queries and the mechanism's parameters that its cost moves with is left out
            (or None) and solved for.
        accountant: "exact" (Gaussian DP or the optimal pure-DP composition) or "rdp"
            (Prop. 8 over the orders, converted with ``conversion``).
        conversion: RDP to (epsilon, delta), for the rdp accountant.
        orders: Renyi orders for the rdp accountant (default ``DEFAULT_ORDERS``).
        votes: pilot votes (``Votes`` or a path): plan Confident-GNMax's guaranteed
            data-dependent cost on them instead (rdp accountant); they are looked at.

    Raises:
        TypeError: a keyword no registered mechanism takes.
        UsageError: no unknown or more than one, bad values, or a target no value reaches
            (the message gives what the other steps alone cost and the smallest reachable
            epsilon, rounded up).
    """
    checks.delta(delta)
    if not (math.isfinite(epsilon) and epsilon > 0):
        raise UsageError(
            f"{spelling.given('epsilon', epsilon)}: expected a finite number greater than 0"
        )
    accountant = checks.choice(Accountant, accountant, "accountant").value
    if queries is not None and queries < 1:
        raise UsageError(
            f"{spelling.given('queries', queries)}: expected a whole number of at least 1"
        )
    pilot = None if votes is None else _pilot(votes, queries)
    if pilot is not None:
        queries = pilot.num_queries
    given: dict[str, float | int | None] = {**_keywords(parameters), "queries": queries}
    name = _which(mechanism, {**given, "queries": None})
    unknown, _ = _unknown(name, given)
    base = _mechanism(name, given)  # checks the given values
    kind = checks.conversion(conversion)
    grid = as_orders(orders)
    if pilot is not None:
        _check_pilot_mechanism(base)
        accountant = "rdp"
    absent = None
    if accountant == "exact":  # steps with no exact joint account: planned on Renyi DP
        absent = exact_or_reason(base, 1, 1, delta)[1]
        accountant = "exact" if absent is None else "rdp"
    problem = _Problem(name, given, unknown, pilot, accountant, grid, delta, kind, absent)
    rising = unknown != "queries" and declarations()[unknown].cost is Cost.RISES
    return problem.report(_solve(problem.cost, unknown, epsilon, delta, rising), epsilon)


def _keywords(given: dict[str, float | None]) -> dict[str, float | None]:
    """The mechanism parameters given, every registered one named (None: not given).

    Raises:
        TypeError: a keyword that no registered mechanism takes.
    """
    known = declarations()
    unknown = sorted(set(given) - set(known))
    if unknown:
        raise TypeError(
            f"plan() got an unexpected keyword argument {unknown[0]!r}; the mechanisms' "
            f"parameters are {', '.join(known)}"
        )
    return {name: given.get(name) for name in known}


def _pilot(votes: Votes | str | os.PathLike[str], queries: int | None) -> Votes:
    """The pilot votes, read when given as a path; they fix the number of queries."""
    if queries is not None:
        raise UsageError(f"{spelling.option('votes')}: the pilot votes fix the number of queries")
    return votes if isinstance(votes, Votes) else load_votes(votes)


def _check_pilot_mechanism(base: Mechanism) -> None:
    """Pilot votes plan Confident-GNMax's guaranteed cost: the mechanism must be one."""
    if base.threshold_step is None:
        raise UsageError(
            f"{spelling.option('votes')} plans Confident-GNMax's guaranteed cost: give "
            f"{spelling.option('threshold')}"
        )


@dataclass(frozen=True)
class _Problem:
    """What ``plan`` solves: the mechanism ``name`` with every parameter ``given`` but
    ``unknown``, and how its planned cost is accounted (by ``accountant``, or on the
    ``pilot`` votes)."""

    name: type[Mechanism]
    given: dict[str, float | int | None]
    unknown: str
    pilot: Votes | None
    accountant: str
    grid: NDArray[np.float64]
    delta: float
    kind: Conversion
    absent: str | None = None
    """Why the exact accountant asked for was not used (no exact account of the steps)."""

    def mechanism(self, value: float) -> Mechanism:
        """The mechanism with the unknown at ``value``."""
        return _mechanism(self.name, dict(self.given, **{self.unknown: value}))

    def num_queries(self, value: float) -> int:
        """The number of queries with the unknown at ``value`` (the pilot's, with one)."""
        if self.pilot is not None:
            return self.pilot.num_queries
        return int(dict(self.given, **{self.unknown: value})["queries"] or 0)

    def cost(self, value: float) -> float:
        """The planned epsilon with the unknown at ``value``: the guaranteed cost on the
        pilot votes, or the publishable one (every query answered, data-independent)."""
        count = self.num_queries(value)
        chosen = self.mechanism(value)
        if self.pilot is not None:
            from pate_cli.jobs.analysis import analysis_report

            joint = analysis_report(self.pilot, chosen, self.grid, self.delta, self.kind).guaranteed
            assert joint is not None  # computed for every Confident-GNMax analysis
            return joint.epsilon
        if self.accountant == "exact":
            return exact_bound(chosen, count, count, self.delta).epsilon
        rdp = data_independent_rdp(chosen, self.grid, count, count)
        return epsilon_result(self.grid, rdp, self.delta, self.kind).epsilon

    def report(self, value: float, target: float) -> PlanReport:
        """The plan with the unknown at ``value``, for the target epsilon ``target``."""
        pilot = self.pilot
        notes: tuple[str, ...] = ()
        if pilot is not None:
            notes = (
                f"planned on the votes of {pilot.path}: choosing parameters on votes is itself "
                "a use of them, unless they are public or a pilot set apart from the private "
                "data",
            )
        if self.absent is not None:
            notes = (*notes, f"{self.absent}: planned on it (the rdp accountant)")
        final = self.cost(value)
        return PlanReport(
            solve_for=self.unknown,
            value=value,
            epsilon=final,
            target=target,
            delta=self.delta,
            accountant=self.accountant,
            conversion=self.kind.value if self.accountant == "rdp" else None,
            mechanism=self.mechanism(value).to_json_dict(),
            queries=self.num_queries(value),
            votes=None if pilot is None else pilot.path,
            notes=notes,
        )


def _solve(
    cost: Callable[[float], float],
    unknown: str,
    target: float,
    delta: float,
    rising: bool = False,
) -> float:
    """The value of the unknown: the largest number of queries within the target, or the
    boundary of a parameter, to ``PLAN_DIGITS`` digits (more where those would leave the
    epsilon more than ``CLOSE`` below the target) on the feasible side."""
    if unknown == "queries":
        return float(_largest_count(cost, target, delta))
    boundary = _boundary(cost, target, delta, rising=rising, name=unknown)
    fitting = boundary  # a cost not monotone in its last bits: the value is kept whole
    for digits in range(PLAN_DIGITS, 18):  # 17 digits give back any double
        value = _copyable(boundary, rising, digits)
        epsilon = cost(value)
        if epsilon <= target and epsilon >= target * (1 - CLOSE):
            return value
        if epsilon <= target and fitting == boundary:
            fitting = value  # the shortest within the target, should none be close to it
    # Not close at any digit: the boundary is not (a cost flat in the parameter there).
    return fitting


#: Significant digits of a solved parameter, at least: what the table prints is the value
#: itself, so a copied value keeps the promise (the epsilon at it within the target and
#: within ``CLOSE`` of it).
PLAN_DIGITS = 8


def _copyable(value: float, rising: bool, digits: int = PLAN_DIGITS) -> float:
    """``value`` to ``digits`` significant digits, on the side that keeps the cost within
    the target: down where the cost rises with the parameter (gamma), up where it falls
    (sigma, sigma1)."""
    if not math.isfinite(value) or value == 0:
        return value
    rounding = ROUND_FLOOR if rising else ROUND_CEILING
    rounded = Context(prec=digits, rounding=rounding).plus(Decimal(repr(value)))
    return float(rounded)


def rounded_up(epsilon: float, digits: int = 3) -> str:
    """``digits`` significant digits, rounded up: a cost is never printed below its value
    (``rounding.bound_significant``, the one policy of every printed figure)."""
    return bound_significant(epsilon, digits)


def _unreachable(target: float, delta: float, name: str, floor: float, limit: str) -> UsageError:
    """No value of ``name`` meets the target: say what the rest costs and what is reachable.

    ``floor`` is the cost at the limit ``limit`` of the solved parameter, where its own step
    costs nothing (or one query): the other steps alone, by the plan's own accountant. It is
    the cost of a real setting, so never below the smallest reachable epsilon, and printed
    rounded up.
    """
    alone = "even one query costs" if name == "queries" else "the other steps alone cost"
    subject = "number of queries" if name == "queries" else name
    least = rounded_up(floor)
    return UsageError(
        f"{spelling.given('epsilon', spelling.Placeholder(f'{target:g}'))}: "
        f"no {subject} reaches it: "
        f"{alone} epsilon {least} at delta "
        f"{delta:g}; the smallest reachable is {least} ({limit})"
    )


def _largest_count(cost: Callable[[float], float], target: float, delta: float) -> int:
    """The largest number of queries whose cost is within the target."""
    if not cost(1.0) <= target:
        raise _unreachable(target, delta, "queries", cost(1.0), "queries = 1")
    low, high = 1, 2
    while cost(float(high)) <= target:
        low, high = high, high * 2
        if high > _MAX_QUERIES:
            raise UsageError(
                f"{spelling.given('epsilon', spelling.Placeholder(f'{target:g}'))}: more than "
                f"{_MAX_QUERIES:g} queries fit"
            )
    return bisect_boundary(
        lambda count: cost(float(count)) <= target, low, high, midpoint="integer"
    )


_LEAP = 2.0**64


def _step(value: float, *, up: bool) -> float:
    """The next value the bracket tries: doubling (or halving) within 2^64 of 1, where every
    real setting lies, then 2^64 at a time, and doubling again for the last factor before
    1e300 (or 1e-300), so that a target no value reaches costs about 110 evaluations of the
    cost, not 1,000, and is judged at the same last value."""
    size = value if up else 1 / value
    factor = _LEAP if _LEAP <= size and size * _LEAP < 1e300 else 2.0
    return value * factor if up else value / factor


def _boundary(
    cost: Callable[[float], float], target: float, delta: float, *, rising: bool, name: str
) -> float:
    """The value where the monotone cost meets the target, from the feasible side."""

    def fits(value: float) -> bool:
        return bool(cost(value) <= target)

    # Bracket [bad, good] (rising: good below bad) by doubling or halving from 1.
    good, bad = (None, None)
    value = 1.0
    for _ in range(2100):
        extreme = value  # the last value tried: the cheapest when none fits
        if fits(value):
            good = value
            if bad is not None:
                break
            value = _step(value, up=rising)
        else:
            bad = value
            if good is not None:
                break
            value = _step(value, up=not rising)
        if not (1e-300 < value < 1e300):
            break
    if good is None:
        limit = f"{name} -> 0" if rising else f"{name} -> infinity"
        raise _unreachable(target, delta, name, cost(extreme), limit)
    if bad is None:
        return good  # every value fits: the cost does not depend on it here
    # Geometric: the bracket may lie anywhere in 1e-300 .. 1e300, and the promise is relative.
    return bisect_boundary(fits, good, bad, midpoint="geometric", rtol=_RELATIVE)

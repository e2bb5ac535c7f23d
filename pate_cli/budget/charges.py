"""What a run of ``analyze``, ``smooth_sensitivity`` or ``aggregate`` charges to a budget.

The charge depends only on the call's parameters, never on the votes or the noise, so it is
known (and refused when over the limit) before any noise is drawn:

- ``aggregate``: its mechanism on every query it may see (``max_queries`` caps them), every
  one answered;
- ``analyze`` and ``smooth_sensitivity`` stand for a release of the labels made from these
  votes (the mechanism's account on the queries analysed) and, when they draw a GNSS sample,
  that release too, at its order. A sample whose order, beta or sigma_ss would be chosen on
  the votes has no account that does not depend on them: such a run is refused, as is a run
  with a public ``seed`` (its outputs are not a private release).
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import Any

from pate_cli.budget.accounts import Account, Release, account_of
from pate_cli.budget.storage import now
from pate_cli.common import checks, spelling
from pate_cli.errors import UsageError
from pate_cli.mechanisms import Mechanism, mechanism_from_dict
from pate_cli.orders import fixed_order

#: The library functions that charge a budget.
CHARGING = ("aggregate", "analyze", "smooth_sensitivity")
# load_votes' keywords, which a preview passes on when the votes are a path or an array.
_READING = ("format", "fmt", "teachers", "num_classes", "member", "candidates", "queries")


@dataclass(frozen=True)
class Charge:
    """What a run charges: everything a budget line holds but its place in the chain."""

    command: str
    mechanism: Mechanism
    num_queries: int
    half_even: bool = False
    release: Release | None = None
    record_digest: str | None = None
    seed_commitment: str | None = None
    purposes: tuple[str, ...] = ()
    """The noise streams the run drew from its seed file (``seeds.PURPOSES``)."""
    account: Account = field(init=False)

    def __post_init__(self) -> None:
        account = account_of(
            self.mechanism, self.num_queries, half_even=self.half_even, release=self.release
        )
        object.__setattr__(self, "account", account)

    def fields(self) -> dict[str, Any]:
        """What a budget line holds of the charge, as JSON, and what ``verify`` recomputes
        from the charge's record (everything but ``created`` and the chain's ``prev``)."""
        return {
            "command": self.command,
            "mechanism": self.mechanism.to_json_dict(),
            "num_queries": self.num_queries,
            "half_even": self.half_even,
            "release": None if self.release is None else self.release.to_dict(),
            "account": self.account,
            "record_digest": self.record_digest,
            "seed_commitment": self.seed_commitment,
            "purposes": list(self.purposes),
        }

    def to_line(self, prev: str) -> dict[str, Any]:
        return {**self.fields(), "created": now(), "prev": prev}


def recomputed_account(entry: dict[str, Any]) -> Account:
    """A line's account recomputed from the line's own parameters."""
    release = entry.get("release")
    return account_of(
        mechanism_from_dict(entry["mechanism"]),
        int(entry["num_queries"]),
        half_even=bool(entry.get("half_even", False)),
        release=None if release is None else Release(**release),
    )


_FIXED = (
    "{what}: the release's order, beta and sigma_ss must be fixed in advance to be charged "
    "to a budget (a release tuned on the votes has no account that does not depend on "
    "them): {how}"
)


def _release(function: str, options: dict[str, Any]) -> Release | None:
    """The GNSS release the call draws, its parameters fixed in advance; None for none."""
    if function == "aggregate":
        return None
    if function == "analyze" and (not options.get("release") or options.get("data_independent")):
        return None
    beta, sigma_ss = options.get("beta"), options.get("sigma_ss")
    if function == "smooth_sensitivity":
        order = options.get("order")
        how = f"pass {spelling.options('order', 'beta', 'sigma-ss')}"
    else:
        order = fixed_order(options.get("orders"))
        how = (
            f"pass one order ({spelling.option('orders')}), "
            f"{spelling.options('beta', 'sigma-ss')}, or {spelling.option('no-release')}"
        )
    if order is None or beta is None or sigma_ss is None:
        raise UsageError(_FIXED.format(what=spelling.option("budget"), how=how))
    checks.release(order, beta, sigma_ss, "order" if function == "smooth_sensitivity" else "orders")
    return Release(float(order), float(beta), float(sigma_ss))


def charge_of(
    function: str,
    command: str,
    mechanism: Mechanism,
    num_queries: int,
    options: dict[str, Any],
    *,
    public_seed: bool = False,
    seed_commitment: str | None = None,
) -> Charge:
    """The charge of one call (module docstring).

    Raises:
        UsageError: the run has no account that depends on neither votes nor noise.
    """
    if public_seed:
        raise UsageError(
            f"{spelling.option('budget')}: a run whose noise is not private "
            f"({spelling.option('seed')}, or a caller's generator) is not a private release, "
            f"so there is nothing to charge (use {spelling.option('seed-file')}, or no seed)"
        )
    queries = num_queries
    if function == "aggregate" and options.get("max_queries") is not None:
        queries = min(queries, int(options["max_queries"]))
    release = _release(function, options)
    if function == "aggregate":
        purposes: tuple[str, ...] = ("aggregate-answer",)
        if mechanism.threshold_step is not None:
            purposes = ("aggregate-threshold", *purposes)
    else:
        purposes = () if release is None else ("gnss-sample",)
    return Charge(
        command,
        mechanism,
        queries,
        half_even=bool(options.get("half_even", False)),
        release=release,
        seed_commitment=seed_commitment if purposes else None,
        purposes=purposes,
    )


def seed_file_commitment(seed_file: str | os.PathLike[str] | None) -> str | None:
    """The commitment of an existing seed file (None: no seed file, or a new one)."""
    from pate_cli.files.seeds import from_seed_file

    if seed_file is None or not os.path.isfile(seed_file):
        return None
    return from_seed_file(seed_file, create=False).commitment


def call_charge(votes: Any, mechanism: Mechanism, command: str, kwargs: dict[str, Any]) -> Charge:
    """The charge of a library call ``command`` (``aggregate``, ``analyze`` or
    ``smooth_sensitivity``) with ``kwargs`` as the function takes them (``Budget.preview``).

    Raises:
        UsageError: an unknown function, or a call with nothing to charge (``charge_of``).
    """
    from pate_cli.mechanisms import as_mechanism
    from pate_cli.release.model import release_mode
    from pate_cli.votes import Votes, load_votes

    function = command.replace("-", "_")
    if function not in CHARGING:
        raise UsageError(f"command={command!r}: expected one of {', '.join(CHARGING)}")
    options = dict(kwargs)
    reading = {key: options.pop(key) for key in _READING if key in options}
    if "format" in reading:
        reading["fmt"] = reading.pop("format")
    if not isinstance(votes, Votes):
        votes = load_votes(votes, **reading)
    if function == "analyze":
        options["release"] = release_mode(options.get("release", "expected")) == "sample"
    seed, seed_file = options.pop("seed", None), options.pop("seed_file", None)
    return charge_of(
        function,
        function.replace("_", "-"),
        as_mechanism(mechanism),
        votes.num_queries,
        options,
        public_seed=seed is not None,
        seed_commitment=seed_file_commitment(seed_file),
    )

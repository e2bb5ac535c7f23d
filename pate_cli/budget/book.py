"""One privacy budget across releases: an append-only, hash-chained JSON-lines file.

The first line is the header (``"schema": "pate-budget"``, the budget's ``delta``,
``max_epsilon``, ``conversion`` and ``name``); every later line is one charge: the command,
its mechanism, number of queries and release, its account (``pate_cli.budget.accounts``),
the digest of its record and the commitment of its seed file where there are, ``prev`` (the
digest of the line before) and its own ``digest``, the SHA-256 of the line's canonical JSON
without it. A line edited, removed, inserted or moved breaks the chain; ``verify`` names the
first line that does not hold.

A charge holds an exclusive lock on the file (``flock``) from reading the total to the end of
its append, and appends one whole line with one write: runs charging one budget at once never
interleave, and the total after every charge is within the limit.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import json
import math
import os
from collections.abc import Iterator
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from typing import IO, Any, TypeGuard

from pate_cli import checks
from pate_cli.budget.accounts import (
    GAUSSIAN,
    PURE,
    RDP,
    Account,
    Release,
    Total,
    account_of,
    compose,
)
from pate_cli.choices import Conversion
from pate_cli.errors import ExitCode, InputError, UsageError
from pate_cli.mechanisms import Mechanism, mechanism_from_dict
from pate_cli.spelling import given, option

SCHEMA = "pate-budget"
VERSION = 1
MAX_BYTES = 256 << 20  # a budget of a million charges is far smaller


class BudgetExceeded(UsageError):
    """The charge would take the budget's total over its limit: nothing was written."""

    exit_code = ExitCode.BUDGET_EXCEEDED


def line_digest(line: dict[str, Any]) -> str:
    """SHA-256 of a line's canonical JSON (sorted keys, no spaces) without its ``digest``."""
    content = {key: value for key, value in line.items() if key != "digest"}
    text = json.dumps(content, sort_keys=True, separators=(",", ":"), allow_nan=False)
    return hashlib.sha256(text.encode()).hexdigest()


def _line(content: dict[str, Any]) -> bytes:
    content = {**content, "digest": line_digest(content)}
    return (json.dumps(content, allow_nan=False) + "\n").encode()


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

    def to_line(self, prev: str) -> dict[str, Any]:
        return {
            "command": self.command,
            "created": datetime.now(UTC).isoformat(timespec="seconds"),
            "mechanism": self.mechanism.to_json_dict(),
            "num_queries": self.num_queries,
            "half_even": self.half_even,
            "release": None if self.release is None else self.release.to_dict(),
            "account": self.account,
            "record_digest": self.record_digest,
            "seed_commitment": self.seed_commitment,
            "purposes": list(self.purposes),
            "prev": prev,
        }


def recomputed_account(entry: dict[str, Any]) -> Account:
    """An entry's account recomputed from its parameters (``verify``)."""
    release = entry.get("release")
    return account_of(
        mechanism_from_dict(entry["mechanism"]),
        int(entry["num_queries"]),
        half_even=bool(entry.get("half_even", False)),
        release=None if release is None else Release(**release),
    )


class Budget:
    """A budget file: its header, its entries and their composed total.

    ``Budget.init`` creates one, ``Budget.open`` reads one; ``charge`` appends a run's
    charge under the file's lock, refusing (``BudgetExceeded``) one that would take the total
    over the limit.
    """

    def __init__(self, path: str, header: dict[str, Any], entries: list[dict[str, Any]]):
        self.path = path
        self.header = header
        self.entries = entries

    @classmethod
    def init(
        cls,
        path: str | os.PathLike[str],
        *,
        delta: float,
        max_epsilon: float,
        name: str | None = None,
        conversion: str = "classic",
        force: bool = False,
    ) -> Budget:
        """Create the budget file (never over an existing one unless ``force``)."""

        where = os.fspath(path)
        checks.delta(delta)
        checks.max_epsilon(max_epsilon)
        if max_epsilon is None or not math.isfinite(max_epsilon):
            raise UsageError(f"{given('max-epsilon', max_epsilon)}: expected a finite number >= 0")
        header = {
            "schema": SCHEMA,
            "version": VERSION,
            "name": name,
            "delta": delta,
            "max_epsilon": max_epsilon,
            "conversion": checks.choice(Conversion, conversion, "conversion").value,
            "created": datetime.now(UTC).isoformat(timespec="seconds"),
        }
        flags = os.O_WRONLY | os.O_CREAT | (os.O_TRUNC if force else os.O_EXCL)
        try:
            fd = os.open(where, flags, 0o644)
        except FileExistsError:
            raise UsageError(
                f"{where} exists: a budget is never replaced (its charges would be lost); "
                f"pass {option('force')} to start it again"
            ) from None
        except OSError as error:
            raise InputError(f"{where}: cannot create the budget ({error.strerror})") from None
        with os.fdopen(fd, "wb") as stream:
            stream.write(_line(header))
            stream.flush()
            os.fsync(stream.fileno())
        return cls.open(where)

    @classmethod
    def open(cls, path: str | os.PathLike[str]) -> Budget:
        """Read a budget file; a file that is not one is an InputError."""
        where = os.fspath(path)
        with _opened(where, "rb") as stream:
            header, entries = _read(where, stream)
        return cls(where, header, entries)

    @property
    def delta(self) -> float:
        return float(self.header["delta"])

    @property
    def limit(self) -> float:
        return float(self.header["max_epsilon"])

    @property
    def conversion(self) -> Conversion:
        return Conversion(self.header.get("conversion", "classic"))

    def total(self, extra: list[Account] | None = None) -> Total:
        """The entries' accounts (and ``extra``) composed at the budget's delta."""
        accounts = [entry["account"] for entry in self.entries] + (extra or [])
        return compose(accounts, self.delta, self.conversion)

    @property
    def remaining(self) -> float:
        """How much epsilon the limit leaves (0 when spent)."""
        return max(self.limit - self.total().epsilon, 0.0)

    def check(self, charge: Charge) -> Total:
        """The total with ``charge`` added.

        Raises:
            BudgetExceeded: it would exceed the limit.
            UsageError: the charge's seed file already drew noise of the same purpose.
        """
        if charge.seed_commitment is not None:
            for number, entry in enumerate(self.entries, start=1):
                same = entry.get("seed_commitment") == charge.seed_commitment
                shared = set(entry.get("purposes", ())) & set(charge.purposes)
                if same and shared:
                    raise UsageError(
                        f"{self.path}: the seed file already drew the noise of {sorted(shared)[0]} "
                        f"for charge {number} ({entry['command']}, {entry['created']}): a "
                        "second release from it would draw the same noise; use a new seed file"
                    )
        total = self.total([charge.account])
        if not total.epsilon <= self.limit:
            raise BudgetExceeded(
                f"{self.path}: this run would spend epsilon {total.epsilon:.6g} in all "
                f"(delta {self.delta:g}, {total.method}), over the limit {self.limit:g}; "
                "nothing was written"
            )
        return total

    @contextlib.contextmanager
    def charging(self, charge: Charge) -> Iterator[Pending]:
        """Hold the file's lock, read the budget again and check ``charge`` (refused:
        ``BudgetExceeded``); the body appends it with ``Pending.append`` (or it is appended
        at the end with no record). If the body fails, the line is taken back."""
        with _opened(self.path, "r+b") as stream:
            fcntl.flock(stream.fileno(), fcntl.LOCK_EX)
            self.header, self.entries = _read(self.path, stream)
            total = self.check(charge)
            pending = Pending(self, stream, charge, total, stream.seek(0, os.SEEK_END))
            try:
                yield pending
                if not pending.appended:
                    pending.append(None)
            except BaseException:
                pending.take_back()
                raise

    def charge(self, charge: Charge) -> Total:
        """Append ``charge`` under the lock (see ``charging``); returns the new total."""
        with self.charging(charge) as pending:
            return pending.total

    def to_dict(self) -> dict[str, Any]:
        """``pate budget show --json``."""
        total = self.total()
        return {
            "command": "budget",
            "path": self.path,
            "name": self.header.get("name"),
            "delta": self.delta,
            "limit": self.limit,
            "conversion": self.conversion.value,
            "entries": self.entries,
            "total": total.to_dict(),
            "remaining": max(self.limit - total.epsilon, 0.0),
        }

    def __repr__(self) -> str:
        total = self.total()
        return (
            f"Budget({os.path.basename(self.path)!r}, entries={len(self.entries)}, "
            f"spent={total.epsilon:.4g}, limit={self.limit:g}, delta={self.delta:g})"
        )


class Pending:
    """A charge checked under the budget's lock, to be appended once its record is known."""

    def __init__(
        self, budget: Budget, stream: IO[bytes], charge: Charge, total: Total, size: int
    ) -> None:
        self.budget = budget
        self.total = total
        self._stream = stream
        self._charge = charge
        self._size = size
        self.appended = False
        self._kept = False

    @property
    def block(self) -> dict[str, Any]:
        """What a report says of the charge (``"budget"``): the budget's path and ``id``
        (its header's digest, which names it wherever it is), the total with this run, the
        limit and the number of charges."""
        return {
            "path": self.budget.path,
            "id": self.budget.header["digest"],
            "spent": self.total.epsilon,
            "limit": self.budget.limit,
            "entries": len(self.budget.entries) + (0 if self.appended else 1),
        }

    def append(self, record_digest: str | None) -> None:
        """Append the charge's line (one write, then fsync), naming its record."""
        entries = self.budget.entries
        prev = entries[-1]["digest"] if entries else self.budget.header["digest"]
        line = _line(replace(self._charge, record_digest=record_digest).to_line(prev))
        fd = self._stream.fileno()
        try:
            os.lseek(fd, self._size, os.SEEK_SET)
            os.write(fd, line)
            os.fsync(fd)
        except OSError as error:
            os.ftruncate(fd, self._size)
            raise InputError(f"{self.budget.path}: cannot append ({error.strerror})") from None
        self.appended = True
        entries.append(json.loads(line))

    def keep(self) -> None:
        """The run's release is out (its files committed): its line stays, whatever
        happens next."""
        self._kept = True

    def take_back(self) -> None:
        """Remove the line appended, if any (the run it charged failed before releasing)."""
        if self.appended and not self._kept:
            os.ftruncate(self._stream.fileno(), self._size)
            os.fsync(self._stream.fileno())
            self.budget.entries.pop()
            self.appended = False


def as_budget(budget: Budget | str | os.PathLike[str]) -> Budget:
    """A budget given as an object or a path."""
    return budget if isinstance(budget, Budget) else Budget.open(budget)


@contextlib.contextmanager
def _opened(path: str, mode: str) -> Iterator[IO[bytes]]:
    if not os.path.isfile(path):
        raise InputError(f"{path}: no such budget file; create it with 'pate budget init'")
    try:
        with open(path, mode) as stream:
            yield stream
    except OSError as error:
        raise InputError(f"{path}: cannot read the budget ({error.strerror})") from None


def is_budget(path: str) -> bool:
    """Whether ``path`` starts like a budget file (its first line's schema, or a charge where
    the header was removed). Only a regular file is opened: a FIFO or a device never is."""
    if not os.path.isfile(path):
        return False
    try:
        with open(path, "rb") as stream:
            first = stream.readline(1 << 16)
        line = json.loads(first)
        charge = isinstance(line, dict) and {"account", "prev", "digest"} <= set(line)
        return bool(line.get("schema") == SCHEMA or charge)
    except (OSError, ValueError, AttributeError, RecursionError):
        return False


def _read(path: str, stream: IO[bytes]) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """The header and entries of a budget file, each line checked for its form only (the
    chain is ``verify``'s)."""
    stream.seek(0)
    data = stream.read(MAX_BYTES + 1)
    if len(data) > MAX_BYTES:
        raise InputError(f"{path}: larger than {MAX_BYTES >> 20} MiB; not a budget file")
    lines = data.decode("utf-8", errors="replace").splitlines()
    try:
        parsed = [json.loads(line) for line in lines if line.strip()]
    except (ValueError, RecursionError):
        raise InputError(f"{path}: not a budget file (a line is not JSON)") from None
    if not parsed or not isinstance(parsed[0], dict) or parsed[0].get("schema") != SCHEMA:
        raise InputError(f'{path}: not a budget file (expected "schema": "{SCHEMA}")')
    header, entries = parsed[0], parsed[1:]
    problem = header_problem(header)
    if problem is not None:
        raise InputError(f"{path}: line 1: {problem}; run 'pate verify {path}'")
    for number, entry in enumerate(entries, start=2):
        problem = entry_problem(entry)
        if problem is not None:
            raise InputError(f"{path}: line {number}: {problem}; run 'pate verify {path}'")
    return header, entries


def _number(value: Any) -> TypeGuard[float]:
    return isinstance(value, int | float) and not isinstance(value, bool)


def header_problem(header: Any) -> str | None:
    """What makes a header unusable (None when it is one)."""
    if not isinstance(header, dict) or header.get("schema") != SCHEMA:
        return f'not the header of a budget (expected "schema": "{SCHEMA}")'
    delta: Any = header.get("delta")
    limit: Any = header.get("max_epsilon")
    if not (_number(delta) and 0 < delta < 1):
        return f"its delta {delta!r} is not a number in (0, 1)"
    if not (_number(limit) and 0 <= limit < math.inf):
        return f"its max_epsilon {limit!r} is not a finite number >= 0"
    if header.get("conversion", "classic") not in {c.value for c in Conversion}:
        return f"its conversion {header.get('conversion')!r} is not one pate knows"
    return None


def account_problem(account: Any) -> str | None:
    """What makes an account unusable (None when it is one)."""
    if not isinstance(account, dict):
        return "its account is not an object"
    kind = account.get("kind")
    if kind == GAUSSIAN:
        ok = _number(account.get("mu")) and account["mu"] >= 0
    elif kind == PURE:
        ok = _number(account.get("epsilon0")) and account["epsilon0"] >= 0
        ok = ok and isinstance(account.get("count"), int) and account["count"] >= 0
    elif kind == RDP:
        orders: Any = account.get("orders")
        rdp: Any = account.get("rdp")
        ok = isinstance(orders, list) and isinstance(rdp, list) and len(orders) == len(rdp)
        ok = ok and all(_number(o) and o > 1 for o in orders) and all(_number(r) for r in rdp)
    else:
        return f"its account's kind {kind!r} is not gaussian, pure or rdp"
    return None if ok else f"its {kind} account is malformed"


def entry_problem(entry: Any) -> str | None:
    """What makes a charge line unusable (None when it is one)."""
    if not isinstance(entry, dict) or "account" not in entry:
        return "not a charge (no account)"
    return account_problem(entry["account"])

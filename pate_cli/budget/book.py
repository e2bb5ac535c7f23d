"""One privacy budget across releases: an append-only, hash-chained JSON-lines file.

The lines and their chain are ``pate_cli.budget.lines``'; the file on disk is
``pate_cli.budget.storage``'s. A charge holds an exclusive lock on the file (``flock``) from
reading the total to the end of its run, so runs charging one budget never interleave and
the total after every charge is within the limit. Appends are made to survive faults:

- the path is opened once; the inode locked is the one read, appended to and checked at the
  commit: a file replaced, truncated, extended or swapped (a symbolic link retargeted) while
  the run worked fails the run with nothing released (``Pending.check_in_place``);
- the header and every line are checked before any noise is drawn, and a budget that cannot
  be written (its file or its folder) is refused then too (``writable_problem``);
- the whole line is written (short writes looped), then synced; a write that fails is taken
  back; a run cut short between its append and its release is settled by the next charge
  (``storage.settle``).
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import json
import math
import os
import stat
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, replace
from typing import Any

from pate_cli.budget.accounts import Account, Total, compose
from pate_cli.budget.charges import Charge, call_charge, charge_of, seed_file_commitment
from pate_cli.budget.claims import place_of
from pate_cli.budget.lines import SCHEMA, VERSION, is_note, line_bytes
from pate_cli.budget.storage import (
    MARKER_SCHEMA,
    create,
    marker_path,
    now,
    open_budget,
    parsed,
    read_all,
    remove_marker,
    settle,
    start_again,
    write_marker,
    write_whole,
)
from pate_cli.choices import Conversion
from pate_cli.common import checks
from pate_cli.common.spelling import given
from pate_cli.errors import AccountError, ExitCode, InputError, UsageError
from pate_cli.mechanisms import Mechanism
from pate_cli.reports.rounding import bound_significant


class BudgetExceeded(UsageError):
    """The charge would take the budget's total over its limit: nothing was written.

    ``refusal`` is the ``budget`` block of what ``--json`` prints of the refused run: the
    budget as it stands, in a charged run's words (``path``, ``id``, ``head``, ``spent``,
    ``limit``, ``remaining``, ``delta``, ``conversion``, ``entries``, ``lines``; no charge
    made, so ``charge_index`` is None), the total the run would leave (``would_spend``) and
    how that total was composed (``method``)."""

    exit_code = ExitCode.CHARGE_REFUSED

    def __init__(self, message: str, refusal: dict[str, Any] | None = None) -> None:
        super().__init__(message)
        self.refusal = {"refused": True, **(refusal or {})}


@dataclass(frozen=True)
class Preview:
    """What a run would leave of a budget, nothing drawn and nothing written
    (``Budget.preview``, ``pate budget show --would-charge``)."""

    command: str
    account: Account
    spent: float
    """The total before the run."""
    total: Total
    """The total with the run."""
    limit: float

    @property
    def within_limit(self) -> bool:
        """Whether the run would be charged (its total at most the limit)."""
        return bool(self.total.epsilon <= self.limit)

    @property
    def remaining(self) -> float:
        return max(self.limit - self.total.epsilon, 0.0)

    def to_dict(self) -> dict[str, Any]:
        return {
            "command": self.command,
            "account": self.account,
            "spent": self.spent,
            "would_spend": self.total.epsilon,
            "total": self.total.to_dict(),
            "limit": self.limit,
            "remaining": self.remaining,
            "within_limit": self.within_limit,
        }


class Budget:
    """A budget file: its header, its charges (``entries``) and their composed total.

    ``Budget.init`` creates one, ``Budget.open`` reads one; ``charge`` appends a run's
    charge under the file's lock, refusing (``BudgetExceeded``) one that would take the total
    over the limit; ``preview`` says what a run would leave.
    """

    def __init__(self, path: str, header: dict[str, Any], lines: list[dict[str, Any]]):
        self.path = path
        self.header = header
        self.lines = lines
        """Every line after the header: charges and notes, in order."""
        self.kept: str | None = None
        """Where ``init(force=True)`` kept the budget it started again (None: none)."""

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
        """Create the budget file (never over an existing one unless ``force``, which keeps
        the old one beside it: ``Budget.kept``)."""
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
            "created": now(),
        }
        kept = None
        if force:
            kept = start_again(where, header)
        else:
            create(where, line_bytes(header)[0])
        budget = cls.open(where)
        budget.kept = kept
        return budget

    @classmethod
    def open(cls, path: str | os.PathLike[str]) -> Budget:
        """Read a budget file, every line checked; a file that is not one is an InputError."""
        where = os.fspath(path)
        fd = open_budget(where, os.O_RDONLY)
        try:
            header, lines = parsed(where, read_all(where, fd))
        finally:
            os.close(fd)
        return cls(where, header, lines)

    @property
    def entries(self) -> list[dict[str, Any]]:
        """The charges, in order (the notes left out)."""
        return [line for line in self.lines if not is_note(line)]

    @property
    def notes(self) -> list[dict[str, Any]]:
        """The notes about earlier charges (a run killed before its release)."""
        return [line for line in self.lines if is_note(line)]

    @property
    def id(self) -> str:
        """The budget's id: its header's digest, which every record it charged names."""
        return str(self.header["digest"])

    @property
    def head(self) -> str:
        """The digest of the last line: publish it, and ``pate verify --head`` checks later
        that the chain still passes through it."""
        return str(self.lines[-1]["digest"]) if self.lines else self.id

    @property
    def delta(self) -> float:
        return float(self.header["delta"])

    @property
    def limit(self) -> float:
        return float(self.header["max_epsilon"])

    @property
    def conversion(self) -> Conversion:
        return Conversion(self.header.get("conversion", "classic"))

    def total(self, extra: Sequence[Account] = ()) -> Total:
        """The charges' accounts (and ``extra``) composed at the budget's delta.

        Raises:
            AccountError: no finite epsilon bounds them (a charge, or this run's, named).
        """
        accounts = [entry["account"] for entry in self.entries] + list(extra)
        names = [f"charge {n}" for n in range(1, len(self.entries) + 1)]
        names += ["this run's charge"] * len(extra)
        try:
            return compose(accounts, self.delta, self.conversion, names=names)
        except AccountError as error:
            raise AccountError(f"{self.path}: {error.message}") from None

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
        self._check_seed(charge)
        total = self.total([charge.account])
        if not total.epsilon <= self.limit:
            spend = bound_significant(total.epsilon)
            raise BudgetExceeded(
                f"{self.path}: this run would spend epsilon {spend} in all "
                f"(delta {self.delta:g}, {total.method}), over the limit {self.limit:g}; "
                "nothing was written",
                self._refusal(total),
            )
        return total

    def _refusal(self, total: Total) -> dict[str, Any]:
        """``BudgetExceeded.refusal`` of a run that would leave ``total``."""
        spent = self.total().epsilon
        return {
            "path": self.path,
            "id": self.id,
            "charge_index": None,
            "head": self.head,
            "spent": spent,
            "would_spend": total.epsilon,
            "limit": self.limit,
            "remaining": max(self.limit - spent, 0.0),
            "method": total.method,
            "delta": self.delta,
            "conversion": self.conversion.value,
            "entries": len(self.entries),
            "lines": len(self.lines) + 1,
        }

    def preview(
        self,
        votes: Any,
        mechanism: Mechanism,
        *,
        command: str = "aggregate",
        **options: Any,
    ) -> Preview:
        """What a run would leave of this budget: ``command`` (``aggregate``, ``analyze`` or
        ``smooth_sensitivity``) on ``votes`` with ``mechanism`` and the keyword arguments the
        function takes (``max_queries``, ``release``, ``orders``, ``order``, ``beta``,
        ``sigma_ss``, ``half_even``, ``seed_file``...). Nothing is drawn or written.

        Raises:
            UsageError: the run has nothing to charge (a release tuned on the votes, a
                public seed), or its seed file already drew the same noise here.
        """
        return self.preview_charge(call_charge(votes, mechanism, command, options))

    def preview_charge(self, charge: Charge) -> Preview:
        """What ``charge`` would leave of this budget (``preview``).

        Raises:
            UsageError: its seed file already drew the same noise here.
        """
        self._check_seed(charge)
        spent = self.total().epsilon
        return Preview(
            charge.command, charge.account, spent, self.total([charge.account]), self.limit
        )

    def _check_seed(self, charge: Charge) -> None:
        """Refuse a charge whose seed file already drew noise of one of its purposes here."""
        if charge.seed_commitment is None:
            return
        for number, entry in enumerate(self.entries, start=1):
            same = entry.get("seed_commitment") == charge.seed_commitment
            shared = set(entry.get("purposes", ())) & set(charge.purposes)
            if same and shared:
                raise UsageError(
                    f"{self.path}: the seed file already drew the noise of {sorted(shared)[0]} "
                    f"for charge {number} ({entry['command']}, "
                    f"{entry['created']}): a second release from it would draw the same "
                    "noise; use a new seed file"
                )

    @contextlib.contextmanager
    def charging(self, charge: Charge) -> Iterator[Pending]:
        """Hold the file's lock, settle a charge cut short, read the budget again and check
        ``charge`` (refused: ``BudgetExceeded``); the body appends it with
        ``Pending.append`` (or it is appended at the end with no record), checks it is still
        in place before releasing anything, and marks the release out with ``Pending.keep``.
        If the body fails before the release, the line is taken back."""
        fd = open_budget(self.path, os.O_RDWR)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
            settle(self.path, fd)
            data = read_all(self.path, fd)
            self.header, self.lines = parsed(self.path, data)
            total = self.check(charge)
            pending = Pending(self, fd, charge, total, data)
            try:
                yield pending
                if not pending.appended:
                    pending.append()
            except BaseException:
                pending.take_back()
                raise
            pending.keep()
        finally:
            os.close(fd)

    def charge(self, charge: Charge) -> Total:
        """Append ``charge`` under the lock (see ``charging``); returns the new total."""
        with self.charging(charge) as pending:
            return pending.total

    def to_dict(self) -> dict[str, Any]:
        """``pate budget show --json``: each charge with its number (``charge_index``, 1 for
        the first), and the total in a charged run's words too (``spent``, ``method``)."""
        total = self.total()
        entries = [{"charge_index": n, **entry} for n, entry in enumerate(self.entries, 1)]
        return {
            "command": "budget",
            "path": self.path,
            "id": self.id,
            "name": self.header.get("name"),
            "delta": self.delta,
            "limit": self.limit,
            "conversion": self.conversion.value,
            "entries": entries,
            "notes": self.notes,
            "lines": len(self.lines) + 1,
            "head": self.head,
            "total": total.to_dict(),
            "spent": total.epsilon,
            "method": total.method,
            "remaining": max(self.limit - total.epsilon, 0.0),
        }

    def __repr__(self) -> str:
        total = self.total()
        return (
            f"Budget({os.path.basename(self.path)!r}, entries={len(self.entries)}, "
            f"spent={bound_significant(total.epsilon, 4)}, limit={self.limit:g}, "
            f"delta={self.delta:g})"
        )


class Pending:
    """A charge checked under the budget's lock, to be appended once its record is known."""

    def __init__(self, budget: Budget, fd: int, charge: Charge, total: Total, data: bytes) -> None:
        self.budget = budget
        self.total = total
        self._fd = fd
        self._charge = charge
        self._size = len(data)
        self._read = hashlib.sha256(data)
        self._line: bytes | None = None
        self.head: str | None = None
        """The chain's head after this charge (its line's digest), once ``prepare``d."""
        self.appended = False
        self._kept = False
        self.record: str | None = None  # the run's record: its block says the budget's place

    @property
    def charge_index(self) -> int:
        """The charge's number: 1 for the budget's first charge (notes are not charges)."""
        return len(self.budget.entries) + (0 if self.appended else 1)

    @property
    def block(self) -> dict[str, Any]:
        """What a report says of the charge (``"budget"``): the budget's path, ``id`` and name,
        the charge's number and the head after it, the total with this run, the limit, what
        is left, the budget's delta and conversion, its charges and lines with it; and the
        budget's place from the folder of the run's record (``claims.place_of``)."""
        budget = self.budget
        pending = 0 if self.appended else 1
        return {
            "path": budget.path,
            "id": budget.id,
            "name": budget.header.get("name"),
            "charge_index": self.charge_index,
            "head": self.head,
            "spent": self.total.epsilon,
            "limit": budget.limit,
            "remaining": max(budget.limit - self.total.epsilon, 0.0),
            "method": self.total.method,
            "delta": budget.delta,
            "conversion": budget.conversion.value,
            "entries": len(budget.entries) + pending,
            "lines": len(budget.lines) + 1 + pending,
            **({} if self.record is None else {"place": place_of(budget.path, self.record)}),
        }

    def prepare(self, record_digest: str | None = None) -> str:
        """Make the charge's line, naming its record; returns its digest, the head after it."""
        lines = self.budget.lines
        prev = lines[-1]["digest"] if lines else self.budget.id
        content = replace(self._charge, record_digest=record_digest).to_line(prev)
        self._line, self.head = line_bytes(content)
        return self.head

    def append(self, journals: Sequence[str] = ()) -> None:
        """Append the prepared line (``prepare``; without it, a line naming no record): a
        marker first (naming the line and ``journals``, the run's commit journals), then the
        whole line, then fsync. Nothing is released before this returns."""
        if self._line is None:
            self.prepare()
        assert self._line is not None
        marker = {
            "schema": MARKER_SCHEMA,
            "pid": os.getpid(),
            "size": self._size,
            "line": self._line.decode(),
            "journals": [os.path.abspath(path) for path in journals],
        }
        write_marker(self.budget.path, marker)
        try:
            write_whole(self._fd, self._line, self._size)
            os.fsync(self._fd)
        except OSError as error:
            try:
                self._cut_back()
            except OSError:
                left = self._leave_to_settle(marker)
            else:
                remove_marker(self.budget.path)
                left = " or charged"
            raise InputError(
                f"{self.budget.path}: cannot append the charge ({error.strerror or error}); "
                f"nothing was released{left}"
            ) from None
        self.appended = True
        self.budget.lines.append(json.loads(self._line))

    def _cut_back(self) -> None:
        """Cut the file back to its size before the line, never making it longer: a file
        truncated by another program meanwhile is not padded with zero bytes. The sync is
        as far as it goes (the run fails anyway: its own error is the one to report)."""
        if os.fstat(self._fd).st_size > self._size:
            os.ftruncate(self._fd, self._size)
        with contextlib.suppress(OSError):
            os.fsync(self._fd)

    def _leave_to_settle(self, marker: dict[str, Any]) -> str:
        """A failed append that could not be cut back: its marker stays, naming no journal
        (none of the run's files is published), so that the next charge settles the line
        left: a cut line removed, a whole one noted no-release (``storage.settle``)."""
        with contextlib.suppress(InputError):
            write_marker(self.budget.path, {**marker, "journals": []})
        return "; the next charge of this budget settles the line left"

    def check_in_place(self) -> None:
        """The budget at its path is still the file this run read and appended to, as it
        left it: checked just before the release (a file replaced, truncated, extended or
        retargeted meanwhile fails the run, which then releases nothing).

        Raises:
            InputError: it is not.
        """
        path = self.budget.path
        try:
            named, held = os.stat(path), os.fstat(self._fd)
        except OSError as error:
            raise InputError(
                f"{path}: the budget file is gone ({error.strerror}) while the run charged it; "
                "nothing was released"
            ) from None
        if (named.st_dev, named.st_ino) != (held.st_dev, held.st_ino):
            raise InputError(
                f"{path}: the budget file was replaced (or its link retargeted) while the run "
                "charged it; nothing was released"
            )
        assert self._line is not None
        expected = self._read.copy()
        expected.update(self._line)
        if read_all(path, self._fd, hashed=True) != expected.hexdigest():
            raise InputError(
                f"{path}: the budget file was changed by another program while the run charged "
                "it; nothing was released"
            )

    def keep(self) -> None:
        """The run's release is out: its line stays, whatever happens next."""
        if self.appended and not self._kept:
            self._kept = True
            remove_marker(self.budget.path)

    def take_back(self) -> None:
        """Remove the line appended, if any (the run it charged failed before releasing)."""
        if self.appended and not self._kept:
            self._cut_back()
            self.budget.lines.pop()
            self.appended = False
            remove_marker(self.budget.path)


def as_budget(budget: Budget | str | os.PathLike[str]) -> Budget:
    """A budget given as an object or a path."""
    return budget if isinstance(budget, Budget) else Budget.open(budget)


def writable_problem(path: str) -> str | None:
    """Why a charge could not be written to the budget at ``path`` (None when it could): the
    file read-only (no write permission bit, whoever runs) or on a read-only file system, or
    its folder unable to take the marker of a charge."""
    try:
        info = os.stat(path)
    except OSError:
        return None  # the reader names a missing file
    if not info.st_mode & (stat.S_IWUSR | stat.S_IWGRP | stat.S_IWOTH):
        return "it is read-only"
    try:
        os.close(os.open(path, os.O_RDWR))
    except OSError as error:
        return f"it cannot be written ({error.strerror})"
    folder = os.path.dirname(os.path.abspath(path))
    probe = f"{marker_path(path)}.{os.getpid()}.probe"
    try:
        os.close(os.open(probe, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600))
        os.unlink(probe)
    except OSError as error:
        return f"its folder {folder} cannot take a new file ({error.strerror})"
    return None


def settle_cut_short(path: str) -> None:
    """Settle, under the budget's lock, the charge of a run cut short (``storage.settle``)
    before anything else reads the budget or the run's folders: a line cut short would
    refuse the strict read, and recovering the folders first would roll the run's files
    back with no note of its charge. Nothing happens when no marker is there."""
    if not os.path.lexists(marker_path(path)):
        return
    fd = open_budget(path, os.O_RDWR)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        settle(path, fd)
    finally:
        os.close(fd)


def checked_charge(
    budget: Budget | str | os.PathLike[str],
    function: str,
    command: str,
    mechanism: Mechanism,
    num_queries: int,
    options: dict[str, Any],
    *,
    seed: object = None,
    seed_file: str | os.PathLike[str] | None = None,
) -> Charge:
    """The charge of one call, refused before any noise is drawn (a charge cut short
    settled first, ``settle_cut_short``): over the budget's limit
    (``BudgetExceeded``), without an account, from a seed file already charged for the same
    noise, or to a budget that cannot be written. A seed file is read only if it exists (a
    new one is created by the run, and was charged nowhere); nothing is written.

    Raises:
        BudgetExceeded, UsageError: as ``charge_of`` and ``Budget.check``.
        InputError: the budget is not one, or cannot be written.
    """
    settle_cut_short(budget.path if isinstance(budget, Budget) else os.fspath(budget))
    opened = as_budget(budget)
    problem = writable_problem(opened.path)
    if problem is not None:
        raise InputError(f"{opened.path}: the budget cannot take a charge: {problem}")
    charge = charge_of(
        function,
        command,
        mechanism,
        num_queries,
        options,
        public_seed=seed is not None,
        seed_commitment=seed_file_commitment(seed_file),
    )
    opened.check(charge)
    return charge

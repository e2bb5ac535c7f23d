"""The verdicts of ``pate verify``: one :class:`Check` per line, and the :class:`VerifyReport`.

Each check has one of three statuses: ``verified`` (made, and it holds), ``differs`` (made,
and it does not hold) or ``not-checked`` (it could not be made, with the reason). A check
that was not made is never counted as passed: the report's verdict is ``verified`` only when
every check was made and holds, ``differs`` when any does not hold, and ``incomplete``
otherwise (the CLI's exit codes 0, 1 and 3).
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any

from pate_cli.records.record import record_kind
from pate_cli.reports.encoding import plain
from pate_cli.reports.reprs import short_repr

VERIFIED = "verified"
"""The check was made and what the record asserts holds."""
DIFFERS = "differs"
"""The check was made and the record's assertion does not hold."""
NOT_CHECKED = "not-checked"
"""The check could not be made (the seed file, an opening or a file was not given); the
detail says why. Never counted as passed."""
STATUSES = (VERIFIED, DIFFERS, NOT_CHECKED)


@dataclass(frozen=True)
class Check:
    """One line of the verification table: what was checked, its verdict and why."""

    name: str
    status: str
    """``verified``, ``differs`` or ``not-checked``."""
    detail: str

    @classmethod
    def made(cls, name: str, holds: bool, detail: str) -> Check:
        """A check that was made: verified when ``holds``, else differs."""
        return cls(name, VERIFIED if holds else DIFFERS, detail)

    @classmethod
    def skipped(cls, name: str, why: str) -> Check:
        """A check that could not be made, and why."""
        return cls(name, NOT_CHECKED, why)

    @property
    def ok(self) -> bool:
        """True only for a check that was made and holds."""
        return self.status == VERIFIED

    def to_json_dict(self) -> dict[str, Any]:
        return {"name": self.name, "status": self.status, "detail": self.detail}


_SHOWN = 3  # items named in one check line


def listed(items: list[str]) -> str:
    """Items of a check's detail: the first few, and how many more."""
    more = f" (and {len(items) - _SHOWN} more)" if len(items) > _SHOWN else ""
    return "; ".join(items[:_SHOWN]) + more


def numbered(numbers: list[int], noun: str = "charge") -> str:
    """Numbered items by their numbers: "charge 3", "charges 1, 2 and 5 more"."""
    shown = ", ".join(map(str, numbers[:10]))
    more = f" and {len(numbers) - 10} more" if len(numbers) > 10 else ""
    return f"{noun}{'s' if len(numbers) > 1 else ''} {shown}{more}"


def first_of(problems: list[str]) -> str:
    """The first difference in full, and what else differs by name."""
    others = [problem.split(" is ")[0] for problem in problems[1:]]
    return problems[0] + (f" (also {', '.join(others)})" if others else "")


VERDICTS = ("verified", "differs", "incomplete")
"""``verified``: every check was made and holds; ``differs``: a check does not hold;
``incomplete``: none differs, but some were not checked."""


@dataclass(frozen=True)
class VerifyReport:
    """``pate verify``: every check of one record, and the verdict."""

    record_path: str
    record: dict[str, Any]
    checks: tuple[Check, ...]

    @property
    def verdict(self) -> str:
        """``differs`` when any check differs, else ``incomplete`` when any was not
        checked, else ``verified``."""
        statuses = {check.status for check in self.checks}
        if DIFFERS in statuses:
            return "differs"
        return "incomplete" if NOT_CHECKED in statuses else "verified"

    @property
    def ok(self) -> bool:
        """True only when every check was made and holds (the verdict ``verified``)."""
        return self.verdict == "verified"

    @property
    def not_checked(self) -> tuple[str, ...]:
        """The names of the checks that could not be made."""
        return tuple(check.name for check in self.checks if check.status == NOT_CHECKED)

    @property
    def differing(self) -> tuple[str, ...]:
        """The names of the checks that do not hold."""
        return tuple(check.name for check in self.checks if check.status == DIFFERS)

    @property
    def summary(self) -> str:
        """The verdict in one line, naming what differs or was not checked."""
        what = "budget" if self.record.get("command") == "budget" else "record"
        if self.differing:
            return f"the {what} does not hold: {', '.join(self.differing)}"
        if self.not_checked:
            return (
                f"nothing differs, but the {what} is not fully verified; not checked: "
                f"{', '.join(self.not_checked)}"
            )
        return f"the {what} holds: every check was made"

    def _repr_markdown_(self) -> str:
        """The report in a notebook (Jupyter renders Markdown)."""
        from pate_cli.reports import markdown

        return markdown.verify(self.to_dict())

    def to_dict(self) -> dict[str, Any]:
        """Exactly what ``pate verify --json`` prints."""
        return plain(
            {
                "command": "verify",
                "record": self.record_path,
                "record_command": self.record["command"],
                "record_kind": record_kind(self.record),
                "verdict": self.verdict,
                "summary": self.summary,
                "ok": self.ok,
                "differs": list(self.differing),
                "not_checked": list(self.not_checked),
                "checks": [check.to_json_dict() for check in self.checks],
            }
        )

    def __repr__(self) -> str:
        return short_repr(
            "VerifyReport",
            record=os.path.basename(self.record_path),
            record_command=self.record.get("command"),
            verdict=self.verdict,
            checks=len(self.checks),
            differs=len(self.differing),
            not_checked=len(self.not_checked),
        )

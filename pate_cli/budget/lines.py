"""The lines of a budget file: their form, their digests and their chain, read strictly.

A budget file is JSON lines, UTF-8, every line ended by a newline:

- line 1, the header: ``"schema": "pate-budget"``, ``version``, ``name``, ``delta``,
  ``max_epsilon``, ``conversion``, ``created``;
- then *charges*: ``command``, ``created``, ``mechanism``, ``num_queries``, ``half_even``,
  ``release``, ``account``, ``record_digest``, ``seed_commitment``, ``purposes``;
- and *notes* about an earlier charge: ``"note": "no-release"`` with ``charge`` (that line's
  digest), ``detail``, ``created`` and ``prev``, no other key (:data:`NOTE_KEYS`): its run was
  killed after its charge and before its release, and a later run rolled its files back
  (spent, nothing out). A note lowers no total: the charge it names stays in it.

Every line but the header has ``prev``, the digest of the line before, and every line its
``digest``: the SHA-256 of its canonical JSON (sorted keys, no spaces) without ``digest``.
The header's digest is the budget's *id*; the last line's digest is its *head*.

Reading is strict: a file that is not UTF-8, a number that is not finite (``NaN``,
``Infinity``, ``1e999``), a last line without its newline, a digest that does not match or a
broken chain is refused in one line before anything is charged.
"""

from __future__ import annotations

import hashlib
import json
import math
from typing import Any, TypeGuard

from pate_cli.choices import Conversion

SCHEMA = "pate-budget"
VERSION = 1
MAX_BYTES = 256 << 20  # a budget of a million charges is far smaller
NO_RELEASE = "no-release"

#: Every key of a note, and no other: a charge given a note's keys is no note.
NOTE_KEYS = frozenset({"note", "charge", "detail", "created", "prev", "digest"})

GAUSSIAN = "gaussian"
PURE = "pure"
RDP = "rdp"


class LineError(ValueError):
    """A line that is not what a budget holds (the message says why)."""


def line_digest(line: dict[str, Any]) -> str:
    """SHA-256 of a line's canonical JSON (sorted keys, no spaces) without its ``digest``."""
    content = {key: value for key, value in line.items() if key != "digest"}
    text = json.dumps(content, sort_keys=True, separators=(",", ":"), allow_nan=False)
    return hashlib.sha256(text.encode()).hexdigest()


def line_bytes(content: dict[str, Any]) -> tuple[bytes, str]:
    """A line as the file holds it (its digest added, a newline at the end), and its digest."""
    digest = line_digest(content)
    text = json.dumps({**content, "digest": digest}, allow_nan=False)
    return (text + "\n").encode(), digest


def _reject_constant(name: str) -> Any:
    raise LineError(f"holds {name}, not a finite number")


def _finite(text: str) -> float:
    value = float(text)
    if not math.isfinite(value):
        raise LineError(f"holds {text}, not a finite number")
    return value


def parse_line(text: str) -> Any:
    """One line's JSON; a non-finite number in it is a ``LineError``."""
    try:
        return json.loads(text, parse_constant=_reject_constant, parse_float=_finite)
    except LineError:
        raise
    except (ValueError, RecursionError):
        raise LineError("is not JSON") from None


def split_lines(data: bytes) -> list[str]:
    """The lines of a budget file's bytes (blank ones skipped).

    Raises:
        LineError: not UTF-8, or the last line has no newline (a write cut short, or an edit).
    """
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as error:
        raise LineError(f"is not UTF-8 (byte {error.start})") from None
    if text and not text.endswith("\n"):
        raise LineError(
            "ends without a newline (a write cut short, or an edit): pate appends only after "
            "a whole line"
        )
    return [line for line in text.split("\n") if line.strip()]


def _number(value: Any) -> TypeGuard[float]:
    return isinstance(value, int | float) and not isinstance(value, bool)


def header_problem(header: Any) -> str | None:
    """What makes a header unusable, its digest included (None when it is one)."""
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
    if header.get("version") != VERSION:
        return f"its version {header.get('version')!r} is not {VERSION}, the one pate reads"
    if not isinstance(header.get("name"), str | None):
        return "its name is not text"
    if header.get("digest") != line_digest(header):
        return "its digest does not match its content (edited)"
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
        ok = isinstance(orders, list) and isinstance(rdp, list) and len(orders) == len(rdp) > 0
        ok = ok and all(_number(o) and o > 1 for o in orders)
        ok = ok and all(_number(r) and r >= 0 for r in rdp)
    else:
        return f"its account's kind {kind!r} is not gaussian, pure or rdp"
    return None if ok else f"its {kind} account is malformed"


def is_note(line: Any) -> bool:
    """Whether a line is a note about an earlier charge rather than a charge."""
    return isinstance(line, dict) and "note" in line


def charge_numbers(lines: list[Any]) -> list[int | None]:
    """The number of each line after the header as a charge: 1 for the budget's first charge,
    2 for the next, whatever notes stand between them; None for a note (not a charge). The
    same numbers in a run's ``budget`` block (``charge_index``), ``budget show`` and
    ``verify``."""
    numbers: list[int | None] = []
    count = 0
    for line in lines:
        if is_note(line):
            numbers.append(None)
        else:
            count += 1
            numbers.append(count)
    return numbers


def entry_problem(entry: Any) -> str | None:
    """What makes a line after the header unusable as a charge or a note, its own content
    only (None when it is one)."""
    if is_note(entry):
        if entry.get("note") != NO_RELEASE or not isinstance(entry.get("charge"), str):
            return f"not a note pate writes (a {NO_RELEASE!r} note naming a charge)"
        extra = sorted(set(entry) - NOTE_KEYS)
        if extra:  # a charge's fields under a note's name: a charge made to look like a note
            return f"a note with a charge's fields ({', '.join(extra[:4])}): no note pate writes"
        return None
    if not isinstance(entry, dict) or "account" not in entry:
        return "not a charge (no account)"
    return account_problem(entry["account"])


def chain_problem(header: dict[str, Any], lines: list[Any]) -> str | None:
    """The first line after the header that does not hold (its form, its digest, its link to
    the line before, a note naming no earlier charge), in words; None when every line does.
    Line numbers count the header as line 1."""
    prev = header.get("digest")
    charges: set[str] = set()
    noted: set[str] = set()
    for number, line in enumerate(lines, start=2):
        problem = entry_problem(line)
        if problem is not None:
            return f"line {number}: {problem}"
        if line.get("digest") != line_digest(line):
            return f"line {number}: its digest does not match its content (edited)"
        if line.get("prev") != prev:
            return (
                f"line {number}: it does not follow line {number - 1} (a line was removed, "
                "inserted or moved before it)"
            )
        if is_note(line):
            if line["charge"] not in charges or line["charge"] in noted:
                return f"line {number}: its note names no earlier charge of this budget"
            noted.add(line["charge"])
        else:
            charges.add(line["digest"])
        prev = line["digest"]
    return None


def parse(data: bytes) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """The header and the lines after it of a budget file's bytes, every line checked (its
    form, its digest and the chain).

    Raises:
        LineError: the first thing that does not hold, with its line number.
    """
    if len(data) > MAX_BYTES:
        raise LineError(f"is larger than {MAX_BYTES >> 20} MiB; not a budget file")
    texts = split_lines(data)
    parsed = []
    for number, text in enumerate(texts, start=1):
        try:
            parsed.append(parse_line(text))
        except LineError as error:
            if number == 1:
                raise LineError(f"is not a budget file (line 1 {error})") from None
            raise LineError(f"line {number} {error}") from None
    if not parsed or not isinstance(parsed[0], dict) or parsed[0].get("schema") != SCHEMA:
        raise LineError(f'is not a budget file (expected "schema": "{SCHEMA}")')
    header, lines = parsed[0], parsed[1:]
    problem = header_problem(header)
    if problem is not None:
        raise LineError(f"line 1: {problem}")
    problem = chain_problem(header, lines)
    if problem is not None:
        raise LineError(problem)
    return header, lines

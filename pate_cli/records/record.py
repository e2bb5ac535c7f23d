"""Release records: a self-describing JSON of one run that ``pate verify`` can recompute.

A record holds the JSON report of ``analyze``, ``smooth-sensitivity`` or ``aggregate``
together with what is needed to recompute it: the library call that computed it
(``call``), the command line that made that call (``argv``), where its noise came from,
the sha256 of the files, and the versions of pate, numpy, scipy and Python (and of the
plugin that brought its mechanism, when a plugin did: ``versions.plugins``). This module
builds, writes and reads records; ``pate_cli.records.verify`` recomputes one and compares.

Two kinds of record, named by their first field (``privacy``) and by ``kind``:

- ``private`` (the default): the full report, with the figures computed from the votes
  (the data-dependent epsilon, the smooth sensitivity, the release's noise scale and its
  sample, from which the noise of the release could be solved) and the sha256 of every
  input. It is for whoever holds the votes; it must not be published.
- ``public`` (``--public --record``): only what ``--public`` prints (the publishable
  figures, the input's format and sizes, the mechanism), the call and command line, the
  inputs' paths without their hashes (a hash of the votes lets whoever holds all but one
  teacher's votes test every guess of the rest) and, when the noise was private, the
  hashes of the released labels. It binds itself to its inputs and its seed file by hiding
  commitments (``commitments``: the SHA-256 of a fresh 256-bit salt followed by the file's
  bytes), whose salts go to a private opening file beside it (mode 0600; the record names
  its path): ``verify --opening`` checks that the files given are the ones the run read.

The ``digest`` is the SHA-256 of the record's canonical JSON: it detects an accidental
change (a truncated copy, an edit by mistake). It is not a seal: anyone can edit a record
and recompute it, so ``verify`` does not rely on it; what it relies on is the
recomputation. Nor does it read the first sentence (``privacy``): it states it again from the
kind the report was checked as (``privacy_claim``), and a record whose sentence is not that
one differs.

A record is read strictly: pate writes no number that is not finite (an infinite figure is
the string "inf"), so a ``NaN``, ``Infinity`` or ``1e999`` anywhere in one (or an integer
beyond a float's range) is an edit, refused as one (``EditedRecordError``, exit 1).

The noise is a secret (README, "Secrets"): a record holds the seed only of a run made with
a public ``--seed``, which ``verify`` replays; a ``--seed-file`` run leaves a commitment
(``seed_commitment``, the SHA-256 of the seed file) and ``verify --seed-file`` replays its
random sample; without the seed file (and always for noise from OS entropy, which was never
kept) the sample is reported as not re-derivable and everything else is checked.

Schema stability: ``schema`` is "pate-record" and ``version`` an integer. Within a version
fields are only ever added. Version 6 makes a record charged to a budget hold its whole
budget block (``BUDGET_FIELDS``: with the budget's name, and its place from the record's
folder); version 5 draws every purpose from its own noise stream and adds
``commitments`` and ``opening`` to public records; version 4 added ``privacy`` and ``kind``.
Versions 3 and 4 are still read (their random sample is not replayed: their noise came from
one stream); earlier versions are refused with a hint: version 1 replayed its command line,
version 2 stored every run's seed.
"""

from __future__ import annotations

import hashlib
import json
import math
import os
import platform
import re
import secrets
import sys
from datetime import UTC, datetime
from typing import Any

import numpy as np
import scipy

from pate_cli.common.spelling import given
from pate_cli.common.version import __version__
from pate_cli.errors import ExitCode, InputError
from pate_cli.files.seeds import Noise, json_seed
from pate_cli.reports.encoding import dumps
from pate_cli.votes import check_output_path, file_sha256

SCHEMA = "pate-record"
# A record holds one report (a few MB for the longest order grids); anything larger is not one.
MAX_RECORD_BYTES = 64 << 20
VERSION = 7
SUPPORTED_VERSIONS = (3, 4, 5, 6, 7)
#: The first version whose budget block is whole (``BUDGET_FIELDS``): a record of it missing
#: one of them was edited; one of an earlier version is read by the rules of its version.
WHOLE_BUDGET_VERSION = 6
#: What the ``budget`` block of a record of ``WHOLE_BUDGET_VERSION`` or later always holds.
BUDGET_FIELDS = (
    "path",
    "place",
    "name",
    "id",
    "charge_index",
    "head",
    "spent",
    "limit",
    "delta",
    "conversion",
    "lines",
)
#: The first version whose noise streams are derived per purpose (``seeds.PURPOSES``): an
#: older record's random sample cannot be replayed.
STREAMS_VERSION = 5
OPENING_SCHEMA = "pate-opening"
_SALT_BYTES = 32
_SALT_TEXT = re.compile(r"\A[0-9a-f]{64}\Z")
_MAX_OPENING_BYTES = 1 << 16
_OLD_VERSIONS = {
    1: "version 1 records replay their command line",
    2: "version 2 records hold the seed of every run, which gives the noise away",
}

PRIVATE = "private"
PUBLIC = "public"
#: The first field of a record, for whoever opens the file: what it holds and who may see it.
PRIVACY_NOTES = {
    PRIVATE: "private: holds figures computed from the votes (the data-dependent epsilon, the "
    "smooth sensitivity, the release's noise scale and sample) and the votes' sha256; do not "
    "publish it (a --public run writes a public record)",
    PUBLIC: "public: holds only the publishable figures, the call and the command line; "
    "nothing computed from the votes",
}


def privacy_claim(record: dict[str, Any]) -> tuple[bool, str] | None:
    """Whether a record's first sentence (``privacy``) is the one its kind states, and what
    ``verify`` says of it; None for a record from before the sentence (version 3).

    The sentence is stated again, never read: ``verify`` checks the report as a record of
    this kind (a public record's report may hold nothing a public report does not), so the
    sentence that follows from the kind is the one the check proves."""
    if "privacy" not in record and record.get("version", 0) < 4:
        return None
    kind = record_kind(record)
    stated = PRIVACY_NOTES.get(kind)
    if record.get("privacy") == stated:
        return True, f"the sentence of a {kind} record"
    return False, f"recorded {record.get('privacy')!r}, but a {kind} record states {stated!r}"


class EditedRecordError(InputError):
    """A record holding what pate never writes (a number that is not finite): it was edited
    after the run. It can be read, so not a bad input (exit 2): it differs (exit 1)."""

    exit_code = ExitCode.BUDGET_EXCEEDED


def _non_finite(document: Any) -> tuple[str, str] | None:
    """The first number of parsed JSON that is not finite, as (its dotted path, how JSON
    spells it); None when every number is finite. Iterative: a record nested as deeply as
    the parser allows is walked without recursion."""
    stack: list[tuple[str, Any]] = [("", document)]
    while stack:
        where, value = stack.pop()
        if isinstance(value, float) and not math.isfinite(value):
            return where, "NaN" if math.isnan(value) else ("-" if value < 0 else "") + "Infinity"
        if isinstance(value, int) and abs(value) > sys.float_info.max:
            return where, f"an integer of {len(str(abs(value)))} digits"
        if isinstance(value, dict):
            keyed = [(f"{where}.{key}" if where else key, item) for key, item in value.items()]
        elif isinstance(value, list):
            keyed = [(f"{where}[{index}]", item) for index, item in enumerate(value)]
        else:
            continue
        stack.extend(reversed(keyed))  # the first in the file is found first
    return None


# The library functions a record's call can name, and the file roles each takes.
REPLAYS = ("analyze", "smooth_sensitivity", "aggregate")
FILE_ROLES = {
    "analyze": ("baseline", "answered"),
    "smooth_sensitivity": ("baseline", "answered"),
    "aggregate": ("student_probs", "true_labels"),
}


def build_record(
    command: str,
    argv: list[str],
    report: dict[str, Any],
    inputs: dict[str, str | None],
    outputs: dict[str, str | None],
    noise: Noise | None,
    call: dict[str, Any],
    *,
    public: bool = False,
    opening: str | None = None,
    digests: dict[str, str] | None = None,
) -> tuple[dict[str, Any], dict[str, Any] | None]:
    """The record of one run, its report plus what is needed to recompute it, and the
    opening of its commitments (None for a private record).

    ``call`` is the library call that computed the report: ``{"function": one of
    REPLAYS, "votes": load_votes' options, "mechanism": the mechanism block, "options":
    the function's other keyword arguments}``; files are named by their role in
    ``inputs`` (votes, indices, baseline, answered, student_probs, true_labels).
    ``noise`` is where the run's random draws came from (None: it drew none); only a
    public seed is written, and a seed file's commitment.

    ``public`` writes a public record: ``report`` is then what ``--public`` prints, the
    inputs keep their paths but not their hashes, and the outputs keep their hashes only
    when the noise was private (the released labels are then differentially private, and
    so is their hash), and ``commitments`` binds it to each input file and to the seed file
    with a fresh salt each; the salts are the opening, to be written to ``opening`` (the
    record keeps that path only). ``digests``: the SHA-256 of each output by role, taken
    from the bytes written (default: read from the files).
    """
    written = digests or {}
    seed = None if noise is None else noise.public_seed
    kind = PUBLIC if public else PRIVATE
    hash_outputs = not public or (noise is not None and noise.private)
    commitments, salts = _commitments(inputs, noise) if public else ({}, {})
    record = {
        "private": not public,
        "privacy": PRIVACY_NOTES[kind],
        "schema": SCHEMA,
        "version": VERSION,
        "kind": kind,
        "command": command,
        "argv": list(argv),
        "call": call,
        "noise": None if noise is None else noise.to_dict(),
        "seed": None if seed is None else json_seed(seed),
        "seed_commitment": _seed_commitment(noise, public, "budget" in report),
        "inputs": {
            role: {"path": path} if public else {"path": path, "sha256": file_sha256(path)}
            for role, path in inputs.items()
            if path is not None
        },
        "outputs": {
            role: {"path": path, "sha256": written.get(role) or file_sha256(path)}
            if hash_outputs
            else {"path": path}
            for role, path in outputs.items()
            if path is not None
        },
        "versions": current_versions(call.get("mechanism")),
        "created": datetime.now(UTC).isoformat(timespec="seconds"),
        "report": report,
    }
    if not public:
        record["digest"] = record_digest(record)
        return record, None
    record["commitments"] = commitments
    record["opening"] = opening
    record["digest"] = record_digest(record)
    return record, {
        "schema": OPENING_SCHEMA,
        "version": 1,
        "secret": "the salts of a public record's commitments: whoever holds them can test "
        "guesses of the votes against the record; keep this file with the votes",
        "record_digest": record["digest"],
        "commitments": commitments,
        "salts": {role: salt.hex() for role, salt in salts.items()},
    }


def _seed_commitment(noise: Noise | None, public: bool, charged: bool) -> str | None:
    """The plain commitment to the seed file a record keeps: a public record commits to it
    with a salt (``commitments``) instead, but one charged to a budget keeps the plain one
    its budget line holds too (the SHA-256 of 128 random bits: it hides the seed), from which
    its charge is recomputed."""
    if noise is None or (public and not charged):
        return None
    return noise.commitment


def _commitments(
    inputs: dict[str, str | None], noise: Noise | None
) -> tuple[dict[str, str], dict[str, bytes]]:
    """A hiding commitment to each input file and to the seed file, each with its own fresh
    256-bit salt from the OS (SHA-256 of the salt followed by the bytes)."""
    commitments, salts = {}, {}
    for role, path in inputs.items():
        if path is None:
            continue
        salts[role] = secrets.token_bytes(_SALT_BYTES)
        commitments[role] = file_sha256(path, salts[role])
    if noise is not None:
        salt = secrets.token_bytes(_SALT_BYTES)
        seed = noise.commit(salt)
        if seed is not None:
            salts["seed"], commitments["seed"] = salt, seed
    return commitments, salts


def opening_path(record_path: str) -> str:
    """Where a public record's opening goes by default: beside it, ``NAME.opening.json``."""
    stem = record_path[: -len(".json")] if record_path.endswith(".json") else record_path
    return stem + ".opening.json"


def opening_text(opening: dict[str, Any]) -> bytes:
    """An opening file's content (written readable by its owner only: it holds the salts)."""
    return (dumps(opening) + "\n").encode()


def load_opening(path: str, record: dict[str, Any]) -> dict[str, bytes]:
    """The salts of ``record``'s commitments, read from its opening file.

    Raises:
        InputError: not a readable opening, or the record is not a public one. (The opening
            of another record is not refused here: its salts open none of this record's
            commitments, and verify says which.)
    """
    if not os.path.isfile(path):
        raise InputError(
            f"{given('opening', path)}: no such file; expected the opening of the record"
        )
    if os.path.getsize(path) > _MAX_OPENING_BYTES:
        raise InputError(f"{given('opening', path)}: too large to be an opening written by pate")
    try:
        with open(path, encoding="utf-8") as stream:
            opening = json.load(stream)
    except (OSError, UnicodeDecodeError, json.JSONDecodeError, RecursionError):
        raise InputError(f"{given('opening', path)}: not a readable JSON opening") from None
    salts = opening.get("salts") if isinstance(opening, dict) else None
    if (
        opening.get("schema") != OPENING_SCHEMA
        or not isinstance(salts, dict)
        or not all(isinstance(s, str) and _SALT_TEXT.match(s) for s in salts.values())
    ):
        raise InputError(
            f"{given('opening', path)}: not a pate opening (expected "
            f'"schema": "{OPENING_SCHEMA}" and its salts)'
        )
    if record_kind(record) != PUBLIC:
        raise InputError(
            f"{given('opening', path)}: the record is a private one; only a public record has "
            "an opening"
        )
    return {role: bytes.fromhex(salt) for role, salt in salts.items()}


def record_digest(record: dict[str, Any]) -> str:
    """sha256 of the record's canonical JSON without its ``digest``: a field changed by
    accident after the run no longer matches it. Not a seal: whoever edits a record on
    purpose recomputes it, so nothing in ``verify`` rests on it.

    A record charged to a budget holds the chain's head after its charge
    (``report.budget.head``), the digest of the budget line that names this digest: the
    head is left out of it (the one field that cannot be in both)."""
    content = {key: value for key, value in record.items() if key != "digest"}
    report = content.get("report")
    budget = report.get("budget") if isinstance(report, dict) else None
    if isinstance(report, dict) and isinstance(budget, dict) and "head" in budget:
        charged = {key: value for key, value in budget.items() if key != "head"}
        content["report"] = {**report, "budget": charged}
    # Through the record's own encoder first, so that numpy values read back the same.
    text = json.dumps(json.loads(dumps(content)), sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(text.encode()).hexdigest()


def walked_by_default(record: dict[str, Any]) -> str | None:
    """Why ``record`` is replayed with the exact walk, naming the pate that made it, when its
    release bounded the local sensitivity so without being asked (made before releases named
    their bound: a released GNSS release without ``local_sensitivity_bound``); else None."""
    call = record.get("call", {})
    options = call.get("options", {})
    if call.get("function") not in ("analyze", "smooth_sensitivity"):
        return None
    if options.get("reference_local_sensitivity") or "walk_local_sensitivity" in options:
        return None
    report = record.get("report", {})
    release = report.get("release", report) if call["function"] == "analyze" else report
    if not isinstance(release, dict) or release.get("released") is not True:
        return None
    if "local_sensitivity_bound" in release:
        return None
    made = record.get("versions", {}).get("pate", "unknown")
    return (
        f"made by pate {made}, whose release bounded the local sensitivity by the exact walk "
        "(it names no bound): replayed with --walk-local-sensitivity, not with today's "
        "default tabulated bound"
    )


def current_versions(mechanism: dict[str, Any] | None = None) -> dict[str, Any]:
    """The software a record was made with: a difference allows last-digit deviations. For
    a ``mechanism`` block of a mechanism a plugin brought, ``plugins`` too: its distribution
    and version (``{"gumbel-max": "1.0"}``); a built-in's record is as it always was."""
    from pate_cli.mechanisms.registry import provenance

    versions: dict[str, Any] = {
        "pate": __version__,
        "numpy": np.__version__,
        "scipy": scipy.__version__,
        "python": platform.python_version(),
    }
    plugins = provenance(str((mechanism or {}).get("name")))
    if plugins:
        versions["plugins"] = plugins
    return versions


def missing_plugin(record: dict[str, Any]) -> str | None:
    """Why the record's mechanism cannot be run here, or None: the plugin it came from
    (``versions.plugins``) is not installed at the version the record names, or no
    mechanism of its name is (a built-in's record names no plugin, and one it names is not
    read: no built-in's name is a plugin's)."""
    from importlib.metadata import PackageNotFoundError, version

    from pate_cli.mechanisms.registry import builtins, by_name, provenance

    call = record.get("call")
    block = call.get("mechanism") if isinstance(call, dict) else None
    name = block.get("name") if isinstance(block, dict) else None
    if not isinstance(name, str) or name in {kind.name for kind in builtins()}:
        return None
    wanted = (record.get("versions") or {}).get("plugins") or {}
    for distribution, made in wanted.items() if isinstance(wanted, dict) else ():
        try:
            here = version(distribution)
        except PackageNotFoundError:
            here = None
        if here != made:
            other = "" if here is None else f" ({distribution} {here} is)"
            return f"cannot be checked: {distribution} {made} is not installed{other}"
    if name not in by_name():
        return f"cannot be checked: no mechanism {name!r} is installed"
    if wanted and provenance(name) != wanted:
        made = ", ".join(f"{key} {value}" for key, value in wanted.items())
        return f"cannot be checked: the mechanism {name!r} installed is not {made}'s"
    return None


def record_text(record: dict[str, Any]) -> bytes:
    """A record file's content."""
    return (dumps(record) + "\n").encode()


def record_kind(record: dict[str, Any]) -> str:
    """``private`` or ``public``; a version 3 record (before kinds) is a private one."""
    kind: str = record.get("kind", PRIVATE)
    return kind


def check_record_path(path: str, flag: str = "--record") -> None:
    """Fail before any work when the record (or its opening) could not be written."""
    check_output_path(path, flag, (".json",))


def load_record(path: str) -> dict[str, Any]:
    """Read and check a record; anything unusable is an InputError (exit 2), within seconds,
    and a number that is not finite an ``EditedRecordError`` (exit 1).

    Only a regular file of at most ``MAX_RECORD_BYTES`` is read (a device such as /dev/zero
    or a FIFO would never end), and JSON nested too deeply for the parser is refused.
    """
    if not os.path.exists(path):
        raise InputError(f"{path}: no such file; expected a record written by --record")
    if not os.path.isfile(path):
        raise InputError(f"{path}: not a regular file; expected a record written by --record")
    if os.path.getsize(path) > MAX_RECORD_BYTES:
        raise InputError(
            f"{path}: larger than {MAX_RECORD_BYTES >> 20} MiB; a record written by --record "
            "is far smaller"
        )
    try:
        with open(path) as stream:
            record = json.load(stream)
    except RecursionError:
        raise InputError(f"{path}: JSON nested too deeply to be a record") from None
    except (OSError, UnicodeDecodeError, ValueError) as error:  # JSON's, or an int too long
        raise InputError(f"{path}: not a readable JSON record ({error})") from None
    if not isinstance(record, dict) or record.get("schema") != SCHEMA:
        raise InputError(f'{path}: not a pate record (expected "schema": "{SCHEMA}")')
    edited = _non_finite(record)
    if edited is not None:
        raise EditedRecordError(
            f"{path}: {edited[0]} is {edited[1]}, not a finite number; pate writes none (an "
            'infinite figure is the string "inf"): the record was edited after the run, and '
            "does not verify"
        )
    if record.get("version") in _OLD_VERSIONS:
        raise InputError(
            f"{path}: {_OLD_VERSIONS[record['version']]}; this pate reads version {VERSION}: "
            "verify it with the pate that made it, or record the run again"
        )
    if record.get("version") not in SUPPORTED_VERSIONS:
        raise InputError(
            f"{path}: record version {record.get('version')!r} is not supported by pate "
            f"{__version__} (supported: {', '.join(map(str, SUPPORTED_VERSIONS))})"
        )
    for key in ("command", "argv", "call", "inputs", "outputs", "report"):
        if key not in record:
            raise InputError(f"{path}: the record has no {key!r} field")
    if record["version"] >= 4 and record.get("kind") not in PRIVACY_NOTES:
        raise InputError(
            f"{path}: the record's kind is {record.get('kind')!r}; expected "
            f"{' or '.join(map(repr, PRIVACY_NOTES))}"
        )
    if record["version"] >= 4 and record.get("private") is not (record["kind"] == PRIVATE):
        raise InputError(
            f"{path}: the record's first field private is {record.get('private')!r} but its kind "
            f"is {record['kind']!r}"
        )
    if not all(
        isinstance(files, dict)
        and all(isinstance(e, dict) and isinstance(e.get("path"), str) for e in files.values())
        for files in (record["inputs"], record["outputs"])
    ):
        raise InputError(f"{path}: the record's inputs and outputs are not files by role")
    if record.get("noise") is not None and not isinstance(record["noise"], dict):
        raise InputError(f"{path}: the record's noise is not an object with its source")
    if not isinstance(record["argv"], list) or not all(isinstance(a, str) for a in record["argv"]):
        raise InputError(f"{path}: the record's argv is not a list of strings")
    call = record["call"]
    if (
        not isinstance(call, dict)
        or call.get("function") not in REPLAYS
        or not all(isinstance(call.get(k), dict) for k in ("votes", "mechanism", "options"))
    ):
        raise InputError(
            f"{path}: the record's call is not one of {', '.join(REPLAYS)} with its arguments"
        )
    return record


def as_printed(report: dict[str, Any]) -> dict[str, Any]:
    """The report as ``--json`` prints it (numpy values as lists, infinities as strings)."""
    printed: dict[str, Any] = json.loads(dumps(report))
    return printed

"""Release records: a self-describing JSON of one run that ``pate verify`` can recompute.

A record holds the JSON report of ``analyze``, ``smooth-sensitivity`` or ``aggregate``
together with what is needed to recompute it: the library call that computed it
(``call``), the command line that made that call (``argv``), where its noise came from,
the sha256 of the files, and the versions of pate, numpy, scipy and Python. ``verify``
re-parses the command line through pate's own parser and checks that it is the recorded
call, checks the hashes, replays the call through ``pate_cli.api`` on the same files
(regenerated labels to a scratch folder) and compares every number of the recorded report
with the recomputed one. What this proves: the recorded numbers follow from these input
files and this call under this pate version. It proves nothing about who made the record.

Two kinds of record, named by their first field (``privacy``) and by ``kind``:

- ``private`` (the default): the full report, with the figures computed from the votes
  (the data-dependent epsilon, the smooth sensitivity, the release's noise scale and its
  sample, from which the noise of the release could be solved) and the sha256 of every
  input. It is for whoever holds the votes; it must not be published.
- ``public`` (``--public --record``): only what ``--public`` prints (the publishable
  figures, the input's format and sizes, the mechanism), the call and command line, the
  inputs' paths without their hashes (a hash of the votes lets whoever holds all but one
  teacher's votes test every guess of the rest) and, when the noise was private, the
  hashes of the released labels.

The ``digest`` is the SHA-256 of the record's canonical JSON: it detects an accidental
change (a truncated copy, an edit by mistake). It is not a seal: anyone can edit a record
and recompute it, so ``verify`` does not rely on it; what it relies on is the
recomputation.

The noise is a secret (README, "Secrets"): a record holds the seed only of a run made with
a public ``--seed``, which ``verify`` replays; a ``--seed-file`` run leaves a commitment
(``seed_commitment``, the SHA-256 of the seed file) and ``verify --seed-file`` replays its
random sample; without the seed file (and always for noise from OS entropy, which was never
kept) the sample is reported as not re-derivable and everything else is checked.

Schema stability: ``schema`` is "pate-record" and ``version`` an integer. Within a version
fields are only ever added. Version 4 added ``privacy`` and ``kind``; version 3 records
are still read, as the private records they are. Earlier versions are refused with a hint:
version 1 replayed its command line, version 2 stored every run's seed.
"""

from __future__ import annotations

import hashlib
import json
import math
import os
import platform
import shutil
import tempfile
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import datetime, timezone
from typing import Any

import numpy as np
import scipy

from pate_cli import __version__
from pate_cli.errors import InputError, PateError, UsageError
from pate_cli.reports.models import dumps
from pate_cli.seeds import Noise, from_seed_file, json_seed
from pate_cli.votes import check_output_path, file_sha256, write_atomic

SCHEMA = "pate-record"
# A record holds one report (a few MB for the longest order grids); anything larger is not one.
MAX_RECORD_BYTES = 64 << 20
VERSION = 4
SUPPORTED_VERSIONS = (3, 4)
_OLD_VERSIONS = {
    1: "version 1 records replay their command line",
    2: "version 2 records hold the seed of every run, which gives the noise away",
}

SAME_VERSION_RTOL = 1e-12
"""Relative tolerance of ``verify`` when the record was made with the same versions of pate,
numpy, scipy and Python. Not 0: the same software can differ in the last bit from one CPU to
another (numpy's and OpenBLAS's SIMD code paths, e.g. with or without AVX-512), by a few
1e-16 relative; 1e-12 leaves room for that and still catches a change in the 12th digit."""

OTHER_VERSION_RTOL = 1e-9
"""Relative tolerance of ``verify`` when any of those versions differs."""

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

# Report fields that name files or carry free text, not numbers to reproduce.
UNCHECKED = {"path", "output", "answered_mask", "ledger", "plot", "csv", "warnings", "note"}


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
) -> dict[str, Any]:
    """The record of one run: its report plus what is needed to recompute it.

    ``call`` is the library call that computed the report: ``{"function": one of
    REPLAYS, "votes": load_votes' options, "mechanism": the mechanism block, "options":
    the function's other keyword arguments}``; files are named by their role in
    ``inputs`` (votes, indices, baseline, answered, student_probs, true_labels).
    ``noise`` is where the run's random draws came from (None: it drew none); only a
    public seed is written, and a seed file's commitment.

    ``public`` writes a public record: ``report`` is then what ``--public`` prints, the
    inputs keep their paths but not their hashes, and the outputs keep their hashes only
    when the noise was private (the released labels are then differentially private, and
    so is their hash).
    """
    seed = None if noise is None else noise.public_seed
    kind = PUBLIC if public else PRIVATE
    hash_outputs = not public or (noise is not None and noise.private)
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
        "seed_commitment": None if noise is None else noise.commitment,
        "inputs": {
            role: {"path": path} if public else {"path": path, "sha256": file_sha256(path)}
            for role, path in inputs.items()
            if path is not None
        },
        "outputs": {
            role: {"path": path, "sha256": file_sha256(path)} if hash_outputs else {"path": path}
            for role, path in outputs.items()
            if path is not None
        },
        "versions": current_versions(),
        "created": datetime.now(timezone.utc).isoformat(timespec="seconds"),
        "report": report,
    }
    record["digest"] = record_digest(record)
    return record


def record_digest(record: dict[str, Any]) -> str:
    """sha256 of the record's canonical JSON without its ``digest``: a field changed by
    accident after the run no longer matches it. Not a seal: whoever edits a record on
    purpose recomputes it, so nothing in ``verify`` rests on it."""
    content = {key: value for key, value in record.items() if key != "digest"}
    # Through the record's own encoder first, so that numpy values read back the same.
    text = json.dumps(json.loads(dumps(content)), sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(text.encode()).hexdigest()


def current_versions() -> dict[str, str]:
    """The software a record was made with: a difference allows last-digit deviations."""
    return {
        "pate": __version__,
        "numpy": np.__version__,
        "scipy": scipy.__version__,
        "python": platform.python_version(),
    }


def write_record(path: str, record: dict[str, Any]) -> None:
    """Write the record atomically: a failed run never leaves one behind."""
    text = (dumps(record) + "\n").encode()
    write_atomic(path, lambda stream: stream.write(text))


def record_kind(record: dict[str, Any]) -> str:
    """``private`` or ``public``; a version 3 record (before kinds) is a private one."""
    kind: str = record.get("kind", PRIVATE)
    return kind


def check_record_path(path: str) -> None:
    """Fail before any work when the record could not be written."""
    check_output_path(path, "--record", (".json",))


def load_record(path: str) -> dict[str, Any]:
    """Read and check a record; anything unusable is an InputError (exit 2), within seconds.

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
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as error:
        raise InputError(f"{path}: not a readable JSON record ({error})") from None
    if not isinstance(record, dict) or record.get("schema") != SCHEMA:
        raise InputError(f'{path}: not a pate record (expected "schema": "{SCHEMA}")')
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


@dataclass(frozen=True)
class Check:
    """One line of the verification table."""

    name: str
    ok: bool
    detail: str

    def to_json_dict(self) -> dict[str, Any]:
        return {"name": self.name, "ok": self.ok, "detail": self.detail}


def _as_number(value: Any) -> float | None:
    """Numbers and the encoder's "inf"/"-inf" strings as floats; anything else None."""
    if isinstance(value, bool):
        return None
    if isinstance(value, (int, float)):
        return float(value)
    if value in ("inf", "-inf"):
        return math.inf if value == "inf" else -math.inf
    return None


def differences(
    recorded: Any,
    recomputed: Any,
    *,
    rtol: float,
    atol: float,
    where: str = "",
    skip: frozenset[str] = frozenset(),
) -> Iterator[str]:
    """Dotted paths where the recomputed report differs from the recorded one; the paths in
    ``skip`` (and below them) are not compared."""
    if isinstance(recorded, dict) and isinstance(recomputed, dict):
        for key in sorted(set(recorded) | set(recomputed)):
            path = f"{where}.{key}" if where else key
            if key in UNCHECKED or path in skip:
                continue
            if key not in recorded:
                continue  # a field this record predates: the record's claims are what is checked
            if key not in recomputed:
                yield f"{path}: in the record but not in the recomputed report"
                continue
            yield from differences(
                recorded[key], recomputed[key], rtol=rtol, atol=atol, where=path, skip=skip
            )
        return
    if isinstance(recorded, list) and isinstance(recomputed, list):
        if len(recorded) != len(recomputed):
            yield f"{where}: {len(recorded)} entries recorded, {len(recomputed)} recomputed"
            return
        for i, (a, b) in enumerate(zip(recorded, recomputed, strict=True)):
            yield from differences(a, b, rtol=rtol, atol=atol, where=f"{where}[{i}]", skip=skip)
        return
    a, b = _as_number(recorded), _as_number(recomputed)
    if a is not None and b is not None:
        same = a == b or (
            math.isfinite(a) and math.isfinite(b) and math.isclose(a, b, rel_tol=rtol, abs_tol=atol)
        )
        if not same:
            yield f"{where}: recorded {recorded!r}, recomputed {recomputed!r}"
        return
    if recorded != recomputed:
        yield f"{where}: recorded {recorded!r}, recomputed {recomputed!r}"


def _lookup(report: dict[str, Any], dotted: str) -> Any:
    value: Any = report
    for part in dotted.split("."):
        if not isinstance(value, dict) or part not in value:
            return None
        value = value[part]
    return value


# The numbers an auditor looks for first; each gets its own line in the table.
KEY_FIELDS = {
    "analyze": [
        "data_dependent.epsilon",
        "data_dependent.order",
        "data_independent.epsilon",
        "data_independent.order",
        "expected_answered",
        "release.epsilon_expected_release",
        "release.epsilon_released",
        "release.conditions",
    ],
    "smooth-sensitivity": [
        "order",
        "epsilon_data_dependent",
        "gnss_cost",
        "smooth_sensitivity",
        "epsilon_expected_release",
        "epsilon_released",
        "conditions",
    ],
    "aggregate": [
        "answered",
        "privacy.data_dependent.epsilon",
        "privacy.data_dependent.order",
        "privacy.data_independent.epsilon",
        "expected_privacy.data_dependent.epsilon",
    ],
}


def resolve_inputs(
    record: dict[str, Any], record_path: str, overrides: dict[str, str]
) -> dict[str, str]:
    """Where each recorded input is now: an override, the recorded path, or beside the record."""
    resolved = {}
    folder = os.path.dirname(os.path.abspath(record_path))
    for role, entry in record["inputs"].items():
        candidates = (
            [overrides[role]]
            if role in overrides
            else [entry["path"], os.path.join(folder, os.path.basename(entry["path"]))]
        )
        found = next((c for c in candidates if os.path.isfile(c)), None)
        if found is None:
            raise InputError(
                f"{record_path}: the {role} file {candidates[0]} is not found; give it with "
                f"{'--votes' if role == 'votes' else f'--input {role}=PATH'}"
            )
        resolved[role] = found
    unknown = set(overrides) - set(record["inputs"])
    if unknown:
        raise InputError(
            f"{record_path}: the record has no input named {', '.join(sorted(unknown))} "
            f"(it has {', '.join(sorted(record['inputs']))})"
        )
    return resolved


# The library functions a record's call can name, and the file roles each takes.
REPLAYS = ("analyze", "smooth_sensitivity", "aggregate")
FILE_ROLES = {
    "analyze": ("baseline", "answered"),
    "smooth_sensitivity": ("baseline", "answered"),
    "aggregate": ("student_probs", "true_labels"),
}


def as_printed(report: dict[str, Any]) -> dict[str, Any]:
    """The report as ``--json`` prints it (numpy values as lists, infinities as strings)."""
    printed: dict[str, Any] = json.loads(dumps(report))
    return printed


Replay = Callable[
    [dict[str, Any], dict[str, str], str, dict[str, Any] | None],
    tuple[dict[str, Any], dict[str, str], tuple[str, ...]],
]
"""replay(record, resolved input paths, scratch folder, noise) -> (the report's JSON, the
files it wrote by role, the dotted fields it could not reproduce): the recorded call run
again (``pate_cli.api`` provides it). ``noise`` is ``{"seed": N}`` or ``{"seed_file":
path}`` to replay the random draw, or None to recompute only what does not depend on it;
fields that depend on it are then listed as not reproduced (``outputs.ROLE`` for a file)."""


def noise_options(
    record: dict[str, Any], seed_file: str | None
) -> tuple[dict[str, Any] | None, list[Check]]:
    """How to replay the record's random draw: a public seed, the seed file (checked against
    the record's commitment), or not at all (None: nothing random is compared); and the
    check line of a seed file."""
    if record.get("seed") is not None:
        if seed_file is not None:
            raise UsageError(
                f"--seed-file {seed_file}: the record was made with a public --seed; no seed "
                "file is needed"
            )
        return {"seed": int(record["seed"])}, []
    if seed_file is None:
        return None, []
    commitment = record.get("seed_commitment")
    if commitment is None:
        raise UsageError(
            f"--seed-file {seed_file}: the record was not made with a seed file "
            "(it has no seed_commitment)"
        )
    given = from_seed_file(seed_file, create=False)
    if given.commitment != commitment:
        return None, [
            Check(
                "seed file",
                False,
                f"{seed_file}: its SHA-256 differs from the record's seed_commitment; it is "
                "not the seed file of this run",
            )
        ]
    return {"seed_file": seed_file}, [Check("seed file", True, "matches the record's commitment")]


# What the random draw of each command decides, in words.
_SAMPLE = {
    "analyze": "the sampled released epsilon",
    "smooth-sensitivity": "the sampled released epsilon",
    "aggregate": "the noisy labels, the answered mask and the figures of the realised run",
}


def _sample_check(record: dict[str, Any], noise: dict[str, Any] | None) -> Check | None:
    """What became of the random sample: replayed, or named as not re-derivable (which does
    not fail the record: without its seed nobody can re-derive it, honest or not)."""
    source = (record.get("noise") or {}).get("source")
    if source is None:
        return None  # the run drew nothing
    what = _SAMPLE.get(record["command"], "the random outputs")
    if noise is not None and "seed" in noise:
        return Check(
            "random sample",
            True,
            f"{what}: replayed from the record's public seed {noise['seed']} (a public seed: "
            "not a private release)",
        )
    if noise is not None:
        return Check("random sample", True, f"{what}: replayed from the seed file")
    commitment = record.get("seed_commitment")
    if source == "os-entropy" or commitment is None:
        detail = (
            "not re-derivable without the seed file, and there is none: the noise came from OS "
            "entropy and was never kept"
        )
    else:
        detail = (
            f"not re-derivable without the seed file (seed commitment {commitment}); give it "
            "with --seed-file to replay it"
        )
    return Check("random sample", True, f"{what}: {detail} (not compared)")


CommandLine = Callable[[dict[str, Any]], list[str]]
"""Where a record's command line (``argv``) and the rest of it disagree: the command-line
layer re-parses it with pate's own parser; the library reads no command line."""


def _command_line_check(record: dict[str, Any], command_line: CommandLine | None) -> Check:
    if command_line is None:
        return Check(
            "command line (not re-parsed)",
            True,
            "the library reads no command line: `pate verify` re-parses it against the call; "
            "the call is what was replayed",
        )
    mismatches = command_line(record)
    if mismatches:
        more = f" (and {len(mismatches) - 1} more)" if len(mismatches) > 1 else ""
        return Check(
            "command line",
            False,
            f"does not match the recorded call: {mismatches[0]}{more}",
        )
    return Check("command line", True, "re-parsed by this pate: it is the recorded call")


def _digest_check(record: dict[str, Any]) -> Check:
    if record.get("digest") == record_digest(record):
        return Check(
            "digest",
            True,
            "matches the content: no accidental change (a checksum anyone can recompute, not "
            "a seal)",
        )
    return Check("digest", False, "does not match the content: the record changed after the run")


def public_view(report: dict[str, Any]) -> dict[str, Any]:
    """What ``--public --json`` prints of a full report's JSON (``report.public_json``): a
    recomputed report in the form a public record holds."""
    privacy = report.get("privacy") or report.get("expected_privacy") or {}
    summary = {k: v for k, v in report["input"].items() if k not in ("path", "sha256")}
    out = {
        "command": report["command"],
        "input": summary,
        "mechanism": report["mechanism"],
        "delta": report.get("delta", privacy.get("delta")),
        "conversion": report.get("conversion", privacy.get("conversion")),
        "num_queries": summary["num_queries"],
        "publishable": report["publishable"],
    }
    if "gate" in report:
        out["gate"] = report["gate"]
    return out


#: The publishable figure that is one draw of the release's noise.
SAMPLED_BASIS = "gnss-release"


def without_sampled_figures(report: Any) -> Any:
    """The report without the publishable figures drawn at random (their place in the
    best-first list depends on the draw too)."""
    if isinstance(report, dict):
        return {
            key: [f for f in value if not (isinstance(f, dict) and f.get("basis") == SAMPLED_BASIS)]
            if key == "publishable" and isinstance(value, list)
            else without_sampled_figures(value)
            for key, value in report.items()
        }
    return report


def verify(
    record: dict[str, Any],
    record_path: str,
    overrides: dict[str, str],
    replay: Replay,
    *,
    seed_file: str | None = None,
    rtol: float | None = None,
    atol: float = 1e-12,
    command_line: CommandLine | None = None,
) -> list[Check]:
    """Check the command line against the call, the hashes, replay the recorded library call
    with ``replay``, compare every number.

    With ``rtol`` None, numbers must agree to ``SAME_VERSION_RTOL`` when the record was
    made with the same versions of pate, numpy, scipy and Python, and to
    ``OTHER_VERSION_RTOL`` otherwise; ``rtol`` 0 asks for exact equality. The random
    sample is replayed from a public seed or from ``seed_file`` and must then match;
    otherwise it is not compared (nothing drawn afresh is ever compared with it) and a line
    says that it is not re-derivable. A public record is compared with the public form of
    the recomputed report. ``command_line`` checks the recorded command line against the
    call (the CLI passes its parser); without it the command line is not vouched for.
    """
    if rtol is None:
        same = record.get("versions") == current_versions()
        rtol = SAME_VERSION_RTOL if same else OTHER_VERSION_RTOL
    if rtol == 0:
        atol = 0.0
    resolved = resolve_inputs(record, record_path, overrides)
    noise, noise_checks = noise_options(record, seed_file)
    same_command = record["command"].replace("-", "_") == record["call"]["function"]
    checks = [
        _digest_check(record),
        _command_line_check(record, command_line),
        Check(
            "command of the recorded call",
            same_command,
            f"{record['command']} is {record['call']['function']}"
            if same_command
            else f"the record says {record['command']!r} but its call is "
            f"{record['call']['function']!r}",
        ),
        *noise_checks,
    ]
    sample = _sample_check(record, noise)
    if sample is not None:
        checks.append(sample)
    for role, entry in record["inputs"].items():
        if "sha256" not in entry:
            continue
        digest = file_sha256(resolved[role])
        checks.append(
            Check(
                f"sha256 of {role}",
                digest == entry["sha256"],
                resolved[role]
                if digest == entry["sha256"]
                else (
                    f"{resolved[role]}: {digest[:12]}... differs from the recorded "
                    f"{entry['sha256'][:12]}..."
                ),
            )
        )
    public = record_kind(record) == PUBLIC
    if public:
        checks.append(
            Check(
                "inputs",
                True,
                "a public record holds no hash of its inputs: its figures are recomputed from "
                "the files given",
            )
        )
    scratch = tempfile.mkdtemp(prefix="pate-verify-")
    try:
        try:
            recomputed, written, unreplayed = replay(record, resolved, scratch, noise)
        except PateError as error:
            checks.append(Check("recomputation", False, f"the replay failed: {error.message}"))
            return checks
        recorded = record["report"]
        if public:
            recomputed = public_view(recomputed)
        if noise is None:
            recorded = without_sampled_figures(recorded)
            recomputed = without_sampled_figures(recomputed)
        skip = frozenset(unreplayed)
        checks.extend(_compare(record["command"], recorded, recomputed, rtol, atol, skip, public))
        checks.extend(_output_checks(record, written, skip))
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    checks.extend(_bound_checks(record["report"]))
    return checks


def _compare(
    command: str,
    recorded: dict[str, Any],
    recomputed: dict[str, Any],
    rtol: float,
    atol: float,
    skip: frozenset[str] = frozenset(),
    public: bool = False,
) -> list[Check]:
    diffs = list(differences(recorded, recomputed, rtol=rtol, atol=atol, skip=skip))
    fields = ["publishable"] if public else KEY_FIELDS.get(command, [])
    checks = []
    for field in fields:
        if field in skip or any(field.startswith(f + ".") for f in skip):
            continue
        if _lookup(recorded, field) is None and _lookup(recomputed, field) is None:
            continue
        mine = [d for d in diffs if d.startswith((field + ":", field + ".", field + "["))]
        value = _lookup(recorded, field)
        if field == "publishable" and isinstance(value, list):
            value = ", ".join(f"{f.get('basis')} {f.get('epsilon')}" for f in value)
        checks.append(Check(field, not mine, mine[0] if mine else f"reproduced: {value}"))
    keyed = {d for d in diffs for f in fields if d.startswith(f)}
    # A changed parameter first, then shallow differences: the cause before the numbers.
    rest = sorted(
        (d for d in diffs if d not in keyed),
        key=lambda d: (
            not d.startswith(("mechanism.", "delta:", "conversion:")),
            d.split(":")[0].count(".") + d.split(":")[0].count("["),
            d,
        ),
    )
    tolerance = "exactly" if rtol == 0 else f"within rtol {rtol:g}"
    if atol:
        tolerance += f", atol {atol:g}"
    checks.append(
        Check(
            "every other recorded number",
            not rest,
            f"reproduced {tolerance}"
            if not rest
            else f"{len(rest)} differ: " + "; ".join(rest[:3]),
        )
    )
    return checks


def _output_checks(
    record: dict[str, Any], written: dict[str, str], skip: frozenset[str] = frozenset()
) -> list[Check]:
    checks = []
    for role, entry in record["outputs"].items():
        if "sha256" not in entry:
            continue  # a public record of a run whose noise was public keeps no hash of it
        if f"outputs.{role}" in skip:
            checks.append(_recorded_output_check(role, entry))
            continue
        path = written.get(role)
        if path is None or not os.path.isfile(path):
            checks.append(Check(f"sha256 of output {role}", False, "the replay did not write it"))
            continue
        digest = file_sha256(path)
        same = digest == entry["sha256"]
        checks.append(
            Check(
                f"sha256 of output {role}",
                same,
                "regenerated byte for byte" if same else "the regenerated file differs",
            )
        )
    return checks


def _recorded_output_check(role: str, entry: dict[str, Any]) -> Check:
    """An output that could not be regenerated (its noise is secret): the file where the
    record says it is, if it is there, must still be the one the run wrote."""
    path = entry.get("path")
    if not isinstance(path, str) or not os.path.isfile(path):
        return Check(f"sha256 of output {role}", True, "not regenerated, and not found to check")
    same = file_sha256(path) == entry["sha256"]
    return Check(
        f"sha256 of output {role}",
        same,
        f"{path} is the file the run wrote (not regenerated)"
        if same
        else f"{path} differs from the file the run wrote",
    )


def _bound_checks(report: dict[str, Any]) -> list[Check]:
    """The data-independent bound must be an upper bound of the data-dependent one."""
    blocks = [report] if "data_dependent" in report else []
    blocks += [
        report[k] for k in ("privacy", "expected_privacy") if isinstance(report.get(k), dict)
    ]
    pairs = [
        (_lookup(b, "data_dependent.epsilon"), _lookup(b, "data_independent.epsilon"))
        for b in blocks
    ]
    if "epsilon_data_independent_at_order" in report:  # smooth-sensitivity: at the release order
        pairs.append(
            (report.get("epsilon_data_dependent"), report["epsilon_data_independent_at_order"])
        )
    checks = []
    for dependent_value, independent_value in pairs:
        dependent = _as_number(dependent_value)
        independent = _as_number(independent_value)
        ok = dependent is not None and independent is not None and dependent <= independent
        checks.append(
            Check(
                "data-dependent <= data-independent",
                ok,
                f"{dependent:.6g} <= {independent:.6g}" if ok else f"{dependent} > {independent}",
            )
        )
    return checks


@dataclass(frozen=True)
class VerifyReport:
    """``pate verify``: every check of one record, and the verdict."""

    record_path: str
    record: dict[str, Any]
    checks: tuple[Check, ...]

    @property
    def ok(self) -> bool:
        """True when every check holds."""
        return all(check.ok for check in self.checks)

    def _repr_markdown_(self) -> str:
        """The report in a notebook (Jupyter renders Markdown)."""
        from pate_cli.reports import markdown

        return markdown.verify(self)

    def to_dict(self) -> dict[str, Any]:
        """Exactly what ``pate verify --json`` prints."""
        return {
            "command": "verify",
            "record": self.record_path,
            "record_command": self.record["command"],
            "record_kind": record_kind(self.record),
            "ok": self.ok,
            "checks": [check.to_json_dict() for check in self.checks],
        }

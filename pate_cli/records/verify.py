"""``pate verify``: recompute a release record and compare it with what it recorded.

``verify`` re-parses the record's command line through pate's own parser and checks that it
is the recorded call, checks the hashes, replays the call through ``pate_cli.api`` on the
same files (regenerated labels to a scratch folder) and compares every number of the
recorded report with the recomputed one (``pate_cli.records.diff``): numbers, notes,
conditions, the publishable list, the gate and the warnings. What this proves: the recorded
figures follow from these input files and this call under this pate version. It proves
nothing about who made the record. The result is a :class:`VerifyReport`, one
:class:`Check` per line of the verification table.

Each check has one of three verdicts: ``verified`` (made, and it holds), ``differs`` (made,
and it does not hold) or ``not-checked`` (it could not be made: a sampled figure without the
run's seed file, a public record's binding without its opening, a file that is not there),
with the reason. A check that was not made is never counted as passed: the report's verdict
is ``verified`` only when every check was made and holds, ``differs`` when any does not
hold, and ``incomplete`` otherwise. Given more (the seed file, the opening), verify checks
more, never less.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Callable
from typing import Any

from pate_cli.common import spelling
from pate_cli.errors import InputError, PateError, UsageError
from pate_cli.files.seeds import from_seed_file
from pate_cli.records.diff import (
    KEY_FIELDS,
    as_number,
    circumstantial,
    differences,
    lookup,
    public_view,
    sampled_figures,
    warning_lists,
    without_sampled_figures,
)
from pate_cli.records.record import (
    PUBLIC,
    STREAMS_VERSION,
    current_versions,
    load_opening,
    privacy_claim,
    record_digest,
    record_kind,
    walked_by_default,
)
from pate_cli.records.verdict import (
    DIFFERS,
    NOT_CHECKED,
    VERIFIED,
    Check,
    VerifyReport,
)
from pate_cli.reports.rounding import bound_significant
from pate_cli.votes import file_sha256, is_folder

__all__ = [
    "DIFFERS",
    "NOT_CHECKED",
    "VERIFIED",
    "Check",
    "VerifyReport",
    "verify",
]

SAME_VERSION_RTOL = 1e-12
"""Relative tolerance of ``verify`` when the record was made with the same versions of pate,
numpy, scipy and Python. Not 0: the same software can differ in the last bit from one CPU to
another (numpy's and OpenBLAS's SIMD code paths, e.g. with or without AVX-512), by a few
1e-16 relative; 1e-12 leaves room for that and still catches a change in the 12th digit."""

OTHER_VERSION_RTOL = 1e-9
"""Relative tolerance of ``verify`` when any of those versions differs."""


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
        found = next((c for c in candidates if os.path.isfile(c) or is_folder(c)), None)
        if found is None:
            raise InputError(
                f"{record_path}: the {role} file {candidates[0]} is not found; give it with "
                f"{_input_option(role)}"
            )
        resolved[role] = found
    unknown = set(overrides) - set(record["inputs"])
    if unknown:
        raise InputError(
            f"{record_path}: the record has no input named {', '.join(sorted(unknown))} "
            f"(it has {', '.join(sorted(record['inputs']))})"
        )
    return resolved


def _input_option(role: str) -> str:
    """How the caller gives the file of an input ``role``: ``--votes`` or ``--input
    role=PATH`` on the command line, ``votes=PATH`` or ``inputs={'role': PATH}`` to
    ``pate.verify``."""
    if spelling.on_command_line():
        return "--votes" if role == "votes" else f"--input {role}=PATH"
    return "votes=PATH" if role == "votes" else f"inputs={{{role!r}: PATH}}"


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
    record: dict[str, Any], seed_file: str | None, salts: dict[str, bytes] | None
) -> tuple[dict[str, Any] | None, list[Check]]:
    """How to replay the record's random draw: a public seed, the seed file (checked against
    the record's commitment), or not at all (None: nothing random is compared); and the
    check lines of the seed file. ``salts`` is the public record's opening, if given."""
    if record.get("seed") is not None:
        if seed_file is not None:
            raise UsageError(
                f"{spelling.given('seed-file', seed_file)}: the record was made with a public "
                "--seed; no seed "
                "file is needed"
            )
        return {"seed": int(record["seed"])}, []
    if seed_file is None:
        return None, []
    plain = record.get("seed_commitment")
    salted = (record.get("commitments") or {}).get("seed")
    if plain is None and salted is None:
        raise UsageError(
            f"{spelling.given('seed-file', seed_file)}: the record was not made with a seed "
            "file "
            "(it has no commitment to one)"
        )
    given = from_seed_file(seed_file, create=False)
    if plain is not None:
        same = given.commitment == plain
    elif salts is None or "seed" not in salts:
        check = Check.skipped(
            "seed file",
            "a public record commits to its seed file with a salt: give "
            f"{spelling.option('opening')} to check that this is the run's seed file",
        )
        return {"seed_file": seed_file}, [check]
    else:
        same = given.commit(salts["seed"]) == salted
    if not same:
        return None, [
            Check.made(
                "seed file",
                False,
                f"{seed_file}: it does not match the record's commitment; it is not the seed "
                "file of this run",
            )
        ]
    return {"seed_file": seed_file}, [
        Check.made("seed file", True, "matches the record's commitment")
    ]


# What the random draw of each command decides, in words.
_SAMPLE = {
    "analyze": "the sampled released epsilon",
    "smooth-sensitivity": "the sampled released epsilon",
    "aggregate": "the noisy labels, the answered mask and the figures of the realised run",
}


def _sample_check(record: dict[str, Any], noise: dict[str, Any] | None) -> Check | None:
    """What became of the random sample: replayed (its figures are compared below), or not
    checked (without its seed nobody can re-derive it, honest or not)."""
    source = (record.get("noise") or {}).get("source")
    if source is None:
        return None  # the run drew nothing
    if noise is None and record_kind(record) == PUBLIC and not _public_sample(record):
        return None  # the public record states nothing that the draw decided
    what = _SAMPLE.get(record["command"], "the random outputs")
    if noise is not None and "seed" in noise:
        return Check.made(
            "random sample",
            True,
            f"{what}: replayed from the record's public seed {noise['seed']} (a public seed: "
            "not a private release)",
        )
    if noise is not None:
        return Check.made("random sample", True, f"{what}: replayed from the seed file")
    commitment = record.get("seed_commitment") or (record.get("commitments") or {}).get("seed")
    if source == "os-entropy" or commitment is None:
        detail = (
            "not re-derivable: the noise came from OS entropy and was never kept, so nobody "
            "can check it"
        )
    elif record.get("version", 0) < STREAMS_VERSION and record.get("seed_commitment"):
        detail = (
            f"not replayed: a version {record.get('version')} record drew every purpose from "
            "one stream, which this pate no longer derives"
        )
    else:
        detail = (
            f"not re-derivable without the seed file (seed commitment {commitment}); give it "
            f"with {spelling.option('seed-file')} to replay it"
        )
    return Check.skipped("random sample", f"{what}: {detail}")


def _public_sample(record: dict[str, Any]) -> bool:
    """Whether a public record states something its random draw decided: a sampled
    publishable figure, or the hash of labels drawn with private noise."""
    hashed = any("sha256" in entry for entry in record["outputs"].values())
    return hashed or bool(sampled_figures(record["report"]))


def _why_not_drawn(record: dict[str, Any]) -> str:
    """Why a figure the run's noise decided is not checked."""
    if (record.get("noise") or {}).get("source") == "os-entropy":
        return "decided by noise from OS entropy, which was never kept"
    if record.get("version", 0) < STREAMS_VERSION and record.get("seed_commitment"):
        return (
            f"decided by the run's noise, which this pate does not replay for a version "
            f"{record.get('version')} record"
        )
    return f"decided by the run's noise: give {spelling.option('seed-file')} to replay it"


CommandLine = Callable[[dict[str, Any]], list[str]]
"""Where a record's command line (``argv``) and the rest of it disagree: the command-line
layer re-parses it with pate's own parser; the library reads no command line."""


def _command_line_check(record: dict[str, Any], command_line: CommandLine | None) -> Check:
    if command_line is None:
        return Check.skipped(
            "command line",
            "the library reads no command line: `pate verify` re-parses it against the call; "
            "the call is what was replayed",
        )
    mismatches = command_line(record)
    if mismatches:
        more = f" (and {len(mismatches) - 1} more)" if len(mismatches) > 1 else ""
        return Check.made(
            "command line",
            False,
            f"does not match the recorded call: {mismatches[0]}{more}",
        )
    return Check.made("command line", True, "re-parsed by this pate: it is the recorded call")


def _digest_check(record: dict[str, Any]) -> Check:
    if record.get("digest") == record_digest(record):
        return Check.made(
            "digest",
            True,
            "matches the content: no accidental change (a checksum anyone can recompute, not "
            "a seal)",
        )
    return Check.made(
        "digest", False, "does not match the content: the record changed after the run"
    )


def _input_checks(
    record: dict[str, Any], resolved: dict[str, str], salts: dict[str, bytes] | None
) -> list[Check]:
    """Each input is the file the run read: its sha256 (a private record), or its salted
    commitment opened with the opening file (a public record; not checked without it)."""
    checks = []
    for role, entry in record["inputs"].items():
        if "sha256" not in entry:
            continue
        digest = file_sha256(resolved[role])
        same = digest == entry["sha256"]
        checks.append(
            Check.made(
                f"sha256 of {role}",
                same,
                resolved[role]
                if same
                else f"{resolved[role]}: {digest[:12]}... differs from the recorded "
                f"{entry['sha256'][:12]}...",
            )
        )
    commitments = record.get("commitments") or {}
    for role in record["inputs"]:
        if role not in commitments:
            continue
        name = f"binding of {role}"
        if salts is None or role not in salts:
            checks.append(
                Check.skipped(
                    name,
                    f"{resolved[role]}: a public record commits to its inputs with a salt; "
                    f"give {spelling.option('opening')} to check that this is the file the "
                    "run read",
                )
            )
            continue
        same = file_sha256(resolved[role], salts[role]) == commitments[role]
        checks.append(
            Check.made(
                name,
                same,
                f"{resolved[role]} is the file the run read"
                if same
                else f"{resolved[role]} is not the file the run read (or the opening is not "
                "this record's)",
            )
        )
    if record_kind(record) == PUBLIC and not commitments:
        checks.append(
            Check.skipped(
                "inputs",
                "this public record holds no commitment to its inputs (made before version "
                f"{STREAMS_VERSION}): nothing binds it to the files given",
            )
        )
    return checks


def verify(
    record: dict[str, Any],
    record_path: str,
    overrides: dict[str, str],
    replay: Replay,
    *,
    seed_file: str | None = None,
    opening: str | None = None,
    rtol: float | None = None,
    atol: float = 1e-12,
    command_line: CommandLine | None = None,
) -> list[Check]:
    """Check the command line against the call, the inputs, replay the recorded library call
    with ``replay``, compare every number, warning and note.

    With ``rtol`` None, numbers must agree to ``SAME_VERSION_RTOL`` when the record was
    made with the same versions of pate, numpy, scipy, Python and its plugin, and to
    ``OTHER_VERSION_RTOL`` otherwise; ``rtol`` 0 asks for exact equality. The random
    sample is replayed from a public seed or from ``seed_file`` and must then match;
    otherwise its figures are not checked (nothing drawn afresh is ever compared with
    them). A public record is compared with the public form of the recomputed report, and
    bound to its input files by ``opening`` (the opening file written beside it); without
    it the binding is not checked. ``command_line`` checks the recorded command line
    against the call (the CLI passes its parser); without it the command line is not
    checked. Files on disk are always compared with the record's hashes.
    """
    if rtol is None:
        same = record.get("versions") == current_versions(record["call"].get("mechanism"))
        rtol = SAME_VERSION_RTOL if same else OTHER_VERSION_RTOL
    if rtol == 0:
        atol = 0.0
    resolved = resolve_inputs(record, record_path, overrides)
    salts = None if opening is None else load_opening(opening, record)
    noise, noise_checks = noise_options(record, seed_file, salts)
    if noise is not None and record.get("version", 0) < STREAMS_VERSION:
        noise = None  # its streams are not this pate's: the sample is named as not replayed
    same_command = record["command"].replace("-", "_") == record["call"]["function"]
    checks = [
        _digest_check(record),
        _command_line_check(record, command_line),
        Check.made(
            "command of the recorded call",
            same_command,
            f"{record['command']} is {record['call']['function']}"
            if same_command
            else f"the record says {record['command']!r} but its call is "
            f"{record['call']['function']!r}",
        ),
        *noise_checks,
        *_walk_check(record),
    ]
    claim = privacy_claim(record)  # the first sentence, stated again from the record's kind
    if claim is not None:
        checks.append(Check.made("privacy", *claim))
    sample = _sample_check(record, noise)
    if sample is not None:
        checks.append(sample)
    checks.extend(_input_checks(record, resolved, salts))
    public = record_kind(record) == PUBLIC
    scratch = tempfile.mkdtemp(prefix="pate-verify-")
    try:
        try:
            recomputed, written, unreplayed = replay(record, resolved, scratch, noise)
        except PateError as error:
            checks.append(Check.made("recomputation", False, f"the replay failed: {error.message}"))
            return checks
        recorded = record["report"]
        if public:
            recomputed = public_view(recomputed)
        skip = frozenset(unreplayed)
        why = _why_not_drawn(record)
        checks.extend(
            _compare(record["command"], recorded, recomputed, rtol, atol, skip, public, noise, why)
        )
        checks.extend(_warning_checks(recorded, recomputed, skip, why))
        checks.extend(_output_checks(record, record_path, written, skip))
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    checks.extend(_bound_checks(record["report"]))
    return checks


def _walk_check(record: dict[str, Any]) -> list[Check]:
    """Said when the replay asks for the exact walk (``walked_by_default``)."""
    made = walked_by_default(record)
    return [] if made is None else [Check.made("local-sensitivity bound", True, made)]


def _compare(
    command: str,
    recorded: dict[str, Any],
    recomputed: dict[str, Any],
    rtol: float,
    atol: float,
    skip: frozenset[str] = frozenset(),
    public: bool = False,
    noise: dict[str, Any] | None = None,
    why: str = "decided by the run's noise",
) -> list[Check]:
    sampled = sampled_figures(recorded) if noise is None else []
    if noise is None:
        recorded = without_sampled_figures(recorded)
        recomputed = without_sampled_figures(recomputed)
    diffs = list(differences(recorded, recomputed, rtol=rtol, atol=atol, skip=skip))
    fields = ["publishable"] if public else KEY_FIELDS.get(command, [])
    checks = []
    for field in fields:
        if lookup(recorded, field) is None and lookup(recomputed, field) is None:
            continue
        if field in skip or any(field.startswith(f + ".") for f in skip):
            checks.append(Check.skipped(field, f"recorded {lookup(recorded, field)}: {why}"))
            continue
        mine = [d for d in diffs if d.startswith((field + ":", field + ".", field + "["))]
        value = lookup(recorded, field)
        if field == "publishable" and isinstance(value, list):
            value = ", ".join(f"{f.get('basis')} {f.get('epsilon')}" for f in value)
        checks.append(Check.made(field, not mine, mine[0] if mine else f"reproduced: {value}"))
    for figure in sampled:
        checks.append(
            Check.skipped(
                f"publishable {figure.get('basis')}",
                f"recorded {figure.get('epsilon')}: a sampled figure, {why}",
            )
        )
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
        Check.made(
            "every other recorded number and note",
            not rest,
            f"reproduced {tolerance}"
            if not rest
            else f"{len(rest)} differ: " + "; ".join(rest[:3]),
        )
    )
    return checks


def _warning_checks(
    recorded: dict[str, Any],
    recomputed: dict[str, Any],
    skip: frozenset[str],
    why: str = "decided by the run's noise",
) -> list[Check]:
    """Every list of warnings the record holds is the one the replay gives: none deleted,
    none edited, none added. Warnings about the circumstances of the run (a file replaced
    with --force, a seed file others may read) are not recomputed: the replay cannot know
    them, and they claim nothing about the votes."""
    checks = []
    for where, listed in warning_lists(recorded):
        if where in skip or any(where.startswith(f + ".") for f in skip):
            checks.append(Check.skipped(where, f"the realised run's warnings are {why}"))
            continue
        found = lookup(recomputed, where)
        mine = [w for w in listed if not circumstantial(w)]
        theirs = [w for w in found if not circumstantial(w)] if isinstance(found, list) else []
        missing = [w for w in theirs if w not in mine]
        added = [w for w in mine if w not in theirs]
        if missing:
            checks.append(Check.made(where, False, f"missing from the record: {missing[0]}"))
        elif added:
            checks.append(Check.made(where, False, f"not given by this run: {added[0]}"))
        else:
            more = len(listed) - len(mine)
            circumstances = f" ({more} about the run's circumstances, not recomputed)"
            checks.append(
                Check.made(where, True, f"{len(mine)} reproduced" + (circumstances if more else ""))
            )
    return checks


def _output_checks(
    record: dict[str, Any],
    record_path: str,
    written: dict[str, str],
    skip: frozenset[str] = frozenset(),
) -> list[Check]:
    """Each release file the record hashes: the file on disk is still the one the run wrote
    (always checked when it is there), and the replay regenerates it byte for byte (with the
    run's noise)."""
    checks = []
    for role, entry in record["outputs"].items():
        if "sha256" not in entry:
            continue  # a public record of a run whose noise was public keeps no hash of it
        checks.append(_on_disk_check(role, entry, record_path))
        if f"outputs.{role}" in skip:
            continue
        path = written.get(role)
        if path is None or not os.path.isfile(path):
            checks.append(
                Check.made(f"regenerated output {role}", False, "the replay did not write it")
            )
            continue
        same = file_sha256(path) == entry["sha256"]
        checks.append(
            Check.made(
                f"regenerated output {role}",
                same,
                "regenerated byte for byte" if same else "the regenerated file differs",
            )
        )
    return checks


def _on_disk_check(role: str, entry: dict[str, Any], record_path: str) -> Check:
    """The output where the record says it is (or beside the record) must still be the file
    the run wrote; not checked when it is in neither place."""
    path = entry.get("path")
    folder = os.path.dirname(os.path.abspath(record_path))
    candidates = [path, os.path.join(folder, os.path.basename(path))] if path else []
    found = next((c for c in candidates if os.path.isfile(c)), None)
    name = f"sha256 of output {role}"
    if found is None:
        return Check.skipped(name, f"{path}: not found, here or beside the record")
    same = file_sha256(found) == entry["sha256"]
    return Check.made(
        name,
        same,
        f"{found} is the file the run wrote"
        if same
        else f"{found} differs from the file the run wrote",
    )


# The blocks of a report that state both bounds, by the words naming their check: an
# aggregate states the realised run's and the expected one.
_BOUND_BLOCKS = {"privacy": "realised privacy: ", "expected_privacy": "expected privacy: "}


def _bound_checks(report: dict[str, Any]) -> list[Check]:
    """The data-independent bound must be an upper bound of the data-dependent one."""
    blocks = [("", report)] if "data_dependent" in report else []
    blocks += [(w, report[k]) for k, w in _BOUND_BLOCKS.items() if isinstance(report.get(k), dict)]
    pairs = [
        (words, lookup(b, "data_dependent.epsilon"), lookup(b, "data_independent.epsilon"))
        for words, b in blocks
    ]
    if "epsilon_data_independent_at_order" in report:  # smooth-sensitivity: at the release order
        pairs.append(
            ("", report.get("epsilon_data_dependent"), report["epsilon_data_independent_at_order"])
        )
    checks = []
    for words, dependent_value, independent_value in pairs:
        dependent = as_number(dependent_value)
        independent = as_number(independent_value)
        ok = dependent is not None and independent is not None and dependent <= independent
        detail = f"{dependent} > {independent}"
        if ok and dependent is not None and independent is not None:  # each a cost: rounded up
            detail = f"{bound_significant(dependent)} <= {bound_significant(independent)}"
        checks.append(Check.made(f"{words}data-dependent <= data-independent", ok, detail))
    return checks

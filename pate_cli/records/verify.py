"""``pate verify``: recompute a release record and compare it with what it recorded.

``verify`` re-parses the record's command line through pate's own parser and checks that it
is the recorded call, checks the hashes, replays the call through ``pate_cli.api`` on the
same files (regenerated labels to a scratch folder) and compares every number of the
recorded report with the recomputed one (``pate_cli.records.compare``). What this proves:
the recorded numbers follow from these input files and this call under this pate version.
It proves nothing about who made the record. The result is a :class:`VerifyReport`, one
:class:`Check` per line of the verification table.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from pate_cli.errors import InputError, PateError, UsageError
from pate_cli.records.compare import (
    KEY_FIELDS,
    as_number,
    differences,
    lookup,
    public_view,
    without_sampled_figures,
)
from pate_cli.records.record import PUBLIC, current_versions, record_digest, record_kind
from pate_cli.reports.encoding import plain
from pate_cli.reports.reprs import short_repr
from pate_cli.seeds import from_seed_file
from pate_cli.votes import file_sha256

SAME_VERSION_RTOL = 1e-12
"""Relative tolerance of ``verify`` when the record was made with the same versions of pate,
numpy, scipy and Python. Not 0: the same software can differ in the last bit from one CPU to
another (numpy's and OpenBLAS's SIMD code paths, e.g. with or without AVX-512), by a few
1e-16 relative; 1e-12 leaves room for that and still catches a change in the 12th digit."""

OTHER_VERSION_RTOL = 1e-9
"""Relative tolerance of ``verify`` when any of those versions differs."""


@dataclass(frozen=True)
class Check:
    """One line of the verification table."""

    name: str
    ok: bool
    detail: str

    def to_json_dict(self) -> dict[str, Any]:
        return {"name": self.name, "ok": self.ok, "detail": self.detail}


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
        if lookup(recorded, field) is None and lookup(recomputed, field) is None:
            continue
        mine = [d for d in diffs if d.startswith((field + ":", field + ".", field + "["))]
        value = lookup(recorded, field)
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
        (lookup(b, "data_dependent.epsilon"), lookup(b, "data_independent.epsilon")) for b in blocks
    ]
    if "epsilon_data_independent_at_order" in report:  # smooth-sensitivity: at the release order
        pairs.append(
            (report.get("epsilon_data_dependent"), report["epsilon_data_independent_at_order"])
        )
    checks = []
    for dependent_value, independent_value in pairs:
        dependent = as_number(dependent_value)
        independent = as_number(independent_value)
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

        return markdown.verify(self.to_dict())

    def to_dict(self) -> dict[str, Any]:
        """Exactly what ``pate verify --json`` prints."""
        return plain(
            {
                "command": "verify",
                "record": self.record_path,
                "record_command": self.record["command"],
                "record_kind": record_kind(self.record),
                "ok": self.ok,
                "checks": [check.to_json_dict() for check in self.checks],
            }
        )

    def __repr__(self) -> str:
        return short_repr(
            "VerifyReport",
            record=os.path.basename(self.record_path),
            record_command=self.record.get("command"),
            ok=self.ok,
            checks=len(self.checks),
            failed=sum(not check.ok for check in self.checks),
        )

"""The recorded command line of a release record, re-parsed by this pate's own parser.

``pate verify`` shows a record's command line only when it is the recorded call: the
library's verification replays the call and reads no command line (it imports no part of
the command line layer), so this check lives here and is handed to it.

The call and the files that a command line stands for come from the command's own
``describe``, the function the command runs by (``pate_cli.cli.run``): what verify expects
of a record is built exactly as the command built the record.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from typing import Any

from pate_cli.choices import GateOn
from pate_cli.cli.commands import aggregate, analyze, smooth_sensitivity
from pate_cli.cli.run import Call, Invocation, Params
from pate_cli.errors import PateError
from pate_cli.files.seeds import json_seed
from pate_cli.records.record import PRIVATE, PUBLIC, record_kind
from pate_cli.reports.models import dumps


def _plain(value: Any) -> Any:
    """A value as the record's JSON holds it (numbers, strings, lists, dicts)."""
    return json.loads(dumps({"value": value}))["value"]


class _Mismatch(Exception):
    """The recorded command line is not the recorded call (the message says where)."""


# The commands that write a record, each with the ``describe`` it runs by: what it reads,
# calls and writes, from its parameters.
_DESCRIBE: dict[str, Callable[[Params], Invocation]] = {
    "analyze": analyze.describe,
    "smooth-sensitivity": smooth_sensitivity.describe,
    "aggregate": aggregate.describe,
}


_ANY = object()
"""An option the command resolves itself when its flag is not given (``Call.defaulted``:
smooth-sensitivity's --gate-on, whose default has changed between versions of pate): any
valid choice of it matches. The gate that the report shows is recomputed from the call's
choice."""


def _parse_argv(root: Any, argv: list[str]) -> dict[str, Any]:
    """The recorded command line through pate's own parser (``root``, the command group of
    the running ``pate``): the command's parameters."""
    import typer
    from typer._click.exceptions import ClickException
    from typer._click.exceptions import UsageError as ClickUsageError

    from pate_cli.cli.options import QUIET, with_optional_values
    from pate_cli.cli.suggestions import with_close_options

    if not argv or argv[0] not in _DESCRIBE:
        raise _Mismatch(f"it runs {argv[:1] or 'nothing'}, not a command that writes a record")
    words = argv[1:]
    if any(word in ("--help", "-h") for word in words):
        raise _Mismatch("it asks for the help, which writes no record")
    root.get_command(None, argv[0])  # made if this run has not (pate_cli.cli.app.PateGroup)
    command = root.commands[argv[0]]
    quiet = QUIET.set(QUIET.get())  # the -q of the recorded line is not verify's
    try:
        context = command.make_context(argv[0], with_optional_values(list(words)))
    except ClickException as error:
        if isinstance(error, ClickUsageError):
            error = with_close_options(error)
        raise _Mismatch(f"it does not parse: {error.format_message()}") from None
    except (typer.Exit, typer.Abort, PateError, ValueError) as error:
        raise _Mismatch(f"it does not parse: {error}") from None
    finally:
        QUIET.reset(quiet)
    params: dict[str, Any] = context.params
    return params


def _expected_call(call: Call) -> dict[str, Any]:
    """The library call that the command makes (as the command builds it for its record)."""
    try:
        mechanism = call.mechanism()
    except PateError as error:
        raise _Mismatch(f"its mechanism flags are refused: {error.message}") from None
    expected = call.to_dict(mechanism)
    options = expected["options"]
    expected["options"] = {key: _ANY if key in call.defaulted else options[key] for key in options}
    return expected


def _call_differences(expected: Any, recorded: Any, where: str) -> Iterator[str]:
    if expected is _ANY:
        if recorded not in [choice.value for choice in GateOn]:
            yield f"{where}: {recorded!r} is not a choice of the command line"
        return
    if isinstance(expected, dict) and isinstance(recorded, dict):
        for key in sorted(set(expected) | set(recorded)):
            if key not in recorded:
                given = "a value" if expected[key] is _ANY else repr(_plain(expected[key]))
                yield f"{where}.{key}: the command line gives {given}, the call has none"
            elif key not in expected:
                yield f"{where}.{key}: the call has {recorded[key]!r}, the command line none"
            else:
                yield from _call_differences(expected[key], recorded[key], f"{where}.{key}")
        return
    if _plain(expected) != recorded:
        yield f"{where}: the command line gives {_plain(expected)!r}, the record has {recorded!r}"


def mismatches(root: Any, record: dict[str, Any]) -> list[str]:
    """Where the recorded command line (``argv``, re-parsed by this pate's parser) and the
    rest of the record disagree: the call, the files, the noise and the record's kind.
    Empty when they agree."""
    argv = record["argv"]
    try:
        params = _parse_argv(root, argv)
        invocation = _DESCRIBE[argv[0]](params)
        expected_call = _expected_call(invocation.call)
    except _Mismatch as mismatch:
        return [str(mismatch)]
    found = []
    if argv[0] != record["command"]:
        found.append(f"it runs {argv[0]}, the record is of {record['command']}")
    found += _call_differences(expected_call, record["call"], "call")
    files = {"inputs": invocation.recorded_inputs(), "outputs": invocation.recorded_outputs()}
    for block, given in files.items():
        recorded = {role: entry["path"] for role, entry in record[block].items()}
        found += _call_differences(given, recorded, block)
    seed, seed_file = invocation.call.seed, invocation.call.seed_file
    source = "seed" if seed is not None else "seed-file" if seed_file is not None else "os-entropy"
    noise = record.get("noise")
    if noise is not None:
        if noise.get("source") != source:
            found.append(
                f"noise: the command line gives {source}, the record has {noise.get('source')}"
            )
        elif seed is not None and record.get("seed") != json_seed(seed):
            found.append(
                f"seed: the command line gives {seed}, the record has {record.get('seed')!r}"
            )
    if record.get("seed") is not None and seed is None:
        found.append("seed: the record has one, the command line none")
    if record.get("seed_commitment") is not None and seed_file is None:
        found.append("seed_commitment: the record has one, the command line no --seed-file")
    kind = PUBLIC if invocation.public else PRIVATE
    if record_kind(record) != kind:
        found.append(
            f"kind: the command line writes a {kind} record, this one is {record_kind(record)}"
        )
    if invocation.record is None:
        found.append("it has no --record")
    return found


def invocation_of(root: Any, argv: list[str]) -> Invocation:
    """A command line of a run that charges a budget (``pate budget show --would-charge``),
    parsed by pate's own parser into what the command would do.

    Raises:
        UsageError: it is not such a run, or does not parse.
    """
    from pate_cli.errors import UsageError

    if not argv:
        raise UsageError(
            "--would-charge: no run given: pass its command line after --, e.g. "
            "-- aggregate votes.npy --sigma 40 --delta 1e-5"
        )
    if argv[0] not in _DESCRIBE:
        raise UsageError(
            f"--would-charge: {argv[0]!r} charges no budget (expected one of "
            f"{', '.join(_DESCRIBE)})"
        )
    try:
        return _DESCRIBE[argv[0]](_parse_argv(root, argv))
    except _Mismatch as mismatch:
        raise UsageError(f"--would-charge: {argv[0]}: {mismatch}") from None

"""One run of a command, written once: its checks, its library call, its files, its output,
its record and its exit code.

A command describes its run as data, an ``Invocation``: the files it reads (a ``Selection``
of the votes and the call's other inputs) and writes (``Output``), the one library call it
makes (``Call``) and the checks of its own flags. ``run`` carries it out in the order that
every command writing a record keeps (which of two mistakes is reported first is part of
the interface), every user error found before any work:

1. ``--delta``; the ``--record`` path; no output is an input or another output; the
   ``--engine``'s extra installed;
2. the command's own ``checks``; no release file replaced without ``--force``;
3. the votes read; the mechanism built from its flags; ``--public``'s refusal of a gate on
   a private figure;
4. the ``later_checks`` (``analyze``: the order grid, the ``--plot`` and ``--ledger`` paths);
5. the library call;
6. ``finish``: nothing over budget released (``aggregate``'s labels), the files written, the
   report printed, the record written, and the budget gate's exit code.

``compare`` writes no record; it keeps its own order (every flag before the votes are read)
with ``check_files`` and ``finish``.

A command's ``describe(params)`` builds its invocation from its parameters as the parser
gives them (``ctx.params``). ``pate verify`` re-parses a record's command line with the same
parser and asks the same ``describe`` for the call and the files (``command_line``), so the
record's call and what verify expects of it are built by one function and cannot drift.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, replace
from functools import partial
from typing import TYPE_CHECKING, Any

from pate_cli.choices import GateOn, VoteFormat
from pate_cli.cli.options import cli_progress, current_argv, emit, enforce, rendered
from pate_cli.engines import EngineChoice, check_available, engine_choice, keywords

if TYPE_CHECKING:
    from rich.console import RenderableType

    from pate_cli.budget import Charge
    from pate_cli.budget.book import Pending
    from pate_cli.files.seeds import Noise
    from pate_cli.mechanisms import Mechanism
    from pate_cli.votes import Votes

Params = Mapping[str, Any]
"""A command's parameters by name, as the command line's parser gives them."""
View = Callable[[Any], "RenderableType"]
"""The Rich rendering of a report (its JSON is the report's own ``to_json_dict``)."""


@dataclass(frozen=True)
class File:
    """An input file named on the command line."""

    flag: str
    """How messages name it: ``VOTES``, ``--indices``, ``--baseline``."""
    path: str | None
    """None: not given."""
    role: str | None = None
    """Its role among a record's inputs and, for the call's files, the library function's
    keyword (None: neither, as the seed file, whose commitment is recorded instead)."""


@dataclass(frozen=True)
class Output:
    """A file the run writes from its result, only once the computation succeeded."""

    flag: str
    path: str | None
    key: str
    """Its name in the report's ``files``, or in the record's outputs for a release file."""
    check: Callable[[str], object]
    """Refuses a path the file could not be written to (suffix, folder), before any work."""
    write: Callable[[Any, str], object]
    """``write(result, path)``, atomically."""
    release: bool = False
    """A release artefact (aggregate's labels): in the record with its sha256, never
    replaced without ``--force``, and not written at all when the run is over budget."""
    protected: bool = False
    """Not a release but data of the votes (analyze's per-query ledger and its plot): never
    replaced without ``--force`` either."""

    def check_path(self) -> None:
        """``check`` the path, when one was given."""
        if self.path is not None:
            self.check(self.path)


@dataclass(frozen=True)
class Selection:
    """VOTES and the flags that select from it: ``load_votes``' arguments."""

    path: str
    fmt: VoteFormat
    num_classes: int | None
    teachers: int | None
    queries: int | None
    indices: str | None
    member: str | None = None
    candidates: str | None = None

    @classmethod
    def of(cls, p: Params) -> Selection:
        """The selection of a command's parameters (every command names them alike)."""
        first = (p["votes_path"], p["fmt"], p["num_classes"], p["teachers"], p["queries"])
        return cls(*first, p["indices"], p.get("member"), p.get("candidates"))

    @property
    def files(self) -> tuple[File, File, File]:
        return (
            File("VOTES", self.path, "votes"),
            File("--indices", self.indices, "indices"),
            File("--candidates", self.candidates, "candidates"),
        )

    def load(self) -> Votes:
        """The votes, read as a record's replay reads them (``pate_cli.api.load_votes``)."""
        from pate_cli import api

        return api.load_votes(
            self.path, indices=self.indices, candidates=self.candidates, **self.to_call()
        )

    def to_call(self) -> dict[str, Any]:
        """The flags as a record's call holds them (the files are among its inputs)."""
        shape = {"num_classes": self.num_classes, "teachers": self.teachers}
        member = {} if self.member is None else {"member": self.member}  # older records: none
        return {"fmt": self.fmt.value, **shape, "queries": self.queries, **member}


@dataclass(frozen=True)
class Call:
    """The one library call of a run: what the command makes, and what its record holds
    (``to_dict``) for ``pate verify`` to replay through ``pate_cli.api``."""

    function: Callable[..., Any]
    """The ``pate_cli.api`` function; its name is the recorded call's ``function``."""
    selection: Selection
    mechanism: Callable[[], Any]
    """Builds the mechanism (compare: the settings) from its flags when the run gets there;
    a refused combination raises UsageError."""
    options: dict[str, Any]
    """The function's other keyword arguments, as the record's call holds them."""
    files: tuple[File, ...] = ()
    """Input files passed by role (``baseline=``, ``student_probs=``...)."""
    seed: int | None = None
    seed_file: str | None = None
    """Where the noise comes from: passed to the function; the record keeps the noise's
    source apart from the call (and never a private seed)."""
    defaulted: frozenset[str] = frozenset()
    """Options the command chose because their flag was not given, whose default has
    changed between versions: verify accepts any value of them."""

    @classmethod
    def of(
        cls,
        function: Callable[..., Any],
        p: Params,
        mechanism: Callable[[], Any],
        options: dict[str, Any],
        *files: File,
        **more: Any,
    ) -> Call:
        """The call of a command's parameters ``p``: the selection and the noise's flags
        are named alike by every command."""
        selection = Selection.of(p)
        return cls(
            function,
            selection,
            mechanism,
            options,
            files,
            p.get("seed"),
            p.get("seed_file"),
            **more,
        )

    def __call__(self, votes: Votes, mechanism: Any, **extra: Any) -> Any:
        """Make the call on the votes read and the mechanism built (``extra``: progress)."""
        noise = {"seed": self.seed, "seed_file": self.seed_file}
        given = {key: value for key, value in noise.items() if value is not None}
        roles = {file.role: file.path for file in self.files if file.role is not None}
        return self.function(votes, mechanism, **roles, **given, **self.options, **extra)

    def to_dict(self, mechanism: Mechanism) -> dict[str, Any]:
        """The call as a record holds it."""
        return {
            "function": self.function.__name__,
            "votes": self.selection.to_call(),
            "mechanism": mechanism.to_json_dict(),
            "options": self.options,
        }


def inferred_mechanism(p: Params, baseline: str | None) -> Callable[[], Mechanism]:
    """The mechanism of a command's flags (every registered mechanism's parameters), with
    ``baseline`` the Interactive-GNMax baseline file given (or None)."""
    from pate_cli.mechanisms import infer_mechanism
    from pate_cli.mechanisms.registry import declarations

    return partial(
        infer_mechanism,
        p["mechanism"],
        {name: p.get(name) for name in declarations()},
        has_baseline=baseline is not None,
        threshold_bound=p["threshold_bound"],
    )


def with_files(report: Any, written: dict[str, str]) -> Any:
    """The report naming the files written from it (``files``: ledger, plot, csv)."""
    return replace(report, files=tuple(written.items())) if written else report


@dataclass(frozen=True)
class Invocation:
    """One run of a command, as data (the module docstring says how it is carried out)."""

    command: str
    """The command's name, as the record names it."""
    call: Call
    outputs: tuple[Output, ...] = ()
    """In the order they are written (and listed in the report)."""
    record: str | None = None
    """``--record``: where the release record goes."""
    opening: str | None = None
    """``--opening``: where a public record's opening goes (default: beside the record)."""
    budget: str | None = None
    """``--budget``: the budget file the run charges."""
    force: bool = False
    spends_budget: bool = True
    """Whether a second run spends the privacy budget again (the refusal to replace a
    release file without --force says so)."""
    public: bool = False
    as_json: bool = False
    progress: bool = False
    """Whether the call shows a progress bar for its long passes."""
    checks: tuple[Callable[[], object], ...] = ()
    """The command's own checks, after the files' (aggregate: its stop conditions, the
    outputs' paths, the student's confidence)."""
    later_checks: tuple[Callable[[], object], ...] = ()
    """Checks after the mechanism is built (analyze: the order grid, --plot, --ledger)."""
    engine: EngineChoice = EngineChoice()  # --engine, --workers, --scheduler
    report: Callable[[Any, dict[str, str]], Any] = with_files
    """``report(result, written)``: the report of the call's result, naming the outputs
    written (by key; none when the run is over budget and writes nothing)."""

    @classmethod
    def of(cls, command: str, call: Call, p: Params, **more: Any) -> Invocation:
        """The invocation of a command's parameters ``p``: ``--record``, ``--force``,
        ``--public`` and ``--json`` are named alike by every command that has them."""
        return cls(
            command,
            call,
            record=p.get("record_path"),
            opening=p.get("opening_path"),
            budget=p.get("budget_path"),
            force=p.get("force", False),
            public=p.get("public", False),
            as_json=p["as_json"],
            engine=engine_choice(p.get("engine"), p.get("workers"), p.get("scheduler")),
            **more,
        )

    def inputs(self) -> tuple[File, ...]:
        """Every input file, the seed file included."""
        seed_file = File("--seed-file", self.call.seed_file)
        return (*self.call.selection.files, *self.call.files, seed_file)

    def recorded_inputs(self) -> dict[str, str | None]:
        """The input files given, by their role in a record."""
        return {f.role: f.path for f in self.inputs() if f.role is not None and f.path is not None}

    def opening_path(self) -> str | None:
        """Where the public record's opening goes (None: no public record)."""
        from pate_cli.records.record import opening_path

        if self.record is None or not self.public:
            return None
        return self.opening if self.opening is not None else opening_path(self.record)

    def recorded_outputs(self) -> dict[str, str | None]:
        """The release files given, by their role in a record."""
        return {o.key: o.path for o in self.outputs if o.release and o.path is not None}


def run(invocation: Invocation, view: View) -> None:
    """Carry out a command's run, its steps in order (the module docstring). A charge refused
    over the budget's limit prints, with ``--json``, the run's object (``_refusal_shown``)."""
    from pate_cli.common import checks
    from pate_cli.files.outputs import check_not_replaced, identities, spent_again
    from pate_cli.reports.publishable import check_public_gate

    call = invocation.call
    checks.delta(call.options["delta"])
    check_files(invocation)
    check_available(invocation.engine)
    for check in invocation.checks:
        check()
    releases = {o.flag: o.path for o in invocation.outputs if o.release}
    records = {"--record": invocation.record, "--opening": invocation.opening_path()}
    protected = {o.flag: o.path for o in invocation.outputs if o.protected}
    if invocation.budget is not None:
        from pate_cli.budget.book import settle_cut_short

        # Before the folders are recovered: a run cut short after its charge has its
        # files rolled back by the settling, which then notes it no-release.
        settle_cut_short(invocation.budget)
    _recover(releases | records | protected)
    replaced = check_not_replaced(
        releases | records, force=invocation.force, spends_budget=invocation.spends_budget
    )
    check_not_replaced(protected, force=invocation.force, spends_budget=False)
    # The seed file is not among them: the run may create it, and it is bound by the
    # commitment of the content read.
    read = identities({f.flag: f.path for f in invocation.inputs() if f.role is not None})
    votes = call.selection.load()
    mechanism = call.mechanism()
    if invocation.public:
        gate_on, limit = GateOn(call.options["gate_on"]), call.options["max_epsilon"]
        check_public_gate(gate_on, mechanism.to_json_dict(), limit)
    for check in invocation.later_checks:
        check()
    with _refusal_shown(invocation, votes, mechanism):
        charge = _charge(invocation, votes, mechanism)
        extra = keywords(invocation.engine)
        if invocation.progress:
            extra["progress"] = cli_progress(votes, invocation.as_json)
        spent = (spent_again(replaced),) if replaced and invocation.spends_budget else ()
        finish(invocation, mechanism, call(votes, mechanism, **extra), view, spent, read, charge)


@contextmanager
def _refusal_shown(invocation: Invocation, votes: Votes, mechanism: Mechanism) -> Iterator[None]:
    """A charge refused over the budget's limit, before the call or at the commit, prints
    with ``--json`` the object the run prints, what the refusal left uncomputed null
    (``pate_cli.reports.refused``); the refusal's own line and exit code follow."""
    from pate_cli.budget import BudgetExceeded

    try:
        yield
    except BudgetExceeded as refused:
        if invocation.as_json:
            from pate_cli.reports.refused import refused_json

            shown = (invocation.command, votes, mechanism.to_json_dict(), invocation.call.options)
            emit(refused_json(*shown, refused.refusal, public=invocation.public), None, (), True)
        raise


def _charge(invocation: Invocation, votes: Votes, mechanism: Mechanism) -> Charge | None:
    """What the run charges to its ``--budget``, refused (over the limit, or no account that
    depends on neither votes nor noise) before any noise is drawn."""
    from pate_cli.budget.book import checked_charge

    if invocation.budget is None:
        return None
    call = invocation.call
    return checked_charge(
        invocation.budget,
        call.function.__name__,
        invocation.command,
        mechanism,
        votes.num_queries,
        call.options,
        seed=call.seed,
        seed_file=call.seed_file,
    )


def _recover(paths: dict[str, str | None]) -> None:
    """Roll back what a killed run left in the output folders (``transaction.recover``)
    before looking at what exists there."""
    from pate_cli.files.transaction import recover

    folders = {os.path.dirname(os.path.abspath(p)) for p in paths.values() if p is not None}
    for folder in sorted(folders):
        if os.path.isdir(folder):
            recover(folder)


def check_files(invocation: Invocation) -> None:
    """Before any work: the record's path, and that no output of the run is one of its
    inputs or another of its outputs."""
    from pate_cli.errors import UsageError
    from pate_cli.files.outputs import check_distinct_files
    from pate_cli.files.transaction import probe_writable
    from pate_cli.records.record import check_record_path

    if invocation.opening is not None and (invocation.record is None or not invocation.public):
        raise UsageError(
            f"--opening {invocation.opening}: only a public record (--public --record) has an "
            "opening"
        )
    opening = invocation.opening_path()
    if invocation.record is not None:
        check_record_path(invocation.record)
    if opening is not None:
        check_record_path(opening, "--opening")
    outputs = {o.flag: o.path for o in invocation.outputs} | {
        "--record": invocation.record,
        "--opening": opening,
    }
    check_distinct_files({file.flag: file.path for file in invocation.inputs()}, outputs)
    # Every folder written to can take a new file, before the votes are read or any noise
    # drawn (a read-only folder is found now, not after the work).
    folders = {
        os.path.dirname(os.path.abspath(path)): flag
        for flag, path in outputs.items()
        if path is not None
    }
    for folder, flag in folders.items():
        if os.path.isdir(folder):  # a missing folder is the path checks' to name
            probe_writable(folder, flag)


def finish(
    invocation: Invocation,
    mechanism: Any,
    result: Any,
    view: View,
    spent: tuple[str, ...] = (),
    read: dict[str, Any] | None = None,
    charge: Charge | None = None,
) -> None:
    """After the call: every file of the run (outputs, the record and its opening) staged
    and committed together (``pate_cli.files.transaction``: all or nothing, and a release file
    that appeared meanwhile is never replaced without --force), then the report printed
    (with ``spent``, the warning of release files replaced with --force), and the exit
    code of the budget gate. ``read``: the inputs' identities when the votes were read;
    a file that changed since is an error, never a record of another file's hash.
    ``charge``: what the run charges to its ``--budget``, checked again and appended under
    the budget's lock, with the files: over the limit, nothing is written or charged."""
    from pate_cli.cli.standing import committing
    from pate_cli.files.outputs import check_unchanged
    from pate_cli.files.transaction import Transaction
    from pate_cli.records.record import opening_text, record_text

    gate = result.gate
    if gate is not None and not gate.passed and any(o.release for o in invocation.outputs):
        # Nothing over budget is released: no labels, no mask, no record; the report says so.
        show(invocation, invocation.report(result, {}), view)
        enforce(gate)
    given = [output for output in invocation.outputs if output.path is not None]
    report = invocation.report(result, {o.key: o.path for o in given if o.path is not None})
    if spent:
        report = replace(report, warnings=report.warnings + spent)
    with Transaction() as files, _charging(invocation, charge, _noise(report)) as pending:
        if pending is not None:
            report = replace(report, budget=pending.block)
        payload = shown(invocation, report)
        digests = {}
        for output in given:
            assert output.path is not None
            digests[output.key] = files.stage_path(
                output.path,
                partial(output.write, result),
                replace=invocation.force or not (output.release or output.protected),
            )
        record, salts = _record(invocation, mechanism, report, payload, digests)
        if pending is not None:
            # The line names the record's digest, which leaves out the head after it.
            pending.prepare(None if record is None else record["digest"])
            report = replace(report, budget=pending.block)
            payload["budget"] = dict(report.budget or {})
        # Rendered before anything is made visible: a report that cannot be rendered fails
        # the run with nothing written.
        text = rendered(payload, _view(invocation, report, view, charge), invocation.as_json)
        if record is not None:
            assert invocation.record is not None
            opening = invocation.opening_path()
            if salts is not None and opening is not None:
                secret = opening_text(salts)
                files.stage(
                    opening, lambda f: f.write(secret), replace=invocation.force, mode=0o600
                )
            record["report"] = _recorded(payload)
            record_bytes = record_text(record)
            files.stage(
                invocation.record, lambda f: f.write(record_bytes), replace=invocation.force
            )
        with committing(files, pending, invocation.spends_budget, invocation.budget):
            files.commit(
                None if read is None else partial(check_unchanged, read),
                None if pending is None else partial(_append, pending),
            )
    show(invocation, report, view, payload, text)
    enforce(report.gate)


def _record(
    invocation: Invocation,
    mechanism: Any,
    report: Any,
    payload: dict[str, Any],
    digests: dict[str, str],
) -> tuple[dict[str, Any] | None, dict[str, Any] | None]:
    """The run's record and the opening of its commitments (None, None without --record)."""
    from pate_cli.records.record import build_record

    if invocation.record is None:
        return None, None
    return build_record(
        invocation.command,
        current_argv(),
        _recorded(payload),
        inputs=invocation.recorded_inputs(),
        outputs=invocation.recorded_outputs(),
        noise=_noise(report),
        call=invocation.call.to_dict(mechanism),
        public=invocation.public,
        opening=invocation.opening_path(),
        digests=digests,
    )


def _recorded(payload: dict[str, Any]) -> dict[str, Any]:
    """A record's report: not where it ran (the same figures anywhere; verify replays here)."""
    return {key: value for key, value in payload.items() if key != "engine"}


def _append(pending: Pending, journals: list[str]) -> None:
    """The run's charge appended, at the commit before any file is visible (the journals
    written), and the budget checked to be the file the run read and appended to."""
    pending.append(journals)
    pending.check_in_place()


@contextmanager
def _charging(
    invocation: Invocation, charge: Charge | None, noise: Noise | None
) -> Iterator[Pending | None]:
    """The budget's lock around the commit of the run's files, with the run's charge checked
    again under it (the seed file's commitment is the one the run read)."""
    if charge is None or invocation.budget is None:
        yield None
        return
    from pate_cli.budget import Budget

    if noise is not None and noise.commitment is not None and charge.purposes:
        charge = replace(charge, seed_commitment=noise.commitment)
    with Budget.open(invocation.budget).charging(charge) as pending:
        pending.record = invocation.record  # its block says where the budget is from it
        yield pending


def shown(invocation: Invocation, report: Any) -> dict[str, Any]:
    """The JSON of what the run shows: with ``--public`` only what may be published."""
    return report.to_dict(public=True) if invocation.public else report.to_dict()


def _view(invocation: Invocation, report: Any, view: View, charge: Charge | None = None) -> Any:
    """The Rich view of the report (with ``--public`` the publishable figures only), and the
    line of its budget charge (``charge``), with why it was charged when its release, which
    the charge covers, released nothing."""
    from rich.console import Group

    from pate_cli.cli import render
    from pate_cli.cli.render.budget import charge_lines

    shown = render.public(report) if invocation.public else view(report)
    budget = getattr(report, "budget", None)
    if budget is None:
        return shown
    covers = charge is not None and charge.release is not None
    return Group(shown, *charge_lines(budget, getattr(report, "release", None), covers))


def show(
    invocation: Invocation,
    report: Any,
    view: View,
    payload: dict[str, Any] | None = None,
    text: str | None = None,
) -> None:
    """The report on stdout (JSON or Rich) and its warnings on stderr; with ``--public``
    only what may be published (``payload`` and ``text``: its JSON and its rendering, when
    already made)."""
    payload = shown(invocation, report) if payload is None else payload
    warnings = payload.get("warnings", ()) if invocation.public else report.warnings
    if text is None:
        text = rendered(payload, _view(invocation, report, view), invocation.as_json)
    emit(payload, None, tuple(warnings), invocation.as_json, text)


def _noise(report: Any) -> Noise | None:
    """Where the report's random draws came from (None: it drew none)."""
    from pate_cli.release.gnss import GnssRelease
    from pate_cli.reports.models import AggregateReport

    if isinstance(report, AggregateReport):
        return report.noise
    release = getattr(report, "release", None)
    return release.noise if isinstance(release, GnssRelease) else None

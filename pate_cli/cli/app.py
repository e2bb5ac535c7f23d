"""The ``pate`` command line: the Typer app, the one error boundary, and ``main``.

Commands live one per module in ``pate_cli.cli.commands`` and share the option
aliases of ``pate_cli.cli.options``. Each command declares its options, describes
its one library call and renders the report; ``pate_cli.cli.run`` checks the inputs,
makes the call, writes the files and the record, emits the report as JSON or Rich
tables and applies the budget gate. Only the command layer decides exit codes; the
boundary below turns typed errors into one line and their code.
"""

from __future__ import annotations

import importlib
import os
import re
import signal
import sys
import traceback
import warnings
from collections.abc import Sequence
from typing import Annotated, Any, NoReturn

import typer

# typer >= 0.29 (pinned in pyproject.toml) carries its own copy of click.
from typer._click.exceptions import UsageError as ClickUsageError
from typer.core import TyperGroup

from pate_cli.cli import interrupts
from pate_cli.cli.deferred import defer_coercion
from pate_cli.cli.examples import examples
from pate_cli.cli.interrupts import hold_signals, signals_admitted
from pate_cli.cli.options import (
    ARGV,
    MIN_COLUMNS,
    StreamError,
    error_line,
    mechanism_choices,
    with_optional_values,
)
from pate_cli.cli.suggestions import CloseSpellingGroup, with_close_options
from pate_cli.common.spelling import command_line
from pate_cli.errors import ExitCode, PateError, PluginError
from pate_cli.mechanisms.plugins import culprit
from pate_cli.mechanisms.registry import (
    PluginWarning,
    by_name,
    declarations,
    failures,
    installed,
    loading,
)

# One metavar style in every help: an upper-case word for a value, [a|b] for a choice.
_LISTS = {"orders_text"}  # comma lists where str, with compare's mechanism parameters
_NAMED = {
    "inputs": "ROLE=PATH",
    "seed": "N",
    "queries": "N",
    "teachers": "M",
    "records": "DIR",
    "heads": "DIGEST",
    "pld": "[exact]",
}


def _metavar(param: Any) -> str | None:
    """The help's name for the value of ``param`` (None: a flag, nothing to show)."""
    described = param.type_descriptor
    kind = getattr(described, "annotation", None)
    if param.name in _NAMED:
        return _NAMED[param.name]
    if param.name == "mechanism":  # the registry's names, a choice Typer cannot list itself
        return mechanism_choices()
    if param.name == "member":
        return "NAME"
    if described.is_choice:
        return "[" + "|".join(str(getattr(c, "value", c)) for c in described.choices) + "]"
    if kind is bool:
        return None
    if kind is float:
        return "FLOAT"
    if kind is int:
        return "INT"
    return "LIST" if param.name in _LISTS or param.name in declarations() else "FILE"


def _uniform_help(group: TyperGroup) -> None:
    """Give every option of every command one metavar style, and arguments their bare name."""
    for command in group.commands.values():
        for param in getattr(command, "params", ()):
            if param.param_type_name == "argument":
                name = param.metavar or param.name.upper()
                param.display_type_rich = lambda ctx: None
                param._usage_display_name = lambda name=name: name
            elif not getattr(param, "is_flag", False):
                param.metavar = _metavar(param)


class PateGroup(CloseSpellingGroup):
    """The single error boundary: typed errors -> one line and their exit code; an unknown
    option or command suggests only close spellings (``pate_cli.cli.suggestions``)."""

    def format_epilog(self, ctx: Any, formatter: Any) -> None:
        # The mechanisms installed, built in or from plugins: what --mechanism takes.
        with formatter.section("Mechanisms"):
            formatter.write_dl([(name, origin) for name, origin in installed()])
        super().format_epilog(ctx, formatter)

    def main(self, *args: Any, **kwargs: Any) -> Any:
        # Messages of the library name flags for the whole invocation (pate_cli.common.spelling).
        with command_line():
            return super().main(*args, **kwargs)

    def get_command(self, ctx: Any, cmd_name: str) -> Any:
        # A command this run did not make (``pate verify`` re-parses the recorded command
        # line of another): made now, as the app with every command has it.
        if cmd_name not in self.commands and cmd_name in COMMANDS:
            made = typer.main.get_command(make_app([cmd_name]))
            self.add_command(made.commands[cmd_name], cmd_name)  # type: ignore[attr-defined]
        return super().get_command(ctx, cmd_name)

    def make_context(self, info_name: str | None, args: list[str], *more: Any, **extra: Any) -> Any:
        # Keep the command line as given: --record stores it for people to read.
        ARGV.set(tuple(args))
        quiet = {"-q", "--quiet"} & set(args[: args.index("--")] if "--" in args else args)
        for failure in () if quiet else failures():  # a plugin that did not load: one line
            error_line(f"pate: warning: {failure}")
        _uniform_help(self)
        defer_coercion(self)  # pydantic for the options given only (pate_cli.cli.deferred)
        try:
            return super().make_context(info_name, with_optional_values(args), *more, **extra)
        except ClickUsageError as error:
            # A parse error before any command (an unknown option of pate itself).
            error_line(f"pate: error: {_parse_error(error)} (see 'pate --help')")
            raise typer.Exit(int(ExitCode.BAD_INPUT)) from None

    def invoke(self, ctx: Any) -> Any:
        try:
            outcome = self._invoke(ctx)
        except typer.Exit as done:
            _what_stands(done.exit_code)
            raise
        _what_stands(int(ExitCode.OK))
        return outcome

    def _invoke(self, ctx: Any) -> Any:
        repeated = _repeated_option(self, ARGV.get())
        if repeated is not None:
            error_line(f"pate: error: {repeated} given twice: give it once (which one is meant?)")
            raise typer.Exit(int(ExitCode.BAD_INPUT))
        try:
            with signals_admitted():  # held until here, and again after (pate_cli.cli.interrupts)
                return super().invoke(ctx)
        except (typer.Exit, typer.Abort):
            raise
        except PateError as error:
            if os.environ.get("PATE_DEBUG"):
                raise
            error_line(f"pate: error: {error.message}")
            raise typer.Exit(int(error.exit_code)) from None
        except PluginError as error:  # a mechanism from outside pate failed: not pate's bug
            _plugin_failed(error)
        except SystemExit as error:  # never pate's own in a command (typer.Exit is not one)
            _plugin_failed(culprit(error))
        except ClickUsageError as error:
            # Click's own parse errors, kept on one line; still exit 2.
            command = (
                f"pate {ctx.invoked_subcommand} --help" if ctx.invoked_subcommand else "pate --help"
            )
            error_line(f"pate: error: {_parse_error(error)} (see '{command}')")
            raise typer.Exit(int(ExitCode.BAD_INPUT)) from None
        except KeyboardInterrupt as interrupt:
            # SIGINT, SIGTERM or SIGHUP (pate_cli.cli.interrupts raises them as an interrupt):
            # whatever was staged has been removed on the way here (pate_cli.files.transaction).
            # One a plugin raised itself (no signal) is its failure.
            signum = getattr(interrupt, "signum", None)
            if signum is None and culprit(interrupt) is not None:
                _plugin_failed(culprit(interrupt))
            signum = signal.SIGINT if signum is None else signum
            error_line(f"pate: interrupted ({signal.Signals(signum).name})")
            raise typer.Exit(128 + int(signum)) from None
        except MemoryError as error:
            _out_of_memory(str(error) or "an allocation failed")
        except StreamError as error:
            _quiet_streams()
            error_line(f"pate: error: {error}")
            raise typer.Exit(int(ExitCode.STREAM)) from None
        except Exception as error:
            if os.environ.get("PATE_DEBUG"):
                raise
            if _lacks_memory(error):
                _out_of_memory(str(error))
            _plugin_failed(culprit(error))
            sys.stderr.write(traceback.format_exc())
            error_line(
                "pate: internal error: this is a bug in pate, please report it "
                "with the traceback above and the command you ran"
            )
            raise typer.Exit(int(ExitCode.INTERNAL)) from None


def _plugin_failed(error: PluginError | None) -> None:
    """A mechanism from outside pate failed (``error``): its one line, exit 6. None: the
    failure was no plugin's, and the caller goes on (a ``SystemExit`` is raised again)."""
    if error is None:
        if isinstance(sys.exc_info()[1], SystemExit):
            raise  # the SystemExit being handled: no plugin's
        return
    if os.environ.get("PATE_DEBUG"):
        raise  # the exception being handled, as it was raised
    error_line(f"pate: error: {error.message}")
    raise typer.Exit(int(ExitCode.PLUGIN_FAILED)) from None


def _what_stands(code: int) -> None:
    """A signal after the commit point (``pate_cli.cli.standing``): the run went on to its
    end, and one line says that its release stands; exit 5, or the code of a run that failed
    otherwise after its commit (a gate, a stream)."""
    late = interrupts.late()
    if late is None:
        return
    signum, standing = late
    error_line(f"pate: interrupted ({signal.Signals(signum).name}) {standing}")
    raise typer.Exit(code or int(ExitCode.INTERRUPTED_COMMITTED))


# Options naming a file the run charges, writes or draws its noise from: given twice, the
# parser would keep the last silently (``--budget a --budget b`` would charge only b).
_ONCE = {
    "--budget",
    "--record",
    "--opening",
    "--seed-file",
    "--seed",
    "--output",
    "--answered-output",
    "--ledger",
    "--plot",
    "--csv",
}


def _repeated_option(group: Any, args: tuple[str, ...]) -> str | None:
    """An option of ``_ONCE`` given more than once (before any ``--``): refused rather than
    read one way of two."""
    words, command = list(args), group
    while hasattr(command, "commands"):  # a group: the name of its subcommand comes first
        at = next((i for i, word in enumerate(words) if word in command.commands), None)
        if at is None:
            return None
        command, words = command.commands[words[at]], words[at + 1 :]
    if "--" in words:
        words = words[: words.index("--")]
    for param in getattr(command, "params", ()):
        if param.param_type_name != "option" or param.multiple or not _ONCE & set(param.opts):
            continue
        seen = sum(1 for w in words for o in param.opts if w == o or w.startswith(o + "="))
        if seen > 1:
            return str(param.opts[0])
    return None


# Typer's wording of a bad value (pydantic's), and ours.
_WORDING = (
    ("a valid number, unable to parse string as a number", "a number"),
    ("a valid integer, unable to parse string as an integer", "an integer"),
    ("a valid integer, got a number with a fractional part", "an integer"),
    ("Input should be ", "expected "),
    ("Value error, ", ""),
)
_INVALID = re.compile(r"Invalid value for '([^']+)'(?: / '[^']+')*: ")


def _parse_error(error: ClickUsageError) -> str:
    """A parse error's one line: an unknown option suggests only close spellings."""
    return _our_words(with_close_options(error).format_message())


def _our_words(message: str) -> str:
    """A parse error's message in the words of the rest of pate, on one line."""
    message = _INVALID.sub(r"\1: ", " ".join(message.split()))
    for theirs, ours in _WORDING:
        message = message.replace(theirs, ours)
    return message.rstrip(".")


def _version(value: bool) -> None:
    if value:  # as the entry point answers a bare --version (a stdout that fails: exit 74)
        from pate_cli.cli.version import version

        version()
        raise typer.Exit()


def _completion(callback: Any) -> Any:
    """Typer's completion ``callback`` for an option that names its shell: the shell named,
    or the current one where none is (the value ``""``, with_optional_values)."""

    def run(ctx: Any, param: Any, value: str | None) -> None:
        if value is not None:
            callback(ctx, param, value or True)  # True: typer detects the shell

    return run


# Typer's own completion options (add_completion) take no value: they look for a shell among
# pate's parent processes, so `pate --show-completion zsh` showed the script of the shell
# found (bash from bash) and, where none was found, failed with "Shell  not supported.".
# These take the shell's name, and look for it only where none is given.
def _root(
    version: Annotated[
        bool | None,
        typer.Option(
            "--version", "-V", callback=_version, is_eager=True, help="Show the version and exit."
        ),
    ] = None,
    install_completion: Annotated[
        str | None,
        typer.Option(
            "--install-completion",
            metavar="[SHELL]",
            callback=_completion(typer.completion.install_callback),
            expose_value=False,
            help="Install completion for SHELL (bash, zsh, fish, powershell, pwsh), or for "
            "the current shell.",
        ),
    ] = None,
    show_completion: Annotated[
        str | None,
        typer.Option(
            "--show-completion",
            metavar="[SHELL]",
            callback=_completion(typer.completion.show_callback),
            expose_value=False,
            help="Show the completion script for SHELL, or for the current shell.",
        ),
    ] = None,
) -> None:
    """Privacy analysis for PATE (Private Aggregation of Teacher Ensembles)."""


# The commands in the order ``pate --help`` lists them: name -> (the module of
# ``pate_cli.cli.commands`` that defines it, its function; None: the module's group ``app``).
# A module is imported when its command is to run or be shown, never for another's.
COMMANDS: dict[str, tuple[str, str | None]] = {
    "analyze": ("analyze", "analyze"),
    "smooth-sensitivity": ("smooth_sensitivity", "smooth_sensitivity"),
    "aggregate": ("aggregate", "aggregate"),
    "compare": ("compare", "compare"),
    "inspect": ("inspect", "inspect"),
    "verify": ("verify", "verify"),
    "plan": ("plan", "plan"),
    "audit": ("audit", "audit"),
    "budget": ("budget", None),
}


def make_app(names: Sequence[str] = tuple(COMMANDS)) -> typer.Typer:
    """The ``pate`` app with the commands ``names`` (of :data:`COMMANDS`, every one by
    default: ``app`` is that one)."""
    made = typer.Typer(
        cls=PateGroup,
        name="pate",
        help="Privacy analysis for PATE (Private Aggregation of Teacher Ensembles).\n\n"
        "Reads saved teacher votes (.npy/.npz) and reports Renyi-DP and (epsilon, delta) "
        "costs, smooth-sensitivity releases, noisy labels and comparisons. "
        "Exit codes: 0 ok, 1 budget exceeded (--max-epsilon), a record that differs or a "
        "claimed epsilon below an audit's lower bound, 2 bad "
        "input or usage, 3 a record verified only in part, 4 a charge refused over its "
        "budget's limit (--budget), 5 interrupted after the release was committed (it and its "
        "charge stand), 6 a mechanism plugin failed (nothing written), 70 a bug, 74 stdout "
        "cannot be written, 130/143/129 interrupted (nothing written).",
        no_args_is_help=True,
        add_completion=False,  # the shell's name taken instead: _root
        context_settings={"help_option_names": ["-h", "--help"]},
        pretty_exceptions_show_locals=False,
        rich_markup_mode=None,
    )
    typer.completion.completion_init()  # what add_completion does besides its options
    made.callback()(_root)
    for name in names:
        module_name, function = COMMANDS[name]
        module = importlib.import_module(f"pate_cli.cli.commands.{module_name}")
        if function is None:
            made.add_typer(module.app, name=name)
        else:
            made.command(name, **examples(*module.EXAMPLES))(getattr(module, function))
    return made


def commands_for(args: Sequence[str]) -> tuple[str, ...]:
    """The commands a command line can run: the one it names (its first word that is not an
    option: pate's own options take no value, or a shell's name), or all of them where it
    names none (``pate --help``, a misspelled command, which ``pate`` suggests a spelling
    for) or where the shell completes it (``_PATE_COMPLETE``)."""
    named = next((word for word in args if not word.startswith("-")), None)
    if named in COMMANDS and "_PATE_COMPLETE" not in os.environ:
        return (named,)
    return tuple(COMMANDS)


def __getattr__(name: str) -> Any:
    """``app``: the app with every command, made on first use (``main`` makes its own)."""
    if name == "app":
        globals()["app"] = made = make_app()
        return made
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


# How the system says that memory ran out where Python raises no MemoryError: a library
# that cannot be mapped (a lazy import), a thread that cannot be started.
_NO_MEMORY = ("failed to map segment", "cannot allocate memory", "can't start new thread")


def _lacks_memory(error: BaseException) -> bool:
    return isinstance(error, (ImportError, OSError, RuntimeError)) and any(
        words in str(error).lower() for words in _NO_MEMORY
    )


def _out_of_memory(detail: str) -> NoReturn:
    error_line(
        f"pate: error: out of memory ({detail}); lower the work with --queries N (a prefix "
        "of the queries) or run with more memory"
    )
    raise typer.Exit(int(ExitCode.BAD_INPUT)) from None


def _quiet_streams() -> None:
    """Replace a stream that cannot be written (a full disk, closed) by the null device, so
    that neither the error line nor the interpreter's last flush fails on it again."""
    for name in ("stdout", "stderr"):
        stream = getattr(sys, name)
        try:
            if stream is None:
                raise OSError("closed")
            stream.flush()
        except (OSError, ValueError):
            setattr(sys, name, open(os.devnull, "w"))  # noqa: SIM115 (kept open until exit)


def sane_environment() -> None:
    """What the environment must not break: a missing or closed standard stream, an encoding
    that cannot print a file's name (it is escaped instead), and a ``COLUMNS`` of 0 or
    nonsense (the terminal's width, or 80, instead of an empty report)."""
    for name in ("stdout", "stderr"):
        stream = getattr(sys, name)
        if stream is None:
            setattr(sys, name, open(os.devnull, "w"))  # noqa: SIM115 (kept open until exit)
        elif hasattr(stream, "reconfigure"):
            stream.reconfigure(errors="backslashreplace")
    columns = os.environ.get("COLUMNS")
    if columns is not None and not (columns.isdigit() and int(columns) >= MIN_COLUMNS):
        del os.environ["COLUMNS"]


def main() -> None:
    """The run, after ``pate_cli.cli.entry.main`` (the console script's entry point) has
    held the signals; again here for a caller that comes here directly."""
    hold_signals()
    sane_environment()
    warnings.simplefilter("ignore", PluginWarning)  # said as one line (PateGroup)
    try:
        _load_plugins()
        make_app(commands_for(sys.argv[1:]))(prog_name="pate")
    finally:
        _quiet_streams()


def _load_plugins() -> None:
    """The registry filled, its plugins loaded, with the signals let in: a plugin slow or hung
    in its import stops on SIGINT, SIGTERM or SIGHUP, one line and 128 + the signal, before
    anything is read or written (a signal held since the start is raised here too)."""
    try:
        with signals_admitted():
            by_name()
    except KeyboardInterrupt as interrupt:
        signum = getattr(interrupt, "signum", signal.SIGINT)
        during = loading()
        where = "" if during is None else f" while the mechanism {during} was loading"
        error_line(f"pate: interrupted ({signal.Signals(signum).name}){where}")
        sys.exit(128 + int(signum))

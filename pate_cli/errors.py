"""Exit codes and the typed errors that the CLI boundary turns into one line.

Layers below the CLI raise these and never exit; ``cli.py`` alone maps them to
an exit code. Every message is one line that names the file or flag, the
problem and what was expected.
"""

from __future__ import annotations

from enum import IntEnum


class ExitCode(IntEnum):
    """Process exit codes; part of the public interface (see README)."""

    OK = 0
    BUDGET_EXCEEDED = 1  # the --max-epsilon gate failed
    CLAIM_BELOW_AUDIT = 1  # audit: a claimed epsilon is below the empirical lower bound
    BAD_INPUT = 2  # usage error or bad input
    NOT_CHECKED = 3  # verify: nothing differs, but something was not checked
    CHARGE_REFUSED = 4  # --budget: the run's charge would take the total over the limit
    INTERRUPTED_COMMITTED = 5  # a signal after the commit point: the release and charge stand
    PLUGIN_FAILED = 6  # a mechanism plugin raised or returned out of contract: not pate's bug
    INTERNAL = 70  # a bug in pate (sysexits EX_SOFTWARE)
    STREAM = 74  # stdout or stderr cannot be written (sysexits EX_IOERR)
    INTERRUPTED = 130  # Ctrl-C; SIGTERM is 143 and SIGHUP 129 (128 + the signal)


class PateError(ValueError):
    """Base class of the errors a user can cause; carries a one-line message.

    A ``ValueError``: a library caller can catch bad input and bad parameters the way
    numpy's and scipy's are caught.
    """

    exit_code: ExitCode = ExitCode.BAD_INPUT

    def __init__(self, message: str) -> None:
        # Collapse any newline so the CLI always prints exactly one line.
        super().__init__(" ".join(str(message).split()))

    @property
    def message(self) -> str:
        return str(self.args[0])


class InputError(PateError):
    """A file that cannot be used: unreadable, malformed, or inconsistent."""


class UsageError(PateError):
    """Flags that do not go together, or a value outside its domain."""


class UnsupportedError(UsageError):
    """A request a mechanism has no answer for (a release without a local-sensitivity
    table, an exact account of steps that do not compose exactly...)."""


class WriteError(InputError):
    """An output file the system would not write (a full disk, a quota, a read-only folder):
    the path written and the system's error, so that a caller that had it written under a
    temporary name (``pate_cli.files.transaction``) names the file it stands for instead."""

    def __init__(self, path: str, error: OSError) -> None:
        self.path = path
        self.error = error
        super().__init__(
            f"{path}: cannot write the output file ({error.strerror or error}); "
            "expected a writable path"
        )


class AccountError(InputError):
    """An account past what double precision composes: a number of it, or the total of the
    accounts, is not a finite double (a budget line made by hand, or a run's noise so small
    that its account overflows). Never a figure below the truth: no figure at all."""


class PluginError(Exception):
    """A mechanism from outside pate (a plugin's, or one registered in code) that failed:
    something it raised, whatever it was, or something it returned out of its contract (a
    NaN, a label out of range, a negative Renyi DP). The message names the mechanism, the
    distribution and version it came from, and what it did.

    Neither the user's input nor pate's bug: not a :class:`PateError` (nor a ``ValueError``,
    which pate's own code may catch on the way), but its own exit code.
    """

    exit_code: ExitCode = ExitCode.PLUGIN_FAILED

    def __init__(self, message: str) -> None:
        super().__init__(" ".join(str(message).split()))

    @property
    def message(self) -> str:
        return str(self.args[0])

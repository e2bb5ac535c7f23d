"""``pate``'s entry point (the console script and ``python -m pate_cli``): the signals
first, everything else after (``pate_cli.cli.interrupts``). It imports nothing heavy, and
``pate --version`` is answered here: no typer, no command, no plugin is loaded for it."""

from __future__ import annotations

import os
import sys

from pate_cli.cli.interrupts import hold_signals, ignore_signals
from pate_cli.common.version import __version__
from pate_cli.errors import ExitCode

VERSION_FLAGS = (["--version"], ["-V"])


def main() -> None:
    """The console script ``pate`` and ``python -m pate_cli``."""
    hold_signals()
    try:
        if sys.argv[1:] in VERSION_FLAGS:  # with anything else, the app parses it as usual
            version()
            return
        from pate_cli.cli.app import main as run  # numpy, typer, rich...: the signals held

        run()
    finally:
        ignore_signals()


def version() -> None:
    """``pate 0.1.0`` on stdout; a stdout that cannot be written is one line and exit 74."""
    try:
        if sys.stdout is None:
            raise OSError("closed")
        sys.stdout.write(f"pate {__version__}\n")
        sys.stdout.flush()
    except (OSError, ValueError) as error:
        reason = getattr(error, "strerror", None) or str(error)
        try:
            sys.stderr.write(f"pate: error: cannot write the version to stdout ({reason})\n")
            sys.stderr.flush()
        except (AttributeError, OSError, ValueError):
            pass
        sys.stdout = open(os.devnull, "w")  # noqa: SIM115 (the interpreter's last flush)
        sys.exit(int(ExitCode.STREAM))

"""``pate``'s entry point (the console script and ``python -m pate_cli``): the signals
first, everything else after (``pate_cli.cli.interrupts``). It imports nothing heavy, and
``pate --version`` is answered here: no typer, no command, no plugin is loaded for it."""

from __future__ import annotations

import sys

from pate_cli.cli.interrupts import hold_signals, ignore_signals
from pate_cli.cli.version import version

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

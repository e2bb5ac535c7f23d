"""``pate``'s entry point (the console script and ``python -m pate_cli``): the signals
first, everything else after (``pate_cli.cli.interrupts``). It imports nothing heavy."""

from __future__ import annotations

from pate_cli.cli.interrupts import hold_signals, ignore_signals


def main() -> None:
    """The console script ``pate`` and ``python -m pate_cli``."""
    hold_signals()
    from pate_cli.cli.app import main as run  # numpy, typer, rich...: the signals held

    try:
        run()
    finally:
        ignore_signals()

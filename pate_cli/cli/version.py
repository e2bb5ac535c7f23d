"""``pate --version``'s line, written by the entry point (a bare ``--version``, before typer
is imported) and by the app's eager option alike."""

from __future__ import annotations

import os
import sys

from pate_cli.common.version import __version__
from pate_cli.errors import ExitCode


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

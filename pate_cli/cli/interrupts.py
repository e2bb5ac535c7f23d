"""SIGINT, SIGTERM and SIGHUP: held until the command's work, raised once in it, ignored after.

SIGINT, SIGTERM and SIGHUP stop a run only where the command's one error boundary can say so
(``pate_cli.cli.app.PateGroup.invoke``: the staged files removed, one ``pate: interrupted``
line, exit 128 + the signal). Elsewhere a signal would be a traceback: in the imports of
numpy, scipy, typer and rich, in the parsing, or as the interpreter shuts down. So:

- :func:`hold_signals`, the first thing ``pate_cli.cli.entry.main`` does (this module
  imports nothing heavy), blocks the three signals and installs the handler that raises
  them as :class:`Signalled`, a ``KeyboardInterrupt``;
- :class:`signals_admitted`, around the command's work, unblocks them: one sent during the
  imports, held until then, is raised as the work starts; within it the first signal is
  raised and any later one is ignored, so the clean-up and its line are never cut short;
- after the work (the report written, the exit code decided) they are blocked, and the
  entry point ignores them (:func:`ignore_signals`): a signal then changes nothing, and
  the exit code is the run's (0 after a committed release).

A signal before this module runs (while Python itself starts: ``site`` and the ``.pth``
files of the environment) is the interpreter's own, as for any Python program.
"""

from __future__ import annotations

import signal

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing (nothing heavy here)
if TYPE_CHECKING:
    from collections.abc import Callable

SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)
_admitted = False  # within the command's work, before its first signal
_noting = False  # a commit under way, or past its commit point: a signal is noted, not raised
_noted: int | None = None  # the first signal noted
_standing: str | None = None  # what the commit made stand, once past its commit point


class Signalled(KeyboardInterrupt):
    """SIGINT, SIGTERM or SIGHUP, raised where the run is, so that it cleans up."""

    def __init__(self, signum: int) -> None:
        super().__init__(signum)
        self.signum = signum


def _interrupt(signum: int, frame: object) -> None:
    global _admitted, _noted
    if _noting:
        if _noted is None:
            _noted = signum
        return
    if _admitted:
        _admitted = False  # one interrupt per run: a second signal cuts nothing short
        raise Signalled(signum)


def _mask(how: int, signals: tuple[int, ...] = SIGNALS) -> set[int]:
    """``pthread_sigmask`` on the signals (POSIX; elsewhere the handlers alone): the mask
    that was."""
    if not hasattr(signal, "pthread_sigmask"):
        return set()
    return {int(s) for s in signal.pthread_sigmask(how, signals)}


def hold_signals() -> None:
    """Block the three signals (held until the command's work) and install their handler."""
    _mask(signal.SIG_BLOCK)
    for signum in SIGNALS:
        signal.signal(signum, _interrupt)


def ignore_signals() -> None:
    """The run is over: a signal from now on changes nothing."""
    global _admitted
    _admitted = False
    for signum in SIGNALS:
        signal.signal(signum, signal.SIG_IGN)


class signals_admitted:  # noqa: N801 (a context manager, named as one)
    """The command's work: the signals let in (a held one is raised on entry), then blocked
    again if they were."""

    def __enter__(self) -> None:
        global _admitted, _noting, _noted, _standing
        _noting, _noted, _standing = False, None, None
        self._blocked = tuple(s for s in SIGNALS if s in _mask(signal.SIG_BLOCK, ()))
        _admitted = True  # before the unblocking, which may deliver a held signal at once
        _mask(signal.SIG_UNBLOCK)

    def __exit__(self, *exc: object) -> None:
        global _admitted
        _admitted = False
        if self._blocked:
            _mask(signal.SIG_BLOCK, self._blocked)


class commit_point:  # noqa: N801 (a context manager, named as one)
    """Around a commit: a signal is noted while it runs. On leaving, ``stands()`` says what
    the commit made stand (None: nothing, it failed and rolled back or made nothing
    visible): nothing, and the signal noted is raised now, as before the commit; something,
    and from then on every signal is only noted, for :func:`late` at the end of the work."""

    def __init__(self, stands: Callable[[], str | None]) -> None:
        self._stands = stands

    def __enter__(self) -> None:
        global _noting
        _noting = True

    def __exit__(self, *exc: object) -> None:
        global _admitted, _noting, _noted, _standing
        _standing = self._stands()
        if _standing is not None:
            return
        _noting = False
        signum, _noted = _noted, None
        if signum is not None and _admitted:
            _admitted = False
            raise Signalled(signum)


def late() -> tuple[int, str] | None:
    """A signal that came after the commit point, and what the commit made stand (None: no
    such signal)."""
    if _noted is None or _standing is None:
        return None
    return _noted, _standing

"""The engine a job is asked to run on (``--engine``, ``--workers``, ``--scheduler``), checked
before any work; the engines themselves are ``pate_cli.engines``."""

from __future__ import annotations

from dataclasses import dataclass

from pate_cli import choices
from pate_cli.common import checks
from pate_cli.common.spelling import given, option
from pate_cli.errors import UsageError

ENGINES = tuple(e.value for e in choices.Engine)

#: Local workers at most: each is a process of its own.
MAX_WORKERS = 256


@dataclass(frozen=True)
class EngineChoice:
    """An engine as asked for: its name, and a local cluster's size or a cluster's address."""

    name: str = "local"
    workers: int | None = None
    scheduler: str | None = None

    @property
    def local(self) -> bool:
        return self.name == "local"


def engine_choice(
    engine: str | None = None, workers: int | None = None, scheduler: str | None = None
) -> EngineChoice:
    """The engine asked for, checked: ``workers`` and ``scheduler`` only with ``"dask"``, and
    not together (a cluster at an address has the workers it has)."""
    name = "local" if engine is None else str(getattr(engine, "value", engine))
    if name not in ENGINES:
        raise UsageError(f"{option('engine')} {name!r}: expected one of {', '.join(ENGINES)}")
    if name == "local":
        for flag, value in (("workers", workers), ("scheduler", scheduler)):
            if value is not None:
                raise UsageError(f"{option(flag)} needs {given('engine', 'dask')}")
    if workers is not None and scheduler is not None:
        raise UsageError(
            f"{option('workers')} sizes a local cluster: not with {option('scheduler')}, "
            "whose cluster has the workers it has"
        )
    if workers is not None:
        workers = checks.whole(workers, "workers", 1, MAX_WORKERS)
    if scheduler is not None and not str(scheduler).strip():
        raise UsageError(
            f"{option('scheduler')}: expected a scheduler's address, as tcp://HOST:PORT"
        )
    return EngineChoice(name, workers, scheduler)


def missing_extra() -> UsageError:
    """The one line of ``engine="dask"`` without Dask."""
    return UsageError(
        f"{given('engine', 'dask')} needs Dask, an optional extra: pip install 'pate-cli[dask]'"
    )

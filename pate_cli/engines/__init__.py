"""Where the passes over the queries run: in this process, or on a Dask cluster.

The per-query terms of a run (``accountant.terms``) and the noisy labels of ``aggregate``
are computed a block of queries at a time, and each block's result is its own: a query's
terms read its own row alone, and a block's noise is drawn from its own streams
(``files.seeds.Noise.block``). Blocks may therefore run anywhere, and their results are put
together in block order: the same arrays, to the last bit, however many workers ran them
and in whatever order they finished. Everything after (the composition, the conversions,
the release's walk, the stop conditions) runs in the calling process on those arrays.

An engine is entered around a job (:func:`running`) and read by the passes
(:func:`current`); without one they run in this process, on threads. Dask is imported only
when ``engine="dask"`` is asked for (``pip install 'pate-cli[dask]'``).
"""

from __future__ import annotations

import importlib.util
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager, nullcontext
from contextvars import ContextVar
from typing import Any, Protocol, TypeVar

from pate_cli.engines.choice import (
    ENGINES,
    MAX_WORKERS,
    EngineChoice,
    engine_choice,
    missing_extra,
)

__all__ = [
    "ENGINES",
    "MAX_WORKERS",
    "Engine",
    "EngineChoice",
    "check_available",
    "current",
    "engine_choice",
    "keywords",
    "map_blocks",
    "missing_extra",
    "running",
]

T = TypeVar("T")


class Engine(Protocol):
    """Runs a function on blocks of work and gives back their results in block order."""

    def map(
        self,
        function: Callable[..., T],
        count: int,
        arguments: Callable[[int], tuple[Any, ...]],
        advance: Callable[[int], None] | None = None,
        sizes: Sequence[int] | None = None,
    ) -> list[T]:
        """``[function(*arguments(i)) for i in range(count)]``, each block's arguments made
        when it is sent; ``advance(sizes[i])`` as block i finishes (1 without sizes)."""

    def to_dict(self) -> dict[str, Any]:
        """The report's ``"engine"`` block: its name and workers."""


def map_blocks(
    function: Callable[..., T],
    count: int,
    arguments: Callable[[int], tuple[Any, ...]],
    *,
    threads: int = 1,
    advance: Callable[[int], None] | None = None,
    sizes: Sequence[int] | None = None,
) -> list[T]:
    """``[function(*arguments(i)) for i in range(count)]``: on the engine the job was entered
    with, else on up to ``threads`` threads here (numpy releases the GIL in its loops).
    ``function`` must be a module's (a worker imports it by name) and a block's result its
    own arguments' alone, so that the list is the same wherever each ran. ``advance``:
    called with ``sizes[i]`` (1 without them) as block i finishes (on threads, in order;
    on an engine, as each comes back)."""
    engine = current()
    if engine is not None and count > 1:
        return engine.map(function, count, arguments, advance, sizes)

    def one(index: int) -> T:
        return function(*arguments(index))

    results: list[T] = []
    with ThreadPoolExecutor(threads) if threads > 1 and count > 1 else nullcontext() as pool:
        for index, result in enumerate(
            map(one, range(count)) if pool is None else pool.map(one, range(count))
        ):
            results.append(result)
            if advance is not None:
                advance(1 if sizes is None else sizes[index])
    return results


def keywords(choice: EngineChoice) -> dict[str, Any]:
    """The library keywords of ``choice``: none for this process."""
    if choice.local:
        return {}
    return {"engine": choice.name, "workers": choice.workers, "scheduler": choice.scheduler}


def check_available(choice: EngineChoice) -> None:
    """Before any work: the engine ``choice`` names can be started (Dask is installed)."""
    if not choice.local and importlib.util.find_spec("distributed") is None:
        raise missing_extra()


_CURRENT: ContextVar[Engine | None] = ContextVar("pate_engine", default=None)


def current() -> Engine | None:
    """The engine the running job was entered with (:func:`running`); None: this process."""
    return _CURRENT.get()


@contextmanager
def running(choice: EngineChoice) -> Iterator[Engine | None]:
    """Run the body with the engine ``choice`` names (None for this process), and close it
    after: a local cluster is started here and stopped at the end; an engine already entered
    is used as it is."""
    check_available(choice)
    entered = current()
    if choice.local or entered is not None:
        yield entered
        return
    from pate_cli.engines.cluster import dask_engine  # dask itself is imported there

    with dask_engine(choice) as engine:
        token = _CURRENT.set(engine)
        try:
            yield engine
        finally:
            _CURRENT.reset(token)

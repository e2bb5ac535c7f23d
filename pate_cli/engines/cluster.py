"""The Dask engine: blocks of work as tasks on a local cluster or on one at an address.

Imported only when ``engine="dask"`` is asked for. A block's arguments are sent in its task
(the scheduler keeps them until it is done, so a block whose worker died runs again on
another), at most a few blocks per worker at a time: the caller's memory holds a few
blocks, not the run. The results come back in block order. A worker that dies is replaced
(by its nanny, on a local cluster); a block that cannot be run is one line
(:class:`EngineError`) and the job publishes nothing.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from typing import Any, TypeVar

from pate_cli.common.spelling import given, option
from pate_cli.engines.choice import EngineChoice, missing_extra
from pate_cli.errors import PateError, UsageError

T = TypeVar("T")

#: Dask's warning on a task of many bytes: a block's rows are sent in its task, not scattered
#: (data scattered to a worker dies with it, and its blocks could not be run again).
_LARGE_TASK = "distributed.admin.large-graph-warning-threshold"

#: Blocks in flight per worker: enough to keep each busy while a result comes back.
_IN_FLIGHT = 2

#: Seconds to wait for a scheduler at an address.
_CONNECT_TIMEOUT = 10


class EngineError(PateError):
    """The cluster could not run the job's blocks (its workers died too often, or it went
    away): nothing of the run is published."""


class DaskEngine:
    """An ``Engine`` on a ``distributed.Client``."""

    def __init__(self, client: Any, workers: int, scheduler: str | None) -> None:
        self._client = client
        self.workers = workers
        self.scheduler = scheduler

    def to_dict(self) -> dict[str, Any]:
        return {"name": "dask", "workers": self.workers, "scheduler": self.scheduler}

    def map(
        self,
        function: Callable[..., T],
        count: int,
        arguments: Callable[[int], tuple[Any, ...]],
        advance: Callable[[int], None] | None = None,
        sizes: Sequence[int] | None = None,
    ) -> list[T]:
        import dask
        from distributed import as_completed
        from distributed.client import FutureCancelledError
        from distributed.scheduler import KilledWorker

        results: dict[int, T] = {}
        pending = iter(range(count))
        running: dict[Any, int] = {}

        def submit() -> Any | None:
            index = next(pending, None)
            if index is None:
                return None
            future = self._client.submit(function, *arguments(index), pure=False)
            running[future] = index
            return future

        with dask.config.set({_LARGE_TASK: "64 GiB"}):  # a block's rows go in its task
            started = [submit() for _ in range(max(1, self.workers * _IN_FLIGHT))]
        done = as_completed([f for f in started if f is not None], loop=self._client.loop)
        try:
            for future in done:
                index = running.pop(future)
                results[index] = future.result()
                future.release()
                if advance is not None:
                    advance(1 if sizes is None else sizes[index])
                with dask.config.set({_LARGE_TASK: "64 GiB"}):
                    following = submit()
                if following is not None:
                    done.add(following)
        except (KilledWorker, FutureCancelledError, OSError) as error:
            for future in running:
                future.cancel()
            raise EngineError(
                "the cluster could not finish the work, nothing was published: "
                f"{' '.join(str(error).split()) or type(error).__name__}"
            ) from error
        return [results[index] for index in range(count)]


@contextmanager
def dask_engine(choice: EngineChoice) -> Iterator[DaskEngine]:
    """A ``DaskEngine`` on a local cluster of ``choice.workers`` processes (default: one per
    CPU), one thread each, or on the scheduler at ``choice.scheduler``; closed after."""
    try:
        from distributed import Client, LocalCluster
        from distributed.utils import silence_logging_cmgr
    except ImportError as missing:
        raise missing_extra() from missing
    # What the cluster logs here (a task's failure, a worker lost) is said by the run's one
    # line, or by nothing where the run goes on.
    with silence_logging_cmgr(logging.CRITICAL):
        yield from _engine(choice, Client, LocalCluster)


def _engine(choice: EngineChoice, Client: Any, LocalCluster: Any) -> Iterator[DaskEngine]:  # noqa: N803
    """``dask_engine``'s engine, on a cluster at an address or on a local one."""
    if choice.scheduler is not None:
        try:
            client = Client(choice.scheduler, timeout=_CONNECT_TIMEOUT, set_as_default=False)
        except (OSError, TimeoutError, ValueError) as error:
            raise UsageError(
                f"{option('scheduler')} {choice.scheduler}: no scheduler answered "
                f"({' '.join(str(error).split()) or type(error).__name__})"
            ) from error
        with client:
            workers = len(client.scheduler_info().get("workers", {}))
            if workers == 0:  # its tasks would wait for a worker forever
                raise UsageError(f"{option('scheduler')} {choice.scheduler}: it has no workers")
            yield DaskEngine(client, workers, choice.scheduler)
        return
    workers = choice.workers or os.cpu_count() or 1
    try:
        cluster = LocalCluster(
            n_workers=workers,
            threads_per_worker=1,
            processes=True,
            dashboard_address=":0",  # no fixed port: another cluster may hold 8787
            silence_logs=logging.CRITICAL,  # a failure is the run's one line, not a log
        )
    except (RuntimeError, OSError) as error:  # a worker process that could not start
        raise EngineError(
            f"{given('engine', 'dask')}: the local cluster of {workers} workers did not start "
            f"({' '.join(str(error).split()) or type(error).__name__}); a script that starts "
            "one runs its work under if __name__ == '__main__':"
        ) from error
    with cluster, Client(cluster, set_as_default=False) as client:
        yield DaskEngine(client, workers, None)

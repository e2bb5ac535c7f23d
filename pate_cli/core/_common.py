"""Private helpers shared by the smooth-sensitivity modules; they prove nothing themselves.

Papernot et al. 2018, Appendix B needs, per query and distance d = 0 .. M-1, bounds whose
arrays grow with the number of teachers M. Here: the argument checks, the rounding up of
a difference of two costs, and the work budgets and (rows, distances) blocks that keep
temporaries at a few tens of MB whatever M.
"""

from __future__ import annotations

import math
import os
from collections import deque
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from itertools import chain, islice
from typing import TypeVar

import numpy as np
from numpy.typing import ArrayLike, NDArray

# Work budgets that keep temporaries at a few tens of MB.
_PAIR_CHUNK = 1 << 18
# Cells of a (rows, distances) block of the threshold and Pr[answered] terms: their memory
# stays bounded whatever the number of teachers M (see ``_blocks``).
_ENTRY_CHUNK = 1 << 22
_THRESHOLD_ROW_CHUNK = 256


def thread_count(most: int = 2) -> int:
    """Threads for independent chunks of work (numpy releases the GIL in its loops): up to
    ``most`` of the CPUs, and one under a limit on the address space (``ulimit -v``): there a
    new thread's memory can fail to be allocated where glibc aborts the process, not raises."""
    try:
        import resource

        limited = resource.getrlimit(resource.RLIMIT_AS)[0] != resource.RLIM_INFINITY
    except (ImportError, OSError, ValueError):  # not POSIX: no such limit
        limited = False
    return 1 if limited else min(most, os.cpu_count() or 1)


_THREADS = thread_count()

_Item = TypeVar("_Item")
_Result = TypeVar("_Result")


def _call(thunk: Callable[[], _Result]) -> _Result:
    """Run a deferred piece of work (for ``_ordered_map``)."""
    return thunk()


def _ordered_map(
    fn: Callable[[_Item], _Result], items: Iterable[_Item], threads: int = _THREADS
) -> Iterator[_Result]:
    """``map(fn, items)`` on up to ``threads`` threads, results in the order of the items,
    with at most ``threads + 1`` items in flight (memory stays that of a few chunks). A
    caller that combines the results in this order gets the same numbers for any count."""
    iterator = iter(items)
    head = list(islice(iterator, 2))
    if threads <= 1 or len(head) < 2:  # one item: no thread to start
        yield from map(fn, chain(head, iterator))
        return
    with ThreadPoolExecutor(threads) as pool:
        pending: deque[Future[_Result]] = deque()
        for item in chain(head, iterator):
            pending.append(pool.submit(fn, item))
            if len(pending) > threads:
                yield pending.popleft().result()
        while pending:
            yield pending.popleft().result()


def _check_positive(name: str, value: float) -> float:
    value = float(value)
    if not (value > 0 and math.isfinite(value)):
        raise ValueError(f"{name} must be positive and finite, got {value}")
    return value


def _check_order(order: float) -> float:
    order = float(order)
    if not (order > 1 and math.isfinite(order)):
        raise ValueError(f"the Renyi order must be finite and greater than 1, got {order}")
    return order


def _check_num_classes(num_classes: int) -> int:
    if int(num_classes) != num_classes or num_classes < 2:
        raise ValueError(f"num_classes must be an integer >= 2, got {num_classes}")
    return int(num_classes)


def _check_num_teachers(num_teachers: int) -> int:
    if int(num_teachers) != num_teachers or num_teachers < 1:
        raise ValueError(f"num_teachers must be a positive integer, got {num_teachers}")
    return int(num_teachers)


def _as_counts(counts: ArrayLike, name: str = "counts") -> NDArray[np.float64]:
    arr = np.asarray(counts, dtype=np.float64)
    if arr.ndim != 2 or arr.shape[1] < 1:
        raise ValueError(f"{name} must have shape (queries, classes), got {arr.shape}")
    if not np.all(np.isfinite(arr)):
        raise ValueError(f"{name} must be finite")
    return arr


def _as_integer_votes(counts: ArrayLike) -> NDArray[np.int64]:
    arr = _as_counts(counts)
    if np.any(arr < 0) or np.any(arr != np.round(arr)):
        raise ValueError(
            "GNMax local sensitivity needs non-negative integer vote counts "
            "(Algorithm 4 walks over integer histograms)"
        )
    return arr.astype(np.int64)


def _excess(larger: ArrayLike, smaller: ArrayLike) -> NDArray[np.float64]:
    """larger - smaller rounded up: plus four ulps of the larger magnitude (the rounding of
    the subtraction and of each operand), never negative."""
    a = np.asarray(larger, dtype=np.float64)
    b = np.asarray(smaller, dtype=np.float64)
    slack = 4 * np.finfo(np.float64).eps * np.maximum(np.abs(a), np.abs(b))
    return np.maximum(a - b + slack, 0.0)


def _blocks(num_rows: int, num_teachers: int) -> Iterator[tuple[slice, slice]]:
    """(rows, distances) blocks of about ``_ENTRY_CHUNK`` cells at most, the distances of
    a block of rows in increasing order (a running quantity can be carried across them)."""
    width = min(num_teachers, _ENTRY_CHUNK)
    height = max(1, min(_THRESHOLD_ROW_CHUNK, _ENTRY_CHUNK // width))
    for first in range(0, num_rows, height):
        for start in range(0, num_teachers, width):
            yield (
                slice(first, min(first + height, num_rows)),
                slice(start, min(start + width, num_teachers)),
            )

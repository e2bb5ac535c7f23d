"""Queries held once per distinct row: each histogram evaluated once, weighted by its count.

Every per-query term (log q, the threshold step's statistic, a local-sensitivity bound) is a
function of the query's row of votes alone, so a file whose rows repeat costs its distinct
rows, not its rows. :class:`DistinctRows` holds the distinct rows, in the order of the first
query holding each, with the row of every query (``inverse``: what keeps the queries' order,
for what is reported by query) and how many queries hold each row (``counts``: the weights of
the sums over queries).

Rows are grouped by their bytes (two rows are one only when every byte agrees): a 64-bit hash
of each row, a hash table of the rows met so far, and every row then compared with the row
it was matched to, so that a collision, however unlikely, is seen: :class:`RowTable`, fed a
block of rows at a time, then reports it and the caller reads the rows as they are
(:func:`group_rows`, of rows in memory, groups them exactly instead). The table holds at most
``limit`` distinct rows; past that it gives up, and so bounds its memory.

Shapes: Q queries, U distinct rows, C classes, W words of 8 bytes a row.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cache
from typing import Any

import numpy as np
from numpy.typing import NDArray

FloatArray = NDArray[np.float64]
IntArray = NDArray[np.int64]
IndexArray = NDArray[np.intp]

# Odd 64-bit multipliers of the row hash, fixed (the grouping is the same on every run).
_SEED = 0x0DD5EED
_SHIFT = np.uint64(29)  # folds a word's high bits (a float's sign, exponent) into its low ones
_FOLD = np.uint64(32)
_MAX_LOAD = 4  # the hash table keeps at least this many slots per row


def row_words(rows: np.ndarray) -> NDArray[np.uint64]:
    """Each row's bytes as 64-bit words (zero-padded to a whole word). Shapes: (Q, C) -> (Q, W)."""
    data = np.ascontiguousarray(rows)
    width = data.shape[1] * data.dtype.itemsize
    if width % 8 == 0 and width:
        return data.view(np.uint64).reshape(data.shape[0], width // 8)
    padded = np.zeros((data.shape[0], max(-(-width // 8), 1) * 8), dtype=np.uint8)
    padded[:, :width] = data.view(np.uint8).reshape(data.shape[0], width)
    return padded.view(np.uint64)


@cache
def _multipliers(width: int) -> NDArray[np.uint64]:
    found = np.random.default_rng([_SEED, width]).integers(1, 2**63, width, dtype=np.uint64)
    return np.asarray(found | np.uint64(1), dtype=np.uint64)


def row_keys(words: NDArray[np.uint64]) -> NDArray[np.uint64]:
    """A 64-bit hash of each row's words (arithmetic modulo 2^64). Shapes: (Q, W) -> (Q,)."""
    folded = words >> _SHIFT  # a whole count's float has no low bits: fold the high ones in
    folded ^= words
    keys: NDArray[np.uint64] = folded @ _multipliers(words.shape[1])
    keys ^= keys >> _FOLD
    return keys


def _first_order(first: IndexArray, inverse: IndexArray) -> tuple[IndexArray, IndexArray]:
    """Groups renumbered in the order of their first row: (first row of each, group of each
    row)."""
    order = np.argsort(first, kind="stable")
    rank = np.empty_like(order)
    rank[order] = np.arange(order.size)
    return first[order], rank[inverse.reshape(-1)]


def group_rows(rows: np.ndarray) -> tuple[IndexArray, IndexArray]:
    """The distinct rows of ``rows`` by their bytes: (the first row of each, in order, and
    the group of every row). Grouped by a verified hash; a collision groups them exactly.
    Shapes: (Q, C) -> (U,), (Q,)."""
    words = row_words(rows)
    _, first, inverse = np.unique(row_keys(words), return_index=True, return_inverse=True)
    inverse = inverse.reshape(-1)
    if not np.array_equal(words[first][inverse], words):
        _, first, inverse = np.unique(words, axis=0, return_index=True, return_inverse=True)
    return _first_order(first, inverse)


@dataclass(frozen=True, eq=False)
class DistinctRows:
    """(Q, C) votes held by distinct row (module docstring).

    It stands in for the (Q, C) float64 counts where they are read by rows: ``len``,
    ``shape``, ``[index]`` (an int, a slice or an index array of queries: those rows, in a
    fresh array) and ``np.asarray`` (every query's row).

    Shapes: rows (U, C) float64, in the order of their first query; inverse (Q,) the row of
    each query; counts (U,) int64, each at least 1.
    """

    rows: FloatArray
    inverse: NDArray[np.signedinteger[Any]]
    counts: IntArray

    ndim = 2
    dtype = np.dtype(np.float64)

    @classmethod
    def of(cls, counts: np.ndarray) -> DistinctRows:
        """The distinct rows of (Q, C) float64 counts in memory."""
        first, inverse = group_rows(counts)
        return cls.grouped(np.asarray(counts)[first], inverse)

    @classmethod
    def grouped(cls, rows: FloatArray, inverse: NDArray[np.signedinteger[Any]]) -> DistinctRows:
        """From the distinct rows and the row of every query."""
        rows = np.ascontiguousarray(rows, dtype=np.float64)
        rows.flags.writeable = False
        counts = np.bincount(inverse, minlength=rows.shape[0]).astype(np.int64)
        return cls(rows, inverse, counts)

    def __len__(self) -> int:
        return int(self.inverse.shape[0])

    @property
    def shape(self) -> tuple[int, int]:
        """The shape of the counts it holds: (Q, C)."""
        return len(self), int(self.rows.shape[1])

    @property
    def num_rows(self) -> int:
        """U, its distinct rows."""
        return int(self.rows.shape[0])

    def __getitem__(self, key: Any) -> FloatArray:
        if isinstance(key, tuple):
            return np.asarray(self)[key]  # type: ignore[no-any-return]
        return self.rows[self.inverse[key]]

    def __array__(self, dtype: object = None, copy: object = None) -> FloatArray:
        out = self.rows[self.inverse]
        return out if dtype is None else out.astype(dtype)  # type: ignore[call-overload]

    def prefix(self, num: int) -> DistinctRows:
        """The first ``num`` queries: the rows they hold (the first rows, by the order of
        their first query) and their counts among them."""
        if num >= len(self):
            return self
        inverse = self.inverse[:num]
        held = int(inverse.max()) + 1 if inverse.size else 0
        return DistinctRows.grouped(self.rows[:held], inverse)

    def expand(self, values: np.ndarray) -> np.ndarray:
        """A value per row as a value per query. Shapes: (U, ...) -> (Q, ...)."""
        return values[self.inverse]

    def paired(self, other: np.ndarray) -> tuple[DistinctRows, FloatArray]:
        """The queries held by distinct (row, row of ``other``) pairs (a baseline beside the
        votes): the pairs' rows of the votes, and their rows of ``other``. Shapes: other
        (Q, C) -> (P queries' pairs), (P, C)."""
        first_other, of_other = group_rows(np.asarray(other, dtype=np.float64))
        key = self.inverse.astype(np.int64) * max(first_other.size, 1) + of_other
        _, first, inverse = np.unique(key, return_index=True, return_inverse=True)
        first, inverse = _first_order(first, inverse)
        pairs = DistinctRows.grouped(self.rows[self.inverse[first]], inverse)
        return pairs, np.asarray(other, dtype=np.float64)[first]


class RowTable:
    """The distinct rows of blocks fed in order (:meth:`add`), by a hash table of verified
    64-bit row hashes; at most ``limit`` distinct rows (module docstring). Every block has
    the first one's dtype and number of columns."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.size = 0
        self._first: np.ndarray | None = None  # an empty block of the rows' dtype and width
        self._words = np.zeros((0, 0), dtype=np.uint64)
        self._index = np.int32 if limit < 2**31 else np.int64
        self._inverse: list[np.ndarray] = []
        self._bits = 10
        self._keys = np.zeros(1 << self._bits, dtype=np.uint64)
        self._rows = np.full(1 << self._bits, -1, dtype=np.intp)

    def add(self, block: np.ndarray) -> bool:
        """Take the next block of rows; False (the table gives up) at a hash collision or
        past ``limit`` distinct rows. Shapes: (n, C)."""
        words = row_words(block)
        if self._first is None:
            self._first = np.zeros((0, block.shape[1]), dtype=block.dtype)
            self._words = np.zeros((0, words.shape[1]), dtype=np.uint64)
        keys = row_keys(words)
        found = self._find(keys)
        new = np.flatnonzero(found < 0)
        if new.size:
            unique, first, inverse = np.unique(keys[new], return_index=True, return_inverse=True)
            first, rank = _first_order(first, np.arange(unique.size))
            if self.size + unique.size > self.limit:
                return False
            ids = self.size + rank
            found[new] = ids[inverse.reshape(-1)]
            self._append(words[new[first]])
            self._insert(unique, ids)
        if not np.array_equal(np.take(self._words, found, axis=0), words):  # a collision
            return False
        self._inverse.append(found.astype(self._index))
        return True

    def distinct(self) -> tuple[np.ndarray, NDArray[np.signedinteger[Any]]]:
        """The distinct rows of the blocks taken (their dtype, in the order of their first
        row) and the row of each of their rows. Shapes: (U, C), (Q,)."""
        inverse = np.concatenate([np.zeros(0, self._index), *self._inverse])
        if self._first is None:
            return np.zeros((0, 0)), inverse
        width = self._first.shape[1] * self._first.dtype.itemsize
        data = self._words[: self.size].view(np.uint8)[:, :width]
        rows = np.ascontiguousarray(data).view(self._first.dtype)
        return rows.reshape(self.size, self._first.shape[1]), inverse

    def _append(self, words: NDArray[np.uint64]) -> None:
        needed = self.size + words.shape[0]
        if needed > self._words.shape[0]:
            shape = (max(needed, 2 * self._words.shape[0], 1024), words.shape[1])
            grown = np.zeros(shape, dtype=np.uint64)
            grown[: self.size] = self._words[: self.size]
            self._words = grown
        self._words[self.size : needed] = words
        self.size = needed

    def _slots(self, keys: NDArray[np.uint64]) -> IndexArray:
        return (keys >> np.uint64(64 - self._bits)).astype(np.intp)

    def _find(self, keys: NDArray[np.uint64]) -> IndexArray:
        """The row of each key, or -1 (linear probing, all keys at once)."""
        mask = self._keys.size - 1
        slot = self._slots(keys)
        row = self._rows[slot]
        hit = self._keys[slot] == keys
        hit &= row >= 0
        found = np.where(hit, row, -1)
        pending = np.flatnonzero(~hit & (row >= 0))  # a slot held by another key: probe on
        slot[pending] = (slot[pending] + 1) & mask
        while pending.size:
            at = slot[pending]
            row = self._rows[at]
            hit = (row >= 0) & (self._keys[at] == keys[pending])
            found[pending[hit]] = row[hit]
            going = (row >= 0) & ~hit
            pending = pending[going]
            slot[pending] = (at[going] + 1) & mask
        return found

    def _insert(self, keys: NDArray[np.uint64], rows: IndexArray) -> None:
        """Put keys not in the table (distinct) at their first free slot."""
        if _MAX_LOAD * self.size > self._keys.size:
            old = self._rows >= 0
            held_keys, held_rows = self._keys[old], self._rows[old]
            while _MAX_LOAD * self.size > (1 << self._bits):
                self._bits += 1
            self._keys = np.zeros(1 << self._bits, dtype=np.uint64)
            self._rows = np.full(1 << self._bits, -1, dtype=np.intp)
            keys, rows = np.concatenate([held_keys, keys]), np.concatenate([held_rows, rows])
        mask = self._keys.size - 1
        slot = self._slots(keys)
        pending = np.arange(keys.size)
        while pending.size:
            at = slot[pending]
            free = np.flatnonzero(self._rows[at] < 0)
            taken, first = np.unique(at[free], return_index=True)  # one key a free slot
            placed = pending[free[first]]
            self._keys[taken], self._rows[taken] = keys[placed], rows[placed]
            left = np.ones(pending.size, dtype=bool)
            left[free[first]] = False
            pending = pending[left]
            slot[pending] = (slot[pending] + 1) & mask

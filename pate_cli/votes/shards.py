"""A folder of vote shards read as one votes file: the concatenation of its shards' queries.

The folder's rules (which files are shards, their order, its digest) are in
``pate_cli.votes.folder``. Reading goes:

1. every shard is read on its own, as a votes file is (``--format``, ``--teachers``,
   ``--num-classes`` and ``--member`` apply to each; ``--format auto`` detects each): a
   shard that does not read, or that is ambiguous, is refused as that file would be;
2. the shards must read the same way: the same format (sparse counts being one of their
   own), layout, stored dtype and size on every axis but the queries' (so the same classes,
   and for labels and scores the same teachers); the first that differs from the first
   shard is named;
3. the folder is then read as one file (:class:`ShardedFile`), whose array is the shards'
   concatenated along their queries' axis: the selection flags apply to it, detection is
   made on it again (it must agree), and a large one is streamed a block at a time across
   the shards (``stream.ShardSource``), never concatenated in memory. A small one, or one
   read with ``--indices``, is read whole.

Sparse shards (``scipy.sparse.save_npz``) are read by ``pate_cli.votes.sparse``, whose
matrices are held whole anyway (their entries, never dense).
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from pate_cli.choices import VoteFormat
from pate_cli.errors import InputError
from pate_cli.votes.folder import shard_differs, shard_paths
from pate_cli.votes.formats import AXES, QUERY_AXIS
from pate_cli.votes.model import Votes
from pate_cli.votes.reader import ArrayFile, NpyHeader, StrPath, open_array
from pate_cli.votes.sparse import is_sparse_input

ReadShard = Callable[..., Votes]
"""``load_votes``: how one shard is read (passed in: this module is below it)."""


@dataclass(frozen=True)
class ShardedFile(ArrayFile):
    """The shards of a folder as one array file, concatenated along ``axis`` (the queries'
    axis as saved): its header is the whole's (shape, dtype; never Fortran-ordered), and
    its array the shards' concatenated. ``format`` and ``transposed`` are how every shard
    read."""

    parts: tuple[ArrayFile, ...] = ()
    axis: int = 0
    format: VoteFormat = VoteFormat.COUNTS
    transposed: bool = False

    def array(self, *, mmap: bool) -> np.ndarray:
        """The shards' arrays, concatenated in memory (a small folder, or ``--indices``)."""
        return np.concatenate([part.array(mmap=mmap) for part in self.parts], axis=self.axis)

    def check_reading(self, fmt: VoteFormat, transposed: bool) -> None:
        """Detection on the whole found what it found on every shard.

        Raises:
            InputError: Another format or layout.
        """
        if fmt is not self.format or transposed != self.transposed:
            raise InputError(
                f"{self.where}: the folder's queries read as {fmt.value}"
                f"{' (transposed)' if transposed else ''}, its shards as {self.format.value}"
                f"{' (transposed)' if self.transposed else ''}; pass --format"
            )


def _kind(votes: Votes) -> str:
    return votes.format.value


def open_shards(
    path: StrPath,
    read: ReadShard,
    *,
    fmt: VoteFormat,
    member: str | None,
    num_classes: int | None,
    teachers: int | None,
) -> ShardedFile:
    """Read every shard of the folder at ``path`` on its own, check that they read the same
    way, and return them as one :class:`ShardedFile` (nothing read of the whole yet).

    Raises:
        InputError: A bad folder or shard, or shards that read differently.
        UsageError: A flag value outside its domain.
    """
    where = os.fspath(path)
    shards = shard_paths(where)
    first: Votes | None = None
    for shard in shards:
        if first is not None and is_sparse_input(shard, member):  # the first is dense
            raise shard_differs(
                where, shard, shards[0], "reads as", "sparse counts", f"as {_kind(first)}"
            )
        votes = read(shard, fmt=fmt, num_classes=num_classes, teachers=teachers, member=member)
        if first is None:
            first = votes
        else:
            _check_same(where, shard, shards[0], votes, first)
    assert first is not None
    return _sharded(where, shards, member, first)


def _check_same(where: str, shard: str, head: str, votes: Votes, first: Votes) -> None:
    """The shard ``shard`` (read as ``votes``) reads as the first, ``head``, did."""
    if votes.format is not first.format:
        raise shard_differs(where, shard, head, "reads as", _kind(votes), f"as {_kind(first)}")
    if votes.transposed != first.transposed:
        raise shard_differs(where, shard, head, "is read", votes.layout, first.layout)
    if votes.stored_dtype != first.stored_dtype:
        raise shard_differs(
            where, shard, head, "is stored as", votes.stored_dtype, f"as {first.stored_dtype}"
        )
    axes = AXES[first.format][::-1] if first.transposed else AXES[first.format]
    for axis, name in enumerate(axes):
        if name != "queries" and votes.file_shape[axis] != first.file_shape[axis]:
            size, first_size = votes.file_shape[axis], first.file_shape[axis]
            raise shard_differs(where, shard, head, f"has {name}", size, f"{first_size}")


def _sharded(where: str, shards: list[str], member: str | None, first: Votes) -> ShardedFile:
    """The shards (read alike as ``first``) as one file, concatenated along the queries."""
    parts = tuple(open_array(shard, "votes", member) for shard in shards)
    axis = QUERY_AXIS[first.format]
    if first.transposed:  # labels saved queries x teachers
        axis = 1 - axis
    shape = list(parts[0].shape)
    shape[axis] = sum(int(part.shape[axis]) for part in parts)
    header = NpyHeader(tuple(shape), parts[0].dtype, fortran_order=False, offset=0)
    return ShardedFile(
        where,
        where,
        "votes",
        header,
        npz=False,
        member=member,
        parts=parts,
        axis=axis,
        format=first.format,
        transposed=first.transposed,
    )

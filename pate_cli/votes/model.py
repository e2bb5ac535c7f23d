"""The votes as the library holds them: a validated (Q, C) histogram and where it came from."""

from __future__ import annotations

from concurrent.futures import Future
from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray

from pate_cli.choices import VoteFormat
from pate_cli.core.distinct import DistinctRows
from pate_cli.votes.candidates import CandidateIds
from pate_cli.votes.formats import AXES
from pate_cli.votes.layout import LayoutEvidence

#: Where a class count came from: ``--num-classes``, the largest label, or the array's shape.
CLASSES_FROM = ("given", "largest label", "shape")


@dataclass(frozen=True)
class Votes:
    """Validated votes as a float64 ``(Q, C)`` histogram, plus where they came from.

    Attributes:
        counts: Per-query vote histogram after the selection; read-only, C-contiguous. A
            large file's is read a block of rows at a time (``ChunkedCounts``), and votes
            over a vocabulary are held by query (``pate_cli.core.compact.Compact``).
        path: The path as the user gave it; ``"<array>"`` for votes given as an array.
        digest: Hex SHA-256 of the file's bytes, computed on a thread while the votes are
            analysed (hashlib releases the GIL); of an array in memory, that of its dtype,
            shape and bytes (``pate_cli.votes.memory``). Read it as ``sha256``.
        format: The format used; never ``AUTO``.
        detected: True when ``format`` came from auto-detection.
        num_teachers: M.
        num_classes: C.
        num_file_queries: Queries in the file before selection.
        selection: File query indices kept, in order; None means all, in file order.
        warnings: One-line notes for the user, e.g. rows that do not sum to ``--teachers``.
        file_shape: The shape of the array in the file.
        stored_dtype: Its dtype in the file.
        transposed: Labels read as saved queries x teachers (``--teachers`` picked the axis).
        source: ``"file"``, or ``"memory"`` for votes given as an array (``file_shape`` and
            ``stored_dtype`` are then the array's).
        candidate_ids: The selected queries' candidate token ids (``--candidates`` as token
            ids): ``counts`` is then over each query's candidates (class j its j-th id) and
            ``num_classes`` the vocabulary V; None otherwise.
        classes_from: Where C came from (:data:`CLASSES_FROM`): ``--num-classes``
            ("given"), one more than the largest label of the file ("largest label"), or the
            array's shape ("shape": the classes of counts and scores).
        layout_evidence: How the labels agree by row and by column, when that decided their
            layout (``--format auto`` without ``--teachers``); None otherwise.
        distinct: The counts held by distinct row (``pate_cli.core.distinct``), when at most
            half the queries' rows are distinct (whole counts, as dense rows): every pass
            then evaluates each distinct row once, weighted by how many queries hold it.
            None otherwise.
        shards: The number of shards of a folder read as the votes (``path`` the folder,
            ``digest`` that of ``pate_cli.votes.folder``); 0 for a file or an array.
    """

    counts: NDArray[np.float64]
    path: str
    digest: Future[str]
    format: VoteFormat
    detected: bool
    num_teachers: int
    num_classes: int
    num_file_queries: int
    selection: NDArray[np.int64] | None
    warnings: tuple[str, ...]
    file_shape: tuple[int, ...] = ()
    stored_dtype: str = ""
    transposed: bool = False
    source: str = "file"
    candidate_ids: CandidateIds | None = None
    classes_from: str = "shape"
    layout_evidence: LayoutEvidence | None = None
    distinct: DistinctRows | None = None
    shards: int = 0

    def __repr__(self) -> str:
        """Short: the format, the shape read, the sizes and the digest's first characters
        (waiting for the hashing thread), never the votes."""
        return (
            f"Votes(format={self.format.value}, shape={self.file_shape}, "
            f"queries={self.num_queries}, classes={self.num_classes}, "
            f"teachers={self.num_teachers}, path={self.path!r}, sha256={self.sha256[:12]}...)"
        )

    @property
    def layout(self) -> str:
        """How the file's axes were read: "teachers x queries" for labels ("queries x
        teachers" for labels read transposed), "queries x classes" for counts, "teachers x
        queries x classes" for scores."""
        axes = AXES[self.format]
        return " x ".join(axes[::-1] if self.transposed else axes)

    @property
    def sha256(self) -> str:
        """Hex SHA-256 of the file's bytes (waits for the hashing thread)."""
        return self.digest.result()

    @property
    def grouped(self) -> NDArray[np.float64] | DistinctRows:
        """The counts as the passes over the queries read them: by distinct row
        (``distinct``) where they are held so, else ``counts``."""
        return self.counts if self.distinct is None else self.distinct

    @property
    def num_queries(self) -> int:
        """Q, the number of queries after selection."""
        return int(self.counts.shape[0])

"""Where the randomness of a run comes from, and how its secret is kept.

Whoever knows the noise of a release can undo it (docs/cli.md, "Secrets"), so the source of a
run's random draws is a :class:`Noise` value that never shows its seed unless the seed was
public to begin with:

- ``os-entropy`` (the default): a generator seeded by the operating system; no seed exists
  anywhere outside the generator, so none can be printed, logged or recorded.
- ``seed-file``: a 128-bit seed kept in a file that pate creates (mode 0600) when it is
  missing. The seed never leaves that file; a record holds only a commitment to it, the
  SHA-256 of the file's content, and ``verify --seed-file`` replays the random outputs.
- ``seed``: an integer given on the command line, for experiments and tests. Anyone may know
  it, so the run is reported as not private and only then is the seed shown.
- ``generator``: a library caller's own ``numpy.random.Generator``; pate cannot vouch for
  where it came from, so the run is reported as not private.

Every purpose draws from its own stream (:data:`PURPOSES`): the stream of a purpose is
``default_rng(SeedSequence(seed, spawn_key=(PURPOSES[purpose],)))``, so two purposes of one
seed (the aggregator's threshold noise, its answer noise, the GNSS sample) never share a draw,
and knowing one stream's draws says nothing of another's. ``aggregate`` draws a block of
queries at a time (:meth:`Noise.block`): block b > 0 of a purpose draws from
``SeedSequence(seed, spawn_key=(PURPOSES[purpose], b))``, block 0 from the purpose's stream,
so that whoever holds the seed draws any block's noise without the blocks before it. OS
entropy gives each purpose a fresh generator; a caller's generator is drawn from in turn
(its draws follow one another, none is used twice).
"""

from __future__ import annotations

import hashlib
import os
import re
import stat
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np

from pate_cli.common import checks
from pate_cli.common.spelling import given, option, options
from pate_cli.errors import InputError, UsageError

#: What a seed file holds: the seed as 32 hex digits and a newline.
_SEED_TEXT = re.compile(rb"\A([0-9a-f]{32})\n?\Z")
_MAX_SEED_FILE_BYTES = 64
# JSON readers such as jq hold numbers as doubles: integers beyond 2**53 lose digits there.
_EXACT_JSON_INTEGERS = 2**53
#: The note on a seed file that others may read (a circumstance of the run, not of its votes).
READABLE_SEED_FILE = "others than its owner may read it"
_GENERATOR_NOTE = (
    "the noise comes from the caller's generator: pate cannot vouch that it is secret, so the "
    "outputs are reported as not private"
)


def _public_note(seed: int) -> str:
    """The note on a public seed, in its caller's words (``pate_cli.common.spelling``)."""
    return (
        f"{given('seed', seed)}: anyone who knows the seed can recompute the noise; the "
        f"outputs are not a private release (use {option('seed-file')}, or no seed, for one)"
    )


#: The purposes a run draws noise for, each with its stream's spawn key. Part of the record
#: format: a key is never reused or renumbered (a record's replay derives the same streams).
PURPOSES = {
    "aggregate-threshold": 1,  # Confident/Interactive-GNMax: the threshold step's noise
    "aggregate-answer": 2,  # the noisy argmax of every aggregator
    "gnss-sample": 3,  # the GNSS release's one draw
}


def fresh_seed() -> int:
    """A 128-bit seed drawn from the operating system's entropy."""
    return int(np.random.SeedSequence().entropy)  # type: ignore[arg-type]


def json_seed(seed: int) -> int | str:
    """A public seed as JSON writes it: a number when every reader keeps its digits, else
    its decimal string."""
    return seed if seed < _EXACT_JSON_INTEGERS else str(seed)


@dataclass(frozen=True)
class Noise:
    """The source of one run's random draws. Its repr, ``to_dict`` and every report show
    the seed only when ``source`` is ``"seed"`` (a number the user chose and may publish)."""

    source: str
    """"os-entropy", "seed-file", "seed", "generator" or "none" (a run that draws nothing)."""
    _seed: int | None = field(default=None, repr=False, compare=False)
    _generator: np.random.Generator | None = field(default=None, repr=False, compare=False)
    commitment: str | None = field(default=None, repr=False)
    """For a seed file: the SHA-256 of its content, which a record keeps instead of the seed."""
    _content: bytes | None = field(default=None, repr=False, compare=False)
    """For a seed file: its content, for a salted commitment (:meth:`commit`)."""
    notes: tuple[str, ...] = ()
    """Warnings for the user (a seed file others may read)."""
    _block: int = field(default=0, repr=False, compare=False)
    """The block of queries whose draws this is (:meth:`block`)."""

    @property
    def private(self) -> bool:
        """True when nobody but the holder of a seed file can know the noise."""
        return self.source in ("os-entropy", "seed-file")

    @property
    def public_seed(self) -> int | None:
        """The seed, when it is public (``--seed N``); None otherwise."""
        return self._seed if self.source == "seed" else None

    def generator(self, purpose: str) -> np.random.Generator:
        """The generator of one purpose's draws (a key of :data:`PURPOSES`): from a seed, the
        purpose's own stream (the same stream on every call); from OS entropy, a fresh
        generator; a caller's generator is returned as it is (its draws follow one another)."""
        key = PURPOSES[purpose]
        if self.source == "none":
            raise AssertionError(f"a run that draws no noise asked for its {purpose!r} stream")
        if self._generator is not None:
            return self._generator
        if self._seed is None:
            return np.random.default_rng()  # seeded from the OS; the seed is never seen
        spawn_key = (key,) if self._block == 0 else (key, self._block)
        return np.random.default_rng(np.random.SeedSequence(self._seed, spawn_key=spawn_key))

    def block(self, index: int) -> Noise:
        """The draws of block ``index`` of a run's queries (module docstring): from a seed,
        each purpose's stream of that block (block 0: the purpose's own); from OS entropy,
        fresh generators; a caller's generator, drawn from in turn."""
        return replace(self, _block=int(index))

    def commit(self, salt: bytes) -> str | None:
        """A seed file's hiding commitment for a public record: the SHA-256 of ``salt``
        followed by the file's content (None for any other source)."""
        if self._content is None:
            return None
        return commitment_of(salt + self._content)

    def to_dict(self) -> dict[str, Any]:
        """The report's ``"noise"`` block (docs/cli.md, "Secrets")."""
        out: dict[str, Any] = {"source": self.source, "private": self.private}
        if self.public_seed is not None:
            out["seed"] = json_seed(self.public_seed)
        return out


def no_draws() -> Noise:
    """The source of a run that draws nothing (a library analysis that reports the release's
    expected value only): asking it for a stream is a bug."""
    return Noise("none")


def os_entropy() -> Noise:
    """Draws seeded by the operating system, never written anywhere (the default)."""
    return Noise("os-entropy")


def from_seed(value: int) -> Noise:
    """A public seed (``--seed N``): reproducible by anyone, so not a private release."""
    seed = checks.seed(value)
    assert seed is not None
    return Noise("seed", seed, notes=(_public_note(seed),))


def from_generator(generator: np.random.Generator) -> Noise:
    """A caller's own generator: reproducible by whoever seeded it, not vouched for."""
    return Noise("generator", _generator=generator, notes=(_GENERATOR_NOTE,))


def commitment_of(content: bytes) -> str:
    """The commitment a record keeps for a seed file: the SHA-256 of its content. The file
    holds 128 random bits, so the commitment gives nothing of the seed away."""
    return hashlib.sha256(content).hexdigest()


def _read_seed_file(path: str) -> bytes:
    """The content of an existing seed file: a regular file of a few bytes."""
    try:
        info = os.stat(path)
    except OSError as error:
        raise InputError(f"{given('seed-file', path)}: cannot be read ({error.strerror})") from None
    if not stat.S_ISREG(info.st_mode):
        raise InputError(f"{given('seed-file', path)}: not a regular file; expected a seed file")
    if info.st_size > _MAX_SEED_FILE_BYTES:
        raise InputError(
            f"{given('seed-file', path)}: {info.st_size} bytes; a seed file holds 32 hex digits "
            "(remove it to have pate create a fresh one)"
        )
    try:
        with open(path, "rb") as stream:
            return stream.read(_MAX_SEED_FILE_BYTES + 1)
    except OSError as error:
        raise InputError(f"{given('seed-file', path)}: cannot be read ({error.strerror})") from None


def _create_seed_file(path: str) -> bytes | None:
    """Create ``path`` (mode 0600) holding a fresh seed; None if it appeared meanwhile."""
    content = f"{fresh_seed():032x}\n".encode()
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    except FileExistsError:
        return None
    except OSError as error:
        raise UsageError(
            f"{given('seed-file', path)}: cannot be created ({error.strerror}); expected a "
            "path in a writable folder"
        ) from None
    try:
        with os.fdopen(fd, "wb") as stream:
            stream.write(content)
            stream.flush()
            os.fsync(stream.fileno())
    except OSError as error:
        os.unlink(path)
        raise UsageError(
            f"{given('seed-file', path)}: cannot be written ({error.strerror})"
        ) from None
    return content


def from_seed_file(path: str | os.PathLike[str], *, create: bool = True) -> Noise:
    """The seed kept in ``path``, which is created with a fresh seed (mode 0600) when it
    does not exist and ``create`` is true.

    Raises:
        InputError: the file is not a seed file (32 hex digits), or is missing and
            ``create`` is false.
        UsageError: the file cannot be created.
    """
    path = os.fspath(path)
    content = None
    if create and not os.path.lexists(path):
        content = _create_seed_file(path)
    if content is None:
        if not os.path.exists(path):
            raise InputError(
                f"{given('seed-file', path)}: no such file; expected the run's seed file"
            )
        content = _read_seed_file(path)
    match = _SEED_TEXT.match(content)
    if match is None:
        raise InputError(
            f"{given('seed-file', path)}: not a seed file; expected the 32 hex digits pate writes "
            "(remove it to have pate create a fresh one)"
        )
    notes: tuple[str, ...] = ()
    if os.stat(path).st_mode & (stat.S_IRWXG | stat.S_IRWXO):
        notes = (f"{given('seed-file', path)}: {READABLE_SEED_FILE} (chmod 600 {path})",)
    return Noise(
        "seed-file",
        int(match.group(1), 16),
        commitment=commitment_of(content),
        _content=content,
        notes=notes,
    )


def noise_source(
    seed: int | np.random.Generator | None = None,
    seed_file: str | os.PathLike[str] | None = None,
) -> Noise:
    """The noise of a run from the ``seed`` and ``seed_file`` options (at most one)."""
    if seed is not None and seed_file is not None:
        raise UsageError(
            f"{options('seed', 'seed-file')}: give one ({option('seed-file')} keeps the noise "
            "private)"
        )
    if seed_file is not None:
        return from_seed_file(seed_file)
    if isinstance(seed, np.random.Generator):
        return from_generator(seed)
    if seed is not None:
        return from_seed(seed)
    return os_entropy()

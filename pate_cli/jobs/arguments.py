"""How the library reads its arguments as the command line reads its flags.

Votes given as a path or an array (with ``format=``, ``teachers=``, ``num_classes=`` and
``member=``, as ``load_votes``) and the noise of ``analyze``'s ``release=`` (a mechanism is
checked by ``pate_cli.mechanisms.as_mechanism``, ``release=`` read by
``pate_cli.release.model.release_mode``). Each refuses what it cannot read with one line naming the
parameter (``pate_cli.common.spelling``).
"""

from __future__ import annotations

import os
from typing import Any

from pate_cli.errors import UsageError
from pate_cli.files.seeds import Noise, no_draws, noise_source
from pate_cli.votes import Input, VoteFormat, Votes, as_vote_format
from pate_cli.votes import load_votes as _load_votes

PathLike = str | os.PathLike[str]


def reading(
    format: str | VoteFormat | None,
    teachers: int | None,
    num_classes: int | None,
    member: str | None,
    candidates: Input | None = None,
) -> dict[str, Any]:
    """An entry point's reading parameters, as ``load_votes`` takes them."""
    shape = {"teachers": teachers, "num_classes": num_classes}
    return {"format": format, **shape, "member": member, "candidates": candidates}


def read_votes(votes: Votes | Input, reading: dict[str, Any] | None = None) -> Votes:
    """The votes, read as ``load_votes`` reads them with ``reading`` (format=, teachers=,
    num_classes=) when they are a path or an array."""
    given = {key: value for key, value in (reading or {}).items() if value is not None}
    if isinstance(votes, Votes):
        if given:
            raise UsageError(
                f"{', '.join(f'{k}=' for k in given)}: the votes are already read; give them "
                "to load_votes, or give the path or the array here"
            )
        return votes
    fmt = as_vote_format(None, given.pop("format", None))
    return _load_votes(votes, fmt=fmt, **given)


def drawing_nothing(seed: object, seed_file: PathLike | None) -> Noise:
    """The noise of an analysis that draws no sample; a seed there would seed nothing."""
    if seed is not None or seed_file is not None:
        name = "seed" if seed is not None else "seed_file"
        raise UsageError(
            f"{name}= seeds the release's sample, and this call draws none: pass "
            'release="sample" to draw it'
        )
    return no_draws()


def release_noise(mode: str | None, seed: Any, seed_file: PathLike | None) -> Noise:
    """The noise of an analysis with release ``mode``: its seed's, or none to draw from for
    the expected release (where a seed is refused)."""
    return noise_source(seed, seed_file) if mode != "expected" else drawing_nothing(seed, seed_file)

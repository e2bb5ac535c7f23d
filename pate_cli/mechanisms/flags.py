"""Which mechanism a set of flags means, among the mechanisms given: the one rule of every
command (``pate_cli.mechanisms.inference`` applies it to the registry), and what a new
mechanism would change of what the built-ins' flags mean (the registry refuses that).

A mechanism's flags are its parameters (``--sigma``...) and, when it needs the student's
votes, the baseline. Among the mechanisms that take every flag given, the one whose flags are
exactly those, else the one with the fewest flags; when none takes them all, the one that
takes the most flags no other mechanism takes (a flag only one mechanism declares decides
it); any remaining tie is refused naming both, never settled by the order of registration.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Mapping
from typing import TYPE_CHECKING, Any

from pate_cli.errors import UsageError

if TYPE_CHECKING:
    from pate_cli.mechanisms.base import Mechanism

BASELINE = "--baseline"
"""The flag of the student's votes, which a mechanism that ``needs_baseline`` takes."""

Kinds = Collection[type["Mechanism"]]


def flags_of(kind: type[Mechanism]) -> tuple[str, ...]:
    """The flags a mechanism takes, in order: its parameters, then the baseline."""
    return (
        *(parameter.flag for parameter in kind.parameters),
        *((BASELINE,) if kind.needs_baseline else ()),
    )


def _distinctive(kind: type[Mechanism], flags: Mapping[str, bool], kinds: Kinds) -> int:
    """How many of the flags flags only this mechanism takes."""
    others = {flag for other in kinds if other is not kind for flag in flags_of(other)}
    return sum(1 for flag in flags_of(kind) if flags.get(flag) and flag not in others)


def smallest_holding(on: set[str], kinds: Kinds) -> type[Mechanism] | None:
    """The mechanism with the fewest flags among those whose flags hold all of ``on`` (the
    one whose flags are exactly ``on``, where there is one); None when no mechanism takes
    them all.

    Raises:
        UsageError: two of equal size hold them (the flags are refused naming both).
    """
    holding = [kind for kind in kinds if on <= set(flags_of(kind))]
    return _one_of(holding, lambda k: -len(flags_of(k)), on)


def _one_of(
    kinds: list[type[Mechanism]], score: Callable[[type[Mechanism]], Any], on: set[str]
) -> type[Mechanism] | None:
    """The kind of highest ``score``; refused when two share it (never the first
    registered)."""
    if not kinds:
        return None
    best = max(score(kind) for kind in kinds)
    tied = [kind for kind in kinds if score(kind) == best]
    if len(tied) > 1:
        names = " or ".join(kind.name for kind in tied)
        raise UsageError(
            f"{' '.join(sorted(on))} could mean {names}: give --mechanism to say which"
        )
    return tied[0]


def likeliest(on: set[str], kinds: Kinds) -> type[Mechanism]:
    """The mechanism the flags ``on`` most likely ask for: the smallest that takes them all,
    else the one the most distinctive of them belong to (``--gamma`` with ``--sigma``:
    LNMax, whose flag no other mechanism takes).

    Raises:
        UsageError: two fit equally well (refused naming both).
    """
    kinds = list(kinds)
    found = smallest_holding(on, kinds)
    if found is not None:
        return found
    flags = dict.fromkeys(on, True)
    found = _one_of(
        kinds, lambda k: (_distinctive(k, flags, kinds), len(on & set(flags_of(k)))), on
    )
    assert found is not None  # ``kinds`` is never empty: the built-ins at least
    return found


def meaning_sets(kind: type[Mechanism]) -> list[tuple[str, ...]]:
    """The sets of flags that mean ``kind`` without ``--mechanism``: its flags (``analyze``,
    ``smooth-sensitivity``, ``aggregate``), and ``plan``'s: its parameters, then each but
    one plan can solve for (a mechanism that needs the baseline, which plan does not take,
    is planned by name only)."""
    found = [flags_of(kind)]
    if not kind.needs_baseline:
        parameters = tuple(p.flag for p in kind.parameters)
        found += [parameters]
        found += [
            tuple(f for f in parameters if f != p.flag) for p in kind.parameters if p.solvable
        ]
    return list(dict.fromkeys(flags for flags in found if flags))


def changed_meaning(kind: type[Mechanism], builtins: Collection[type[Mechanism]]) -> str | None:
    """How registering ``kind`` beside the built-ins would change what one of their command
    lines means (another mechanism, or a tie), or None: a plugin never makes a documented
    command ambiguous. Checked against the built-ins alone, so that whether a plugin is
    refused never depends on the others installed."""
    kinds = [*builtins, kind]
    for builtin in builtins:
        for flags in meaning_sets(builtin):
            try:
                found = likeliest(set(flags), kinds)
            except UsageError:
                found = None
            if found is not builtin:
                meant = "mean it" if found is kind else f"mean {builtin.name} or {kind.name}"
                return (
                    f"its flags would make {' '.join(flags)}, which mean {builtin.name}, "
                    f"{meant} (a plugin may not change what a built-in's flags mean)"
                )
    return None

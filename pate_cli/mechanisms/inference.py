"""Which mechanism a command line's flags ask for: the one rule of ``analyze``,
``smooth-sensitivity``, ``aggregate``, ``compare`` and ``plan``, read from the registry.

A mechanism's flags are its parameters (``--sigma``...) and, when it needs the student's
votes, the baseline. ``--mechanism NAME`` names one; without it the flags given choose:

1. among the mechanisms that take every flag given, the one whose flags are exactly those
   (``--sigma`` alone is GNMax, even beside a plugin that takes ``--sigma`` and more;
   ``--threshold --sigma1 --sigma`` Confident-GNMax, with a baseline Interactive-GNMax),
   else the one with the fewest flags (``plan --threshold --sigma1``: Confident-GNMax,
   solving for its ``--sigma``);
2. when none takes them all, the one that takes the most flags no other mechanism takes
   (``--gamma --sigma``: LNMax, which then refuses ``--sigma``): a flag only one mechanism
   declares decides it;
3. ``plan`` without a mechanism flag plans GNMax.

Any remaining tie is refused naming both. No two mechanisms take the same flags, and no
plugin may change what a built-in's flags mean (the registry refuses both; the rule is
``pate_cli.mechanisms.flags``'), so which mechanism a set of flags means never depends on the
order the mechanisms were registered in, and no plugin makes a documented command ambiguous.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import fields
from itertools import product
from typing import Any

from pate_cli.choices import ThresholdBound
from pate_cli.common import checks
from pate_cli.common.spelling import given
from pate_cli.errors import UsageError
from pate_cli.mechanisms import flags as rule
from pate_cli.mechanisms.base import Mechanism
from pate_cli.mechanisms.plugins import calling
from pate_cli.mechanisms.registry import BASELINE, by_name, flags_of, registered


def _checked(
    kind: type[Mechanism], flags: Mapping[str, bool], how: str, shown: Mapping[str, str]
) -> None:
    """Refuse flags the mechanism does not take, and flags it needs that are missing."""
    needed = flags_of(kind)
    extra = [flag for flag, on in flags.items() if on and flag not in needed]
    missing = [flag for flag in needed if not flags.get(flag)]
    if extra:
        raise UsageError(
            f"{', '.join(shown.get(f, f) for f in extra)} cannot be used with {how}{kind.name} "
            f"(it takes {' '.join(shown.get(f, f) for f in needed)})"
        )
    if missing:
        raise UsageError(f"{how}{kind.name} needs {', '.join(shown.get(f, f) for f in missing)}")


def chosen_one(
    name: str | None, flags: Mapping[str, bool], shown: Mapping[str, str] | None = None
) -> type[Mechanism]:
    """The one mechanism the flags ask for (``analyze``, ``aggregate``, ``plan``).

    Raises:
        UsageError: no mechanism flag, a required flag missing, or one of another mechanism.
    """
    shown = shown or {}
    if name is not None:
        kind = registered(name)
        _checked(kind, flags, "", shown)
        return kind
    on = {flag for flag, value in flags.items() if value}
    if not on:
        raise UsageError(f"no mechanism: give {_menu()}")
    kind = likeliest(on)
    _checked(kind, flags, "", shown)
    return kind


def smallest_holding(on: set[str]) -> type[Mechanism] | None:
    """The registered mechanism with the fewest flags among those that take all of ``on``
    (``pate_cli.mechanisms.flags``); None when none takes them all.

    Raises:
        UsageError: two of equal size take them (refused naming both).
    """
    return rule.smallest_holding(on, by_name().values())


def likeliest(on: set[str]) -> type[Mechanism]:
    """The registered mechanism the flags ``on`` mean (``pate_cli.mechanisms.flags``).

    Raises:
        UsageError: two fit equally well (refused naming both).
    """
    return rule.likeliest(on, by_name().values())


def chosen_all(name: str | None, flags: Mapping[str, bool]) -> list[type[Mechanism]]:
    """Every mechanism the flags ask for (``compare``): with ``--mechanism``, that one;
    else each whose flags are all flags.

    Raises:
        UsageError: no mechanism flag, or a mechanism begun and not finished.
    """
    if name is not None:
        kind = registered(name)
        _checked(kind, flags, "--mechanism ", {})
        return [kind]
    on = {flag for flag, value in flags.items() if value}
    if not on:
        raise UsageError(f"nothing to compare: give {_menu()}, each a comma list")
    complete = [kind for kind in by_name().values() if set(flags_of(kind)) <= on]
    for kind in by_name().values():  # a mechanism begun: its distinctive flags flags
        begun = on & set(flags_of(kind)) - {f for c in complete for f in flags_of(c)}
        if begun and not any(set(flags_of(c)) >= begun for c in complete):
            wanted = smallest_holding(begun) or kind
            missing = [f for f in flags_of(wanted) if f not in on]
            raise UsageError(f"{wanted.name} needs {', '.join(missing)}")
    return complete


def _menu() -> str:
    """The flags of every mechanism: "--sigma (gnmax), --threshold --sigma1 --sigma
    (confident-gnmax), ..."."""
    return ", ".join(f"{' '.join(flags_of(kind))} ({kind.name})" for kind in by_name().values())


def _flags(given: Mapping[str, bool], has_baseline: bool) -> dict[str, bool]:
    """Which mechanism flags are given, from which parameters are (by keyword)."""
    flags = {"--" + key.replace("_", "-"): on for key, on in given.items()}
    flags[BASELINE] = has_baseline
    return flags


def build(kind: type[Mechanism], values: Mapping[str, Any], threshold_bound: str) -> Mechanism:
    """The mechanism ``kind`` with its parameters from ``values`` (and the threshold bound
    when it has a threshold step).

    Raises:
        UsageError: ``threshold_bound`` other than the default for a mechanism without one.
    """
    bound = checks.choice(ThresholdBound, threshold_bound, "threshold-bound")
    takes_bound = "threshold_bound" in {item.name for item in fields(kind)}  # type: ignore[arg-type]
    if bound is not ThresholdBound.THEOREM6 and not takes_bound:
        raise UsageError(
            f"{given('threshold-bound', bound.value)}: {kind.name} has no threshold step"
        )
    extra = {"threshold_bound": bound.value} if takes_bound else {}
    with calling(kind, "its construction"):
        return kind(**{p: values[p] for p in kind.keywords()}, **extra)


def infer_mechanism(
    name: str | None,
    values: Mapping[str, float | int | None],
    *,
    has_baseline: bool = False,
    baseline_flag: str = BASELINE,
    threshold_bound: str | ThresholdBound = ThresholdBound.THEOREM6,
) -> Mechanism:
    """The mechanism named by ``--mechanism``, or inferred from the flags given: ``values``
    are the mechanism flags' values by parameter (``sigma=40``), None where not given.

    Raises:
        UsageError: a required flag is missing or a flag belongs to another mechanism.
    """
    flags = _flags({key: value is not None for key, value in values.items()}, has_baseline)
    kind = chosen_one(name, flags, {BASELINE: baseline_flag})
    return build(kind, values, str(ThresholdBound(threshold_bound).value))


def grid(
    name: str | None,
    lists: Mapping[str, Sequence[float]],
    *,
    has_baseline: bool = False,
    threshold_bound: str | ThresholdBound = ThresholdBound.THEOREM6,
    max_rows: int,
) -> list[Mechanism]:
    """Every setting ``compare`` asks for, in a fixed order: by mechanism (the registry's),
    then the product of its parameters' lists.

    Raises:
        UsageError: missing or conflicting flags, a value outside its domain, too many rows.
    """
    flags = _flags({key: bool(values) for key, values in lists.items()}, has_baseline)
    kinds = chosen_all(name, flags)
    bound = checks.choice(ThresholdBound, threshold_bound, "threshold-bound").value
    if bound != ThresholdBound.THEOREM6 and all(kind.answers_every_query for kind in kinds):
        raise UsageError(f"{given('threshold-bound', bound)}: no setting has a threshold step")
    rows: list[Mechanism] = []
    for kind in kinds:
        for values in product(*(lists.get(p, ()) for p in kind.keywords())):
            rows.append(build(kind, dict(zip(kind.keywords(), values, strict=True)), bound))
            if len(rows) > max_rows:
                raise UsageError(f"the lists make more than {max_rows} settings; shorten them")
    return rows

"""The one registry of mechanisms: the built-ins, those registered in code, and those other
packages offer through the entry-point group ``pate_cli.mechanisms``.

The registry fills itself on first use (:func:`registry`): the built-ins first, then every
entry point of the group, each loaded then and never at ``import pate_cli``. An entry point
names a :class:`Mechanism` subclass (``gumbel = "my_package:GumbelMax"``) or a module whose
mechanisms it registers; one that fails to load or to register, whatever it raises, is one
warning naming it (:class:`PluginWarning`; the command line prints it as one line), never a
crash and never a silent absence. ``pate --help`` lists what is installed (:func:`installed`),
a plugin's with the distribution and version it came from (:func:`provenance`, which records
keep).

Registration refuses, whoever registers: a built-in's name or ``short`` label (even one
unregistered), a name or label taken; a parameter that is not a :class:`Parameter`, whose
name a command or library call uses for itself (:data:`RESERVED`), or that another mechanism
declares differently; a set of flags another mechanism already takes; and flags that would
change what a built-in's command line means (``pate_cli.mechanisms.inference``), so that
which mechanism a set of flags means never depends on the order of registration, and no
plugin makes a documented command ambiguous.
"""

from __future__ import annotations

import dataclasses
import importlib.machinery
import os
import sys
import warnings
from collections.abc import Iterable
from types import ModuleType
from typing import Any

from pate_cli.common.spelling import given
from pate_cli.errors import UsageError
from pate_cli.mechanisms import plugins
from pate_cli.mechanisms.base import Mechanism
from pate_cli.mechanisms.flags import BASELINE, changed_meaning, flags_of
from pate_cli.mechanisms.parameters import Parameter

__all__ = ["BASELINE", "flags_of"]  # the flags' names, where the registry's users read them

GROUP = "pate_cli.mechanisms"
"""The entry-point group packages declare their mechanisms in."""

#: Names the commands and the library's calls use for themselves: no mechanism parameter
#: may take one (``tests/test_parameters.py`` checks every command's options against it).
RESERVED = frozenset(
    {
        "accountant", "all_orders", "alpha", "answered", "answered_output", "answered_path",
        "as_json", "baseline", "baseline_path", "beta", "breakdown", "budget", "budget_path",
        "candidates", "claim", "classes", "conversion", "csv_path", "ctx", "data_independent",
        "delta", "engine", "epsilon", "fmt", "force", "format", "gate_on", "half_even", "indices",
        "ledger_path", "max_answered", "max_epsilon", "max_queries", "mechanism", "mechanisms",
        "member", "name", "no_release", "noise_block", "num_classes", "opening_path", "order",
        "orders", "orders_text", "output", "pld", "plot_path", "progress", "public", "queries",
        "query", "quiet", "record_path", "reference_local_sensitivity", "release", "runs",
        "scheduler", "seed", "seed_file", "sigma_ss", "skip_conditions", "sort", "strict",
        "student_confidence", "student_probs", "student_probs_path", "teachers", "test_from",
        "threshold_bound", "true_labels", "true_labels_path", "votes", "votes_path", "walk",
        "walk_local_sensitivity", "workers",
    }
)  # fmt: skip


class PluginWarning(UserWarning):
    """A mechanism plugin that could not be loaded or registered (the message names it)."""


_REGISTRY: dict[str, type[Mechanism]] = {}
_ORIGINS: dict[str, str] = {}
_DISTRIBUTIONS: dict[str, tuple[str, str]] = {}  # a plugin's name -> (distribution, version)
_FAILURES: list[str] = []
_LOADED = False
_LOADING: str | None = None  # the entry point being loaded, while it is


def by_name() -> dict[str, type[Mechanism]]:
    """Every mechanism by name, in order of registration: the built-ins, then the entry
    points' (loaded on this first call), then those registered in code."""
    global _LOADED
    if not _LOADED:
        _LOADED = True
        for kind in _builtins():
            _add(kind, "built in")
        _load_entry_points()
    return _REGISTRY


plugins.loads_known(by_name)


def _builtins() -> tuple[type[Mechanism], ...]:
    """The built-in mechanisms, in the order of compare's rows and every list of them."""
    from pate_cli.mechanisms.confident import ConfidentGNMax
    from pate_cli.mechanisms.gnmax import GNMax
    from pate_cli.mechanisms.interactive import InteractiveGNMax
    from pate_cli.mechanisms.lnmax import LNMax

    return (GNMax, ConfidentGNMax, InteractiveGNMax, LNMax)


def builtins() -> tuple[type[Mechanism], ...]:
    """The built-in mechanisms, whatever else is installed (the docs' tables are theirs)."""
    return _builtins()


def default() -> type[Mechanism]:
    """The mechanism meant when no flag names one (``plan --queries N`` alone): GNMax."""
    return _builtins()[0]


def register(kind: type[Mechanism]) -> type[Mechanism]:
    """Make ``kind`` known by its name to the command line, ``compare``, ``plan`` and the
    records (usable as a class decorator).

    Raises:
        UsageError: what :func:`problem` finds (a built-in's name or label, a name taken,
            flags another mechanism takes or that would change what a built-in's flags
            mean, a parameter declared differently elsewhere...).
    """
    by_name()
    _add(kind, "registered in code")
    return kind


def unregister(name: str) -> None:
    """Forget the mechanism ``name`` (a test's, or a notebook's experiment).

    Raises:
        UsageError: ``name`` is a built-in's (records of it must keep reading).
    """
    if name in {kind.name for kind in _builtins()}:
        raise UsageError(f"mechanism {name!r} is built in: it cannot be unregistered")
    kind = _REGISTRY.pop(name, None)
    _ORIGINS.pop(name, None)
    _DISTRIBUTIONS.pop(name, None)
    if kind is not None:
        plugins.forget(kind)


def _add(kind: type[Mechanism], origin: str, distribution: tuple[str, str] | None = None) -> None:
    found = problem(kind)
    if found is not None:
        raise UsageError(f"mechanism {getattr(kind, 'name', kind)!r} ({origin}): {found}")
    _REGISTRY[kind.name] = kind
    _ORIGINS[kind.name] = origin
    if distribution is not None:
        _DISTRIBUTIONS[kind.name] = distribution
    if kind not in _builtins():  # how its failures name it (pate_cli.mechanisms.plugins)
        package = None if distribution is None else kind.__module__.split(".")[0]
        plugins.know(kind, _described(kind, origin, distribution), package)


def problem(kind: object) -> str | None:
    """Why ``kind`` cannot be registered beside the mechanisms registered now, or None."""
    if not (isinstance(kind, type) and issubclass(kind, Mechanism)):
        return "not a subclass of pate_cli.mechanisms.Mechanism"
    if not dataclasses.is_dataclass(kind):
        return "not a dataclass (declare it with @dataclass(frozen=True))"
    name, short = getattr(kind, "name", None), getattr(kind, "short", None)
    if not (isinstance(name, str) and name and isinstance(short, str) and short):
        return "name and short must be non-empty text"
    if kind not in _builtins():
        if name in {other.name for other in _builtins()}:
            return f"the name {name!r} is a built-in's"
        if short in {other.short for other in _builtins()}:
            return f"the short label {short!r} is a built-in's"
    if name in _REGISTRY:
        return f"the name {name!r} is taken ({_ORIGINS[name]})"
    if any(other.short == short for other in _REGISTRY.values()):
        return f"the short label {short!r} is taken"
    found = _parameter_problem(kind)
    if found is None and kind not in _builtins():
        found = changed_meaning(kind, _builtins())
    return found


def _parameter_problem(kind: type[Mechanism]) -> str | None:
    """What is wrong with the mechanism's declared parameters, or None."""
    declared = getattr(kind, "parameters", None)
    if not (isinstance(declared, tuple) and declared):
        return "parameters must be a non-empty tuple of Parameter declarations"
    fields = {item.name for item in dataclasses.fields(kind)}  # type: ignore[arg-type]
    known = {p.name: p for other in _REGISTRY.values() for p in other.parameters}
    for parameter in declared:
        if not isinstance(parameter, Parameter):
            return f"parameter {parameter!r} is not a Parameter declaration"
        if parameter.name in RESERVED or not parameter.name.isidentifier():
            return f"the parameter name {parameter.name!r} is not free (a command uses it)"
        if parameter.name not in fields:
            return f"the parameter {parameter.name!r} is not one of its fields"
        if known.get(parameter.name, parameter) != parameter:
            return f"the parameter {parameter.name!r} is declared differently by another mechanism"
    flags = set(flags_of(kind))
    for other in _REGISTRY.values():
        if set(flags_of(other)) == flags:
            return f"{' '.join(sorted(flags))} are already {other.name}'s flags"
    return None


def _load_entry_points() -> None:
    """Register the mechanisms of the group's entry points; a failure is one warning,
    whatever the plugin raised (``SystemExit`` included), but a signal's interrupt."""
    if not _may_declare(GROUP):
        return  # importlib.metadata (email, zipfile, csv) not imported for nothing
    from importlib.metadata import entry_points

    global _LOADING
    for point in entry_points(group=GROUP):
        where = f"plugin {point.name!r} ({point.value})"
        _LOADING = where
        try:
            distribution = _distribution(point)
            for kind in _mechanisms_in(point.load()):
                if _REGISTRY.get(getattr(kind, "name", "")) is not kind:  # not by its import
                    _add(kind, _shown(where, distribution), distribution)
        except BaseException as error:  # whatever a plugin raises, it is one warning line
            if plugins.is_interrupt(error):
                raise  # ``loading()`` still names the plugin, for the line that says so
            _fail(f"the mechanism {where} was not loaded: {plugins.one_line(error)}")
        _LOADING = None


def _may_declare(group: str) -> bool:
    """Whether an installed distribution may declare an entry point of ``group``: False
    only where none can, read as ``importlib.metadata`` reads them but without it (its import
    is most of what ``pate --help`` would pay for plugins where none is installed). A
    ``.dist-info`` or ``.egg-info`` folder on ``sys.path`` whose ``entry_points.txt`` names
    the group may; so does whatever this does not read (an entry of ``sys.path`` that is a
    zip, an egg or not a string, a finder of distributions other than the path's)."""
    if any(
        hasattr(finder, "find_distributions") and finder is not importlib.machinery.PathFinder
        for finder in sys.meta_path
    ):
        return True
    needle = group.encode()
    for entry in sys.path:
        if not isinstance(entry, str):
            return True  # bytes or another path object: not read here
        folder = entry or "."
        if folder.lower().endswith(".egg"):
            return True
        try:
            names = os.listdir(folder)
        except NotADirectoryError:
            return True  # a zip: importlib.metadata reads its distributions
        except OSError:
            continue  # missing or unreadable: no distribution there either
        for name in names:
            if not name.lower().endswith((".dist-info", ".egg-info")):
                continue
            try:
                with open(os.path.join(folder, name, "entry_points.txt"), "rb") as points:
                    if needle in points.read():
                        return True
            except OSError:
                continue
    return False


def _shown(where: str, distribution: tuple[str, str] | None) -> str:
    """Where a plugin's mechanism comes from, as ``pate --help`` lists it: "plugin gumbel-max
    1.0, gumbel_max:GumbelMax" (its distribution and version, and its entry point's object),
    or "plugin 'gumbel-max' (gumbel_max:GumbelMax)" where its distribution is not known."""
    if distribution is None:
        return where
    return f"plugin {' '.join(distribution)}, {where.split(' (', 1)[1][:-1]}"


def _distribution(point: Any) -> tuple[str, str] | None:
    """The distribution an entry point comes from, and its version (None: not known)."""
    found = getattr(point, "dist", None)
    if found is None or found.metadata["Name"] is None:
        return None
    return str(found.metadata["Name"]), str(found.version)


def loading() -> str | None:
    """The plugin whose entry point is being loaded ("plugin 'x' (module:Class)"), while it
    is; None otherwise."""
    return _LOADING


def _mechanisms_in(loaded: Any) -> Iterable[type[Mechanism]]:
    """The mechanisms an entry point names: a class, or a module's classes."""
    if isinstance(loaded, ModuleType):
        return [
            value
            for value in vars(loaded).values()
            if isinstance(value, type)
            and issubclass(value, Mechanism)
            and value.__module__ == loaded.__name__
            and "name" in value.__dict__
        ]
    return [loaded]


def _fail(message: str) -> None:
    _FAILURES.append(message)
    warnings.warn(message, PluginWarning, stacklevel=3)


def failures() -> tuple[str, ...]:
    """The plugins that could not be loaded, one line each (the registry loaded first)."""
    by_name()
    return tuple(_FAILURES)


def installed() -> list[tuple[str, str]]:
    """Each mechanism's name and where it comes from ("built in", or its plugin)."""
    return [(name, _ORIGINS[name]) for name in by_name()]


def provenance(name: str) -> dict[str, str]:
    """The distribution the mechanism ``name`` came from, with its version (``{"gumbel-max":
    "1.0"}``): what a record keeps beside pate's version. Empty for a built-in, and for a
    mechanism registered in code or not registered."""
    by_name()
    found = _DISTRIBUTIONS.get(name)
    return {} if found is None else {found[0]: found[1]}


def _described(kind: type, origin: str, distribution: tuple[str, str] | None) -> str:
    """A mechanism from outside pate as its failure names it: "the mechanism 'gumbel-max' of
    the plugin gumbel-max 1.0", "... 'wide' (registered in code, module tests.test_x)"."""
    name = getattr(kind, "name", kind.__name__)
    if distribution is not None:
        return f"the mechanism {name!r} of the plugin {' '.join(distribution)}"
    if origin.startswith("plugin"):
        return f"the mechanism {name!r} of the {origin}"
    return f"the mechanism {name!r} ({origin}, module {kind.__module__})"


def registered(name: object) -> type[Mechanism]:
    """The mechanism class named ``name``.

    Raises:
        UsageError: no mechanism has that name.
    """
    known = by_name()
    try:
        return known[str(name)]
    except KeyError:
        raise UsageError(
            f"{given('mechanism', name, quote=True)}: expected one of {', '.join(known)}"
        ) from None


def is_mechanism(value: object) -> bool:
    return isinstance(value, Mechanism)


def _mechanism_classes() -> str:
    """The mechanism classes, as a caller writes them: "pate.GNMax(sigma), ... or
    pate.LNMax(gamma)" (every registered one)."""
    shown = [f"pate.{kind.__name__}({', '.join(kind.keywords())})" for kind in by_name().values()]
    return f"{', '.join(shown[:-1])} or {shown[-1]}" if len(shown) > 1 else shown[0]


def as_mechanism(mechanism: Any, name: str = "mechanism") -> Mechanism:
    """A mechanism object; anything else (a name, a dict) is a TypeError saying what to pass."""
    if not is_mechanism(mechanism):
        raise TypeError(
            f"{name}={mechanism!r}: expected a mechanism object, {_mechanism_classes()}"
        )
    return mechanism  # type: ignore[no-any-return]


def mechanism_from_dict(block: dict[str, Any]) -> Mechanism:
    """The mechanism a report's ``mechanism`` block describes (``to_json_dict``'s inverse).

    Raises:
        UsageError: an unknown name, or parameters that do not fit it.
    """
    parameters = dict(block)
    known = by_name()
    kind = known.get(str(parameters.pop("name", None)))
    if kind is None:
        raise UsageError(f"mechanism {block!r}: unknown name; expected one of {', '.join(known)}")
    from pate_cli.mechanisms.plugins import calling

    with calling(kind, "its construction"):
        try:
            return kind(**parameters)
        except TypeError:
            raise UsageError(f"mechanism {block!r}: parameters that do not fit it") from None


def answers_every_query(block: dict[str, Any]) -> bool:
    """Whether the mechanism a report's ``mechanism`` block names answers every query."""
    return registered(str(block.get("name"))).answers_every_query


def declarations() -> dict[str, Parameter]:
    """Every registered mechanism's parameters by name, in order (each once)."""
    return {p.name: p for kind in by_name().values() for p in kind.parameters}

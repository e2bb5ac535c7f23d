"""The boundary between pate and a mechanism from outside it (a plugin's, or one registered in
code): a failure there is the mechanism's, said as such, never pate's bug.

Every subclass of :class:`~pate_cli.mechanisms.base.Mechanism` defined outside ``pate_cli``
has the members pate calls guarded where they are defined (:func:`guard`, from the base's
``__init_subclass__``): its ``run``, and its ``answer_step`` and ``threshold_step``, whose
steps pate then sees through :class:`CheckedStep`. Its construction by pate (from flags, from
a record) is guarded by :class:`calling`. So wherever pate asks such a mechanism for
something:

- anything it raises (``SystemExit`` and a ``KeyboardInterrupt`` it raises itself included;
  a signal's interrupt, a ``MemoryError`` and pate's own typed errors pass on unchanged:
  a plugin refuses bad input the way pate does) is a :class:`~pate_cli.errors.PluginError`;
- anything it returns out of contract is one too: a NaN among its figures, a negative Renyi
  DP, an agreement outside [0, 1], figures of the wrong shape, labels out of range.

The error names the mechanism, the distribution and version it came from, and what it did;
the command line prints it as one line, exit 6, before anything is written or charged.
"""

from __future__ import annotations

import dataclasses
import functools
import math
import signal
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from pate_cli.errors import PateError, PluginError

if TYPE_CHECKING:  # a mechanism is any class here: this module imports no other of pate's
    import numpy as np

    Mechanism = Any

_BUILT_IN = "pate_cli."
# What each member's figures must be besides numbers that are not NaN.
_RDP = "a Renyi DP"  # never negative
_PROBABILITY = "a probability"  # in [0, 1]
_LOG_PROBABILITY = "a log-probability"  # at most 0
_RULES = {
    "cost": _RDP,
    "data_independent": _RDP,
    "joint": _RDP,
    "part": _RDP,
    "agreement": _PROBABILITY,
    "logq": _LOG_PROBABILITY,
    "logq_neighbour": _LOG_PROBABILITY,
    "log_probabilities": _LOG_PROBABILITY,
    "outcome_bounds": _LOG_PROBABILITY,
}
# Members whose figures have one entry a query of their first argument.
_PER_QUERY = frozenset({"logq", "logq_neighbour", "agreement"})


def is_builtin(kind: type) -> bool:
    """Whether ``kind`` (a mechanism or a step class) is pate's own."""
    return kind.__module__.startswith(_BUILT_IN)


def is_interrupt(error: BaseException) -> bool:
    """A signal's interrupt, never a plugin's doing: pate's own (it carries the signal), or a
    ``KeyboardInterrupt`` where SIGINT is Python's own handler (a library caller's Ctrl-C). On
    the command line SIGINT is pate's handler, so a bare ``KeyboardInterrupt`` is raised."""
    if not isinstance(error, KeyboardInterrupt):
        return False
    if getattr(error, "signum", None) is not None:
        return True
    return signal.getsignal(signal.SIGINT) is signal.default_int_handler


def one_line(error: BaseException) -> str:
    """An exception as one line: its type and its message."""
    said = " ".join(str(error).split())
    return f"{type(error).__name__}: {said}" if said else type(error).__name__


# How the registry names each mechanism from outside pate it holds, and the package of its
# distribution (None: registered in code): :func:`know` and :func:`forget`.
_KNOWN: dict[type, tuple[str, str | None]] = {}


def know(kind: type, named: str, package: str | None) -> None:
    """``kind`` is registered: its failures name it ``named`` ("the mechanism 'gumbel-max' of
    the plugin gumbel-max 1.0"), and code of ``package`` (its distribution's) is its own."""
    _KNOWN[kind] = (named, package)


def forget(kind: type) -> None:
    """``kind`` is no longer registered."""
    _KNOWN.pop(kind, None)


# The registry's loading of the installed plugins (set by it): a process that imported a
# mechanism's class without the registry (an engine's worker, which unpickled it) loads them
# before naming one, so that a failure names the plugin as the process that sent it would.
_LOADERS: list[Callable[[], object]] = []


def loads_known(load: Callable[[], object]) -> None:
    """``load()`` makes every installed plugin known (the registry's ``by_name``)."""
    _LOADERS.append(load)


def failure(kind: type, did: str) -> PluginError:
    """The error of the mechanism ``kind`` that ``did`` something ("its run raised ...")."""
    if kind not in _KNOWN:
        for load in _LOADERS:
            load()
    name = getattr(kind, "name", kind.__name__)
    named = _KNOWN.get(kind, (f"the mechanism {name!r} (module {kind.__module__})", None))[0]
    return PluginError(
        f"{named} failed: {did}; the failure is the mechanism's, not pate's: "
        "report it to its authors"
    )


class calling:  # noqa: N801 (a context manager, named as one)
    """Around a call into the mechanism ``kind`` (``what`` it is: "its run"): anything it
    raises, but an interrupt, a ``MemoryError`` and pate's typed errors, is its
    :class:`PluginError`."""

    def __init__(self, kind: type, what: str) -> None:
        self.kind, self.what = kind, what

    def __enter__(self) -> None:
        return None

    def __exit__(self, kind: object, error: BaseException | None, traceback: object) -> None:
        if error is None or isinstance(error, PateError | PluginError | MemoryError):
            return
        if not is_interrupt(error):
            raise failure(self.kind, f"{self.what} raised {one_line(error)}") from error


def guard(cls: type[Mechanism]) -> None:
    """Guard the members pate calls that ``cls`` defines itself (not those it inherits: a
    parent's are guarded already, or pate's own)."""
    if is_builtin(cls):
        return
    members = vars(cls)
    if "run" in members and callable(members["run"]):
        setattr(cls, "run", _guarded_run(members["run"]))  # noqa: B010 (a method replaced)
    for name in ("answer_step", "threshold_step"):
        member = members.get(name)
        if isinstance(member, property) and member.fget is not None:
            setattr(cls, name, property(_guarded_step(member.fget, name.replace("_", " "))))


def _guarded_run(run: Callable[..., Any]) -> Callable[..., Any]:
    @functools.wraps(run)
    def guarded(self: Mechanism, counts: Any, noise: Any, how: Any) -> Any:
        with calling(type(self), "its run"):
            result = run(self, counts, noise, how)
        check_labels(type(self), result, counts)
        return result

    return guarded


def _guarded_step(get: Callable[[Any], Any], role: str) -> Callable[[Any], Any]:
    @functools.wraps(get)
    def guarded(self: Mechanism) -> Any:
        with calling(type(self), f"its {role}"):
            step = get(self)
        if step is None or isinstance(step, CheckedStep) or is_builtin(type(step)):
            return step
        return CheckedStep(step, type(self), f"its {role}'s")

    return guarded


class CheckedStep:
    """A step of a mechanism from outside pate, as pate sees it: each member pate asks for
    is the step's own, a failure in it the mechanism's, and every figure it gives checked."""

    __slots__ = ("_kind", "_step", "_whose")

    def __init__(self, step: object, kind: type, whose: str) -> None:
        self._step, self._kind, self._whose = step, kind, whose

    def __getattr__(self, name: str) -> Any:
        if name.startswith("_"):  # pate asks for public members only
            raise AttributeError(name)
        what = f"{self._whose} {name}"
        try:
            value = getattr(self._step, name)
        except AttributeError:  # a member it lacks (an optional one): as the step itself
            raise
        except BaseException:
            with calling(self._kind, what):
                raise
        return _checked(value, self._kind, what, _RULES.get(name), name in _PER_QUERY)

    def __repr__(self) -> str:
        return repr(self._step)

    def __eq__(self, other: object) -> bool:
        mine = other._step if isinstance(other, CheckedStep) else other
        return bool(self._step == mine)

    def __hash__(self) -> int:
        return hash(self._step)


def _checked(value: Any, kind: type, what: str, rule: str | None, per_query: bool) -> Any:
    """``value`` as the mechanism gave it, once its figures are checked; a function it gave
    (a cost as a function of log q) is checked as it is called."""
    if callable(value) and not isinstance(value, type):
        return _checked_function(value, kind, what, rule, per_query)
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        functions = {}
        for item in dataclasses.fields(value):
            field = getattr(value, item.name)
            if callable(field):
                functions[item.name] = _checked(field, kind, f"{what}'s {item.name}", rule, False)
            else:
                said = f"{what} returned a {type(value).__name__} whose {item.name} is"
                _figures(field, kind, said, rule)
        return dataclasses.replace(value, **functions) if functions else value
    _figures(value, kind, f"{what} returned", rule)
    return value


def _checked_function(
    function: Callable[..., Any], kind: type, what: str, rule: str | None, per_query: bool
) -> Callable[..., Any]:
    def checked(*args: Any, **kwargs: Any) -> Any:
        with calling(kind, what):
            result = function(*args, **kwargs)
        if per_query and args:
            _per_query(result, args[0], kind, what)
        named = f"{what}'s function" if callable(result) else what
        return _checked(result, kind, named, rule, False)

    return checked


def _per_query(result: Any, counts: Any, kind: type, what: str) -> None:
    """One figure a query of ``counts``, in a numpy array."""
    import numpy as np  # here: pate --version and --help load no numpy (README)

    queries = getattr(counts, "shape", (None,))[0]
    if not isinstance(result, np.ndarray):
        raise failure(kind, f"{what} returned {type(result).__name__}, not a numpy array")
    if queries is not None and result.shape != (queries,):
        raise failure(
            kind, f"{what} returned an array of shape {result.shape} for {queries} queries"
        )


def _figures(value: Any, kind: type, said: str, rule: str | None) -> None:
    """The numbers of ``value`` (a number, an array, a tuple of them; anything else is not
    looked at): none NaN, and each within ``rule``; else the failure ``said`` begins ("its
    answer step's logq returned")."""
    import numpy as np

    if isinstance(value, tuple | list):
        for item in value:
            _figures(item, kind, said, rule)
        return
    if isinstance(value, bool) or not isinstance(value, float | int | np.number | np.ndarray):
        return
    numbers = np.asarray(value)
    if numbers.dtype.kind not in "fiu" or numbers.size == 0:
        return
    numbers = numbers.astype(np.float64, copy=False)
    if np.isnan(numbers).any():
        raise failure(kind, f"{said} NaN{_where(np.isnan(numbers))}")
    bad = {
        _RDP: numbers < 0,
        _PROBABILITY: (numbers < 0) | (numbers > 1),
        _LOG_PROBABILITY: numbers > 0,
    }.get(rule or "")
    if bad is not None and bad.any():
        shown = float(numbers[bad].flat[0])
        raise failure(kind, f"{said} {shown!r}{_where(bad)}, not {rule}")


def _where(mask: np.ndarray) -> str:
    """Where the first bad figure of an array is ("at [3, 0]"), or nothing for a number."""
    import numpy as np

    if mask.ndim == 0:
        return ""
    first = np.argwhere(mask)[0]
    return f" at [{', '.join(str(int(i)) for i in first)}]"


def check_labels(kind: type, result: Any, counts: Any) -> None:
    """What a mechanism's ``run`` returns: an ``AggregationResult`` of one entry a query, its
    labels whole numbers, -1 (nothing released) or a class of the votes, a class wherever
    the teachers answered."""
    import numpy as np

    from pate_cli.mechanisms.samplers import AggregationResult

    if not isinstance(result, AggregationResult):
        raise failure(kind, f"its run returned {type(result).__name__}, not an AggregationResult")
    queries = getattr(counts, "shape", (None,))[0]
    for name in ("labels", "answered", "seen", "branch"):
        array = getattr(result, name)
        if not isinstance(array, np.ndarray) or array.shape != (queries,):
            shape = getattr(array, "shape", type(array).__name__)
            raise failure(kind, f"its run returned {name} of shape {shape} for {queries} queries")
    labels = result.labels.astype(np.float64)
    whole = np.isfinite(labels) & (labels == np.round(labels))
    classes = counts.shape[1] if isinstance(counts, np.ndarray) else math.inf
    bad = (
        ~whole | (labels < -1) | (labels >= classes) | (result.answered.astype(bool) & (labels < 0))
    )
    if bad.any():
        at = int(np.argmax(bad))
        label = result.labels[at].item()
        said = f"{classes} classes" if math.isfinite(classes) else "classes numbered from 0"
        raise failure(
            kind,
            f"its run returned the label {label!r} for query {at} (the votes have {said}; -1 "
            "where nothing is released, never where the teachers answered)",
        )


def culprit(error: BaseException) -> PluginError | None:
    """The mechanism from outside pate whose code raised ``error`` where no guard stood (a
    member pate reaches some other way), as its failure: the innermost frame of the
    traceback in its module (or, for a plugin's, in the package of its distribution). None
    when no such frame is in it."""
    owners: dict[str, type] = {}
    for kind, (_, package) in _KNOWN.items():
        owners[kind.__module__] = kind
        if package is not None:  # a distribution's: its whole package
            owners.setdefault(package + ".", kind)
    found = None
    trace = error.__traceback__
    while trace is not None:
        module = str(trace.tb_frame.f_globals.get("__name__", ""))
        for owner, kind in owners.items():
            if module == owner or (owner.endswith(".") and module.startswith(owner)):
                found = kind
        trace = trace.tb_next
    return None if found is None else failure(found, f"it raised {one_line(error)}")

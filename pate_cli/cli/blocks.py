"""The commands' options in blocks, each written once: a command is its own options plus the
blocks it takes, and the mechanism block is built from the registry's declarations.

A command function declares only what is its own (``ctx``, its arguments, its own flags);
:func:`command` lays out its signature as ``ctx``, the required ones, then its layout: shared
blocks and :data:`OWN` (where its own defaulted options go). The signature is built each time
the command line is built, so a mechanism registered in code or by a plugin brings its flags
(``--temperature``) to ``analyze``, ``smooth-sensitivity``, ``aggregate``, ``compare`` and
``plan`` with nothing else changed. Typer reads the signature as it reads any function's.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Sequence
from typing import Annotated, Any

import typer

from pate_cli.choices import Conversion, Engine, ThresholdBound, VoteFormat
from pate_cli.cli.options import (
    BaselineOpt,
    BetaOpt,
    BudgetOpt,
    CandidatesOpt,
    ConversionOpt,
    EngineOpt,
    ForceOpt,
    FormatOpt,
    HalfEvenOpt,
    IndicesOpt,
    JsonOpt,
    MaxEpsilonOpt,
    MemberOpt,
    NumClassesOpt,
    OpeningOpt,
    OrdersOpt,
    PublicOpt,
    QueriesOpt,
    QuietOpt,
    RecordOpt,
    SchedulerOpt,
    SeedFileOpt,
    SeedOpt,
    SigmaSsOpt,
    StrictOpt,
    TeachersOpt,
    ThresholdBoundOpt,
    WalkOpt,
    WorkersOpt,
    mechanism_name,
)
from pate_cli.mechanisms import by_name
from pate_cli.mechanisms.parameters import Parameter
from pate_cli.mechanisms.registry import declarations

Block = tuple[inspect.Parameter, ...]


def option(name: str, annotation: Any, default: Any = None) -> inspect.Parameter:
    """One option of a block: its parameter name, its ``Annotated`` alias, its default."""
    return inspect.Parameter(
        name, inspect.Parameter.KEYWORD_ONLY, default=default, annotation=annotation
    )


SELECTION: Block = (
    option("fmt", FormatOpt, VoteFormat.AUTO),
    option("num_classes", NumClassesOpt),
    option("member", MemberOpt),
    option("candidates", CandidatesOpt),
    option("teachers", TeachersOpt),
    option("queries", QueriesOpt),
    option("indices", IndicesOpt),
)
"""VOTES' reading and selection: every command that reads votes."""
ACCOUNTING: Block = (
    option("orders_text", OrdersOpt),
    option("conversion", ConversionOpt, Conversion.CLASSIC),
    option("half_even", HalfEvenOpt, False),
    option("threshold_bound", ThresholdBoundOpt, ThresholdBound.THEOREM6),
)
"""How the cost is accounted: the orders, the conversion, the threshold statistic."""
NOISE: Block = (option("seed", SeedOpt), option("seed_file", SeedFileOpt))
"""Where the noise comes from."""
TUNING: Block = (
    option("beta", BetaOpt),
    option("sigma_ss", SigmaSsOpt),
    option("strict", StrictOpt, True),
    option("walk", WalkOpt, False),
)
"""The smooth-sensitivity release's settings."""
RECORDING: Block = (
    option("record_path", RecordOpt),
    option("opening_path", OpeningOpt),
    option("budget_path", BudgetOpt),
    option("force", ForceOpt, False),
)
"""The release record, the budget charged, and replacing earlier files."""
ENGINE: Block = (
    option("engine", EngineOpt, Engine.LOCAL),
    option("workers", WorkersOpt),
    option("scheduler", SchedulerOpt),
)
"""Where the passes over the queries run (``pate_cli.engines``)."""
OUTPUT: Block = (option("as_json", JsonOpt, False), option("quiet", QuietOpt, False))
"""How the report is printed."""


def gate(gate_on: Any, default: Any, *, public: bool = True) -> Block:
    """The budget gate (``--max-epsilon``, the command's ``--gate-on``) and ``--public``."""
    block = (option("max_epsilon", MaxEpsilonOpt), option("gate_on", gate_on, default))
    return (*block, option("public", PublicOpt, False)) if public else block


OWN = object()
"""In a layout: where the command's own defaulted options go."""

_RESTRICT_HELP = "Compare this mechanism only (default: every mechanism whose flags are given)."


def runs(mechanism: Callable[[], Block], gating: Block, *, release: bool = False) -> tuple:
    """The layout of a command that runs a mechanism on votes and records it (``analyze``,
    ``smooth-sensitivity``, ``aggregate``): the mechanism's options, the command's own, how
    the cost is accounted, the votes' selection, the release's settings (``release``), the
    noise, the record and budget, the gate, the engine, the output."""
    tuning = (TUNING,) if release else ()
    layout = (mechanism, OWN, ACCOUNTING, SELECTION, *tuning, NOISE, RECORDING, gating, ENGINE)
    return (*layout, OUTPUT)


def mechanism_block(*, lists: bool = False, baseline: bool = True) -> Callable[[], Block]:
    """The mechanism's options, from the registry when the command line is built:
    ``--mechanism``, every registered parameter (``compare``: a comma list of those that
    take one), and ``--baseline`` where a mechanism needs it and the command takes it."""

    def build() -> Block:
        kinds = by_name().values()
        help_text = _RESTRICT_HELP if lists else "Aggregator; inferred from the flags when omitted."
        chooser = typer.Option("--mechanism", callback=mechanism_name, help=help_text)
        block = [option("mechanism", Annotated[str | None, chooser])]
        block += [option(p.name, _annotation(p, lists)) for p in declarations().values()]
        if baseline and any(kind.needs_baseline for kind in kinds):
            block.append(option("baseline_path", BaselineOpt))
        return tuple(block)

    return build


def _annotation(parameter: Parameter, lists: bool) -> Any:
    """A parameter's option: a number, or (``compare``) a comma list of numbers."""
    flags = (parameter.flag, *parameter.aliases)
    if lists and parameter.listable:
        listed = f"{parameter.help.rstrip('.')}, a comma list: 20,40,80."
        return Annotated[str | None, typer.Option(*flags, metavar="LIST", help=listed)]
    return Annotated[float | None, typer.Option(*flags, help=parameter.help)]


def command(
    *layout: Block | Callable[[], Block] | object,
) -> Callable[[Callable[..., None]], Command]:
    """A command of its own options and the blocks of ``layout`` (a decorator)."""

    def wrap(function: Callable[..., None]) -> Command:
        return Command(function, layout)

    return wrap


class Command:
    """A command function with its blocks: Typer reads its ``__signature__`` (built anew each
    time, from the registry as it is then) and calls it with every option; the function gets
    its own."""

    def __init__(self, function: Callable[..., None], layout: Sequence[object]) -> None:
        self.function = function
        self.layout = tuple(layout)
        self.__name__ = function.__name__
        self.__qualname__ = function.__qualname__
        self.__module__ = function.__module__
        self.__doc__ = function.__doc__

    def _own(self) -> list[inspect.Parameter]:
        return list(inspect.signature(self.function, eval_str=True).parameters.values())

    @property
    def __signature__(self) -> inspect.Signature:
        own = [p.replace(kind=inspect.Parameter.KEYWORD_ONLY) for p in self._own()]
        required = [p for p in own if p.default is inspect.Parameter.empty]
        rest: list[inspect.Parameter] = []
        for item in self.layout:
            if item is OWN:
                rest += [p for p in own if p.default is not inspect.Parameter.empty]
            else:
                rest += item() if callable(item) else item  # type: ignore[arg-type]
        names = [p.name for p in (*required, *rest)]
        doubled = sorted({name for name in names if names.count(name) > 1})
        assert not doubled, f"{self.__name__}: options given twice: {doubled}"
        return inspect.Signature([*required, *rest])

    @property
    def __annotations__(self) -> dict[str, Any]:  # type: ignore[override]
        return {p.name: p.annotation for p in self.__signature__.parameters.values()}

    def __call__(self, **options: Any) -> None:
        self.function(**{p.name: options[p.name] for p in self._own() if p.name in options})

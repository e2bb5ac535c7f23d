"""A mechanism's parameters are data: the registry refuses what would make a flag mean two
things, no choice depends on the order of registration, every command's mechanism options
come from the declarations, and the docs' tables are the declarations'."""

from __future__ import annotations

import inspect
import json
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import ClassVar

import pytest
import typer

import pate_cli as pate
from pate_cli.cli.app import app
from pate_cli.errors import UsageError
from pate_cli.jobs.planning import plan
from pate_cli.mechanisms import Mechanism, Parameter, infer_mechanism, register
from pate_cli.mechanisms.gnmax import SIGMA
from pate_cli.mechanisms.registry import (
    RESERVED,
    builtins,
    by_name,
    declarations,
    problem,
    unregister,
)
from pate_cli.mechanisms.steps import GaussianAnswer
from tests.conftest import run_cli
from tests.mechanism_tables import mechanisms_markdown, parameters_markdown

ROOT = Path(__file__).resolve().parent.parent
WIDTH = Parameter("width", "The noise's width.", symbol="W")
DEPTH = Parameter("depth", "The noise's depth.", symbol="D")


@dataclass(frozen=True)
class Wide(Mechanism):
    """GNMax by another name and flag: its noise is ``width``."""

    name: ClassVar[str] = "wide"
    short: ClassVar[str] = "wide"
    parameters: ClassVar[tuple[Parameter, ...]] = (WIDTH,)

    width: float

    @property
    def answer_step(self) -> GaussianAnswer:
        return GaussianAnswer(self.width)


@dataclass(frozen=True)
class WideDeep(Mechanism):
    name: ClassVar[str] = "wide-deep"
    short: ClassVar[str] = "wide-deep"
    parameters: ClassVar[tuple[Parameter, ...]] = (WIDTH, DEPTH)

    width: float
    depth: float


@dataclass(frozen=True)
class DeepWide(Mechanism):
    name: ClassVar[str] = "deep-sigma"
    short: ClassVar[str] = "deep-sigma"
    parameters: ClassVar[tuple[Parameter, ...]] = (DEPTH, SIGMA)

    depth: float
    sigma: float


@pytest.fixture
def extra() -> Iterator[list[str]]:
    """Mechanisms registered by the test, forgotten after it."""
    names: list[str] = []
    yield names
    for name in names:
        unregister(name)


def test_the_declarations_check_the_values():
    with pytest.raises(UsageError, match=r"^sigma=-1\.0: expected a finite number greater"):
        pate.GNMax(-1)
    with pytest.raises(UsageError, match=r"^threshold=inf: expected a finite number$"):
        pate.ConfidentGNMax(float("inf"), 1, 1)
    with pytest.raises(UsageError, match=r"^sigma1='x': expected a number$"):
        pate.ConfidentGNMax(1, "x", 1)  # type: ignore[arg-type]
    assert pate.GNMax(40).sigma == 40.0 and isinstance(pate.GNMax(40).sigma, float)


@pytest.mark.parametrize(
    ("kind", "words"),
    [
        (type("Twin", (Wide,), {"name": "twin", "short": "twin"}), "already wide's flags"),
        (type("Named", (Wide,), {"short": "named"}), "the name 'wide' is taken"),
        (
            type("Clash", (Wide,), {"name": "clash", "short": "clash", "parameters": (
                Parameter("width", "Another width.", symbol="W"), DEPTH)}),
            "'width' is declared differently",
        ),
        (
            type("Taken", (Wide,), {"name": "taken", "short": "taken", "parameters": (
                Parameter("delta", "A delta.", symbol="D"),)}),
            "'delta' is not free",
        ),
        (type("Plain", (), {}), "not a subclass"),
    ],
)  # fmt: skip
def test_registration_refuses_what_would_make_flags_mean_two_things(extra, kind, words):
    register(Wide)
    extra.append("wide")
    assert words in str(problem(kind))
    with pytest.raises(UsageError, match=words):
        register(kind)


def test_which_mechanism_flags_mean_never_depends_on_order(extra):
    """``--width`` alone is the smaller of the two that take it, whichever came first; with
    ``--sigma`` too, two mechanisms of equal size would fit: refused, naming both."""
    for order in ((WideDeep, Wide), (Wide, WideDeep)):
        for kind in order:
            register(kind)
        chosen = infer_mechanism(None, {"width": 2.0, "depth": None, "sigma": None})
        assert type(chosen) is Wide
        for kind in order:
            unregister(kind.name)
    register(WideDeep)
    register(DeepWide)
    extra += ["wide-deep", "deep-sigma"]
    with pytest.raises(UsageError, match="--depth could mean wide-deep or deep-sigma"):
        infer_mechanism(None, {"depth": 1.0, "width": None, "sigma": None})


def test_a_registered_parameter_is_a_flag_of_every_mechanism_command(extra):
    register(Wide)
    extra.append("wide")
    for command in ("analyze", "smooth-sensitivity", "aggregate", "compare", "plan"):
        assert "--width" in run_cli([command, "--help"]).stdout
    out = run_cli(["plan", "--delta", "1e-5", "--epsilon", "2", "--queries", "100", "--json"])
    assert '"name": "gnmax"' in out.stdout  # no mechanism flag: GNMax, as documented
    out = run_cli(["plan", "--delta", "1e-5", "--epsilon", "2", "--width", "40", "--json"])
    solved = json.loads(out.stdout)
    same = pate.plan(delta=1e-5, epsilon=2.0, sigma=40.0)
    assert solved["mechanism"] == {"name": "wide", "width": 40.0}
    assert (solved["solve_for"], solved["value"]) == ("queries", same.value)


def test_plan_takes_the_declared_keywords_and_refuses_others():
    solved = plan(delta=1e-5, epsilon=2.0, queries=100, gamma=None, mechanism="lnmax")
    assert solved.solve_for == "gamma"
    with pytest.raises(TypeError, match="unexpected keyword argument 'sigmaa'"):
        plan(delta=1e-5, epsilon=2.0, queries=100, sigmaa=3.0)


def _options(command: str) -> set[str]:
    """The parameter names of a command, as the command line is built now."""
    group = typer.main.get_command(app)
    found = group.commands[command]  # type: ignore[attr-defined]
    return {param.name for param in found.params}


@pytest.mark.parametrize(
    "command", ["analyze", "smooth-sensitivity", "aggregate", "compare", "plan", "inspect"]
)
def test_no_parameter_name_a_command_uses_for_itself_is_free(command):
    """What a command takes besides the mechanism's parameters is RESERVED: a plugin can
    never take a name the command line already uses."""
    own = _options(command) - set(declarations()) - {"mechanism"}
    assert own <= RESERVED, sorted(own - RESERVED)


def test_the_library_functions_keywords_are_reserved_too():
    for name in ("analyze", "smooth_sensitivity", "aggregate", "compare", "load_votes", "plan",
                 "audit"):  # fmt: skip
        keywords = set(inspect.signature(getattr(pate, name)).parameters) - {"parameters"}
        assert keywords <= RESERVED | {"path"}, (name, sorted(keywords - RESERVED))


def test_the_docs_tables_are_the_declarations():
    cli_doc = (ROOT / "docs" / "cli.md").read_text()
    assert mechanisms_markdown() in cli_doc
    assert parameters_markdown() in cli_doc
    assert mechanisms_markdown() in (ROOT / "README.md").read_text()
    # The built-ins, first whatever plugins are installed (the tables are theirs alone).
    built_in = ["gnmax", "confident-gnmax", "interactive-gnmax", "lnmax"]
    assert [kind.name for kind in builtins()] == list(by_name())[:4] == built_in


def test_help_lists_the_mechanisms_installed(extra):
    register(Wide)
    extra.append("wide")
    out = run_cli(["--help"]).stdout
    assert "Mechanisms:" in out
    for name in ("gnmax", "confident-gnmax", "interactive-gnmax", "lnmax"):
        assert name in out
    assert "registered in code" in out.split("Mechanisms:")[1]


@pytest.mark.parametrize("builtin", builtins(), ids=lambda kind: kind.name)
def test_no_plugin_takes_a_built_ins_name_or_label(extra, builtin):
    """A plugin named as a built-in, or labelled as one, is refused, even with the built-in
    asked to go first: records of the built-in keep reading as the built-in's."""
    named = type("Named", (Wide,), {"name": builtin.name, "short": "named"})
    labelled = type("Labelled", (Wide,), {"name": "labelled", "short": builtin.short})
    assert problem(named) == f"the name {builtin.name!r} is a built-in's"
    assert problem(labelled) == f"the short label {builtin.short!r} is a built-in's"
    with pytest.raises(UsageError, match=f"mechanism {builtin.name!r} is built in"):
        unregister(builtin.name)
    for kind in (named, labelled):
        with pytest.raises(UsageError, match="is a built-in's"):
            register(kind)
    assert by_name()[builtin.name] is builtin


def _mechanism(name: str, *parameters: Parameter) -> type[Mechanism]:
    """A mechanism of these parameters (a dataclass of their fields), GNMax's answer at the
    noise of the first."""
    members = {
        "__annotations__": {p.name: float for p in parameters},
        "__module__": __name__,
        "answer_step": property(lambda self: GaussianAnswer(getattr(self, parameters[0].name))),
    }
    base = dataclass(frozen=True)(type(name, (Mechanism,), members))
    base.name, base.short, base.parameters = name, name, parameters  # type: ignore[misc]
    return base


def test_a_plugin_may_not_change_what_a_built_ins_flags_mean(extra):
    """Confident-LNMax (--threshold --sigma1 --gamma) would make plan's --threshold --sigma1
    (Confident-GNMax, solving for its --sigma) mean either: refused. One taking the two alone
    would take them over: refused. One taking --sigma and more leaves --sigma alone GNMax's
    (the one whose flags are exactly those given)."""
    from pate_cli.mechanisms.confident import SIGMA1, THRESHOLD
    from pate_cli.mechanisms.lnmax import GAMMA

    both = _mechanism("confident-lnmax", THRESHOLD, SIGMA1, GAMMA)
    assert problem(both) == (
        "its flags would make --threshold --sigma1, which mean confident-gnmax, mean "
        "confident-gnmax or confident-lnmax (a plugin may not change what a built-in's flags "
        "mean)"
    )
    taker = _mechanism("threshold-only", THRESHOLD, SIGMA1)
    assert "--threshold --sigma1, which mean confident-gnmax, mean it" in str(problem(taker))
    register(_mechanism("wide-sigma", SIGMA, WIDTH))
    extra.append("wide-sigma")
    assert type(infer_mechanism(None, {"sigma": 40.0, "width": None})) is pate.GNMax
    assert infer_mechanism(None, {"sigma": 40.0, "width": 2.0}).name == "wide-sigma"
    assert plan(delta=1e-5, epsilon=2.0, sigma=40.0).mechanism == {"name": "gnmax", "sigma": 40.0}
    table2 = plan(delta=1e-5, epsilon=2.0, queries=640, threshold=200.0, sigma1=150.0)
    assert (table2.mechanism["name"], table2.solve_for) == ("confident-gnmax", "sigma")


def test_plan_reads_a_plugins_flag_as_it_is_spelled(extra):
    """plan --exp-scale 20 (a parameter exp_scale): the one mechanism that takes it, solving
    for its queries; never refused as meaning every mechanism."""
    exp_scale = Parameter("exp_scale", "The exponential mechanism's scale.", symbol="E")
    register(_mechanism("rnm-exponential", exp_scale))
    extra.append("rnm-exponential")
    out = run_cli(["plan", "--delta", "1e-5", "--epsilon", "2", "--exp-scale", "20", "--json"])
    assert out.json["mechanism"] == {"name": "rnm-exponential", "exp_scale": 20.0}
    assert out.json["solve_for"] == "queries"

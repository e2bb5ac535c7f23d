"""Start-up: what each command imports, held to what it runs.

A fresh interpreter per case lists the modules ``sys.modules`` gains: ``pate --version``,
``pate --help``, ``pate analyze --help``, ``import pate_cli``, ``import pate_cli.api`` and a
plain ``pate analyze`` of a small file (with its release). Each case has the modules it may
not load, each with the reason, so that an import that brings one back fails naming it and
the reason. ``--version`` and ``import pate_cli`` are held to the whole list of what they
load. What a mechanism plugin imports when it is loaded is the plugin's (README,
"Performance"): it is left out where plugins load. How long any of this takes is measured
by benchmarks/bench_startup.py, never asserted here.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from tests.conftest import ROOT

# Runs one case in this interpreter and prints the modules it gained.
_PROBE = """
import runpy, sys
before = set(sys.modules)
case = sys.argv[1]
if case == "import":
    for name in sys.argv[2:]:
        __import__(name)
else:
    sys.argv = ["pate", *sys.argv[2:]]
    try:
        runpy.run_module("pate_cli", run_name="__main__")
    except SystemExit:
        pass
print(" ".join(sorted(set(sys.modules) - before)))
"""
# What loading the installed mechanism plugins loads by itself (nothing where none is).
_PLUGINS = """
import sys
before = set(sys.modules)
from importlib.metadata import entry_points
for point in entry_points(group="pate_cli.mechanisms"):
    try:
        point.load()
    except BaseException:
        pass
print(" ".join(sorted(set(sys.modules) - before)))
"""

# --version is answered by the entry point before anything else is imported: these, and only
# these (the signals held first, the version, the exit code of a stdout that fails).
VERSION_LOADS = {
    "signal",
    "pate_cli",
    "pate_cli.cli",
    "pate_cli.cli.entry",
    "pate_cli.cli.interrupts",
    "pate_cli.cli.version",
    "pate_cli.common",
    "pate_cli.common.version",
    "pate_cli.errors",
}
# import pate_cli: its names are imported on first use (PEP 562).
PACKAGE_LOADS = {"pate_cli", "pate_cli.common", "pate_cli.common.version"}

NUMERIC = {
    "numpy": "the numbers: a help declares options, it computes nothing",
    "scipy": "the numbers: a help declares options, it computes nothing",
}
TERMINAL = {
    "typer": "the library never imports the command line",
    "rich": "the library never imports the command line",
    "click": "the library never imports the command line",
    "matplotlib": "only plot_analysis and plot_compare import it, when called",
}
HEAVY_SCIPY = {
    "scipy.signal": "0.5 s: nothing pate runs needs it (--pld's one first-order filter is "
    "core.pld_compose's own)",
    "scipy.stats": "0.3 s, and nothing pate runs needs it (scipy.signal imported it)",
    "scipy.optimize": "0.2 s: C5/C6 are minimised by core.bounded_minimum; only the "
    "reference's log q0 (--reference-local-sensitivity) takes Brent's root from it",
    "scipy.integrate": "nothing pate runs needs it",
}
HELP = {
    **NUMERIC,
    "rich": "help is typer's plain formatter (rich_markup_mode=None); reports render with rich",
    "pydantic": "typer checks an option's value with it: a help has none, and an option not "
    "given is not checked (pate_cli.cli.deferred)",
    "importlib.metadata": "0.02 s with email and zipfile: the plugins are looked for without "
    "it where none is installed (mechanisms.registry._may_declare)",
    "pate_cli.cli.run": "what a command does when it runs, not what it declares",
    "pate_cli.api": "what a command does when it runs, not what it declares",
    "pate_cli.jobs": "what a command does when it runs, not what it declares",
    "pate_cli.votes": "what a command does when it runs, not what it declares",
    "pate_cli.core": "what a command does when it runs, not what it declares",
}
OTHER_COMMANDS = {
    f"pate_cli.cli.commands.{name}": "another command's module: a command's help imports its own"
    for name in ("aggregate", "budget", "compare", "inspect", "plan", "smooth_sensitivity")
}
FORBIDDEN: dict[str, dict[str, str]] = {
    "pate --help": HELP,
    "pate analyze --help": {**HELP, **OTHER_COMMANDS},
    "import pate_cli.api": {**TERMINAL, **HEAVY_SCIPY},
    "pate analyze (plain, with its release)": {
        **HEAVY_SCIPY,
        **OTHER_COMMANDS,
        "pydantic": "plain option values are read as typer reads them, without it "
        "(pate_cli.cli.deferred)",
        "matplotlib": "only --plot needs it",
    },
}


def _gained(*args: str) -> set[str]:
    done = subprocess.run(
        [sys.executable, "-c", _PROBE, *args], capture_output=True, text=True, cwd=ROOT
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return set(done.stdout.splitlines()[-1].split())


@pytest.fixture(scope="module")
def plugins() -> set[str]:
    done = subprocess.run(
        [sys.executable, "-c", _PLUGINS], capture_output=True, text=True, cwd=ROOT, check=True
    )
    return set(done.stdout.split())


@pytest.fixture(scope="module")
def small_votes(tmp_path_factory: pytest.TempPathFactory) -> Path:
    rng = np.random.default_rng(7)
    counts = rng.multinomial(100, [0.7, 0.1, 0.1, 0.05, 0.05], size=60)
    path = tmp_path_factory.mktemp("startup") / "votes.npy"
    np.save(path, counts)
    return path


def _found(loaded: set[str], forbidden: dict[str, str]) -> list[str]:
    """Each forbidden module (or package) loaded, with what of it and why it may not be."""
    found = []
    for name, reason in forbidden.items():
        hits = sorted(m for m in loaded if m == name or m.startswith(f"{name}."))
        if hits:
            shown = ", ".join(hits[:4]) + (f" and {len(hits) - 4} more" if len(hits) > 4 else "")
            found.append(f"{name} ({shown}): {reason}")
    return found


def test_version_loads_only_the_entry_point():
    loaded = _gained("run", "--version")
    assert loaded <= VERSION_LOADS, f"pate --version loaded {sorted(loaded - VERSION_LOADS)}"
    assert _gained("run", "-V") <= VERSION_LOADS


def test_import_pate_cli_loads_only_its_version():
    loaded = _gained("import", "pate_cli")
    assert loaded <= PACKAGE_LOADS, f"import pate_cli loaded {sorted(loaded - PACKAGE_LOADS)}"


@pytest.mark.parametrize("case", FORBIDDEN)
def test_each_case_loads_nothing_it_does_not_run(case, plugins, small_votes):
    args = {
        "pate --help": ["run", "--help"],
        "pate analyze --help": ["run", "analyze", "--help"],
        "import pate_cli.api": ["import", "pate_cli.api"],
        "pate analyze (plain, with its release)": [
            "run", "analyze", str(small_votes), "--sigma", "4", "--delta", "1e-5",
        ],
    }[case]  # fmt: skip
    gained = _gained(*args)
    found = _found(gained - plugins, FORBIDDEN[case])
    assert not found, f"{case} loaded:\n" + "\n".join(found)
    if case.startswith("pate analyze ("):  # the run it stands for: the release, C5/C6
        assert {"pate_cli.api", "pate_cli.core.conditions"} <= gained
    if case.endswith("--help"):
        assert {"typer", "pate_cli.mechanisms", "pate_cli.cli.commands"} <= gained


def test_a_forbidden_import_is_named_with_its_reason():
    loaded = {"numpy", "scipy.signal", "scipy.signal._filters", "typer.main"}
    assert _found(loaded, {**HEAVY_SCIPY, "typer": "why"}) == [
        f"scipy.signal (scipy.signal, scipy.signal._filters): {HEAVY_SCIPY['scipy.signal']}",
        "typer (typer.main): why",
    ]


# Option values: the plain ones are read without pydantic, as typer's coercion reads them.
VALUES = [
    "0", "7", "640", "-3", "-0", "00", "007", "-007", "+5", "+0", "1_000", " 5", "5 ", "\t5",
    "0x10", "1e-5", "-1e-5", "1E+10", "4e1", "4e+01", "40.5e1", "0.1", "-0.0", "00.5", "1.",
    ".5", "-.5", "1e99", "9e-99", "1.5e-310", "4.9e-324", "2.5e-324", "1e308", "1.8e308",
    "1e400", "-1e400", "1e-400", "0.1000000000000000055511151231257827",
    "12345678901234567890.12345678901234567890", "123456789012345678", "999999999999999999",
    "-999999999999999999", "1000000000000000000", "9223372036854775807",
    "9223372036854775808", "12345678901234567890123", "inf", "-inf", "+inf", "Infinity",
    "nan", "NaN", "-nan", "abc", "", " ", "\u0665", "\uff15", "\u00b2", "5\u00a0",
    "stimmen-\u00fc.npy", "\udcff.npy", "sample_data/x.npy", "-", "--", "1e5.5",
]  # fmt: skip


@pytest.mark.parametrize("kind", [int, float, str])
@pytest.mark.parametrize("value", VALUES)
def test_a_plain_value_reads_as_typer_reads_it(kind, value):
    from typer._click.exceptions import BadParameter
    from typer._coercion import build_runtime_param, resolve_type_descriptor

    from pate_cli.cli.deferred import _NOT_PLAIN, plain

    descriptor = resolve_type_descriptor(kind, _info())
    ours = plain(descriptor, value)
    if ours is _NOT_PLAIN:
        return  # typer's own coercion reads it
    try:
        theirs = build_runtime_param(descriptor)._coerce_value(value, param=None, ctx=None)
    except BadParameter as refused:
        pytest.fail(f"{value!r} read as {ours!r}, typer refuses it: {refused}")
    assert type(ours) is type(theirs) and repr(ours) == repr(theirs)  # -0.0, nan: by repr


def _info():
    from typer.models import OptionInfo

    return OptionInfo()


def test_the_plain_values_of_a_command_line_are_read_without_typer():
    from typer._coercion import resolve_type_descriptor

    from pate_cli.choices import Conversion
    from pate_cli.cli.deferred import _NOT_PLAIN, plain

    def read(kind: type, value: object) -> object:
        return plain(resolve_type_descriptor(kind, _info()), value)

    assert read(float, "1e-5") == 1e-5 and read(int, "640") == 640
    assert read(str, "sample_data/mnist_250_teachers.npy") == "sample_data/mnist_250_teachers.npy"
    assert read(Conversion, Conversion.CLASSIC) is Conversion.CLASSIC  # a default
    assert read(Conversion, "classic") is _NOT_PLAIN  # typed: typer matches the choice


def _commands():
    """Every command of ``pate`` as click has it (budget's subcommands too), named."""
    import typer

    from pate_cli.cli.app import make_app

    def walk(command, name):
        if hasattr(command, "commands"):
            for sub, inner in command.commands.items():
                yield from walk(inner, f"{name} {sub}")
        else:
            yield name, command

    return list(walk(typer.main.get_command(make_app()), "pate"))


def _outcome(runtime, value, param, ctx):
    """What a coercion makes of ``value``: ("value", its type and repr) or ("refused", the
    message)."""
    from typer._click.exceptions import BadParameter

    try:
        read = runtime.coerce(value, param=param, ctx=ctx)
    except BadParameter as refused:
        return ("refused", refused.format_message())
    if isinstance(read, float):  # repr tells -0.0 from 0.0; nan is nan
        return ("value", float, repr(read))
    return ("value", type(read), repr(read))


def test_every_option_reads_every_value_as_typer_reads_it():
    """Each parameter of each command, its bounds, parser and choices as declared, given each
    of ``VALUES`` on the command line: the deferred coercion gives typer's own value or
    typer's own message, whether it reads the value itself or hands it on."""
    from typer._click import Context
    from typer._coercion import build_runtime_param

    from pate_cli.cli.deferred import _NOT_PLAIN, Deferred, plain

    read_here = compared = 0
    for name, command in _commands():
        ctx = Context(command, info_name=name)
        for param in command.params:
            descriptor = getattr(param, "type_descriptor", None)
            if descriptor is None or getattr(param, "is_flag", False):
                continue
            ours = Deferred(
                parameter_info=descriptor.parameter_info,
                annotation=descriptor.annotation,
                descriptor=descriptor,
            )
            theirs = build_runtime_param(descriptor)
            choices = [str(getattr(c, "value", c)) for c in descriptor.choices or ()]
            spelled = [*choices, *(c.upper() for c in choices), *(f" {c}" for c in choices)]
            for text in [*VALUES, *spelled, *(descriptor.choices or ())]:
                value = (text,) if param.multiple or param.nargs == -1 else text
                param._runtime_param = None
                expected = _outcome(theirs, value, param, ctx)
                got = _outcome(ours, value, param, ctx)
                assert got == expected, f"{name} {param.name} {text!r}"
                compared += 1
                read_here += plain(descriptor, text) is not _NOT_PLAIN
    assert compared > 1000 and read_here > 100  # the plain path is exercised, not skipped


def test_a_command_line_reads_the_same_with_its_coercion_deferred(monkeypatch, tmp_path):
    """Whole runs: the tricky values of int, float and text options give the same exit code,
    stdout and stderr as with typer's coercion throughout."""
    from typer.testing import CliRunner

    import pate_cli.cli.app as app_module

    votes = tmp_path / "v\u00f6tes.npy"
    np.save(votes, np.array([[9, 1, 0], [6, 3, 1], [5, 5, 0]]))
    lines = []
    for option, values in {
        "--queries": ["2", "-2", "002", "+2", "1_0", "3.0", "99999999999999999999", "\u0662"],
        "--sigma": ["4", "-4", "04", "4e0", "-0", "1e400", "inf", "nan", "4,0", "\u0664"],
        "--delta": ["1e-5", "0.00001", "1E-05", "-1e-5", "1e-400", "1e-5 "],
    }.items():
        for value in values:
            lines.append([str(votes), "--sigma", "4", "--delta", "1e-5", option, value])

    def outcomes() -> list[tuple[int, str, str]]:
        found = []
        for args in lines:
            done = CliRunner().invoke(app_module.app, ["analyze", *args, "--json", "--no-release"])
            found.append((done.exit_code, done.stdout, done.stderr))
        return found

    deferred = outcomes()
    monkeypatch.setattr(app_module, "defer_coercion", lambda command: None)
    assert outcomes() == deferred
    assert {code for code, _, _ in deferred} == {0, 2}


def _site(root: Path, name: str, points: str | None) -> Path:
    """A folder of ``sys.path`` holding one distribution ``name`` (its entry points
    ``points``, None: no entry_points.txt)."""
    info = root / f"{name}-1.0.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {name}\nVersion: 1.0\n")
    if points is not None:
        (info / "entry_points.txt").write_text(points)
    return root


def test_plugins_are_looked_for_without_importlib_metadata_only_where_none_can_be(
    monkeypatch, tmp_path
):
    """``_may_declare`` says False only where ``importlib.metadata`` finds no entry point of
    the group on the same ``sys.path``, and True wherever one is declared or where it cannot
    tell (a zip, an egg, an entry that is not a string, a finder of its own)."""
    import importlib.machinery
    import zipfile
    from importlib.metadata import entry_points

    from pate_cli.mechanisms.registry import GROUP, _may_declare

    other = _site(tmp_path / "other", "tool", "[console_scripts]\ntool = tool:main\n")
    bare = _site(tmp_path / "bare", "bare", None)
    (tmp_path / "bare" / "old.egg-info").write_text("Metadata-Version: 1.0\n")  # a file
    declared = _site(tmp_path / "declared", "gumbel", f"[{GROUP}]\ng = gumbel:G\n")
    archive = tmp_path / "site.zip"
    with zipfile.ZipFile(archive, "w") as zipped:
        zipped.writestr(
            "x-1.0.dist-info/METADATA", "Metadata-Version: 2.1\nName: x\nVersion: 1.0\n"
        )
        zipped.writestr("x-1.0.dist-info/entry_points.txt", f"[{GROUP}]\nx = x:X\n")
    path_only = [f for f in sys.meta_path if not hasattr(f, "find_distributions")]
    monkeypatch.setattr(sys, "meta_path", [*path_only, importlib.machinery.PathFinder])
    if not hasattr(importlib.machinery.PathFinder, "find_distributions"):
        # The importlib_metadata backport (imported with Dask, by the engine's tests in this
        # process) takes the method off the standard finder: the standard one, back.
        from importlib.metadata import MetadataPathFinder

        standard = MetadataPathFinder.find_distributions
        monkeypatch.setattr(
            importlib.machinery.PathFinder, "find_distributions", standard, raising=False
        )

    def check(path: list, expected: bool, found: bool | None) -> None:
        """``found``: whether importlib.metadata finds an entry point of the group there
        (None: it cannot read that path)."""
        monkeypatch.setattr(sys, "path", path)
        assert _may_declare(GROUP) is expected, path
        if found is not None:
            assert bool(entry_points(group=GROUP)) is found, path

    check([str(other), str(bare), str(tmp_path / "missing")], False, False)
    check([str(other), str(declared)], True, True)
    check([str(archive)], True, True)  # a zip's distributions are not read here
    check([str(tmp_path / "x.egg")], True, False)
    check([str(other), str(bare).encode()], True, None)

    class Finder:
        @staticmethod
        def find_distributions(*args, **kwargs):
            return iter(())

    monkeypatch.setattr(sys, "meta_path", [*sys.meta_path, Finder])
    check([str(other)], True, False)


@pytest.mark.skipif(not Path("/dev/full").exists(), reason="needs /dev/full")
@pytest.mark.parametrize("args", [["--version"], ["-V"], ["--version", "--help"]])
def test_a_version_that_cannot_be_written_is_one_line_and_exit_74(args):
    """Answered by the entry point (a bare --version) or by the app's eager option, the
    version on a full stdout is one line on stderr and exit 74, not a traceback."""
    with open("/dev/full", "w") as full:
        done = subprocess.run(
            [sys.executable, "-m", "pate_cli", *args],
            stdout=full,
            stderr=subprocess.PIPE,
            text=True,
            cwd=ROOT,
        )
    assert done.returncode == 74
    assert done.stderr == (
        "pate: error: cannot write the version to stdout (No space left on device)\n"
    )


def test_without_typers_coercion_module_every_value_is_typers(monkeypatch):
    """A typer whose coercion is not where deferred looks: no stand-in is set, typer builds
    its own as it would."""
    import typer

    from pate_cli.cli import deferred
    from pate_cli.cli.app import make_app

    monkeypatch.setattr(deferred, "build_runtime_param", None)
    command = typer.main.get_command(make_app(["analyze"])).commands["analyze"]
    deferred.defer_coercion(command)
    assert {type(p._runtime_param) for p in command.params} == {type(None)}

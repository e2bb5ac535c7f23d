"""The shape of the package, checked from its source: imports run one way, the layers keep
to themselves, and no file grows past what one reader can hold.

Every import counts, wherever it is written: at module level, inside a function, under
``if TYPE_CHECKING:``. An import hidden in a function still ties the two modules together
(the loop is only moved from import time to call time), and a type-checking import is a
dependency of whoever reads the code.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parent.parent / "pate_cli"
MAX_LINES = 600
# Terminal libraries: only the command line may import them.
TERMINAL = ("typer", "rich", "click")


@dataclass(frozen=True)
class Import:
    """One import statement's target, resolved to a module where it names one of ours."""

    importer: str
    target: str
    """The module imported (``pate_cli.x.y``), or the top-level name of a third party."""
    names: tuple[str, ...]
    """The names taken from ``target`` by ``from target import ...`` (empty otherwise)."""
    line: int


def module_name(path: Path, root: Path) -> str:
    parts = list(path.relative_to(root.parent).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def modules(root: Path) -> dict[str, Path]:
    """Every module of the package under ``root``, by dotted name."""
    return {module_name(path, root): path for path in sorted(root.rglob("*.py"))}


def _base(importer: str, is_package: bool, level: int, module: str | None) -> str:
    """The absolute module a (possibly relative) ``from ... import`` starts from."""
    if level == 0:
        return module or ""
    parts = importer.split(".")
    if not is_package:
        parts.pop()
    parts = parts[: len(parts) - (level - 1)]
    return ".".join(parts + ([module] if module else []))


def imports(root: Path) -> Iterator[Import]:
    """Every import of every module under ``root``, function-level and TYPE_CHECKING alike.

    ``from pate_cli.x import y`` is an import of ``pate_cli.x.y`` when that is a module, and
    of ``pate_cli.x`` otherwise."""
    known = modules(root)
    for name, path in known.items():
        is_package = path.name == "__init__.py"
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.Import):
                for alias in node.names:
                    yield Import(name, alias.name, (), node.lineno)
            elif isinstance(node, ast.ImportFrom):
                base = _base(name, is_package, node.level, node.module)
                plain = []
                for alias in node.names:
                    if f"{base}.{alias.name}" in known:
                        yield Import(name, f"{base}.{alias.name}", (), node.lineno)
                    else:
                        plain.append(alias.name)
                if plain:
                    yield Import(name, base, tuple(plain), node.lineno)


def graph(root: Path) -> dict[str, set[str]]:
    """Module -> the package's modules it imports.

    Left out: the parent packages that Python imports implicitly (``pate_cli.a.b`` is not an
    edge to ``pate_cli.a``), and the top-level package, whose ``__init__`` is lazy and may be
    imported for ``__version__`` only (``test_top_level_package_only_for_its_version``)."""
    top = root.name
    edges: dict[str, set[str]] = {name: set() for name in modules(root)}
    for found in imports(root):
        if found.target.startswith(f"{top}.") and found.target != found.importer:
            edges[found.importer].add(found.target)
    return edges


def loops(edges: dict[str, set[str]]) -> list[set[str]]:
    """The strongly connected components of more than one module: each is a knot of cycles."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    components: list[set[str]] = []

    def visit(node: str) -> None:  # Tarjan's algorithm
        index[node] = low[node] = len(index)
        stack.append(node)
        for nxt in sorted(edges.get(node, ())):
            if nxt not in index:
                visit(nxt)
                low[node] = min(low[node], low[nxt])
            elif nxt in stack:
                low[node] = min(low[node], index[nxt])
        if low[node] == index[node]:
            component = set()
            while True:
                member = stack.pop()
                component.add(member)
                if member == node:
                    break
            if len(component) > 1:
                components.append(component)

    for node in sorted(edges):
        if node not in index:
            visit(node)
    return components


def cycles(edges: dict[str, set[str]]) -> list[list[str]]:
    """One shortest cycle through each loop, from its first module by name."""
    return [_shortest_cycle(edges, component) for component in loops(edges)]


def _shortest_cycle(edges: dict[str, set[str]], component: set[str]) -> list[str]:
    start = min(component)
    paths = {start: [start]}
    queue = [start]
    while queue:
        node = queue.pop(0)
        for nxt in sorted(edges[node] & component):
            if nxt == start:
                return paths[node] + [start]
            if nxt not in paths:
                paths[nxt] = paths[node] + [nxt]
                queue.append(nxt)
    raise AssertionError("a strongly connected component without a cycle")


def _within(name: str, package: str) -> bool:
    return name == package or name.startswith(f"{package}.")


def layering_violations(root: Path) -> list[str]:
    """Imports that cross a layer the wrong way: out of ``core``, or into the terminal."""
    top = root.name
    core, cli = f"{top}.core", f"{top}.cli"
    found = []
    for each in imports(root):
        where = f"{each.importer} line {each.line} imports {each.target}"
        if _within(each.importer, core) and _within(each.target, top):
            if not _within(each.target, core):
                found.append(f"{where}: the numerical core imports nothing outside core")
        terminal = _within(each.target, cli) or each.target.split(".")[0] in TERMINAL
        if terminal and not (_within(each.importer, cli) or each.importer == f"{top}.__main__"):
            found.append(f"{where}: only {cli} and {top}.__main__ import the command line")
    return found


def top_level_violations(root: Path) -> list[str]:
    """Imports of the top-level package for anything but ``__version__``."""
    top = root.name
    return [
        f"{each.importer} line {each.line} imports {each.target} {list(each.names)}"
        for each in imports(root)
        if each.target == top and set(each.names) != {"__version__"}
    ]


def test_no_import_cycle():
    edges = graph(PACKAGE)
    found = [
        f"{' -> '.join(_shortest_cycle(edges, loop))}\n  (the loop holds {sorted(loop)})"
        for loop in loops(edges)
    ]
    assert not found, "import cycles:\n" + "\n".join(found)


def test_top_level_package_only_for_its_version():
    found = top_level_violations(PACKAGE)
    assert not found, "\n".join(found)


def test_layers_import_one_way():
    found = layering_violations(PACKAGE)
    assert not found, "\n".join(found)


def test_no_file_over_the_line_limit():
    long = {
        str(path.relative_to(PACKAGE.parent)): lines
        for path in sorted(PACKAGE.rglob("*.py"))
        if (lines := len(path.read_text().splitlines())) > MAX_LINES
    }
    assert not long, f"files over {MAX_LINES} lines: {long}"


MAX_FUNCTION_LINES = 80


def long_functions(root: Path) -> dict[str, int]:
    """Every function under ``root`` longer than :data:`MAX_FUNCTION_LINES`, from its
    ``def`` to its last line (docstring included), by ``path:name``."""
    found = {}
    for path in sorted(root.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                length = (node.end_lineno or node.lineno) - node.lineno + 1
                if length > MAX_FUNCTION_LINES:
                    found[f"{path.relative_to(root.parent)}:{node.name}"] = length
    return found


def test_no_function_over_the_line_limit():
    """Each function reads as a short sequence of named steps."""
    assert not long_functions(PACKAGE)


def test_a_long_function_is_found(tmp_path):
    package = tmp_path / "pkg"
    package.mkdir()
    body = "\n".join(f"    x{i} = {i}" for i in range(MAX_FUNCTION_LINES))
    (package / "a.py").write_text(f"def short():\n    pass\n\n\ndef long():\n{body}\n")
    assert long_functions(package) == {"pkg/a.py:long": MAX_FUNCTION_LINES + 1}


# The checks themselves, on a small package made for each case.


def _package(tmp_path: Path, files: dict[str, str]) -> Path:
    root = tmp_path / "pkg"
    for name, text in {"__init__.py": "", **files}.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
        if path.parent != root and not (path.parent / "__init__.py").exists():
            (path.parent / "__init__.py").write_text("")
    return root


@pytest.mark.parametrize(
    "files",
    [
        {"a.py": "import pkg.b\n", "b.py": "from pkg import a\n"},
        {
            "a.py": "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from pkg.b import B\n",
            "b.py": "def f():\n    from pkg.a import A\n",
        },
        {
            "sub/a.py": "from . import b\n",
            "sub/b.py": "from ..c import C\n",
            "c.py": "from .sub.a import f\n",
        },
        {"sub/__init__.py": "from .a import f\n", "sub/a.py": "from pkg.sub import g\n"},
    ],
    ids=["absolute", "type-checking-and-function", "relative", "package-init"],
)
def test_a_cycle_is_found_wherever_its_imports_are(tmp_path, files):
    found = cycles(graph(_package(tmp_path, files)))
    assert len(found) == 1 and found[0][0] == found[0][-1], found


def test_implicit_parents_and_the_lazy_top_level_make_no_cycle(tmp_path):
    root = _package(
        tmp_path,
        {
            "__init__.py": "__version__ = '1'\ndef __getattr__(name):\n    import pkg.sub.a\n",
            "sub/__init__.py": "from pkg.sub.a import f\n",
            "sub/a.py": "from pkg import __version__\n",
        },
    )
    assert cycles(graph(root)) == []
    assert top_level_violations(root) == []
    (root / "sub" / "a.py").write_text("from pkg import analyze\n")
    assert top_level_violations(root) == ["pkg.sub.a line 1 imports pkg ['analyze']"]


def test_layering_violations_are_found(tmp_path):
    root = _package(
        tmp_path,
        {
            "core/math.py": "from pkg.core import other\nfrom pkg.errors import E\n",
            "core/other.py": "",
            "errors.py": "",
            "api.py": "def f():\n    import rich.console\n",
            "plots.py": "import matplotlib\n",
            "cli/app.py": "import typer\nfrom pkg import api\n",
            "__main__.py": "from pkg.cli.app import main\n",
        },
    )
    assert sorted(layering_violations(root)) == [
        "pkg.api line 2 imports rich.console: only pkg.cli and pkg.__main__ import the command "
        "line",
        "pkg.core.math line 2 imports pkg.errors: the numerical core imports nothing outside core",
    ]

"""Protocols, not types: nothing outside ``pate_cli/mechanisms/`` asks a mechanism, a step or
a part what it is. It asks them what it needs (a property or a method the mechanisms
package defines: a step's ``name`` and ``local_sensitivity``, a part's ``joined`` and
``read``), so a new mechanism, step or part is one change in that package.

Checked from the source: no ``isinstance`` or ``issubclass`` on a class the mechanisms
package defines, no ``match`` on one, and no comparison (``==``, ``!=``, ``in``, ``is``, a
``case``) with a mechanism's name or a step's (a part has none). The classes are every
``class`` of the package's source; the names are the registry's and every class attribute
``name`` set to a string there.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

import pate_cli
from pate_cli.mechanisms import by_name

PACKAGE = Path(pate_cli.__file__).parent
TYPE_QUESTIONS = ("isinstance", "issubclass")


def _sources(root: Path) -> dict[str, ast.Module]:
    """Every module under ``root``, parsed, by its path relative to ``root``'s parent."""
    return {
        str(path.relative_to(root.parent)): ast.parse(path.read_text(), str(path))
        for path in sorted(root.rglob("*.py"))
    }


def defined_classes(package: Path) -> set[str]:
    """The name of every class the modules under ``package`` define."""
    return {
        node.name
        for tree in _sources(package).values()
        for node in ast.walk(tree)
        if isinstance(node, ast.ClassDef)
    }


def declared_names(package: Path) -> set[str]:
    """Every string a class under ``package`` sets its attribute ``name`` to (``name = "x"``
    or ``name: ClassVar[str] = "x"``): each mechanism's and each step's name."""
    found = set()
    for tree in _sources(package).values():
        for cls in (node for node in ast.walk(tree) if isinstance(node, ast.ClassDef)):
            for statement in cls.body:
                if isinstance(statement, ast.Assign):
                    targets, value = statement.targets, statement.value
                elif isinstance(statement, ast.AnnAssign) and statement.value is not None:
                    targets, value = [statement.target], statement.value
                else:
                    continue
                named = any(isinstance(t, ast.Name) and t.id == "name" for t in targets)
                if named and isinstance(value, ast.Constant) and isinstance(value.value, str):
                    found.add(value.value)
    return found


def _identifiers(node: ast.AST) -> set[str]:
    """The names an expression mentions: ``X`` and the last part of ``module.X``."""
    return {
        n.id if isinstance(n, ast.Name) else n.attr
        for n in ast.walk(node)
        if isinstance(n, ast.Name | ast.Attribute)
    }


def _texts(nodes: list[ast.expr]) -> set[str]:
    """The string constants within ``nodes``."""
    return {
        n.value
        for node in nodes
        for n in ast.walk(node)
        if isinstance(n, ast.Constant) and isinstance(n.value, str)
    }


def questions(tree: ast.Module, classes: set[str], names: set[str]) -> list[str]:
    """Where ``tree`` asks what a mechanism, a step or a part is: a type question on one of
    ``classes``, or a comparison or a ``case`` with one of ``names``."""
    found = []
    for node in ast.walk(tree):
        if (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Name)
            and node.func.id in TYPE_QUESTIONS
            and len(node.args) == 2
            and (asked := _identifiers(node.args[1]) & classes)
        ):
            found.append(f"line {node.lineno}: {node.func.id} on {sorted(asked)}")
        elif isinstance(node, ast.Compare) and (
            compared := _texts([node.left, *node.comparators]) & names
        ):
            found.append(f"line {node.lineno}: compares with {sorted(compared)}")
        elif isinstance(node, ast.MatchValue) and (compared := _texts([node.value]) & names):
            found.append(f"line {node.lineno}: a case of {sorted(compared)}")
        elif isinstance(node, ast.MatchClass) and (asked := _identifiers(node.cls) & classes):
            found.append(f"line {node.lineno}: a case of the class {sorted(asked)}")
    return found


def violations(root: Path) -> dict[str, list[str]]:
    """The questions of every module under ``root`` outside ``root/mechanisms``, about the
    classes and names of ``root/mechanisms`` (and, for the package itself, the registry's
    names), by module path."""
    mechanisms = root / "mechanisms"
    classes, names = defined_classes(mechanisms), declared_names(mechanisms)
    if root == PACKAGE:
        names |= set(by_name())
    outside = {
        path: tree
        for path, tree in _sources(root).items()
        if not Path(path).is_relative_to(Path(root.name) / "mechanisms")
    }
    return {
        path: asked for path, tree in outside.items() if (asked := questions(tree, classes, names))
    }


def test_nothing_outside_the_mechanisms_asks_what_a_mechanism_step_or_part_is():
    classes = defined_classes(PACKAGE / "mechanisms")
    names = declared_names(PACKAGE / "mechanisms") | set(by_name())
    # What the check looks for is there to find.
    assert {"GNMax", "LNMax", "GaussianAnswer", "GaussianThreshold", "GaussianPart"} <= classes
    assert {"PurePart", "LaplaceAnswer", "Mechanism"} <= classes
    assert {"gnmax", "confident-gnmax", "interactive-gnmax", "lnmax", "threshold"} <= names
    assert violations(PACKAGE) == {}


# The check itself, on a small package made for it.

_MECHANISMS = {
    "mechanisms/__init__.py": "",
    "mechanisms/steps.py": (
        "from typing import ClassVar\n\n"
        "class Answer:\n    name: ClassVar[str] = 'noisy-max'\n\n"
        "class Share:\n    pass\n"
    ),
    "mechanisms/kinds.py": (
        "class Kind:\n    name = 'kind-a'\n\n"
        "def inside(x):\n    return isinstance(x, Kind) or x.name == 'kind-a'\n"
    ),
}


def _package(tmp_path: Path, source: str) -> Path:
    root = tmp_path / "pkg"
    for name, text in {"__init__.py": "", **_MECHANISMS, "release.py": source}.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    return root


@pytest.mark.parametrize(
    "source",
    [
        "isinstance(step, Answer)",
        "isinstance(part, (steps.Share, int))",
        "issubclass(type(m), kinds.Kind)",
        "step.name == 'noisy-max'",
        "m['name'] in ('kind-a', 'other')",
        "x = 1 if 'noisy-max' != m.name else 2",
        "match step.name:\n    case 'noisy-max':\n        pass\n",
        "match part:\n    case Share():\n        pass\n",
    ],
)
def test_a_question_outside_the_mechanisms_is_found(tmp_path, source):
    found = violations(_package(tmp_path, source))
    assert list(found) == ["pkg/release.py"] and len(found["pkg/release.py"]) == 1, found


@pytest.mark.parametrize(
    "source",
    [
        "isinstance(x, int)",
        "step.name == 'other'",
        "keys = {'noisy-max': 1}",  # a name as data is no question about a step
        "step.local_sensitivity is None",
        "match x:\n    case 'other':\n        pass\n",
    ],
)
def test_asking_a_step_is_not_a_question_about_its_type(tmp_path, source):
    assert violations(_package(tmp_path, source)) == {}

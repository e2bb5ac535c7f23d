"""The README is tested like code: its `pate` commands run, and every command is documented."""

from __future__ import annotations

import re
import shlex

import pytest

import pate_cli
import pate_cli.cli.app as cli
from tests.conftest import ROOT, run_cli

README = (ROOT / "README.md").read_text()
SAMPLE_README = (ROOT / "sample_data" / "README.md").read_text()


def _commands(text: str) -> list[str]:
    """Every line of a fenced block that runs `pate` (the sample data, or files that the
    lines before made)."""
    blocks = re.findall(r"^```(\w*)\n(.*?)^```$", text, flags=re.S | re.M)
    lines = [
        line.strip()
        for language, block in blocks
        if language in ("", "sh", "bash")
        for line in block.splitlines()
    ]
    return [
        line
        for line in lines
        if line.startswith("pate ") or ("pate " in line and "sample_data/" in line)
    ]


COMMANDS = _commands(README) + _commands(SAMPLE_README)


def test_readme_opens_with_the_two_newcomer_commands():
    first_block = re.search(r"```\n(.*?)```", README, flags=re.S).group(1).splitlines()
    assert first_block[0].startswith("pip install . && pate ") and "sample_data/" in first_block[0]
    assert first_block[1] == "pip install -e '.[test]' && python -m pytest -n auto"
    assert first_block[1] in (ROOT / ".ci" / "run").read_text()


def test_readme_commands_run_in_order(tmp_path, monkeypatch):
    """Every README command, in order, in one scratch folder (later lines read earlier outputs)."""
    monkeypatch.chdir(tmp_path)
    assert len(COMMANDS) >= 6
    for line in COMMANDS:
        words = shlex.split(line.split("&& ", 1)[-1])
        assert words[0] == "pate", line
        run_cli([str(ROOT / w) if w.startswith("sample_data/") else w for w in words[1:]])


def test_every_command_is_in_the_readme():
    for command in cli.app.registered_commands:
        name = command.name or command.callback.__name__
        assert f"pate {name}" in README


def test_readme_python_api_example_runs(monkeypatch, capsys):
    """The "Python API" section's example, run as written from the project root."""
    section = README.split("## Python API", 1)[1].split("\n## ", 1)[0]
    (code,) = re.findall(r"```python\n(.*?)```", section, flags=re.S)
    monkeypatch.chdir(ROOT)
    exec(compile(code, "README.md", "exec"), {})
    first, second, third = capsys.readouterr().out.splitlines()
    answered, epsilon, order = first.split()
    assert float(answered) == pytest.approx(282.72, abs=0.005)
    assert float(epsilon) == pytest.approx(1.99882, abs=5e-6)
    assert float(order) == 14.0
    assert f"# {second}" in code.splitlines()  # printed exactly as the comment says
    assert float(third) > float(epsilon)  # the released epsilon adds the GNSS cost


def test_readme_notebook_example_runs(monkeypatch, capsys):
    """The "In a notebook" section's example: votes made in memory, analyze, aggregate, plan,
    a figure and the Markdown view."""
    section = README.split("## In a notebook", 1)[1].split("\n## ", 1)[0]
    (code,) = re.findall(r"```python\n(.*?)```", section, flags=re.S)
    monkeypatch.chdir(ROOT)
    exec(compile(code, "README.md", "exec"), {})
    summary, source, run, plan, shown = capsys.readouterr().out.splitlines()
    assert summary.startswith("AnalysisReport(mechanism=confident-gnmax, queries=200,")
    assert len(summary) < 300
    assert source == "memory True" and run == "True"
    assert plan == "queries 194"  # as the comment in the example says
    assert "# queries 194" in code
    assert shown.startswith("Figure ### pate analyze: epsilon ")


def test_the_changelog_names_the_current_version_under_its_rule():
    changelog = (ROOT / "CHANGELOG.md").read_text()
    headings = re.findall(r"^## (.+)$", changelog, flags=re.M)
    assert headings[0] == "Unreleased", "new lines go under Unreleased"
    assert re.fullmatch(rf"{re.escape(pate_cli.__version__)} \(\d{{4}}-\d\d-\d\d\)", headings[1])
    assert "Every change a user can see" in changelog

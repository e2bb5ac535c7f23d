"""Every documented JSON enum is complete: the values docs/cli.md lists are exactly the
values the code emits (each collected from real runs, or from the code's own table)."""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pytest

import pate_cli as pate
from pate_cli.choices import GateOn, SortColumn
from pate_cli.records.verdict import STATUSES
from tests.conftest import MNIST

DOCS = (Path(__file__).resolve().parents[1] / "docs" / "cli.md").read_text()
RNG = np.random.default_rng(0)


def quoted_after(marker: str, stop: str = ")") -> set[str]:
    """The double-quoted values in the docs from ``marker`` up to ``stop``."""
    start = DOCS.index(marker) + len(marker)
    return set(re.findall(r'"([a-z -]+)"', DOCS[start : DOCS.index(stop, start)]))


def table_column(header: str) -> set[str]:
    """The backquoted first cells of the docs table whose header row starts with ``header``."""
    block = DOCS[DOCS.index(header) :].split("\n\n", 1)[0].split("\n", 1)[1]
    return set(re.findall(r"^\| `([a-z-]+)` \|", block, flags=re.MULTILINE))


def _labels(teachers: int, queries: int) -> np.ndarray:
    return RNG.integers(0, 10, size=(teachers, queries))


def test_input_layout_lists_every_layout_the_reader_reports():
    counts = np.array([[3, 1, 0], [0, 2, 2]] * 5)
    probs = RNG.dirichlet(np.ones(4), size=(6, 5))
    emitted = {
        pate.inspect(pate.load_votes(counts, format="counts")).to_dict()["input"]["layout"],
        pate.inspect(pate.load_votes(_labels(7, 20), format="labels")).to_dict()["input"]["layout"],
        # labels saved queries x teachers, read with --teachers naming the axis
        pate.inspect(pate.load_votes(_labels(7, 20).T, format="labels", teachers=7)).to_dict()[
            "input"
        ]["layout"],
        pate.inspect(pate.load_votes(probs, format="probs")).to_dict()["input"]["layout"],
    }
    assert quoted_after("`input.layout` in the JSON (") == emitted


def test_noise_source_lists_every_source(tmp_path):
    votes = pate.load_votes(MNIST, queries=100)
    seeds = [None, 3, np.random.default_rng(1), None]
    emitted = set()
    for i, seed in enumerate(seeds):
        seed_file = tmp_path / "run.seed" if i == len(seeds) - 1 else None
        report = pate.smooth_sensitivity(
            votes, pate.GNMax(40), delta=1e-5, seed=seed, seed_file=seed_file
        )
        emitted.add(report.to_dict()["noise"]["source"])
    documented = quoted_after('"noise": {"source": ', ', "private"')
    assert documented == emitted == {"os-entropy", "seed", "generator", "seed-file"}


def test_publishable_basis_lists_every_basis():
    votes = pate.load_votes(MNIST, queries=200)
    reports = [
        pate.analyze(votes, pate.GNMax(40), delta=1e-5, release=False),
        pate.analyze(votes, pate.ConfidentGNMax(200, 150, 40), delta=1e-5, release=False),
        pate.smooth_sensitivity(
            votes, pate.GNMax(40), delta=1e-5, order=20, beta=0.01, sigma_ss=10
        ),
    ]
    emitted = {f["basis"] for r in reports for f in r.to_dict()["publishable"]}
    assert table_column("| basis | what it is |") == emitted


def test_gate_on_lists_every_choice():
    assert table_column("| `--gate-on` | figure | commands |") == {on.value for on in GateOn}


def test_verify_status_and_verdict_are_the_documented_words():
    statuses = quoted_after("`status` is ", ";")
    assert statuses == set(STATUSES)
    verdicts = quoted_after("`verdict` is ", "; `ok`")
    assert verdicts == {"differs", "incomplete", "verified"}


@pytest.mark.parametrize("word", [column.value for column in SortColumn])
def test_every_sort_column_is_documented(word):
    assert f"--sort {'|'.join(c.value for c in SortColumn)}" in DOCS
    assert word in DOCS


def test_the_readme_lists_the_same_layouts():
    readme = (Path(__file__).resolve().parents[1] / "README.md").read_text()
    start = readme.index("`input.layout` in the JSON (")
    listed = set(re.findall(r'"([a-z -]+)"', readme[start : readme.index(")", start + 30)]))
    assert listed == quoted_after("`input.layout` in the JSON (")


@pytest.mark.parametrize(
    ("extra", "sentence"),
    [
        ([], "exists: a second run spends the privacy budget again; pass --force to replace it"),
        (["--no-release"], "exists; pass --force to replace it"),
    ],
)
def test_an_existing_record_is_refused_with_the_documented_sentence(tmp_path, extra, sentence):
    from pate_cli.errors import ExitCode
    from tests.conftest import run_cli

    record = tmp_path / "run.record.json"
    args = ["analyze", MNIST, "--sigma", 40, "--delta", 1e-5, "--queries", 50, *extra]
    run_cli([*args, "--seed-file", tmp_path / "a.seed", "--record", record])
    again = run_cli(
        [*args, "--seed-file", tmp_path / "b.seed", "--record", record],
        expect=ExitCode.BAD_INPUT,
    )
    assert again.stderr.strip() == f"pate: error: {record} {sentence}"
    assert f'"{sentence}"' in " ".join(DOCS.split())


def test_budget_methods_list_every_method_of_a_total():
    """The budget total's ``method``: every value ``compose`` can return is documented, and
    each is reached by the charges below."""
    from pate_cli.budget import compose
    from pate_cli.budget.accounts import METHODS
    from pate_cli.choices import Conversion

    gaussian = {"kind": "gaussian", "mu": 0.5}
    pure = {"kind": "pure", "epsilon0": 0.1, "count": 20}
    release = {"kind": "rdp", "orders": [20.0], "rdp": [0.8]}
    cases = [[], [gaussian], [pure], [gaussian, pure], [{"kind": "gaussian", "mu": 3.0}, release]]
    emitted = {compose(case, 1e-5, Conversion.CLASSIC).method for case in cases}
    documented = quoted_after("and `method` says which:", "(the charges split")
    assert documented == set(METHODS) == emitted

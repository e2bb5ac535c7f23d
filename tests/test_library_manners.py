"""The library speaks Python and holds no surprises in a sweep: no noise unless asked,
messages that name parameters (the command line names flags for the same rule)."""

from __future__ import annotations

import numpy as np
import pytest

import pate_cli as pate
from pate_cli.errors import UsageError
from pate_cli.reports.rounding import bound
from tests.conftest import MNIST, run_cli

TABLE2 = pate.ConfidentGNMax(threshold=200, sigma1=150, sigma=40)


@pytest.fixture(scope="module")
def votes():
    return pate.load_votes(MNIST, queries=640)


def test_analyze_draws_no_noise_by_default(votes, monkeypatch):
    """The default release is the expected one: every figure of the release but the sample,
    and no generator is ever asked for (a stream of any purpose would raise)."""

    def no_generator(*args, **kwargs):
        raise AssertionError("a generator was created")

    monkeypatch.setattr(np.random, "default_rng", no_generator)
    report = pate.analyze(votes, TABLE2, delta=1e-5)
    release = report.to_dict()["release"]
    assert release["epsilon_released"] is None and release["noise"] is None
    assert round(release["epsilon_expected_release"], 4) == 2.5769  # the CLI's expected value
    assert not any("seed" in warning or "public" in warning for warning in report.warnings)
    assert 'not drawn (release="sample" draws it)' in report._repr_markdown_()


def test_a_sample_is_drawn_when_asked(votes):
    sampled = pate.analyze(votes, TABLE2, delta=1e-5, release="sample", seed=5)
    again = pate.analyze(votes, TABLE2, delta=1e-5, release=True, seed=5)
    assert sampled.release.epsilon_released == again.release.epsilon_released is not None
    cli = run_cli(
        ["analyze", MNIST, "--threshold", 200, "--sigma1", 150, "--sigma", 40, "--delta", 1e-5]
    )
    assert "sampled" in cli.stdout  # the command line keeps drawing by default


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (
            {"seed": 3},
            'seed= seeds the release\'s sample, and this call draws none: pass release="sample"',
        ),
        ({"release": "maybe"}, "release='maybe': expected \"expected\""),
    ],
)
def test_a_seed_without_a_sample_is_refused(votes, extra, message):
    with pytest.raises(UsageError, match=message.replace("(", r"\(").replace(")", r"\)")):
        pate.analyze(votes, TABLE2, delta=1e-5, **extra)
    pate.analyze(votes, TABLE2, delta=1e-5, release=False, seed=3)  # as --no-release --seed


def test_compare_from_python_orders_and_shows_as_the_command_line(votes):
    """Best publishable first, in the report, its JSON and its Markdown (which has the
    publishable column the command line's table has)."""
    settings = [TABLE2, pate.GNMax(40), pate.LNMax(0.05)]
    report = pate.compare(votes, settings, delta=1e-5)
    publishable = [
        min(f["epsilon"] for f in row["publishable"]) for row in report.to_dict()["rows"]
    ]
    assert publishable == sorted(publishable) and report.to_dict()["sort"] == "publishable"
    assert [row.mechanism.name for row in report.rows][:2] == ["gnmax", "confident-gnmax"]
    markdown = report._repr_markdown_()
    header = next(line for line in markdown.splitlines() if line.startswith("| #"))
    assert header.split("|")[4].strip() == "publishable"
    first = next(line for line in markdown.splitlines() if line.startswith("| 1 "))
    assert first.split("|")[4].strip() == bound(publishable[0])  # rounded up
    assert "sorted by publishable (best first)" in markdown
    cli = run_cli(
        ["compare", MNIST, "--queries", 640, "--delta", 1e-5, "--sigma", 40, "--json"]
        + ["--threshold", 200, "--sigma1", 150, "--gamma", 0.05]
    ).json
    assert [row["mechanism"]["name"] for row in cli["rows"]] == [
        row["mechanism"]["name"] for row in report.to_dict()["rows"]
    ]

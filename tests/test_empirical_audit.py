"""``pate audit``: a lower bound on epsilon from the sampler that runs, held to what it claims.

The bound is wrong (above the truth) with probability at most alpha: over many seeds, at the
Table-2 and README settings of every built-in, the bound exceeds the epsilon its own test
certifies (log((Pr_A[S] - delta) / Pr_B[S]) at the stated law's rates) in at most an alpha
share of the audits, and never a figure pate claims. A claim below the truth is flagged
(exit 1); a sampler drawing sigma / 2 behind a declared sigma is caught by the test kit; a
thresholded mechanism and a plugin run through the same command; bad options are one line,
exit 2."""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import ClassVar

import numpy as np
import pytest

import pate_cli as pate
from pate_cli.errors import ExitCode
from pate_cli.jobs.audit import run_audit
from pate_cli.mechanisms.gnmax import GNMax
from pate_cli.mechanisms.registry import register, unregister
from pate_cli.testing import CheckFailed, check_audit
from tests.conftest import MNIST, ROOT, run_cli
from tests.plugins.laplace_threshold import LaplaceThreshold

ALPHA = 0.05
SEEDS = 100
# Table 2 of the 2018 paper (MNIST; SVHN and Adult; Glyph) and the README's settings.
SETTINGS = [
    pate.ConfidentGNMax(threshold=200, sigma1=150, sigma=40),
    pate.ConfidentGNMax(threshold=300, sigma1=200, sigma=40),
    pate.ConfidentGNMax(threshold=1000, sigma1=500, sigma=100),
    pate.InteractiveGNMax(threshold=200, sigma1=150, sigma=40),
    pate.GNMax(sigma=40),
    pate.LNMax(gamma=0.1),
    pate.GNMax(sigma=1),
]


def _certified(report: pate.AuditReport) -> float:
    """The epsilon the audit's own test certifies at the stated law's rates."""
    rate, other = report.test["expected_rate_positive"], report.test["expected_rate_other"]
    if rate <= report.delta:
        return 0.0
    return math.log(rate - report.delta) - math.log(other)


@pytest.mark.parametrize("mechanism", SETTINGS, ids=repr)
def test_the_bound_is_wrong_in_at_most_an_alpha_share_of_audits(mechanism):
    wrong = claimed_below = 0
    for seed in range(SEEDS):
        report = run_audit(mechanism, delta=1e-5, runs=20_000, alpha=ALPHA, seed=seed)
        wrong += report.epsilon_lower_bound > _certified(report)
        claimed_below += bool(report.exceeds)
    tolerance = SEEDS * ALPHA + 3 * math.sqrt(SEEDS * ALPHA * (1 - ALPHA))
    assert wrong <= tolerance
    assert claimed_below == 0


def test_a_gnmax_worst_case_pair_lands_near_its_expectation():
    for seed in range(3):
        report = run_audit(GNMax(sigma=1.0), delta=1e-5, seed=seed)  # 1e6 runs a side
        assert abs(report.epsilon_lower_bound - report.epsilon_lower_bound_expected) <= 0.2
    assert report.epsilon_lower_bound_expected == pytest.approx(4.2716, abs=1e-4)
    assert report.pair == {"source": "search", "a": [1, 4], "b": [0, 5]}
    claimed = report.claimed
    assert claimed["stated_law"] == pytest.approx(4.4217, abs=1e-4)  # the pair's own epsilon
    assert claimed["data_independent_exact"] == pytest.approx(6.5730, abs=1e-4)
    assert report.epsilon_lower_bound < claimed["stated_law"] < claimed["data_independent_exact"]


def test_a_claim_below_the_truth_is_flagged():
    done = run_cli(
        ["audit", "--sigma", 1, "--delta", 1e-5, "--claim", 2.94, "--seed", 0, "--json"],
        expect=ExitCode.CLAIM_BELOW_AUDIT,
    )
    report = json.loads(done.stdout)
    assert report["exceeds"] == ["claim"]
    assert report["claimed"]["claim"] == 2.94
    assert report["epsilon_lower_bound"] > 4.0
    text = run_cli(
        ["audit", "--sigma", 1, "--delta", 1e-5, "--claim", 2.94, "--seed", 0],
        expect=ExitCode.CLAIM_BELOW_AUDIT,
    ).stdout
    assert "exceeds: claim (the implementation or its claim is wrong)" in text
    assert "BELOW IT" in text


def test_the_json_has_the_contracts_keys_and_the_library_gives_it():
    args = ["audit", "--sigma", 2, "--delta", 1e-5, "--runs", 50_000, "--seed", 7, "--json"]
    printed = run_cli(args).stdout
    report = json.loads(printed)
    for key in ("epsilon_lower_bound", "epsilon_lower_bound_expected", "method", "runs"):
        assert key in report
    assert (report["runs"], report["alpha"], report["delta"], report["queries"]) == (
        50_000,
        0.05,
        1e-5,
        1,
    )
    assert report["method"] == "clopper-pearson"
    assert set(report["claimed"]) == {
        "data_independent",
        "data_independent_exact",
        "guaranteed",
        "stated_law",
    }
    assert report["exceeds"] == []
    assert report["noise"] == {"source": "seed", "seed": 7}
    library = pate.audit(pate.GNMax(sigma=2), delta=1e-5, runs=50_000, seed=7)
    assert json.dumps(library.to_dict()) + "\n" == printed
    assert run_cli(args).stdout == printed  # a seed reproduces the audit


def test_without_a_seed_the_noise_is_the_systems_and_not_shown():
    report = pate.audit(pate.GNMax(sigma=2), delta=1e-5, runs=20_000)
    assert report.to_dict()["noise"] == {"source": "os-entropy"}


def test_whole_runs_compose_the_pair():
    one = run_audit(GNMax(sigma=2.0), delta=1e-5, runs=100_000, seed=1)
    ten = run_audit(GNMax(sigma=2.0), delta=1e-5, runs=100_000, seed=1, queries=10)
    assert ten.queries == 10
    assert ten.claimed["data_independent_exact"] == pytest.approx(
        pate.audit(pate.GNMax(sigma=2 / math.sqrt(10)), delta=1e-5, runs=1000, seed=1).claimed[
            "data_independent_exact"
        ],
        rel=1e-9,
    )  # mu = sqrt(2 T) / sigma
    assert ten.epsilon_lower_bound > one.epsilon_lower_bound
    assert not ten.exceeds


def test_a_thresholded_mechanism_audits_both_steps():
    args = ["audit", "--threshold", 5, "--sigma1", 2, "--sigma", 1.5, "--delta", 1e-5]
    report = json.loads(run_cli([*args, "--runs", 100_000, "--seed", 3, "--json"]).stdout)
    assert report["mechanism"]["name"] == "confident-gnmax"
    assert report["test_from"] == "stated law"
    assert report["epsilon_lower_bound"] > 0.5
    assert report["exceeds"] == []


@pytest.fixture
def laplace_threshold() -> Iterator[None]:
    register(LaplaceThreshold)
    yield
    unregister(LaplaceThreshold.name)


@pytest.mark.usefixtures("laplace_threshold")
def test_a_plugin_without_a_stated_law_is_audited_on_held_out_draws():
    args = ["audit", "--threshold", 5, "--threshold-scale", 1, "--answer-scale", 1]
    done = run_cli([*args, "--delta", 1e-5, "--runs", 100_000, "--seed", 3, "--json"])
    report = json.loads(done.stdout)
    assert report["mechanism"]["name"] == "laplace-threshold"
    assert report["test_from"] == "held-out draws"
    assert "stated_law" not in report["claimed"]
    assert report["epsilon_lower_bound"] > 0.5
    assert report["exceeds"] == []
    assert any("held-out draws" in warning for warning in report["warnings"])


def test_a_query_of_a_vote_file_is_audited_without_showing_its_votes():
    args = ["audit", MNIST, "--query", 3, "--sigma", 40, "--delta", 1e-5, "--runs", 20_000]
    report = json.loads(run_cli([*args, "--seed", 1, "--json"]).stdout)
    assert report["private"] is True
    assert set(report["pair"]) == {"source", "query", "move"}
    assert report["pair"]["query"] == 3
    votes = np.load(MNIST)[3]
    source, target = report["pair"]["move"]
    assert votes[source] >= 1 and source != target
    assert any("private data" in warning for warning in report["warnings"])


@dataclass(frozen=True)
class HalfSigmaGNMax(GNMax):
    """Declares sigma (its figures and its stated law are GNMax's) and draws sigma / 2."""

    name: ClassVar[str] = "half-sigma-gnmax"

    def run(self, counts, noise, run):  # type: ignore[no-untyped-def]
        return GNMax(self.sigma / 2).run(counts, noise, run)


def test_the_kit_catches_a_sampler_drawing_half_its_sigma():
    check_audit(GNMax(sigma=2.0))
    with pytest.raises(CheckFailed) as failed:
        check_audit(HalfSigmaGNMax(sigma=2.0))
    said = str(failed.value)
    assert said.startswith("half-sigma-gnmax: audit: its draws bound epsilon from below by ")
    assert "above its data_independent_exact 2.943225239801" in said


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--query", 1], "--query picks a query of VOTES: give the votes file too"),
        (["--runs", 10], "--runs 10: expected a whole number from 1,000 to 10,000,000,000"),
        (["--alpha", 1.5], "--alpha 1.5: expected a number strictly between 0 and 1"),
        (["--claim", -1], "--claim -1.0: expected a finite number >= 0"),
        (["--classes", 1], "--classes 1: expected a whole number from 2 to 1,000"),
        (["--queries", 0], "--queries 0: expected a whole number from 1 to 10,000"),
        ([MNIST], "VOTES is audited one query at a time: give --query I"),
        ([MNIST, "--query", 10**6], "--query 1000000: expected a whole number from 0 to"),
        (["--test-from", "bogus"], "--test-from: 'bogus' is not one of 'law', 'draws'"),
        (["--seed", -1], "--seed -1: expected a non-negative integer"),
    ],
)
def test_bad_options_are_one_line_and_exit_2(args, message):
    done = run_cli(["audit", "--sigma", 1, "--delta", 1e-5, *args], expect=ExitCode.BAD_INPUT)
    assert done.stderr.startswith(f"pate: error: {message}")
    assert done.stderr.count("\n") == 1
    assert done.stdout == ""


def test_more_classes_than_the_stated_law_covers_fall_back_to_held_out_draws():
    args = ["audit", "--sigma", 1, "--classes", 30, "--delta", 1e-5, "--runs", 20_000]
    report = json.loads(run_cli([*args, "--seed", 2, "--json"]).stdout)
    assert report["test_from"] == "held-out draws"
    assert report["pair"]["a"][2:] == [0] * 28
    assert any("cover at most 20 classes; got 30" in warning for warning in report["warnings"])
    assert report["exceeds"] == []


def test_progress_counts_the_runs_of_both_sides():
    seen: list[tuple[str, int, int]] = []

    @contextmanager
    def progress(description: str, total: int) -> Iterator[Callable[[int], None]]:
        done = [0]
        yield lambda n: done.__setitem__(0, done[0] + n)
        seen.append((description, total, done[0]))

    pate.audit(pate.GNMax(sigma=2), delta=1e-5, runs=30_000, queries=50, seed=1, progress=progress)
    assert seen == [("audit draws", 60_000, 60_000)]


@dataclass(frozen=True)
class SilentGNMax(GNMax):
    """Says it answers every query, and releases nothing."""

    name: ClassVar[str] = "silent-gnmax"

    def run(self, counts, noise, run):  # type: ignore[no-untyped-def]
        from pate_cli.mechanisms.samplers import answer_where

        nothing = np.zeros(len(counts), dtype=bool)
        return answer_where(nothing, np.zeros(len(counts), dtype=np.int64))


def test_a_mechanism_breaking_its_word_is_its_failure():
    with pytest.raises(pate.PluginError, match=r"'silent-gnmax' .* failed: its run released a "
                       r"label outside the classes 0\.\.1; the failure is the mechanism's"):  # fmt: skip
        pate.audit(SilentGNMax(sigma=1.0), delta=1e-5, runs=1000, seed=0)


def test_a_query_that_cannot_be_audited_is_one_line(write_npy):
    zero = write_npy(np.array([[3, 1], [0, 0], [2, 2]]))
    args = ["audit", "--sigma", 1, "--delta", 1e-5, "--runs", 1000]
    reading = ["--format", "counts", "--teachers", 4]
    done = run_cli([*args, zero, *reading, "--query", 1], expect=ExitCode.BAD_INPUT)
    assert done.stderr == (
        f"pate: error: {zero}: query 1 holds no vote to move (or one class only): it has no "
        "neighbour to audit against\n"
    )
    sparse = "sample_data/next_token_votes.npz"
    done = run_cli([*args, ROOT / sparse, "--query", 0], expect=ExitCode.BAD_INPUT)
    assert done.stderr.endswith("votes over a vocabulary: audit a dense file of counts\n")
    assert done.stderr.count("\n") == 1


def test_the_report_shows_itself_in_one_line_and_in_a_notebook():
    report = run_audit(GNMax(sigma=1.0), delta=1e-5, seed=0, claim=2.94)
    assert repr(report) == (
        "AuditReport(mechanism=gnmax, queries=1, runs=1000000, epsilon_lower_bound>=4.272, "
        "exceeds=['claim'])"
    )  # 4.27292...: a lower bound rounded down
    markdown = report._repr_markdown_()
    assert markdown.startswith("### pate audit: epsilon >= 4.272\n")
    assert "| claim | 2.94 | **below the lower bound** |" in markdown
    assert "| data_independent_exact | 6.573 | above |" in markdown


def test_the_confidence_is_never_shown_above_itself():
    text = run_cli(["audit", "--sigma", 1, "--delta", 1e-5, "--runs", 20_000, "--alpha", 4e-5,
                    "--seed", 0]).stdout  # fmt: skip
    assert "with probability >= 0.9999 at delta" in text  # 0.99996, rounded down
    report = run_audit(GNMax(sigma=1.0), delta=1e-5, runs=20_000, alpha=4e-5, seed=0)
    assert "with probability >= 0.9999 at delta" in report._repr_markdown_()


def test_the_gaussian_estimate_is_below_the_epsilon_of_its_mu():
    """Against mu-GDP's delta(eps) in 50-digit arithmetic (Dong, Roth and Su 2022, Cor. 2.13):
    at the printed epsilon, delta is still at least the target, so the epsilon is below the
    one of the mu bounded."""
    import mpmath

    report = run_audit(GNMax(sigma=1.0), delta=1e-5, seed=0)
    mu, eps = report.mu_lower_bound, report.epsilon_gaussian
    assert mu is not None and eps is not None and 1.0 < mu < math.sqrt(2)
    with mpmath.workdps(50):
        m, e = mpmath.mpf(mu), mpmath.mpf(eps)
        delta = mpmath.ncdf(-e / m + m / 2) - mpmath.exp(e) * mpmath.ncdf(-e / m - m / 2)
    assert delta >= mpmath.mpf(report.delta)
    assert eps < report.claimed["data_independent_exact"]  # mu below sqrt(2) / sigma


def test_the_2017_labels_file_is_audited_as_read():
    args = ["audit", "sample_data/mnist_250_teachers_labels.npy", "--query", 0, "--sigma", 40]
    report = json.loads(run_cli([*args, "--delta", 1e-5, "--runs", 5_000, "--json"]).stdout)
    assert report["private"] is True and report["exceeds"] == []
    assert report["pair"]["source"] == "votes"


def test_a_query_of_a_streamed_file_is_read_alone(monkeypatch):
    """A file read a block at a time gives its query's row alone: the audit is the same."""
    import pate_cli.votes

    args = [MNIST, "--query", 7, "--sigma", 40, "--delta", 1e-5, "--runs", 5_000, "--seed", 4]
    whole = json.loads(run_cli(["audit", *args, "--json"]).stdout)
    monkeypatch.setattr(pate_cli.votes, "STREAM_MIN_ROWS", 100)
    streamed = pate.load_votes(MNIST)
    assert not isinstance(streamed.counts, np.ndarray)  # read a block at a time
    assert json.loads(run_cli(["audit", *args, "--json"]).stdout) == whole

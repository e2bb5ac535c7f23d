"""``analyze --pld`` and ``pate.analyze(pld=...)``: the figure, where it shows, and what is
refused (the oracle tests are in tests/oracle/test_pld_runs.py)."""

from __future__ import annotations

import json

import numpy as np
import pytest

import pate_cli as pate
from pate_cli.errors import UnsupportedError, UsageError
from tests.conftest import MNIST, run_cli

DELTA = 1e-5


def realistic_votes() -> np.ndarray:
    """286 queries of 250 teachers over 10 classes, 90% of them confident (top count 150 to
    249) and the rest contested (60 to 119)."""
    rng = np.random.default_rng(286)
    votes = np.zeros((286, 10))
    for q in range(286):
        top = rng.integers(150, 250) if q < 257 else rng.integers(60, 120)
        rest = rng.multinomial(250 - top, rng.dirichlet(np.ones(9)))
        row = np.concatenate([[top], rest])
        rng.shuffle(row)
        votes[q] = row
    return votes


def test_on_a_realistic_run_the_q_bound_figure_is_well_below_the_renyi_one():
    """At most 0.9 of the data-dependent RDP figure with the improved conversion (0.862
    measured), the exact pairs lower still, and both above nothing published: the exact
    data-independent figure is the publishable one."""
    votes = realistic_votes()
    mechanism = pate.GNMax(sigma=40)
    report = pate.analyze(
        votes, mechanism, delta=DELTA, conversion="improved", release=False, pld=True
    )
    figure = report.data_dependent_pld
    assert figure is not None and figure.method == "q-bound"
    assert figure.epsilon <= 0.9 * report.data_dependent.epsilon
    assert figure.epsilon == pytest.approx(1.3507, abs=2e-3)
    exact = pate.analyze(votes, mechanism, delta=DELTA, release=False, pld="exact")
    assert exact.data_dependent_pld is not None
    assert exact.data_dependent_pld.method == "exact-pairs"
    assert exact.data_dependent_pld.epsilon < figure.epsilon
    assert figure.epsilon == max(figure.remove, figure.add)


def test_the_json_block_and_the_text_line(write_npy):
    path = write_npy(realistic_votes()[:40])
    out = json.loads(
        run_cli(["analyze", path, "--sigma", "40", "--delta", DELTA, "--pld", "--json"]).stdout
    )
    block = out["data_dependent_pld"]
    assert set(block) >= {"epsilon", "delta", "method", "grid", "queries", "groups"}
    assert block["method"] == "q-bound" and block["queries"] == 40 and block["delta"] == DELTA
    exact = json.loads(
        run_cli(
            ["analyze", path, "--sigma", "40", "--delta", DELTA, "--pld", "exact", "--json"]
        ).stdout
    )
    assert exact["data_dependent_pld"]["method"] == "exact-pairs"
    text = run_cli(
        ["analyze", path, "--sigma", "40", "--delta", DELTA, "--no-release", "--pld"]
    ).stdout
    line = next(line for line in text.splitlines() if "(PLD)" in line)
    assert line.startswith("data-dependent epsilon (PLD) ") and "private" in line
    # Rounded up at the digits shown, as every figure printed for people.
    shown = float(line.split()[3])
    assert shown >= block["epsilon"] and shown - block["epsilon"] < 1e-4
    public = json.loads(
        run_cli(
            ["analyze", path, "--sigma", "40", "--delta", DELTA, "--pld", "--public", "--json"]
        ).stdout
    )
    assert "data_dependent_pld" not in public
    plain = json.loads(
        run_cli(["analyze", path, "--sigma", "40", "--delta", DELTA, "--json"]).stdout
    )
    assert "data_dependent_pld" not in plain


def test_confident_gnmax_on_the_mnist_votes():
    votes = np.load(MNIST, allow_pickle=False)[:64]
    report = pate.analyze(
        votes,
        pate.ConfidentGNMax(threshold=200, sigma1=150, sigma=40),
        delta=DELTA,
        release=False,
        pld="exact",
    )
    assert report.data_dependent_pld is not None
    # Below the exact data-independent figure of the same queries (what the votes save).
    assert report.data_dependent_pld.epsilon < report.exact.epsilon


@pytest.mark.parametrize(
    ("flags", "message"),
    [
        (["--gamma", "0.05"], "lnmax: the privacy-loss-distribution account"),
        (["--threshold", "3", "--sigma1", "1", "--sigma", "2", "--baseline", "BASE"], "Renyi DP"),
        (["--sigma", "40", "--data-independent"], "data-dependent figure"),
    ],
)
def test_what_stays_on_renyi_dp_is_one_line_and_exit_2(write_npy, flags, message):
    path = write_npy(realistic_votes()[:10])
    base = write_npy(np.full((10, 10), 0.1), "base.npy")
    args = ["analyze", path, *[base if f == "BASE" else f for f in flags], "--delta", DELTA]
    result = run_cli([*args, "--pld"], expect=2)
    assert message in result.stderr and len(result.stderr.strip().splitlines()) == 1


def test_more_than_twenty_classes_are_refused_by_the_exact_pairs(write_npy):
    votes = np.zeros((3, 21))
    votes[:, 0] = 10
    path = write_npy(votes)
    result = run_cli(
        ["analyze", path, "--sigma", "4", "--delta", DELTA, "--pld", "exact"], expect=2
    )
    assert "20 classes" in result.stderr
    run_cli(["analyze", path, "--sigma", "4", "--delta", DELTA, "--pld"])


def test_the_library_refuses_an_unknown_choice():
    with pytest.raises(UsageError, match="pld"):
        pate.analyze(realistic_votes()[:5], pate.GNMax(sigma=40), delta=DELTA, pld="fast")
    with pytest.raises(UnsupportedError):
        pate.analyze(realistic_votes()[:5], pate.LNMax(gamma=0.1), delta=DELTA, pld=True)


def test_a_recorded_pld_run_verifies(tmp_path, write_npy):
    path = write_npy(realistic_votes()[:20])
    record = tmp_path / "run.record.json"
    run_cli(
        [
            "analyze",
            path,
            "--sigma",
            "40",
            "--delta",
            DELTA,
            "--pld",
            "--no-release",
            "--record",
            record,
        ]
    )
    saved = json.loads(record.read_text())
    assert "--pld" in saved["command_line"] if "command_line" in saved else True
    run_cli(["verify", record])


def test_compare_shows_each_rows_figure_when_asked(write_npy):
    """Each row's figure is the one analyze gives for that setting; a row whose mechanism
    has none says why, and the others still have theirs."""
    path = write_npy(realistic_votes()[:30])
    out = json.loads(
        run_cli(
            [
                "compare",
                path,
                "--sigma",
                "30,40",
                "--gamma",
                "0.05",
                "--delta",
                DELTA,
                "--pld",
                "--json",
            ]
        ).stdout
    )
    rows = {json.dumps(row["mechanism"], sort_keys=True): row for row in out["rows"]}
    gnmax = rows[json.dumps({"name": "gnmax", "sigma": 40.0}, sort_keys=True)]
    alone = json.loads(
        run_cli(["analyze", path, "--sigma", "40", "--delta", DELTA, "--pld", "--json"]).stdout
    )
    assert gnmax["data_dependent_pld"] == alone["data_dependent_pld"]
    lnmax = next(row for row in out["rows"] if row["mechanism"]["name"] == "lnmax")
    assert "data_dependent_pld" not in lnmax
    text = run_cli(
        ["compare", path, "--sigma", "40", "--gamma", "0.05", "--delta", DELTA, "--pld"]
    ).stdout
    assert "data-dependent epsilon (PLD" in text and "stays on Renyi DP" in text
    plain = json.loads(
        run_cli(["compare", path, "--sigma", "40", "--delta", DELTA, "--json"]).stdout
    )
    assert all("data_dependent_pld" not in row for row in plain["rows"])


def test_votes_held_by_query_give_the_dense_figure():
    """A vocabulary's votes held by their voted classes (a sparse matrix) give the figure of
    the same dense histograms: the unlisted zero-vote classes enter q and q' in closed form."""
    import scipy.sparse

    rng = np.random.default_rng(7)
    dense = np.zeros((25, 64))
    for row in dense:
        classes = rng.choice(64, size=4, replace=False)
        row[classes] = rng.multinomial(50, [0.7, 0.2, 0.06, 0.04])
    mechanism = pate.GNMax(sigma=5)
    sparse = pate.analyze(
        scipy.sparse.csr_matrix(dense), mechanism, delta=DELTA, release=False, pld=True
    )
    plain = pate.analyze(dense, mechanism, delta=DELTA, release=False, pld=True)
    assert sparse.data_dependent_pld is not None and plain.data_dependent_pld is not None
    assert sparse.data_dependent_pld.epsilon == pytest.approx(
        plain.data_dependent_pld.epsilon, rel=1e-9
    )


def test_the_neighbours_q_is_read_in_the_accounting_pass(monkeypatch):
    """One pass over the votes: the analysis's terms carry q' (one call per chunk), and the
    figure is the one computed from terms made without it."""
    from pate_cli.accountant.pld import pld_figure
    from pate_cli.accountant.terms import query_terms
    from pate_cli.mechanisms.steps import GaussianAnswer

    calls = []
    original = GaussianAnswer.logq_neighbour

    def counted(self, counts):
        calls.append(len(counts))
        return original(self, counts)

    monkeypatch.setattr(GaussianAnswer, "logq_neighbour", counted)
    votes = realistic_votes()[:50]
    mechanism = pate.GNMax(sigma=40)
    report = pate.analyze(votes, mechanism, delta=DELTA, release=False, pld=True)
    assert report.terms is not None and report.terms.logq_neighbour is not None
    assert calls == [50]  # once, in the accounting pass: not walked again
    calls.clear()
    apart = pld_figure(votes, mechanism, query_terms(votes, mechanism), DELTA)
    assert calls == [50]  # terms without it: the figure reads the votes itself
    assert report.data_dependent_pld == apart


def test_a_value_pld_does_not_take_is_one_line_and_exit_2(write_npy):
    path = write_npy(realistic_votes()[:5])
    result = run_cli(
        ["analyze", path, "--sigma", "40", "--delta", DELTA, "--pld", "fast"], expect=2
    )
    assert len(result.stderr.strip().splitlines()) == 1 and "fast" in result.stderr
    assert result.stdout == ""


def test_the_pld_bar_counts_the_queries_and_moves_during_the_work():
    """``progress`` gets a "privacy-loss distributions" bar of the queries seen, advanced
    more than once (it was a bar of 1, advanced at the end: never shown under the width
    rule), to its total."""
    from contextlib import contextmanager

    bars: dict[str, tuple[int, list[int]]] = {}

    @contextmanager
    def progress(description, total):
        steps: list[int] = []
        bars[description] = (total, steps)
        yield steps.append

    votes = realistic_votes()
    mechanism = pate.ConfidentGNMax(threshold=200, sigma1=150, sigma=40)
    pate.analyze(votes, mechanism, delta=DELTA, release=False, pld=True, progress=progress)
    total, steps = bars["privacy-loss distributions"]
    assert total == 286 and sum(steps) == 286 and len(steps) >= 4 and min(steps) > 0

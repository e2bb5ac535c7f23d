"""Every figure README.md and docs/ quote is what its command prints, rounded the safe way.

``QUOTES`` holds each quoted figure: the document, the text it stands in (as the document
has it, whitespace aside), the command that computes it, where its ``--json`` holds the
value, and how the figure is rounded (``pate_cli.reports.rounding``: a privacy cost or a
bound on one up at the digits quoted, what bounds nothing to nearest, an order or a solved
value exactly). A few figures are about a case the tests' oracles compute (an exact epsilon,
a true smooth sensitivity); they are computed here the same way.

``NOT_COMMAND_OUTPUTS`` lists every other decimal number of the documents (two significant
digits or more), each with the reason it is not a command's output: an input, a constant, a
measurement, a paper's figure. A scan of the documents requires every decimal number to be
in one or the other (an option's value in a command line is an input and needs no entry),
so a new figure cannot go unchecked and neither list can hold a text the documents lost.
"""

from __future__ import annotations

import functools
import re
import subprocess
import sys
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from enum import Enum
from pathlib import Path
from typing import Any, NamedTuple

import numpy as np
import pytest
from scipy.special import gammaln, log_ndtr

from pate_cli.core.smooth import local_sensitivity_total, smooth_sensitivity
from pate_cli.reports.rounding import bound, nearest
from tests.conftest import ROOT, CliResult, run_cli
from tests.oracle import exact, pld_oracle
from tests.oracle.test_soundness import gnmax_cost
from tests.test_strict_reading import issue_counts

DOCUMENTS = ["README.md", *sorted(f"docs/{p.name}" for p in (ROOT / "docs").glob("*.md"))]


class Rounding(Enum):
    UP = "up"  # a privacy cost or a bound on one: never shown below the value
    NEAREST = "nearest"  # bounds nothing: agreement, an expected count, beta, sigma_ss, a std
    EXACT = "exact"  # an order, a count, a value plan solved (printed as it is)
    PREFIX = "prefix"  # "282.72...": the value's leading digits, the rest left out
    DOWN = "down"  # a lower bound (pate audit's): never shown above the value


UP, NEAREST, EXACT, PREFIX = Rounding.UP, Rounding.NEAREST, Rounding.EXACT, Rounding.PREFIX
DOWN = Rounding.DOWN


class Command(NamedTuple):
    """A command line (run with ``--json``) and the exit code it ends with."""

    args: tuple[str, ...]
    exit: int = 0


# Files the tests make for the cases the documents describe (not sample_data): MADE + name.
MADE = "made:"


def _made_arrays() -> dict[str, Callable[[], np.ndarray]]:
    return {
        "issue.npy": lambda: issue_counts()[1],  # 3,000 x 100 counts, 50 teachers, one vote less
        "row.npy": lambda: np.array([[200, 10, 10, 10, 10, 0, 0, 0, 5, 5]]),
        "halves.npy": lambda: np.array([[6.0, 1.0]]),
        "baseline.npy": lambda: np.array([[3.5, 3.5]]),
        "pilot.npy": lambda: np.tile([[3.0, 1.0]], (100, 1)),
        "long.npy": lambda: np.tile([[250, 0]], (100_000, 1)),
        "certain.npy": lambda: np.array([[31, 9]]),
        "strong.npy": lambda: np.array([[33, 3]]),
    }


def command(*args: str, exit: int = 0) -> Command:
    return Command(tuple(args), exit)


VOTES = "sample_data/mnist_250_teachers.npy"
TABLE2 = ("--threshold", "200", "--sigma1", "150", "--sigma", "40", "--queries", "640")
DELTA = ("--delta", "1e-5")
LABELS_2017 = (
    "sample_data/mnist_250_teachers_labels.npy",
    "--indices",
    "sample_data/mnist_250_teachers_100_indices_used_by_student.npy",
)

ANALYZE_T2 = command("analyze", VOTES, *TABLE2, *DELTA)
AUDIT_GNMAX = command("audit", "--sigma", "1", "--delta", "1e-5", "--seed", "0")
INSPECT_2017 = command("inspect", "sample_data/mnist_250_teachers_labels.npy")
BY_COLUMN = ("readings", 0, "agreement", "by_query")  # the documented layout's queries
BY_ROW = ("readings", 0, "agreement", "by_teacher")
EXACT_T2 = command("analyze", VOTES, *TABLE2, *DELTA, "--threshold-bound", "exact")
GATE_T2 = command("analyze", VOTES, *TABLE2, *DELTA, "--max-epsilon", "2", exit=1)
SS_T2 = command("smooth-sensitivity", VOTES, *TABLE2, *DELTA)
SS_T2_REFERENCE = command(*SS_T2.args, "--reference-local-sensitivity")
# The Python API example's GNMax row (pate.compare's rows are analyze's numbers).
GNMAX_640 = command("analyze", VOTES, "--sigma", "40", "--queries", "640", *DELTA, "--no-release")
PLD = command("analyze", VOTES, "--sigma", "40", "--queries", "286", *DELTA, "--pld")
PLD_EXACT = command(*PLD.args, "exact")
LNMAX_2017 = command("analyze", *LABELS_2017, "--gamma", "0.1", *DELTA, "--orders", "2:10:1")
LNMAX_DEFAULT = command("analyze", *LABELS_2017, "--gamma", "0.1", *DELTA)
LNMAX_SS = command("smooth-sensitivity", *LABELS_2017, "--gamma", "0.05", *DELTA)
LNMAX_SS_FIXED = command(*LNMAX_SS.args, "--order", "27", "--beta", "0.018", "--sigma-ss", "5.5")
RELEASE_9000_LNMAX = command("smooth-sensitivity", VOTES, "--gamma", "0.05", *DELTA)
PLAN = ("plan", "--delta", "1e-5", "--epsilon", "2")
PLAN_GNMAX = command(*PLAN, "--queries", "640")
PLAN_GNMAX_RDP = command(*PLAN, "--queries", "640", "--accountant", "rdp")
PLAN_CONFIDENT = command(*PLAN, "--queries", "640", "--threshold", "200", "--sigma1", "150")
PLAN_LNMAX = command(
    "plan", "--delta", "1e-6", "--epsilon", "2", "--queries", "100", "--mechanism", "lnmax"
)
PLAN_QUERIES = command(*PLAN, "--sigma", "40")
PLAN_UNREACHABLE = command(*PLAN, "--queries", "640", "--threshold", "200", "--sigma", "40", exit=2)
# The documents' cases on files of their own.
NOISE_10 = ("--sigma", "10", *DELTA, "--no-release")
AS_COUNTS = command(
    "analyze", MADE + "issue.npy", "--format", "counts", "--teachers", "50", *NOISE_10
)
AS_LABELS = command("analyze", MADE + "issue.npy", "--format", "labels", *NOISE_10)
AGREEMENT_ROW = command("compare", MADE + "row.npy", "--sigma", "120", *DELTA)
HALVES = command(
    "analyze",
    MADE + "halves.npy",
    "--baseline",
    MADE + "baseline.npy",
    *("--threshold", "8", "--sigma1", "1", "--sigma", "1", *DELTA, "--no-release"),
)
HALVES_EVEN = command(*HALVES.args, "--round-half-even")
PILOT = command(
    "analyze",
    MADE + "pilot.npy",
    *("--threshold", "34.8171", "--sigma1", "9.50428", "--sigma", "0.97634"),
    *("--delta", "1.7912e-8", "--no-release"),
)
LONG_RUN = command(
    "analyze", MADE + "long.npy", "--sigma", "40", *DELTA, "--data-independent", "--no-release"
)
CERTAIN = command(
    "analyze",
    MADE + "certain.npy",
    *("--threshold", "0", "--sigma1", "0.4", "--sigma", "1e100", "--orders", "21"),
    *DELTA,
    "--no-release",
)
FORWARD = command("analyze", MADE + "strong.npy", "--sigma", "0.416", "--orders", "8", *DELTA)


class Runner:
    """Runs each command line once (``run_cli`` with ``--json``) and keeps its result."""

    def __init__(self, made: Path) -> None:
        self.made = made
        self._results: dict[Command, CliResult] = {}

    def result(self, cmd: Command) -> CliResult:
        if cmd not in self._results:
            args = [self._word(word) for word in cmd.args]
            self._results[cmd] = run_cli([*args, "--json"], expect=cmd.exit)
        return self._results[cmd]

    def _word(self, word: str) -> str:
        if word.startswith("sample_data/"):
            return str(ROOT / word)
        if word.startswith(MADE):
            path = self.made / word.removeprefix(MADE)
            if not path.exists():
                np.save(path, _made_arrays()[path.name]())
            return str(path)
        return word


Value = Callable[[Runner], float]


def at(cmd: Command, *path: str | int) -> Value:
    """The number at ``path`` in the command's JSON."""

    def value(runner: Runner) -> float:
        found: Any = runner.result(cmd).json
        for key in path:
            found = found[key]
        return float(found)

    return value


def publishable(cmd: Command, basis: str) -> Value:
    def value(runner: Runner) -> float:
        (figure,) = [f for f in runner.result(cmd).json["publishable"] if f["basis"] == basis]
        return float(figure["epsilon"])

    return value


def oracle(compute: Callable[[], float]) -> Value:
    return lambda runner: compute()


# ----------------------------------------------------------------------------- the oracles


def half_even_exact_epsilon() -> float:
    """One query (6, 1), baseline (3.5, 3.5), T 8, sigma1 1, sigma 1, the statistic rounded
    half to even: the exact epsilon at delta 1e-5 of its outcomes (not answered, each class),
    over both neighbours and both directions."""

    def log_probs(hist: np.ndarray) -> np.ndarray:
        z = np.rint(np.max(hist - 3.5)) - 8.0  # (top - T) / sigma1
        classes = exact.gnmax_log_probs(hist[None, :], 1.0)[0]
        return np.concatenate([[log_ndtr(-z)], log_ndtr(z) + classes])

    votes = np.array([6, 1])
    mine = log_probs(votes.astype(np.float64))
    pairs = []
    for neighbour in exact.neighbours(votes):
        theirs = log_probs(neighbour.astype(np.float64))
        pairs += [(mine, theirs), (theirs, mine)]
    return max(float(pld_oracle.epsilon_at_delta(p, q, 1e-5)) for p, q in pairs)


def pilot_run_exact_epsilon() -> float:
    """100 queries (3, 1), Confident-GNMax T 34.8171, sigma1 9.50428, sigma 0.97634: the
    exact epsilon at delta 1.7912e-8 of the run against each neighbour that moves one teacher
    the same way on every query, both directions (the counts of each outcome say all the
    run's outcomes do: equal counts, equal privacy loss). Moves that differ between queries
    give less (6.5838 with half of each)."""
    mechanism = pld_oracle.ConfidentGNMax(34.8171, 9.50428, 0.97634)
    rows = pld_oracle.query_rows([3, 1], mechanism)  # the votes, then each neighbour
    n = 100
    counts = np.array([(a, b, n - a - b) for a in range(n + 1) for b in range(n + 1 - a)])
    runs = (gammaln(n + 1) - gammaln(counts + 1).sum(axis=1))[:, None] + counts @ rows.T
    return max(
        float(pld_oracle.epsilon_at_delta(p, q, 1.7912e-8))
        for j in range(1, rows.shape[0])
        for p, q in ((runs[:, 0], runs[:, j]), (runs[:, j], runs[:, 0]))
    )


def reverse_divergence() -> float:
    """The votes (33, 3) at sigma 0.416: the largest D_8(M(n') || M(n)) over the neighbours."""
    votes = np.array([33, 3])
    mine = exact.gnmax_log_probs(votes[None, :], 0.416)[0]
    return max(
        float(np.max(exact.renyi(exact.gnmax_log_probs(n[None, :], 0.416)[0], mine, 8.0)))
        for n in exact.neighbours(votes)
    )


# The row (1, 5) at sigma 0.66, order 1.634 (README: the reference's rounding at q0).
ROW, SIGMA, ORDER, BETA = np.array([1, 5]), 0.6627539642921852, 1.634, 0.008742972906218682


def true_smooth_sensitivity() -> float:
    ls = exact.local_sensitivities(gnmax_cost(SIGMA, ORDER), int(ROW.sum()), ROW.size)
    return float(exact.smooth_sensitivity(ROW, ls, int(ROW.sum()), BETA))


def reference_smooth_sensitivity() -> float:
    votes = ROW[None, :].astype(np.float64)
    table = local_sensitivity_total(votes, int(ROW.sum()), ORDER, SIGMA, reference=True)
    return float(smooth_sensitivity(table, BETA))


def certain_threshold_divergence() -> float:
    """(31, 9) at T 0, sigma1 0.4: the threshold step's D_21 over the neighbours."""

    def outcomes(hists: np.ndarray) -> np.ndarray:
        return exact.threshold_log_probs(hists, 0.0, 0.4)

    return float(exact.max_over_neighbours([31, 9], outcomes, 21.0)[0])


# ----------------------------------------------------------------------------- the quotes


@dataclass(frozen=True)
class Figure:
    shown: str  # as the document quotes it
    value: Value
    rounding: Rounding


@dataclass(frozen=True)
class Quote:
    file: str
    text: str  # as the document has it, any run of whitespace read as one space
    figures: tuple[Figure, ...]
    printed: Command | None = None  # a command whose output holds the text itself


def quote(
    file: str, text: str, *figures: tuple[str, Value, Rounding], printed: Command | None = None
) -> Quote:
    return Quote(file, text, tuple(Figure(*f) for f in figures), printed)


README, API, CLI = "README.md", "docs/api.md", "docs/cli.md"
DD = ("data_dependent", "epsilon")
ORDER_DD = ("data_dependent", "order")

QUOTES = [
    # README: pate audit's worked example (a lower bound: down; its expected value: nearest).
    quote(
        README,
        "prints epsilon >= 4.272 (its expected value 4.272), below the exact epsilon of the "
        "pair under GNMax's law, 4.422, and the exact data-independent figure, 6.573",
        ("4.272", at(AUDIT_GNMAX, "epsilon_lower_bound"), DOWN),
        ("4.272", at(AUDIT_GNMAX, "epsilon_lower_bound_expected"), NEAREST),
        ("4.422", at(AUDIT_GNMAX, "claimed", "stated_law"), UP),
        ("6.573", at(AUDIT_GNMAX, "claimed", "data_independent_exact"), UP),
    ),
    # The layout of the 2017 labels, from their agreement (what bounds nothing: nearest).
    quote(
        README,
        "(lambda 0.679 by column, 3e-04 by row)",
        ("0.679", at(INSPECT_2017, *BY_COLUMN, "lambda"), NEAREST),
        ("3e-04", at(INSPECT_2017, *BY_ROW, "lambda"), NEAREST),
    ),
    quote(
        CLI,
        "The 2017 file: lambda 0.679 by column (chance 0.072), 3e-04 by row (chance 0.015)",
        ("0.679", at(INSPECT_2017, *BY_COLUMN, "lambda"), NEAREST),
        ("0.072", at(INSPECT_2017, *BY_COLUMN, "chance"), NEAREST),
        ("3e-04", at(INSPECT_2017, *BY_ROW, "lambda"), NEAREST),
        ("0.015", at(INSPECT_2017, *BY_ROW, "chance"), NEAREST),
    ),
    # README: the first lines, the gate, the Table-2 run.
    quote(
        README,
        "expected answered 282.7, data-dependent epsilon 1.999 at order 14 for delta = 1e-5",
        ("282.7", at(ANALYZE_T2, "expected_answered"), NEAREST),
        ("1.999", at(ANALYZE_T2, *DD), UP),
        ("14", at(ANALYZE_T2, *ORDER_DD), EXACT),
    ),
    quote(
        README,
        "one Gaussian mechanism, is 3.927 (4.786 through RDP)",
        ("3.927", publishable(ANALYZE_T2, "data-independent-exact"), UP),
        ("4.786", publishable(ANALYZE_T2, "worst-case"), UP),
    ),
    quote(
        README,
        "even though the data-dependent epsilon is 1.999:",
        ("1.999", at(ANALYZE_T2, *DD), UP),
    ),
    quote(
        README,
        "whose publishable epsilon was a tenth of the counts' (6.58 instead of 62.3 for GNMax "
        "with sigma 10)",
        ("6.58", publishable(AS_LABELS, "data-independent-exact"), UP),
        ("62.3", publishable(AS_COUNTS, "data-independent-exact"), UP),
    ),
    *(
        quote(
            doc,
            "(100,000 GNMax answers at sigma 40: 1.5)",
            ("1.5", at(LONG_RUN, "data_independent", "order"), EXACT),
        )
        for doc in (README, CLI)
    ),
    # README: --pld.
    quote(
        README,
        "data-dependent epsilon 1.9105 at order 14.50 (private)",
        ("1.9105", at(PLD, *DD), UP),
        ("14.50", at(PLD, *ORDER_DD), EXACT),
    ),
    quote(
        README,
        "data-dependent epsilon (PLD) 1.3620 (private; both directions, q-bound pairs, "
        "286 queries in 188 groups",
        ("1.3620", at(PLD, "data_dependent_pld", "epsilon"), UP),
        ("188", at(PLD, "data_dependent_pld", "groups"), EXACT),
    ),
    quote(
        README,
        "(at most 20 classes; 0.8734 on the same queries)",
        ("0.8734", at(PLD_EXACT, "data_dependent_pld", "epsilon"), UP),
    ),
    # README: compare's agreement; the Python API.
    quote(
        README,
        "On the row [200,10,10,10,10,0,0,0,5,5] at sigma 120 it is 0.549",
        ("0.549", at(AGREEMENT_ROW, "rows", 0, "agreement"), NEAREST),
    ),
    *(
        quote(
            doc,
            "# 282.72..., 1.9988..., 14.0",
            ("282.72...", at(ANALYZE_T2, "expected_answered"), PREFIX),
            ("1.9988...", at(ANALYZE_T2, *DD), PREFIX),
            ("14.0", at(ANALYZE_T2, *ORDER_DD), EXACT),
        )
        for doc in (README, API)
    ),
    # Python's round(x, 3) prints these; rounding up at 3 decimals gives the same.
    quote(
        README,
        "# [('gnmax', 3.148), ('confident-gnmax', 1.999)]",
        ("3.148", at(GNMAX_640, *DD), UP),
        ("1.999", at(ANALYZE_T2, *DD), UP),
    ),
    quote(
        API,
        "# data-independent-exact 3.927",
        ("3.927", publishable(ANALYZE_T2, "data-independent-exact"), UP),
    ),
    quote(
        API,
        "(`data_dependent=1.999 at order 14` for 1.99882)",
        ("1.999", at(ANALYZE_T2, *DD), UP),
        ("14", at(ANALYZE_T2, *ORDER_DD), EXACT),
        ("1.99882", at(ANALYZE_T2, *DD), UP),
    ),
    # README: the release of Table 2.
    quote(
        README,
        "gives order 14, beta 0.0336, E[SS] 0.0739, sigma_ss 5.88, and a released epsilon of "
        "2.577 +/- 0.434 (the data-dependent 1.999 plus the GNSS cost 0.579)",
        ("14", at(SS_T2, "order"), EXACT),
        ("0.0336", at(SS_T2, "beta"), NEAREST),
        ("0.0739", at(SS_T2, "smooth_sensitivity"), UP),
        ("5.88", at(SS_T2, "sigma_ss"), NEAREST),
        ("2.577", at(SS_T2, "epsilon_expected_release"), UP),
        ("0.434", at(SS_T2, "noise_std"), NEAREST),
        ("1.999", at(SS_T2, "epsilon_data_dependent"), UP),
        ("0.579", at(SS_T2, "gnss_cost"), UP),
    ),
    quote(
        README,
        "it gives the paper's numbers: beta 0.0329, E[SS] 0.06175 (the paper prints 0.0618), "
        "sigma_ss 6.23, 2.517 +/- 0.385",
        ("0.0329", at(SS_T2_REFERENCE, "beta"), NEAREST),
        ("0.06175", at(SS_T2_REFERENCE, "smooth_sensitivity"), UP),
        ("6.23", at(SS_T2_REFERENCE, "sigma_ss"), NEAREST),
        ("2.517", at(SS_T2_REFERENCE, "epsilon_expected_release"), UP),
        ("0.385", at(SS_T2_REFERENCE, "noise_std"), NEAREST),
    ),
    quote(
        README,
        "(MNIST Table 2: 2.577 instead of 2.517)",
        ("2.577", at(SS_T2, "epsilon_expected_release"), UP),
        ("2.517", at(SS_T2_REFERENCE, "epsilon_expected_release"), UP),
    ),
    # README: LNMax's release (the 2017 setting).
    quote(
        README,
        "| data-dependent (order 27) | 1.438 |",
        ("27", at(LNMAX_SS, "order"), EXACT),
        ("1.438", at(LNMAX_SS, "epsilon_data_dependent"), UP),
    ),
    quote(
        README,
        "| released, beta and sigma_ss chosen on the votes | 2.444 +/- 0.913 |",
        ("2.444", at(LNMAX_SS, "epsilon_expected_release"), UP),
        ("0.913", at(LNMAX_SS, "noise_std"), NEAREST),
    ),
    quote(
        README,
        "fixed in advance | 2.450 +/- 0.919 |",
        ("2.450", at(LNMAX_SS_FIXED, "epsilon_expected_release"), UP),
        ("0.919", at(LNMAX_SS_FIXED, "noise_std"), NEAREST),
    ),
    quote(
        README,
        "(optimal composition of 100 (0.1)-DP steps) | 4.307 |",
        ("4.307", publishable(LNMAX_SS_FIXED, "data-independent-exact"), UP),
    ),
    quote(
        README,
        "| data-independent (RDP, order 6) | 5.303 |",
        ("5.303", publishable(LNMAX_SS_FIXED, "data-independent"), UP),
    ),
    # README: reproducing the papers.
    quote(
        README,
        "# 2018, Table 2, MNIST: expected answered 282.7, epsilon 1.999 at order 14",
        ("282.7", at(ANALYZE_T2, "expected_answered"), NEAREST),
        ("1.999", at(ANALYZE_T2, *DD), UP),
        ("14", at(ANALYZE_T2, *ORDER_DD), EXACT),
    ),
    quote(
        README,
        "on the student's 100 queries: epsilon 2.0486 at order 9.",
        ("2.0486", at(LNMAX_2017, *DD), UP),
        ("9", at(LNMAX_2017, *ORDER_DD), EXACT),
    ),
    quote(
        README,
        "the same LNMax bound gives 1.408 at order 23",
        ("1.408", at(LNMAX_DEFAULT, *DD), UP),
        ("23", at(LNMAX_DEFAULT, *ORDER_DD), EXACT),
    ),
    quote(
        README,
        "On the MNIST reference both give 2.0486.",
        ("2.0486", at(LNMAX_2017, *DD), UP),
    ),
    quote(
        README,
        "| LNMax, gamma 0.05 | 2.5 |",
        ("2.5", at(RELEASE_9000_LNMAX, "order"), EXACT),
    ),
    # README: which epsilon to publish.
    quote(
        README,
        "| `data_dependent` | 1.999 (order 14) |",
        ("1.999", at(ANALYZE_T2, *DD), UP),
        ("14", at(ANALYZE_T2, *ORDER_DD), EXACT),
    ),
    quote(
        README,
        "| `data_dependent`, `--threshold-bound exact` | 1.923 (order 14.5) |",
        ("1.923", at(EXACT_T2, *DD), UP),
        ("14.5", at(EXACT_T2, *ORDER_DD), EXACT),
    ),
    quote(
        README,
        "| `guaranteed` | 2.025 (order 13.5) |",
        ("2.025", at(ANALYZE_T2, "guaranteed", "epsilon"), UP),
        ("13.5", at(ANALYZE_T2, "guaranteed", "order"), EXACT),
    ),
    quote(
        README,
        "| `release.epsilon_expected_release` | 2.577 +/- 0.434 |",
        ("2.577", at(ANALYZE_T2, "release", "epsilon_expected_release"), UP),
        ("0.434", at(ANALYZE_T2, "release", "noise_std"), NEAREST),
    ),
    quote(
        README,
        "| `data_independent` | 3.158 |",
        ("3.158", at(ANALYZE_T2, "data_independent", "epsilon"), UP),
    ),
    quote(
        README,
        "| `data_independent_exact` | 3.927 | every query answered, the whole run as one "
        "Gaussian mechanism (mu = 0.911)",
        ("3.927", at(ANALYZE_T2, "data_independent_exact", "epsilon"), UP),
        ("0.911", at(ANALYZE_T2, "data_independent_exact", "mu"), UP),
    ),
    quote(
        README,
        "| `data_independent_worst_case` | 4.786 (order 6.5) |",
        ("4.786", at(ANALYZE_T2, "data_independent_worst_case", "epsilon"), UP),
        ("6.5", at(ANALYZE_T2, "data_independent_worst_case", "order"), EXACT),
    ),
    quote(
        README,
        "(Table 2: released 2.515 +/- 0.453 instead of 2.577 +/- 0.434)",
        ("2.515", at(EXACT_T2, "release", "epsilon_expected_release"), UP),
        ("0.453", at(EXACT_T2, "release", "noise_std"), NEAREST),
        ("2.577", at(ANALYZE_T2, "release", "epsilon_expected_release"), UP),
        ("0.434", at(ANALYZE_T2, "release", "noise_std"), NEAREST),
    ),
    # README: the expected cost against the run's true epsilon; the reverse direction.
    quote(
        README,
        "can lie below the run's true epsilon (2.53 against 6.61 on the case in `pate plan`)",
        ("2.53", at(PILOT, *DD), UP),
        ("6.61", oracle(pilot_run_exact_epsilon), UP),
    ),
    quote(
        README,
        "it is 2.53 where the exact epsilon of the run is 6.61 and `guaranteed` 14.29)",
        ("2.53", at(PILOT, *DD), UP),
        ("6.61", oracle(pilot_run_exact_epsilon), UP),
        ("14.29", at(PILOT, "guaranteed", "epsilon"), UP),
    ),
    quote(
        README,
        "Theorem 6 bounds the forward divergence by about 9e-23 while the reverse one is 5.17.",
        ("9e-23", at(FORWARD, "data_dependent", "rdp", 0), UP),
        ("5.17", oracle(reverse_divergence), UP),
    ),
    # README: plan.
    quote(
        README,
        "give sigma 71.332803 for 640 GNMax queries (the exact accountant; `--accountant rdp` "
        "gives 89.417379), sigma 75.743576 for Confident-GNMax with sigma1 150 (every query "
        "answered), gamma 0.022816157 for 100 LNMax queries at delta 1e-6, and 201 GNMax "
        "queries at sigma 40.",
        ("71.332803", at(PLAN_GNMAX, "value"), EXACT),
        ("89.417379", at(PLAN_GNMAX_RDP, "value"), EXACT),
        ("75.743576", at(PLAN_CONFIDENT, "value"), EXACT),
        ("0.022816157", at(PLAN_LNMAX, "value"), EXACT),
        ("201", at(PLAN_QUERIES, "value"), EXACT),
    ),
    quote(
        README,
        "Shorten a value only in the same direction (71.34,",
        ("71.34", at(PLAN_GNMAX, "value"), UP),
    ),
    # README and docs/cli.md: the rounding rule's example; the gate's line; plan's message.
    *(
        quote(
            doc,
            text,
            ("3.926701...", at(ANALYZE_T2, "data_independent_exact", "epsilon"), PREFIX),
            ("3.9268", at(ANALYZE_T2, "data_independent_exact", "epsilon"), UP),
        )
        for doc, text in (
            (README, "Table 2's publishable 3.926701... prints as 3.9268."),
            (CLI, "publishable 3.926701... prints as 3.9268, never"),
        )
    ),
    quote(
        CLI,
        "pate: publishable epsilon 3.92671 exceeds --max-epsilon 2",
        ("3.92671", at(GATE_T2, "gate", "epsilon"), UP),
        printed=GATE_T2,
    ),
    quote(
        CLI,
        "--epsilon 2: no sigma1 reaches it: the other steps alone cost epsilon 3.85 at delta "
        "1e-05; the smallest reachable is 3.85 (sigma1 -> infinity)",
        # The other steps: GNMax(40) on 640 queries, by plan's exact accountant.
        ("3.85", at(GNMAX_640, "data_independent_exact", "epsilon"), UP),
        printed=PLAN_UNREACHABLE,
    ),
    # README: where pate departs from the reference.
    quote(
        README,
        "publishable 12.88 (Gaussian DP, mu = sqrt(6)), where the mechanism's exact epsilon is "
        "9.998 and a move of 1 would have claimed 8.39.",
        ("12.88", publishable(HALVES_EVEN, "data-independent-exact"), UP),
        ("9.998", oracle(half_even_exact_epsilon), UP),
        ("8.39", publishable(HALVES, "data-independent-exact"), UP),
    ),
    quote(
        README,
        "the reference's 1.30 against a true 2.71",
        ("1.30", oracle(reference_smooth_sensitivity), UP),
        ("2.71", oracle(true_smooth_sensitivity), UP),
    ),
    quote(
        README,
        "costs 46.49 at order 21 (pate's bound: 46.63), not 0.",
        ("46.49", oracle(certain_threshold_divergence), UP),
        ("46.63", at(CERTAIN, "data_dependent", "rdp", 0), UP),
    ),
]


# Decimal numbers of the documents that no command prints: (document, the text that holds
# them, why). A number inside a listed text needs no entry of its own.
TABLE = "table: "  # the rows of the Markdown table whose header row starts with this text

NOT_COMMAND_OUTPUTS: list[tuple[str, str, str]] = [
    (
        CLI,
        "so the bound never exceeds log(N / ln(2 / alpha)), about 12.5 at the defaults",
        "a formula's value at the default runs and alpha: log(1e6 / ln 40)",
    ),
    (CLI, "`RDP at 302 orders (1.1 to 500)`", "the default order grid, an input"),
    (
        "docs/mechanisms.md",
        "at order 1.25 on the histogram [0, 3, 5] (8 teachers, 3 classes): 0.0 < 0.5526...",
        "the words of the test kit's failure, an example of its message",
    ),
    ("docs/mechanisms.md", "of `ORDERS` (1.25 to 64)", "the test kit's orders, an input"),
    (CLI, "exceeds chance by at least 0.25 (a quarter", "a constant of the layout test"),
    (
        CLI,
        "is read at agreement 0.95 and refused at 0.4",
        "the inputs of a test's generated files (tests/test_layout_evidence.py)",
    ),
    (README, "in a 3.9 MB archive: exit 2 in 0.6 s", "a measured archive size and wall time"),
    (README, "(2.5e6 queries)", "a benchmark's input size"),
    (README, TABLE + "| run (fresh process, one run) |", "benchmarks/bench_next_token.py"),
    (README, "(2.4 non-zeros a query)", "a property of the benchmark's generated file"),
    (README, "302 orders: 1.1, 1.25, 1.5 and 1.75", "the default order grid, an input"),
    (README, "100.5 in steps of 0.5", "the default order grid, an input"),
    (README, "The smallest order stays above 1.01", "a constant of the improved conversion"),
    (README, "(a simulation gives 0.547)", "a Monte Carlo estimate, no command's output"),
    (README, "(the paper prints 0.0618)", "the 2018 paper's figure, as the paper prints it"),
    (README, "beta 0.018 and sigma_ss 5.5 fixed in advance", "the command's inputs"),
    (README, "2 cores and 23.5 GiB (Linux 6.18", "the benchmark machine"),
    (
        README,
        TABLE + "| run (`bench_targets.py --large`, one run) |",
        "benchmarks/bench_targets.py",
    ),
    (README, TABLE + "| command (fresh process, best of 10) |", "benchmarks/bench_startup.py"),
    (
        README,
        "0.24 s of CPU in imports past its floor, 0.03 s of it scipy.sparse for sparse inputs, "
        "and under 0.03 s in the analysis",
        "measured CPU times (importing the modules the command loads, against its floor)",
    ),
    (README, TABLE + "| case (fresh process, best of 3) |", "benchmarks/bench_scale.py"),
    (README, "took 3.1 to 4.2 s over five runs", "measured wall times"),
    (README, "costs 4.6 times the analysis", "a measured ratio of wall times"),
    (README, "0.5 s of 1.2", "measured wall times"),
    (
        README,
        TABLE + "| case (fresh process, 2 queries x 3 classes x 1e7 teachers) |",
        "benchmarks/bench_teachers_memory.py",
    ),
    (
        README,
        "(10.9 GB for GNMax before the tables were blocked; 614 MB, 919 MB and 381 MB before",
        "measured peak memory of earlier versions",
    ),
    (README, "(MNIST 4.4 s, Adult 11.5 s, SVHN 53.8 s;", "the reference code's measured times"),
    (
        README,
        TABLE + "| smooth-sensitivity | queries x classes x teachers |",
        "benchmarks/bench_smooth_sensitivity.py",
    ),
    (README, "(5.4 times once the start-up", "a measured ratio of wall times"),
    (
        README,
        TABLE + "| release of 9,000 queries | order |",
        "benchmarks/bench_lnmax_release.py's times (its orders are QUOTES')",
    ),
    (README, TABLE + "| queries | with `--pld` s |", "benchmarks/bench_pld.py"),
    (
        README,
        TABLE + "| run (`bench_engine.py`, one run) |",
        "benchmarks/bench_engine.py",
    ),
    (README, "about 1.9 s at 100,000 queries", "a measured wall time"),
    (README, "at sigma 0.416 and order 8", "the case's inputs"),
    (README, "T 34.8171, sigma1 9.50428, sigma 0.97634 and delta 1.7912e-8", "the case's inputs"),
    (README, "not 71.33)", "the wrong direction, named as such"),
    (README, "so 0.5 -> 0 but 1.5 -> 2", "the arithmetic of Python's round, no figure"),
    (README, "with baseline (3.5, 3.5)", "the case's inputs"),
    (README, "(at sigma 0.66, order 1.634,", "the case's inputs (sigma 0.66275... shown short)"),
    (README, "0.8% to 4.1% larger", "the range over the reference cases (tests/data/reference)"),
    (README, "row (30, 28), sigma 0.735, order 19.75", "the case's inputs"),
    (README, "the default grid adds 1.1, 1.25, 1.5 and 1.75", "the default order grid"),
    (API, "1.1, 1.25, 1.5, 1.75, then the 2018 reference's 298", "the default order grid"),
    (CLI, "never 3.9267", "the wrong rounding, named as such"),
    (CLI, "302 orders: 1.1, 1.25, 1.5, 1.75", "the default order grid"),
    (CLI, "100.5, then 100 to 500", "the default order grid"),
    (CLI, "arange(0.3/order, 0.495/order, 0.01/order)", "the beta grid, an input"),
    (CLI, "The smallest default order stays above 1.01", "a constant of the improved conversion"),
    (CLI, "for orders a > 1.01", "a constant of the improved conversion"),
    (
        CLI,
        "median ratio is 1.001 and the q-bound pairs' 1.9",
        "measured over the oracle's tiny runs (tests/oracle/test_pld_runs.py), not sample_data",
    ),
    (
        CLI,
        "is 0.86 of the Renyi figure with the improved conversion, the exact pairs' 0.51",
        "ratios on tests/test_pld.py's synthetic votes, not sample_data",
    ),
]

# A decimal number: not part of a version (2.4.6) or a word; two significant digits or more.
NUMBER = re.compile(r"(?<![\w.])\d+\.\d+(?:e[+-]?\d+)?(?!\w|\.\d)")
# An option's value where it is given (`--beta 0.018`, `sigma_ss=6.23`, `--sigma -1.0`).
GIVEN = re.compile(r"(?:--[a-z][\w-]*[ =]|\b[a-z_]\w*=)-?$")
URL = re.compile(r"https?://\S+")


def _significant(number: str) -> int:
    """Significant digits: 0.0618 has 3, 1.0 has 1 (a 1.0 or a 2.0 is never a figure)."""
    return len(number.split("e")[0].replace(".", "").strip("0"))


@functools.cache
def _normalised(text: str) -> tuple[str, list[int]]:
    """The text with every run of whitespace one space, and where each character was."""
    pieces = [(m.start(), m.group()[0]) for m in re.finditer(r"\s+|\S", text)]
    return "".join(" " if c.isspace() else c for _, c in pieces), [start for start, _ in pieces]


def _places(text: str, part: str) -> Iterator[tuple[int, int]]:
    """(start, end) in ``text`` (raw) of each occurrence of ``part``, whitespace aside."""
    flat, where = _normalised(text)
    wanted = " ".join(part.split())
    start = flat.find(wanted)
    while start >= 0:
        end = start + len(wanted) - 1
        yield where[start], where[end] + 1
        start = flat.find(wanted, start + 1)


def _figure_places(text: str, shown: str) -> list[int]:
    """Offsets of the figure ``shown`` in a quote, as a whole number."""
    pattern = rf"(?<![\w.]){re.escape(shown)}(?!\w|\.\d)"
    return [m.start() for m in re.finditer(pattern, " ".join(text.split()))]


def _table_spans(text: str, header: str) -> list[tuple[int, int]]:
    spans, offset, lines = [], 0, text.splitlines(keepends=True)
    for i, line in enumerate(lines):
        if line.startswith(header):
            end = offset + sum(len(row) for row in _table_rows(lines[i:]))
            spans.append((offset, end))
        offset += len(line)
    return spans


def _table_rows(lines: list[str]) -> Iterator[str]:
    for line in lines:
        if not line.startswith("|"):
            return
        yield line


def _text(file: str) -> str:
    return (ROOT / file).read_text()


def expected(value: float, shown: str, rounding: Rounding) -> str:
    """The figure as the document must show it, at the digits ``shown`` has."""
    if rounding is EXACT:
        return shown if float(shown) == value else repr(value)
    if rounding is PREFIX:
        leading = shown.removesuffix("...")
        return shown if repr(value).startswith(leading) else f"{value!r}..."
    mantissa, _, exponent = shown.partition("e")
    if exponent:  # a significant-digit figure: the rounding module's scientific form
        assert abs(value) < 1e-3, shown
        digits = _significant(shown)
        text = _rounded(value, digits, rounding)
        return shown if float(text) == float(shown) else text
    decimals = len(mantissa.partition(".")[2])
    assert 1e-3 <= abs(value) < 1e6, (shown, value)  # fixed notation, as the figure
    return _rounded(value, decimals, rounding)


def _rounded(value: float, digits: int, rounding: Rounding) -> str:
    if rounding is NEAREST:
        return nearest(value, digits)
    return bound(value, digits, up=rounding is UP)


@pytest.fixture(scope="module")
def runner(tmp_path_factory: pytest.TempPathFactory) -> Runner:
    return Runner(tmp_path_factory.mktemp("quoted"))


@pytest.mark.parametrize("quoted", QUOTES, ids=lambda q: f"{q.file}: {q.text[:48]}")
def test_a_quoted_figure_is_what_its_command_prints(quoted: Quote, runner: Runner) -> None:
    assert any(_places(_text(quoted.file), quoted.text)), f"not in {quoted.file}: {quoted.text}"
    for figure in quoted.figures:
        assert _figure_places(quoted.text, figure.shown), (figure.shown, quoted.text)
        value = figure.value(runner)
        should = expected(value, figure.shown, figure.rounding)
        assert figure.shown == should, (
            f"{quoted.file} quotes {figure.shown} in {quoted.text!r}; the value is {value!r}, "
            f"which shows as {should} ({figure.rounding.value})"
        )
    if quoted.printed is not None:
        result = runner.result(quoted.printed)
        assert " ".join(quoted.text.split()) in " ".join((result.stdout + result.stderr).split())


def _covered(file: str, text: str) -> list[tuple[int, int]]:
    """The spans of the document's figures that QUOTES check or NOT_COMMAND_OUTPUTS list."""
    spans = []
    for quoted in QUOTES:
        if quoted.file != file:
            continue
        shown = {figure.shown.removesuffix("...") for figure in quoted.figures}
        for start, end in _places(text, quoted.text):
            spans += [m.span() for m in NUMBER.finditer(text, start, end) if m.group() in shown]
    for listed_file, listed, _ in NOT_COMMAND_OUTPUTS:
        if listed_file == file:
            spans += (
                _table_spans(text, listed.removeprefix(TABLE))
                if listed.startswith(TABLE)
                else list(_places(text, listed))
            )
    return spans


def _numbers(file: str, text: str) -> Iterator[tuple[int, str]]:
    """(offset, number) of every decimal number of the document that needs a reason."""
    urls = [m.span() for m in URL.finditer(text)]
    for m in NUMBER.finditer(text):
        line_start = text.rfind("\n", 0, m.start()) + 1
        if _significant(m.group()) < 2 or GIVEN.search(text[line_start : m.start()]):
            continue
        if any(a <= m.start() < b for a, b in urls):
            continue
        yield m.start(), m.group()


@pytest.mark.parametrize("file", DOCUMENTS)
def test_every_decimal_figure_is_quoted_from_its_command_or_listed_with_a_reason(
    file: str,
) -> None:
    text = _text(file)
    covered = _covered(file, text)
    missing = [
        f"{file}:{text.count(chr(10), 0, offset) + 1}: {number} in "
        f"{' '.join(text[max(0, offset - 60) : offset + 30].split())!r}"
        for offset, number in _numbers(file, text)
        if not any(a <= offset < b for a, b in covered)
    ]
    assert not missing, (
        "a decimal figure that no test holds: add it to QUOTES (what a command prints, and "
        "how it is rounded) or to NOT_COMMAND_OUTPUTS (with the reason it is not a command's "
        "output):\n" + "\n".join(missing)
    )


def test_every_listed_text_is_still_in_its_document() -> None:
    for file, listed, reason in NOT_COMMAND_OUTPUTS:
        text = _text(file)
        if listed.startswith(TABLE):
            spans = _table_spans(text, listed.removeprefix(TABLE))
        else:
            spans = list(_places(text, listed))
        assert spans, f"{file} no longer holds {listed!r} ({reason}): remove the entry"
        assert any(any(a <= o < b for a, b in spans) for o, _ in _numbers(file, text)), (
            f"{listed!r} in {file} holds no decimal figure that needs a reason"
        )


# ----------------------------------------------------------------------------- start-up


_PROBE = """
import runpy, sys
sys.argv = ["pate", *sys.argv[1:]]
try:
    runpy.run_module("pate_cli", run_name="__main__")
except SystemExit:
    pass
print(" ".join(sorted(sys.modules)))
"""
# What loading the installed mechanism plugins loads by itself (nothing of pate's where none
# is installed): README, "Performance", leaves it to the plugins.
_PLUGINS_PROBE = """
import sys
from importlib.metadata import entry_points
for point in entry_points(group="pate_cli.mechanisms"):
    try:
        point.load()
    except BaseException:
        pass
print(" ".join(sorted(sys.modules)))
"""
# README, "Performance": what --version and --help load.
DECLARATIONS = ("pate_cli.cli", "pate_cli.common", "pate_cli.mechanisms")
OWN_TOP = {"pate_cli", "pate_cli.choices", "pate_cli.errors"}
VERSION_ONLY = ("pate_cli.cli", "pate_cli.common", "pate_cli.errors")


@pytest.mark.parametrize("args", [["--version"], ["--help"], ["analyze", "--help"]])
def test_version_and_help_load_what_the_readme_says(args: list[str]) -> None:
    text = " ".join(_text(README).split())
    assert (
        "`--version` is answered by the entry point before typer is imported (`pate_cli.cli`, "
        "`pate_cli.common`, `pate_cli.errors`; no plugin is loaded for it)"
    ) in text
    assert (
        "`--help` loads typer and pate's declarations of its commands, options, choices and "
        "mechanisms (`pate_cli.cli`, `pate_cli.common`, `pate_cli.mechanisms`), none of numpy, "
        "scipy, rich or pydantic; a command's `--help` imports that command's module, no "
        "other's"
    ) in text
    out = subprocess.run(
        [sys.executable, "-c", _PROBE, *args], capture_output=True, text=True, cwd=ROOT, check=True
    ).stdout.splitlines()[-1]
    plugins = subprocess.run(
        [sys.executable, "-c", _PLUGINS_PROBE], capture_output=True, text=True, cwd=ROOT, check=True
    ).stdout.split()
    loaded = set(out.split())
    own = {m for m in loaded - set(plugins) if m == "pate_cli" or m.startswith("pate_cli.")}
    if args == ["--version"]:
        bare = subprocess.run(
            [sys.executable, "-c", "import runpy, sys; print(' '.join(sys.modules))"],
            capture_output=True, text=True, cwd=ROOT, check=True,
        ).stdout.split()  # fmt: skip
        pate = {m for m in loaded if m == "pate_cli" or m.startswith("pate_cli.")}
        assert loaded - set(bare) - pate == {"signal"} - set(bare)  # no typer, no plugin
        assert {m for m in pate if not m.startswith(VERSION_ONLY)} == {"pate_cli"}
        return
    assert "typer" in loaded
    assert {m for m in own - OWN_TOP if not m.startswith(DECLARATIONS)} == set()
    commands = {m.rsplit(".", 1)[1] for m in own if m.startswith("pate_cli.cli.commands.")}
    if args[0] == "analyze":  # pate --help lists every command: it imports them all
        assert commands == {"analyze"}
    heavy = {"numpy", "scipy", "rich", "matplotlib", "pydantic"}
    assert heavy & (loaded - set(plugins)) == set()

"""``pate audit``, whole: an empirical lower bound on a mechanism's epsilon from the sampler
that ``aggregate`` runs, beside the upper figures pate states for the same pair and queries.

The steps, in order (docs/cli.md, "`pate audit`: auditing a mechanism"):

1. The law of a query's outcome: stated by the mechanism (``pate_cli.audits.laws``), or
   estimated on held-out draws of its own stream.
2. The pair: searched over two-class histograms, or a query of a vote file and its
   neighbour (``pate_cli.audits.pairs``), scored by the bound at the expected counts.
3. The test, fixed from that law before the audit's draws: a level set of the run's
   privacy loss over the count vectors of its T outcomes (``pate_cli.core.auditing``).
4. N runs on each side, drawn by the mechanism's ``run`` (``pate_cli.audits.draws``).
5. The Clopper-Pearson bound at alpha, the Gaussian-shaped estimate where the mechanism's
   exact account is Gaussian, and the claimed figures: pate's own (data-independent RDP,
   the exact data-independent figure, the guaranteed data-dependent figure of both
   histograms), the exact epsilon of the stated law for the pair, and ``claim``.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from numpy.typing import NDArray

from pate_cli.accountant.run import Progress, no_progress, run_account
from pate_cli.audits import pairs
from pate_cli.audits.draws import block_noise, outcome_kinds, run_vectors
from pate_cli.audits.laws import Law, estimated_law, stated_law, uncovered
from pate_cli.choices import Conversion, TestFrom
from pate_cli.common import checks
from pate_cli.core import auditing
from pate_cli.core.compact import Compact
from pate_cli.core.exact import gaussian_epsilon
from pate_cli.errors import InputError, UsageError
from pate_cli.files.seeds import json_seed
from pate_cli.mechanisms import Mechanism
from pate_cli.orders import as_orders
from pate_cli.reports.encoding import plain
from pate_cli.reports.rounding import bound_significant
from pate_cli.votes import Votes

FloatArray = NDArray[np.float64]

DEFAULT_RUNS = 1_000_000
"""Runs per side by default (``pate_cli.api.audit``'s default too)."""
MIN_RUNS = 1_000
MOST_RUNS = 10**10
HELD_OUT = 4_000
"""Draws per histogram that estimate a law the mechanism does not state."""
MOST_QUERIES = 10_000
MOST_CLASSES = 1_000
"""The most classes of an audited histogram (each run's noise is drawn for every class)."""
# An exact epsilon from the root finder is within 1e-12 relative above the truth: a figure
# derived from a lower bound of mu is moved below it by more.
_BELOW = 1e-11


@dataclass(frozen=True)
class AuditReport:
    """What ``pate audit`` found; ``to_dict()`` is its ``--json``."""

    mechanism: dict[str, Any]
    delta: float
    alpha: float
    runs: int
    queries: int
    epsilon_lower_bound: float
    epsilon_lower_bound_expected: float
    claimed: dict[str, float]
    exceeds: tuple[str, ...]
    test_from: str
    """"stated law" or "held-out draws": what fixed the pair and the test."""
    pair: dict[str, Any]
    test: dict[str, Any]
    noise: dict[str, Any]
    mu_lower_bound: float | None = None
    epsilon_gaussian: float | None = None
    private: bool = False
    """True where the pair is a query of a vote file: the figures are of private data."""
    method: str = "clopper-pearson"
    notes: tuple[str, ...] = field(default_factory=tuple)

    @property
    def warnings(self) -> tuple[str, ...]:
        return self.notes

    def to_dict(self) -> dict[str, Any]:
        """Exactly what ``pate audit --json`` prints."""
        out: dict[str, Any] = {
            "command": "audit",
            "epsilon_lower_bound": self.epsilon_lower_bound,
            "epsilon_lower_bound_expected": self.epsilon_lower_bound_expected,
            "method": self.method,
            "runs": self.runs,
            "alpha": self.alpha,
            "delta": self.delta,
            "queries": self.queries,
            "claimed": dict(self.claimed),
            "exceeds": list(self.exceeds),
            "mechanism": self.mechanism,
            "test_from": self.test_from,
            "pair": self.pair,
            "test": self.test,
            "gaussian": None
            if self.mu_lower_bound is None
            else {"mu_lower_bound": self.mu_lower_bound, "epsilon": self.epsilon_gaussian},
            "private": self.private,
            "noise": self.noise,
            "warnings": list(self.notes),
        }
        return plain(out)

    to_json_dict = to_dict

    def __repr__(self) -> str:
        # One line: the lower bound rounded down (never shown above itself), what it exceeds.
        lower = bound_significant(self.epsilon_lower_bound, 4, up=False)
        return (
            f"AuditReport(mechanism={self.mechanism.get('name')}, queries={self.queries}, "
            f"runs={self.runs}, epsilon_lower_bound>={lower}, exceeds={list(self.exceeds)})"
        )

    def _repr_markdown_(self) -> str:
        lower = bound_significant(self.epsilon_lower_bound, 4, up=False)
        sure = bound_significant(1 - self.alpha, 4, up=False)  # the confidence, not overstated
        rows = "\n".join(
            f"| {name} | {bound_significant(value, 4)} | "
            f"{'**below the lower bound**' if name in self.exceeds else 'above'} |"
            for name, value in self.claimed.items()
        )
        return (
            f"### pate audit: epsilon >= {lower}\n\n"
            f"with probability >= {sure} at delta {self.delta:g}, {self.queries} "
            f"queries a run, {self.runs:,} runs a side ({self.method}, test fixed from the "
            f"{self.test_from})\n\n| claimed | epsilon | |\n|---|---|---|\n{rows}"
        )


@dataclass(frozen=True)
class _Setting:
    """The audit's numbers, checked."""

    delta: float
    alpha: float
    runs: int
    queries: int
    root: int
    seed: int | None

    @property
    def numbers(self) -> tuple[int, float, float]:
        """(runs, alpha, delta), as the bounds take them."""
        return self.runs, self.alpha, self.delta

    def score(self, law_a: FloatArray, law_b: FloatArray) -> float:
        """The bound the pair's best test gives at the expected counts."""
        return _tested(self, law_a, law_b)[3]


def _tested(
    setting: _Setting, law_a: FloatArray, law_b: FloatArray
) -> tuple[auditing.RunLaw, NDArray[np.int64], auditing.Test, float]:
    """The run's law over merged kinds, the merge, the best test and its expected bound."""
    group = auditing.merged_kinds(law_a, law_b, setting.queries)
    law = auditing.RunLaw.of(
        auditing.merged_law(law_a, group), auditing.merged_law(law_b, group), setting.queries
    )
    test, bound = auditing.best_test(law, setting.runs, setting.alpha, setting.delta)
    return law, group, test, bound


def run_audit(
    mechanism: Mechanism,
    *,
    delta: float,
    votes: Votes | None = None,
    query: int | None = None,
    queries: int = 1,
    runs: int = DEFAULT_RUNS,
    alpha: float = 0.05,
    claim: float | None = None,
    seed: int | None = None,
    classes: int = 2,
    test_from: str | TestFrom = TestFrom.LAW,
    progress: Progress | None = None,
) -> AuditReport:
    """``pate audit`` (module docstring); the arguments as ``pate_cli.api.audit`` takes them
    (``progress``: the draws' bar, a ``Progress``, as ``pate_cli.api`` describes it).

    Raises:
        UsageError: a number out of its range, ``query`` without votes or out of them.
    """
    setting = _setting(delta, alpha, runs, queries, seed)
    claim = checks.claim(claim)
    if votes is None:
        if query is not None:
            raise UsageError("--query picks a query of VOTES: give the votes file too")
        checks.whole(classes, "classes", 2, MOST_CLASSES)
        law, test_from, fixed_on = _law(mechanism, setting, test_from, classes)
        pair = _searched(mechanism, law, setting, classes, test_from == "stated law")
        where: dict[str, Any] = {"source": "search", "a": _votes(pair.a), "b": _votes(pair.b)}
    else:
        row = _query_row(votes, query)
        law, test_from, fixed_on = _law(mechanism, setting, test_from, row.size)
        pair = pairs.of_query(law, setting.score, row)
        where = {"source": "votes", "query": query, "move": list(pair.move)}
    run_law, group, test, _ = _tested(setting, pair.law_a, pair.law_b)
    expected = auditing.expected_lower_bound(
        math.exp(test.log_rate), math.exp(test.log_other), *setting.numbers
    )
    hits = _hits(mechanism, pair, setting, run_law, group, test, progress or no_progress)
    bound = auditing.epsilon_lower_bound(*hits, setting.runs, setting.alpha, setting.delta)
    merged = int(group.max()) + 1 < group.size
    stated = test_from == "stated law" and not merged  # the law is the mechanism's, whole
    exact = auditing.pair_epsilon(run_law, setting.delta) if stated else None
    claimed, gaussian = _claims(mechanism, pair, setting, exact, claim)
    mu = auditing.gaussian_mu_lower_bound(*hits, *setting.numbers[:2]) if gaussian else None
    return AuditReport(
        mechanism=mechanism.to_json_dict(),
        delta=setting.delta,
        alpha=setting.alpha,
        runs=setting.runs,
        queries=setting.queries,
        epsilon_lower_bound=bound,
        epsilon_lower_bound_expected=expected,
        claimed=claimed,
        exceeds=tuple(name for name, value in claimed.items() if bound > value),
        test_from=test_from,
        pair=where,
        test=_test_block(test, hits, setting, merged),
        noise=_noise_block(setting.seed),
        mu_lower_bound=mu,
        epsilon_gaussian=None if mu is None else _gaussian_below(mu, setting.delta),
        private=votes is not None,
        notes=_notes(votes is not None, fixed_on, merged),
    )


def _noise_block(seed: int | None) -> dict[str, Any]:
    """Where the draws came from: a public seed is shown, OS entropy never is."""
    return {"source": "os-entropy"} if seed is None else {"source": "seed", "seed": json_seed(seed)}


def _setting(delta: float, alpha: float, runs: int, queries: int, seed: int | None) -> _Setting:
    checks.delta(delta)
    runs = checks.whole(runs, "runs", MIN_RUNS, MOST_RUNS)
    queries = checks.whole(queries, "queries", 1, MOST_QUERIES)
    seed = checks.seed(seed)
    root = int(np.random.SeedSequence(seed).entropy)  # type: ignore[arg-type]
    return _Setting(float(delta), checks.alpha(alpha), runs, queries, root, seed)


def _law(
    mechanism: Mechanism, setting: _Setting, test_from: str | TestFrom, classes: int
) -> tuple[Law, str, str | None]:
    """The law that fixes the pair and the test (for histograms of ``classes`` classes), what
    it is, and a note where it is not the mechanism's stated one."""
    chosen = checks.choice(TestFrom, test_from, "test-from")
    stated = stated_law(mechanism)
    reason = None if stated is None else uncovered(stated, classes)
    if stated is not None and reason is None and chosen is TestFrom.LAW:
        return stated, "stated law", None
    if stated is None:
        why = "the mechanism states no label law (its answer step's log_probabilities)"
    elif reason is not None:
        why = f"its stated law cannot be computed here ({reason})"
    else:
        why = "asked for (the sampler is audited against its own draws, not its stated law)"
    note = (
        f"the pair and the test were fixed on held-out draws: {why}; no exact figure of the "
        "pair is shown"
    )
    return estimated_law(mechanism, HELD_OUT, setting.root), "held-out draws", note


def _query_row(votes: Votes, query: int | None) -> FloatArray:
    """The histogram of query ``query`` of the votes, dense.

    Raises:
        UsageError: no ``query``, or one out of the votes.
        InputError: votes over a vocabulary, more classes than an audit draws, or a query
            without a vote to move.
    """
    if query is None:
        raise UsageError("VOTES is audited one query at a time: give --query I")
    query = checks.whole(query, "query", 0, votes.num_queries - 1)
    counts = votes.counts
    if isinstance(counts, Compact):
        raise InputError(f"{votes.path}: votes over a vocabulary: audit a dense file of counts")
    if counts.shape[1] > MOST_CLASSES:
        raise InputError(
            f"{votes.path}: {counts.shape[1]:,} classes: an audit draws at most {MOST_CLASSES:,}"
        )
    # One row, read alone where the file is streamed (never the whole file).
    row = np.asarray(counts[query : query + 1], dtype=np.float64)[0]
    if row.sum() < 1 or row.size < 2:
        raise InputError(
            f"{votes.path}: query {query} holds no vote to move (or one class only): it has "
            "no neighbour to audit against"
        )
    return row


def _votes(row: FloatArray) -> list[int]:
    return [int(v) for v in row]


def _hits(
    mechanism: Mechanism,
    pair: pairs.Pair,
    setting: _Setting,
    law: auditing.RunLaw,
    group: NDArray[np.int64],
    test: auditing.Test,
    progress: Progress,
) -> tuple[int, int]:
    """How often the test's set showed on its positive side and on the other (the runs of
    both sides the progress bar's total)."""
    codes = auditing.vector_codes(law.vectors, setting.queries)
    order = np.argsort(codes)
    sorted_codes, members = codes[order], test.members[order]
    found = []
    with progress("audit draws", 2 * setting.runs) as advance:
        for side, row in enumerate((pair.a, pair.b)):
            found.append(
                _side_hits(mechanism, row, side, setting, group, members, sorted_codes, advance)
            )
    return (found[0], found[1]) if test.positive == "A" else (found[1], found[0])


def _side_hits(
    mechanism: Mechanism,
    row: FloatArray,
    side: int,
    setting: _Setting,
    group: NDArray[np.int64],
    members: NDArray[np.bool_],
    sorted_codes: NDArray[np.int64],
    advance: Callable[[int], None] | None,
) -> int:
    """How often one side's runs fell in the set (``members`` of the sorted codes)."""

    def draw(count: int, block: int) -> NDArray[np.int64]:
        noise = block_noise(setting.root, "audit", side, block)
        return group[outcome_kinds(mechanism, row, count, noise)]

    kinds = int(group.max()) + 1
    following = run_vectors(draw, setting.runs, setting.queries, kinds, row.size)
    done = hits = 0
    while done < setting.runs:
        count, vectors = following()
        at = np.searchsorted(sorted_codes, auditing.vector_codes(vectors, setting.queries))
        hits += int(members[at].sum())
        done += count
        if advance is not None:
            advance(count)
    return hits


def _claims(
    mechanism: Mechanism,
    pair: pairs.Pair,
    setting: _Setting,
    exact_pair: float | None,
    claim: float | None,
) -> tuple[dict[str, float], bool]:
    """The upper figures for the pair's T queries, and whether the exact one is Gaussian."""
    key = (setting.delta, setting.queries)
    first = _cached(_figures, mechanism, tuple(pair.a.tolist()), *key)
    second = _cached(_figures, mechanism, tuple(pair.b.tolist()), *key)
    claimed = {"data_independent": first[0]}
    if first[1] is not None:
        claimed["data_independent_exact"] = first[1]
    claimed["guaranteed"] = max(first[3], second[3])
    if exact_pair is not None:
        claimed["stated_law"] = exact_pair
    if claim is not None:
        claimed["claim"] = float(claim)
    return claimed, first[2] == "gaussian"


@functools.lru_cache(maxsize=64)
def _figures(
    mechanism: Mechanism, row: tuple[float, ...], delta: float, queries: int
) -> tuple[float, float | None, str | None, float]:
    """pate's figures for ``queries`` queries of the histogram ``row``: the data-independent
    RDP worst case, the exact data-independent figure and its method (None where there is
    none), and the guaranteed data-dependent figure (once per argument in a process)."""
    counts = np.repeat(np.array([row], dtype=np.float64), queries, axis=0)
    baseline = np.zeros(counts.shape) if mechanism.needs_baseline else None
    account = run_account(
        counts,
        mechanism,
        as_orders(None),
        delta,
        Conversion.CLASSIC,
        num_queries=queries,
        baseline=baseline,
    )
    exact = account.exact_worst_case
    joint = account.guaranteed or account.data_dependent
    return (
        account.worst_case.epsilon,
        None if exact is None else exact.epsilon,
        None if exact is None else exact.method,
        joint.epsilon,
    )


def _searched(
    mechanism: Mechanism, law: Law, setting: _Setting, classes: int, stated: bool
) -> pairs.Pair:
    """The searched pair: from a stated law, once per (mechanism, numbers) in a process."""
    numbers = (setting.delta, setting.alpha, setting.runs, setting.queries)
    if stated:
        return _cached(_stated_search, mechanism, classes, *numbers)
    return pairs.searched(law, setting.score, classes, refine=False, per_doubling=1)


@functools.lru_cache(maxsize=16)
def _stated_search(
    mechanism: Mechanism, classes: int, delta: float, alpha: float, runs: int, queries: int
) -> pairs.Pair:
    law = stated_law(mechanism)
    assert law is not None
    score = _Setting(delta, alpha, runs, queries, 0, None).score
    return pairs.searched(law, score, classes, refine=True, per_doubling=2)


def _cached(function: Any, mechanism: Mechanism, *args: Any) -> Any:
    """``function(mechanism, *args)`` through its cache, or straight where the mechanism
    cannot be hashed (a plugin's that is not frozen)."""
    try:
        hash(mechanism)
    except TypeError:
        return function.__wrapped__(mechanism, *args)
    return function(mechanism, *args)


def _gaussian_below(mu: float, delta: float) -> float:
    """Epsilon of mu-GDP at delta, below the root finder's bracket (``_BELOW``)."""
    if mu <= 0.0:
        return 0.0
    return max(gaussian_epsilon(mu, delta) * (1 - _BELOW), 0.0)


def _test_block(
    test: auditing.Test, hits: tuple[int, int], setting: _Setting, merged: bool
) -> dict[str, Any]:
    """The test as the report shows it: the side it favours, its counts and rates."""
    half = setting.alpha / 2
    return {
        "positive": test.positive,
        "hits_positive": hits[0],
        "hits_other": hits[1],
        "rate_positive_lower": float(auditing.clopper_pearson_lower(hits[0], setting.runs, half)),
        "rate_other_upper": float(auditing.clopper_pearson_upper(hits[1], setting.runs, half)),
        "expected_rate_positive": math.exp(test.log_rate),
        "expected_rate_other": math.exp(test.log_other),
        "kinds_merged": merged,
    }


def _notes(private: bool, fixed_on: str | None, merged: bool) -> tuple[str, ...]:
    notes = []
    if private:
        notes.append(
            "the pair is a query of the votes and its neighbour: like a data-dependent figure, "
            "the audit's figures are of private data and not for publication"
        )
    if fixed_on is not None:
        notes.append(fixed_on)
    if merged:
        notes.append(
            "outcomes were merged to keep the run's count vectors few (a weaker test, still "
            "valid); the stated law's exact figure of the pair is not shown"
        )
    return tuple(notes)

"""A test kit for mechanism authors: check a mechanism the way pate checks its own.

``check_mechanism(mechanism)`` runs every check below on one mechanism (its parameters as
given) and raises :class:`CheckFailed`, a message naming what failed and where, at the first
failure; it returns what it checked. Each check is also a function of its own.

- :func:`check_registration`: the class is registered (``register``, or an entry point of
  the group ``pate_cli.mechanisms``), a frozen dataclass; its report block
  (``to_json_dict``) and its flags (the values of its parameters, as a command line gives
  them) build it again; ``answers_every_query`` says whether it has a threshold step; its
  steps are named, hashable, and equal to the steps of the same mechanism built again.
- :func:`check_rdp`: by brute force over every histogram of ``teachers`` votes over
  ``classes`` classes (each case of ``cases``) and every neighbour (one teacher changes
  its vote), the data-dependent RDP of each step at every order is at least the exact
  Renyi divergence D_order(M(n) || M(n')), computed from the mechanism's stated outcome
  probabilities: the answer step's ``log_probabilities(counts)`` (required here) and the
  threshold step's ``log_pr_answered`` (its terms); with a threshold step, its ``joint``
  figure is at least the exact divergence of the (outcome, label) pair.
- :func:`check_data_independent`: each step's data-independent RDP is at least its
  data-dependent RDP on every histogram, and at least every exact divergence.
- :func:`check_sampler`: the labels its ``run`` draws (and the answered mask its threshold
  step's ``sample`` draws) on a few histograms of each case, repeated ``samples`` times,
  follow the stated probabilities: Pearson's chi-square test (``scipy.stats.chisquare``;
  outcomes expected fewer than 5 times pooled), each at ``false_alarm`` divided by the
  number of tests (Bonferroni), from a fixed seed. A correct mechanism fails with
  probability of about ``false_alarm`` or less over the seeds (the chi-square law is the test
  statistic's as the samples grow); a label drawn that its stated
  probabilities make impossible fails at once.
- :func:`check_audit`: a short ``pate audit`` of its sampler (``pate_cli.jobs.audit``), the
  pair and the test fixed on held-out draws of its ``run`` rather than on its stated law, so
  that a sampler that draws another noise than it states is measured as it draws: its lower
  bound on epsilon, wrong with probability at most ``false_alarm``, must not exceed any
  figure pate states for the same pair (data-independent, exact, guaranteed).

Figures are compared in log space, with a tolerance for rounding: a bound fails where it is
below the exact divergence by more than ``atol + rtol * divergence``. The exact divergence
is as exact as the stated probabilities (rows are renormalised to sum to 1: the most likely
outcome is taken as 1 minus the others), which the sampler's test checks independently.
"""

from __future__ import annotations

import dataclasses
import itertools
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import cache
from typing import Any, NoReturn

import numpy as np
from numpy.typing import ArrayLike, NDArray
from scipy import stats
from scipy.special import logsumexp

from pate_cli.core.logmath import log1mexp
from pate_cli.files.seeds import from_seed
from pate_cli.jobs.audit import AuditReport, run_audit
from pate_cli.mechanisms import Mechanism, Run, by_name, infer_mechanism, mechanism_from_dict

__all__ = [
    "CASES",
    "ORDERS",
    "CheckFailed",
    "Checked",
    "check_audit",
    "check_data_independent",
    "check_mechanism",
    "check_rdp",
    "check_registration",
    "check_sampler",
    "histograms",
    "renyi_divergence",
]

FloatArray = NDArray[np.float64]
ORDERS = (1.25, 1.5, 2.0, 3.0, 4.0, 6.0, 8.0, 16.0, 32.0, 64.0)
"""The Renyi orders checked by default."""
CASES = ((12, 2), (8, 3), (6, 4))
"""The (teachers, classes) whose every histogram is checked by default."""
_LOG_HALF = float(np.log(0.5))


class CheckFailed(AssertionError):
    """A check the mechanism failed; the message names the check, the step and where."""


@dataclass(frozen=True)
class Checked:
    """What :func:`check_mechanism` checked: histograms and (histogram, neighbour) pairs of
    every case, at ``orders``; sampler tests of ``samples`` draws each; an audit of
    ``audit_runs`` runs a side."""

    histograms: int
    pairs: int
    orders: tuple[float, ...]
    sampler_tests: int
    samples: int
    audit_runs: int


def check_mechanism(
    mechanism: Mechanism,
    *,
    cases: Sequence[tuple[int, int]] = CASES,
    orders: Sequence[float] = ORDERS,
    samples: int = 20_000,
    seed: int = 0,
    false_alarm: float = 1e-6,
    rtol: float = 1e-9,
    atol: float = 1e-10,
    audit_runs: int = 200_000,
) -> Checked:
    """Every check of the kit (module docstring) on ``mechanism``.

    Raises:
        CheckFailed: the first check it fails, named with where it fails.
    """
    check_registration(mechanism)
    pairs = check_rdp(mechanism, cases=cases, orders=orders, rtol=rtol, atol=atol)
    check_data_independent(mechanism, cases=cases, orders=orders, rtol=rtol, atol=atol)
    tests = check_sampler(
        mechanism, cases=cases, samples=samples, seed=seed, false_alarm=false_alarm
    )
    check_audit(mechanism, runs=audit_runs, seed=seed, false_alarm=false_alarm)
    hists = sum(len(histograms(teachers, classes)) for teachers, classes in cases)
    return Checked(hists, pairs, tuple(map(float, orders)), tests, samples, audit_runs)


# ----------------------------------------------------------------------------- registration


def check_registration(mechanism: Mechanism) -> None:
    """Registered, frozen, rebuilt from its report block and from its flags, its flags
    telling the truth about its steps, its steps named and hashable (module docstring).

    Raises:
        CheckFailed: what does not hold.
    """
    kind = type(mechanism)
    name = getattr(kind, "name", kind.__name__)
    if by_name().get(name) is not kind:
        _fail(name, "registration", "it is not registered (register(Kind), or an entry point)")
    params = getattr(kind, "__dataclass_params__", None)
    if not (dataclasses.is_dataclass(kind) and params is not None and params.frozen):
        _fail(name, "registration", "it is not a frozen dataclass")
    block = mechanism.to_json_dict()
    _rebuilt(mechanism, "registration", f"its report block {block}", mechanism_from_dict, block)
    values = {p.name: getattr(mechanism, p.name) for p in kind.parameters}
    options = {
        "has_baseline": kind.needs_baseline,
        "threshold_bound": getattr(mechanism, "threshold_bound", "theorem6"),
    }
    _rebuilt(
        mechanism, "flags", f"its flags with {values}", infer_mechanism, None, values, **options
    )
    threshold = mechanism.threshold_step
    if kind.answers_every_query != (threshold is None):
        has = "has no" if threshold is None else "has a"
        said = f"answers_every_query is {kind.answers_every_query}; it {has} threshold step"
        _fail(name, "flags", said)
    rebuilt = kind(**{field.name: getattr(mechanism, field.name) for field in _fields(kind)})
    for role, step, twin in (
        ("answer step", mechanism.answer_step, rebuilt.answer_step),
        ("threshold step", threshold, rebuilt.threshold_step),
    ):
        if step is None:
            continue
        if not (isinstance(step.name, str) and step.name):
            _fail(name, role, "its name is not a non-empty string")
        try:
            hash(step)
        except TypeError:
            _fail(name, role, "it cannot be hashed (declare it @dataclass(frozen=True))")
        if step != twin:
            _fail(name, role, "the same mechanism built again gives a step not equal to it")


def _rebuilt(
    mechanism: Mechanism, role: str, what: str, build: Callable[..., Any], *args: Any, **kw: Any
) -> None:
    """``build(*args, **kw)`` must give ``mechanism`` again (``what`` says what it reads)."""
    try:
        again = build(*args, **kw)
    except Exception as error:  # whatever refused it, the check says so in one message
        said = f"{what} does not build it: {type(error).__name__}: {error}"
        _fail(mechanism.name, role, said)
    if again != mechanism:
        _fail(mechanism.name, role, f"{what} builds another mechanism: {again!r}")


def _fields(kind: type) -> tuple[dataclasses.Field[Any], ...]:
    return tuple(item for item in dataclasses.fields(kind) if item.init)  # type: ignore[arg-type]


# ----------------------------------------------------------------------------- the brute force


@cache
def histograms(teachers: int, classes: int) -> NDArray[np.int64]:
    """Every histogram of ``teachers`` votes over ``classes`` classes. Shapes: -> (H, C)."""
    if teachers < 1 or classes < 2:
        raise ValueError(f"expected teachers >= 1 and classes >= 2, got {teachers}, {classes}")
    found = [
        counts
        for counts in itertools.product(range(teachers + 1), repeat=classes)
        if sum(counts) == teachers
    ]
    out = np.array(found, dtype=np.int64)
    out.flags.writeable = False
    return out


@cache
def _neighbours(teachers: int, classes: int) -> NDArray[np.intp]:
    """For every histogram, the index of each neighbour (one teacher moves its vote from
    class a to class b), -1 where class a has no vote. Shapes: -> (H, C (C - 1))."""
    hists = histograms(teachers, classes)
    index = {tuple(row): i for i, row in enumerate(hists.tolist())}
    moves = list(itertools.permutations(range(classes), 2))
    table = np.full((len(hists), len(moves)), -1, dtype=np.intp)
    for i, row in enumerate(hists.tolist()):
        for column, (a, b) in enumerate(moves):
            if row[a] > 0:
                moved = list(row)
                moved[a] -= 1
                moved[b] += 1
                table[i, column] = index[tuple(moved)]
    return table


def _normalised(log_p: FloatArray) -> FloatArray:
    """Rows of log-probabilities with the most likely outcome taken as 1 - (the others)."""
    rows = np.arange(log_p.shape[0])
    top = np.argmax(log_p, axis=1)
    others = log_p.copy()
    others[rows, top] = -np.inf
    out = log_p.copy()
    out[rows, top] = log1mexp(np.minimum(logsumexp(others, axis=1), 0.0))
    return out


def renyi_divergence(log_p: ArrayLike, log_q: ArrayLike, orders: ArrayLike) -> FloatArray:
    """D_order(P || Q) = log(sum_j p_j^order q_j^(1 - order)) / (order - 1) for each row of
    log-probabilities (each row summing to 1), in log space, never NaN: an outcome P never
    shows adds nothing, one only P shows makes it inf. Within ~1e-16 of the divergence of the
    laws the logs are roundings of (the kit's ``atol`` covers it).

    Shapes: log_p (N, O), log_q (N, O), orders (K,) -> (N, K).
    """
    lam = np.asarray(orders, dtype=np.float64)[None, :, None]
    p, q = np.asarray(log_p)[:, None, :], np.asarray(log_q)[:, None, :]
    with np.errstate(invalid="ignore"):  # -inf * 0 where P never shows: masked
        terms = np.where(p > -np.inf, lam * p + (1 - lam) * q, -np.inf)
    found = logsumexp(terms, axis=2) / (lam[..., 0] - 1)
    return np.maximum(np.where(np.isnan(found), np.inf, found), 0.0)


@dataclass(frozen=True)
class _Case:
    """One case's stated laws, figures and exact divergences: the answer step's and, with a
    threshold step, its and the joint's. Arrays (H, K); ``exact_*`` the largest over the
    neighbours."""

    teachers: int
    classes: int
    hists: FloatArray
    neighbours: NDArray[np.intp]
    label_law: FloatArray
    answer: FloatArray
    exact_answer: FloatArray
    gate_law: FloatArray | None = None
    gate: FloatArray | None = None
    exact_gate: FloatArray | None = None
    joint: FloatArray | None = None
    exact_joint: FloatArray | None = None

    @property
    def where(self) -> str:
        return f"{self.teachers} teachers, {self.classes} classes"


def _worst(law: FloatArray, neighbours: NDArray[np.intp], orders: FloatArray) -> FloatArray:
    """max over each histogram's neighbours of D(law[h] || law[n]). Shapes: -> (H, K)."""
    worst = np.zeros((law.shape[0], orders.size))
    for column in neighbours.T:
        rows = np.flatnonzero(column >= 0)
        found = renyi_divergence(law[rows], law[column[rows]], orders)
        worst[rows] = np.maximum(worst[rows], found)
    return worst


def _case(mechanism: Mechanism, teachers: int, classes: int, orders: FloatArray) -> _Case:
    name, answer = mechanism.name, mechanism.answer_step
    hists = histograms(teachers, classes).astype(np.float64)
    neighbours = _neighbours(teachers, classes)
    where = f"({teachers} teachers, {classes} classes)"
    law = _law(_stated(mechanism)(hists), (len(hists), classes), name, "answer step", where)
    dependent = _figure(answer.cost(orders)(answer.logq(hists)), (len(hists), orders.size))
    exact = _worst(law, neighbours, orders)
    found = _Case(teachers, classes, hists, neighbours, law, dependent, exact)
    step = mechanism.threshold_step
    if step is None:
        return found
    terms = step.terms(hists, False)
    gate_law = _gate_law(terms, name, where)
    cost = step.cost(orders, terms.moves)
    scalars = {"margins": terms.margins, "logq_threshold": terms.logq}
    if cost.statistic not in scalars:
        _fail(name, "threshold step", f"its cost reads {cost.statistic!r}, no scalar of its terms")
    gate = _figure(cost.function(scalars[cost.statistic]), dependent.shape)
    joint = _figure(step.joint(terms.margins, orders, dependent, terms.moves), dependent.shape)
    joint_law = np.concatenate([gate_law[:, :1], gate_law[:, 1:] + law], axis=1)
    return dataclasses.replace(
        found,
        gate_law=gate_law,
        gate=gate,
        exact_gate=_worst(gate_law, neighbours, orders),
        joint=joint,
        exact_joint=_worst(joint_law, neighbours, orders),
    )


def _stated(mechanism: Mechanism) -> Callable[[FloatArray], Any]:
    """The answer step's ``log_probabilities``, or the failure that it has none."""
    stated = getattr(mechanism.answer_step, "log_probabilities", None)
    if stated is None:
        _fail(mechanism.name, "answer step", "it has no log_probabilities(counts): no law to check")
    return stated  # type: ignore[no-any-return]


def _figure(values: Any, shape: tuple[int, ...]) -> FloatArray:
    return np.broadcast_to(np.asarray(values, dtype=np.float64), shape)


def _law(log_p: Any, shape: tuple[int, int], name: str, role: str, where: str) -> FloatArray:
    """Stated log-probabilities, checked (shape, no NaN, at most 0, summing to 1) and
    normalised."""
    log_p = np.asarray(log_p, dtype=np.float64)
    if log_p.shape != shape or np.isnan(log_p).any() or (log_p > 1e-12).any():
        _fail(name, role, f"its log-probabilities {where} are not log-probabilities of {shape}")
    total = np.exp(logsumexp(log_p, axis=1))
    if np.abs(total - 1).max() > 1e-9:
        row = int(np.argmax(np.abs(total - 1)))
        _fail(name, role, f"its probabilities {where} sum to {float(total[row])!r} at row {row}")
    return _normalised(np.minimum(log_p, 0.0))


def _gate_law(terms: Any, name: str, where: str) -> FloatArray:
    """The threshold step's (log Pr[abstain], log Pr[answered]) from its terms: the less
    likely outcome from log_pr_answered where that is at most 1/2, else from its own tail
    (``logq``); the two must agree."""
    log_pr = np.asarray(terms.log_pr_answered, dtype=np.float64)
    logq = np.asarray(terms.logq, dtype=np.float64)
    rare = log_pr <= _LOG_HALF
    with np.errstate(invalid="ignore"):
        log_abstain = np.where(rare, log1mexp(np.minimum(log_pr, 0.0)), logq)
        stated = np.where(rare, log_pr, log_abstain)  # the less likely outcome's own log
    off = np.abs(np.exp(logq) - np.exp(stated)) > 1e-9 * np.exp(stated) + 1e-300
    if np.isnan(log_pr).any() or off.any():
        said = f"its terms' logq is not the log of its less likely outcome {where}"
        _fail(name, "threshold step", f"{said}, by its log_pr_answered")
    return _normalised(np.stack([log_abstain, log_pr], axis=1))


def _below(bound: FloatArray, truth: FloatArray, rtol: float, atol: float) -> NDArray[np.bool_]:
    return bound < truth - (atol + rtol * np.abs(truth))


def _shortfall(
    low: NDArray[np.bool_], bound: FloatArray, other: FloatArray, case: _Case, grid: FloatArray
) -> str:
    """Where ``bound`` is first below ``other`` (``low``), and both figures."""
    row, k = (int(i) for i in np.argwhere(low)[0])
    histogram = case.hists[row].astype(int).tolist()
    figures = f"{float(bound[row, k])!r} < {float(other[row, k])!r}"
    return f"at order {grid[k]:g} on the histogram {histogram} ({case.where}): {figures}"


def check_rdp(
    mechanism: Mechanism,
    *,
    cases: Sequence[tuple[int, int]] = CASES,
    orders: Sequence[float] = ORDERS,
    rtol: float = 1e-9,
    atol: float = 1e-10,
) -> int:
    """Each step's data-dependent RDP (and a threshold step's joint figure) never below the
    exact Renyi divergence to any neighbour, at every order (module docstring).

    Returns:
        The number of (histogram, neighbour) pairs checked.

    Raises:
        CheckFailed: the first step, histogram and order where it is below.
    """
    grid = np.asarray(orders, dtype=np.float64)
    pairs = 0
    for teachers, classes in cases:
        case = _case(mechanism, teachers, classes, grid)
        pairs += int(np.count_nonzero(case.neighbours >= 0))
        for role, bound, exact in (
            ("answer step's data-dependent RDP", case.answer, case.exact_answer),
            ("threshold step's data-dependent RDP", case.gate, case.exact_gate),
            ("threshold step's joint RDP", case.joint, case.exact_joint),
        ):
            if bound is None or exact is None:
                continue
            low = _below(bound, exact, rtol, atol)
            if low.any():
                where = _shortfall(low, bound, exact, case, grid)
                _fail(mechanism.name, role, f"below the exact Renyi divergence {where}")
    return pairs


def check_data_independent(
    mechanism: Mechanism,
    *,
    cases: Sequence[tuple[int, int]] = CASES,
    orders: Sequence[float] = ORDERS,
    rtol: float = 1e-9,
    atol: float = 1e-10,
) -> None:
    """Each step's data-independent RDP at least its data-dependent RDP on every histogram
    and at least every exact divergence, at every order.

    Raises:
        CheckFailed: the first step, histogram and order where it is below.
    """
    grid = np.asarray(orders, dtype=np.float64)
    step = mechanism.threshold_step
    for teachers, classes in cases:
        case = _case(mechanism, teachers, classes, grid)
        answer = _figure(mechanism.answer_step.data_independent(grid), case.answer.shape)
        rows = [("answer step", answer, case.answer, case.exact_answer)]
        if step is not None and case.gate is not None and case.exact_gate is not None:
            gate = _figure(step.data_independent(grid, 1), case.gate.shape)
            rows.append(("threshold step", gate, case.gate, case.exact_gate))
        for role, independent, dependent, exact in rows:
            for what, other in (("data-dependent RDP", dependent), ("exact divergence", exact)):
                low = _below(independent, other, rtol, atol)
                if low.any():
                    where = _shortfall(low, independent, other, case, grid)
                    said = f"its data-independent RDP is below its {what} {where}"
                    _fail(mechanism.name, role, said)


# ----------------------------------------------------------------------------- the sampler


def _sampled_rows(teachers: int, classes: int) -> NDArray[np.int64]:
    """A few histograms of a case: its first, last and three between (lexicographic)."""
    hists = histograms(teachers, classes)
    picks = np.unique(np.linspace(0, len(hists) - 1, 5).round().astype(int))
    return hists[picks]


def _chi_square(observed: NDArray[np.int64], log_expected: FloatArray) -> float | None:
    """Pearson's p-value of ``observed`` counts against the stated law (outcomes expected
    fewer than 5 times pooled); None where an outcome stated impossible was drawn."""
    total = int(observed.sum())
    expected = total * np.exp(log_expected)
    if (observed[expected == 0] > 0).any():
        return None
    small = expected < 5
    keep_obs = np.append(observed[~small], observed[small].sum())
    keep_exp = np.append(expected[~small], expected[small].sum())
    live = keep_exp > 0
    keep_obs, keep_exp = keep_obs[live], keep_exp[live]
    if keep_obs.size < 2:
        return 1.0
    keep_exp = keep_exp * (total / keep_exp.sum())
    return float(stats.chisquare(keep_obs, keep_exp).pvalue)


def check_sampler(
    mechanism: Mechanism,
    *,
    cases: Sequence[tuple[int, int]] = CASES,
    samples: int = 20_000,
    seed: int = 0,
    false_alarm: float = 1e-6,
) -> int:
    """The outcomes its ``run`` draws (and its threshold step's ``sample``) follow the stated
    probabilities on a few histograms of each case (module docstring).

    Returns:
        The number of chi-square tests made.

    Raises:
        CheckFailed: the first histogram whose draws do not follow the stated law.
    """
    name, step = mechanism.name, mechanism.threshold_step
    if step is not None and not hasattr(step, "sample"):
        _fail(name, "threshold step", "it has no sample(values, rng, half_even): no sampler")
    picked = [(t, c, row) for t, c in cases for row in _sampled_rows(t, c)]
    level = false_alarm / (len(picked) * (1 if step is None else 2))
    for index, (teachers, classes, row) in enumerate(picked):
        counts = np.repeat(row[None, :].astype(np.float64), samples, axis=0)
        stated = _stated(mechanism)(counts[:1])
        law = _law(stated, (1, classes), name, "answer step", f"on {row.tolist()}")[0]
        where = f"on the histogram {row.tolist()} ({samples} draws, seed {seed + index})"
        outcomes = law
        if step is not None:
            gate = _gate_law(step.terms(counts[:1], False), name, where)[0]
            rng = from_seed(seed + index).generator("aggregate-threshold")
            answered = step.sample(counts, rng, False)
            drawn = np.bincount(np.asarray(answered, dtype=np.int64), minlength=2)
            _test(drawn, gate, level, name, "threshold step's sample", where)
            outcomes = np.concatenate([gate[:1], gate[1] + law])
        result = mechanism.run(counts, from_seed(seed + index), _run(mechanism, counts, teachers))
        labels = np.asarray(result.labels, dtype=np.int64)
        if step is None and (labels < 0).any():
            _fail(name, "run", f"it released no label {where}, with no threshold step")
        shift = 0 if step is None else 1
        drawn = np.bincount(labels + shift, minlength=classes + shift)
        _test(drawn, outcomes, level, name, "run", where)
    return len(picked) * (1 if step is None else 2)


def _test(drawn: Any, law: FloatArray, level: float, name: str, role: str, where: str) -> None:
    p_value = _chi_square(np.asarray(drawn), law)
    if p_value is None:
        _fail(name, role, f"it drew an outcome its stated probabilities make impossible {where}")
    if p_value < level:
        frequencies = np.round(np.asarray(drawn) / np.sum(drawn), 4).tolist()
        stated = np.round(np.exp(law), 4).tolist()
        test = f"chi-square p = {p_value:.3g} < {level:.3g}"
        said = f"frequencies {frequencies}, stated {stated} ({test})"
        _fail(name, role, f"its draws {where} do not follow its stated probabilities: {said}")


# ----------------------------------------------------------------------------- the audit


def check_audit(
    mechanism: Mechanism,
    *,
    runs: int = 200_000,
    seed: int = 0,
    false_alarm: float = 1e-6,
    delta: float = 1e-5,
) -> AuditReport:
    """A short audit of the sampler (module docstring): ``runs`` runs a side, the pair and
    the test fixed on held-out draws, from ``seed``.

    Returns:
        The audit's report (its lower bound and the figures it was held to).

    Raises:
        CheckFailed: the lower bound exceeds a figure pate states for the pair.
    """
    report = run_audit(
        mechanism, delta=delta, runs=runs, alpha=false_alarm, seed=seed, test_from="draws"
    )
    if report.exceeds:
        figures = ", ".join(f"{name} {report.claimed[name]!r}" for name in report.exceeds)
        said = (
            f"its draws bound epsilon from below by {report.epsilon_lower_bound!r} at delta "
            f"{delta:g} on the histograms {report.pair['a']} and {report.pair['b']} ({runs} "
            f"runs a side, wrong with probability at most {false_alarm:g}), above its {figures}"
        )
        _fail(mechanism.name, "audit", said)
    return report


def _run(mechanism: Mechanism, counts: FloatArray, teachers: int) -> Run:
    """What ``aggregate`` gives a run: a baseline of zeros (votes - baseline = votes) that
    never reinforces the student, no stop condition, rounding half up."""
    probs = np.zeros(counts.shape) if mechanism.needs_baseline else None
    return Run(probs, 1.0, teachers, None, None, False)


def _fail(name: str, role: str, said: str) -> NoReturn:
    raise CheckFailed(f"{name}: {role}: {said}")

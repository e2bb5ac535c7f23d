"""``pate compare``: many mechanism settings on the same votes, one row each.

Every combination of the listed parameters becomes a row: ``--sigma`` alone
gives GNMax rows; ``--threshold``, ``--sigma1`` and ``--sigma`` give
Confident-GNMax rows (and Interactive-GNMax rows with ``--baseline``) for each
(T, sigma1, sigma); ``--gamma`` gives LNMax rows. Without ``--mechanism`` every
mechanism whose flags are all given is compared (so ``--sigma`` with a
threshold also shows plain GNMax, what the threshold buys); ``--mechanism``
keeps one.

Each row is exactly what ``pate analyze`` reports for that setting (expected
accounting; tested row by row). A grid repeats work across rows, so the rows
are computed here on the core functions with shared terms rather than by one
``account`` call per row: log q and its distinct values' RDP curves once per
answer step, log Pr[answered] and the threshold step's RDP once per threshold
step (and baseline or none). Terms are shared by the step itself, never by its
numbers: a plugin's step with a built-in's numbers has terms of its own. A row
is then a weighted sum over distinct log q values, the same
sum ``accountant.compose.account`` forms, in the same order, so the numbers agree with
``analyze`` to the last few ulps (the tests ask for rtol 1e-12).

Agreement is the expected agreement of the released labels with the plurality vote (the
first of the largest counts, as argmax takes it): the mean over the queries of the exact
probability that the noisy argmax is the plurality label (``core.agreement``, quadrature
over the Gaussian or Laplace noise), and for the threshold mechanisms the same over the
answered queries, sum_q Pr[answered_q] P_q / sum_q Pr[answered_q], with the expected answered
count beside it.

Choosing a setting by its data-dependent cost on the private votes is itself
a use of the private data, which no row accounts for; every output says so.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from typing import Any, TypeVar

import numpy as np
from numpy.typing import NDArray

from pate_cli.accountant.compose import CostKey, compose, data_independent_rdp, grouped_weights
from pate_cli.accountant.figures import EpsilonResult, ExactBound, epsilon_result, exact_or_reason
from pate_cli.accountant.pld import PldFigure, pld_figure
from pate_cli.accountant.terms import (
    Distinct,
    Grouped,
    QueryTerms,
    answer_weights,
    query_terms,
)
from pate_cli.choices import Conversion, GateOn, SortColumn, ThresholdBound
from pate_cli.core.distinct import DistinctRows
from pate_cli.errors import UnsupportedError, UsageError
from pate_cli.jobs.compare_columns import PARAMETERS, csv_value, parameter_names, setting
from pate_cli.mechanisms import Mechanism, grid
from pate_cli.mechanisms.parameters import Parameter
from pate_cli.reports.encoding import csv_text, number_text, plain
from pate_cli.reports.models import InputSummary
from pate_cli.reports.publishable import Gate, apply_gate, figures, within_budget
from pate_cli.reports.reprs import epsilon_at, short_repr

FloatArray = NDArray[np.float64]
T = TypeVar("T")

#: More rows than this is almost certainly a typo in a list; say so rather than run for minutes.
MAX_ROWS = 10_000

NOTE = (
    "choosing parameters by their cost on these votes is itself a use of the private data, "
    "which no row accounts for; only the worst-case epsilon (every query answered) depends on "
    "the parameters and the number of queries alone, and is safe to tune on"
)


# ---------------------------------------------------------------------------
# Flags -> the grid of mechanisms.


def parse_list(flag: str, text: str | None) -> tuple[float, ...]:
    """Parse a comma list of numbers (``20,40,80``); repeated values are kept once.

    Raises:
        UsageError: An empty item or a value that is not a finite number.
    """
    if text is None:
        return ()
    items = [item.strip() for item in text.split(",")]
    values: list[float] = []
    for item in items:
        try:
            value = float(item)
        except ValueError:
            value = math.nan
        if not item or not math.isfinite(value):
            raise UsageError(
                f"{flag} {text!r}: {item!r} is not a finite number; expected a comma list "
                "of numbers such as 20,40,80"
            )
        if value not in values:
            values.append(value)
    return tuple(values)


def listed(parameter: Parameter, given: str | float | None) -> tuple[float, ...]:
    """A parameter's values as ``compare``'s flag gives them: a comma list where it takes
    one, else the one value (none when not given)."""
    if given is None:
        return ()
    if parameter.listable:
        return parse_list(parameter.flag, str(given))
    return (float(given),)


def mechanism_grid(
    name: str | None,
    *,
    has_baseline: bool = False,
    threshold_bound: str | ThresholdBound = ThresholdBound.THEOREM6,
    **lists: Sequence[float],
) -> list[Mechanism]:
    """Every setting to compare, in a fixed order: by mechanism, then the product of its
    parameters' lists (``lists``: values by keyword, as ``sigma=(20, 40)``; the rule of
    every command's flags, ``mechanisms.grid``).

    Raises:
        UsageError: Missing or conflicting flags, a value outside its domain, too many rows.
    """
    return grid(
        name,
        lists,
        has_baseline=has_baseline,
        threshold_bound=threshold_bound,
        max_rows=MAX_ROWS,
    )


# ---------------------------------------------------------------------------
# The rows: shared per-query terms, then one weighted sum per row.


def _shared(cache: dict[object, T], key: object, compute: Callable[[], T]) -> T:
    """``cache[key]``, computed once; a key that cannot be hashed (a plugin's step that is
    no frozen dataclass) is never shared: computed again for each row."""
    try:
        found = cache.get(key)
    except TypeError:
        return compute()
    if found is None:
        found = cache[key] = compute()
    return found


@dataclass
class _Distinct:
    """The distinct values of one array of per-query scalars (held, so that its ``id`` is
    never another's) and each cost function's value at them, by ``CostKey``."""

    values: FloatArray
    unique: FloatArray
    inverse: NDArray[np.intp]
    costs: dict[object, FloatArray] = field(default_factory=dict)


@dataclass
class _SharedTerms:
    """Per-query terms of one grid, each computed once and reused by every row of the same
    step.

    Lives for one ``compare_rows`` call (no module-level cache). Every cache is keyed by the
    step itself (a frozen dataclass equals only a step of its own class and fields), never by
    its numbers: log q and the agreement by the answer step; log Pr[answered] and the
    threshold step's scalars by the threshold step and whether it reads votes - baseline;
    each distinct value's cost by its array and ``compose``'s key (the step again). Every row
    is then ``compose``'s rule, the one ``analyze`` applies, so every row equals ``analyze``.
    """

    counts: FloatArray | DistinctRows
    orders: FloatArray
    baseline: FloatArray | None
    half_even: bool
    chunk_size: int | None
    answers: dict[object, QueryTerms] = field(default_factory=dict)
    agreements: dict[object, FloatArray] = field(default_factory=dict)
    gate: dict[object, QueryTerms] = field(default_factory=dict)
    grouped: dict[int, _Distinct] = field(default_factory=dict)

    def answer_terms(self, mechanism: Mechanism) -> QueryTerms:
        """The answer step's log q per query (and by distinct row), shared by its rows."""

        def compute() -> QueryTerms:
            return query_terms(self.counts, mechanism, answer_only=True, chunk_size=self.chunk_size)

        return _shared(self.answers, mechanism.answer_step, compute)

    def agreement(self, mechanism: Mechanism) -> FloatArray:
        """Per query, the probability that the answer step's noisy label is the plurality
        label (``core.agreement``, by quadrature), shared by the rows of one answer step;
        once per distinct row where the votes are held so."""
        step, counts = mechanism.answer_step, self.counts

        def compute() -> FloatArray:
            if isinstance(counts, DistinctRows):
                return counts.expand(step.agreement(counts.rows))  # type: ignore[no-any-return]
            return step.agreement(counts)

        return _shared(self.agreements, step, compute)

    def terms(self, mechanism: Mechanism) -> QueryTerms:
        """The per-query terms of one setting, shared with the rows of the same steps."""
        answer = self.answer_terms(mechanism)
        logq = answer.logq
        assert logq is not None
        step = mechanism.threshold_step
        if step is None:
            return QueryTerms(None, None, logq, logq.size, distinct=answer.distinct)
        interactive = mechanism.needs_baseline  # its statistic reads votes - baseline
        gate = _shared(
            self.gate,
            (step, interactive),
            lambda: query_terms(
                self.counts,
                mechanism,
                baseline=self.baseline if interactive else None,
                half_even=self.half_even,
                need_logq=False,
                chunk_size=self.chunk_size,
            ),
        )
        return QueryTerms(
            gate.log_pr_answered,
            gate.logq_threshold,
            logq,
            logq.size,
            gate.margins,
            gate.threshold_sensitivity,
            distinct=_joined(gate.distinct, answer.distinct),
        )

    def total(
        self,
        values: FloatArray,
        weights: FloatArray | None,
        key: CostKey,
        cost: Callable[[FloatArray], FloatArray],
        grouped: Grouped | None = None,
    ) -> FloatArray:
        """``sum_over_queries``, with the distinct values and their costs kept for later rows
        (found among the distinct rows' values where they are grouped: the same sums)."""
        held = values if grouped is None else grouped.values
        found = self.grouped.get(id(held))
        if found is None or found.values is not held:
            unique, inverse = np.unique(held, return_inverse=True)
            found = self.grouped[id(held)] = _Distinct(held, unique, inverse.ravel())
        size = found.unique.size
        per_value: NDArray[Any]
        if grouped is None:
            per_value = np.bincount(found.inverse, weights=weights, minlength=size)
        else:  # one block: the queries' sums in their order, as the bincount above
            per_value = grouped_weights(grouped, found.inverse, size, weights, values.size or 1)
        costs = _shared(found.costs, key, lambda: cost(found.unique))
        return np.asarray(per_value, dtype=np.float64) @ costs


def _joined(gate: Distinct | None, answer: Distinct | None) -> Distinct | None:
    """The threshold step's and the answer step's terms by distinct row, where both hold the
    same rows (no baseline: a baseline pairs the rows with its own)."""
    if gate is None or answer is None or not np.array_equal(gate.inverse, answer.inverse):
        return None
    return Distinct(replace(gate.terms, logq=answer.terms.logq), gate.inverse, gate.counts)


@dataclass(frozen=True)
class CompareRow:
    """One setting: what ``pate analyze`` reports for it, and its expected agreement."""

    mechanism: Mechanism
    expected_answered: float
    num_queries: int
    data_dependent: EpsilonResult
    data_independent: EpsilonResult
    agreement: float
    """The expected share of the released labels equal to the plurality vote (of the
    answered ones, for a threshold), by quadrature (``core.agreement``)."""
    worst_case: EpsilonResult | None = None
    """Data-independent with every query answered: it does not depend on the votes."""
    exact: ExactBound | None = None
    """The exact data-independent epsilon with every query answered."""
    exact_absent: str | None = None
    """Why the row has no exact figure (its steps' parts have no exact joint account)."""
    data_dependent_pld: PldFigure | None = None
    """The privacy-loss-distribution figure (``pld``), where the mechanism has one."""
    pld_note: str | None = None
    """Why a row asked for one has none (its mechanism stays on Renyi DP)."""

    def epsilons(self) -> dict[GateOn, float | None]:
        """What the row offers to the gate (publishable: its smallest publishable figure)."""
        worst = None if self.worst_case is None else self.worst_case.epsilon
        exact = None if self.exact is None else self.exact.epsilon
        publishable = [value for value in (worst, exact) if value is not None]
        return {
            GateOn.PUBLISHABLE: min(publishable) if publishable else None,
            GateOn.DATA_DEPENDENT: self.data_dependent.epsilon,
            GateOn.DATA_INDEPENDENT: self.data_independent.epsilon,
            GateOn.WORST_CASE: worst,
            GateOn.EXACT_DATA_INDEPENDENT: exact,
        }

    def to_json_dict(self) -> dict[str, Any]:
        def block(result: EpsilonResult) -> dict[str, Any]:
            return {
                "epsilon": result.epsilon,
                "order": result.order,
                "at_grid_edge": result.at_grid_edge,
            }

        return {
            "mechanism": self.mechanism.to_json_dict(),
            "expected_answered": self.expected_answered,
            "data_dependent": block(self.data_dependent),
            "data_independent": block(self.data_independent),
            "agreement": self.agreement,
            **(
                {}
                if self.worst_case is None
                else {"data_independent_worst_case": block(self.worst_case)}
            ),
            **({} if self.exact is None else {"data_independent_exact": self.exact.to_json_dict()}),
            **(
                {}
                if self.exact_absent is None
                else {
                    "data_independent_exact": None,
                    "data_independent_exact_absent": self.exact_absent,
                }
            ),
            **(
                {}
                if self.data_dependent_pld is None
                else {"data_dependent_pld": self.data_dependent_pld.to_json_dict()}
            ),
        }


def _row(
    shared: _SharedTerms,
    mechanism: Mechanism,
    delta: float,
    conversion: Conversion,
    pld: str | None = None,
) -> CompareRow:
    """One row: the setting's cost by ``compose``, as ``analyze`` composes it."""
    orders = shared.orders
    terms = shared.terms(mechanism)
    weights = answer_weights(terms)
    steps = compose(mechanism, terms, orders, weights=weights, total=shared.total)
    num = terms.num_seen
    answered = float(num if weights is None else weights.sum())
    right = shared.agreement(mechanism)
    # Of the answered queries: the threshold and the answer noise are independent.
    agreement = float(
        np.mean(right) if weights is None else np.sum(weights * right) / max(answered, 1e-300)
    )
    exact, exact_absent = exact_or_reason(mechanism, num, num, delta, terms.threshold_sensitivity)
    return CompareRow(
        mechanism=mechanism,
        expected_answered=answered,
        num_queries=num,
        data_dependent=epsilon_result(orders, steps.data_dependent, delta, conversion),
        data_independent=epsilon_result(orders, steps.data_independent, delta, conversion),
        agreement=agreement,
        worst_case=epsilon_result(
            orders,
            data_independent_rdp(mechanism, orders, num, num, terms.threshold_sensitivity),
            delta,
            conversion,
        ),
        exact=exact,
        exact_absent=exact_absent,
        **_pld_of(shared, mechanism, terms, delta, pld),
    )


def _pld_of(
    shared: _SharedTerms, mechanism: Mechanism, terms: QueryTerms, delta: float, pld: str | None
) -> dict[str, Any]:
    """A row's privacy-loss-distribution figure (``pld``: None, "q-bound" or "exact"), or
    the one line why its mechanism has none."""
    if pld is None:
        return {}
    try:
        return {"data_dependent_pld": pld_figure(shared.counts, mechanism, terms, delta, pld)}
    except UnsupportedError as error:
        return {"pld_note": error.message}


def compare_rows(
    counts: FloatArray | DistinctRows,
    mechanisms: Sequence[Mechanism],
    orders: FloatArray,
    delta: float,
    conversion: Conversion,
    *,
    baseline: FloatArray | None = None,
    half_even: bool = False,
    chunk_size: int | None = None,
    pld: str | None = None,
) -> list[CompareRow]:
    """The expected cost of each setting, in the order given.

    Args:
        counts: Vote counts (Q, C), or held by distinct row (``Votes.grouped``).
        mechanisms: The settings.
        orders: Renyi orders (K,).
        delta: Target delta.
        conversion: RDP to (epsilon, delta) conversion.
        baseline: Interactive-GNMax baseline (Q, C), on the votes' scale.
        half_even: Round the threshold statistic half to even (as the reference).
        chunk_size: Queries per chunk for the per-query terms (None: ``query_terms``'s).
        pld: add each row's privacy-loss-distribution figure ("q-bound" or "exact").

    Returns:
        One row per mechanism, each equal to ``analysis_report`` for that setting.

    Shapes: counts (Q, C), orders (K,).
    """
    if baseline is None and any(m.needs_baseline for m in mechanisms):
        raise ValueError("interactive-gnmax rows need a baseline")
    # counts: an array or a file read block by block, only ever sliced by rows
    grid = np.asarray(orders, dtype=np.float64)
    shared = _SharedTerms(counts, grid, baseline, half_even, chunk_size)
    return [_row(shared, mechanism, delta, conversion, pld) for mechanism in mechanisms]


def _publishable(row: CompareRow) -> float:
    """The row's smallest publishable figure (infinite when it has none)."""
    figure = row.epsilons()[GateOn.PUBLISHABLE]
    return math.inf if figure is None else figure


_SORT_KEYS: dict[SortColumn, Callable[[CompareRow], float]] = {
    SortColumn.PUBLISHABLE: _publishable,
    SortColumn.EPSILON: lambda row: row.data_dependent.epsilon,
    SortColumn.DATA_INDEPENDENT: lambda row: row.data_independent.epsilon,
    SortColumn.ANSWERED: lambda row: -row.expected_answered,
    SortColumn.AGREEMENT: lambda row: -row.agreement,
}


def sort_rows(rows: Sequence[CompareRow], column: SortColumn) -> list[CompareRow]:
    """Best first by ``column`` (smallest epsilon, most answered, highest agreement); stable."""
    return sorted(rows, key=_SORT_KEYS[column])


# ---------------------------------------------------------------------------
# Report, renderings, files.


@dataclass(frozen=True)
class CompareReport:
    """``pate compare``: the rows, sorted, and the setting they share."""

    input: InputSummary
    delta: float
    conversion: str
    orders: FloatArray
    sort: SortColumn
    rows: tuple[CompareRow, ...]
    max_epsilon: float | None = None
    warnings: tuple[str, ...] = ()
    files: tuple[tuple[str, str], ...] = ()
    """(key, path) of the files the command wrote from this report (csv, plot)."""
    gate_on: GateOn = GateOn.PUBLISHABLE
    """The figure ``max_epsilon`` checks, per row (``within_budget``) and for the best row."""
    engine: dict[str, Any] | None = None  # where the passes ran (engine="dask"); None: here

    @property
    def gate(self) -> Gate | None:
        """The best row's verdict: exit 1 when no setting is within budget."""
        best: dict[GateOn, float | None] = {}
        for on in GateOn:
            values = [v for row in self.rows if (v := row.epsilons().get(on)) is not None]
            best[on] = min(values) if values else None
        return apply_gate(best, self.max_epsilon, self.gate_on)

    def _repr_markdown_(self) -> str:
        """The report in a notebook (Jupyter renders Markdown)."""
        from pate_cli.reports import markdown

        return markdown.compare(self.to_json_dict())

    def to_dict(self) -> dict[str, Any]:
        """Exactly what ``pate compare --json`` prints (without --csv and --plot)."""
        out = self.to_json_dict()
        if self.engine is not None:
            out["engine"] = self.engine
        return plain(out)

    def __repr__(self) -> str:
        best = self.rows[0] if self.rows else None
        return short_repr(
            "CompareReport",
            queries=self.input.num_queries,
            rows=len(self.rows),
            sort=self.sort.value,
            first=None if best is None else best.mechanism.to_json_dict()["name"],
            data_dependent=None
            if best is None
            else epsilon_at(best.data_dependent.epsilon, best.data_dependent.order),
        )

    def to_json_dict(self) -> dict[str, Any]:
        rows = []
        for row in self.rows:
            item = row.to_json_dict()
            if row.worst_case is not None:
                found = figures(
                    item["mechanism"], row.worst_case.epsilon, self.delta, exact=row.exact
                )
                item["publishable"] = [figure.to_json_dict() for figure in found]
            if self.max_epsilon is not None:
                item["within_budget"] = within_budget(row, self.gate_on, self.max_epsilon)
            rows.append(item)
        out: dict[str, Any] = {
            "command": "compare",
            "input": self.input.to_json_dict(),
            "delta": self.delta,
            "conversion": self.conversion,
            "accounting": "expected",
            "orders": self.orders,
            "sort": self.sort.value,
            "rows": rows,
            "note": NOTE,
            "warnings": list(self.warnings),
        }
        gate = self.gate
        if gate is not None:
            out["max_epsilon"] = self.max_epsilon
            out["gate"] = gate.to_json_dict()
        out.update(self.files)
        return out


def edge_warning(rows: Sequence[CompareRow]) -> list[str]:
    edge = [i for i, r in enumerate(rows, start=1) if r.data_dependent.at_grid_edge]
    if not edge:
        return []
    shown = ", ".join(map(str, edge[:10])) + (", ..." if len(edge) > 10 else "")
    return [
        f"{len(edge)} of {len(rows)} settings (rows {shown}) have their best order at the edge "
        "of the order grid; extend --orders to be sure the minimum is inside it"
    ]


_FIGURES = (
    "expected_answered",
    "epsilon",
    "order",
    "data_independent_epsilon",
    "data_independent_order",
    "agreement",
)

#: The CSV's columns when every row is a built-in's.
_CSV_COLUMNS = ("mechanism", *PARAMETERS, *_FIGURES)


def csv_columns(rows: Sequence[CompareRow]) -> tuple[str, ...]:
    """The CSV's columns: the name, the built-ins' parameters (always, so that a script
    reading them reads every CSV), any other parameter a row has, then the figures."""
    found = parameter_names([row.mechanism for row in rows])
    return ("mechanism", *PARAMETERS, *(p for p in found if p not in PARAMETERS), *_FIGURES)


def _csv_row(row: CompareRow, parameters: Sequence[str]) -> list[str]:
    """One row's fields: its name, ``parameters`` ("" for one it does not have), figures."""
    spec = setting(row.mechanism)
    figures = (
        row.expected_answered,
        row.data_dependent.epsilon,
        row.data_dependent.order,
        row.data_independent.epsilon,
        row.data_independent.order,
        row.agreement,
    )
    return [
        row.mechanism.name,
        *(csv_value(spec.get(name)) for name in parameters),
        *map(number_text, figures),
    ]


def compare_csv(report: CompareReport) -> str:
    """The rows as CSV, in the report's order, numbers at full precision (``number_text``):
    a column for every parameter any row has (``csv_columns``)."""
    columns = csv_columns(report.rows)
    parameters = columns[1 : len(columns) - len(_FIGURES)]
    return csv_text([columns, *(_csv_row(row, parameters) for row in report.rows)])

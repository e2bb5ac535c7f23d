"""``pate compare``: one row per setting, the best of each column in bold."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from rich import box
from rich.console import Group, RenderableType
from rich.table import Table
from rich.text import Text

from pate_cli.choices import GateOn
from pate_cli.cli.render.common import PRIVATE, PUBLISHABLE, Fit, fmt_bound, fmt_order, input_line
from pate_cli.jobs.compare_columns import ParameterColumns, value_text
from pate_cli.jobs.comparison import NOTE, CompareReport, CompareRow
from pate_cli.mechanisms import Mechanism, flags_of
from pate_cli.reports.publishable import within_budget

#: Mechanism names in the table, short enough for an 80-column terminal.


_COMPARE_LEGEND = (
    "epsilon: data-dependent (private); indep.: data-independent (private where the number "
    "answered depends on the votes); publ.: the smallest publishable figure (every query "
    "answered, exact where it can be); agree: the expected share of the labels equal to the "
    "plurality vote (of the answered ones, for a threshold); bold: the best of its column"
)


# The columns after the parameters, in the table and in the narrow blocks.
_COLUMNS = ("answered", "epsilon", "order", "indep.", "order", "publ.", "agree")
# A parameter's label in the table and the blocks where it is not its name (the paper's T).
_PARAMETER_LABELS = {"threshold": "T"}


def render_compare(report: CompareReport) -> RenderableType:
    """The rows as a table (one line per setting, folded into a block per setting where the
    console is too narrow), the best value of each column in bold: a column for every
    parameter that varies across the rows, those every row has at one value said above."""
    rows = report.rows
    columns = ParameterColumns.of([row.mechanism for row in rows])
    params = list(columns.varying)
    table = _table(report, params)
    best = _Best.of(rows)
    blocks: list[RenderableType] = []
    for rank, row in enumerate(rows, start=1):
        spec = row.mechanism.to_json_dict()
        over = _over_budget(report, row)
        name = row.mechanism.short
        cells = _cells(row, best)
        table.add_row(
            str(rank),
            name,
            *(value_text(spec[p]) if p in spec else "-" for p in params),
            *cells,
            style="dim" if over else None,
        )
        blocks.append(_block(rank, name, spec, params, cells, over))
    header = input_line(report.input)
    header.append(
        f"; delta {report.delta:g}, conversion {report.conversion}, expected cost; each epsilon "
        "at its best order"
    )
    narrow = Group(
        Text(f"{len(rows)} settings, sorted by {report.sort.value} (best first)"), *blocks
    )
    legend = Text(_COMPARE_LEGEND, style="dim")
    return Group(header, *_fixed(columns), Fit(table, narrow), legend, *_notes(report))


def _label(name: str) -> str:
    """A parameter's label in the table, the blocks and the line above them."""
    return _PARAMETER_LABELS.get(name, name)


def _fixed(columns: ParameterColumns) -> list[Text]:
    """The line above the table naming the parameters every row has at one value."""
    if not columns.fixed:
        return []
    said = ", ".join(f"{_label(name)} {value_text(value)}" for name, value in columns.fixed)
    return [Text(f"in every row: {said}")]


def _table(report: CompareReport, params: list[str]) -> Table:
    """The empty table: rank, mechanism, the parameters ``params``, then ``_COLUMNS``."""
    table = Table(
        title=f"{len(report.rows)} settings, sorted by {report.sort.value} (best first)",
        title_justify="left",
        header_style="bold",
        box=box.SIMPLE_HEAD,
        show_edge=False,
        pad_edge=False,
        padding=(0, 0),  # the box's space between columns is enough; fits 80 columns
    )
    table.add_column("#", justify="right", no_wrap=True)
    table.add_column("mechanism", no_wrap=True)
    for name in params:
        table.add_column(_label(name), justify="right", no_wrap=True)
    for name in _COLUMNS:
        table.add_column(name, justify="right", no_wrap=True)
    return table


def _publishable(row: CompareRow) -> float:
    """The row's smallest publishable epsilon, NaN where it has none."""
    value = row.epsilons()[GateOn.PUBLISHABLE]
    return math.nan if value is None else value


@dataclass(frozen=True)
class _Best:
    """The best value of each column over the rows (the largest or the smallest)."""

    answered: float
    dependent: float
    independent: float
    publishable: float
    agreement: float

    @classmethod
    def of(cls, rows: Sequence[CompareRow]) -> _Best:
        """The best value of each column over ``rows``."""
        return cls(
            answered=max([r.expected_answered for r in rows]),
            dependent=min([r.data_dependent.epsilon for r in rows]),
            independent=min([r.data_independent.epsilon for r in rows]),
            publishable=min((_publishable(r) for r in rows), default=math.nan),
            agreement=max([r.agreement for r in rows]),
        )


def _over_budget(report: CompareReport, row: CompareRow) -> bool:
    """Whether --max-epsilon is given and the row is not within it (``within_budget``)."""
    return report.max_epsilon is not None and not within_budget(
        row, report.gate_on, report.max_epsilon
    )


def _cell(text: str, is_best: bool, colour: str = "") -> Text:
    """A cell in ``colour``, bold where it is the best of its column."""
    return Text(text, style=f"bold {colour}".strip() if is_best else colour)


def _cells(row: CompareRow, best: _Best) -> tuple[Text, ...]:
    """The row's ``_COLUMNS``, each in bold where it is the best of its column."""
    every_query = row.mechanism.answers_every_query
    independent_colour = PUBLISHABLE if every_query else PRIVATE
    worst = _publishable(row)
    return (
        _cell(f"{row.expected_answered:.1f}", row.expected_answered == best.answered),
        _cell(
            fmt_bound(row.data_dependent.epsilon),
            row.data_dependent.epsilon == best.dependent,
            PRIVATE,
        ),
        Text(fmt_order(row.data_dependent.order)),
        _cell(
            fmt_bound(row.data_independent.epsilon),
            row.data_independent.epsilon == best.independent,
            independent_colour,
        ),
        Text(fmt_order(row.data_independent.order)),
        _cell(fmt_bound(worst), worst == best.publishable, PUBLISHABLE),
        _cell(f"{row.agreement:.4f}", row.agreement == best.agreement),
    )


def _block(
    rank: int,
    name: str,
    spec: dict[str, Any],
    params: list[str],
    cells: tuple[Text, ...],
    over: bool,
) -> Text:
    """One setting as a block of text, for a console too narrow for the table."""
    setting = " ".join(f"{_label(p)}={value_text(spec[p])}" for p in params if p in spec)
    block = Text(f"{rank} {name} {setting}: ", style="dim" if over else "")
    for i, (label, value) in enumerate(zip(_COLUMNS, cells, strict=True)):
        block.append(("; " if i else "") + f"{label} ")
        block.append_text(value)
    return block


def _for_comparison(rows: Sequence[CompareRow]) -> list[type[Mechanism]]:
    """The mechanisms whose rows stand beside others for comparison: without a threshold
    step, their flags part of a thresholded row's (gnmax's --sigma, among Confident-GNMax
    rows)."""
    kinds = list(dict.fromkeys(type(row.mechanism) for row in rows))
    return [
        k
        for k in kinds
        if k.answers_every_query
        and any(not o.answers_every_query and set(flags_of(k)) < set(flags_of(o)) for o in kinds)
    ]


def _notes(report: CompareReport) -> list[RenderableType]:
    """The lines under the table: what the gnmax rows are for (when they sit among others),
    how many settings are within --max-epsilon (when given), and ``NOTE``."""
    rows = report.rows
    parts: list[RenderableType] = []
    for kind in _for_comparison(rows):
        parts.append(
            Text(
                f"{kind.name} rows: the same {' '.join(flags_of(kind))} without a threshold "
                "step, for comparison (--mechanism leaves them out)",
                style="dim",
            )
        )
    if report.max_epsilon is not None:
        within = sum(within_budget(r, report.gate_on, report.max_epsilon) for r in rows)
        parts.append(
            Text(
                f"{within} of {len(rows)} settings within --max-epsilon {report.max_epsilon:g} "
                f"({report.gate_on.value})"
            )
        )
    parts.extend(_pld_lines(rows))
    parts.append(Text(f"note: {NOTE}", style="italic"))
    return parts


def _pld_lines(rows: Sequence[CompareRow]) -> list[Text]:
    """With --pld, each row's privacy-loss-distribution figure, by rank (or why none)."""
    asked = [
        (rank, row)
        for rank, row in enumerate(rows, start=1)
        if row.pld_note is not None or row.data_dependent_pld is not None
    ]
    if not asked:
        return []
    cells = []
    for rank, row in asked:
        figure = row.data_dependent_pld
        cells.append(f"#{rank} " + ("-" if figure is None else fmt_bound(figure.epsilon)))
    lines = [
        Text(
            "data-dependent epsilon (PLD, private; both directions): " + ", ".join(cells),
            style=PRIVATE,
        )
    ]
    notes = sorted({row.pld_note for _, row in asked if row.pld_note is not None})
    lines.extend(Text(f"-: {note}", style="dim") for note in notes)
    return lines

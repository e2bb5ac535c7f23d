"""One rule in one place: the spelling of a number in every text output
(``encoding.number_text``, behind the JSON encoder, the ledger's CSV and compare's CSV) and
the budget gate's verdict (``budget.within_limit`` / ``within_budget``, behind the gate, a
compare row's ``within_budget`` and the compare table)."""

from __future__ import annotations

import csv
import io
import math
import re

import numpy as np
import pytest
from rich.console import Console

from pate_cli.choices import Conversion, GateOn, SortColumn
from pate_cli.cli import render
from pate_cli.jobs import comparison
from pate_cli.jobs.analysis import analysis_report
from pate_cli.mechanisms import ConfidentGNMax, GNMax, LNMax
from pate_cli.orders import parse_orders
from pate_cli.reports import ledger
from pate_cli.reports.encoding import csv_text, dumps, number_text, plain
from pate_cli.reports.models import InputSummary
from pate_cli.reports.publishable import Gate, within_budget, within_limit
from pate_cli.votes import load_votes

COUNTS = np.array([[8, 1, 1], [5, 4, 1], [3, 3, 4], [10, 0, 0]], dtype=np.float64)
MECHANISMS = (
    GNMax(1.0),
    GNMax(1e-200),  # no noise to speak of: its data-independent epsilon is infinite
    LNMax(0.5),
    ConfidentGNMax(6.0, 2.0, 1.0),
)


@pytest.fixture(scope="module")
def rows() -> list[comparison.CompareRow]:
    return comparison.compare_rows(COUNTS, MECHANISMS, parse_orders(None), 1e-5, Conversion.CLASSIC)


@pytest.fixture
def report(rows, write_npy):
    def make(max_epsilon: float | None = None, on: GateOn = GateOn.PUBLISHABLE):
        return comparison.CompareReport(
            input=InputSummary.from_votes(load_votes(write_npy(COUNTS))),
            delta=1e-5,
            conversion="classic",
            orders=parse_orders(None),
            sort=SortColumn.EPSILON,
            rows=tuple(rows),
            max_epsilon=max_epsilon,
            gate_on=on,
        )

    return make


# ---------------------------------------------------------------------------
# The spelling of a number.


@pytest.mark.parametrize(
    ("value", "text"),
    [
        (math.inf, "inf"),
        (-math.inf, "-inf"),
        (np.float64(np.inf), "inf"),
        (0.1, "0.1"),  # repr: the shortest text that reads back exactly
        (1 / 3, "0.3333333333333333"),
        (np.float64(6.999999999999999e18), "6.999999999999999e+18"),
        (3, "3.0"),  # every number is written as a float, ints too
        (np.int64(250), "250.0"),
    ],
)
def test_number_text(value, text):
    assert number_text(value) == text
    if math.isfinite(value):
        assert float(number_text(value)) == value


@pytest.mark.parametrize("value", [math.nan, np.float64("nan"), -math.nan])
def test_number_text_refuses_a_nan(value):
    with pytest.raises(ValueError, match="NaN"):
        number_text(value)


def test_json_spells_infinities_as_the_text_outputs_do():
    payload = {"up": math.inf, "down": np.float64(-np.inf), "x": 0.5}
    assert plain(payload) == {"up": number_text(math.inf), "down": "-inf", "x": 0.5}
    assert dumps(payload) == '{"up": "inf", "down": "-inf", "x": 0.5}'
    with pytest.raises(ValueError, match="NaN"):
        dumps({"x": math.nan})


def test_csv_text_quotes_only_where_a_field_needs_it():
    text = csv_text([("a", "b"), ["1.0", ""], ["x,y", 'say "hi"']])
    assert text == 'a,b\n1.0,\n"x,y","say ""hi"""\n'
    assert list(csv.reader(io.StringIO(text))) == [
        ["a", "b"],
        ["1.0", ""],
        ["x,y", 'say "hi"'],
    ]


# ---------------------------------------------------------------------------
# compare's CSV.


def test_compare_csv_reads_back_as_the_rows(report):
    compared = report()
    text = comparison.compare_csv(compared)
    header, *lines = list(csv.reader(io.StringIO(text, newline="")))
    assert tuple(header) == comparison._CSV_COLUMNS
    assert len(lines) == len(compared.rows)
    for line, row in zip(lines, compared.rows, strict=True):
        spec = row.mechanism.to_json_dict()
        field = dict(zip(header, line, strict=True))
        assert field["mechanism"] == spec["name"]
        for name in comparison.PARAMETERS:
            assert field[name] == ("" if name not in spec else number_text(spec[name]))
            if name in spec:
                assert float(field[name]) == spec[name]
        expected = {
            "expected_answered": row.expected_answered,
            "epsilon": row.data_dependent.epsilon,
            "order": row.data_dependent.order,
            "data_independent_epsilon": row.data_independent.epsilon,
            "data_independent_order": row.data_independent.order,
            "agreement": row.agreement,
        }
        for name, value in expected.items():
            assert float(field[name]) == value, name  # exactly: full precision
    # The near-noiseless GNMax row: its data-independent epsilon is infinite, spelled "inf".
    infinite = [f for f in lines if f[header.index("data_independent_epsilon")] == "inf"]
    assert len(infinite) == 1
    assert infinite[0][header.index("sigma")] == "1e-200"


def test_compare_csv_needs_no_quotes_and_ends_every_line(report):
    """No field needs quoting, so the csv module writes what joining by commas did."""
    compared = report()
    lines = comparison.compare_csv(compared).split("\n")
    assert lines[0] == ",".join(comparison._CSV_COLUMNS)
    assert lines[-1] == ""  # one line end after the last row
    assert all('"' not in line for line in lines)
    assert ",inf," in comparison.compare_csv(compared)


def test_ledger_csv_reads_back_as_its_json(write_npy):
    """The near-noiseless GNMax ledger: log q is -inf and the data-independent running
    epsilon inf, spelled in the CSV as the JSON spells them."""
    votes = load_votes(write_npy(COUNTS))
    mechanism = GNMax(1e-200)
    report = analysis_report(votes, mechanism, parse_orders(None), 1e-5, Conversion.CLASSIC)
    per_query = ledger.build_ledger(votes, mechanism, report)
    text = ledger.ledger_csv(per_query)
    header, *lines = list(csv.reader(io.StringIO(text, newline="")))
    assert tuple(header) == ledger.COLUMNS
    records = ledger.ledger_json(per_query)["queries"]
    assert len(lines) == len(records) == len(COUNTS)
    for line, record in zip(lines, records, strict=True):
        assert line[0] == str(record["index"])
        for name, field in zip(header[1:], line[1:], strict=True):
            value = record[name]
            assert field == (value if isinstance(value, str) else number_text(value)), name
        assert line[header.index("logq")] == "-inf"
        assert line[header.index("running_epsilon_data_independent")] == "inf"


# ---------------------------------------------------------------------------
# The gate's rule.


@pytest.mark.parametrize("limit", [0.0, 1e-300, 3.9, 1e300])
def test_within_limit_at_just_above_and_below_the_limit(limit):
    assert within_limit(limit, limit)  # the limit itself is within
    assert within_limit(np.nextafter(limit, -math.inf), limit)
    assert not within_limit(np.nextafter(limit, math.inf), limit)
    for epsilon, verdict in [(limit, True), (np.nextafter(limit, math.inf), False)]:
        assert Gate(GateOn.PUBLISHABLE, epsilon, limit).passed is verdict


def test_within_limit_never_passes_what_is_missing_or_nan():
    assert not within_limit(None, 1.0)
    assert not within_limit(math.nan, 1.0)
    assert not within_limit(math.nan, math.inf)
    assert not within_limit(math.inf, 1e300)
    assert within_limit(math.inf, math.inf)  # as the gate's ``epsilon <= limit`` always did
    assert not Gate(GateOn.PUBLISHABLE, math.nan, 1.0).passed


@pytest.mark.parametrize("on", [GateOn.PUBLISHABLE, GateOn.DATA_DEPENDENT, GateOn.WORST_CASE])
def test_within_budget_checks_the_figure_a_row_offers(rows, on):
    for row in rows:
        figure = row.epsilons()[on]
        assert figure is not None
        if math.isinf(figure):
            assert not within_budget(row, on, 1e300)
            continue
        assert within_budget(row, on, figure)
        assert within_budget(row, on, np.nextafter(figure, math.inf))
        assert not within_budget(row, on, np.nextafter(figure, -math.inf))


def test_within_budget_without_the_figure_never_passes():
    class Offers:
        def epsilons(self):
            return {GateOn.PUBLISHABLE: None}

    assert not within_budget(Offers(), GateOn.PUBLISHABLE, math.inf)
    assert not within_budget(Offers(), GateOn.RELEASED, math.inf)


def _table(compared: comparison.CompareReport, width: int) -> str:
    console = Console(
        file=io.StringIO(), record=True, width=width, force_terminal=True, color_system="standard"
    )
    console.print(render.render_compare(compared))
    return console.export_text(styles=True)


@pytest.mark.parametrize("on", [GateOn.PUBLISHABLE, GateOn.DATA_INDEPENDENT])
@pytest.mark.parametrize("width", [200, 60])  # the table, and the narrow blocks
def test_json_table_and_count_agree_at_the_limit(rows, report, on, width):
    """A limit equal to a row's figure: that row is within in the JSON, not dimmed in the
    table, and counted in the line under it."""
    limit = sorted(r.epsilons()[on] for r in rows)[1]  # the second cheapest: some over
    compared = report(limit, on)
    verdicts = [row["within_budget"] for row in compared.to_json_dict()["rows"]]
    assert verdicts == [within_budget(r, on, limit) for r in rows]
    assert verdicts.count(True) == 2
    shown = _table(compared, width)
    assert f"2 of {len(rows)} settings within --max-epsilon {limit:g} ({on.value})" in re.sub(
        r"\x1b\[[0-9;]*m|\s+", lambda m: " " if m.group().isspace() else "", shown
    )
    dimmed = re.findall(r"^\x1b\[2m *(\d+)[ \x1b]", shown, re.MULTILINE)  # a row's rank
    assert sorted(map(int, dimmed)) == [i for i, v in enumerate(verdicts, start=1) if not v]
    assert compared.gate is not None and compared.gate.passed

"""Every figure printed for people is safe to copy: a privacy cost rounded up, what a budget
has left rounded down, the rest to nearest (``pate_cli.reports.rounding``).

Each command that prints figures runs on the sample data twice, as text and as ``--json``;
every figure of the text is found next to its JSON value, and a cost is never printed below
it (nor a unit of its last digit or more above it). Each text output is then checked to hold
no figure the test did not look at, so a new figure cannot slip in unrounded.
"""

from __future__ import annotations

import json
import math
import re
from collections import Counter
from dataclasses import dataclass
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

import pate_cli as pate
from pate_cli.reports.rounding import bound, bound_significant, nearest
from tests.conftest import MNIST, MNIST_INDICES, MNIST_LABELS, SAMPLE, TABLE2, run_cli

FIGURE = r"(-?inf|-?\d+(?:\.\d+)?(?:e[-+]\d+)?)"
# A figure as the check below counts them: three decimals or more (orders, shares and counts
# have fewer), scientific ones included.
_TOKEN = re.compile(r"(?<![\w.])-?\d+\.\d{3,}(?:e[-+]\d+)?(?![\w.])")
LNMAX = [MNIST_LABELS, "--format", "labels", "--indices", MNIST_INDICES, "--gamma", 0.1]
LNMAX += ["--delta", 1e-5]


# ---------------------------------------------------------------------------
# The rounding itself.


@pytest.mark.parametrize(
    ("value", "up", "down"),
    [
        (3.926701201162359, "3.9268", "3.9267"),  # Table 2's publishable figure
        (3.9267, "3.9267", "3.9267"),  # exact at the digits shown: not moved
        (2.1271, "2.1271", "2.1271"),  # a sampled release, already on its grid
        (0.0, "0.0000", "0.0000"),
        (-0.0, "0.0000", "0.0000"),
        (-1e-20, "-1.000e-20", "-1.000e-20"),
        (1.23456e-5, "1.235e-05", "1.234e-05"),
        (-3.41309685, "-3.4130", "-3.4131"),
        (1234567.1, "1.235e+06", "1.234e+06"),
        (math.inf, "inf", "inf"),
        (-math.inf, "-inf", "-inf"),
    ],
)
def test_bound_rounds_to_the_safe_side(value, up, down):
    assert bound(value) == up
    assert bound(value, up=False) == down


def test_a_rounded_zero_has_no_sign():
    assert bound(-0.004, 2) == "0.00" and bound(0.004, 2, up=False) == "0.00"
    assert bound_significant(-0.0) == "0" and nearest(-0.0) == "0.0000"


def test_significant_digits_round_up_as_g_writes_them():
    assert bound_significant(3.926701201162359) == "3.92671"
    assert bound_significant(3.926701201162359, 4) == "3.927"
    assert bound_significant(1.9999999250248948, 7) == "2"
    assert bound_significant(2.0) == "2" and bound_significant(math.inf) == "inf"


@given(
    st.floats(min_value=-1e9, max_value=1e9, allow_nan=False).filter(lambda v: v != 0),
    st.integers(min_value=1, max_value=6),
)
def test_bound_is_within_one_unit_on_its_side(value, digits):
    safe_up(bound(value, digits), value, "bound")
    up, down = bound(value, digits), bound(value, digits, up=False)
    safe_down(down, value, "bound")
    assert Decimal(up) - Decimal(down) <= max(_unit(up), _unit(down))


@given(st.floats(min_value=1e-300, max_value=1e300), st.integers(min_value=1, max_value=8))
def test_significant_bound_is_never_below(value, digits):
    assert float(bound_significant(value, digits)) >= value
    assert float(bound_significant(value, digits, up=False)) <= value


@given(st.decimals(min_value=-1000, max_value=1000, places=4))
def test_a_value_exact_at_the_digits_shown_is_printed_as_it_is(value):
    number = float(value)
    if abs(number) >= 1e-3:
        assert bound(number) == bound(number, up=False) == f"{number:.4f}"


# ---------------------------------------------------------------------------
# The checks.


def _unit(printed: str) -> Decimal:
    """One unit of the last digit printed: 1e-4 for "3.9268", 1e3 for "1.235e+06"."""
    return Decimal(1).scaleb(Decimal(printed).as_tuple().exponent)


def safe_up(printed: str, value: float, where: str) -> None:
    """A cost: never below its value, less than one unit of its last digit above."""
    if math.isinf(value) or printed in ("inf", "-inf"):
        assert float(printed) == value, where
        return
    assert float(printed) >= value, f"{where}: {printed} is below {value!r}"
    assert Decimal(printed) - Decimal(repr(value)) < _unit(printed), f"{where}: {printed}"


def safe_down(printed: str, value: float, where: str) -> None:
    """What is left: never above its value, less than one unit of its last digit below."""
    assert float(printed) <= value, f"{where}: {printed} is above {value!r}"
    assert Decimal(repr(value)) - Decimal(printed) < _unit(printed), f"{where}: {printed}"


def to_nearest(printed: str, value: float, where: str) -> None:
    """A figure that bounds nothing: within half a unit either way."""
    assert abs(Decimal(printed) - Decimal(repr(value))) <= _unit(printed) / 2, where


_CHECKS = {"up": safe_up, "down": safe_down, "nearest": to_nearest}


@dataclass
class Figures:
    """The figures found in one text output, each with its JSON value and its side."""

    text: str
    found: list[tuple[str, str, float, str]]

    def add(self, where: str, printed: str, value: float, side: str = "up") -> None:
        self.found.append((where, printed.rstrip(" *"), float(value), side))

    def each(self, pattern: str, values: Any, where: str, sides: Any = "up") -> int:
        """Every match of ``pattern``: its last groups are figures, checked against
        ``values`` (a value, a list of them, or a function of the match giving either) on
        ``sides`` (one side for all, or one each). Returns the number of matches."""
        matches = list(re.finditer(pattern, self.text, flags=re.M))
        assert matches, f"{where}: no match of {pattern!r}"
        for match in matches:
            found = _list(values(match) if callable(values) else values)
            each_side = [sides] * len(found) if isinstance(sides, str) else sides
            printed = match.groups()[-len(found) :]
            for shown, value, side in zip(printed, found, each_side, strict=True):
                self.add(where, shown, value, side)
        return len(matches)

    def check(self) -> None:
        for where, printed, value, side in self.found:
            _CHECKS[side](printed, value, where)
        shown = Counter(_TOKEN.findall(self.text))
        looked_at = Counter(p for _, p, _, _ in self.found if _TOKEN.fullmatch(p))
        assert shown - looked_at == Counter(), f"figures not checked: {shown - looked_at}"


def _list(value: Any) -> list[float]:
    return list(value) if isinstance(value, (list, tuple)) else [value]


def cells(text: str, first: str = "") -> list[list[str]]:
    """The rows of the Rich tables with vertical rules, as stripped cells."""
    rows = [[c.strip() for c in line.split("│")[1:-1]] for line in text.splitlines()]
    return [row for row in rows if row and row[0].startswith(first)]


def both(args: list[Any], monkeypatch, expect: int = 0) -> tuple[str, dict[str, Any], str]:
    """stdout as text (one line per sentence: a wide console), the JSON, and text stderr."""
    monkeypatch.setenv("COLUMNS", "400")
    text = run_cli(args, expect=expect)
    data = run_cli([*args, "--json"], expect=expect).json
    return text.stdout, data, text.stderr


# ---------------------------------------------------------------------------
# Each command, as text and as JSON.


def _publishable(figures: Figures, data: dict[str, Any]) -> None:
    """The headline's publishable figure and the closing line of every publishable one."""
    by_basis = {p["basis"]: p["epsilon"] for p in data["publishable"]}
    figures.each(rf"^epsilon {FIGURE} publishable", data["publishable"][0]["epsilon"], "head")
    line = list(re.finditer(rf"epsilon = {FIGURE} \(([\w-]+), delta", figures.text))
    assert len(line) == len(by_basis)
    for match in line:
        figures.add(f"publishable {match[2]}", match[1], by_basis[match[2]])


def _orders_table(figures: Figures, data: dict[str, Any]) -> None:
    """Every row of ``--all-orders``: RDP and epsilon, data-dependent and independent."""
    dependent, independent = data["data_dependent"], data["data_independent"]
    rows = [row for row in cells(figures.text) if len(row) == 5 and row[0][0].isdigit()]
    for i, row in enumerate(rows):  # every order, in the grid's order
        assert float(row[0]) == pytest.approx(data["orders"][i], abs=0.005)
        for printed, block, key in zip(
            row[1:],
            (dependent, dependent, independent, independent),
            ("rdp", "eps") * 2,
            strict=True,
        ):
            figures.add(f"order {row[0]} {key}", printed, block[key][i])
    assert len(rows) == len(data["orders"])


def _analysis(text: str, data: dict[str, Any]) -> Figures:
    figures = Figures(text, [])
    _publishable(figures, data)
    figures.each(
        rf"data-dependent epsilon {FIGURE} at order", data["data_dependent"]["epsilon"], "dd"
    )
    figures.each(
        rf"data-independent epsilon {FIGURE} at order", data["data_independent"]["epsilon"], "di"
    )
    worst = data["data_independent_worst_case"]["epsilon"]
    if worst != data["data_independent"]["epsilon"]:
        figures.each(rf"worst case \(every query answered\) {FIGURE}", worst, "worst")
    if data["guaranteed"]["epsilon"] is not None and "guaranteed (" in text:
        figures.each(rf"threshold noise\) {FIGURE} at", data["guaranteed"]["epsilon"], "gtd")
    release = data.get("release")
    if release is not None and release["released"]:
        figures.each(
            rf"= {FIGURE} \+/- {FIGURE} at order",
            [release["epsilon_expected_release"], release["noise_std"]],
            "release",
            ("up", "nearest"),  # the noise std bounds nothing
        )
        figures.each(rf"; sampled \([^)]*\): {FIGURE}", release["epsilon_released"], "sampled")
    _orders_table(figures, data)
    return figures


def _breakdown(figures: Figures, data: dict[str, Any]) -> None:
    """``--breakdown``: the most expensive queries and the cost by teacher agreement."""
    ledger = data["breakdown"]
    by_index = {row["index"]: row for row in ledger["most_expensive"]}
    row = rf"^\s*(\d+)\s+\S+\s+\S+\s+{FIGURE}\s+{FIGURE}\s+{FIGURE}\s+[\d.]+%\s+{FIGURE}\s*$"
    count = figures.each(
        row,
        lambda m: [
            by_index[int(m[1])][k] for k in ("logq", "pr_answered", "rdp", "running_epsilon")
        ],
        "most expensive",
        ("up", "nearest", "up", "up"),  # log q bounds q; Pr[answered] bounds nothing
    )
    assert count == len(by_index)
    buckets = {b["label"]: b["rdp"] for b in ledger["by_agreement"]}
    for cell in cells(figures.text, "["):
        figures.add(f"bucket {cell[0]}", cell[3], buckets[cell[0]])
    (total,) = cells(figures.text, "all")
    figures.add("all", total[3], ledger["total_rdp"])
    figures.each(
        rf"total RDP {FIGURE} at order \S+ -> epsilon {FIGURE}",
        [ledger["total_rdp"], ledger["epsilon"]],
        "ledger",
    )


@pytest.mark.parametrize(
    "args",
    [
        ["analyze", MNIST, *TABLE2, "--seed", 0, "--all-orders", "--breakdown"],
        ["analyze", *LNMAX, "--orders", "2:10:1", "--seed", 0, "--all-orders"],
        [
            "analyze",
            MNIST,
            "--sigma",
            40,
            "--queries",
            200,
            "--delta",
            1e-5,
            "--seed",
            0,
            "--all-orders",
        ],
    ],
    ids=["table2-breakdown", "lnmax", "gnmax"],
)
def test_analyze_prints_every_cost_rounded_up(args, monkeypatch):
    text, data, _ = both(args, monkeypatch)
    figures = _analysis(text, data)
    if "breakdown" in data:
        _breakdown(figures, data)
    figures.check()


def test_the_gate_line_and_public_table_round_up(monkeypatch):
    args = ["analyze", MNIST, *TABLE2, "--no-release", "--max-epsilon", 2]
    _, data, stderr = both(args, monkeypatch, expect=1)
    (printed,) = re.findall(rf"publishable epsilon {FIGURE} exceeds", stderr)
    safe_up(printed, data["gate"]["epsilon"], "gate line")
    assert printed == "3.92671"  # 3.926701...: 3.9267 was below it
    text, data, _ = both([*args[:-1], 5, "--public"], monkeypatch)
    figures = Figures(text, [])
    by_basis = {p["basis"]: p["epsilon"] for p in data["publishable"]}
    rows = [row for row in cells(text) if row[0] in by_basis]
    assert len(rows) == len(by_basis)
    for row in rows:
        figures.add(row[0], row[1], by_basis[row[0]])
    figures.each(rf"publishable epsilon {FIGURE} is within", data["gate"]["epsilon"], "gate")
    figures.check()


def test_smooth_sensitivity_rounds_costs_up_and_noise_to_nearest(monkeypatch):
    text, data, _ = both(["smooth-sensitivity", MNIST, *TABLE2, "--seed", 0], monkeypatch)
    figures = Figures(text, [])
    _publishable(figures, data)
    figures.each(
        rf"expected released epsilon {FIGURE} \(private\)", data["epsilon_expected_release"], "head"
    )
    rows = {
        "expected data-dependent epsilon": ("epsilon_data_dependent", "up"),
        "beta": ("beta", "nearest"),
        "smooth sensitivity E[SS_beta]": ("smooth_sensitivity", "up"),
        "sigma_ss": ("sigma_ss", "nearest"),
        "GNSS cost (RDP)": ("gnss_cost", "up"),
        "noise std": ("noise_std", "nearest"),
        "expected released epsilon": ("epsilon_expected_release", "up"),
        "sampled released epsilon": ("epsilon_released", "up"),
    }
    for row in cells(text):
        name = row[0].split(" (")[0] if row[0].startswith("sampled") else row[0]
        if name in rows:
            key, side = rows.pop(name)
            figures.add(name, row[1], data[key], side)
    assert not rows, rows
    figures.each(
        rf"released epsilon = {FIGURE} \+/- {FIGURE} at order \S+ \(expected, private: "
        rf"data-dependent {FIGURE} \+ GNSS cost {FIGURE}\); sampled: {FIGURE}",
        [data[k] for k in ("epsilon_expected_release", "noise_std", "epsilon_data_dependent")]
        + [data["gnss_cost"], data["epsilon_released"]],
        "closing",
        ("up", "nearest", "up", "up", "up"),  # the noise std bounds nothing
    )
    figures.check()


def test_aggregate_rounds_both_costs_up(monkeypatch, tmp_path):
    args = ["aggregate", MNIST, *TABLE2, "--seed", 0, "--output"]
    monkeypatch.setenv("COLUMNS", "400")
    text = run_cli([*args, tmp_path / "text.npy"]).stdout
    data = run_cli([*args, tmp_path / "json.npy", "--json"]).json
    figures = Figures(text, [])
    _publishable(figures, data)
    realised, expected = data["privacy"], data["expected_privacy"]
    dependent = realised["data_dependent"]["epsilon"]
    figures.each(rf"realised data-dependent epsilon {FIGURE} \(private\)", dependent, "head")
    for row, block in zip(
        cells(text, "realised run") + cells(text, "expected"), (realised, expected), strict=True
    ):
        figures.add(f"{row[0]} dd", row[2], block["data_dependent"]["epsilon"])
        figures.add(f"{row[0]} di", row[4], block["data_independent"]["epsilon"])
    (labels,) = cells(text, "640 of")
    figures.add("agreement", labels[4], data["agreement_with_plurality"], "nearest")
    figures.check()


def test_compare_rounds_every_epsilon_column_up(monkeypatch):
    args = ["compare", MNIST, "--threshold", "150,200", "--sigma1", "100,150", "--sigma", 40]
    text, data, _ = both([*args, "--queries", 640, "--delta", 1e-5], monkeypatch)
    figures = Figures(text, [])
    lines = [
        line.split() for line in text.splitlines() if re.match(r"^\s*\d+ (gnmax|confident) ", line)
    ]
    assert len(lines) == len(data["rows"])
    for tokens, row in zip(lines, data["rows"], strict=True):
        _, epsilon, _, independent, _, publishable, agreement = tokens[-7:]
        figures.add("epsilon", epsilon, row["data_dependent"]["epsilon"])
        figures.add("indep.", independent, row["data_independent"]["epsilon"])
        figures.add("publ.", publishable, min(p["epsilon"] for p in row["publishable"]))
        figures.add("agree", agreement, row["agreement"], "nearest")
    figures.check()


@pytest.mark.parametrize(
    "args",
    [["--queries", 640], ["--sigma", 40], ["--queries", 100, "--mechanism", "lnmax"]],
    ids=["sigma", "queries", "gamma"],
)
def test_plan_prints_its_epsilon_rounded_up_and_its_value_as_solved(args, monkeypatch):
    text, data, _ = both(["plan", "--delta", 1e-5, "--epsilon", 2, *args], monkeypatch)
    (printed,) = re.findall(rf"epsilon {FIGURE} <= 2 at delta", text)
    safe_up(printed, data["epsilon"], "plan")
    assert f"{data['solve_for']} = {data['value']!r}" in text  # the value itself, not rounded


def _charge(budget: Path, *args: Any) -> None:
    run_cli(["analyze", *args, "--delta", 1e-5, "--budget", budget, "--quiet"])


def test_budget_show_rounds_spent_up_and_left_down(monkeypatch, tmp_path):
    budget = tmp_path / "team.budget.jsonl"
    run_cli(["budget", "init", budget, "--delta", 1e-5, "--max-epsilon", 100])
    _charge(budget, *LNMAX[:-2], "--no-release")
    _charge(budget, MNIST, "--sigma", 40, "--queries", 100, "--no-release")
    release = ["--orders", 14, "--beta", 0.0329, "--sigma-ss", 6.23]
    _charge(budget, MNIST, *TABLE2[:-2], *release, "--seed-file", tmp_path / "s.seed")
    would = ["--would-charge", "--", "analyze", MNIST, "--sigma", 40, "--queries", 200]
    would += ["--delta", "1e-5", "--no-release"]
    monkeypatch.setenv("COLUMNS", "400")
    text = run_cli(["budget", "show", budget, *would]).stdout
    data = run_cli(["budget", "show", budget, "--json", *would]).json
    figures = Figures(text, [])
    for row, entry in zip(cells(text), data["entries"], strict=True):
        account = entry["account"]  # "Gaussian mu=M", "K x E0-DP" or "RDP at order A: R"
        numbers = re.split(r"=|: | x ", row[5])[-1].removesuffix("-DP").split(", ")
        values = account.get("rdp") or [account.get("mu", account.get("epsilon0"))]
        for printed, value in zip(numbers, values, strict=True):
            figures.add(f"account {row[0]}", printed, value)
    assert {e["account"]["kind"] for e in data["entries"]} == {"gaussian", "pure", "rdp"}
    total, preview = data["total"], data["would_charge"]
    figures.each(rf"spent epsilon {FIGURE} of", total["epsilon"], "spent")
    figures.each(rf"; remaining {FIGURE}", data["remaining"], "remaining", "down")
    groups = iter(total["groups"])
    figures.each(
        rf"group of charges [\d, ]+: epsilon {FIGURE} at delta {FIGURE}",
        lambda m: [(group := next(groups))["epsilon"], group["delta"]],
        "group",
    )
    figures.each(rf"\(analyze, Gaussian mu={FIGURE}\)", preview["account"]["mu"], "preview mu")
    figures.each(rf"would leave epsilon {FIGURE} spent", preview["would_spend"], "would spend")
    figures.each(rf", {FIGURE} left", preview["remaining"], "would leave", "down")
    figures.check()
    stderr = run_cli(["budget", "show", budget, "--max-epsilon", 1], expect=1).stderr
    (printed,) = re.findall(rf"total epsilon {FIGURE} exceeds", stderr)
    safe_up(printed, total["epsilon"], "budget gate")


def test_verify_prints_its_bound_check_rounded_up(monkeypatch):
    record = SAMPLE / "mnist_table2.record.json"
    text, data, _ = both(["verify", record, "--rtol", 1e-9], monkeypatch)
    (check,) = [c for c in data["checks"] if c["name"] == "data-dependent <= data-independent"]
    dependent, independent = check["detail"].split(" <= ")
    assert f"{dependent} <= {independent}" in text
    report = json.loads(record.read_text())["report"]
    safe_up(dependent, report["data_dependent"]["epsilon"], "verify dd")
    safe_up(independent, report["data_independent"]["epsilon"], "verify di")


# ---------------------------------------------------------------------------
# The notebook's views: Markdown and repr.


def _markdown_rows(markdown: str) -> list[list[str]]:
    rows = [[c.strip(" *") for c in line.split("|")[1:-1]] for line in markdown.splitlines()]
    return [row for row in rows if row and not set(row[0]) <= {"-"}]


@pytest.fixture(scope="module")
def table2_votes():
    votes = pate.load_votes(MNIST, queries=640)
    return votes, pate.ConfidentGNMax(threshold=200, sigma1=150, sigma=40)


def _publishable_rows(figures: Figures, data: dict[str, Any]) -> None:
    """The Markdown's "Publishable" table: each figure rounded up."""
    by_basis = {p["basis"]: p["epsilon"] for p in data["publishable"]}
    rows = [row for row in _markdown_rows(figures.text) if row[0] in by_basis]
    assert len(rows) == len(by_basis)
    for row in rows:
        figures.add(row[0], row[1], by_basis[row[0]])


def test_markdown_analysis_and_repr_round_costs_up(table2_votes):
    votes, table2 = table2_votes
    report = pate.analyze(votes, table2, delta=1e-5, release="sample", seed=0)
    data = report.to_json_dict()
    release = data["release"]
    by_name = {
        "data-dependent (private)": data["data_dependent"]["epsilon"],
        "data-independent (private)": data["data_independent"]["epsilon"],
        "worst case (every query answered)": data["data_independent_worst_case"]["epsilon"],
        "GNSS-released, expected (private)": release["epsilon_expected_release"],
        "GNSS-released, sampled (public seed 0, not private)": release["epsilon_released"],
    }
    figures = Figures(report._repr_markdown_(), [])
    figures.each(r"^### pate analyze: epsilon " + FIGURE, data["publishable"][0]["epsilon"], "h")
    for row in _markdown_rows(figures.text):
        if row[0] in by_name:
            figures.add(row[0], row[1], by_name.pop(row[0]))
    assert not by_name, by_name
    _publishable_rows(figures, data)
    figures.check()
    assert "data_dependent=1.999 at order 14" in repr(report)  # 1.99882: up at 4 digits
    assert "publishable=data-independent-exact 3.927" in repr(report)


def test_markdown_smooth_sensitivity_rounds_costs_up_and_noise_to_nearest(table2_votes):
    votes, table2 = table2_votes
    smooth = pate.smooth_sensitivity(votes, table2, delta=1e-5, beta=0.0329, sigma_ss=6.23, seed=0)
    data = smooth.to_json_dict()
    keys = {
        "data-dependent epsilon (private)": ("epsilon_data_dependent", "up"),
        "beta": ("beta", "nearest"),
        "smooth sensitivity": ("smooth_sensitivity", "up"),
        "sigma_ss": ("sigma_ss", "nearest"),
        "GNSS cost (RDP)": ("gnss_cost", "up"),
        "expected released epsilon (private)": ("epsilon_expected_release", "up"),
        "noise std": ("noise_std", "nearest"),
        "sampled released epsilon (public seed 0, not private)": ("epsilon_released", "up"),
    }
    figures = Figures(smooth._repr_markdown_(), [])
    for row in _markdown_rows(figures.text):
        if row[0] in keys:
            key, side = keys.pop(row[0])
            figures.add(row[0], row[1], data[key], side)
    assert not keys, keys
    _publishable_rows(figures, data)
    figures.check()


def test_markdown_aggregate_rounds_costs_up(table2_votes):
    votes, table2 = table2_votes
    run = pate.aggregate(votes, table2, delta=1e-5, seed=0).to_report()
    data = run.to_json_dict()
    figures = Figures(run._repr_markdown_(), [])
    blocks = {"realised run": data["privacy"], "expected": data["expected_privacy"]}
    for row in _markdown_rows(figures.text):
        if row[0] in blocks:
            figures.add(row[0], row[2], blocks.pop(row[0])["data_dependent"]["epsilon"])
    assert not blocks, blocks
    _publishable_rows(figures, data)
    figures.check()


def test_markdown_compare_rounds_costs_up_and_agreement_to_nearest(table2_votes):
    votes, table2 = table2_votes
    report = pate.compare(votes, [pate.GNMax(40), table2], delta=1e-5)
    figures = Figures(report._repr_markdown_(), [])
    rows = _markdown_rows(figures.text)[1:]  # after the header
    for row, block in zip(rows, report.to_json_dict()["rows"], strict=True):
        figures.add("publishable", row[3], min(p["epsilon"] for p in block["publishable"]))
        figures.add("epsilon", row[4], block["data_dependent"]["epsilon"])
        figures.add("indep.", row[5], block["data_independent"]["epsilon"])
        figures.add("agree", row[6], block["agreement"], "nearest")
    figures.check()

"""Reports a notebook can hold: ``to_dict()`` is JSON-native and ``json.dumps`` of it is
byte for byte what ``--json`` prints; ``repr`` is one short line; counts print as counts.

Every command runs twice, through the CLI (``run_cli``) and through the library
(``import pate_cli as pate``, public names only), with ``--seed`` so the sampled numbers
match; the library call runs inside ``spelling.command_line()``, so its warnings name flags
as the CLI's do (called plainly, they name keywords and nothing else differs). The one check
that differs by design: ``pate verify`` re-parses the recorded command line and the library
does not, so the library's check is not made ("not-checked") and its verdict is
"incomplete" where the CLI's is "verified"; everything else is compared.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import pate_cli as pate
from pate_cli.common import spelling
from tests.conftest import MNIST, SAMPLE, run_cli

VOTES = str(MNIST)
STUDENT = str(SAMPLE / "mnist_student_probs.npy")
RECORD = str(SAMPLE / "mnist_table2.record.json")
DELTA = ["--queries", 640, "--delta", 1e-5]
TABLE2 = pate.ConfidentGNMax(threshold=200, sigma1=150, sigma=40)
TABLE2_FLAGS = ["--threshold", 200, "--sigma1", 150, "--sigma", 40]
INTERACTIVE = pate.InteractiveGNMax(threshold=200, sigma1=150, sigma=40)


def _votes() -> pate.Votes:
    return pate.load_votes(VOTES, queries=640)


ANALYZE = {
    "gnmax": (pate.GNMax(40), ["--sigma", 40], {}),
    "confident-gnmax": (TABLE2, TABLE2_FLAGS, {}),
    "interactive-gnmax": (
        INTERACTIVE,
        [*TABLE2_FLAGS, "--baseline", STUDENT],
        {"baseline": STUDENT},
    ),
    "lnmax": (pate.LNMax(0.1), ["--gamma", 0.1], {}),
}


def _analyze(name: str) -> tuple[list[Any], Callable[[], Any]]:
    mechanism, flags, extra = ANALYZE[name]
    args = ["analyze", VOTES, *flags, *DELTA, "--seed", 3]
    return args, lambda: pate.analyze(
        _votes(), mechanism, delta=1e-5, release="sample", seed=3, **extra
    )


def _smooth() -> tuple[list[Any], Callable[[], Any]]:
    flags = [*TABLE2_FLAGS, "--beta", 0.03, "--sigma-ss", 6]
    args = ["smooth-sensitivity", VOTES, *flags, *DELTA, "--seed", 5]
    return args, lambda: pate.smooth_sensitivity(
        _votes(), TABLE2, delta=1e-5, seed=5, beta=0.03, sigma_ss=6.0
    )


def _compare() -> tuple[list[Any], Callable[[], Any]]:
    flags = ["--threshold", "150,200", "--sigma1", 150, "--sigma", 40]
    # The CLI adds plain GNMax at the same sigma as a baseline row.
    mechanisms = [pate.ConfidentGNMax(150, 150, 40), TABLE2, pate.GNMax(40)]
    return ["compare", VOTES, *flags, *DELTA], lambda: pate.compare(
        _votes(), mechanisms, delta=1e-5
    )


def _inspect() -> tuple[list[Any], Callable[[], Any]]:
    return ["inspect", VOTES, "--queries", 640], lambda: pate.inspect(_votes())


def _plan() -> tuple[list[Any], Callable[[], Any]]:
    args = ["plan", "--delta", 1e-5, "--epsilon", 2, "--queries", 640]
    return args, lambda: pate.plan(delta=1e-5, epsilon=2, queries=640)


def _aggregate(output: Path) -> tuple[list[Any], Callable[[], Any]]:
    args = ["aggregate", VOTES, *TABLE2_FLAGS, *DELTA, "--seed", 7, "--output", output]
    return args, lambda: pate.aggregate(_votes(), TABLE2, delta=1e-5, seed=7)


# (name, its CLI arguments and library call, whether it has --public)
CASES: list[tuple[str, Callable[[Path], tuple[list[Any], Callable[[], Any]]], bool]] = [
    *((f"analyze-{name}", lambda _, n=name: _analyze(n), True) for name in ANALYZE),
    ("smooth-sensitivity", lambda _: _smooth(), True),
    ("compare", lambda _: _compare(), False),
    ("inspect", lambda _: _inspect(), False),
    ("plan", lambda _: _plan(), False),
    ("aggregate", lambda tmp: _aggregate(tmp / "labels.npy"), True),
]


def _to_dict(report: Any, output: Path, public: bool = False) -> dict[str, Any]:
    """The library's ``to_dict``; an aggregation names the labels file the CLI wrote."""
    if isinstance(report, pate.AggregateResult):
        if public:
            return report.to_report(output=str(output)).to_dict(public=True)
        return report.to_dict(output=str(output))
    return report.to_dict(public=True) if public else report.to_dict()


def _assert_native(value: Any) -> None:
    """Only dict, list, str, int, float, bool and None, all the way down."""
    if isinstance(value, dict):
        assert all(isinstance(key, str) for key in value)
        for item in value.values():
            _assert_native(item)
    elif isinstance(value, list):
        for item in value:
            _assert_native(item)
    else:
        assert value is None or type(value) in (str, int, float, bool), type(value)


RUNS = [
    pytest.param(case, public, id=f"{name}{'-public' if public else ''}")
    for name, case, has_public in CASES
    for public in ((False, True) if has_public else (False,))
]


@pytest.mark.parametrize(("case", "public"), RUNS)
def test_json_dumps_of_to_dict_is_the_cli_stdout(tmp_path, case, public):
    args, call = case(tmp_path)
    stdout = run_cli([*args, *(["--public"] if public else []), "--json"]).stdout
    with spelling.command_line():
        report = call()
    payload = _to_dict(report, tmp_path / "labels.npy", public)
    _assert_native(payload)
    assert json.dumps(payload) + "\n" == stdout
    # From Python the same call gives the same report; only its warnings name keywords
    # (seed=3, not --seed 3). A public report carries no warnings.
    python = _to_dict(call(), tmp_path / "labels.npy", public)
    assert _but_warnings(python) == _but_warnings(payload)
    flags, keywords = payload.get("warnings", []), python.get("warnings", [])
    assert len(keywords) == len(flags)
    assert not any("--" in warning for warning in keywords)
    seed_notes = [warning for warning in flags if warning.startswith("--seed ")]
    assert len([warning for warning in keywords if warning.startswith("seed=")]) == len(seed_notes)
    assert seed_notes or public or args[0] in ("compare", "inspect", "plan")


def _but_warnings(payload: dict[str, Any]) -> dict[str, Any]:
    return {key: value for key, value in payload.items() if key != "warnings"}


def test_verify_to_dict_is_the_cli_stdout_but_the_command_line_check():
    stdout = run_cli(["verify", RECORD, "--json"]).stdout
    payload = pate.verify(RECORD).to_dict()
    _assert_native(payload)
    cli = json.loads(stdout)
    # The library reads no command line; pate verify re-parses the recorded one.
    line = [check["name"] for check in cli["checks"]].index("command line")
    assert cli["checks"][line]["status"] == "verified"
    assert payload["checks"][line]["name"] == "command line"
    assert payload["checks"][line]["status"] == "not-checked"
    assert payload["checks"][line]["detail"].startswith("the library reads no command line")
    # So the library's verdict is incomplete where the CLI's holds (the record drew no sample).
    assert (cli["verdict"], cli["ok"], cli["not_checked"]) == ("verified", True, [])
    assert (payload["verdict"], payload["ok"]) == ("incomplete", False)
    assert payload["not_checked"] == ["command line"] and payload["differs"] == []
    payload["checks"][line] = cli["checks"][line]
    for key in ("verdict", "summary", "ok", "not_checked"):
        payload[key] = cli[key]
    assert json.dumps(payload) + "\n" == stdout


def test_infinities_are_the_strings_the_cli_writes():
    """A data-independent bound that is infinite at some order: "inf", never Infinity."""
    payload = pate.analyze(_votes(), TABLE2, delta=1e-5, release=False).to_dict()
    text = json.dumps(payload)
    assert "Infinity" not in text and "NaN" not in text
    assert isinstance(payload["orders"], list) and isinstance(payload["orders"][0], float)


def _reports(tmp_path: Path) -> list[Any]:
    reports = [case(tmp_path)[1]() for _, case, _ in CASES]
    aggregate = reports[-1]
    return [
        *reports,
        aggregate.to_report(output="labels.npy"),
        pate.verify(RECORD),
        _votes(),
    ]


def test_every_repr_is_one_short_line(tmp_path):
    for report in _reports(tmp_path):
        text = repr(report)
        assert len(text) < 300 and "\n" not in text, text
        assert text.startswith(type(report).__name__ + "("), text


def test_the_repr_names_the_headline_figures():
    text = repr(pate.analyze(_votes(), TABLE2, delta=1e-5, release=False))
    assert text.startswith("AnalysisReport(mechanism=confident-gnmax, queries=640, ")
    assert "publishable=data-independent-exact 3.927" in text
    assert "data_dependent=1.999 at order 14" in text


def test_a_realised_count_prints_as_a_whole_number(tmp_path):
    """The realised run answered a whole number of queries; the expectation keeps a decimal."""
    result = pate.aggregate(_votes(), TABLE2, delta=1e-5, seed=7)
    answered = int(np.count_nonzero(result.answered))
    mask = tmp_path / "answered.npy"
    np.save(mask, result.answered)
    realised = pate.analyze(_votes(), TABLE2, delta=1e-5, answered=mask, release=False)
    text = realised._repr_markdown_()
    assert f"; answered {answered} of 640" in text and f"{answered}.0" not in text
    aggregate = result._repr_markdown_()
    assert f"| realised run | {answered} |" in aggregate
    expected = pate.analyze(_votes(), TABLE2, delta=1e-5, release=False)._repr_markdown_()
    assert "expected answered 282.7 of 640" in expected
    flags = [*TABLE2_FLAGS, "--beta", 0.03, "--sigma-ss", 6, *DELTA, "--answered", mask]
    table = run_cli(["smooth-sensitivity", VOTES, *flags, "--seed", 5]).stdout
    assert re.search(rf"│ answered +│ +{answered} │", table), table


@pytest.mark.parametrize(
    ("seed", "label"), [(5, "public seed 5, not private"), (None, "private noise from OS entropy")]
)
def test_the_markdown_labels_the_sampled_release_as_the_cli_does(seed, label):
    report = pate.smooth_sensitivity(
        _votes(), TABLE2, delta=1e-5, seed=seed, beta=0.03, sigma_ss=6.0
    )
    assert f"| sampled released epsilon ({label}) |" in report._repr_markdown_()
    analysis = pate.analyze(_votes(), TABLE2, delta=1e-5, release="sample", seed=seed)
    assert f"| GNSS-released, sampled ({label}) |" in analysis._repr_markdown_()
    flags = [*TABLE2_FLAGS, "--beta", 0.03, "--sigma-ss", 6, *DELTA]
    cli = run_cli(["smooth-sensitivity", VOTES, *flags, *(["--seed", seed] if seed else [])])
    assert f"sampled released epsilon ({label})" in " ".join(cli.stdout.split())


def test_a_long_repr_is_cut_to_one_line():
    from pate_cli.reports.reprs import MAX_REPR, short_repr

    text = short_repr("Report", note="a\nb " * 200, value=float("inf"), missing=None)
    assert len(text) == MAX_REPR and text.endswith("...)") and "\n" not in text
    assert short_repr("Report", value=float("inf"), missing=None) == "Report(value=inf)"

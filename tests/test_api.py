"""The Python API (``import pate_cli as pate``) against its contract and against the CLI."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import pate_cli as pate
from pate_cli.common import spelling
from pate_cli.reports.models import dumps
from tests.conftest import MNIST, MNIST_LABELS, REFERENCE, ROOT, run_cli

MNIST_PATH = str(MNIST)
LABELS_PATH = str(MNIST_LABELS)

TABLE2 = pate.ConfidentGNMax(threshold=200, sigma1=150, sigma=40)


def as_json(report_dict: dict) -> dict:
    """What the CLI would print for this dictionary (infinities as strings, numpy as lists)."""
    return json.loads(dumps(report_dict))


def test_table2_through_the_api():
    votes = pate.load_votes(MNIST, queries=640)
    report = pate.analyze(votes, TABLE2, delta=1e-5, release=False)
    assert report.expected_answered == pytest.approx(282.72, abs=0.005)
    assert report.data_dependent.epsilon == pytest.approx(1.99882, abs=5e-6)
    assert report.data_dependent.order == 14.0
    assert report.orders is not None and len(report.orders) == len(pate.DEFAULT_ORDERS)


BASELINE = REFERENCE / "interactive_glyph_like_baseline.npy"
GLYPH = REFERENCE / "interactive_glyph_like.npy"
CASES = [
    pytest.param(MNIST, pate.GNMax(40), ["--sigma", 40], {}, id="gnmax"),
    pytest.param(
        MNIST, TABLE2, ["--threshold", 200, "--sigma1", 150, "--sigma", 40], {}, id="confident"
    ),
    pytest.param(
        GLYPH,
        pate.InteractiveGNMax(threshold=3500, sigma1=1500, sigma=100),
        ["--threshold", 3500, "--sigma1", 1500, "--sigma", 100, "--baseline", BASELINE],
        {"baseline": BASELINE},
        id="interactive",
    ),
    pytest.param(MNIST, pate.LNMax(0.1), ["--gamma", 0.1], {}, id="lnmax"),
]


@pytest.mark.parametrize(("path", "mechanism", "flags", "extra"), CASES)
def test_analyze_to_dict_is_the_cli_json(path, mechanism, flags, extra):
    votes = pate.load_votes(path, queries=300)
    with spelling.command_line():
        report = pate.analyze(votes, mechanism, delta=1e-5, release="sample", seed=3, **extra)
    cli = run_cli(
        ["analyze", path, *flags, "--queries", 300, "--delta", 1e-5, "--seed", 3, "--json"]
    )
    assert as_json(report.to_dict()) == cli.json
    # From Python the same call gives the same report; only its warnings name keywords.
    python = as_json(
        pate.analyze(votes, mechanism, delta=1e-5, release="sample", seed=3, **extra).to_dict()
    )
    assert {k: v for k, v in python.items() if k != "warnings"} == {
        k: v for k, v in cli.json.items() if k != "warnings"
    }
    assert len(python["warnings"]) == len(cli.json["warnings"])
    assert not any("--" in warning for warning in python["warnings"])
    assert any(warning.startswith("seed=3: ") for warning in python["warnings"])
    assert any(w.startswith("--seed 3: ") for w in cli.json["warnings"])
    assert any("(fix them with beta=... and sigma_ss=...)" in w for w in python["warnings"])
    assert any("(fix them with --beta and --sigma-ss)" in w for w in cli.json["warnings"])


def test_smooth_sensitivity_to_dict_is_the_cli_json():
    with spelling.command_line():
        report = pate.smooth_sensitivity(MNIST, TABLE2, delta=1e-5, seed=5, beta=0.03, sigma_ss=6.0)
    flags = ["--threshold", 200, "--sigma1", 150, "--sigma", 40, "--beta", 0.03, "--sigma-ss", 6]
    cli = run_cli(["smooth-sensitivity", MNIST, *flags, "--delta", 1e-5, "--seed", 5, "--json"])
    assert as_json(report.to_dict()) == cli.json
    assert report.to_dict()["smooth_sensitivity"] > 0


def test_compare_to_dict_is_the_cli_json():
    votes = pate.load_votes(MNIST, queries=640)
    mechanisms = [pate.GNMax(40), pate.ConfidentGNMax(150, 100, 40), TABLE2]
    report = pate.compare(votes, mechanisms, delta=1e-5)
    cli = run_cli(
        [
            "compare",
            MNIST,
            "--threshold",
            "150,200",
            "--sigma1",
            "100,150",
            "--sigma",
            40,
            "--queries",
            640,
            "--delta",
            1e-5,
            "--json",
        ]
    )
    ours = as_json(report.to_dict())
    # The CLI's grid has every (T, sigma1) pair; the API compares exactly the list given.
    by_mechanism = {json.dumps(row["mechanism"], sort_keys=True): row for row in cli.json["rows"]}
    for row in ours["rows"]:
        assert row == by_mechanism[json.dumps(row["mechanism"], sort_keys=True)]
    assert {k: v for k, v in ours.items() if k != "rows"} == {
        k: v for k, v in cli.json.items() if k != "rows"
    }


def test_errors_are_value_errors_that_name_the_parameter(tmp_path: Path):
    with pytest.raises(ValueError, match=r"^sigma=-1\.0: expected a finite number greater than 0$"):
        pate.GNMax(sigma=-1)
    with pytest.raises(pate.UsageError, match="strictly between 0 and 1"):
        pate.analyze(MNIST, pate.GNMax(40), delta=2)
    missing = tmp_path / "missing.npy"
    with pytest.raises(pate.InputError) as error:
        pate.load_votes(missing)
    assert isinstance(error.value, ValueError)
    cli = run_cli(["analyze", missing, "--sigma", 40, "--delta", 1e-5], expect=2)
    assert cli.stderr.strip() == f"pate: error: {error.value}"


def test_public_names_resolve_and_are_listed():
    assert set(pate.__all__) == {"__version__", *pate._WHERE}
    for name in pate.__all__:
        assert getattr(pate, name) is not None
    assert sorted(dir(pate)) == sorted(pate.__all__)
    with pytest.raises(AttributeError):
        pate.no_such_name  # noqa: B018
    assert not pate.DEFAULT_ORDERS.flags.writeable


def test_the_library_imports_no_cli_or_plotting_package():
    code = f"""
import sys
import pate_cli as pate
votes = pate.load_votes({str(MNIST)!r}, queries=200)
pate.analyze(votes, pate.ConfidentGNMax(200, 150, 40), delta=1e-5, release="sample", seed=0)
pate.smooth_sensitivity(votes, pate.GNMax(40), delta=1e-5, seed=0)
pate.compare(votes, [pate.GNMax(40), pate.LNMax(0.1)], delta=1e-5)
pate.inspect(votes)
pate.aggregate(votes, pate.GNMax(40), delta=1e-5, seed=0)
# The library cannot re-parse the command line: incomplete at best, but nothing differs.
assert pate.verify({str(ROOT / "sample_data" / "mnist_table2.record.json")!r}).verdict != "differs"
print(sorted(m for m in ("typer", "rich", "click", "matplotlib") if m in sys.modules))
"""
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=ROOT
    )
    assert out.stdout.strip() == "[]"


def test_importing_the_package_is_light():
    code = "import sys, pate_cli; print('numpy' in sys.modules, 'scipy' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.split() == ["False", "False"]


def test_no_module_imports_the_cli_entry_point():
    # The CLI sits on the library, never the other way; only __main__ starts it.
    for path in (ROOT / "pate_cli").rglob("*.py"):
        if path.relative_to(ROOT / "pate_cli").parts[0] in ("cli", "__main__.py"):
            continue
        text = path.read_text()
        assert "pate_cli.cli" not in text and "from pate_cli import cli" not in text, path


def test_library_calls_write_nothing(tmp_path: Path, monkeypatch):
    votes = tmp_path / "votes.npy"
    np.save(votes, np.load(MNIST)[:100])
    monkeypatch.chdir(tmp_path)
    before = sorted(p.name for p in tmp_path.iterdir())
    pate.analyze(votes, TABLE2, delta=1e-5, release="sample", seed=0)
    pate.compare(votes, [TABLE2], delta=1e-5)
    assert sorted(p.name for p in tmp_path.iterdir()) == before


@pytest.mark.parametrize(
    ("call", "message"),
    [
        (lambda: pate.load_votes(MNIST, fmt="csv"), "fmt='csv': expected one of auto, counts"),
        (
            lambda: pate.analyze(MNIST, TABLE2, delta=1e-5, conversion="tight"),
            "conversion='tight': expected one of classic, improved",
        ),
        (
            lambda: pate.analyze(MNIST, TABLE2, delta=1e-5, orders=[2.0, 1.0]),
            "orders: every Renyi order must be finite and greater than 1",
        ),
        (
            lambda: pate.analyze(MNIST, TABLE2, delta=1e-5, orders=[]),
            "orders: the list of orders is empty",
        ),
        (
            lambda: pate.compare(MNIST, [TABLE2], delta=1e-5, sort="best"),
            "sort='best': expected one of publishable, epsilon, data-independent, answered",
        ),
        (lambda: pate.compare(MNIST, [], delta=1e-5), "expected at least one mechanism"),
        (
            lambda: pate.smooth_sensitivity(
                MNIST, pate.LNMax(0.1), delta=1e-5, reference_local_sensitivity=True
            ),
            "reference_local_sensitivity=True reproduces the 2018 reference's GNMax bounds",
        ),
        (lambda: pate.GNMax(sigma="forty"), "sigma='forty': expected a number"),
    ],
)
def test_bad_arguments_are_usage_errors(call, message):
    with pytest.raises(pate.UsageError, match=message.replace("(", r"\(")):
        call()


def test_a_mechanism_block_round_trips_and_unknown_ones_are_refused():
    from pate_cli.mechanisms import mechanism_from_dict

    for mechanism in (pate.GNMax(40), TABLE2, pate.InteractiveGNMax(1, 2, 3), pate.LNMax(0.1)):
        assert mechanism_from_dict(mechanism.to_json_dict()) == mechanism
    with pytest.raises(pate.UsageError, match="unknown name"):
        mechanism_from_dict({"name": "rm", "sigma": 1.0})
    with pytest.raises(pate.UsageError, match="parameters that do not fit"):
        mechanism_from_dict({"name": "gnmax", "gamma": 1.0})


def test_verify_to_dict_is_the_cli_json():
    record = ROOT / "sample_data" / "mnist_table2.record.json"
    report = pate.verify(record)
    # The library reads no command line; pate verify re-parses it: that one check is not
    # made by the library, so its verdict is incomplete where the CLI's is verified.
    assert report.verdict == "incomplete" and not report.ok
    assert report.not_checked == ("command line",) and report.differing == ()
    cli = run_cli(["verify", record, "--json"]).json
    assert cli["verdict"] == "verified" and cli["ok"] is True
    names = [check["name"] for check in cli["checks"]]
    line = names.index("command line")
    assert cli["checks"][line]["status"] == "verified"
    ours = as_json(report.to_dict())
    assert ours["checks"][line]["name"] == "command line"
    assert ours["checks"][line]["status"] == "not-checked"
    del ours["checks"][line], cli["checks"][line]
    for key in ("verdict", "summary", "ok", "not_checked"):
        del ours[key], cli[key]
    assert ours == cli
    with pytest.raises(pate.UsageError, match="was not made with a seed file"):
        pate.verify(record, seed_file="seed")
    with pytest.raises(pate.UsageError, match=r"^rtol=2: expected a number in \[0, 1\)$"):
        pate.verify(record, rtol=2)


def test_reports_render_in_a_notebook_without_a_terminal_library():
    """Every report has _repr_markdown_ (Jupyter), made without importing rich or typer."""
    script = f"""
import sys
import pate_cli as pate
votes = pate.load_votes({str(MNIST)!r}, queries=200)
table2 = pate.ConfidentGNMax(200, 150, 40)
reports = [
    pate.analyze(votes, table2, delta=1e-5, release="sample", seed=0),
    pate.smooth_sensitivity(votes, pate.GNMax(40), delta=1e-5, seed=0),
    pate.aggregate(votes, table2, delta=1e-5, seed=0),
    pate.compare(votes, [pate.GNMax(40), table2], delta=1e-5),
    pate.inspect(votes),
    pate.verify({str(ROOT / "sample_data" / "mnist_table2.record.json")!r}),
]
texts = [report._repr_markdown_() for report in reports]
assert all(text.startswith("### pate ") and "| " in text for text in texts)
worst = reports[0].publishable[0].epsilon
assert f"**{{worst:.4f}}**" in texts[0] and "data-dependent (private)" in texts[0]
print(sorted(m for m in ("typer", "rich", "click", "matplotlib") if m in sys.modules))
"""
    out = subprocess.run(
        [sys.executable, "-c", script], check=True, capture_output=True, text=True, cwd=ROOT
    ).stdout
    assert out.strip() == "[]"


@pytest.mark.parametrize("function", ["analyze", "smooth_sensitivity", "aggregate", "compare"])
def test_a_mechanism_given_by_name_is_a_type_error_naming_the_classes(function):
    mechanism = "gnmax" if function != "compare" else ["gnmax"]
    with pytest.raises(TypeError, match=r"pate\.GNMax\(sigma\).*pate\.LNMax\(gamma\)"):
        getattr(pate, function)(MNIST_PATH, mechanism, delta=1e-5)


@pytest.mark.parametrize("function", ["analyze", "smooth_sensitivity", "aggregate", "compare"])
def test_every_entry_point_reads_an_array_as_load_votes_does(function):
    labels = np.load(LABELS_PATH, allow_pickle=False)[:, :200]
    mechanism = pate.ConfidentGNMax(200, 150, 40)
    given = [mechanism] if function == "compare" else mechanism
    options = {"release": False} if function == "analyze" else {}
    read = getattr(pate, function)(
        labels, given, delta=1e-5, format="labels", teachers=250, **options
    )
    expected = pate.load_votes(labels, format="labels", teachers=250)
    assert read.to_dict()["input"]["sha256"] == pate.inspect(expected).to_dict()["input"]["sha256"]
    with pytest.raises(pate.UsageError, match="format=: the votes are already read"):
        getattr(pate, function)(expected, given, delta=1e-5, format="labels", **options)

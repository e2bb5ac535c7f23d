"""Each command's table at 80 and 120 columns, against a stored snapshot.

A change to a table shows up here as a diff to look at. When it is meant, write the new
snapshots with ``PATE_UPDATE_SNAPSHOTS=1 python -m pytest tests/test_snapshots.py`` and
commit them with the change; they are never rewritten otherwise. Every snapshot is also
checked to fit its width and to cut no number (Rich marks a cut cell with an ellipsis).
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from tests.conftest import ROOT, run_cli

SNAPSHOTS = Path(__file__).parent / "snapshots"
VOTES = "sample_data/mnist_250_teachers.npy"
TABLE2 = ["--threshold", "200", "--sigma1", "150", "--sigma", "40", "--queries", "640"]
DELTA = ["--delta", "1e-5"]
CASES = {
    "analyze": ["analyze", VOTES, *TABLE2, *DELTA, "--seed", "0"],
    "analyze-lnmax": [
        "analyze",
        "sample_data/mnist_250_teachers_labels.npy",
        "--teachers",  # 250 x 9000 labels read both ways: 250 teachers picks the layout
        "250",
        "--indices",
        "sample_data/mnist_250_teachers_100_indices_used_by_student.npy",
        "--gamma",
        "0.1",
        *DELTA,
        "--orders",
        "2:10:1",
        "--seed",
        "0",
    ],
    "analyze-breakdown": ["analyze", VOTES, *TABLE2, *DELTA, "--no-release", "--breakdown"],
    "analyze-public": ["analyze", VOTES, *TABLE2, *DELTA, "--seed", "0", "--public"],
    "smooth-sensitivity": ["smooth-sensitivity", VOTES, *TABLE2, *DELTA, "--seed", "0"],
    "aggregate": ["aggregate", VOTES, *TABLE2, *DELTA, "--seed", "0", "--output", "{tmp}/l.npy"],
    "compare": [
        "compare",
        VOTES,
        "--threshold",
        "150,200",
        "--sigma1",
        "100,150",
        "--sigma",
        "40",
        "--queries",
        "640",
        *DELTA,
        "--max-epsilon",
        "3.9",
    ],
    "inspect": ["inspect", VOTES, "--queries", "640"],
    "verify": ["verify", "sample_data/mnist_table2.record.json", "--rtol", "1e-9"],
}


@pytest.mark.parametrize("width", [80, 120])
@pytest.mark.parametrize("name", sorted(CASES))
def test_table_snapshot(name, width, monkeypatch, tmp_path):
    monkeypatch.chdir(ROOT)
    monkeypatch.setenv("COLUMNS", str(width))
    for variable in ("NO_COLOR", "FORCE_COLOR"):
        monkeypatch.delenv(variable, raising=False)
    args = [a.replace("{tmp}", str(tmp_path)) for a in CASES[name]]
    text = run_cli(args).stdout.replace(str(tmp_path), "<tmp>")
    too_wide = [line for line in text.splitlines() if len(line) > width]
    assert not too_wide, too_wide
    assert "\N{HORIZONTAL ELLIPSIS}" not in text, "a cell was cut"
    path = SNAPSHOTS / f"{name}-{width}.txt"
    if os.environ.get("PATE_UPDATE_SNAPSHOTS"):
        path.write_text(text)
        return
    assert path.exists(), f"no snapshot {path.name}: write it with PATE_UPDATE_SNAPSHOTS=1"
    expected = path.read_text()
    assert text == expected, (
        f"the {name} table at {width} columns changed; if that is meant, run "
        "PATE_UPDATE_SNAPSHOTS=1 python -m pytest tests/test_snapshots.py and commit the files"
    )

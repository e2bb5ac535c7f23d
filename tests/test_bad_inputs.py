"""A corpus of malformed inputs: each is exit 2 with one line naming the file, never a traceback.

The corpus is generated into tmp_path by small writer functions (no committed binaries). Each
entry returns the CLI arguments and the path the error line must name.
"""

from __future__ import annotations

import io
import os
import zipfile
from pathlib import Path

import numpy as np
import pytest

from pate_cli.errors import ExitCode
from tests.conftest import run_cli

GOOD = np.array([[8, 2, 0], [5, 5, 0], [10, 0, 0], [1, 3, 6]], dtype=np.int64)  # M = 10


def _save(path: Path, array) -> Path:
    np.save(path, array, allow_pickle=True)
    return path


def _raw(path: Path, data: bytes) -> Path:
    path.write_bytes(data)
    return path


def _npy_bytes(array) -> bytes:
    buffer = io.BytesIO()
    np.save(buffer, array)
    return buffer.getvalue()


def _npz(path: Path, **arrays) -> Path:
    np.savez(path, **arrays)
    return path


class Payload:
    """Unpickling this would create a marker file."""

    def __init__(self, marker: str) -> None:
        self.marker = marker

    def __reduce__(self):
        return (open, (self.marker, "w"))


def _votes(writer):
    """An entry whose votes file is bad: analyze it with plain GNMax."""

    def entry(tmp: Path):
        path = writer(tmp)
        return ["analyze", path, "--sigma", 40, "--delta", 1e-5, "--json"], path

    return entry


def _good(tmp: Path) -> Path:
    return _save(tmp / "votes.npy", GOOD)


def _with(flag: str, writer, extra=()):
    """An entry whose side file (indices, baseline, mask) is bad."""

    def entry(tmp: Path):
        side = writer(tmp)
        args = ["analyze", _good(tmp), "--delta", 1e-5, "--json", flag, side, *extra]
        if flag == "--baseline":
            args += ["--threshold", 5, "--sigma1", 2, "--sigma", 4]
        elif flag == "--answered":
            args += ["--threshold", 5, "--sigma1", 2, "--sigma", 4]
        else:
            args += ["--sigma", 40]
        return args, side

    return entry


def _fifo(tmp: Path) -> Path:
    path = tmp / "fifo.npy"
    os.mkfifo(path)
    return path


CORPUS = {
    "missing file": _votes(lambda t: t / "absent.npy"),
    "directory": _votes(lambda t: (t / "dir.npy").mkdir() or t / "dir.npy"),
    "empty file": _votes(lambda t: _raw(t / "v.npy", b"")),
    "text file": _votes(lambda t: _raw(t / "v.npy", b"1,2,3\n4,5,6\n")),
    "random bytes": _votes(lambda t: _raw(t / "v.npy", np.random.default_rng(0).bytes(512))),
    "truncated npy": _votes(lambda t: _raw(t / "v.npy", _npy_bytes(GOOD)[:-8])),
    "truncated header": _votes(lambda t: _raw(t / "v.npy", _npy_bytes(GOOD)[:20])),
    "huge shape header": _votes(
        lambda t: _raw(t / "v.npy", _npy_bytes(GOOD).replace(b"(4, 3)", b"(4000000000000, 3)", 1))
    ),
    "pickled object array": _votes(
        lambda t: _save(t / "v.npy", np.array([Payload(str(t / "pwned")), 1], dtype=object))
    ),
    "object dtype npz": _votes(
        lambda t: _raw(t / "v.npz", _zip_member(np.array([{"a": 1}], dtype=object)))
    ),
    "npz with no array": _votes(lambda t: _npz(t / "v.npz")),
    "npz with two arrays": _votes(lambda t: _npz(t / "v.npz", a=GOOD, b=GOOD)),
    "zip that is not npz": _votes(lambda t: _raw(t / "v.npz", _zip_text())),
    "structured dtype": _votes(
        lambda t: _save(t / "v.npy", np.zeros(4, dtype=[("a", "i4"), ("b", "f8")]))
    ),
    "complex counts": _votes(lambda t: _save(t / "v.npy", GOOD.astype(np.complex128))),
    "string array": _votes(lambda t: _save(t / "v.npy", np.array([["a", "b"], ["c", "d"]]))),
    "bool votes": _votes(lambda t: _save(t / "v.npy", GOOD > 3)),
    "0-d array": _votes(lambda t: _save(t / "v.npy", np.array(5.0))),
    "1-d array": _votes(lambda t: _save(t / "v.npy", np.array([1.0, 2.0]))),
    "4-d array": _votes(lambda t: _save(t / "v.npy", np.zeros((2, 2, 2, 2)))),
    "zero queries": _votes(lambda t: _save(t / "v.npy", np.zeros((0, 3)))),
    "zero classes": _votes(lambda t: _save(t / "v.npy", np.zeros((4, 0)))),
    "NaN count": _votes(
        lambda t: _save(t / "v.npy", np.where(GOOD == 8, np.nan, GOOD.astype(float)))
    ),
    "inf count": _votes(
        lambda t: _save(t / "v.npy", np.where(GOOD == 8, np.inf, GOOD.astype(float)))
    ),
    "-inf count": _votes(
        lambda t: _save(t / "v.npy", np.where(GOOD == 8, -np.inf, GOOD.astype(float)))
    ),
    "negative count": _votes(lambda t: _save(t / "v.npy", GOOD.astype(float) - (GOOD == 10) * 20)),
    "rows with different sums": _votes(
        lambda t: _save(t / "v.npy", GOOD.astype(float) + np.eye(4, 3) * 0.5)
    ),
    "all rows empty": lambda t: (
        [
            "analyze",
            _save(t / "v.npy", np.zeros((4, 3))),
            "--format",
            "counts",
            "--sigma",
            40,
            "--delta",
            1e-5,
        ],
        t / "v.npy",
    ),
    "probs with NaN": _votes(lambda t: _save(t / "v.npy", np.full((3, 4, 2), np.nan))),
    "FIFO as votes": _votes(_fifo),
    "indices out of range": _with("--indices", lambda t: _save(t / "i.npy", np.array([0, 4]))),
    "negative indices": _with("--indices", lambda t: _save(t / "i.npy", np.array([0, -1]))),
    "duplicated indices": _with("--indices", lambda t: _save(t / "i.npy", np.array([1, 1]))),
    "fractional indices": _with("--indices", lambda t: _save(t / "i.npy", np.array([0.5, 1.0]))),
    "2-d indices": _with("--indices", lambda t: _save(t / "i.npy", np.array([[0, 1]]))),
    "empty indices": _with("--indices", lambda t: _save(t / "i.npy", np.array([], dtype=int))),
    "missing indices file": _with("--indices", lambda t: t / "nothing.npy"),
    "baseline of the wrong shape": _with(
        "--baseline", lambda t: _save(t / "b.npy", np.zeros((4, 2)))
    ),
    "baseline with NaN": _with("--baseline", lambda t: _save(t / "b.npy", np.full((4, 3), np.nan))),
    "negative baseline": _with("--baseline", lambda t: _save(t / "b.npy", -np.ones((4, 3)))),
    "mask of the wrong shape": _with(
        "--answered", lambda t: _save(t / "m.npy", np.ones((2, 2), bool))
    ),
    "mask longer than the queries": _with(
        "--answered", lambda t: _save(t / "m.npy", np.ones(9, bool))
    ),
    "mask with a 2": _with("--answered", lambda t: _save(t / "m.npy", np.array([0, 1, 2, 0]))),
    "float mask": _with("--answered", lambda t: _save(t / "m.npy", np.array([0.0, 1.0, 0.5, 0.0]))),
    "labels out of range": lambda t: (
        [
            "analyze",
            _save(t / "l.npy", np.array([[0, 1, 5], [1, 1, 0]])),
            "--format",
            "labels",
            "--num-classes",
            3,
            "--sigma",
            40,
            "--delta",
            1e-5,
        ],
        t / "l.npy",
    ),
    "non-integer labels": lambda t: (
        [
            "analyze",
            _save(t / "l.npy", np.array([[0, 1.5], [1, 1]])),
            "--format",
            "labels",
            "--sigma",
            40,
            "--delta",
            1e-5,
        ],
        t / "l.npy",
    ),
    "negative labels": lambda t: (  # -1 is an abstaining teacher; -2 is no label
        [
            "analyze",
            _save(t / "l.npy", np.array([[0, -2], [1, 1]])),
            "--format",
            "labels",
            "--sigma",
            40,
            "--delta",
            1e-5,
        ],
        t / "l.npy",
    ),
    "counts forced on 3-d": lambda t: (
        [
            "analyze",
            _save(t / "p.npy", np.zeros((2, 3, 4))),
            "--format",
            "counts",
            "--sigma",
            40,
            "--delta",
            1e-5,
        ],
        t / "p.npy",
    ),
    "num-classes disagrees with counts": lambda t: (
        ["analyze", _good(t), "--num-classes", 5, "--sigma", 40, "--delta", 1e-5],
        t / "votes.npy",
    ),
    "more queries than the file": lambda t: (
        ["analyze", _good(t), "--queries", 5, "--sigma", 40, "--delta", 1e-5],
        t / "votes.npy",
    ),
    # Strict reading (issue #15): never a guess that changes the numbers.
    "counts or labels: ambiguous": _votes(
        lambda t: _save(t / "v.npy", np.array([[240, 10], [100, 100]]))
    ),
    "--teachers below a row sum": lambda t: (
        ["analyze", _good(t), "--teachers", 9, "--sigma", 40, "--delta", 1e-5],
        t / "votes.npy",
    ),
    "--teachers below the labels' teachers": lambda t: (
        [
            "analyze",
            # 3 teachers x 3 queries: 2 is neither axis (with 2 columns it would pick them).
            _save(t / "l.npy", np.array([[0, 1, 0], [1, 1, 0], [0, 0, 1]])),
            "--format",
            "labels",
            "--teachers",
            2,
            "--sigma",
            40,
            "--delta",
            1e-5,
        ],
        t / "l.npy",
    ),
    "npz member over the size limit": _votes(
        lambda t: _raw(t / "v.npz", _zip_bytes(_header((10**9, 10)) + bytes(1 << 16)))
    ),
    "npz member with trailing data": _votes(
        lambda t: _raw(t / "v.npz", _zip_bytes(_npy_bytes(GOOD) + bytes(24)))
    ),
}


def _header(shape: tuple[int, ...]) -> bytes:
    """A valid .npy header declaring ``shape`` of float64 (no data)."""
    buffer = io.BytesIO()
    np.lib.format.write_array_header_1_0(
        buffer, {"descr": "<f8", "fortran_order": False, "shape": shape}
    )
    return buffer.getvalue()


def _zip_bytes(member: bytes) -> bytes:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", compression=zipfile.ZIP_DEFLATED) as archive:
        archive.writestr("arr_0.npy", member)
    return buffer.getvalue()


def _zip_member(array) -> bytes:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as archive:
        archive.writestr("arr_0.npy", _npy_bytes_pickled(array))
    return buffer.getvalue()


def _npy_bytes_pickled(array) -> bytes:
    buffer = io.BytesIO()
    np.save(buffer, array, allow_pickle=True)
    return buffer.getvalue()


def _zip_text() -> bytes:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as archive:
        archive.writestr("notes.txt", "hello")
    return buffer.getvalue()


def test_the_corpus_is_large_enough():
    assert len(CORPUS) >= 40


@pytest.mark.parametrize("name", sorted(CORPUS))
def test_bad_input_exits_2_with_one_line_naming_the_file(name, tmp_path):
    if name == "FIFO as votes" and not hasattr(os, "mkfifo"):
        pytest.skip("no FIFOs on this platform")
    args, culprit = CORPUS[name](tmp_path)
    before = sorted(p.name for p in tmp_path.iterdir())
    result = run_cli(args, expect=ExitCode.BAD_INPUT)
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    assert lines[0].startswith("pate: error: ")
    assert str(culprit) in lines[0]
    assert "Traceback" not in result.stderr and result.stdout == ""
    assert sorted(p.name for p in tmp_path.iterdir()) == before  # nothing written
    assert not (tmp_path / "pwned").exists()  # a pickle payload never ran


def test_unreadable_file_is_bad_input(tmp_path, monkeypatch):
    path = _good(tmp_path)
    real_open = open

    def refuse(file, *args, **kwargs):
        if os.fspath(file) == str(path):
            raise PermissionError(13, "Permission denied", str(path))
        return real_open(file, *args, **kwargs)

    monkeypatch.setattr("builtins.open", refuse)
    result = run_cli(["analyze", path, "--sigma", 40, "--delta", 1e-5], expect=ExitCode.BAD_INPUT)
    assert str(path) in result.stderr and len(result.stderr.strip().splitlines()) == 1


def test_messages_read_as_one_sentence_and_name_only_fixes_that_work(tmp_path):
    """An empty file, an empty directory (a folder of shards without one), and values no
    format can read: one clause each, and no advice to change --format where that cannot
    help."""
    empty = tmp_path / "empty.npy"
    empty.write_bytes(b"")
    folder = tmp_path / "d.npy"
    folder.mkdir()
    negative = tmp_path / "neg.npy"
    np.save(negative, np.full((250, 100), -2))
    lines = {
        "empty": run_cli(["inspect", empty], expect=ExitCode.BAD_INPUT).stderr.strip(),
        "folder": run_cli(["inspect", folder], expect=ExitCode.BAD_INPUT).stderr.strip(),
        "negative": run_cli(["inspect", negative], expect=ExitCode.BAD_INPUT).stderr.strip(),
    }
    assert lines["empty"] == (
        f"pate: error: {empty}: the file is empty; expected the votes saved with numpy.save "
        "(or a single-array numpy.savez)"
    )
    assert lines["folder"] == (
        f"pate: error: {folder}: an empty folder; expected .npy or .npz shards of votes"
    )
    assert "pass --format" not in lines["negative"]
    assert lines["negative"].endswith("(read as counts, the format detected)")

"""Fuzz the vote loader: any bytes either load or fail with a one-line InputError/UsageError.

``pate_cli.votes`` parses .npy headers itself and opens .npz archives, so it sees bytes an
attacker or a broken disk controls. Hypothesis feeds ``load_array`` and ``load_votes`` random
bytes, hand-built .npy headers with odd dtypes, shapes and header lengths, byte-flipped and
truncated ``numpy.save`` output, and zip containers (real ``savez`` output, odd members,
mutations). The only allowed outcomes are success (with a well-formed result) or a
``PateError`` whose single line starts with the path; any other exception, or an example that
takes more than a few seconds, fails the test. The hand-written corpus of
``tests/test_bad_inputs.py`` covers the CLI side and the FIFO.

Each test sets ``max_examples`` explicitly (not the profile's 2000) so that the whole file stays
under about 20 s in CI.
"""

from __future__ import annotations

import io
import os
import signal
import zipfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from unittest import mock

import numpy as np
import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from pate_cli import votes as votes_module
from pate_cli.errors import InputError, UsageError
from pate_cli.votes import VoteFormat, load_array, load_votes

# 700 examples per test keep this file near 12 s in CI; PATE_FUZZ_EXAMPLES=50000 fuzzes longer.
FUZZ = settings(
    max_examples=int(os.environ.get("PATE_FUZZ_EXAMPLES", 700)),
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
# A labels file with a large label implies that many classes; the production limit (1e8 count
# cells) allows ~1 GB from a tiny file, so the fuzz run lowers it to keep memory small.
SMALL_LABEL_CELLS = 10_000
PER_EXAMPLE_SECONDS = 5.0


class Hang(Exception):
    """An example ran longer than PER_EXAMPLE_SECONDS."""


@contextmanager
def time_limit(seconds: float) -> Iterator[None]:
    """Raise Hang in the main thread if the block runs longer than ``seconds``."""

    def fire(signum, frame):
        raise Hang(f"the loader ran for more than {seconds} s")

    previous = signal.signal(signal.SIGALRM, fire)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


@pytest.fixture(scope="module")
def scratch(tmp_path_factory) -> Path:
    return tmp_path_factory.mktemp("fuzz")


def npy_bytes(array: np.ndarray) -> bytes:
    buffer = io.BytesIO()
    np.save(buffer, array, allow_pickle=False)
    return buffer.getvalue()


def npy_with_header(
    text: str, payload: bytes, version: int = 1, length: int | None = None
) -> bytes:
    """A .npy file with a free-form header text (padded as numpy does) and a payload."""
    header = text.encode("utf8" if version == 3 else "latin1", errors="replace")
    header += b" " * ((64 - (10 + len(header) + 1) % 64) % 64) + b"\n"
    size = len(header) if length is None else length
    if version == 1:
        prefix = b"\x93NUMPY\x01\x00" + (size % 2**16).to_bytes(2, "little")
    else:
        prefix = b"\x93NUMPY" + bytes([version % 256, 0]) + (size % 2**32).to_bytes(4, "little")
    return prefix + header + payload


def check_outcome(path: Path, call) -> None:
    """Run one loader call: success, or a one-line PateError naming the file; nothing else."""
    try:
        with time_limit(PER_EXAMPLE_SECONDS):
            result = call()
    except (InputError, UsageError) as error:
        assert "\n" not in error.message
        assert error.message.startswith(str(path)), error.message
        return
    if isinstance(result, np.ndarray):
        assert result.dtype.kind in "biuf"
    else:
        counts = np.asarray(result.counts)  # a streamed source reads whole here
        assert counts.dtype == np.float64 and counts.ndim == 2
        assert counts.shape[0] >= 1 and counts.shape[1] == result.num_classes >= 1
        assert np.all(np.isfinite(counts)) and np.all(counts >= 0)
        assert result.num_teachers >= 1
        assert result.format is not VoteFormat.AUTO


@st.composite
def loader_calls(draw):
    """Which loader, with which flags (only values the CLI itself would pass)."""
    if draw(st.booleans()):
        what = draw(st.sampled_from(["votes", "indices"]))
        return lambda path: load_array(path, what)
    kwargs = {
        "fmt": draw(st.sampled_from(list(VoteFormat))),
        "num_classes": draw(st.none() | st.integers(1, 12)),
        "teachers": draw(st.none() | st.integers(1, 300)),
        "queries": draw(st.none() | st.integers(1, 6)),
    }
    if not draw(st.booleans()):
        return lambda path: load_votes(path, **kwargs)
    return lambda path: streamed_equals_in_memory(path, kwargs)


def streamed_equals_in_memory(path: Path, kwargs):
    """load_votes through its block-by-block reader (made to start at 2 rows, in blocks of 3
    rows) must agree with the in-memory path: the same error, or the same counts."""
    outcomes = []
    for stream_min_rows in (votes_module.STREAM_MIN_ROWS, 2):
        with mock.patch.multiple(votes_module, STREAM_MIN_ROWS=stream_min_rows, _BLOCK_ROWS=3):
            try:
                votes = load_votes(path, **kwargs)
                outcomes.append((np.asarray(votes.counts), votes.num_teachers, votes.format))
            except (InputError, UsageError) as error:
                outcomes.append(error)
    memory, streamed = outcomes
    if isinstance(memory, Exception) or isinstance(streamed, Exception):
        assert type(memory) is type(streamed), outcomes
        raise streamed
    assert np.array_equal(memory[0], streamed[0]) and memory[1:] == streamed[1:]
    return votes


def run_loader(scratch: Path, data: bytes, call, suffix: str = ".npy") -> None:
    path = scratch / f"fuzz{suffix}"
    # A fresh file, not a truncated one: ext4 flushes a file truncated and rewritten on
    # close (auto_da_alloc), which costs milliseconds per example.
    path.unlink(missing_ok=True)
    path.write_bytes(data)
    with mock.patch.object(votes_module, "_MAX_LABEL_COUNT_CELLS", SMALL_LABEL_CELLS):
        check_outcome(path, lambda: call(path))


@st.composite
def mutated(draw, data: bytes) -> bytes:
    """Flip a few bytes, then maybe truncate or extend."""
    out = bytearray(data)
    for _ in range(draw(st.integers(0, 4))):
        if out:
            out[draw(st.integers(0, len(out) - 1))] = draw(st.integers(0, 255))
    cut = draw(st.none() | st.integers(0, len(out)))
    if cut is not None:
        del out[cut:]
    return bytes(out) + draw(st.binary(max_size=16))


PREFIXES = [b"", b"\x93NUMPY", b"\x93NUMPY\x01\x00", b"\x93NUMPY\x02\x00", b"\x93NUMPY\x03\x00"]
PREFIXES += [b"\x93NUMPY\x01\x00\xff\xff", b"PK\x03\x04", b"PK\x05\x06", b"PK"]


@FUZZ
@given(st.sampled_from(PREFIXES), st.binary(max_size=600), loader_calls())
@example(b"\x93NUMPY\x01\x00", b"\x00\x00", lambda p: load_array(p, "votes"))
def test_random_bytes(scratch, prefix, body, call):
    run_loader(scratch, prefix + body, call)


NUMERIC_DTYPES = ["<f8", ">f8", "<f4", "<f2", "|u1", "|i1", "<i2", ">u4", "<i8", ">i8", "|b1"]
OTHER_DTYPES = ["<c16", "|O", "<U3", "|S2", "|V8", "<M8[s]", "<m8[D]", "f16", "<g", "x", "", "?"]
descr_atoms = (
    st.sampled_from(NUMERIC_DTYPES + OTHER_DTYPES)
    | st.text(max_size=4)
    | st.sampled_from([None, 0, -1, 3, b"<f8", 1.5, [], ()])
)
# descr values numpy.save never writes; built flat (st.recursive is slow to draw from).
descrs = (
    descr_atoms
    | st.tuples(descr_atoms)
    | st.tuples(descr_atoms, st.tuples(st.integers(-2, 4)) | st.integers(-2, 2**40))
    | st.lists(st.tuples(st.text(max_size=2), descr_atoms), max_size=3)
    | st.lists(
        st.tuples(st.text(max_size=2), descr_atoms, st.tuples(st.integers(0, 3))), max_size=2
    )
    | st.sampled_from(
        [
            [[[[]]]],
            (("<f8", (2,)), (3,)),
            {"names": ["a"], "formats": ["<f8"]},
            [("a",)],
            [("", "|V4")],
        ]
    )
)
DIMENSIONS = st.integers(0, 6) | st.sampled_from(
    [-1, 2**31, 2**62, 2**63 - 1, 2**63, 2**64, 10**30]
)
shapes = st.lists(DIMENSIONS, max_size=4).map(tuple) | st.sampled_from(
    [(1,) * 65, (0,) * 70, (True, 2), (2.0, 3), [2, 3], "(2,)", None]
)


@st.composite
def npy_headers(draw) -> bytes:
    """Headers written by hand: valid layouts with hostile descr/shape/fortran_order values."""
    fields = {
        "descr": draw(descrs),
        "fortran_order": draw(st.sampled_from([False, True, 0, 1, None, "no"])),
        "shape": draw(shapes),
    }
    for key in draw(st.lists(st.sampled_from(["descr", "shape", "fortran_order"]), max_size=1)):
        del fields[key]
    if draw(st.booleans()):
        fields[draw(st.text(max_size=3))] = draw(st.integers())
    text = repr(fields) if draw(st.integers(0, 9)) else draw(st.text(max_size=40))
    payload_size = draw(st.integers(0, 200))
    payload = draw(st.binary(min_size=payload_size, max_size=payload_size))
    version = draw(st.sampled_from([1, 1, 2, 3, 0, 4]))
    length = draw(st.none() | st.none() | st.integers(0, 2**32 - 1))
    return npy_with_header(text, payload, version, length)


@FUZZ
@given(npy_headers(), loader_calls())
def test_hand_built_npy_headers(scratch, data, call):
    run_loader(scratch, data, call)


arrays = hnp.arrays(
    dtype=st.sampled_from(NUMERIC_DTYPES).map(np.dtype),
    shape=hnp.array_shapes(min_dims=0, max_dims=4, min_side=0, max_side=5),
)


@FUZZ
@given(arrays, st.booleans(), st.data(), loader_calls())
def test_mutated_npy_files(scratch, array, fortran, data, call):
    array = np.asfortranarray(array) if fortran else array
    run_loader(scratch, data.draw(mutated(npy_bytes(array))), call)


@st.composite
def zip_files(draw) -> bytes:
    """A zip built by numpy.savez/savez_compressed or by hand, then maybe mutated."""
    buffer = io.BytesIO()
    compression = draw(st.sampled_from([zipfile.ZIP_STORED, zipfile.ZIP_DEFLATED]))
    with zipfile.ZipFile(buffer, "w", compression) as archive:
        for index in range(draw(st.integers(0, 3))):
            kind = draw(st.sampled_from(["array", "array", "text", "directory", "header"]))
            name = draw(st.sampled_from([f"arr_{index}.npy", f"x{index}", f"d{index}/"]))
            if kind == "array":
                archive.writestr(name, npy_bytes(draw(arrays)))
            elif kind == "header":
                archive.writestr(name, draw(npy_headers()))
            elif kind == "directory":
                archive.writestr(zipfile.ZipInfo(f"dir{index}/"), b"")
            else:
                archive.writestr(name, draw(st.binary(max_size=64)))
    data = buffer.getvalue()
    return draw(mutated(data)) if draw(st.booleans()) else data


@FUZZ
@given(zip_files(), st.sampled_from([".npz", ".npy"]), loader_calls())
def test_zip_containers(scratch, data, suffix, call):
    # The loader goes by the magic bytes, not the file name.
    run_loader(scratch, data, call, suffix=suffix)


def test_time_limit_fires():
    """The hang guard itself works, so a hanging loader would fail the fuzz tests."""
    with pytest.raises(Hang), time_limit(0.05):
        while True:
            pass

"""Benchmark the memory of reading votes from .npz archives: peak RSS of ``pate analyze``.

Builds, a block at a time through zipfile (so the benchmark itself never holds them):

- an .npz whose honest header declares 4 GB of zeros (500,000,000 float64 in a (50,000,000,
  10) array), which deflate packs into about 4 MB: refused at once for its inflation ratio;
- the same archive read as counts (``--format counts``) by the library with the ratio check
  turned off: streamed, it is inflated once block by block and refused only when the pass
  over it finds that every row sums to 0 (what streaming holds of the largest archive the
  other limits let through);
- realistic counts (250 teachers, 10 classes, Dirichlet-drawn vote shares, int64) of about
  200 MB inflated, in a compressed .npz and in a plain .npy: streamed, analysed.

Each case runs ``pate analyze ... --sigma 40 --delta 1e-5 --no-release --json`` (through
``pate_cli.cli.main`` for the case without the ratio check) in a fresh process and reports its
wall time, exit code and peak resident memory (``os.wait4``'s ``ru_maxrss`` of that child).
The files go to a temporary folder removed at the end, or to ``--dir`` (outside the
repository), where they are kept and reused on the next run. It is not a test.

    python benchmarks/bench_memory_npz.py
    python benchmarks/bench_memory_npz.py --dir /tmp/pate-npz --zeros-gb 1 --counts-mb 50 --json
"""

from __future__ import annotations

import argparse
import io
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
import zipfile
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[1]
ARGS = ["--sigma", "40", "--delta", "1e-5", "--no-release", "--json"]
CLASSES = 10
TEACHERS = 250
ROWS_PER_WRITE = 1 << 18


def npy_header(shape: tuple[int, ...], descr: str) -> bytes:
    buffer = io.BytesIO()
    np.lib.format.write_array_header_1_0(
        buffer, {"descr": descr, "fortran_order": False, "shape": shape}
    )
    return buffer.getvalue()


def write_npz(path: Path, shape: tuple[int, int], descr: str, blocks) -> None:
    """An .npz of one array, written block by block (``blocks`` yields the rows in order)."""
    partial = path.with_suffix(".partial")
    with zipfile.ZipFile(partial, "w", compression=zipfile.ZIP_DEFLATED) as archive:
        with archive.open("votes.npy", "w", force_zip64=True) as member:
            member.write(npy_header(shape, descr))
            for block in blocks:
                member.write(np.ascontiguousarray(block).tobytes())
    partial.replace(path)


def zeros_blocks(rows: int):
    block = np.zeros((ROWS_PER_WRITE, CLASSES))
    for start in range(0, rows, ROWS_PER_WRITE):
        yield block[: min(ROWS_PER_WRITE, rows - start)]


def counts_blocks(rows: int):
    rng = np.random.default_rng(2018)
    for start in range(0, rows, ROWS_PER_WRITE):
        count = min(ROWS_PER_WRITE, rows - start)
        shares = rng.dirichlet(np.full(CLASSES, 0.3), size=count)
        yield rng.multinomial(TEACHERS, shares).astype(np.int64)


def build(folder: Path, zeros_gb: float, counts_mb: float) -> dict[str, Path]:
    folder.mkdir(parents=True, exist_ok=True)
    zeros_rows = int(zeros_gb * 1e9) // (8 * CLASSES)
    counts_rows = int(counts_mb * 1e6) // (8 * CLASSES)
    paths = {
        "zeros": folder / f"zeros_{zeros_rows}x{CLASSES}.npz",
        "counts_npz": folder / f"counts_{counts_rows}x{CLASSES}.npz",
        "counts_npy": folder / f"counts_{counts_rows}x{CLASSES}.npy",
    }
    if not paths["zeros"].exists():
        write_npz(paths["zeros"], (zeros_rows, CLASSES), "<f8", zeros_blocks(zeros_rows))
    if not paths["counts_npz"].exists():
        shape = (counts_rows, CLASSES)
        write_npz(paths["counts_npz"], shape, "<i8", counts_blocks(counts_rows))
    if not paths["counts_npy"].exists():
        partial = paths["counts_npy"].with_suffix(".partial")
        with open(partial, "wb") as f:
            f.write(npy_header((counts_rows, CLASSES), "<i8"))
            for block in counts_blocks(counts_rows):
                f.write(block.tobytes())
        partial.replace(paths["counts_npy"])
    return paths


def measure(argv: list[str]) -> dict[str, object]:
    """Run ``argv`` in a fresh process: wall seconds, exit code, peak RSS in MB, stderr line."""
    start = time.perf_counter()
    child = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    assert child.stderr is not None
    error = child.stderr.read().decode(errors="replace").strip().splitlines()
    _, status, usage = os.wait4(child.pid, 0)
    child.returncode = os.waitstatus_to_exitcode(status)
    return {
        "seconds": round(time.perf_counter() - start, 2),
        "exit": child.returncode,
        "peak_mb": round(usage.ru_maxrss / 1024),  # kilobytes on Linux
        "stderr": error[-1] if error else "",
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--dir", type=Path, help="where to keep the files (default: a temporary one)"
    )
    parser.add_argument("--zeros-gb", type=float, default=4.0, help="GB of zeros (default 4)")
    parser.add_argument("--counts-mb", type=float, default=200.0, help="MB of counts (default 200)")
    parser.add_argument("--json", action="store_true", help="one JSON object on stdout")
    args = parser.parse_args()
    if args.dir is None:
        folder = Path(tempfile.mkdtemp(prefix="pate-bench-npz-"))
        try:
            run(args, folder)
        finally:
            shutil.rmtree(folder, ignore_errors=True)
        return
    folder = args.dir.resolve()
    if folder == REPO or REPO in folder.parents:
        raise SystemExit(f"--dir {args.dir}: refusing to write inside the repository {REPO}")
    run(args, folder)


def run(args: argparse.Namespace, folder: Path) -> None:
    paths = build(folder, args.zeros_gb, args.counts_mb)
    pate = [sys.executable, "-m", "pate_cli", "analyze"]
    no_ratio = (
        "import sys; import pate_cli.votes.reader as r; r.MAX_INFLATION_RATIO = float('inf'); "
        "from pate_cli.cli.app import main; sys.argv = ['pate', 'analyze', *sys.argv[1:]]; main()"
    )
    cases = [
        (
            f"{args.zeros_gb:g} GB of zeros, .npz",
            paths["zeros"],
            [*pate, str(paths["zeros"]), *ARGS],
        ),
        (
            f"{args.zeros_gb:g} GB of zeros, .npz, ratio check off, --format counts",
            paths["zeros"],
            [sys.executable, "-c", no_ratio, str(paths["zeros"]), "--format", "counts", *ARGS],
        ),
        ("counts, .npz (deflated)", paths["counts_npz"], [*pate, str(paths["counts_npz"]), *ARGS]),
        ("counts, .npy", paths["counts_npy"], [*pate, str(paths["counts_npy"]), *ARGS]),
    ]
    rows = []
    for name, path, argv in cases:
        with zipfile.ZipFile(path) if path.suffix == ".npz" else open(os.devnull) as opened:
            inflated = (
                opened.infolist()[0].file_size
                if isinstance(opened, zipfile.ZipFile)
                else path.stat().st_size
            )
        rows.append(
            {
                "case": name,
                "file_mb": round(path.stat().st_size / 1e6, 1),
                "array_mb": round(inflated / 1e6),
                **measure(argv),
            }
        )
    if args.json:
        print(json.dumps({"python": sys.version.split()[0], "rows": rows}))
        return
    print("| case | file MB | array MB | exit | wall s | peak RSS MB |")
    print("|---|---|---|---|---|---|")
    for row in rows:
        print(
            f"| {row['case']} | {row['file_mb']} | {row['array_mb']} | {row['exit']} | "
            f"{row['seconds']} | {row['peak_mb']} |"
        )
    for row in rows:
        if row["exit"]:
            print(f"{row['case']}: {row['stderr']}")


if __name__ == "__main__":
    main()

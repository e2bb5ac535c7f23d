"""Next-token PATE at scale: votes over a GPT-2 vocabulary, saved sparse, analysed whole.

A plain script, not a test. It generates a next-token run reproducibly (a numpy Generator
with a fixed seed) into a work directory outside the repository, runs the CLI on it, and
prints one table row per run with the wall time and peak memory of the pate process:

    python benchmarks/bench_next_token.py                # 1e6 queries (as in the README)
    python benchmarks/bench_next_token.py --queries 1e5  # smaller
    python benchmarks/bench_next_token.py --json         # one JSON object on stdout

The run
    ``sample_data/make_samples.py``'s ``next_token_votes`` (the recipe of the sample
    ``next_token_votes.npz``): 200 teachers vote on the next token of each query over a
    vocabulary of 50,257 classes, a Zipf-distributed number of tokens per query. Saved with
    ``scipy.sparse.save_npz`` (CSR, uncompressed), about 2.4 non-zeros per query.

Rows
    sparse gnmax / confident: ``pate analyze FILE.npz`` with ``--no-release`` and with the
        default sampled release (the command a user types), plain GNMax (``--sigma 40``) and
        Confident-GNMax (``--threshold 190 --sigma1 60 --sigma 20``), delta 1e-5.
    labels: the first 2e5 queries of the same votes as a labels file (teachers x queries,
        int32 token ids), ``--format labels --num-classes 50257``.
    dense: the first 2,000 queries as a dense int32 .npy (2,000 x 50,257, 400 MB) and the
        same queries sparse: the case of a dense file over a vocabulary.
    ratio: each release row over its ``--no-release`` row; dense over sparse.

Measurement as ``bench_scale.py``: a fresh interpreter per run (start-up and imports
included), peak RSS from ``VmHWM`` of the pate process itself.
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np
import scipy.sparse

HERE = Path(__file__).resolve().parent
sys.path[:0] = [str(HERE), str(HERE.parent / "sample_data")]
from bench_scale import Measured, run_pate  # noqa: E402
from make_samples import VOCABULARY, labels_of, next_token_votes  # noqa: E402

SEED = 50257
TEACHERS = 200
GNMAX = ["--sigma", "40", "--delta", "1e-5"]
CONFIDENT = ["--threshold", "190", "--sigma1", "60", "--sigma", "20", "--delta", "1e-5"]
LABEL_QUERIES, DENSE_QUERIES = 200_000, 2_000


def write_inputs(workdir: Path, num_queries: int) -> dict[str, Path]:
    matrix = next_token_votes(num_queries, np.random.default_rng(SEED))
    paths = {
        "sparse": workdir / "votes.npz",
        "labels": workdir / "labels.npy",
        "dense": workdir / "dense.npy",
        "dense-sparse": workdir / "dense_rows.npz",
    }
    scipy.sparse.save_npz(paths["sparse"], matrix, compressed=False)
    np.save(paths["labels"], labels_of(matrix[: min(LABEL_QUERIES, num_queries)]))
    head = matrix[: min(DENSE_QUERIES, num_queries)]
    dense = np.lib.format.open_memmap(
        paths["dense"], mode="w+", dtype=np.int32, shape=(head.shape[0], VOCABULARY)
    )
    for start in range(0, head.shape[0], 200):
        dense[start : start + 200] = head[start : start + 200].toarray()
    dense.flush()
    del dense
    scipy.sparse.save_npz(paths["dense-sparse"], head, compressed=False)
    return paths


def runs(paths: dict[str, Path]) -> list[tuple[str, list[str]]]:
    sparse, labels = str(paths["sparse"]), str(paths["labels"])
    label_flags = ["--format", "labels", "--num-classes", str(VOCABULARY)]
    return [
        ("sparse gnmax --no-release", [sparse, *GNMAX, "--no-release"]),
        ("sparse gnmax release", [sparse, *GNMAX]),
        ("sparse confident --no-release", [sparse, *CONFIDENT, "--no-release"]),
        ("sparse confident release", [sparse, *CONFIDENT]),
        ("labels confident --no-release", [labels, *label_flags, *CONFIDENT, "--no-release"]),
        ("dense 2,000 --no-release", [str(paths["dense"]), *GNMAX, "--no-release"]),
        ("sparse 2,000 --no-release", [str(paths["dense-sparse"]), *GNMAX, "--no-release"]),
    ]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--queries", type=float, default=1e6)
    parser.add_argument("--workdir", type=Path, default=None)
    parser.add_argument("--timeout", type=float, default=600.0)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    workdir = args.workdir or Path(tempfile.mkdtemp(prefix="pate-next-token-"))
    workdir.mkdir(parents=True, exist_ok=True)
    try:
        started = time.perf_counter()
        paths = write_inputs(workdir, int(args.queries))
        generated = time.perf_counter() - started
        results: dict[str, Measured] = {}
        for name, command in runs(paths):
            results[name] = run_pate(["analyze", *command, "--json"], args.timeout)
        report(results, int(args.queries), generated, paths, as_json=args.json)
    finally:
        if args.workdir is None:
            shutil.rmtree(workdir, ignore_errors=True)


def _epsilon(measured: Measured) -> float | None:
    try:
        return float(json.loads(measured.stdout)["data_dependent"]["epsilon"])
    except (ValueError, KeyError, TypeError):
        return None


def report(
    results: dict[str, Measured],
    num_queries: int,
    generated: float,
    paths: dict[str, Path],
    *,
    as_json: bool,
) -> None:
    pairs = {
        "sparse gnmax release": "sparse gnmax --no-release",
        "sparse confident release": "sparse confident --no-release",
        "dense 2,000 --no-release": "sparse 2,000 --no-release",
    }
    rows: list[dict[str, Any]] = []
    for name, measured in results.items():
        base = results.get(pairs.get(name, ""))
        ratio = measured.wall_s / base.wall_s if base is not None and base.ok else None
        rows.append(
            {
                "run": name,
                "ok": measured.ok,
                "wall_s": round(measured.wall_s, 2),
                "peak_mb": None if measured.peak_mb is None else round(measured.peak_mb),
                "ratio": None if ratio is None else round(ratio, 2),
                "epsilon": _epsilon(measured),
                "error": measured.error,
            }
        )
    sizes = {name: path.stat().st_size for name, path in paths.items()}
    if as_json:
        print(
            json.dumps(
                {"queries": num_queries, "generated_s": generated, "files": sizes, "rows": rows}
            )
        )
        return
    print(
        f"next-token run: {num_queries:,} queries x {VOCABULARY:,} classes, {TEACHERS} teachers "
        f"(sparse file {sizes['sparse'] / 2**20:.0f} MB, generated in {generated:.1f} s)"
    )
    print(f"{'run':<32}{'wall s':>8}{'peak MB':>9}{'ratio':>7}{'epsilon':>12}")
    for row in rows:
        ratio = "" if row["ratio"] is None else f"{row['ratio']:.2f}"
        epsilon = "" if row["epsilon"] is None else f"{row['epsilon']:.4f}"
        peak = "" if row["peak_mb"] is None else str(row["peak_mb"])
        status = "" if row["ok"] else f"  FAILED: {row['error']}"
        print(f"{row['run']:<32}{row['wall_s']:>8.2f}{peak:>9}{ratio:>7}{epsilon:>12}{status}")


if __name__ == "__main__":
    main()

"""How `pate` scales with the number of queries: wall time, peak memory, the numpy.load floor.

A plain script, not a test. It writes its inputs reproducibly (numpy Generators with fixed
seeds) into a work directory outside the repository, runs the CLI on them, and prints one
table row per run:

    python benchmarks/bench_scale.py                 # 1e4 .. 1e7 queries (writes 800 MB files)
    python benchmarks/bench_scale.py --quick         # 1e4, 1e5 and a 2,000-query Glyph file
    python benchmarks/bench_scale.py --sizes 1e4,1e6 --workdir /tmp/pate-bench --keep
    python benchmarks/bench_scale.py --quick --json  # one JSON object on stdout

Runs
    gnmax/diverse, gnmax/repetitive
        ``pate analyze FILE --sigma 40 --delta 1e-5 --json --no-release`` (plain GNMax, the
        default 298 orders) on counts of N queries x 10 classes, float64, 250 teachers;
        ``+release`` rows run the command a user types, with the GNSS release
        (``--seed 0`` instead of ``--no-release``).
        "diverse": each query's plurality share comes from a mixture (85% Beta(20, 2), a
        contested 15% Beta(2, 2)), the rest is spread by a sparse Dirichlet over the other
        classes and the counts are multinomial with M = 250: 0.8 to 0.99 distinct rows per
        query (8.0 million at 1e7).
        "repetitive": 50 distinct histograms, rows drawn from them, as confident ensembles
        produce. Files are generated 1e6 rows at a time into a preallocated
        ``np.lib.format.open_memmap``, so generation never holds the whole array.
    glyph/analyze
        ``pate analyze`` with Confident-GNMax ``--threshold 1000 --sigma1 500 --sigma 100
        --delta 1e-8 --json --no-release`` on a Glyph-scale file: 12,000 queries x 150 classes,
        5,000 teachers, Zipf-imbalanced classes, median plurality share ~0.6. (``--no-release``
        keeps this row pure accounting; the release is the next row.)
    glyph/smooth-sensitivity
        ``pate smooth-sensitivity`` on the same file and parameters, ``--seed 0 --json
        --skip-conditions``.
    per-query loop estimate
        The shape of the 2018 reference: for each query, ``logq_gnmax`` on a (1, C) row and
        ``rdp_gnmax`` on a (1,) log q over the 298 default orders, summed. Timed in this
        process on the first 2,000 rows of the 1e6 diverse file (or of the largest diverse
        file up to 1e6) and extrapolated linearly to each row's query count. The Glyph
        analyze row uses the same loop plus the threshold step (``log_pr_answered_threshold``,
        ``rdp_threshold``) on the Glyph file's first rows. Each loop's sum is checked against
        ``pate analyze --queries N`` on the same rows. There is no estimate for
        smooth-sensitivity.

Measurement
    Each CLI run is a fresh subprocess, ``python -c WRAPPER pate-args...``, where the wrapper
    calls ``pate_cli.cli.main()`` (exactly what the ``pate`` console script runs), catches its
    SystemExit and at exit prints its own peak resident set to stderr: ``VmHWM`` of
    /proc/self/status, the kernel's high-water mark of that process image (ru_maxrss
    elsewhere). Not ``ru_maxrss`` on Linux: execve carries the forking parent's high-water
    mark over into the child's, so a child of this (large, after writing 800 MB files)
    process would report at least its RSS; and RUSAGE_CHILDREN is a max over all children
    ever reaped. This measures the pate process only, needs no external tool, and agrees
    with ``/usr/bin/time -v`` (which runs the command from a small parent). Resident pages
    of the memory-mapped votes file count towards it. Wall time is measured around the
    subprocess in this script, so it includes interpreter start-up and imports; the header
    shows that floor (``pate --version``, fastest of 3) and its peak RSS.
    ``numpy.load`` of the same file is timed inside another fresh subprocess (excluding its
    start-up): it reads the whole file into memory, the physical floor of any analysis of
    it. It is "cold-ish" only: the file was just written, so it is in the page cache; so is
    the file pate reads. ``wall/np.load`` is the ratio of the two.

Files are deleted at the end unless ``--keep``; the default work directory is a fresh temp
directory under /tmp, removed at the end unless ``--keep``. With ``--keep`` and the same
``--workdir`` a later run reuses files whose generation parameters match.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
from numpy.typing import NDArray

from pate_cli.core.gnmax import logq_gnmax, rdp_gnmax, rdp_gnmax_data_independent
from pate_cli.core.threshold import (
    log_pr_answered_threshold,
    logq_threshold,
    rdp_threshold,
    rdp_threshold_data_independent,
)
from pate_cli.orders import DEFAULT_ORDERS

REPO = Path(__file__).resolve().parents[1]
SEED = 2018
CHUNK_ROWS = 1_000_000
LOOP_ROWS = 2_000
LOOP_SOURCE_ROWS = 1_000_000

# Plain GNMax on 10 classes, 250 teachers.
CLASSES, TEACHERS, SIGMA, DELTA = 10, 250, 40.0, 1e-5
GNMAX_ARGS = ["--sigma", "40", "--delta", "1e-5", "--json", "--no-release"]
# The command a user types: the same with the GNSS release (a public seed, for the timing).
GNMAX_RELEASE_ARGS = ["--sigma", "40", "--delta", "1e-5", "--json", "--seed", "0"]
# Glyph scale: Confident-GNMax on 150 classes, 5,000 teachers.
GLYPH_CLASSES, GLYPH_TEACHERS = 150, 5000
GLYPH_T, GLYPH_SIGMA1, GLYPH_SIGMA2, GLYPH_DELTA = 1000.0, 500.0, 100.0, 1e-8
GLYPH_ARGS = ["--threshold", "1000", "--sigma1", "500", "--sigma", "100", "--delta", "1e-8"]

PEAK_MARKER = "__BENCH_PEAK_RSS_KB__="
# Runs the console script's entry point in this fresh process and reports its own peak RSS:
# VmHWM of /proc/self/status, the high-water mark of this process image only. (ru_maxrss is
# not enough on Linux: execve carries the forking parent's high-water mark over, so a child
# of a big benchmark process would report at least the parent's RSS.)
WRAPPER = f"""\
import resource, sys
sys.argv = ["pate", *sys.argv[1:]]
code = 0
try:
    from pate_cli.cli.app import main
    main()
except SystemExit as exit_:
    code = exit_.code
finally:
    sys.stdout.flush()
    try:
        with open("/proc/self/status") as status:
            peak = next(int(line.split()[1]) for line in status if line.startswith("VmHWM:"))
    except (OSError, StopIteration):  # not Linux: ru_maxrss, bytes on macOS
        peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
        peak //= 1024 if sys.platform == "darwin" else 1
    print("{PEAK_MARKER}%d" % peak, file=sys.stderr)
sys.exit(code)
"""
NP_LOAD = """\
import sys, time
import numpy as np
start = time.perf_counter()
a = np.load(sys.argv[1], allow_pickle=False)
print(time.perf_counter() - start, a.shape)
"""


# ---------------------------------------------------------------------------------------------
# Inputs


def diverse_chunk(rng: np.random.Generator, n: int) -> NDArray[np.int64]:
    """n queries x 10 classes of realistic, mostly distinct, 250-teacher histograms."""
    rows = np.arange(n)
    label = rng.integers(CLASSES, size=n)
    contested = rng.random(n) < 0.15
    share = np.where(contested, rng.beta(2.0, 2.0, n), rng.beta(20.0, 2.0, n))
    others = rng.dirichlet(np.full(CLASSES - 1, 0.3), size=n)  # sparse: few runner-up classes
    probs = np.empty((n, CLASSES))
    other_classes = (label[:, None] + 1 + np.arange(CLASSES - 1)) % CLASSES
    probs[rows[:, None], other_classes] = (1 - share)[:, None] * others
    probs[rows, label] = share
    return rng.multinomial(TEACHERS, probs)


def glyph_votes(num_queries: int, seed: int = SEED) -> NDArray[np.int64]:
    """Glyph-scale counts: Zipf classes, 5,000 teachers, median plurality share ~0.6."""
    rng = np.random.default_rng(seed)
    rows = np.arange(num_queries)
    prior = 1.0 / np.arange(1, GLYPH_CLASSES + 1) ** 1.1
    prior /= prior.sum()
    labels = rng.choice(GLYPH_CLASSES, size=num_queries, p=prior)
    # easy, contested, ambiguous: the share of the true class.
    kind = rng.choice(3, size=num_queries, p=[0.45, 0.35, 0.20])
    share = rng.beta(np.array([12.0, 5.0, 2.0])[kind], np.array([4.0, 5.0, 5.0])[kind])
    others = rng.dirichlet(np.full(GLYPH_CLASSES, 0.1), size=num_queries) * prior
    others[rows, labels] = 0.0
    others /= others.sum(axis=1, keepdims=True)
    probs = (1 - share)[:, None] * others
    probs[rows, labels] += share
    return rng.multinomial(GLYPH_TEACHERS, probs)


@dataclass
class Input:
    path: Path
    num_queries: int
    num_classes: int
    num_teachers: int
    distinct_rows: int
    note: str = ""

    @property
    def megabytes(self) -> float:
        return self.path.stat().st_size / 1e6


def _row_keys(counts: NDArray[np.int64]) -> NDArray[np.int64]:
    """A 64-bit hash per row (wrapping dot product with fixed odd multipliers)."""
    mult = np.random.default_rng(0).integers(1, 2**62, size=counts.shape[1]) | 1
    return counts.astype(np.int64) @ mult


def _cached(path: Path, spec: dict[str, Any]) -> Input | None:
    meta = path.with_suffix(".json")
    if not (path.exists() and meta.exists()):
        return None
    saved = json.loads(meta.read_text())
    if saved.get("spec") != spec:
        return None
    return Input(path, **saved["input"])


def _save_meta(info: Input, spec: dict[str, Any]) -> None:
    fields = {k: v for k, v in asdict(info).items() if k != "path"}
    info.path.with_suffix(".json").write_text(json.dumps({"spec": spec, "input": fields}))


def write_counts(
    path: Path,
    num_queries: int,
    num_classes: int,
    chunk: Callable[[int, int], NDArray[np.int64]],
    spec: dict[str, Any],
    num_teachers: int,
) -> Input:
    """Write ``chunk(index, rows)`` blocks of CHUNK_ROWS rows as one float64 .npy."""
    cached = _cached(path, spec)
    if cached is not None:
        log(f"  reusing {path.name}")
        return cached
    start = time.perf_counter()
    out = np.lib.format.open_memmap(
        path, mode="w+", dtype=np.float64, shape=(num_queries, num_classes)
    )
    keys = np.empty(num_queries, dtype=np.int64)
    for index, begin in enumerate(range(0, num_queries, CHUNK_ROWS)):
        stop = min(begin + CHUNK_ROWS, num_queries)
        block = chunk(index, stop - begin)
        out[begin:stop] = block
        keys[begin:stop] = _row_keys(block)
    out.flush()
    del out
    info = Input(path, num_queries, num_classes, num_teachers, int(np.unique(keys).size))
    _save_meta(info, spec)
    log(f"  wrote {path.name} ({info.megabytes:.0f} MB) in {time.perf_counter() - start:.1f} s")
    return info


def write_diverse(workdir: Path, num_queries: int) -> Input:
    spec = {"kind": "diverse", "rows": num_queries, "seed": SEED, "chunk": CHUNK_ROWS}
    return write_counts(
        workdir / f"diverse_{num_queries}.npy",
        num_queries,
        CLASSES,
        lambda i, n: diverse_chunk(np.random.default_rng([SEED, i]), n),
        spec,
        TEACHERS,
    )


def write_repetitive(workdir: Path, num_queries: int, distinct: int = 50) -> Input:
    templates = diverse_chunk(np.random.default_rng([SEED, 10**6]), distinct)
    spec = {"kind": "repetitive", "rows": num_queries, "seed": SEED, "distinct": distinct}
    return write_counts(
        workdir / f"repetitive_{num_queries}.npy",
        num_queries,
        CLASSES,
        lambda i, n: templates[np.random.default_rng([SEED + 1, i]).integers(distinct, size=n)],
        spec,
        TEACHERS,
    )


def write_glyph(workdir: Path, num_queries: int) -> Input:
    spec = {"kind": "glyph", "rows": num_queries, "seed": SEED}
    path = workdir / f"glyph_{num_queries}.npy"
    cached = _cached(path, spec)
    if cached is not None:
        log(f"  reusing {path.name}")
        return cached
    votes = glyph_votes(num_queries)
    np.save(path, votes.astype(np.float64))
    share = float(np.median(votes.max(axis=1)) / GLYPH_TEACHERS)
    info = Input(
        path,
        num_queries,
        GLYPH_CLASSES,
        GLYPH_TEACHERS,
        int(np.unique(_row_keys(votes)).size),
        note=f"median plurality share {share:.2f}",
    )
    _save_meta(info, spec)
    log(f"  wrote {path.name} ({info.megabytes:.1f} MB), {info.note}")
    return info


# ---------------------------------------------------------------------------------------------
# Measurement


@dataclass
class Measured:
    ok: bool
    wall_s: float
    peak_mb: float | None
    returncode: int
    stdout: str
    error: str = ""


def log(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


def run_pate(args: list[str], timeout: float) -> Measured:
    """Run ``pate ARGS`` in a fresh interpreter; wall time from here, peak RSS from inside."""
    command = [sys.executable, "-c", WRAPPER, *args]
    start = time.perf_counter()
    try:
        proc = subprocess.run(command, capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        return Measured(False, time.perf_counter() - start, None, -1, "", f"timeout {timeout} s")
    wall = time.perf_counter() - start
    peak, lines = None, []
    for line in proc.stderr.splitlines():
        if line.startswith(PEAK_MARKER):
            peak = int(line[len(PEAK_MARKER) :]) / 1024
        elif line.strip():
            lines.append(line.strip())
    ok = proc.returncode == 0
    error = "" if ok else (lines[-1] if lines else f"exit code {proc.returncode}")
    return Measured(ok, wall, peak, proc.returncode, proc.stdout, error)


def time_np_load(path: Path, timeout: float) -> float | None:
    """Seconds of ``np.load(path)`` in a fresh interpreter (page cache warm, start-up excluded)."""
    try:
        proc = subprocess.run(
            [sys.executable, "-c", NP_LOAD, str(path)],
            capture_output=True,
            text=True,
            timeout=timeout,
            check=True,
        )
        return float(proc.stdout.split()[0])
    except (subprocess.SubprocessError, ValueError, IndexError) as error:
        log(f"  np.load of {path.name} failed: {error}")
        return None


@dataclass
class Loop:
    """A per-query loop timed on a slice, to extrapolate linearly."""

    label: str
    rows: int
    seconds: float
    max_rel_diff: float | None = None

    @property
    def per_query_s(self) -> float:
        return self.seconds / self.rows


def loop_gnmax(votes: NDArray[np.float64], orders: NDArray[np.float64]) -> NDArray[np.float64]:
    """The reference's shape: one (1, C) log q and one (1, K) RDP per query, summed."""
    total = np.zeros(orders.size)
    for i in range(votes.shape[0]):
        total += rdp_gnmax(logq_gnmax(votes[i : i + 1], SIGMA), SIGMA, orders)[0]
    return np.minimum(total, votes.shape[0] * rdp_gnmax_data_independent(SIGMA, orders))


def loop_confident(votes: NDArray[np.float64], orders: NDArray[np.float64]) -> NDArray[np.float64]:
    """Per query: the threshold step's RDP plus Pr[answered] times GNMax's."""
    total, answered = np.zeros(orders.size), 0.0
    for i in range(votes.shape[0]):
        row = votes[i : i + 1]
        log_pr = log_pr_answered_threshold(row, GLYPH_T, GLYPH_SIGMA1)
        pr = float(np.exp(log_pr[0]))
        total += rdp_threshold(logq_threshold(row, GLYPH_T, GLYPH_SIGMA1), GLYPH_SIGMA1, orders)[0]
        total += pr * rdp_gnmax(logq_gnmax(row, GLYPH_SIGMA2), GLYPH_SIGMA2, orders)[0]
        answered += pr
    independent = votes.shape[0] * rdp_threshold_data_independent(GLYPH_SIGMA1, orders)
    independent += answered * rdp_gnmax_data_independent(GLYPH_SIGMA2, orders)
    return np.minimum(total, independent)


def time_loop(
    label: str,
    info: Input,
    body: Callable[[NDArray[np.float64], NDArray[np.float64]], NDArray[np.float64]],
    pate_args: list[str],
    timeout: float,
) -> Loop:
    rows = min(LOOP_ROWS, info.num_queries)
    votes = np.array(np.load(info.path, mmap_mode="r")[:rows], dtype=np.float64)
    orders = DEFAULT_ORDERS.copy()
    body(votes[:10], orders)  # warm up imports and caches
    start = time.perf_counter()
    total = body(votes, orders)
    loop = Loop(label, rows, time.perf_counter() - start)
    # The loop must compute what pate computes, or its time says nothing.
    check = run_pate(["analyze", str(info.path), *pate_args, "--queries", str(rows)], timeout)
    if check.ok:
        rdp = np.array(json.loads(check.stdout)["data_dependent"]["rdp"])
        loop.max_rel_diff = float(np.max(np.abs(total - rdp) / np.abs(rdp)))
    else:
        log(f"  check of the {label} loop failed: {check.error}")
    log(
        f"  per-query loop ({label}): {rows} queries in {loop.seconds:.2f} s, "
        f"{loop.per_query_s * 1e6:.0f} us/query, max rel. diff vs pate {loop.max_rel_diff}"
    )
    return loop


# ---------------------------------------------------------------------------------------------
# Report


@dataclass
class Row:
    case: str
    shape: str
    num_queries: int
    file_mb: float
    distinct_rows: int
    ok: bool
    wall_s: float | None = None
    queries_per_s: float | None = None
    peak_mb: float | None = None
    np_load_s: float | None = None
    wall_over_load: float | None = None
    epsilon: float | None = None
    loop_estimate_s: float | None = None
    speedup: float | None = None
    error: str = ""
    extra: dict[str, Any] = field(default_factory=dict)


def measure(
    case: str,
    info: Input,
    args: list[str],
    timeout: float,
    repeat: int,
    loop: Loop | None,
) -> Row:
    log(f"{case}: pate {' '.join(args)}")
    shape = f"{_count(info.num_queries)}x{info.num_classes}x{info.num_teachers}"
    row = Row(case, shape, info.num_queries, info.megabytes, info.distinct_rows, ok=False)
    runs = [run_pate(args, timeout) for _ in range(repeat)]
    failed = [r for r in runs if not r.ok]
    if failed:
        row.error = failed[0].error
        log(f"  FAILED (exit {failed[0].returncode}): {row.error}")
        return row
    best = min(runs, key=lambda r: r.wall_s)
    row.ok = True
    row.wall_s = best.wall_s
    row.queries_per_s = info.num_queries / best.wall_s
    row.peak_mb = max((r.peak_mb for r in runs if r.peak_mb is not None), default=None)
    try:
        report = json.loads(best.stdout)
        if args[0] == "analyze":
            row.epsilon = report["data_dependent"]["epsilon"]
        else:
            # GNSS: the expected released epsilon (deterministic; the sampled one has noise).
            row.epsilon = report["epsilon_expected_release"]
            row.extra = {k: v for k, v in report.items() if isinstance(v, (int, float))}
    except (json.JSONDecodeError, KeyError, TypeError):
        pass
    loads = [t for t in (time_np_load(info.path, timeout) for _ in range(repeat)) if t]
    if loads:
        row.np_load_s = min(loads)
        row.wall_over_load = best.wall_s / row.np_load_s
    if loop is not None:
        row.loop_estimate_s = loop.per_query_s * info.num_queries
        row.speedup = row.loop_estimate_s / best.wall_s
    log(
        f"  {best.wall_s:.2f} s, peak {_fmt(row.peak_mb, '.0f')} MB, "
        f"np.load {_fmt(row.np_load_s, '.4f')} s"
    )
    return row


def _count(n: int) -> str:
    """1e7 for powers of ten, else the number: 12000."""
    power = len(str(n)) - 1
    return f"1e{power}" if n == 10**power and power > 2 else str(n)


def _fmt(value: float | None, spec: str) -> str:
    return "-" if value is None else format(value, spec)


COLUMNS = [
    ("case", "<", lambda r: r.case),
    ("Q x C x M", "<", lambda r: r.shape),
    ("MB", ">", lambda r: _fmt(r.file_mb, ".1f")),
    ("distinct", ">", lambda r: f"{r.distinct_rows:,}"),
    ("wall s", ">", lambda r: _fmt(r.wall_s, ".2f") if r.ok else "FAILED"),
    ("queries/s", ">", lambda r: _fmt(r.queries_per_s, ",.0f")),
    ("peak MB", ">", lambda r: _fmt(r.peak_mb, ".0f")),
    ("np.load s", ">", lambda r: _fmt(r.np_load_s, ".4f")),
    ("wall/load", ">", lambda r: _fmt(r.wall_over_load, ",.0f")),
    ("epsilon", ">", lambda r: _fmt(r.epsilon, ".4g")),
    ("loop est. s", ">", lambda r: _fmt(r.loop_estimate_s, ",.1f")),
    ("speed-up", ">", lambda r: "-" if r.speedup is None else f"{r.speedup:,.0f}x"),
]


def table(rows: list[Row]) -> str:
    cells = [[get(r) for _, _, get in COLUMNS] for r in rows]
    widths = [max(len(name), *(len(c[i]) for c in cells)) for i, (name, _, _) in enumerate(COLUMNS)]
    lines = ["  ".join(format(n, f"{a}{w}") for (n, a, _), w in zip(COLUMNS, widths, strict=True))]
    lines.append("  ".join("-" * w for w in widths))
    for c in cells:
        lines.append(
            "  ".join(
                format(v, f"{a}{w}") for v, (_, a, _), w in zip(c, COLUMNS, widths, strict=True)
            )
        )
    return "\n".join(lines)


def machine() -> dict[str, Any]:
    cpu = platform.processor() or platform.machine()
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    try:
        ram = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2**30
    except (ValueError, OSError, AttributeError):
        ram = float("nan")
    try:
        usable = len(os.sched_getaffinity(0))
    except AttributeError:
        usable = os.cpu_count() or 0
    import scipy

    import pate_cli

    return {
        "cpu": cpu,
        "cores": os.cpu_count(),
        "usable_cores": usable,
        "ram_gib": round(ram, 1),
        "os": f"{platform.system()} {platform.release()}",
        "python": platform.python_version(),
        "numpy": np.__version__,
        "scipy": scipy.__version__,
        "pate": pate_cli.__version__,
    }


# ---------------------------------------------------------------------------------------------
# Main


def parse_sizes(text: str) -> list[int]:
    try:
        sizes = sorted({int(float(s)) for s in text.split(",") if s.strip()})
    except ValueError:
        raise SystemExit(f"--sizes {text!r}: expected numbers such as 1e4,1e5") from None
    if not sizes or sizes[0] < 1:
        raise SystemExit(f"--sizes {text!r}: expected positive query counts")
    return sizes


def workdir_for(arg: str | None) -> tuple[Path, bool]:
    """The work directory and whether this script created it (then it may remove it)."""
    if arg is None:
        return Path(tempfile.mkdtemp(prefix="pate-bench-scale-", dir="/tmp")), True
    path = Path(arg).resolve()
    if path == REPO or REPO in path.parents:
        raise SystemExit(f"--workdir {arg}: refusing to write inside the repository {REPO}")
    created = not path.exists()
    path.mkdir(parents=True, exist_ok=True)
    return path, created


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__.splitlines()[0], formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument(
        "--quick", action="store_true", help="1e4 and 1e5 queries, a 2,000-query Glyph file"
    )
    parser.add_argument("--sizes", help="query counts of the GNMax files (default 1e4,...,1e7)")
    parser.add_argument("--glyph-queries", type=int, help="Glyph file queries (default 12000)")
    parser.add_argument("--workdir", help="where to write the inputs (default: a /tmp temp dir)")
    parser.add_argument("--keep", action="store_true", help="keep the inputs (and the temp dir)")
    parser.add_argument("--json", action="store_true", help="one JSON object on stdout")
    parser.add_argument(
        "--repeat", type=int, default=1, help="runs per case; the fastest is reported"
    )
    parser.add_argument("--timeout", type=float, default=3600.0, help="seconds per command")
    args = parser.parse_args()
    sizes = parse_sizes(args.sizes or ("1e4,1e5" if args.quick else "1e4,1e5,1e6,1e7"))
    glyph_queries = args.glyph_queries or (2000 if args.quick else 12000)
    repeat = max(1, args.repeat)
    workdir, created = workdir_for(args.workdir)

    info = machine()
    log(f"work directory: {workdir}")
    started = time.perf_counter()
    # The interpreter + import floor, fastest of 3 (the first also warms the file cache).
    startup = min((run_pate(["--version"], args.timeout) for _ in range(3)), key=lambda r: r.wall_s)
    rows: list[Row] = []
    loops: dict[str, Loop] = {}
    loop_source = max([s for s in sizes if s <= LOOP_SOURCE_ROWS], default=sizes[0])
    try:
        for n in sizes:
            for flavour, write in (("diverse", write_diverse), ("repetitive", write_repetitive)):
                log(f"generating {flavour} {n:,} x {CLASSES}")
                try:
                    data = write(workdir, n)
                except (OSError, MemoryError, ValueError) as error:
                    log(f"  generation FAILED: {error}")
                    continue
                if flavour == "diverse" and n == loop_source:
                    loops["gnmax"] = time_loop("gnmax", data, loop_gnmax, GNMAX_ARGS, args.timeout)
                pate_args = ["analyze", str(data.path), *GNMAX_ARGS]
                rows.append(
                    measure(f"gnmax/{flavour}", data, pate_args, args.timeout, repeat, None)
                )
                released = ["analyze", str(data.path), *GNMAX_RELEASE_ARGS]
                rows.append(
                    measure(f"gnmax/{flavour}+release", data, released, args.timeout, repeat, None)
                )
                if not args.keep:
                    data.path.unlink(missing_ok=True)
                    data.path.with_suffix(".json").unlink(missing_ok=True)
        # The loop is timed when its source file exists, after the smaller sizes ran: fill in.
        if "gnmax" in loops:
            for row in rows:
                row.loop_estimate_s = loops["gnmax"].per_query_s * row.num_queries
                row.speedup = row.loop_estimate_s / row.wall_s if row.wall_s else None

        log(f"generating glyph {glyph_queries:,} x {GLYPH_CLASSES}")
        glyph = write_glyph(workdir, glyph_queries)
        loops["confident"] = time_loop(
            "confident-gnmax",
            glyph,
            loop_confident,
            [*GLYPH_ARGS, "--json", "--no-release"],
            args.timeout,
        )
        glyph_analyze = ["analyze", str(glyph.path), *GLYPH_ARGS, "--json", "--no-release"]
        rows.append(
            measure("glyph/analyze", glyph, glyph_analyze, args.timeout, repeat, loops["confident"])
        )
        glyph_ss = [
            "smooth-sensitivity",
            str(glyph.path),
            *GLYPH_ARGS,
            "--seed",
            "0",
            "--json",
            "--skip-conditions",
        ]
        rows.append(
            measure("glyph/smooth-sensitivity", glyph, glyph_ss, args.timeout, repeat, None)
        )
    finally:
        if not args.keep:
            if created:
                shutil.rmtree(workdir, ignore_errors=True)
            else:
                for pattern in ("diverse_*", "repetitive_*", "glyph_*"):
                    for path in workdir.glob(pattern):
                        path.unlink(missing_ok=True)
    total = time.perf_counter() - started

    if args.json:
        print(
            json.dumps(
                {
                    "machine": info,
                    "startup": {"wall_s": startup.wall_s, "peak_mb": startup.peak_mb},
                    "loops": {
                        k: {**asdict(v), "per_query_s": v.per_query_s} for k, v in loops.items()
                    },
                    "rows": [asdict(r) for r in rows],
                    "total_s": total,
                },
                indent=1,
            )
        )
        return
    cores = f"{info['cores']} cores" + (
        f" ({info['usable_cores']} usable)" if info["usable_cores"] != info["cores"] else ""
    )
    print(f"machine: {info['cpu']}, {cores}, {info['ram_gib']} GiB RAM, {info['os']}")
    print(
        f"software: Python {info['python']}, numpy {info['numpy']}, scipy {info['scipy']}, "
        f"pate {info['pate']}"
    )
    print(
        f"start-up floor (pate --version in a fresh interpreter): {startup.wall_s:.2f} s, "
        f"peak RSS {_fmt(startup.peak_mb, '.0f')} MB"
    )
    for loop in loops.values():
        check = "" if loop.max_rel_diff is None else f", matches pate to {loop.max_rel_diff:.1e}"
        print(
            f"per-query loop ({loop.label}): {loop.per_query_s * 1e6:,.0f} us/query "
            f"(timed on {loop.rows:,} rows{check})"
        )
    print()
    print(table(rows))
    print()
    print(
        "wall: fresh process incl. start-up, fastest of --repeat; peak: VmHWM of the pate "
        "process; np.load: fresh process, page cache warm; loop est.: per-query loop x queries"
    )
    for row in rows:
        if not row.ok:
            print(f"{row.case} {row.shape} failed: {row.error}")
    print(f"total {total:.0f} s")


if __name__ == "__main__":
    main()

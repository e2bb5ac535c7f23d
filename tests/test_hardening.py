"""Hardening: extreme parameters through the CLI, and properties of the aggregators and bounds.

``pate analyze`` and ``pate aggregate`` must survive every value their flags accept: noise
scales from 1e-6 to 1e9 (and to the edges of the float range), thresholds below 0 and above
M, delta at 1e-300 and 1 - 1e-12, orders from 1.0000001 to 1e6, a single query, 10 million
teachers, both conversions. The outcome is a JSON object whose numbers are finite and >= 0,
with the data-dependent epsilon never above the data-independent one, or a one-line usage
error (exit 2). Never NaN, never a negative epsilon, never a crash (exit 70).

Where "inf" is allowed, and why: an epsilon is printed as "inf" only when it is infinite or
beyond float64 (a data-independent lambda / sigma^2 with sigma^2 < 1e-308, or eps = 2 gamma
> 1.8e308). Those are honest: the alternative, a large finite number, would understate the
cost, and 0 or a small number would be a privacy bug. The improved conversion's per-order
curve is also "inf" at orders <= 1.01, where dp_accounting does not evaluate it; the best
epsilon is then taken from the other orders.

Regression tests name the bug they pin: a release whose C5/C6 search interval underflows,
sigma whose square leaves the float range, 0 answers times an infinite per-answer cost,
np.isclose's absolute tolerance calling a 1e-275 cost data-independent, and the noise of
an aggregator overflowing at sigma near the float limit.

The hypothesis properties cover what ``test_properties.py`` does not: the aggregators (labels
in [-1, C), answered mask consistent with labels and branches, stop conditions as prefixes)
and the monotonicity in q of the LNMax, GNMax and threshold RDP bounds.
"""

from __future__ import annotations

import io
import json
import math
import re
import warnings
import zipfile
from typing import Any

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from pate_cli.core.gnmax import logq_gnmax, rdp_gnmax, rdp_gnmax_data_independent
from pate_cli.core.lnmax import logq_lnmax, rdp_lnmax
from pate_cli.core.threshold import logq_threshold, rdp_threshold
from pate_cli.errors import ExitCode, InputError
from pate_cli.mechanisms.aggregators import (
    aggregate_confident_gnmax,
    aggregate_gnmax,
    aggregate_interactive_gnmax,
    aggregate_lnmax,
)
from pate_cli.mechanisms.samplers import Branch
from pate_cli.orders import DEFAULT_ORDERS
from pate_cli.votes import load_array
from tests.conftest import MNIST, run_cli

# ------------------------------------------------------------------------------ inputs

TEN_MILLION = 10**7


@pytest.fixture(scope="module")
def files(tmp_path_factory) -> dict[str, str]:
    """Votes and baselines: 30 MNIST queries, one query, and 20 queries of 10**7 teachers."""
    folder = tmp_path_factory.mktemp("extremes")
    mnist = np.load(MNIST)[:30]
    rng = np.random.default_rng(7)
    huge = rng.multinomial(TEN_MILLION, rng.dirichlet(np.full(10, 0.3), 20))
    huge[0, :2] = huge[0, :2].sum() // 2  # a tie: q = 1/2 even with tiny noise
    huge[0, 2] += TEN_MILLION - huge[0].sum()
    arrays = {
        "mnist": mnist,
        "single": mnist[:1],
        "huge": huge,
        "tie": np.array([[125, 125, 0], [250, 0, 0]]),
        "mnist-baseline": np.full((30, 10), 0.1),
        "single-baseline": np.full((1, 10), 0.1),
        "huge-baseline": rng.dirichlet(np.ones(10), 20),
    }
    paths = {}
    for name, array in arrays.items():
        paths[name] = str(folder / f"{name}.npy")
        np.save(paths[name], array)
    assert np.all(huge.sum(axis=1) == TEN_MILLION)
    return paths


# ------------------------------------------------------------------- checking the JSON


def _walk(node: Any, path: str = "") -> list[tuple[str, Any]]:
    if isinstance(node, dict):
        return [item for key, value in node.items() for item in _walk(value, f"{path}.{key}")]
    if isinstance(node, list):
        return [item for i, value in enumerate(node) for item in _walk(value, f"{path}[{i}]")]
    return [(path, node)]


def _as_float(value: Any) -> float:
    assert value == "inf" or isinstance(value, (int, float)), value
    return math.inf if value == "inf" else float(value)


def check_analysis(stdout: str, *, allow_inf: bool = False) -> dict[str, Any]:
    """The contract on one analysis' JSON; returns it.

    Without ``allow_inf``, "inf" may appear only where the improved conversion is evaluated at
    an order <= 1.01 (dp_accounting's convention): the per-order curve, and the release fields
    when the release order is that close to 1.
    """
    assert "NaN" not in stdout and "Infinity" not in stdout and '"nan"' not in stdout.lower()
    report = json.loads(stdout)
    orders = np.array(report["orders"], dtype=float)
    near_one = report["conversion"] == "improved"
    release = report.get("release") or {}
    for path, value in _walk(report):
        if isinstance(value, float):
            assert math.isfinite(value), path
        name = path.rsplit(".", 1)[-1].split("[")[0]
        if (
            value is None
            or isinstance(value, bool)
            or name == "local_sensitivity_bound"  # which bound: a name, checked in test_ls_cells
            or not any(word in name for word in ("epsilon", "rdp", "eps", "cost", "sensitivity"))
        ):
            continue
        number = _as_float(value)
        assert number >= 0, (path, value)
        if number == math.inf and not allow_inf:
            if path.startswith(".release."):
                assert near_one and release["order"] <= 1.01, path
            else:
                assert path.endswith("]") and ".eps[" in path, path
                index = int(path.rsplit("[", 1)[1].rstrip("]"))
                assert near_one and orders[index] <= 1.01, path
    dependent, independent = report["data_dependent"], report["data_independent"]
    assert _as_float(dependent["epsilon"]) <= _as_float(independent["epsilon"])
    rdp_dd = np.array([_as_float(v) for v in dependent["rdp"]])
    rdp_di = np.array([_as_float(v) for v in independent["rdp"]])
    assert rdp_dd.shape == rdp_di.shape == orders.shape
    assert np.all(rdp_dd <= rdp_di)
    if not allow_inf:
        assert math.isfinite(dependent["epsilon"]) and math.isfinite(independent["epsilon"])
    return report


# -------------------------------------------------------- analyze: the extreme matrix

LNMAX = ["--gamma", 0.05]


def confident(kind: str, threshold: float = 200, sigma1: float = 150, sigma: float = 40):
    """Flags of Confident-GNMax, or of Interactive-GNMax with the votes' baseline."""
    flags = ["--threshold", threshold, "--sigma1", sigma1, "--sigma", sigma]
    return flags + (["--baseline", "{baseline}"] if kind == "interactive" else [])


MECHANISMS = {
    "gnmax": ["--sigma", 40],
    "confident": confident("confident"),
    "interactive": confident("interactive"),
    "lnmax": LNMAX,
}


def _cases() -> list[Any]:
    cases = []

    def add(name, votes, mechanism, extra=(), marks=()):
        cases.append(pytest.param(votes, list(mechanism), list(extra), id=name, marks=marks))

    for scale in (1e-6, 1e9):
        add(f"gnmax-sigma-{scale:g}", "mnist", ["--sigma", scale])
        add(f"gnmax-sigma-{scale:g}-no-release", "mnist", ["--sigma", scale], ["--no-release"])
        for kind in ("confident", "interactive"):
            add(f"{kind}-sigma1-{scale:g}", "mnist", confident(kind, sigma1=scale))
            add(f"{kind}-sigma-{scale:g}", "mnist", confident(kind, sigma=scale))
            name = f"{kind}-sigma-{scale:g}-no-release"
            add(name, "mnist", confident(kind, sigma=scale), ["--no-release"])
    for gamma in (1e-9, 1e6):
        add(f"lnmax-gamma-{gamma:g}", "mnist", ["--gamma", gamma])
    for threshold in (-1e6, -5, 251, 1e12):  # below 0 and above M = 250
        for kind in ("confident", "interactive"):
            add(f"{kind}-threshold-{threshold:g}", "mnist", confident(kind, threshold))
    for kind, flags in MECHANISMS.items():
        for delta in (1e-300, 1 - 1e-12):
            add(f"{kind}-delta-{delta:g}", "mnist", flags, ["--delta", delta])
        for orders in ("1.0000001,1.001,1.5", "2,1000,1000000"):
            add(f"{kind}-orders-{orders}", "mnist", flags, ["--orders", orders])
        add(f"{kind}-single-query", "single", flags, ["--delta", 1e-300])
    for name, flags in {
        "gnmax": ["--sigma", 1e4],
        "gnmax-tiny": ["--sigma", 1e-6],
        "gnmax-huge": ["--sigma", 1e9],
        "confident": confident("confident", 5e6, 1e5, 1e4),
        "interactive": confident("interactive", 1e6, 1e5, 1e4),
        "lnmax": ["--gamma", 1e-3],
        "lnmax-huge": ["--gamma", 1e6],
    }.items():
        # --no-release: the GNSS release of 10**7 teachers takes ~14 s and 4.5 GB (reported).
        orders = ["--orders", "1.0000001,1.5,2,32,1000,1000000", "--no-release"]
        add(f"{name}-ten-million", "huge", flags, orders)
    return cases


@pytest.mark.parametrize("conversion", ["classic", "improved"])
@pytest.mark.parametrize(("votes", "mechanism", "extra"), _cases())
def test_analyze_extreme_parameters(files, votes, mechanism, extra, conversion):
    baseline = files[f"{votes}-baseline"]
    flags = [baseline if flag == "{baseline}" else flag for flag in [*mechanism, *extra]]
    if "--delta" not in flags:
        flags += ["--delta", 1e-5]
    args = ["analyze", files[votes], *flags, "--conversion", conversion, "--seed", 0, "--json"]
    report = check_analysis(run_cli(args).stdout)
    assert report["conversion"] == conversion
    if votes == "huge":
        assert report["input"]["num_teachers"] == TEN_MILLION


def test_tiny_noise_makes_a_clear_plurality_free_and_a_tie_expensive(files):
    """With sigma = 1e-6 the data-dependent cost of a clear winner is ~0 but a tie pays 1/sigma^2."""
    orders = ["--orders", "2,32", "--no-release", "--json"]
    clear = run_cli(["analyze", files["single"], "--sigma", 1e-6, "--delta", 1e-5, *orders]).json
    assert clear["data_dependent"]["rdp"] == [0.0, 0.0]
    tie = run_cli(["analyze", files["tie"], "--sigma", 1e-6, "--delta", 1e-5, *orders]).json
    assert tie["data_dependent"]["rdp"][0] == pytest.approx(2 / 1e-12, rel=1e-12)


# --------------------------------------------------- an infinite cost is printed as "inf"


@pytest.mark.parametrize(
    ("votes", "flags", "dependent"),
    [
        ("tie", ["--sigma", 1e-200], "inf"),  # the tie has q = 1/2: lambda / sigma^2 = inf
        ("single", ["--sigma", 1e-200], "finite"),  # a clear winner: q = 0, no cost
        ("tie", ["--sigma", 5e-324], "inf"),
        # Top votes 125 and 250, sigma1 = 1e-200: T = 100 is passed surely (q = 0, cost 0)
        # but T = 125 is met with probability 1/2: its threshold step costs inf.
        ("tie", ["--threshold", 100, "--sigma1", 1e-200, "--sigma", 40], "finite"),
        ("tie", ["--threshold", 125, "--sigma1", 1e-200, "--sigma", 40], "inf"),
        ("tie", ["--gamma", 1.7e308], "inf"),  # eps = 2 gamma overflows
    ],
)
def test_infinite_cost_is_inf_never_a_small_number(files, votes, flags, dependent):
    args = ["analyze", files[votes], *flags, "--delta", 1e-5, "--no-release", "--json"]
    report = check_analysis(run_cli(args).stdout, allow_inf=True)
    assert report["data_independent"]["epsilon"] == "inf"
    if dependent == "inf":
        assert report["data_dependent"]["epsilon"] == "inf"
    else:
        assert math.isfinite(report["data_dependent"]["epsilon"])


@pytest.mark.parametrize("sigma", [1e200, 1e-200])
def test_sigma_beyond_the_float_range_of_its_square(files, sigma):
    """Regression: a Python sigma**2 raised OverflowError (1e200) or divided by 0 (1e-200)."""
    args = ["analyze", files["mnist"], "--sigma", sigma, "--delta", 1e-5, "--no-release"]
    report = check_analysis(run_cli([*args, "--json"]).stdout, allow_inf=True)
    if sigma > 1:  # the whole cost underflows to 0: only the conversion's log(1/delta) term
        assert max(report["data_independent"]["rdp"]) == 0.0
        assert report["data_independent"]["epsilon"] == pytest.approx(math.log(1e5) / 499.0)
    else:  # lambda / sigma^2 overflows: "inf", while the clear winners cost nothing
        assert report["data_independent"]["epsilon"] == "inf"
        assert math.isfinite(report["data_dependent"]["epsilon"])


@pytest.mark.parametrize("sigma", [1e200, 1e-200])
def test_release_with_sigma_beyond_the_float_range(files, sigma):
    args = ["analyze", files["mnist"], "--sigma", sigma, "--delta", 1e-5, "--seed", 0, "--json"]
    check_analysis(run_cli(args).stdout, allow_inf=True)


def test_nothing_answered_with_an_infinite_answer_cost(files):
    args = ["analyze", files["mnist"], "--threshold", 1e6, "--sigma1", 1, "--sigma", 1e-160]
    report = run_cli([*args, "--delta", 1e-5, "--no-release", "--json"]).json
    assert report["expected_answered"] == 0.0
    assert math.isfinite(report["data_independent"]["epsilon"])


def test_release_does_not_call_a_tiny_cost_data_independent(tmp_path):
    votes = tmp_path / "votes.npy"
    np.save(votes, np.array([[10**6, 0, 0], [999_000, 1000, 0]]))  # M = 10**6
    args = ["analyze", votes, "--sigma", 2e4, "--delta", 1e-5, "--orders", "2,3", "--seed", 0]
    report = run_cli([*args, "--json"]).json
    assert max(report["data_dependent"]["rdp"]) < 1e-200 < min(report["data_independent"]["rdp"])
    assert report["release"]["data_independent_steps"]["gnmax"] is False


# ------------------------------------------------------------- usage errors at the edges


@pytest.mark.parametrize(
    ("flags", "words"),
    [
        (["--sigma", 0, "--delta", 1e-5], "--sigma"),
        (["--sigma", "inf", "--delta", 1e-5], "--sigma"),
        (["--sigma", "nan", "--delta", 1e-5], "--sigma"),
        (["--gamma", 0, "--delta", 1e-5], "--gamma"),
        (["--gamma", "inf", "--delta", 1e-5], "--gamma"),
        (["--threshold", "nan", "--sigma1", 1, "--sigma", 1, "--delta", 1e-5], "--threshold"),
        (["--threshold", "-inf", "--sigma1", 1, "--sigma", 1, "--delta", 1e-5], "--threshold"),
        (["--threshold", 1, "--sigma1", 0, "--sigma", 1, "--delta", 1e-5], "--sigma1"),
        (["--sigma", 40, "--delta", 0], "--delta"),
        (["--sigma", 40, "--delta", 1], "--delta"),
        (["--sigma", 40, "--delta", "nan"], "--delta"),
        (["--sigma", 40, "--delta", 1e-5, "--orders", "1"], "--orders"),
        (["--sigma", 40, "--delta", 1e-5, "--orders", "0.5,2"], "--orders"),
        (["--sigma", 40, "--delta", 1e-5, "--orders", "2,inf"], "--orders"),
        (["--sigma", 40, "--delta", 1e-5, "--orders", "2,1e309"], "--orders"),
        (["--sigma", 40, "--delta", 1e-5, "--orders", "2,nan"], "--orders"),
        (["--sigma", 40, "--delta", 1e-5, "--orders", "1:2:1e-9"], "--orders"),
    ],
)
def test_values_outside_the_domain_are_one_line_usage_errors(files, flags, words):
    result = run_cli(["analyze", files["mnist"], *flags, "--json"], expect=ExitCode.BAD_INPUT)
    assert result.stdout == ""
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("pate: error:") and words in lines[0]


# ------------------------------------------------------------------ aggregate at the edges


@pytest.mark.parametrize(
    "flags",
    [
        ["--sigma", 1e-6],
        ["--sigma", 1e9],
        ["--sigma", 1e300],
        ["--gamma", 1e6],
        ["--gamma", 1e300],
        ["--gamma", 1e-9],
        ["--threshold", -1e9, "--sigma1", 1e-6, "--sigma", 1e9],
        ["--threshold", 1e12, "--sigma1", 1e9, "--sigma", 1e-6],
        ["--threshold", 5, "--sigma1", 1e-6, "--sigma", 1e-6, "--student-probs", "{probs}"],
        ["--threshold", 5, "--sigma1", 1e9, "--sigma", 1e9, "--student-probs", "{probs}"],
    ],
    ids=lambda flags: " ".join(str(f) for f in flags if f != "{probs}"),
)
@pytest.mark.parametrize("votes", ["mnist", "huge"])
def test_aggregate_extreme_parameters_writes_valid_labels(files, tmp_path, votes, flags):
    probs = files[f"{votes}-baseline"] if votes == "huge" else files["mnist-baseline"]
    flags = [probs if flag == "{probs}" else flag for flag in flags]
    output = tmp_path / "labels.npy"
    args = ["aggregate", files[votes], *flags, "--delta", 1e-5, "--seed", 3, "--output", output]
    result = run_cli([*args, "--student-confidence", 0.05, "--json"])
    report = json.loads(result.stdout)
    labels = np.load(output)
    counts = np.load(files[votes])
    assert labels.dtype == np.int64 and labels.shape == (counts.shape[0],)
    assert np.all((labels >= -1) & (labels < counts.shape[1]))
    assert report["answered"] == int(np.count_nonzero(labels >= 0)) - report["student_labelled"]
    check_analysis(json.dumps(report["privacy"]), allow_inf=False)
    if flags[:2] == ["--sigma", 1e-6]:  # noise far below the gaps: the plurality, exactly
        assert np.array_equal(labels, counts.argmax(axis=1))
    if flags[:2] == ["--threshold", 1e12]:  # nobody reaches the threshold
        assert np.all(labels == -1) and report["answered"] == 0


def test_aggregate_with_sigma_at_the_float_limit(files, tmp_path):
    args = ["aggregate", files["mnist"], "--sigma", 1.7e308, "--delta", 1e-5, "--seed", 3]
    run_cli([*args, "--output", tmp_path / "labels.npy", "--json"])


# ------------------------------------------------- regression tests of the core fixes


def test_core_accepts_sigma_beyond_the_float_range_of_its_square():
    """sigma**2 used to raise OverflowError or divide by zero inside gnmax and threshold."""
    counts = np.array([[125.0, 125.0, 0.0], [250.0, 0.0, 0.0]])
    orders = np.array([2.0, 50.0])
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        for sigma in (1e-200, 1e200, 5e-324, 1.7e308):
            logq = logq_gnmax(counts, sigma)
            assert not np.isnan(logq).any()
            rdp = rdp_gnmax(logq, sigma, orders)
            assert np.all(rdp >= 0) and np.all(rdp <= rdp_gnmax_data_independent(sigma, orders))
            logq_step1 = logq_threshold(counts, -1.7e308, sigma)
            assert np.all(rdp_threshold(logq_step1, sigma, orders) >= 0)
        tiny = rdp_gnmax(logq_gnmax(counts, 1e-200), 1e-200, orders)
        assert np.all(tiny[0] == np.inf) and np.all(tiny[1] == 0)  # tie: inf; clear winner: 0
        assert np.all(rdp_gnmax_data_independent(1e200, orders) == 0)


def test_core_accepts_huge_gamma():
    """e^eps overflowed (a RuntimeWarning) in rdp_lnmax; a gap beyond 1e308 made log q NaN."""
    counts = np.array([[125.0, 125.0, 0.0], [250.0, 0.0, 0.0], [200.0, 50.0, 0.0]])
    orders = np.array([1.5, 2.0, 50.0])
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        for gamma in (1e6, 1e300, 1.7e308):
            logq = logq_lnmax(counts, gamma)
            # The tie: one other class at gap 0 gives q <= 1/2; the third is at gap 125.
            assert not np.isnan(logq).any() and logq[0] == pytest.approx(math.log(0.5))
            rdp = rdp_lnmax(logq, gamma, orders)
            assert np.all(rdp >= 0) and not np.isnan(rdp).any()
        # gamma = 1e6: the q of the clear rows is e^(-5e7): Theorem 3 applies, RDP ~ 0.
        assert np.all(rdp_lnmax(logq_lnmax(counts, 1e6), 1e6, orders)[1:, :2] == 0)
        # q = 0 exactly is a fixed outcome, also when eps = 2 gamma is infinite.
        assert np.all(rdp_lnmax(np.array([-np.inf]), 1.7e308, orders) == 0)


@pytest.mark.parametrize(
    "header",
    [
        "{'descr': ('<f8',), 'fortran_order': False, 'shape': (2,), }",  # IndexError in numpy
        "{'descr': '<f8', 'fortran_order': False, 'shape': (0, 1000000000000000000000), }",
    ],
)
def test_loader_rejects_headers_that_crashed_numpy(tmp_path, header):
    """Found by tests/test_fuzz.py: both raised a non-InputError from numpy."""
    path = tmp_path / "votes.npy"
    path.write_bytes(_npy_with_header(header) + b"\0" * 16)
    with pytest.raises(InputError, match="corrupt .npy header"):
        load_array(path, "votes")


@pytest.mark.parametrize("dims", [(1,) * 65, (0,) * 70])
def test_loader_rejects_npz_member_with_too_many_dimensions(tmp_path, dims):
    """Found by tests/test_fuzz.py: numpy's reshape raised ValueError outside the npz guard."""
    path = tmp_path / "votes.npz"
    header = f"{{'descr': '<f8', 'fortran_order': False, 'shape': {dims}, }}"
    with zipfile.ZipFile(path, "w") as archive:
        archive.writestr("votes.npy", _npy_with_header(header) + b"\0" * 8)
    with pytest.raises(InputError, match=f"^{re.escape(str(path))}"):
        load_array(path, "votes")


def test_loader_rejects_zip_member_name_cut_to_nothing(tmp_path):
    """Found by tests/test_fuzz.py: a NUL byte starting a member's name in the central
    directory makes zipfile's ZipInfo.is_dir() raise IndexError."""
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as archive:
        archive.writestr("dir2/", b"")
    data = buffer.getvalue()
    central = data.rindex(b"dir2/")  # the name's second copy, in the central directory
    path = tmp_path / "votes.npz"
    path.write_bytes(data[:central] + b"\x00" + data[central + 1 :])
    with pytest.raises(InputError, match="corrupt .npz archive"):
        load_array(path, "votes")


def _npy_with_header(header: str) -> bytes:
    text = header.encode("latin1")
    text += b" " * ((64 - (10 + len(text) + 1) % 64) % 64) + b"\n"
    return b"\x93NUMPY\x01\x00" + len(text).to_bytes(2, "little") + text


# ------------------------------------------------------------- properties: aggregators


def _votes_and_probs(num_queries: int, num_classes: int, seed: int):
    """Vote histograms (Q, C) from a few to hundreds of teachers, and student probabilities."""
    rng = np.random.default_rng(seed)
    alpha = rng.choice([0.1, 1.0, 10.0])
    teachers = int(rng.integers(1, 300))
    counts = rng.multinomial(teachers, rng.dirichlet(np.full(num_classes, alpha)), num_queries)
    return counts.astype(np.float64), rng.dirichlet(np.ones(num_classes), num_queries)


scales = st.floats(1e-3, 1e4)
limits = st.none() | st.integers(0, 16)


@given(
    st.integers(1, 15),
    st.integers(1, 8),
    st.sampled_from(["lnmax", "gnmax", "confident", "interactive"]),
    scales,
    scales,
    st.floats(-50.0, 400.0),
    st.floats(0.0, 1.0),
    st.integers(0),
    limits,
    limits,
)
def test_aggregator_outputs_are_consistent(
    num_queries, num_classes, name, scale, sigma1, threshold, confidence, seed, max_answered, cap
):
    max_queries = cap
    counts, probs = _votes_and_probs(num_queries, num_classes, seed)

    def run(**limit):
        rng = np.random.default_rng(seed)
        if name == "lnmax":
            return aggregate_lnmax(counts, 1 / scale, rng, **limit)
        if name == "gnmax":
            return aggregate_gnmax(counts, scale, rng, **limit)
        if name == "confident":
            return aggregate_confident_gnmax(counts, threshold, sigma1, scale, rng, **limit)
        return aggregate_interactive_gnmax(
            counts, probs, threshold, sigma1, scale, confidence, rng, **limit
        )

    result = run(max_answered=max_answered, max_queries=max_queries)
    full = run()
    labels, answered, seen, branch = result.labels, result.answered, result.seen, result.branch
    assert labels.dtype == np.int64 and labels.shape == (num_queries,)
    assert np.all((labels >= -1) & (labels < num_classes))
    # The answered mask, the branches and the labels tell the same story.
    assert np.array_equal(answered, branch == Branch.TEACHERS)
    assert np.all(labels[answered] >= 0)
    student = branch == Branch.STUDENT
    assert np.array_equal(labels >= 0, answered | student)
    assert np.array_equal(labels[student], probs.argmax(axis=1)[student])
    if name in ("lnmax", "gnmax"):
        assert np.array_equal(answered, seen) and not student.any()
    if name != "interactive":
        assert not student.any()
    # Seen queries are a prefix, and the stop conditions only cut the unlimited run short.
    num_seen = result.num_seen
    assert np.array_equal(seen, np.arange(num_queries) < num_seen)
    assert np.all(labels[~seen] == -1) and not answered[~seen].any()
    assert np.array_equal(labels[:num_seen], full.labels[:num_seen])
    assert np.array_equal(branch[:num_seen], full.branch[:num_seen])
    if max_queries is not None:
        assert num_seen <= max_queries
    if max_answered is not None:
        assert result.num_answered <= max_answered
    if num_seen < num_queries and (max_queries is None or num_seen < max_queries):
        # Stopped by max_answered: right after the answer that reached it.
        assert max_answered is not None and result.num_answered == max_answered
        assert num_seen == 0 or answered[num_seen - 1] or max_answered == 0


# ------------------------------------------------------ properties: RDP monotone in q

ORDERS = np.concatenate([DEFAULT_ORDERS[::13], [1.0001, 1.01, 1.5, 1e3, 1e6]])


def _with_log_uniform(edge: float, seed: int) -> np.ndarray:
    """One drawn log q (hypothesis finds the edges: 0, -0.0, the regime changes below -50)
    and 16 log-uniform ones from a drawn seed: dense coverage for a small drawing cost."""
    spread = -(10.0 ** np.random.default_rng(seed).uniform(-8, 6, 16))
    return np.sort(np.append(spread, edge))


def _non_decreasing_rows(rdp: np.ndarray) -> bool:
    """Each row (a larger q) >= the one before, up to rounding (1e-12 relative, 1e-300)."""
    return bool(np.all(rdp[:-1] <= rdp[1:] * (1 + 1e-12) + 1e-300))


@given(st.floats(0.1, 5000.0), st.floats(1e-4, 50.0), st.floats(-60.0, 0.0), st.integers(0))
def test_rdp_bounds_are_non_decreasing_in_q(sigma, gamma, edge, seed):
    """GNMax (Theorem 6), LNMax (Theorem 3) and the threshold step: more q never costs less.

    The threshold step's q is min(p, 1 - p) for p = Pr[answered], at most 1/2. Above q0
    the bounds sit on the data-independent plateau, which is the largest value, so the
    property holds over the whole range of q.
    """
    logq = _with_log_uniform(edge, seed)
    assert _non_decreasing_rows(rdp_gnmax(logq, sigma, ORDERS))
    assert _non_decreasing_rows(rdp_lnmax(logq, gamma, ORDERS))
    below_half = np.minimum(logq, math.log(0.5))  # the less likely outcome: q <= 1/2
    assert _non_decreasing_rows(rdp_threshold(below_half, sigma, ORDERS))

"""The release walks only the distances that can change its smooth sensitivity (core.horizon).

Against the full walk: on the Table-2 files and the Glyph-like votes, the walked distances'
totals are the full walk's bit for bit, past them W bounds the full walk and every e^(-beta d)
W is below the smooth sensitivity at every beta the release reads, and every figure the
release prints is the full walk's. Then the blocks of a release, the range schedule, the stop
itself, and the memory of a release on many teachers. The brute-force oracles hold the stop
to the truth on every small histogram (tests/oracle/test_release_oracles.py,
test_soundness.py).
"""

from __future__ import annotations

import math
import tracemalloc

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import pate_cli as pate
from pate_cli.choices import Conversion
from pate_cli.core import ls_cells
from pate_cli.core.conditions import check_conditions
from pate_cli.core.horizon import Horizon, distance_ranges, stop_distance
from pate_cli.core.ls_cells import plan_cells
from pate_cli.core.ls_gnmax import _canonical_rows, walk_plan
from pate_cli.core.ls_lnmax import LnmaxSensitivity
from pate_cli.core.ls_tilde import _GnmaxSensitivity
from pate_cli.core.smooth import (
    beta_grid,
    local_sensitivity_total,
    local_sensitivity_walked,
    optimal_gnss_parameters,
    smooth_sensitivity,
)
from pate_cli.release import gnss, laplace
from tests.conftest import REFERENCE, reference_json
from tests.core.test_ls_cells import vote_files
from tests.oracle.strategies import EXAMPLES

STEMS = ["mnist_like", "svhn_like", "adult_like", "glyph_like", "interactive_glyph_like"]


def _case(stem: str) -> dict:
    """The reference's smooth-sensitivity case of a file: its votes, M, parameters, order."""
    data = reference_json(f"{stem}.expected.json")
    case = next(c for c in data["cases"] if c["kind"] == "smooth_sensitivity")
    p = case["params"]
    votes = np.load(REFERENCE / data["votes_file"]).astype(np.float64)
    baseline = np.load(REFERENCE / data["baseline_file"]) if p["baseline"] else None
    teachers = p["teachers"] or int(votes.sum(axis=1).max())
    return {
        "votes": votes,
        "baseline": baseline,
        "M": teachers,
        "threshold": p["threshold"],
        "sigma1": p["sigma1"],
        "sigma": p["sigma2"],
        "delta": p["delta"],
        "order": case["result"]["order"],
    }


def _options(case: dict) -> dict:
    """local_sensitivity_total's options as the release passes them (C6 where it holds)."""
    options = {
        "threshold": case["threshold"],
        "sigma1": case["sigma1"],
        "increments_verified": all(
            check_conditions(case["sigma"], case["votes"].shape[1], case["order"])
        ),
        "threshold_sensitivity": 1,
    }
    if case["baseline"] is not None:
        options["step1_votes"] = case["votes"] - case["baseline"]
        options["half_even"] = True
        options["threshold_sensitivity"] = 2
    return options


@pytest.mark.parametrize("walk", [False, True], ids=["tabulated", "walk"])
@pytest.mark.parametrize("stem", STEMS)
def test_the_walked_totals_are_the_full_walks(stem, walk):
    """Distances 0 .. n-1 equal the full walk's bit for bit; past them the full walk is at most
    W, and e^(-beta d) W < SS(beta) at every d past the walk and every beta of the grid (the
    module's inequality): SS and the chosen (beta, SS, sigma_ss) are the full walk's."""
    case = _case(stem)
    order, sigma, teachers = case["order"], case["sigma"], case["M"]
    options = {**_options(case), "walk": walk}
    full = local_sensitivity_total(case["votes"], teachers, order, sigma, **options)
    betas = beta_grid(order)
    start = Horizon.start(float(betas.min()), teachers, case["votes"].shape[0])
    horizon = local_sensitivity_walked(case["votes"], teachers, order, sigma, start, **options)
    walked = horizon.total
    assert walked.size == horizon.walked
    assert walk or walked.size < teachers  # the exact walk's W is Prop. 8's, looser
    np.testing.assert_array_equal(walked, full[: walked.size])
    assert np.all(full[walked.size :] <= horizon.bound * (1 + 1e-12))
    past = np.arange(walked.size, teachers)
    for beta in betas:
        smooth = smooth_sensitivity(full, beta)
        assert smooth_sensitivity(walked, beta) == smooth
        assert np.all(np.exp(-beta * past) * horizon.bound < smooth)
    rdp = 1.0
    assert optimal_gnss_parameters(walked, rdp, order) == optimal_gnss_parameters(full, rdp, order)


# How far the walk goes at each file's reference order (of 250 and 5000 distances).
WALKED = {"mnist_like": 93, "svhn_like": 62, "adult_like": 62, "glyph_like": 534}


@pytest.mark.parametrize("stem", list(WALKED))
def test_the_walk_stops_near_its_bound(stem):
    """The walk ends at the first range past S (the least d' + ln(W / LS(d')) / beta_min),
    not a range later: at the previous range's end S was not yet passed."""
    case = _case(stem)
    order, teachers = case["order"], case["M"]
    beta = float(beta_grid(order).min())
    start = Horizon.start(beta, teachers, case["votes"].shape[0])
    horizon = local_sensitivity_walked(
        case["votes"], teachers, order, case["sigma"], start, **_options(case)
    )
    assert horizon.walked == WALKED[stem]
    ends = [stop for _, stop in distance_ranges(teachers)]
    previous = ends[ends.index(horizon.walked) - 1]
    assert stop_distance(horizon.total[:previous], horizon.bound, beta) >= previous
    assert stop_distance(horizon.total, horizon.bound, beta) < horizon.walked


def _release(stem: str, monkeypatch, *, full: bool, chunk: int = 1 << 16, **options) -> dict:
    """``pate.smooth_sensitivity`` of a file's case: as the release walks, or with ``full``
    over every distance (a smallest beta of 0 never stops)."""
    if full:
        for module in (gnss, laplace):
            monkeypatch.setattr(module, "smallest_beta", lambda draw, order: 0.0)
    case = _case(stem)
    mechanism = options.pop("mechanism", None) or pate.ConfidentGNMax(
        case["threshold"], case["sigma1"], case["sigma"]
    )
    report = pate.smooth_sensitivity(
        pate.load_votes(case["votes"], format="counts", teachers=case["M"]),
        mechanism,
        delta=case["delta"],
        baseline=case["baseline"],
        half_even=case["baseline"] is not None,
        seed=0,
        **options,
    )
    monkeypatch.undo()
    return report.to_dict()


RELEASES = [
    ("mnist_like", {}),
    ("mnist_like", {"walk_local_sensitivity": True}),
    ("mnist_like", {"sigma_ss": 6.0}),
    ("mnist_like", {"beta": 0.02, "sigma_ss": 6.0}),
    ("mnist_like", {"mechanism": pate.GNMax(40)}),
    ("mnist_like", {"mechanism": pate.LNMax(0.05)}),
    ("svhn_like", {}),
    ("adult_like", {}),
    ("glyph_like", {}),
    ("interactive_glyph_like", {}),
]


@pytest.mark.parametrize(("stem", "options"), RELEASES)
def test_every_printed_figure_is_the_full_walks(stem, options, monkeypatch):
    """The release's report, every field (the smooth sensitivity, beta, sigma_ss, the GNSS
    cost, the expected and the sampled released epsilon), equals the full walk's exactly."""
    walked = _release(stem, monkeypatch, full=False, **dict(options))
    full = _release(stem, monkeypatch, full=True, **dict(options))
    assert walked == full
    assert walked["released"] and walked["smooth_sensitivity"] > 0


@pytest.mark.parametrize(("stem", "options"), RELEASES)
def test_the_release_stops_past_every_beta_it_reads(stem, options, monkeypatch):
    """The release's own walk: at every beta it reads (the grid, or the beta given) and every
    distance past the walk, e^(-beta d) W is below the smooth sensitivity of what it walked."""
    captured = []
    sampled = gnss.sampled

    def capture(walked, fields, *rest):
        captured.append((walked, fields["order"]))
        return sampled(walked, fields, *rest)

    for module in (gnss, laplace):
        monkeypatch.setattr(module, "sampled", capture)
    _release(stem, monkeypatch, full=False, **dict(options))
    ((horizon, order),) = captured
    betas = [options["beta"]] if "beta" in options else beta_grid(order)
    past = np.arange(horizon.walked, horizon.num_teachers)
    for beta in betas:
        smooth = smooth_sensitivity(horizon.total, beta)
        assert np.all(np.exp(-beta * past) * horizon.bound < smooth), beta


def test_a_block_stops_only_as_far_as_the_queries_to_come_allow():
    """Contested queries first (their LS near W from distance 0: alone they would stop at
    once), then confident ones (LS tiny until late): the first block's W counts the second's
    queries at their bound, and the walk goes as far as the whole total needs."""
    rng = np.random.default_rng(4)
    contested = rng.multinomial(5000, [0.34, 0.33, 0.33], size=40)
    confident = rng.multinomial(5000, [0.9, 0.06, 0.04], size=40)
    votes = np.vstack([contested, confident]).astype(np.float64)
    order, sigma = 20.0, 100.0
    options = {"threshold": 1000.0, "sigma1": 500.0, "threshold_sensitivity": 1}
    beta = float(beta_grid(order).min())
    horizon = Horizon.start(beta, 5000, votes.shape[0])
    for block in (votes[:40], votes[40:]):
        horizon = local_sensitivity_walked(block, 5000, order, sigma, horizon, **options)
    full = local_sensitivity_total(votes, 5000, order, sigma, **options)
    walked = horizon.total
    np.testing.assert_allclose(walked, full[: walked.size], rtol=1e-12)
    past = np.arange(walked.size, 5000)
    for beta in beta_grid(order):
        smooth = smooth_sensitivity(full, beta)
        assert smooth_sensitivity(walked, beta) == pytest.approx(smooth, rel=1e-12)
        assert np.all(np.exp(-beta * past) * horizon.bound < smooth)


def _blocks(case: dict, chunk: int, bound: str = "tabulated"):
    """gnss_release of a file's case, its queries read ``chunk`` at a time."""
    mechanism = pate.ConfidentGNMax(case["threshold"], case["sigma1"], case["sigma"])
    baseline = case["baseline"]
    return gnss.gnss_release(
        case["votes"], case["M"], mechanism, 20.0, 1e-8, Conversion.CLASSIC,
        epsilon_data_independent=1.0, epsilon_worst_case=1.0, baseline=baseline,
        half_even=baseline is not None, chunk_size=chunk, noise=None, skip_conditions=True,
        local_sensitivity=bound,
    )  # fmt: skip


@pytest.mark.parametrize("stem", ["glyph_like", "interactive_glyph_like"])
def test_blocks_of_queries_stop_where_nothing_can_change(stem, monkeypatch):
    """Read in blocks of 300 queries, each block stops with the totals so far and W bounding
    the queries to come (a block whose baseline tables are not every block's walks on): the
    figures are those of the same blocks walked over every distance, exactly."""
    case = _case(stem)
    walked = _blocks(case, 300)
    monkeypatch.setattr(gnss, "smallest_beta", lambda draw, order: 0.0)
    full = _blocks(case, 300)
    size = walked.local_sensitivity.size
    assert size < case["M"] == full.local_sensitivity.size
    np.testing.assert_array_equal(walked.local_sensitivity, full.local_sensitivity[:size])
    assert np.all(full.local_sensitivity[size:] <= walked.local_sensitivity_past_walk * 1.000001)
    figures = ("smooth_sensitivity", "beta", "sigma_ss", "gnss_cost", "epsilon_expected_release")
    assert [getattr(walked, f) for f in figures] == [getattr(full, f) for f in figures]


def test_blocks_of_queries_walk_as_far_as_one():
    """The exact walk (a bound per row, whatever the blocks) read in blocks of 300 queries or
    as one: the same distances walked, the same totals there but for the order of the sums."""
    case = _case("glyph_like")
    whole, blocks = _blocks(case, 1 << 16, "walk"), _blocks(case, 300, "walk")
    assert blocks.local_sensitivity.size == whole.local_sensitivity.size < case["M"]
    np.testing.assert_allclose(blocks.local_sensitivity, whole.local_sensitivity, rtol=1e-12)
    assert blocks.smooth_sensitivity == pytest.approx(whole.smooth_sensitivity, rel=1e-12)
    assert blocks.beta == whole.beta


def test_the_ranges_cover_every_distance_once():
    for teachers in (1, 2, 7, 8, 9, 250, 5000, 10**7):
        spans = list(distance_ranges(teachers))
        assert spans[0][0] == 0 and spans[-1][1] == teachers
        assert all(a[1] == b[0] for a, b in zip(spans, spans[1:], strict=False))
        assert all(stop > start for start, stop in spans)
        least = max(1, min(32, teachers // 8))
        assert all(stop - start >= least for start, stop in spans[:-1])
    assert [stop for _, stop in distance_ranges(5000)][:8] == [32, 64, 96, 128, 170, 226, 301, 401]
    assert len(list(distance_ranges(10**7))) < 60


def test_the_stop_distance():
    """S = min over d' with LS(d') > 0 of d' + (ln(W / LS(d')) + 1e-6) / beta."""
    totals = np.array([0.0, 1.0, 4.0, 2.0])
    bound, beta = math.e**3, 0.5
    expected = min(1 + (3 + 1e-6) / beta, 2 + (3 - math.log(4) + 1e-6) / beta)
    assert stop_distance(totals, bound, beta) == pytest.approx(expected, rel=1e-15)
    assert stop_distance(np.zeros(5), 0.0, beta) == -math.inf  # every total 0: stop at once
    assert stop_distance(np.zeros(5), 1.0, beta) == math.inf  # nothing bounds SS from below yet
    assert stop_distance(totals, bound, 0.0) == math.inf  # beta 0 never stops
    assert stop_distance(totals, math.inf, beta) == math.inf  # an unbounded W never stops
    assert stop_distance(np.array([math.inf]), math.inf, beta) == math.inf


def test_the_horizon_sums_the_blocks_where_every_block_walked():
    start = Horizon.start(0.1, 100, 5)
    first = start.after(np.array([1.0, 2.0, 3.0, 4.0]), 10.0, 2)
    second = first.after(np.array([0.5, 0.25, 0.125]), 7.0, 3)
    assert (second.walked, second.bound, second.queries_left) == (3, 17.0, 0)
    np.testing.assert_array_equal(second.total, [1.5, 2.25, 3.125])
    assert Horizon.start(0.1, 100, 0).total.size == 100  # no block: every distance, all 0
    # The queries to come count at their bound: W = 10 + 1 + 3 x 2 here, at distance 3.
    reach = first.reach(np.array([1.0]), 3, 1.0, 0, 2.0)
    assert reach == pytest.approx(3 + (math.log(17 / 5) + 1e-6) / 0.1, rel=1e-15)


def _votes(teachers: int) -> np.ndarray:
    return np.round(np.array([[0.9, 0.1, 0.0], [0.5, 0.4, 0.1]]) * teachers)


@pytest.mark.parametrize("mechanism", [pate.GNMax(40), pate.LNMax(0.001)], ids=["gnmax", "lnmax"])
def test_a_release_on_a_million_teachers_takes_memory_by_the_work(mechanism):
    """Two queries of 1e6 teachers: the walk goes through a few hundred distances (LNMax, a
    few ten thousand), and the release's allocations peak at tens of MB (a table of 16
    entries a teacher alone would be 128 MB)."""
    votes = pate.load_votes(_votes(10**6), format="counts", teachers=10**6)
    pate.smooth_sensitivity(votes, mechanism, delta=1e-5, seed=0)  # imports and caches
    tracemalloc.start()
    try:
        report = pate.smooth_sensitivity(votes, mechanism, delta=1e-5, seed=0)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert report.release.local_sensitivity.size < 50_000
    assert peak < 60e6, peak / 1e6


def test_the_rest_table_is_sized_by_the_distances_walked(monkeypatch):
    """The right walk's grid holds the rows' spread and 16 entries a distance walked: its
    last entry is the last one read."""
    sizes = []
    reach = ls_cells._Rest.reach

    def recorded(rest, distances):
        reach(rest, distances)
        spread = int(rest.index.max()) - rest.lowest
        sizes.append((rest.values.size, spread + ls_cells._REST_PER_STEP * (distances - 1) + 1))

    monkeypatch.setattr(ls_cells._Rest, "reach", recorded)
    teachers = 10**6
    votes = pate.load_votes(_votes(teachers), format="counts", teachers=teachers)
    report = pate.smooth_sensitivity(votes, pate.GNMax(40), delta=1e-5, seed=0)
    walked = report.release.local_sensitivity.size
    assert sizes and all(size == needed for size, needed in sizes)
    assert sizes[-1][0] <= sizes[-1][1] and walked < 1000
    assert max(size for size, _ in sizes) < 20 * walked + 10**4


@settings(max_examples=EXAMPLES)
@given(case=vote_files(), walk=st.booleans())
def test_no_state_exceeds_the_plans_largest(case, walk):
    """W's part of the answer step: every state's LS and cost, and the plateau (the value
    past each group's walk), are within ``GroupPlan.largest``, itself within one query's
    bound whatever its votes (``_GnmaxSensitivity.largest``, the queries still to come)."""
    votes, teachers = case["votes"].astype(np.int64), case["M"]
    params = _GnmaxSensitivity.build(
        case["sigma"], case["order"], votes.shape[1], increments_verified=case["c6"]
    )
    unique, _ = _canonical_rows(votes)
    plan = (walk_plan if walk else plan_cells)(unique, teachers, params)
    ls_bound, cost_bound = plan.largest
    assert params.plateau <= ls_bound
    assert ls_bound <= params.largest()[0] and cost_bound <= params.largest()[1]
    _, chunks = plan.span(0, teachers)
    for evaluate in chunks:
        _, _, ls, cost = evaluate()
        assert np.all(ls <= ls_bound) and np.all(cost <= cost_bound)


def test_a_walk_refuses_weights_above_one_a_query():
    """The queries still to come are bounded at weight 1 each (a row, at its count): a block
    weighing more would not be bounded, so the walk refuses it rather than stop too early."""
    votes = np.array([[6.0, 3.0, 1.0], [5.0, 5.0, 0.0]])
    options = {"threshold": 5.0, "sigma1": 2.0, "threshold_sensitivity": 1}
    horizon = Horizon.start(0.01, 10, 4)
    heavy = {"step2_weights": np.array([1.5, 0.5])}
    with pytest.raises(ValueError, match="step2_weights of at most 1 a query"):
        local_sensitivity_walked(votes, 10, 20.0, 2.0, horizon, **options, **heavy)
    held = {"row_counts": np.array([2.0, 2.0])}  # each row two queries: 1.5 is within them
    local_sensitivity_walked(votes, 10, 20.0, 2.0, horizon, **options, **heavy, **held)
    table = LnmaxSensitivity(3, 10, 0.5, 20.0)
    with pytest.raises(ValueError, match="weights of at most 1 a query"):
        table.walked(votes, np.array([1.5, 0.5]), Horizon.start(0.01, 10, 2))
    table.walked(votes, np.array([1.5, 0.5]), Horizon.start(0.01, 10, 4), np.array([2, 2]))

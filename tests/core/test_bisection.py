"""The one-sided bisection behind every solver that must land on the sound side of a bound:
known boundaries (representable and irrational), the answer always holds, brackets that hold
at both ends or at neither, termination on adjacent doubles, and the argument checks."""

from __future__ import annotations

import math
import sys

import pytest
from hypothesis import given
from hypothesis import strategies as st

from pate_cli.core.bisection import bisect_boundary

FLOAT_MODES = ["arithmetic", "geometric"]


class Recorder:
    """A predicate that remembers every point it was asked about, and its answer; past
    ``STEPS`` calls it fails the test, so a search that never ends fails instead of hanging."""

    STEPS = 2200  # above the documented worst case (about 2100 arithmetic halvings)

    def __init__(self, predicate):
        self.predicate = predicate
        self.calls: list[tuple[float, bool]] = []

    def __call__(self, value):
        if len(self.calls) >= self.STEPS:
            pytest.fail(f"the bisection did not end within {self.STEPS} steps")
        answer = bool(self.predicate(value))
        self.calls.append((value, answer))
        return answer

    def held(self):
        return {value for value, answer in self.calls if answer}


def _search(predicate, good, bad, **kwargs):
    """``bisect_boundary`` on ``predicate``, failing rather than hanging if it never ends."""
    return bisect_boundary(Recorder(predicate), good, bad, **kwargs)


def _down(x: float) -> float:
    return math.nextafter(x, -math.inf)


def _up(x: float) -> float:
    return math.nextafter(x, math.inf)


# --- known boundaries --------------------------------------------------------------------


@pytest.mark.parametrize("midpoint", FLOAT_MODES)
@pytest.mark.parametrize("threshold", [0.75, 3.0, 1e-300, 2.0**600, math.pi])
def test_a_representable_threshold_is_found_exactly_from_above(midpoint, threshold):
    """holds: x >= t, good end above: the answer is t itself (the smallest double that holds)."""
    low, high = threshold / 7, threshold * 5
    answer = _search(lambda x: x >= threshold, high, low, midpoint=midpoint)
    assert answer == threshold


@pytest.mark.parametrize("midpoint", FLOAT_MODES)
@pytest.mark.parametrize("threshold", [0.75, 3.0, 1e-300, 2.0**600, math.pi])
def test_a_representable_threshold_is_found_exactly_from_below(midpoint, threshold):
    """holds: x <= t, good end below: the answer is t itself (the largest double that holds)."""
    low, high = threshold / 7, threshold * 5
    answer = _search(lambda x: x <= threshold, low, high, midpoint=midpoint)
    assert answer == threshold


def test_a_negative_threshold_is_found_exactly():
    """Arithmetic brackets may straddle zero and hold negative values (log q)."""
    assert _search(lambda x: x < -0.1, -1e300, 0.0) == _down(-0.1)
    assert _search(lambda x: x >= -0.1, 0.0, -1e300) == -0.1


@pytest.mark.parametrize("midpoint", FLOAT_MODES)
def test_an_irrational_boundary_is_the_first_double_past_it(midpoint):
    """holds: x^2 >= 2 (boundary sqrt 2, not a double): the answer holds, its neighbour
    towards the bad end does not, and it is within an ulp of sqrt(2)."""
    answer = _search(lambda x: x * x >= 2, 2.0, 1.0, midpoint=midpoint)
    assert answer * answer >= 2
    assert not _down(answer) * _down(answer) >= 2
    assert abs(answer - math.sqrt(2)) <= math.ulp(math.sqrt(2))


@pytest.mark.parametrize("midpoint", FLOAT_MODES)
def test_an_irrational_boundary_from_below(midpoint):
    """holds: e^x <= 10 (boundary log 10): the last double at which it holds."""
    answer = _search(lambda x: math.exp(x) <= 10, 1.0, 5.0, midpoint=midpoint)
    assert math.exp(answer) <= 10 < math.exp(_up(answer))
    assert abs(answer - math.log(10)) <= 2 * math.ulp(math.log(10))


@pytest.mark.parametrize("midpoint", FLOAT_MODES)
@pytest.mark.parametrize("rtol", [1e-12, 1e-6, 0.1])
def test_rtol_stops_early_on_the_good_side(midpoint, rtol):
    """With rtol the answer is within rtol of the boundary and still on the holding side,
    from above and from below (arithmetic measures hi - lo against |hi|, geometric
    hi / lo - 1)."""
    root2 = math.sqrt(2)
    above = _search(lambda x: x * x >= 2, 2.0, 1.0, midpoint=midpoint, rtol=rtol)
    assert root2 <= above <= root2 * (1 + rtol)
    below = _search(lambda x: x * x <= 2, 1.0, 2.0, midpoint=midpoint, rtol=rtol)
    assert root2 * (1 - rtol) <= below <= root2


def test_integer_mode_gives_the_largest_or_smallest_count():
    assert _search(lambda n: n * n <= 10**6 + 5, 1, 10**7, midpoint="integer") == 1000
    assert _search(lambda n: n * n > 10**6, 10**7, 1, midpoint="integer") == 1001
    big = 10**400  # Python integers: no float conversion anywhere
    assert _search(lambda n: n <= big, 1, 10**401, midpoint="integer") == big


# --- the answer always holds --------------------------------------------------------------


@given(
    threshold=st.floats(min_value=1e-200, max_value=1e200),
    spread=st.floats(min_value=1.001, max_value=1e50),
    rtol=st.sampled_from([0.0, 1e-12, 1e-7, 0.1]),
    midpoint=st.sampled_from(FLOAT_MODES),
    rising=st.booleans(),
)
def test_the_answer_always_holds(threshold, spread, rtol, midpoint, rising):
    """The answer is the good end given or a point where the predicate returned true, never
    one where it returned false; and it lies between the good end given and the boundary."""
    low, high = threshold / spread, threshold * spread
    if rising:  # good below: holds is x <= t
        holds = Recorder(lambda x: x <= threshold)
        answer = bisect_boundary(holds, low, high, midpoint=midpoint, rtol=rtol)
        assert low <= answer <= threshold
    else:  # good above: holds is x >= t
        holds = Recorder(lambda x: x >= threshold)
        answer = bisect_boundary(holds, high, low, midpoint=midpoint, rtol=rtol)
        assert threshold <= answer <= high
    assert answer in holds.held() | {low, high}
    assert all(answer != value for value, held in holds.calls if not held)


@given(
    boundary=st.integers(min_value=-(10**12), max_value=10**12),
    width=st.integers(min_value=1, max_value=10**12),
)
def test_the_integer_answer_is_the_last_that_holds(boundary, width):
    low, high = boundary - width, boundary + width
    assert _search(lambda n: n <= boundary, low, high, midpoint="integer") == boundary


# --- brackets that break the promise --------------------------------------------------------


@pytest.mark.parametrize("midpoint", FLOAT_MODES)
def test_a_predicate_true_at_both_ends_walks_to_the_bad_end(midpoint):
    """The contract trusts the ends: holding everywhere, every step moves the good end, and
    the answer is the double next to ``bad`` (where the predicate was asked and held)."""
    holds = Recorder(lambda x: True)
    answer = bisect_boundary(holds, 1.0, 4.0, midpoint=midpoint)
    assert answer == _down(4.0)
    assert answer in holds.held()


@pytest.mark.parametrize("midpoint", FLOAT_MODES)
def test_a_predicate_false_at_both_ends_returns_good_unchanged(midpoint):
    """Holding nowhere, every step moves the bad end: the answer is ``good`` as given (the
    caller's claim), and the bad end was walked up to its neighbour."""
    holds = Recorder(lambda x: False)
    assert bisect_boundary(holds, 1.0, 4.0, midpoint=midpoint) == 1.0
    assert holds.calls[-1][0] == _up(1.0)
    assert _search(lambda n: False, 3, 1000, midpoint="integer") == 3


# --- termination -------------------------------------------------------------------------


ADJACENT = [
    (1.0, _up(1.0)),
    (_up(1.0), 1.0),
    (0.0, 5e-324),
    (-5e-324, 0.0),
    (_down(sys.float_info.max), sys.float_info.max),
    (-sys.float_info.max, _up(-sys.float_info.max)),
    (1e300, _up(1e300)),
]


@pytest.mark.parametrize(("good", "bad"), ADJACENT)
@pytest.mark.parametrize("rtol", [0.0, 1e-12])
def test_adjacent_doubles_end_at_once(good, bad, rtol):
    """Nothing lies between adjacent doubles: the good end comes back unasked."""
    holds = Recorder(lambda x: pytest.fail("no double lies between the ends"))
    assert bisect_boundary(holds, good, bad, rtol=rtol) == good
    if good > 0 and bad > 0:
        assert bisect_boundary(holds, good, bad, midpoint="geometric", rtol=rtol) == good
    assert not holds.calls


def test_adjacent_integers_end_at_once():
    holds = Recorder(lambda n: pytest.fail("no integer lies between the ends"))
    assert bisect_boundary(holds, 7, 8, midpoint="integer") == 7
    assert bisect_boundary(holds, 8, 7, midpoint="integer") == 8
    assert bisect_boundary(holds, 7, 7, midpoint="integer") == 7


@pytest.mark.parametrize("good", [0.0, 1.0, 1e300])
def test_an_infinite_end_ends_at_once(good):
    holds = Recorder(lambda x: True)
    assert bisect_boundary(holds, good, math.inf) == good
    if good > 0:
        assert bisect_boundary(holds, good, math.inf, midpoint="geometric") == good
    assert not holds.calls


def test_the_widest_brackets_end_within_the_documented_steps():
    """Arithmetic: about 2100 halvings from the whole double range to adjacent subnormals
    (its sum overflows at the first step); geometric: 64 halvings of log(hi / lo)."""
    holds = Recorder(lambda x: x >= 0.0)
    assert bisect_boundary(holds, sys.float_info.max, -sys.float_info.max) == 0.0
    assert len(holds.calls) <= 2100
    holds = Recorder(lambda x: x >= 1.0)
    assert bisect_boundary(holds, sys.float_info.max, 5e-324, midpoint="geometric") == 1.0
    assert len(holds.calls) <= 64


@pytest.mark.parametrize(
    ("good", "bad", "threshold"),
    [(2.0**700, 2.0**600, 2.0**650), (2.0**-1000, 2.0**-1070, 2.0**-1030)],
)
def test_a_geometric_midpoint_never_leaves_the_bracket(good, bad, threshold):
    """lo * hi overflows (or underflows to 0) here; the roots are taken first, so every
    point asked about is inside the bracket (the old planner asked about inf and 0)."""
    holds = Recorder(lambda x: x >= threshold)
    assert bisect_boundary(holds, good, bad, midpoint="geometric") == threshold
    assert all(bad < value < good for value, _ in holds.calls)


# --- argument checks ---------------------------------------------------------------------


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"midpoint": "median"}, "midpoint"),
        ({"rtol": -1e-9}, "rtol"),
        ({"rtol": math.nan}, "rtol"),
        ({"good": math.nan}, "NaN"),
        ({"bad": math.nan}, "NaN"),
        ({"good": 0.0, "midpoint": "geometric"}, "ends > 0"),
        ({"bad": -1.0, "midpoint": "geometric"}, "ends > 0"),
    ],
)
def test_bad_arguments_are_value_errors(kwargs, message):
    arguments = {"holds": lambda x: True, "good": 1.0, "bad": 2.0, **kwargs}
    with pytest.raises(ValueError, match=message):
        bisect_boundary(**arguments)


def test_pure_composition_beyond_bdtr_is_a_bound_not_a_crash():
    """bdtr gives NaN for k beyond its integer range: the lower tail is then its Chernoff
    bound (never below the truth) instead of a NaN reaching log1mexp."""
    import math

    from pate_cli.core import exact

    value = exact.log_delta_pure_composition(1e6, 0.1, 2**31)
    assert math.isfinite(value)
    for level, k, p in [(10, 100, 0.3), (400, 1000, 0.47), (0, 50, 0.2)]:
        assert exact._chernoff_log_cdf(level, k, p) >= exact._exact_log_binomial_cdf(level, k, p)

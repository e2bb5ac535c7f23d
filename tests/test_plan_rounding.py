"""``pate plan``'s copyable value: ``PLAN_DIGITS`` significant digits, rounded towards the side
where the cost stays within the target, never to nearest."""

from __future__ import annotations

import pytest

from pate_cli.jobs.planning import PLAN_DIGITS, _copyable


@pytest.mark.parametrize(
    ("boundary", "rising", "copyable", "other_side"),
    [
        # sigma: the cost falls as it grows, so the value is rounded up (to nearest, half
        # even, it would be 89.166008, just below the boundary: over the target).
        (89.1660085, False, 89.166009, 89.166008),
        # gamma of LNMax: the cost rises as it grows, so the value is rounded down (to
        # nearest, half up, it would be 0.025367865, above the boundary: over the target).
        (0.0253678645, True, 0.025367864, 0.025367865),
    ],
    ids=["sigma-up", "gamma-down"],
)
def test_a_solved_value_is_rounded_to_the_feasible_side(boundary, rising, copyable, other_side):
    assert PLAN_DIGITS == 8
    assert _copyable(boundary, rising) == copyable
    assert _copyable(boundary, not rising) == other_side  # the direction decides the digit


@pytest.mark.parametrize("rising", [False, True])
def test_a_value_with_eight_digits_or_none_to_round_is_kept(rising):
    assert _copyable(89.166009, rising) == 89.166009
    assert _copyable(0.0, rising) == 0.0
    assert _copyable(float("inf"), rising) == float("inf")

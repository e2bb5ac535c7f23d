"""log1mexp: special values, both branches, and extreme magnitudes (mpmath oracle)."""

from __future__ import annotations

import math

import mpmath
import numpy as np
import pytest

from pate_cli.core.logmath import log1mexp


def test_special_values():
    out = log1mexp(np.array([0.0, -np.inf]))
    assert out[0] == -np.inf and out[1] == 0.0


@pytest.mark.parametrize("x", [-1e-300, -1e-12, -1e-3, -0.5, -1.0, -1.0000001, -2.0, -40.0, -800.0])
def test_matches_mpmath(x):
    mpmath.mp.dps = 60
    expected = float(mpmath.log(-mpmath.expm1(mpmath.mpf(x))))
    assert log1mexp(np.array([x]))[0] == pytest.approx(expected, rel=1e-14)


def test_positive_argument_is_an_error():
    with pytest.raises(ValueError):
        log1mexp(np.array([0.1]))
    with pytest.raises(ValueError):
        log1mexp(np.array([math.nan]))

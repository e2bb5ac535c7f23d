"""The noisy max's exact label law (``core.outcomes``, what the built-in answer steps state to
the test kit as ``log_probabilities``) against the oracle's own integrals (``exact``), on
every histogram of a few small cases, and LNMax's against its closed form on two classes."""

from __future__ import annotations

import numpy as np
import pytest

from pate_cli.core.outcomes import gaussian_log_probabilities, laplace_log_probabilities
from tests.oracle import exact

CASES = [(8, 3), (5, 4), (12, 2)]


@pytest.mark.parametrize("gamma", [1e-3, 0.05, 0.5, 2.0, 10.0])
@pytest.mark.parametrize(("teachers", "classes"), CASES)
def test_laplace_law_is_the_oracles(teachers, classes, gamma):
    hists = exact.histograms(teachers, classes)
    found = laplace_log_probabilities(hists, gamma)
    want = exact.lnmax_log_probs(hists, gamma, raw=True)
    assert np.allclose(found, want, rtol=1e-12, atol=1e-13)
    assert np.allclose(np.exp(found).sum(axis=1), 1.0, rtol=0, atol=1e-13)


@pytest.mark.parametrize("sigma", [0.3, 1.0, 4.0, 40.0])
@pytest.mark.parametrize(("teachers", "classes"), CASES)
def test_gaussian_law_is_the_oracles(teachers, classes, sigma):
    hists = exact.histograms(teachers, classes)
    found = gaussian_log_probabilities(hists, sigma)
    want = exact.gnmax_log_probs(hists, sigma, raw=True)
    assert np.allclose(found, want, rtol=1e-10, atol=1e-12)


def test_laplace_law_on_two_classes_is_the_closed_form():
    """Pr[L_1 - L_2 > g] = e^(-gamma g) (2 + gamma g) / 4 for Laplace(1/gamma) noise: the
    lower class wins with that probability at a gap of g votes, down to 1e-40 and past."""
    gamma = 1.5
    gaps = np.arange(0, 60)
    found = laplace_log_probabilities(np.stack([gaps, np.zeros_like(gaps)], axis=1), gamma)
    x = gamma * gaps
    want = -x + np.log(2 + x) - np.log(4)
    assert np.allclose(found[:, 1], want, rtol=1e-13, atol=0)
    assert found[-1, 1] < np.log(1e-36)

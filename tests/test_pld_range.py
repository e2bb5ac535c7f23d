"""The privacy-loss-distribution account (``--pld``) at the ends of the double range: a
figure, or one line where its losses leave the range of e^loss, never exit 70 nor gigabytes.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from pate_cli.core import pld
from pate_cli.errors import ExitCode
from tests.conftest import MNIST, run_cli

RUN = ["--queries", 20, "--delta", 1e-5, "--no-release"]


def _one_line(stderr: str) -> str:
    errors = [line for line in stderr.splitlines() if line.startswith("pate: ")]
    assert len(errors) == 1, stderr
    return errors[0]


@pytest.mark.parametrize(
    ("flags", "mu"),
    [
        (["--sigma", 1e-300], "1.41e+300"),
        (["--sigma", 0.02], "70.7"),  # mu^2 / 2 = 2500: past 700 at every delta
        (["--sigma", 0.045], "31.4"),  # mu^2 / 2 = 494: past 700 at this delta's tolerance
        (["--threshold", 1e300, "--sigma1", 1e-300, "--sigma", 40], "1e+300"),
    ],
)
def test_too_little_noise_for_the_losses_is_one_line(flags, mu):
    mechanism = "gnmax" if "--threshold" not in flags else "confident-gnmax"
    args = ["analyze", MNIST, "--mechanism", mechanism, *flags, *RUN, "--pld"]
    line = _one_line(run_cli(args, expect=ExitCode.BAD_INPUT).stderr)
    assert line.startswith(f"pate: error: {mechanism}: too little noise for the privacy-loss")
    assert f"each query is {mu}-Gaussian DP, whose privacy losses reach past 700" in line


def test_the_grid_step_is_never_finer_than_its_floors():
    assert pld.auto_grid(1e-300) == pld.FINEST_GRID
    assert pld.auto_grid(math.sqrt(2) / 1e20) == pld.FINEST_GRID
    assert pld.auto_grid(math.sqrt(2) / 40) == 1e-3  # the paper's sigma: unchanged
    # An answer noise of 1e20 beside a threshold's of 150: a 2048th of the query's mu.
    joint = math.hypot(math.sqrt(2) / 1e20, 1 / 150)
    assert pld.auto_grid(math.sqrt(2) / 1e20, joint) == 2e-6
    assert joint / 2048 >= 2e-6


def test_a_tiny_mu_s_profile_needs_no_number_past_the_range():
    """At mu 1e-300, z = eps/mu leaves the double range: the careful bound takes those
    points, with no warning (warnings are errors here) and never a NaN."""
    eps = np.array([-1e-6, -1e-7, 0.0, 1e-7, 1e-6])
    profile = pld.gaussian_profile(1e-300, eps)
    assert not np.any(np.isnan(profile))
    # delta_mu(0) = 2 Phi(mu/2) - 1 = mu phi(0) to first order; 1 - e^eps below 0.
    assert profile[2] == pytest.approx(1e-300 / math.sqrt(2 * math.pi), rel=1e-9)
    np.testing.assert_allclose(profile[:2], -np.expm1(eps[:2]), rtol=1e-9)
    assert np.all(profile[3:] == 0.0)


@pytest.mark.parametrize("threshold", [1e10, 1e200, 1e300])
def test_a_threshold_no_count_reaches_composes_to_nothing(threshold):
    """Every query abstains but with probability e^-(T/sigma1)^2/2: the q-bound figure is 0.
    At 1e10 it took 24 GB (a shift of 4e8 grid steps); at 1e200 its tails' ratio was NaN."""
    flags = ["--threshold", threshold, "--sigma1", 150, "--sigma", 40]
    args = ["analyze", MNIST, "--mechanism", "confident-gnmax", *flags, *RUN, "--pld", "--json"]
    figure = run_cli(args).json["data_dependent_pld"]
    assert figure["epsilon"] == 0.0
    assert figure["method"] == "q-bound"

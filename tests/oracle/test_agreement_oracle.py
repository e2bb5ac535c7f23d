"""The expected agreement with the plurality vote (``core.agreement``, by quadrature) against
a Monte Carlo simulation of the noisy argmax itself."""

from __future__ import annotations

import numpy as np
import pytest

from pate_cli.core.agreement import gaussian_agreement, laplace_agreement

# Fixed draws: the check is deterministic, and 4.5 standard errors over 400 comparisons
# leaves no room for chance (the quadrature's own error is far below 1e-6).
SEED = 20261127
SAMPLES = 4000
Z = 4.5


def _rows(rng: np.random.Generator, count: int) -> list[np.ndarray]:
    """Vote rows of 2 to 100 classes, from near-unanimous to spread, a third with a tie at
    the top."""
    rows = []
    for _ in range(count):
        classes = int(rng.integers(2, 101))
        teachers = int(rng.integers(5, 600))
        shares = rng.dirichlet(np.full(classes, rng.uniform(0.05, 3.0)))
        row = rng.multinomial(teachers, shares).astype(np.float64)
        if rng.random() < 1 / 3:
            row[int(rng.integers(classes))] = row.max()
        rows.append(row)
    return rows


def _within(found: float, hits: np.ndarray) -> bool:
    simulated = float(hits.mean())
    error = max(np.sqrt(simulated * (1 - simulated) / hits.size), 1 / hits.size)
    return abs(found - simulated) <= Z * error


def test_gaussian_agreement_is_the_simulated_one():
    rng = np.random.default_rng(SEED)
    for row in _rows(rng, 200):
        sigma = float(np.exp(rng.uniform(0, np.log(500))))
        noisy = row + sigma * rng.standard_normal((SAMPLES, row.size))
        hits = noisy.argmax(axis=1) == row.argmax()
        found = float(gaussian_agreement(row[None, :], sigma)[0])
        assert _within(found, hits), (row.tolist(), sigma, found, hits.mean())


def test_laplace_agreement_is_the_simulated_one():
    rng = np.random.default_rng(SEED + 1)
    for row in _rows(rng, 200):
        gamma = float(np.exp(rng.uniform(np.log(0.005), np.log(5))))
        noisy = row + rng.laplace(0.0, 1.0 / gamma, (SAMPLES, row.size))
        hits = noisy.argmax(axis=1) == row.argmax()
        found = float(laplace_agreement(row[None, :], gamma)[0])
        assert _within(found, hits), (row.tolist(), gamma, found, hits.mean())


def test_the_issue_row_at_sigma_120():
    row = np.array([[200, 10, 10, 10, 10, 0, 0, 0, 5, 5]], dtype=np.float64)
    assert gaussian_agreement(row, 120.0)[0] == pytest.approx(0.546, abs=0.005)


@pytest.mark.parametrize("agreement", [gaussian_agreement, laplace_agreement])
def test_limits(agreement):
    ties = np.array([[7.0, 7.0, 7.0, 7.0]])
    scale = 1e6 if agreement is gaussian_agreement else 1e-6  # all but pure noise
    assert agreement(ties, scale)[0] == pytest.approx(0.25, abs=1e-3)
    clear = np.array([[250.0, 0.0, 0.0]])
    tiny = 1e-3 if agreement is gaussian_agreement else 1e3  # all but no noise
    assert agreement(clear, tiny)[0] == pytest.approx(1.0, abs=1e-12)
    wide = np.zeros((3, 50_000))
    wide[:, 0] = 100
    assert np.all(np.isfinite(agreement(wide, 40.0 if agreement is gaussian_agreement else 0.1)))

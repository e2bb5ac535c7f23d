"""Where the randomness of a run comes from."""

from __future__ import annotations

import numpy as np


def fresh_seed() -> int:
    """A 128-bit seed drawn from the operating system's entropy."""
    return int(np.random.SeedSequence().entropy)  # type: ignore[arg-type]

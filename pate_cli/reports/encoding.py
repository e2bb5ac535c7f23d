"""The one JSON encoder of every report, ledger and record.

``dumps`` is the only place JSON is written: numpy values become Python ones, infinities
become the strings "inf"/"-inf", and a NaN is a bug (it raises), so no output can ever carry
one. It imports nothing of the package, so every layer can write through it.
"""

from __future__ import annotations

import json
import math
from typing import Any

import numpy as np


def _plain(value: Any) -> Any:
    """Convert numpy values and non-finite floats to JSON-safe Python values."""
    if isinstance(value, dict):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    if isinstance(value, np.ndarray):
        return [_plain(v) for v in value.tolist()]
    if isinstance(value, (bool, np.bool_)):
        return bool(value)
    if isinstance(value, (int, np.integer)):
        return int(value)
    if isinstance(value, (float, np.floating)):
        number = float(value)
        if math.isnan(number):
            raise ValueError("NaN reached the JSON encoder")
        if math.isinf(number):
            return "inf" if number > 0 else "-inf"
        return number
    if value is None or isinstance(value, str):
        return value
    raise TypeError(f"cannot encode {type(value).__name__} as JSON")


def plain(payload: dict[str, Any]) -> dict[str, Any]:
    """A report dictionary with JSON-native values only: what every ``to_dict`` returns.

    ``json.dumps(plain(payload))`` is byte for byte what ``dumps(payload)`` (and so the CLI's
    ``--json``) writes: the conversion is the same one, and it leaves plain values as they are.
    """
    converted: dict[str, Any] = _plain(payload)
    return converted


def dumps(payload: dict[str, Any]) -> str:
    """Serialise a report dictionary; ``allow_nan=False`` is a tripwire behind ``_plain``."""
    return json.dumps(plain(payload), allow_nan=False)

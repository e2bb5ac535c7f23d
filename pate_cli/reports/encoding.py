"""The one JSON encoder of every report, ledger and record, and the one spelling of a number
in every text output.

``number_text`` is how a number is written where it is text: a CSV field, or an infinity in
JSON. Full precision (``repr`` of the float), infinities as "inf"/"-inf", and a NaN is a bug
(it raises), so no output can ever carry one. ``csv_text`` is the one CSV dialect (the
ledger's and compare's files).

``dumps`` is the only place JSON is written: numpy values become Python ones, infinities
become ``number_text``'s strings. It imports nothing of the package, so every layer can
write through it.
"""

from __future__ import annotations

import csv
import io
import json
import math
from collections.abc import Iterable
from typing import Any

import numpy as np


def number_text(value: float) -> str:
    """A number as an output writes it in text: ``repr`` of the float (full precision, so
    it reads back exactly; an int 3 is "3.0"), infinities as "inf" and "-inf".

    Raises:
        ValueError: A NaN, which no output may carry (it is a bug upstream).
    """
    number = float(value)
    if math.isnan(number):
        raise ValueError("NaN reached an output")
    if math.isinf(number):
        return "inf" if number > 0 else "-inf"
    return repr(number)


def csv_text(rows: Iterable[Iterable[str]]) -> str:
    """Rows of fields as CSV text: commas, quotes only where a field needs them, "\\n" line
    ends (the dialect of every CSV file pate writes)."""
    out = io.StringIO()
    csv.writer(out, lineterminator="\n").writerows(rows)
    return out.getvalue()


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
        return number if math.isfinite(number) else number_text(number)
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

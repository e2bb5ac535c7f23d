"""The one JSON encoder: infinities as strings, NaN refused, numpy values converted."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest

from pate_cli.reports.models import dumps


def test_infinities_become_strings():
    text = dumps({"a": math.inf, "b": [-np.inf, 1.5], "c": np.float64(np.inf)})
    assert json.loads(text) == {"a": "inf", "b": ["-inf", 1.5], "c": "inf"}
    assert "Infinity" not in text


def test_numpy_values_become_plain_json():
    payload = {"x": np.arange(3), "y": np.float32(0.5), "z": np.bool_(True), "n": np.int64(7)}
    assert json.loads(dumps(payload)) == {"x": [0, 1, 2], "y": 0.5, "z": True, "n": 7}


@pytest.mark.parametrize(
    "bad", [math.nan, np.float64("nan"), [1.0, math.nan], {"k": np.array([np.nan])}]
)
def test_nan_never_reaches_the_output(bad):
    with pytest.raises(ValueError, match="NaN"):
        dumps({"value": bad})


def test_unknown_types_are_refused():
    with pytest.raises(TypeError):
        dumps({"value": object()})

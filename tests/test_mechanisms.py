"""Mechanism inference from flags, validation, and conflicts."""

from __future__ import annotations

import math

import pytest

from pate_cli.errors import UsageError
from pate_cli.mechanisms import (
    ConfidentGNMax,
    GNMax,
    InteractiveGNMax,
    LNMax,
    infer_mechanism,
)
from pate_cli.mechanisms.registry import builtins, by_name


def infer(name, has_baseline=False, **values):
    """``infer_mechanism`` with the flags' values as keywords, as the tests write them."""
    return infer_mechanism(name, values, has_baseline=has_baseline)


@pytest.mark.parametrize(
    ("flags", "expected"),
    [
        ({"sigma": 40.0}, GNMax(40.0)),
        ({"threshold": 200.0, "sigma1": 150.0, "sigma": 40.0}, ConfidentGNMax(200.0, 150.0, 40.0)),
        (
            {"threshold": 200.0, "sigma1": 150.0, "sigma": 40.0, "has_baseline": True},
            InteractiveGNMax(200.0, 150.0, 40.0),
        ),
        ({"gamma": 0.1}, LNMax(0.1)),
    ],
)
def test_inferred_from_flags(flags, expected):
    mechanism = infer(None, **flags)
    assert mechanism == expected and type(mechanism) is type(expected)
    assert infer(mechanism.name, **flags) == expected


@pytest.mark.parametrize(
    ("name", "flags", "words"),
    [
        (None, {}, "no mechanism"),
        (None, {"threshold": 200.0, "sigma": 40.0}, "--sigma1"),
        (None, {"gamma": 0.1, "sigma": 40.0}, "--sigma cannot be used with lnmax"),
        ("gnmax", {"gamma": 0.1}, "--gamma cannot be used with gnmax"),
        ("lnmax", {"sigma": 4.0}, "--sigma cannot be used with lnmax"),
        (
            "interactive-gnmax",
            {"threshold": 1.0, "sigma1": 1.0, "sigma": 1.0},
            "--baseline",
        ),
        ("confident-gnmax", {"sigma": 1.0}, "needs --threshold, --sigma1"),
        ("gnmax", {"sigma": 40.0, "has_baseline": True}, "--baseline cannot be used"),
    ],
)
def test_missing_or_conflicting_flags(name, flags, words):
    with pytest.raises(UsageError, match=words.replace("(", r"\(")):
        infer(name, **flags)


@pytest.mark.parametrize("bad", [0.0, -1.0, math.inf, math.nan])
def test_parameters_validate_themselves(bad):
    with pytest.raises(UsageError):
        GNMax(bad)
    with pytest.raises(UsageError):
        LNMax(bad)
    with pytest.raises(UsageError):
        ConfidentGNMax(200.0, bad, 40.0)
    if not math.isfinite(bad):
        with pytest.raises(UsageError):
            ConfidentGNMax(bad, 150.0, 40.0)


def test_negative_threshold_is_allowed():
    assert ConfidentGNMax(-5.0, 1.0, 1.0).threshold == -5.0


def test_every_mechanism_name_maps_to_a_class():
    flags = {"sigma": 1.0, "threshold": 1.0, "sigma1": 1.0}
    built = {
        "gnmax": infer("gnmax", sigma=1.0),
        "confident-gnmax": infer("confident-gnmax", **flags),
        "interactive-gnmax": infer("interactive-gnmax", has_baseline=True, **flags),
        "lnmax": infer("lnmax", gamma=1.0),
    }
    # Every built-in, whatever plugins are installed beside them (the suite passes with one).
    assert set(built) == {kind.name for kind in builtins()}
    assert list(by_name())[: len(built)] == list(built)
    for name, mechanism in built.items():
        assert mechanism.name == name
        assert mechanism.to_json_dict()["name"] == name

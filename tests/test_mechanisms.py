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
    MechanismName,
    infer_mechanism,
)


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
    mechanism = infer_mechanism(None, **flags)
    assert mechanism == expected and type(mechanism) is type(expected)
    assert infer_mechanism(mechanism.name, **flags) == expected


@pytest.mark.parametrize(
    ("name", "flags", "words"),
    [
        (None, {}, "no mechanism"),
        (None, {"threshold": 200.0, "sigma": 40.0}, "--sigma1"),
        (None, {"gamma": 0.1, "sigma": 40.0}, "--sigma cannot be used with lnmax"),
        (MechanismName.GNMAX, {"gamma": 0.1}, "--gamma cannot be used with gnmax"),
        (MechanismName.LNMAX, {"sigma": 4.0}, "--sigma cannot be used with lnmax"),
        (
            MechanismName.INTERACTIVE_GNMAX,
            {"threshold": 1.0, "sigma1": 1.0, "sigma": 1.0},
            "--baseline",
        ),
        (MechanismName.CONFIDENT_GNMAX, {"sigma": 1.0}, "needs --threshold, --sigma1"),
        (MechanismName.GNMAX, {"sigma": 40.0, "has_baseline": True}, "--baseline cannot be used"),
    ],
)
def test_missing_or_conflicting_flags(name, flags, words):
    with pytest.raises(UsageError, match=words.replace("(", r"\(")):
        infer_mechanism(name, **flags)


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
        MechanismName.GNMAX: infer_mechanism(MechanismName.GNMAX, sigma=1.0),
        MechanismName.CONFIDENT_GNMAX: infer_mechanism(MechanismName.CONFIDENT_GNMAX, **flags),
        MechanismName.INTERACTIVE_GNMAX: infer_mechanism(
            MechanismName.INTERACTIVE_GNMAX, has_baseline=True, **flags
        ),
        MechanismName.LNMAX: infer_mechanism(MechanismName.LNMAX, gamma=1.0),
    }
    assert set(built) == set(MechanismName)
    for name, mechanism in built.items():
        assert mechanism.name is name
        assert mechanism.to_json_dict()["name"] == name.value

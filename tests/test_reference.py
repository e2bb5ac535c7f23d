"""`pate analyze` reproduces every analysis case of the 2018 reference, through the CLI.

Tolerances are those of tests/data/reference/README.md: RDP and epsilon to 1e-9 relative, the
optimal order exactly, expected answered to 1e-9.
"""

from __future__ import annotations

import json

import numpy as np
import pytest

from pate_cli.orders import DEFAULT_ORDERS, LOW_ORDERS, REFERENCE_ORDERS, parse_orders
from tests.conftest import (
    MNIST,
    MNIST_INDICES,
    MNIST_LABELS,
    REFERENCE,
    TABLE2,
    reference_json,
    reference_votes,
    run_cli,
)

FILES = sorted(
    p.name for p in REFERENCE.glob("*.expected.json") if not p.name.startswith("labels2017")
)


def _cases():
    for name in FILES:
        data = reference_json(name)
        for case in data["cases"]:
            if case["kind"] in ("gnmax", "lnmax", "confident", "confident_data_independent"):
                yield pytest.param(name, case, id=f"{name.split('.')[0]}-{case['id']}")


def _args(name: str, case: dict) -> list[str]:
    data = reference_json(name)
    params = case["params"]
    args = ["analyze", reference_votes(name), "--delta", params["delta"], "--json"]
    if "queries" in params:
        args += ["--queries", params["queries"]]
    if case["kind"] == "gnmax":
        args += ["--sigma", params["sigma"]]
    elif case["kind"] == "lnmax":
        args += ["--gamma", 1 / params["lambda"]]
    else:
        args += [
            "--threshold",
            params["threshold"],
            "--sigma1",
            params["sigma1"],
            "--sigma",
            params["sigma2"],
        ]
        if params["baseline"]:
            args += ["--baseline", REFERENCE / data["baseline_file"], "--round-half-even"]
        if params["data_independent"]:
            args += ["--data-independent"]
    return args


# The default grid is the low orders, then the reference's list: the reference's index i is
# the default grid's LOW + i.
LOW = LOW_ORDERS.size


def _check(ours: dict, expected: dict) -> None:
    # The order is the shipped literal at the reference's index, exactly. The reference's own
    # value is met to 1e-12: its logspace orders have a last bit that depends on the CPU's SIMD
    # path (test_default_orders_are_the_reference_list_bit_for_bit pins the literals). Every
    # case's best order is well above 2, so the orders below it change nothing.
    assert ours["order_index"] == LOW + expected["order_opt_index"]
    assert ours["order"] == REFERENCE_ORDERS[expected["order_opt_index"]]
    assert ours["order"] == pytest.approx(expected["order_opt"], rel=1e-12, abs=0)
    assert ours["epsilon"] == pytest.approx(expected["eps"], rel=1e-9)
    if "rdp_cum" in expected:  # per order, on the reference's own orders
        np.testing.assert_allclose(ours["rdp"][LOW:], expected["rdp_cum"], rtol=1e-9, atol=1e-12)


@pytest.mark.parametrize(("name", "case"), list(_cases()))
def test_analyze_matches_reference(name, case):
    out = run_cli(_args(name, case)).json
    result = case["result"]
    _check(out["data_dependent"], result)
    if isinstance(result.get("data_independent"), dict):
        _check(out["data_independent"], result["data_independent"])
    if "answered_expected" in result:
        assert out["expected_answered"] == pytest.approx(result["answered_expected"], rel=1e-9)
    else:
        assert out["expected_answered"] == out["input"]["num_queries"]
    assert out["data_dependent"]["epsilon"] <= out["data_independent"]["epsilon"] + 1e-12


def test_paper_mnist_numbers():
    """The 2018 paper's MNIST row: 282.7 answered, epsilon 1.999 at order 14; improved is lower."""
    args = ["analyze", MNIST, *TABLE2, "--json"]
    classic = run_cli(args).json
    assert round(classic["expected_answered"], 1) == 282.7
    assert round(classic["data_dependent"]["epsilon"], 3) == 1.999
    assert classic["data_dependent"]["order"] == 14
    improved = run_cli([*args, "--conversion", "improved"]).json
    assert improved["conversion"] == "improved"
    assert improved["data_dependent"]["epsilon"] < classic["data_dependent"]["epsilon"]


@pytest.mark.parametrize("name", ["labels2017_mnist_like", "labels2017_svhn_like"])
def test_2017_labels_files(name):
    """The 2017 moments accountant on labels files: moments 1..8 are orders 2..9."""
    data = reference_json(f"{name}.expected.json")
    for run in data["runs"]:
        params, result = run["params"], run["result"]
        args = [
            "analyze",
            REFERENCE / f"{name}.npy",
            "--teachers",  # labels read both ways: (teachers, queries) is 250 teachers
            250,
            "--gamma",
            params["noise_eps"],
            "--delta",
            params["delta"],
        ]
        args += ["--orders", f"2:{params['moments'] + 2}:1", "--json"]
        if params["indices_file"]:
            args += ["--indices", REFERENCE / params["indices_file"]]
        else:
            args += ["--queries", params["max_examples"]]
        out = run_cli(args).json
        assert out["input"]["format"] == "labels"
        assert out["input"]["num_queries"] == result["num_queries_used"]
        orders = np.array(out["orders"])
        np.testing.assert_allclose(
            np.array(out["data_dependent"]["rdp"]) * (orders - 1),
            result["total_log_mgf_per_moment"],
            rtol=1e-9,
        )
        assert out["data_dependent"]["epsilon"] == pytest.approx(result["eps"], rel=1e-9)
        assert out["data_dependent"]["order"] - 1 == result["moment_opt"]


def test_2017_paper_mnist_lnmax_on_labels_sample():
    """LNMax, gamma 0.1, the student's 100 queries: 2.0486 at order 9; default orders 1.408 at 23."""
    base = [
        "analyze",
        MNIST_LABELS,
        "--teachers",  # labels read both ways: (teachers, queries) is 250 teachers
        250,
        "--indices",
        MNIST_INDICES,
        "--mechanism",
        "lnmax",
        "--gamma",
        "0.1",
        "--delta",
        "1e-5",
        "--json",
    ]
    few = run_cli([*base, "--orders", "2:10:1"]).json["data_dependent"]
    assert round(few["epsilon"], 4) == 2.0486 and few["order"] == 9
    default = run_cli(base).json["data_dependent"]
    assert round(default["epsilon"], 3) == 1.408 and default["order"] == 23
    assert json.dumps(default)  # plain JSON values only


def test_default_orders_are_the_reference_list_bit_for_bit():
    """The shipped literals, not a recomputation: np.logspace differs in the last bit by CPU.
    The default grid is the orders below 2, then the reference's list exactly."""
    expected = np.array(reference_json("orders.json")["default"], dtype=np.float64)
    assert REFERENCE_ORDERS.dtype == np.float64 and REFERENCE_ORDERS.shape == (298,)
    assert REFERENCE_ORDERS.tobytes() == expected.tobytes()
    assert DEFAULT_ORDERS.tobytes() == np.concatenate([LOW_ORDERS, expected]).tobytes()
    assert LOW_ORDERS.tolist() == [1.1, 1.25, 1.5, 1.75]
    for grid in (DEFAULT_ORDERS, REFERENCE_ORDERS, LOW_ORDERS):
        assert not grid.flags.writeable
    assert parse_orders(None).flags.writeable  # callers get their own copy

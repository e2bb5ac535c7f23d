"""``pate smooth-sensitivity``: release the data-dependent epsilon through GNSS (2018, App. B)."""

from __future__ import annotations

from functools import partial
from typing import TYPE_CHECKING, Annotated

import typer

from pate_cli.choices import GateOn
from pate_cli.cli.blocks import command, gate, mechanism_block, runs
from pate_cli.cli.options import (
    AnsweredOpt,
    DeltaOpt,
    ReleaseGateOnOpt,
    SkipConditionsOpt,
    VotesArg,
)
from pate_cli.common import checks

if TYPE_CHECKING:
    from pate_cli.cli.run import Invocation, Params


def describe(p: Params) -> Invocation:
    """What ``pate smooth-sensitivity`` with the parameters ``p`` reads and calls (``pate
    verify`` asks it of a recorded command line too)."""
    from pate_cli import api
    from pate_cli.cli.run import Call, File, Invocation, inferred_mechanism

    # Without --gate-on the command gates on the publishable figure; that default has
    # changed between versions, so verify accepts a record of any.
    on = p["gate_on"] or GateOn.PUBLISHABLE
    options = {
        "delta": p["delta"],
        "order": p["order"],
        "orders": p["orders_text"],
        "conversion": p["conversion"].value,
        "beta": p["beta"],
        "sigma_ss": p["sigma_ss"],
        "skip_conditions": p["skip_conditions"],
        "reference_local_sensitivity": not p["strict"],
        "half_even": p["half_even"],
        "max_epsilon": p["max_epsilon"],
        "gate_on": on.value,
    }
    if p["walk"]:  # only when asked: a call of a pate without the flag has no such key
        options["walk_local_sensitivity"] = True
    baseline = File("--baseline", p["baseline_path"], "baseline")
    answered = File("--answered", p["answered_path"], "answered")
    mechanism = inferred_mechanism(p, baseline.path)
    defaulted = frozenset({"gate_on"} if p["gate_on"] is None else ())
    call = Call.of(
        api.smooth_sensitivity, p, mechanism, options, baseline, answered, defaulted=defaulted
    )
    # The release's order, beta and sigma_ss, before the votes are read.
    release = partial(checks.release, p["order"], p["beta"], p["sigma_ss"])
    return Invocation.of("smooth-sensitivity", call, p, progress=True, checks=(release,))


# The end of the help: each line one whole command (pate_cli.cli.examples).
EXAMPLES = (
    "pate smooth-sensitivity sample_data/mnist_250_teachers.npy --threshold 200 --sigma1 150 --sigma 40 --queries 640 --delta 1e-5",
)


@command(*runs(mechanism_block(), gate(ReleaseGateOnOpt, None), release=True))
def smooth_sensitivity(
    ctx: typer.Context,
    votes_path: VotesArg,
    delta: DeltaOpt,
    order: Annotated[
        float | None,
        typer.Option(
            "--order",
            help="Release at this Renyi order (default: the best data-dependent order).",
        ),
    ] = None,
    skip_conditions: SkipConditionsOpt = False,
    answered_path: AnsweredOpt = None,
) -> None:
    """Smooth sensitivity of the data-dependent epsilon and its GNSS-released value.

    Computes the local-sensitivity bounds of every query at every teacher
    distance, the beta-smooth sensitivity, the RDP cost of the Gaussian
    release (Theorem 23) and one sampled released epsilon, after checking
    conditions C5/C6 at the order used (GNMax family). Exits 2 when they fail,
    unless --skip-conditions. LNMax (--gamma) is released too: its bound is
    increasing in q, so it needs no condition. --max-epsilon gates on the smallest publishable figure
    (--gate-on released: the expected released epsilon, which depends on the
    votes, with a warning). The sample is publishable
    when its order, beta and sigma_ss were fixed in advance (--order, --beta,
    --sigma-ss) and its noise is private.
    """
    from pate_cli.cli import render
    from pate_cli.cli.run import run

    run(describe(ctx.params), render.smooth_sensitivity)

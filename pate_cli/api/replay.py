"""A record's library call made again through this API (``replay``), and ``verify``
(``pate.verify``): a record written by ``--record`` checked against its replay
(``pate_cli.records.verify``), or a budget file against its records and published heads
(``pate_cli.jobs.verification``).
"""

from __future__ import annotations

import math
import os
from collections.abc import Sequence
from typing import Any

import numpy as np

from pate_cli.api import aggregate, analyze, load_votes, smooth_sensitivity
from pate_cli.common.spelling import command_line
from pate_cli.files.outputs import save_npy_atomic
from pate_cli.jobs.verification import folders, verify_file
from pate_cli.mechanisms import Mechanism, mechanism_from_dict
from pate_cli.records.diff import as_number, lookup
from pate_cli.records.record import FILE_ROLES, as_printed, walked_by_default
from pate_cli.records.verify import VerifyReport
from pate_cli.votes import Votes
from pate_cli.votes.memory import file_path

PathLike = str | os.PathLike[str]


# What a run's random draw decides, by command: replayed only with the run's seed.
_RANDOM_FIELDS = {
    "analyze": ("release.epsilon_released", "release.noise"),
    "smooth_sensitivity": ("epsilon_released", "noise"),
    "aggregate": (
        "noise",
        "noise_block",  # how the noise was drawn: shown by drawing it again
        "num_seen",
        "answered",
        "student_labelled",
        "abstained",
        "agreement_with_plurality",
        "accuracy",
        "privacy",
        "gate",
        "warnings",  # the realised run's (its noise notes, its gate)
        "outputs.labels",
        "outputs.answered_mask",
    ),
}


def replay(
    record: dict[str, Any],
    resolved: dict[str, str],
    scratch: str,
    noise: dict[str, Any] | None,
) -> tuple[dict[str, Any], dict[str, str], tuple[str, ...]]:
    """Run the recorded library call on the resolved files: its report's JSON, the files it
    writes (aggregate's labels and answered mask) under ``scratch`` by role, and the fields
    it could not reproduce (everything the random draw decides, when ``noise`` is None).

    A record is written by the command line, so its warnings name flags: the replay spells
    them so too (``pate_cli.common.spelling``), from ``pate verify`` and from ``pate.verify``."""
    with command_line():
        return _replay_call(record, resolved, scratch, noise)


def _replay_call(
    record: dict[str, Any],
    resolved: dict[str, str],
    scratch: str,
    noise: dict[str, Any] | None,
) -> tuple[dict[str, Any], dict[str, str], tuple[str, ...]]:
    """``replay``'s call, in the command line's words."""
    call = record["call"]
    function = call["function"]
    votes = load_votes(
        resolved["votes"],
        indices=resolved.get("indices"),
        candidates=resolved.get("candidates"),
        **call["votes"],
    )
    mechanism = mechanism_from_dict(call["mechanism"])
    options = dict(call["options"])
    if "orders" in options and options["orders"] is None:
        # The default grid of the pate that wrote the record (it grew below order 2 since
        # 0.1.0): replayed on the orders it lists, as a figure at any orders bounds the cost.
        options["orders"] = _recorded_orders(record["report"])
    options.update({role: resolved[role] for role in FILE_ROLES[function] if role in resolved})
    if walked_by_default(record):
        options["walk_local_sensitivity"] = True  # that pate's default bound
    if function == "aggregate":
        # Drawn by the blocks the record names; one stream a purpose where it names none
        # (pate before version 7).
        options["noise_block"] = record["report"].get("noise_block")
    unreplayed = () if noise is not None else _RANDOM_FIELDS[function]
    options.update(noise or {})
    if function == "analyze":
        return as_printed(analyze(votes, mechanism, **options).to_dict()), {}, unreplayed
    if function == "smooth_sensitivity":
        report = smooth_sensitivity(votes, mechanism, **options)
        return as_printed(report.to_dict()), {}, unreplayed
    old = "noise_block" not in record["report"]  # a record from before the blocks
    if noise is None:
        return _aggregate_accounting(votes, mechanism, options), {}, unreplayed
    result = aggregate(votes, mechanism, **options)
    written = {
        "labels": os.path.join(scratch, "labels.npy"),
        "answered_mask": os.path.join(scratch, "answered_mask.npy"),
    }
    save_npy_atomic(written["labels"], result.labels.astype(np.int64))
    save_npy_atomic(written["answered_mask"], result.answered.astype(bool))
    printed = as_printed(result.to_dict())
    if old:
        printed.pop("noise_block")
    return printed, written, unreplayed


def _recorded_orders(report: dict[str, Any]) -> list[float] | None:
    """The orders a report lists (an aggregate's in its expected privacy), if a list of
    finite numbers; None (the default grid) otherwise."""
    orders = report.get("orders", lookup(report, "expected_privacy.orders"))
    if not isinstance(orders, list) or not orders:
        return None
    numbers = [as_number(order) for order in orders]
    if any(n is None or not math.isfinite(n) or n <= 1 for n in numbers):
        return None
    return [float(n) for n in numbers if n is not None]


def _aggregate_accounting(
    votes: Votes, mechanism: Mechanism, options: dict[str, Any]
) -> dict[str, Any]:
    """What an aggregate record states that its noise does not decide: the expected cost."""
    expected = analyze(
        votes,
        mechanism,
        delta=options["delta"],
        orders=options.get("orders"),
        conversion=options.get("conversion", "classic"),
        baseline=options.get("student_probs"),
        half_even=options.get("half_even", False),
        release=False,
    )
    block = as_printed(expected.to_dict())
    shared = {key: block.pop(key) for key in ("input", "mechanism", "publishable")}
    for key in ("command", "warnings"):
        block.pop(key)
    return {
        "command": "aggregate",
        **shared,
        "delta": block["delta"],
        "conversion": block["conversion"],
        "num_queries": votes.num_queries,
        "expected_privacy": block,
    }


def verify(
    record: PathLike,
    *,
    seed_file: PathLike | None = None,
    opening: PathLike | None = None,
    votes: PathLike | Sequence[PathLike] | None = None,
    inputs: dict[str, PathLike] | None = None,
    rtol: float | None = None,
    records: PathLike | Sequence[PathLike] | None = None,
    published_records: PathLike | Sequence[PathLike] | None = None,
    heads: Sequence[str] = (),
    budget: PathLike | None = None,
) -> VerifyReport:
    """What ``pate verify`` checks: every input hash, every recorded number (recomputed
    through this library) and every output hash of a record written by ``--record``.

    ``votes`` and ``inputs`` (role -> path) say where moved files are now; ``seed_file``
    is the run's seed file, which replays its random outputs (labels, answered mask,
    released epsilon): a file that is not the run's fails the check. ``opening`` is a
    public record's opening file, which checks that the files given are the ones the run
    read. The report's ``verdict`` is ``verified`` only when every check was made and holds;
    a check that could not be made (the sample without the seed file, a binding without the
    opening) is ``not-checked`` and makes it ``incomplete``. A record charged to a budget is
    checked against the budget it names (``budget``: where that file is now). Given a budget
    file, checks it
    instead: each charge recomputed from its record (``records``: one folder or several,
    searched recursively; ``published_records``: records published outside the owner's
    reach, each pinning its charge as a head), the chain through every head published
    earlier (``heads``), and each charge pinned or its record replayed from ``votes`` (one
    file or several: each record takes the one whose SHA-256 it holds); without records it
    is never fully verified (nothing shows a charge removed).
    """
    overrides = {role: file_path(path, role) for role, path in (inputs or {}).items()}
    given = [] if votes is None else [votes] if isinstance(votes, str | os.PathLike) else votes
    vote_files = tuple(file_path(path, "votes") for path in given)
    return verify_file(
        os.fspath(record),
        replay=replay,
        overrides=overrides,
        seed_file=None if seed_file is None else os.fspath(seed_file),
        opening=None if opening is None else os.fspath(opening),
        records=folders(records),
        published=folders(published_records),
        heads=tuple(heads),
        votes=vote_files,
        budget=None if budget is None else os.fspath(budget),
        rtol=rtol,
    )

"""What ``--json`` prints of a run whose charge was refused over its budget's limit
(``BudgetExceeded``): the object the run prints, so that one filter reads both.

What the run read and was given is there as a run prints it: ``command``, ``input``,
``mechanism``, ``delta``, ``conversion``, the gate's ``on`` and ``limit`` (with
``--max-epsilon``), and ``budget``, the refusal's block. Everything the library call computes
is null, never absent: every key the command's JSON may hold (a key a run prints only when
asked, as analyze's ``release`` or ``ledger``, is there too), the gate's ``epsilon`` and
``passed``, and the warnings. A charge refused at the commit, after
the call, prints the same: a run that is not charged shows nothing it computed.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from pate_cli.reports.encoding import plain
from pate_cli.reports.models import InputSummary

if TYPE_CHECKING:
    from pate_cli.votes import Votes

#: The keys of each command's JSON that its call computes, in the run's order: those before
#: the gate, and those after the warnings.
COMPUTED: dict[str, tuple[tuple[str, ...], tuple[str, ...]]] = {
    "analyze": (
        (
            "accounting",
            "data_independent_forced",
            "orders",
            "num_queries_seen",
            "expected_answered",
            "data_dependent",
            "data_independent",
            "data_independent_worst_case",
            "data_independent_exact",
            "guaranteed",
            "data_dependent_pld",
            "release",
            "publishable",
        ),
        ("breakdown", "ledger", "plot"),
    ),
    "smooth-sensitivity": (
        (
            "accounting",
            "released",
            "order",
            "data_independent_steps",
            "expected_answered",
            "rdp_at_order",
            "epsilon_data_dependent",
            "epsilon_data_independent_at_order",
            "conditions",
            "reason",
            "epsilon_data_independent",
            "epsilon_worst_case",
            "beta",
            "smooth_sensitivity",
            "sigma_ss",
            "gnss_cost",
            "epsilon_expected_release",
            "noise_std",
            "epsilon_released",
            "noise",
            "parameters_chosen_on_data",
            "order_chosen_on_data",
            "strict_local_sensitivity",
            "local_sensitivity_bound",
            "publishable",
        ),
        (),
    ),
    "aggregate": (
        (
            "noise",
            "noise_block",
            "num_queries",
            "num_seen",
            "answered",
            "student_labelled",
            "abstained",
            "output",
            "answered_mask",
            "agreement_with_plurality",
            "accuracy",
            "privacy",
            "expected_privacy",
            "publishable",
        ),
        (),
    ),
}


def refused_json(
    command: str,
    votes: Votes,
    mechanism: dict[str, Any],
    options: Mapping[str, Any],
    budget: dict[str, Any],
    *,
    public: bool = False,
) -> dict[str, Any]:
    """The JSON of a refused run (module docstring): ``command`` (``analyze``,
    ``smooth-sensitivity`` or ``aggregate``) on ``votes`` with ``mechanism`` (its JSON) and
    the call's ``options`` (``delta``, ``conversion``, ``max_epsilon``, ``gate_on``);
    ``budget``: the refusal's block; ``public``: the form ``--public --json`` prints."""
    summary = InputSummary.from_votes(votes).to_json_dict()
    before, after = COMPUTED[command]
    if public:  # as public_json: the input without its path and hash
        for key in ("path", "sha256"):
            summary.pop(key)
        before, after = ("num_queries", "publishable"), ()
    out: dict[str, Any] = {
        "command": command,
        "input": summary,
        "mechanism": mechanism,
        "delta": options["delta"],
        "conversion": options["conversion"],
        **dict.fromkeys(before),
    }
    if public:
        out["num_queries"] = summary["num_queries"]
    if options.get("max_epsilon") is not None:
        limit = options["max_epsilon"]
        out["gate"] = {"on": options["gate_on"], "epsilon": None, "limit": limit, "passed": None}
    if not public:
        out["warnings"] = None
        out.update(dict.fromkeys(after))
    out["budget"] = budget
    return plain(out)

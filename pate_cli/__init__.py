"""pate: privacy analysis for PATE (Private Aggregation of Teacher Ensembles).

The Python API (``import pate_cli as pate``): read votes, describe a mechanism, and get the
report that the matching command prints::

    import pate_cli as pate
    votes = pate.load_votes("sample_data/mnist_250_teachers.npy", queries=640)
    report = pate.analyze(votes, pate.ConfidentGNMax(threshold=200, sigma1=150, sigma=40),
                          delta=1e-5, release=False)
    report.data_dependent.epsilon, report.data_dependent.order   # 1.9988..., 14.0

Names are imported on first use (PEP 562), so that ``pate --version`` and ``pate --help``
do not pay for numpy and scipy. Nothing here imports typer, rich or matplotlib, except
``plot_analysis`` and ``plot_compare`` (the ``plot`` extra), which import matplotlib when called.
"""

from __future__ import annotations

import importlib

from pate_cli.common.version import __version__

# typing.TYPE_CHECKING without importing typing: ``python -m pate_cli`` imports this module
# before its entry point holds the signals, so it imports nearly nothing.
TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

# Public name -> the module that defines it.
_WHERE = {
    "load_votes": "pate_cli.api",
    "analyze": "pate_cli.api",
    "smooth_sensitivity": "pate_cli.api",
    "compare": "pate_cli.api",
    "inspect": "pate_cli.api",
    "aggregate": "pate_cli.api",
    "verify": "pate_cli.api.replay",
    "audit": "pate_cli.api",
    "partial_account": "pate_cli.api.partials",
    "merge_partials": "pate_cli.api.partials",
    "finish_account": "pate_cli.api.partials",
    "Partial": "pate_cli.api.partials",
    "RunAccount": "pate_cli.accountant.run",
    "AuditReport": "pate_cli.jobs.audit",
    "plan": "pate_cli.jobs.planning",
    "PlanReport": "pate_cli.jobs.planning",
    "plot_analysis": "pate_cli.plots",
    "plot_compare": "pate_cli.plots",
    "GNMax": "pate_cli.mechanisms",
    "ConfidentGNMax": "pate_cli.mechanisms",
    "InteractiveGNMax": "pate_cli.mechanisms",
    "LNMax": "pate_cli.mechanisms",
    "DEFAULT_ORDERS": "pate_cli.orders",
    "Votes": "pate_cli.votes",
    "AnalysisReport": "pate_cli.reports.models",
    "SmoothSensitivityReport": "pate_cli.reports.models",
    "CompareReport": "pate_cli.jobs.comparison",
    "InspectReport": "pate_cli.jobs.inspection",
    "AggregateResult": "pate_cli.jobs.aggregation",
    "VerifyReport": "pate_cli.records.verify",
    "PateError": "pate_cli.errors",
    "InputError": "pate_cli.errors",
    "UsageError": "pate_cli.errors",
    "ConditionError": "pate_cli.release.gnss",
    "UnsupportedError": "pate_cli.errors",
    "PluginError": "pate_cli.errors",
    "Budget": "pate_cli.budget",
    "BudgetExceeded": "pate_cli.budget",
}

__all__ = [
    "__version__",
    "load_votes",
    "analyze",
    "smooth_sensitivity",
    "compare",
    "inspect",
    "aggregate",
    "verify",
    "plan",
    "audit",
    "partial_account",
    "merge_partials",
    "finish_account",
    "Partial",
    "RunAccount",
    "plot_analysis",
    "plot_compare",
    "GNMax",
    "ConfidentGNMax",
    "InteractiveGNMax",
    "LNMax",
    "DEFAULT_ORDERS",
    "Votes",
    "AnalysisReport",
    "SmoothSensitivityReport",
    "CompareReport",
    "InspectReport",
    "AggregateResult",
    "VerifyReport",
    "PlanReport",
    "AuditReport",
    "PateError",
    "InputError",
    "UsageError",
    "ConditionError",
    "UnsupportedError",
    "PluginError",
    "Budget",
    "BudgetExceeded",
]


def __getattr__(name: str) -> Any:
    module = _WHERE.get(name)
    if module is None:
        raise AttributeError(f"module 'pate_cli' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value  # the next lookup is a plain attribute
    return value


def __dir__() -> list[str]:
    return sorted(__all__)


if TYPE_CHECKING:  # for type checkers and editors: the same names, eagerly
    from pate_cli.api import (
        aggregate,
        analyze,
        audit,
        compare,
        inspect,
        load_votes,
        smooth_sensitivity,
    )
    from pate_cli.api.replay import verify
    from pate_cli.budget import Budget, BudgetExceeded
    from pate_cli.errors import InputError, PateError, PluginError, UnsupportedError, UsageError
    from pate_cli.jobs.aggregation import AggregateResult
    from pate_cli.jobs.audit import AuditReport
    from pate_cli.jobs.comparison import CompareReport
    from pate_cli.jobs.inspection import InspectReport
    from pate_cli.jobs.planning import PlanReport, plan
    from pate_cli.mechanisms import ConfidentGNMax, GNMax, InteractiveGNMax, LNMax
    from pate_cli.orders import DEFAULT_ORDERS
    from pate_cli.plots import plot_analysis, plot_compare
    from pate_cli.records.verify import VerifyReport
    from pate_cli.release.gnss import ConditionError
    from pate_cli.reports.models import AnalysisReport, SmoothSensitivityReport
    from pate_cli.votes import Votes

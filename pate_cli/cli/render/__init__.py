"""Rich renderings of the reports. Functions return renderables; they never print or compute.

The commands call them through this package (``render.analysis(report)``); each report's
rendering lives in its own module, the shared pieces in ``common`` and ``publishable``.
"""

from pate_cli.cli.render.aggregation import aggregate
from pate_cli.cli.render.analyze import analysis, render_ledger
from pate_cli.cli.render.budget import render_budget
from pate_cli.cli.render.compare import render_compare
from pate_cli.cli.render.inspect import render_inspect
from pate_cli.cli.render.publishable import public
from pate_cli.cli.render.smooth import smooth_sensitivity
from pate_cli.cli.render.verify import render_verify

__all__ = [
    "aggregate",
    "analysis",
    "public",
    "render_budget",
    "render_compare",
    "render_inspect",
    "render_ledger",
    "render_verify",
    "smooth_sensitivity",
]

"""``pate inspect``: what a votes file holds, before any privacy analysis.

The command reads the votes with the shared format and selection flags, calls
:func:`pate_cli.jobs.inspection.inspect_votes` and prints the report as JSON or as
Rich tables (:func:`pate_cli.cli.render.render_inspect`, a function of the report alone).
"""

from __future__ import annotations

import typer

from pate_cli.cli.blocks import OUTPUT, SELECTION, command
from pate_cli.cli.options import VotesArg, emit

# The end of the help: each line one whole command (pate_cli.cli.examples).
EXAMPLES = ("pate inspect sample_data/mnist_250_teachers.npy",)


@command(SELECTION, OUTPUT)
def inspect(ctx: typer.Context, votes_path: VotesArg) -> None:
    """Describe a votes file: its format, size and how strongly the teachers agree.

    Reads the file as the other commands do (format detection, --queries,
    --indices) and reports the format, dtype, queries, teachers and classes,
    the distribution of the top vote share n_max/M and of the gap between
    the top two counts (quantiles and histograms), and how many queries are
    unanimous or tied at the top. Strong agreement is what makes the
    data-dependent analysis cheap.

    Labels whose layout the teachers' agreement decided list both layouts
    with how they agree. A file that reads more than one plausible way is
    described, not refused: every reading, what picks it, and why the other
    commands refuse it (exit 0).
    """
    from pate_cli.cli import render
    from pate_cli.cli.run import Selection
    from pate_cli.jobs.inspection import inspect_reading

    report = inspect_reading(Selection.of(ctx.params).load)
    emit(report.to_dict(), render.render_inspect(report), report.warnings, ctx.params["as_json"])

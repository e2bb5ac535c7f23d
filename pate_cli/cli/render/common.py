"""The pieces every rendering shares: numbers for people, the input and mechanism lines,
the colours of publishable and private figures, and a table that folds where it does not
fit."""

from __future__ import annotations

from decimal import ROUND_CEILING, ROUND_FLOOR, Context, Decimal

import numpy as np
from rich.console import Console, ConsoleOptions, RenderableType, RenderResult
from rich.measure import Measurement
from rich.table import Table
from rich.text import Text

from pate_cli.reports import markdown
from pate_cli.reports.models import InputSummary
from pate_cli.seeds import Noise


def fmt(value: float, digits: int = 4) -> str:
    """A float for people: fixed or scientific as fits, 'inf' for infinity, never 'nan'."""
    if np.isinf(value):
        return "inf" if value > 0 else "-inf"
    if value != 0 and (abs(value) < 1e-3 or abs(value) >= 1e6):
        return f"{value:.{digits - 1}e}"
    return f"{value:.{digits}f}"


def fmt_bound(value: float, digits: int = 4, *, up: bool = True) -> str:
    """A bound for people, as ``fmt`` writes it but rounded the safe way at the digits
    shown: up for what was spent (an epsilon), down for what is left."""
    if not np.isfinite(value) or value == 0:
        return fmt(value, digits)
    rounding = ROUND_CEILING if up else ROUND_FLOOR
    exact = Decimal(repr(float(value)))
    if abs(value) < 1e-3 or abs(value) >= 1e6:
        rounded = Context(prec=digits, rounding=rounding).plus(exact)
        return f"{float(rounded):.{digits - 1}e}"  # 4 digits survive the float exactly
    return f"{exact.quantize(Decimal(1).scaleb(-digits), rounding=rounding):.{digits}f}"


def fmt_order(order: float) -> str:
    return f"{order:g}" if float(order).is_integer() else f"{order:.2f}"


def input_line(summary: InputSummary, dtype: str | None = None) -> Text:
    """What was read: path, format, (dtype,) sizes, and the selection out of the file."""
    how = "detected" if summary.detected else "given"
    if summary.format == "labels" and len(summary.file_shape) == 2:  # which axis is which
        rows, columns = summary.file_shape
        layout = summary.layout.split(" x ")
        how += f", {rows} {layout[0]} x {columns} {layout[1]}"
    text = Text()
    text.append(summary.path, style="bold")
    stored = "" if dtype is None else f", dtype {dtype}"
    queries = (
        f"{summary.num_queries} queries"
        if summary.num_queries == summary.num_file_queries
        else f"{summary.num_queries} of the file's {summary.num_file_queries} queries"
    )
    text.append(
        f"  format {summary.format} ({how}){stored}, {queries} x {summary.num_classes} "
        f"classes, {summary.num_teachers} teachers"
    )
    return text


# What a number is decides its colour: publishable figures green, private ones yellow.
PUBLISHABLE = "green"
PRIVATE = "yellow"


def mechanism_line(mechanism: dict[str, object]) -> Text:
    params = ", ".join(f"{k}={v:g}" for k, v in mechanism.items() if isinstance(v, float))
    return Text.assemble(("mechanism ", ""), (str(mechanism["name"]), "bold cyan"), f"  {params}")


def noise_words(noise: Noise | None) -> str:
    """Where a sample's noise came from, in a few words (the seed only when public): the
    label the Markdown view prints too."""
    return markdown.noise_words(None if noise is None else noise.to_dict())


class Fit:
    """The wide renderable where it fits the console's width, else the narrow one: a table
    folds into lines rather than cut a number."""

    def __init__(self, wide: Table, narrow: RenderableType) -> None:
        self.wide, self.narrow = wide, narrow

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> RenderResult:
        # Measured without the console's limit, which a measurement is clamped to.
        needed = Measurement.get(console, options.update_width(1 << 16), self.wide).maximum
        yield self.wide if needed <= options.max_width else self.narrow

"""The pieces every rendering shares: numbers for people, the input and mechanism lines,
the colours of publishable and private figures, and a table that folds where it does not
fit."""

from __future__ import annotations

from rich.console import Console, ConsoleOptions, RenderableType, RenderResult
from rich.measure import Measurement
from rich.table import Table
from rich.text import Text

from pate_cli.files.seeds import Noise
from pate_cli.reports import markdown, rounding
from pate_cli.reports.models import InputSummary


def fmt(value: float, digits: int = 4) -> str:
    """A figure that bounds nothing (agreement, Pr[answered], noise std), rounded to nearest:
    fixed or scientific as fits, 'inf' for infinity (``rounding.nearest``)."""
    return rounding.nearest(value, digits)


def fmt_bound(value: float, digits: int = 4, *, up: bool = True, significant: bool = False) -> str:
    """A privacy figure, as ``fmt`` writes it but rounded the safe way at the digits shown:
    up for a cost or a bound on one (every epsilon, RDP value, sensitivity), down for what a
    budget has left (``rounding.bound``, the one policy of every printed figure).
    ``significant``: ``digits`` significant digits as ``g`` writes them, for a sentence."""
    if significant:
        return rounding.bound_significant(value, digits, up=up)
    return rounding.bound(value, digits, up=up)


def required(value: float | None) -> float:
    """A figure a released GNSS release always sets (None there would be a bug)."""
    if value is None:
        raise ValueError("a released GNSS release lacks a number")
    return value


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
        f"classes{_CLASSES_FROM.get(summary.classes_from, '')}, {summary.num_teachers} teachers"
    )
    return text


# Where a class count came from, when the shape does not say it.
_CLASSES_FROM = {"given": " (--num-classes)", "largest label": " (largest label + 1)"}


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

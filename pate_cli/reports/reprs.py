"""One-line ``repr`` of every report: its class, what ran and its headline figures.

A report holds per-order arrays and whole sub-reports; the dataclass ``repr`` printed them
all (tens of thousands of characters in a notebook). ``short_repr`` prints named fields
only, numbers to four significant digits, and never more than ``MAX_REPR`` characters.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from pate_cli.reports.rounding import bound_significant

MAX_REPR = 299
"""The longest ``repr`` of a report, in characters (one line)."""


#: The fields of a repr that hold an epsilon: rounded up, as every printed cost is.
_COSTS = frozenset({"epsilon", "released", "sampled"})


def _show(value: Any, *, is_cost: bool = False) -> str:
    """A field's value in a repr: floats to four significant digits (an epsilon rounded up,
    ``is_cost``), text without quotes."""
    if isinstance(value, bool) or value is None:
        return str(value)
    if isinstance(value, float) or type(value).__module__ == "numpy":
        return _cost(value) if is_cost else f"{float(value):.4g}"
    return " ".join(str(value).split())  # one line, whatever the text


def _cost(epsilon: float) -> str:
    """An epsilon to four significant digits, rounded up (``rounding.bound_significant``)."""
    return bound_significant(float(epsilon), 4)


def epsilon_at(epsilon: float, order: float) -> str:
    """An epsilon and its order, as in "1.999 at order 14"."""
    return f"{_cost(epsilon)} at order {_show(order)}"


def best_figure(found: Sequence[Any]) -> str | None:
    """The first publishable figure, as in "worst-case 8.23"; None when there is none."""
    return f"{found[0].basis} {_cost(found[0].epsilon)}" if found else None


def cost_fields(
    mechanism: str, queries: int, found: Sequence[Any], dependent: Any
) -> dict[str, Any]:
    """The headline of a report with a cost: what ran, on how many queries, the first
    publishable figure and the data-dependent epsilon (an ``EpsilonResult``) at its order."""
    return {
        "mechanism": mechanism,
        "queries": queries,
        "publishable": best_figure(found),
        "data_dependent": epsilon_at(dependent.epsilon, dependent.order),
    }


def short_repr(name: str, **fields: Any) -> str:
    """``name(key=value, ...)`` on one line, fields that are None left out, cut to fit."""
    body = ", ".join(
        f"{key}={_show(value, is_cost=key in _COSTS)}"
        for key, value in fields.items()
        if value is not None
    )
    text = f"{name}({body})"
    if len(text) > MAX_REPR:
        text = text[: MAX_REPR - 4] + "...)"
    return text

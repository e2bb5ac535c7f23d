"""``pate compare``'s parameter columns: which parameters of its rows' mechanisms its table
and its CSV show.

Every parameter that varies across the rows has a column (a row without it shows none, so
a parameter some rows lack varies); one that every row has at the same value is said once,
above the table. A row's parameters are its mechanism's JSON block without the name: every
declared parameter (a plugin's too) and a field such as ``threshold_bound`` away from its
default. The CSV has a column for every parameter any row has: the built-ins' four always,
as ever, then the others, so that each line stands alone.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from pate_cli.reports.encoding import number_text

if TYPE_CHECKING:
    from pate_cli.mechanisms import Mechanism

#: The built-in mechanisms' parameters: first among the columns, and always in the CSV.
PARAMETERS = ("threshold", "sigma1", "sigma", "gamma")


def setting(mechanism: Mechanism) -> dict[str, Any]:
    """A row's parameters by name: its mechanism's JSON block without the name."""
    return {key: value for key, value in mechanism.to_json_dict().items() if key != "name"}


def parameter_names(mechanisms: Sequence[Mechanism]) -> list[str]:
    """Every parameter some row's mechanism has, in a fixed order: the built-ins'
    (``PARAMETERS``), then each mechanism's declarations in the order its rows come, then any
    other field."""
    declared = [p.name for mechanism in mechanisms for p in type(mechanism).parameters]
    found = [name for mechanism in mechanisms for name in setting(mechanism)]
    ordered = dict.fromkeys([*PARAMETERS, *declared, *found])
    present = set(found)
    return [name for name in ordered if name in present]


@dataclass(frozen=True)
class ParameterColumns:
    """The parameters that vary across the rows (a column each, in order) and those every
    row has at one value (said once: (name, value))."""

    varying: tuple[str, ...]
    fixed: tuple[tuple[str, Any], ...]

    @classmethod
    def of(cls, mechanisms: Sequence[Mechanism]) -> ParameterColumns:
        """The columns of rows of ``mechanisms``, in the rows' order."""
        settings = [setting(mechanism) for mechanism in mechanisms]
        varying: list[str] = []
        fixed: list[tuple[str, Any]] = []
        for name in parameter_names(mechanisms):
            values = [found.get(name) for found in settings]  # None: a row without it
            if values[0] is not None and all(value == values[0] for value in values):
                fixed.append((name, values[0]))
            else:
                varying.append(name)
        return cls(tuple(varying), tuple(fixed))


def value_text(value: Any) -> str:
    """A parameter's value in a table: a number in short (40, 0.05, 1e-200), else as is."""
    return f"{value:g}" if isinstance(value, int | float) else str(value)


def csv_value(value: Any) -> str:
    """A parameter's value in the CSV: a number at full precision, "" where there is none."""
    if value is None:
        return ""
    return number_text(value) if isinstance(value, int | float) else str(value)

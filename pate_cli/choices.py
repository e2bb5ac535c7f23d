"""The named choices of the command line and the library, in a module that imports nothing.

Typer builds every command's options from these at start-up, so they live apart from the
numerical modules that use them: ``pate --version`` and ``pate --help`` load neither numpy
nor scipy. Each is imported from here by the modules that use it (``VoteFormat``,
``Conversion``, ``SortColumn``).
"""

from __future__ import annotations

from enum import Enum


class VoteFormat(str, Enum):
    """Layout of a votes file (``--format``)."""

    AUTO = "auto"
    COUNTS = "counts"
    LABELS = "labels"
    PROBS = "probs"


class Conversion(str, Enum):
    """RDP to (epsilon, delta) conversions; see ``pate_cli.core.conversion``."""

    CLASSIC = "classic"
    IMPROVED = "improved"


class SortColumn(str, Enum):
    """Columns ``compare --sort`` accepts; rows come best first."""

    PUBLISHABLE = "publishable"
    EPSILON = "epsilon"
    DATA_INDEPENDENT = "data-independent"
    ANSWERED = "answered"
    AGREEMENT = "agreement"


class GateOn(str, Enum):
    """Which epsilon the --max-epsilon gate compares."""

    PUBLISHABLE = "publishable"
    DATA_DEPENDENT = "data-dependent"
    DATA_INDEPENDENT = "data-independent"
    WORST_CASE = "worst-case"
    EXACT_DATA_INDEPENDENT = "exact-data-independent"
    GUARANTEED = "guaranteed"
    RELEASED = "released"


class TableGateOn(str, Enum):
    """``GateOn`` without ``released``: the choices of commands that release no epsilon
    (``compare``, ``aggregate``), so that their help lists only what they can gate on."""

    PUBLISHABLE = "publishable"
    DATA_DEPENDENT = "data-dependent"
    DATA_INDEPENDENT = "data-independent"
    WORST_CASE = "worst-case"
    EXACT_DATA_INDEPENDENT = "exact-data-independent"


class ThresholdBound(str, Enum):
    """How the threshold step's data-dependent RDP is bounded (``--threshold-bound``)."""

    THEOREM6 = "theorem6"
    EXACT = "exact"


class Accountant(str, Enum):
    """What ``pate plan`` composes with (``--accountant``)."""

    EXACT = "exact"
    RDP = "rdp"


class TestFrom(str, Enum):
    """What fixes an audit's pair and test (``pate audit --test-from``)."""

    LAW = "law"
    DRAWS = "draws"


class Engine(str, Enum):
    """Where the passes over the queries run (``--engine``)."""

    LOCAL = "local"
    DASK = "dask"

"""The aggregators: one module each, their parameters as data, and the registry that names
them.

``GNMax``, ``ConfidentGNMax``, ``InteractiveGNMax`` and ``LNMax`` are frozen, validated
descriptions of what an aggregator does (which noise, which threshold), never of what it
costs. Each is a threshold step (optional) and an answer step (``steps``), which carry what
the accountant, the release and ``aggregate`` ask of them, and declares its parameters
(``parameters``). The registry (``registry``) holds the built-ins, what ``register`` adds
and what other packages offer through the entry-point group ``pate_cli.mechanisms``; the
command line, ``compare``, ``plan`` and the records know a mechanism through it. The
samplers (``samplers``) draw the noisy labels a mechanism's ``run`` releases.
"""

from pate_cli.errors import UnsupportedError
from pate_cli.mechanisms.base import Mechanism, Run, assert_never
from pate_cli.mechanisms.confident import ConfidentGNMax
from pate_cli.mechanisms.gnmax import GNMax
from pate_cli.mechanisms.inference import grid, infer_mechanism
from pate_cli.mechanisms.interactive import InteractiveGNMax
from pate_cli.mechanisms.lnmax import LNMax
from pate_cli.mechanisms.parameters import FINITE, POSITIVE, Cost, Domain, Parameter
from pate_cli.mechanisms.registry import (
    GROUP,
    PluginWarning,
    answers_every_query,
    as_mechanism,
    by_name,
    flags_of,
    is_mechanism,
    mechanism_from_dict,
    register,
    registered,
)

__all__ = [
    "FINITE",
    "GROUP",
    "POSITIVE",
    "ConfidentGNMax",
    "Cost",
    "Domain",
    "GNMax",
    "InteractiveGNMax",
    "LNMax",
    "Mechanism",
    "Parameter",
    "PluginWarning",
    "Run",
    "UnsupportedError",
    "answers_every_query",
    "as_mechanism",
    "assert_never",
    "flags_of",
    "grid",
    "infer_mechanism",
    "is_mechanism",
    "mechanism_from_dict",
    "register",
    "registered",
    "by_name",
]

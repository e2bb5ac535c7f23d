"""The aggregators: one module each, and the registry that names them.

``GNMax``, ``ConfidentGNMax``, ``InteractiveGNMax`` and ``LNMax`` are frozen, validated
descriptions of what an aggregator does (which noise, which threshold), never of what it
costs. Each is a threshold step (optional) and an answer step (``steps``), which carry what
the accountant, the release and ``aggregate`` ask of them; ``register`` makes a new one known
to the command line, ``compare``, ``plan`` and the records.
"""

# ruff: noqa: I001
from pate_cli.mechanisms.base import (
    REGISTRY,
    Mechanism,
    UnsupportedError,
    answers_every_query,
    assert_never,
    is_mechanism,
    mechanism_from_dict,
    register,
    registered,
)

# The order of registration is the order of compare's rows and of every list of mechanisms
# (the imports below are kept in it: "ruff: noqa: I001" above).
from pate_cli.mechanisms.gnmax import GNMax
from pate_cli.mechanisms.confident import ConfidentGNMax
from pate_cli.mechanisms.interactive import InteractiveGNMax
from pate_cli.mechanisms.lnmax import LNMax
from pate_cli.mechanisms.inference import flags_of, grid, infer_mechanism

__all__ = [
    "REGISTRY",
    "ConfidentGNMax",
    "GNMax",
    "InteractiveGNMax",
    "LNMax",
    "Mechanism",
    "UnsupportedError",
    "answers_every_query",
    "assert_never",
    "flags_of",
    "grid",
    "infer_mechanism",
    "is_mechanism",
    "mechanism_from_dict",
    "register",
    "registered",
]

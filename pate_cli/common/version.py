"""pate's version: what records and ``pate --version`` say made them (the package top
re-exports it as ``pate_cli.__version__``)."""

__version__ = "0.1.0"

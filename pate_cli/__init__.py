"""pate: privacy analysis for PATE (Private Aggregation of Teacher Ensembles)."""

__version__ = "0.1.0"

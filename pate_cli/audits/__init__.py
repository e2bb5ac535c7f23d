"""Empirical lower bounds from the sampler that really runs (``pate audit``).

- ``draws``: a mechanism's outcomes on one histogram, drawn by its own ``run`` in blocks,
  each block from its own stream; the kind of each outcome (abstained, or the label).
- ``laws``: the law of a query's outcome on a histogram: stated (the answer step's
  ``log_probabilities`` and the threshold step's ``terms``) or, where a mechanism states
  none, estimated on draws held out from the audit.
- ``pairs``: the neighbouring pair the audit runs on: searched over two-class histograms,
  or a query of a vote file and its neighbour.

The statistics are ``pate_cli.core.auditing``; the command's whole run is
``pate_cli.jobs.audit``.
"""

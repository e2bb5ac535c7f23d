"""Numerical core: pure, vectorised functions over queries x orders.

Nothing here reads files, prints, validates user input or holds state.
Shapes: ``Q`` queries, ``C`` classes, ``K`` orders, ``M`` teachers.
Probabilities are carried as natural logarithms (``logq``, ``log_pr_answered``).
"""

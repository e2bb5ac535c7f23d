"""The accountant: per-query terms computed once, composed into RDP and (epsilon, delta)."""

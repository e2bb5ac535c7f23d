"""Release records: what ``--record`` writes and ``pate verify`` recomputes."""

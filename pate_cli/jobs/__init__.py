"""What each command runs, over the library's layers: analysis, comparison, planning,
inspection, the aggregate run and verification (``pate_cli.api`` calls them)."""

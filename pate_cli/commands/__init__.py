"""One module per command; ``pate_cli.cli`` registers them on the app."""

"""One module per command; the entry point registers them on the app."""

"""The command line: the Typer app, its commands and options, and the Rich renderings.

The one layer that imports typer and rich. It parses the arguments, calls one library
function per command (``pate_cli.api``), renders the report and sets the exit code.
"""

"""What every layer shares: the checks of a parameter's domain and how messages spell
parameters (as flags for the command line, as keywords for the library)."""

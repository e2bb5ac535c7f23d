"""Publishing a data-dependent epsilon: smooth sensitivity and the GNSS release."""

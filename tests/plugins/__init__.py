"""Mechanisms the tests install as plugins: each module is a whole third-party mechanism."""

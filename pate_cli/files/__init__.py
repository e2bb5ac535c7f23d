"""The file plumbing: outputs written atomically and never over an input, the transaction
that keeps a run all or nothing, and the noise's seeds and streams."""

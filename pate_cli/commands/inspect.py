"""``pate inspect`` (placeholder: being written)."""


def inspect() -> None:
    """Describe a vote file.

    Example:

        pate inspect sample_data/mnist_250_teachers.npy
    """

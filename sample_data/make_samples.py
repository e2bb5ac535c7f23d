"""Regenerate the derived sample files: the labels-format votes and a release record.

The 2017 PATE code saved teacher predictions as a (teachers, queries) label
matrix. This script turns the 2018 paper's (queries, classes) MNIST vote
counts into such a matrix: for every query it lays out the 250 votes class by
class and shuffles which teacher cast which vote with a fixed seed, so that
counting the labels back gives exactly the original counts.

It also writes next_token_votes.npz (``next_token_votes``: a synthetic next-token run
over a GPT-2 vocabulary, saved sparse), mnist_student_probs.npy, a synthetic student's class
probabilities for the Interactive-GNMax examples (see ``student_probabilities``), and
mnist_table2.record.json: the record of the 2018 paper's MNIST
analysis (Confident-GNMax, T=200, sigma1=150, sigma=40, 640 queries, without the
sampled release, so that every figure is deterministic; a private record, as it holds
figures of the votes), which `pate verify sample_data/mnist_table2.record.json` recomputes
whole (exit 0, every check verified).

Run from the repository root: python sample_data/make_samples.py
"""

from pathlib import Path

import numpy as np
import scipy.sparse

HERE = Path(__file__).resolve().parent
SEED = 2018
VOCABULARY, NEXT_TOKEN_TEACHERS, NEXT_TOKEN_QUERIES = 50_257, 200, 3_000


def next_token_votes(num_queries: int, rng: np.random.Generator) -> scipy.sparse.csr_matrix:
    """A synthetic next-token run: ``num_queries`` queries of 200 teachers over a GPT-2
    vocabulary (50,257 token ids), as a CSR matrix of int32 counts.

    A query's teachers agree on a Zipf-distributed number of tokens (Zipf(2), at most 12);
    the plurality token takes a share from a mixture (80% Beta(8, 2), a contested 20%
    Beta(2, 2)), the rest of the votes fall uniformly on the query's other tokens, and token
    ids follow a Zipf(1.2) law over the vocabulary. Not a language model's votes: an input of
    the right shape to try the flags and to time them.
    """
    k = np.minimum(rng.zipf(2.0, num_queries), 12)
    share = np.where(
        rng.random(num_queries) < 0.8,
        rng.beta(8, 2, num_queries),
        rng.beta(2, 2, num_queries),
    )
    rows = np.repeat(np.arange(num_queries), k)
    tokens = rng.zipf(1.2, rows.size) % VOCABULARY
    while True:  # distinct tokens within a query
        order = np.lexsort((tokens, rows))
        rows, tokens = rows[order], tokens[order]
        again = np.r_[False, (rows[1:] == rows[:-1]) & (tokens[1:] == tokens[:-1])]
        if not again.any():
            break
        tokens[again] = (tokens[again] + rng.integers(1, VOCABULARY, again.sum())) % VOCABULARY
    first = np.r_[0, np.cumsum(k)[:-1]]
    top = np.where(
        k == 1, NEXT_TOKEN_TEACHERS, np.round(share * NEXT_TOKEN_TEACHERS).astype(np.int64)
    )
    counts = np.zeros(rows.size, dtype=np.int64)
    counts[first] = top
    spread = np.repeat(np.arange(num_queries), NEXT_TOKEN_TEACHERS - top)
    slot = 1 + (rng.random(spread.size) * (k[spread] - 1)).astype(np.int64)
    np.add.at(counts, first[spread] + slot, 1)
    matrix = scipy.sparse.csr_matrix(
        (counts.astype(np.int32), (rows, tokens)), shape=(num_queries, VOCABULARY)
    )
    matrix.eliminate_zeros()
    return matrix


def labels_of(votes: scipy.sparse.csr_matrix) -> np.ndarray:
    """The votes of ``next_token_votes`` as (teachers, queries) int32 token ids: each query's
    votes laid out class by class (every query has all 200 teachers' votes)."""
    votes = votes.tocsr()
    if not np.all(np.asarray(votes.sum(axis=1)).ravel() == NEXT_TOKEN_TEACHERS):
        raise ValueError("every query must have a vote of every teacher")
    per_query = np.repeat(votes.indices, votes.data).astype(np.int32)
    return np.ascontiguousarray(per_query.reshape(votes.shape[0], NEXT_TOKEN_TEACHERS).T)


def labels_from_counts(counts: np.ndarray, seed: int = SEED) -> np.ndarray:
    """(queries, classes) integer counts -> (teachers, queries) labels, shuffled per query."""
    counts = counts.astype(np.int64)
    num_teachers = int(counts[0].sum())
    if not np.all(counts.sum(axis=1) == num_teachers):
        raise ValueError("every query must have the same number of votes")
    num_classes = counts.shape[1]
    # Cumulative counts mark where each class's block ends among the M votes.
    ends = np.cumsum(counts, axis=1)
    slots = np.arange(num_teachers)
    labels = (slots[None, :, None] >= ends[:, None, :]).sum(axis=2)  # (queries, teachers)
    labels = np.random.default_rng(seed).permuted(labels, axis=1)
    return np.ascontiguousarray(labels.T.astype(np.uint8 if num_classes <= 255 else np.int32))


def student_probabilities(counts: np.ndarray, seed: int = SEED) -> np.ndarray:
    """A synthetic student for Interactive-GNMax examples: (queries, classes) probabilities
    that put 0.8 on a guess (the plurality class, replaced by a random class for one query
    in five) and spread the rest evenly. Not a trained model: an input to try the flags."""
    rng = np.random.default_rng(seed)
    num_queries, num_classes = counts.shape
    guess = counts.argmax(axis=1)
    wrong = rng.random(num_queries) < 0.2
    guess[wrong] = rng.integers(0, num_classes, int(wrong.sum()))
    probs = np.full((num_queries, num_classes), 0.2 / (num_classes - 1))
    probs[np.arange(num_queries), guess] = 0.8
    return probs


def main() -> None:
    counts = np.load(HERE / "mnist_250_teachers.npy", allow_pickle=False)
    labels = labels_from_counts(counts)
    np.save(HERE / "mnist_250_teachers_labels.npy", labels)
    print(f"wrote mnist_250_teachers_labels.npy {labels.shape} {labels.dtype}")
    probs = student_probabilities(counts)
    np.save(HERE / "mnist_student_probs.npy", probs)
    print(f"wrote mnist_student_probs.npy {probs.shape} {probs.dtype}")
    votes = next_token_votes(NEXT_TOKEN_QUERIES, np.random.default_rng(SEED))
    scipy.sparse.save_npz(HERE / "next_token_votes.npz", votes)
    print(f"wrote next_token_votes.npz {votes.shape} {votes.nnz} non-zeros")
    from pate_cli.cli.app import app

    try:
        app(
            args=[
                "analyze",
                "sample_data/mnist_250_teachers.npy",
                "--threshold",
                "200",
                "--sigma1",
                "150",
                "--sigma",
                "40",
                "--queries",
                "640",
                "--delta",
                "1e-5",
                "--no-release",
                "--json",
                "--record",
                "sample_data/mnist_table2.record.json",
                "--force",
            ],
            prog_name="pate",
        )
    except SystemExit as done:
        if done.code:
            raise


if __name__ == "__main__":
    main()

"""The next-token sample is what its recipe makes, and reads as the same votes in each form."""

from __future__ import annotations

import importlib.util
import json

import numpy as np
import scipy.sparse

from tests.conftest import ROOT, run_cli

SAMPLE = ROOT / "sample_data" / "next_token_votes.npz"


def _recipe():
    spec = importlib.util.spec_from_file_location(
        "make_samples", SAMPLE.with_name("make_samples.py")
    )
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_sample_is_its_recipe():
    recipe = _recipe()
    made = recipe.next_token_votes(recipe.NEXT_TOKEN_QUERIES, np.random.default_rng(recipe.SEED))
    saved = scipy.sparse.load_npz(SAMPLE)
    assert saved.shape == (3000, 50257) and saved.dtype == np.int32
    assert (saved != made).nnz == 0
    np.testing.assert_array_equal(np.asarray(saved.sum(axis=1)).ravel(), 200)


def test_the_sample_analyses_alike_as_labels(tmp_path):
    saved = scipy.sparse.load_npz(SAMPLE).tocsr()
    labels = _recipe().labels_of(saved)
    assert labels.shape == (200, 3000)
    np.save(tmp_path / "labels.npy", labels)
    flags = ["--threshold", "190", "--sigma1", "60", "--sigma", "20", "--delta", "1e-5"]
    flags += ["--no-release", "--json"]
    sparse = json.loads(run_cli(["analyze", SAMPLE, *flags]).stdout)
    label_flags = ["--format", "labels", "--num-classes", "50257"]
    read = json.loads(run_cli(["analyze", tmp_path / "labels.npy", *label_flags, *flags]).stdout)
    for key in ("data_dependent", "guaranteed", "data_independent_worst_case"):
        assert read[key]["epsilon"] == sparse[key]["epsilon"]
    assert (
        5 < sparse["data_dependent"]["epsilon"] < sparse["data_independent_worst_case"]["epsilon"]
    )

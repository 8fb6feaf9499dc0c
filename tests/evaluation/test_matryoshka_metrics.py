"""`tapefit.evaluation.matryoshka`: a Matryoshka embedding's leading components
(`encode(texts, dim=)`, `leading_components`) and each dimension's pair and retrieval metrics
in the epoch logs. A whole run reporting them: tests/models/test_matryoshka.py."""

import math

import numpy as np
import pytest

from tapefit import SiameseModel, TapefitError
from tapefit.evaluation.matryoshka import MatryoshkaMetrics, leading_components, nested_pair_metrics
from tapefit.evaluation.retrieval import RetrievalTask
from tests.helpers import unit


def test_encode_gives_the_leading_dimensions_normalised_again():
    model = SiameseModel.from_texts(["a cat sat", "a dog ran"], encoder={"units": 8})
    texts = ["a cat", "a dog", "sat"]
    full = model.encode(texts, normalize=False)
    np.testing.assert_allclose(model.encode(texts, dim=4), unit(full[:, :4]), rtol=1e-5)
    np.testing.assert_allclose(model.encode(texts, dim=4, normalize=False), full[:, :4])
    assert np.allclose(np.linalg.norm(model.encode(texts, dim=3), axis=1), 1.0)
    with pytest.raises(TapefitError, match="dim=99 must be a whole number from 1 to"):
        model.encode(texts, dim=99)
    assert leading_components(full, 8).shape == full.shape


def test_leading_components_refuse_a_dimension_that_is_not_a_whole_width_and_keep_zeros():
    vectors = np.array([[3.0, 4.0, 12.0], [0.0, 0.0, 1.0]])
    np.testing.assert_array_equal(leading_components(vectors, 2, normalize=False), vectors[:, :2])
    assert leading_components(vectors, 2).tolist() == [[0.6, 0.8], [0.0, 0.0]]  # no NaN
    for dim in (0, 4, True, 2.0):
        with pytest.raises(TapefitError, match=rf"^dim={dim} must be a whole number from 1 to"):
            leading_components(vectors, dim)


# Pair i: (cos t_i, sin t_i, z_i) against (1, 0, z_i). The first two components rank the pairs
# as their labels do (cosine falls as t grows, and so do the labels); the third, large in the
# last pair only, raises that pair's full-width cosine above the middle one's.
ANGLES = np.array([0.1, 0.5, 1.0])
LEFT = np.stack([np.cos(ANGLES), np.sin(ANGLES), [0.0, 0.0, 5.0]], axis=1)
RIGHT = np.array([[1.0, 0.0, 0.0], [1.0, 0.0, 0.0], [1.0, 0.0, 5.0]])
LABELS = np.array([2.0, 1.0, 0.0])


class Embeddings:
    """`encode` of a model whose texts are row numbers of LEFT ("a0", ...) or RIGHT ("b0", ...),
    recording the `dim` each call asks for."""

    def __init__(self):
        self.dims = []

    def encode(self, texts, batch_size=256, normalize=True, dim=None):
        self.dims.append(dim)
        rows = np.array([(LEFT if t[0] == "a" else RIGHT)[int(t[1:])] for t in texts])
        return rows if dim is None else leading_components(rows, dim)


def test_each_dimension_is_scored_on_its_leading_components_alone():
    texts = (["a0", "a1", "a2"], ["b0", "b1", "b2"])
    got = nested_pair_metrics(Embeddings(), texts, LABELS, "graded", [2, 3], "val_")
    assert sorted(got) == ["val_pearson_2", "val_pearson_3", "val_spearman_2", "val_spearman_3"]
    assert got["val_spearman_2"] == pytest.approx(1.0)
    # full width: cosines 0.995, 0.878, 0.982, the last pair ranked above the middle one
    assert got["val_spearman_3"] == pytest.approx(0.5)


def test_the_callback_logs_exactly_the_names_it_announces_for_each_dimension():
    texts = (["a0", "a1", "a2"], ["b0", "b1", "b2"])
    task = RetrievalTask(queries=["a0", "a2"], corpus=["b0", "b2"], relevant=[{0}, {1}])
    callback = MatryoshkaMetrics(texts, LABELS, "graded", [2, 3], task=task)
    model = Embeddings()
    callback.set_model(model)
    logs = {"val_loss": 0.5}
    callback.on_epoch_end(0, logs)
    assert sorted(logs) == sorted(["val_loss", *callback.logged_names])
    assert "val_ndcg_at_10_2" in logs and "val_recall_at_1_3" in logs
    assert all(math.isfinite(value) for value in logs.values())
    assert {2, 3} <= set(model.dims)  # the retrieval side encoded at each dimension
    calls = len(model.dims)
    callback.on_epoch_end(1, None)  # no logs to add to: nothing encoded
    assert len(model.dims) == calls

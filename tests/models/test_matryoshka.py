"""Matryoshka embeddings: `model.loss.matryoshka_dims` sums any pair loss over the
embeddings' leading dimensions (each L2-normalised again), against a NumPy reference; each
dimension is evaluated on its own (`val_spearman_4`, `test_ndcg_at_10_4`, ...) and can be the
objective; `encode(texts, dim=)` gives it; bad settings are refused in one line."""

import json

import keras
import numpy as np
import pytest
import tensorflow as tf

import tapefit
from tapefit import SiameseModel, TapefitError
from tapefit.evaluation.matryoshka import leading_components
from tapefit.models.losses import CosineMSELoss, InBatchNegativesLoss
from tapefit.models.losses.matryoshka import MatryoshkaLoss
from tapefit.models.siamese_options import configured_pair_loss
from tests.helpers import SMALL_SIAMESE, unit


def test_the_loss_is_the_weighted_sum_over_leading_dimensions_of_a_numpy_reference():
    rng = np.random.default_rng(0)
    pairs = unit(rng.normal(size=(6, 2, 8))).astype("float32")
    labels = rng.uniform(0, 5, 6).astype("float32")
    loss = MatryoshkaLoss(CosineMSELoss(), dims=[8, 4, 2], weights=[1.0, 0.5, 2.0])
    expected = 0.0
    for dim, weight in ((8, 1.0), (4, 0.5), (2, 2.0)):
        cut = unit(pairs[..., :dim])
        cosines = np.sum(cut[:, 0] * cut[:, 1], axis=1)
        expected += weight * np.mean((cosines - labels / 5.0) ** 2)
    assert float(loss(labels, pairs)) == pytest.approx(expected, rel=1e-5)


def test_it_keeps_what_the_wrapped_loss_needs_and_serialises():
    wrapped = configured_pair_loss(
        {"name": "in_batch_negatives", "matryoshka_dims": [4, 2]}, [0.0, 5.0], "graded", True
    )
    assert isinstance(wrapped, MatryoshkaLoss) and isinstance(wrapped.loss, InBatchNegativesLoss)
    assert wrapped.uses_text_ids and wrapped.uses_negatives and wrapped.label_type is None
    again = keras.saving.deserialize_keras_object(keras.saving.serialize_keras_object(wrapped))
    assert again.dims == [4, 2] and again.weights == [1.0, 1.0]
    assert isinstance(again.loss, InBatchNegativesLoss)
    # gradients: the sum of the wrapped loss's on each truncation, as autodiff gives them
    pairs = tf.math.l2_normalize(tf.random.normal((5, 3, 4), seed=2), -1)
    ids = tf.constant(np.arange(15).reshape(5, 3), tf.int64)
    with tf.GradientTape(persistent=True) as tape:
        tape.watch(pairs)
        total = wrapped(ids, pairs)
        parts = sum(wrapped.loss(ids, tf.math.l2_normalize(pairs[..., :d], -1)) for d in (4, 2))
    np.testing.assert_allclose(float(total), float(parts), rtol=1e-6)
    np.testing.assert_allclose(
        tape.gradient(total, pairs).numpy(),
        tape.gradient(parts, pairs).numpy(),
        rtol=1e-5,
        atol=1e-7,
    )


@pytest.mark.parametrize(
    ("loss", "message"),
    [
        ({"matryoshka_dims": [4, 4]}, r"matryoshka_dims=\[4, 4\] must be distinct"),
        ({"matryoshka_dims": [0]}, r"must be a list of whole numbers >= 1"),
        ({"matryoshka_dims": [4], "matryoshka_weights": [1, 2]}, "one positive number per"),
        ({"matryoshka_weights": [1.0]}, "matryoshka_weights needs model.loss.matryoshka_dims"),
    ],
)
def test_bad_settings_are_refused_in_one_line(loss, message):
    with pytest.raises(TapefitError, match=message):
        SiameseModel(vocabulary=["a"], loss=loss)


def test_a_dimension_wider_than_the_embeddings_is_refused_at_the_first_step():
    model = SiameseModel.from_texts(
        ["a cat", "a dog"], encoder={"units": 4, "bidirectional": False},
        loss={"matryoshka_dims": [16]},
    )  # fmt: skip
    model.compile("sgd", **model.compile_defaults())
    batch = (tf.constant(["a cat", "a dog"]), tf.constant(["a dog", "a cat"])), tf.ones(2)
    with pytest.raises(TapefitError, match="16 is wider than the 4-dimensional embeddings"):
        model.train_step(batch)


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


@pytest.mark.slow
def test_a_run_reports_every_dimension_and_selects_on_one(compose, tmp_path):
    cfg = compose(
        [
            "experiment=siamese",
            "data.train_size=256",
            "data.val_size=64",
            "data.test_size=64",
            *SMALL_SIAMESE,
            "model.encoder.embedding_dim=8",  # 8 dimensions
            "model.loss.matryoshka_dims=[8,2]",
            "model.retrieval.enabled=true",
            "model.retrieval.positive_label=2.5",
            "trainer.epochs=2",
            "trainer.verbose=0",
            "objective=val_spearman_2",
        ]
    )
    results = tapefit.run(cfg, tmp_path)
    history = json.loads((tmp_path / "history.json").read_text())
    for dim in (8, 2):
        assert len(history[f"val_spearman_{dim}"]) == 2
        assert 0 <= history[f"val_ndcg_at_10_{dim}"][-1] <= 1
        assert -1 <= results[f"test_spearman_{dim}"] <= 1
        assert 0 <= results[f"test_mrr_at_10_{dim}"] <= 1
    # the full width's figures are the model's own
    assert results["test_spearman_8"] == pytest.approx(results["test_spearman"], abs=1e-6)
    assert results["objective"] == "val_spearman_2"
    assert results["objective_value"] == max(history["val_spearman_2"])


@pytest.mark.slow
def test_the_saved_model_serves_each_dimension(tmp_path):
    from tapefit.training.export import export_for_serving

    # the bag of embeddings (8 wide): the export's signatures are the subject, not the encoder
    encoder = {"rnn": "none", "pooling": "mean", "embedding_dim": 8}
    model = SiameseModel.from_texts(
        ["a cat sat", "a dog ran"], encoder=encoder, loss={"matryoshka_dims": [8, 3]}
    )
    export_for_serving(model, tmp_path / "export")
    served = tf.saved_model.load(str(tmp_path / "export"))
    texts = ["a cat", "a dog ran"]
    for dim in (8, 3):
        got = served.signatures[f"encode_{dim}"](texts=tf.constant(texts))
        np.testing.assert_allclose(
            next(iter(got.values())).numpy(), model.encode(texts, dim=dim), rtol=1e-5, atol=1e-6
        )

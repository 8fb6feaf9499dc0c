"""tapefit/models/losses/matryoshka.py: `MatryoshkaLoss` against a NumPy reference, what it
keeps of the wrapped loss, its serialisation, and its settings refused in one line."""

import keras
import numpy as np
import pytest
import tensorflow as tf

from tapefit import SiameseModel, TapefitError
from tapefit.models.losses import CosineMSELoss, InBatchNegativesLoss
from tapefit.models.losses.matryoshka import MatryoshkaLoss
from tapefit.models.siamese_options import configured_pair_loss
from tests.helpers import unit


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

"""tapefit/models/losses/cosent.py: the ranking of CoSENT (and of AnglE, which ranks by
another similarity) against NumPy references written from the papers' formulas, gradients
against finite differences, mixed float16, serialisation."""

import keras
import numpy as np
import pytest
import tensorflow as tf

import tapefit
from tapefit import TapefitError
from tapefit.models.losses import AnglELoss, CoSENTLoss, make_pair_loss
from tests.models.pair_loss_references import batch, reference_angle


def reference_cosine(first, second):
    first = first / np.linalg.norm(first, axis=-1, keepdims=True)
    second = second / np.linalg.norm(second, axis=-1, keepdims=True)
    return np.sum(first * second, axis=-1)


def reference_ranking(labels, scores):
    """log(1 + sum over pairs (i, j) with y_i < y_j of exp(s_i - s_j)), term by term."""
    total = 1.0
    for i in range(len(labels)):
        for j in range(len(labels)):
            if labels[i] < labels[j]:
                total += np.exp(scores[i] - scores[j])
    return np.log(total)


@pytest.mark.parametrize("seed", [0, 1, 2])
@pytest.mark.parametrize("scale", [1.0, 20.0])
def test_cosent_and_angle_equal_their_references(seed, scale):
    labels, pairs = batch(seed)
    cosent = reference_ranking(labels, scale * reference_cosine(pairs[:, 0], pairs[:, 1]))
    angle = reference_ranking(labels, scale * reference_angle(pairs[:, 0], pairs[:, 1]))
    got_cosent = float(CoSENTLoss(scale=scale)(labels, pairs.astype("float32")))
    got_angle = float(AnglELoss(scale=scale)(labels, pairs.astype("float32")))
    assert got_cosent == pytest.approx(cosent, rel=1e-5)
    assert got_angle == pytest.approx(angle, rel=1e-5)
    # in float64 the losses agree with the references to rounding
    assert float(CoSENTLoss(scale=scale).call(labels, pairs)) == pytest.approx(cosent, rel=1e-12)
    assert float(AnglELoss(scale=scale).call(labels, pairs)) == pytest.approx(angle, rel=1e-12)


def test_ranking_asks_only_for_the_labels_order():
    labels, pairs = batch(4)
    loss = CoSENTLoss()
    # any increasing map of the labels keeps their order, so the loss is the same
    assert float(loss.call(labels, pairs)) == float(loss.call(np.exp(labels) * 3.0, pairs))
    # a batch whose labels all tie ranks nothing: log(1) = 0
    assert float(loss.call(np.full(len(labels), 2.0), pairs)) == 0.0


# scale 5: central differences err by O(eps^2 * scale^3), which at 20 hides in small entries
@pytest.mark.parametrize("loss", [CoSENTLoss(scale=5.0), AnglELoss(scale=5.0)])
def test_cosent_and_angle_gradients_equal_finite_differences(loss):
    labels, pairs = batch(5, size=8, dim=6)
    check = tapefit.gradcheck(lambda p: loss.call(labels, p), pairs, samples=24)
    assert check.checked == 24
    assert check.max_relative_error < 1e-6


def test_ranking_losses_are_finite_under_mixed_float16():
    labels, pairs = batch(6)
    half = tf.constant(pairs, tf.float16)
    for loss in (CoSENTLoss(), AnglELoss()):
        value = loss.call(labels, half)
        assert value.dtype == tf.float32 and np.isfinite(float(value))
        reference = float(loss.call(labels, pairs))
        assert float(value) == pytest.approx(reference, rel=1e-2)


def test_ranking_losses_serialise_and_are_chosen_by_name():
    for name, loss_class in (("cosent", CoSENTLoss), ("angle", AnglELoss)):
        loss = make_pair_loss(name, scale=7.0, margin=0.3, label_range=(0, 5))
        assert type(loss) is loss_class and loss.scale == 7.0
        again = keras.losses.deserialize(keras.losses.serialize(loss))
        assert type(again) is loss_class and again.scale == 7.0 and again.name == name
    with pytest.raises(TapefitError, match=r"cosent scale=0 must be > 0"):
        CoSENTLoss(scale=0)

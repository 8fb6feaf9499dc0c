"""tapefit/models/losses/cosine_mse.py: `CosineMSELoss`'s rescaled labels against NumPy, and
its targets mapped back onto the labels."""

import numpy as np
import pytest
import tensorflow as tf

from tapefit.models.losses import CosineMSELoss
from tests.models.pair_loss_references import COS, PAIR


@pytest.mark.parametrize(
    ("target_range", "expected_target"),
    [((0, 1), [1.0, 0.5, 0.0, 0.2]), ((-1, 1), [1.0, 0.0, -1.0, -0.6])],
)
def test_cosine_mse_rescales_labels(target_range, expected_target):
    labels = np.array([5.0, 2.5, 0.0, 1.0], "float32")
    loss_fn = CosineMSELoss(label_range=(0, 5), target_range=target_range)
    np.testing.assert_allclose(loss_fn.rescale(tf.constant(labels)), expected_target, atol=1e-6)
    expected = np.mean((COS - np.array(expected_target)) ** 2)
    assert float(loss_fn(labels, PAIR)) == pytest.approx(expected, abs=1e-6)


def test_cosine_mse_with_sample_weights():
    labels = np.array([5.0, 2.5, 0.0, 1.0], "float32")
    weights = np.array([1.0, 0.0, 2.0, 1.0], "float32")
    target = labels / 5.0
    expected = np.sum(weights * (COS - target) ** 2) / 4  # Keras: sum over batch size
    loss = CosineMSELoss()(labels, PAIR, sample_weight=weights)
    assert float(loss) == pytest.approx(expected, abs=1e-6)


@pytest.mark.parametrize("target_range", [(0.0, 1.0), (-1.0, 1.0)])
def test_cosine_mse_maps_its_targets_back_onto_the_labels(target_range):
    loss = CosineMSELoss(label_range=(1.0, 5.0), target_range=target_range)
    labels = np.array([1.0, 2.0, 3.5, 5.0])
    targets = loss.rescale(tf.constant(labels)).numpy()
    np.testing.assert_allclose(loss.to_label_scale(targets), labels, atol=1e-12)
    # cosines beyond the target range are the label range's ends
    assert loss.to_label_scale([target_range[0] - 0.5, 1.5]).tolist() == [1.0, 5.0]

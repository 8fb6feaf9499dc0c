"""Every pair loss against a NumPy computation on a hand-made batch."""

import numpy as np
import pytest
import tensorflow as tf

from tapefit import TapefitError
from tapefit.models.losses import ContrastiveLoss, CosineLoss, CosineMSELoss, InBatchNegativesLoss


def unit(rows):
    rows = np.asarray(rows, "float32")
    return rows / np.linalg.norm(rows, axis=-1, keepdims=True)


# Four pairs of 3-d embeddings chosen by hand: identical, orthogonal, opposite, 60 degrees.
A = unit([[1, 0, 0], [0, 1, 0], [0, 0, 1], [1, 1, 0]])
B = unit([[1, 0, 0], [1, 0, 0], [0, 0, -1], [1, 0, 0]])
PAIR = np.stack([A, B], axis=1)
COS = np.sum(A * B, axis=1)  # [1, 0, -1, 0.7071]


def test_hand_made_cosines():
    np.testing.assert_allclose(COS, [1.0, 0.0, -1.0, np.sqrt(0.5)], atol=1e-6)


def test_cosine_loss_is_one_minus_mean_cosine():
    loss = CosineLoss()(np.zeros(4, "float32"), PAIR)
    assert float(loss) == pytest.approx(np.mean(1 - COS), abs=1e-6)


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


def test_contrastive_loss():
    labels = np.array([1.0, 0.0, 0.0, 1.0], "float32")
    margin = 0.5
    distance = 1 - COS
    expected = labels * distance**2 + (1 - labels) * np.maximum(0, margin - distance) ** 2
    loss = ContrastiveLoss(margin=margin)(labels, PAIR)
    assert float(loss) == pytest.approx(np.mean(expected), abs=1e-6)


def log_softmax(scores):
    shifted = scores - scores.max(axis=1, keepdims=True)
    return shifted - np.log(np.exp(shifted).sum(axis=1, keepdims=True))


def test_in_batch_negatives_is_cross_entropy_over_the_batch():
    ids = np.array([[1, 11], [2, 12], [3, 13], [4, 14]], "float32")  # all texts distinct
    scores = 20.0 * A @ B.T
    expected = -np.mean(np.diag(log_softmax(scores)))
    loss = InBatchNegativesLoss(scale=20.0)(ids, PAIR)
    assert float(loss) == pytest.approx(expected, rel=1e-5)


def test_in_batch_negatives_masks_duplicate_texts():
    # Rows 0 and 1 share their positive text, rows 2 and 3 their anchor text: in each case the
    # other row's positive is a true positive too, so it must not count as a negative.
    ids = np.array([[1, 11], [2, 11], [3, 13], [3, 14]], "float32")
    scores = 20.0 * A @ B.T
    masked = scores.copy()
    for i, j in [(0, 1), (1, 0), (2, 3), (3, 2)]:
        masked[i, j] = -np.inf
    expected = -np.mean(np.diag(log_softmax(masked)))
    naive = -np.mean(np.diag(log_softmax(scores)))
    loss = float(InBatchNegativesLoss(scale=20.0)(ids, PAIR))
    assert loss == pytest.approx(expected, rel=1e-5)
    assert loss != pytest.approx(naive, rel=1e-3)


def test_bad_loss_options_are_rejected():
    with pytest.raises(TapefitError, match="target_range"):
        CosineMSELoss(target_range=(0, 2))
    with pytest.raises(TapefitError, match="label_range"):
        CosineMSELoss(label_range=(5, 0))
    with pytest.raises(TapefitError, match="margin"):
        ContrastiveLoss(margin=0.0)


def test_losses_round_trip_through_keras_serialisation():
    import keras

    for loss in (CosineMSELoss((1, 3), (-1, 1)), ContrastiveLoss(0.3), InBatchNegativesLoss(7.0)):
        restored = keras.losses.deserialize(keras.losses.serialize(loss))
        assert type(restored) is type(loss) and restored.get_config() == loss.get_config()


def test_every_loss_says_its_formula_source_inputs_and_example():
    """One loss per file, each documented as sentence-transformers documents its losses: the
    formula, the paper it comes from (a year), what `y_true` and `y_pred` hold, an example."""
    import re

    from tapefit.models.losses.matryoshka import MatryoshkaLoss
    from tapefit.models.losses.registry import PAIR_LOSSES

    for loss in [*PAIR_LOSSES.values(), MatryoshkaLoss]:
        text = loss.__doc__ or ""
        module_text = f"{text}\n{__import__(loss.__module__, fromlist=['_']).__doc__}"
        assert re.search(r"(19|20)\d\d", module_text), f"{loss.__name__}: no paper"
        assert "Inputs:" in text and "`y_pred`" in text, f"{loss.__name__}: no inputs"
        assert ">>> " in text, f"{loss.__name__}: no example"
        assert re.search(r"`[^`]*(=|log\(|max\(|sum)[^`]*`", text), f"{loss.__name__}: no formula"

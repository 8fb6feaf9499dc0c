"""Checks across the pair losses: the hand-made batch their tests compute on
(tests/models/pair_loss_references.py), their options refused and their Keras serialisation;
each loss's values against NumPy: tests/models/losses/."""

import numpy as np
import pytest

from tapefit import TapefitError
from tapefit.models.losses import ContrastiveLoss, CosineMSELoss, InBatchNegativesLoss
from tests.models.pair_loss_references import COS


def test_hand_made_cosines():
    np.testing.assert_allclose(COS, [1.0, 0.0, -1.0, np.sqrt(0.5)], atol=1e-6)


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

"""tapefit/models/losses/cosine.py: `CosineLoss` against NumPy on the hand-made batch."""

import numpy as np
import pytest

from tapefit.models.losses import CosineLoss
from tests.models.pair_loss_references import COS, PAIR


def test_cosine_loss_is_one_minus_mean_cosine():
    loss = CosineLoss()(np.zeros(4, "float32"), PAIR)
    assert float(loss) == pytest.approx(np.mean(1 - COS), abs=1e-6)

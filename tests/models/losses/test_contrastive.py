"""tapefit/models/losses/contrastive.py: `ContrastiveLoss` against NumPy on the hand-made batch."""

import numpy as np
import pytest

from tapefit.models.losses import ContrastiveLoss
from tests.models.pair_loss_references import COS, PAIR


def test_contrastive_loss():
    labels = np.array([1.0, 0.0, 0.0, 1.0], "float32")
    margin = 0.5
    distance = 1 - COS
    expected = labels * distance**2 + (1 - labels) * np.maximum(0, margin - distance) ** 2
    loss = ContrastiveLoss(margin=margin)(labels, PAIR)
    assert float(loss) == pytest.approx(np.mean(expected), abs=1e-6)

"""tapefit/models/losses/angle.py: AnglE's similarity against a complex-arithmetic reference."""

import numpy as np

from tapefit.models.losses import angle_similarity
from tests.models.pair_loss_references import reference_angle


def test_angle_similarity_equals_the_complex_reference_for_odd_and_even_widths():
    rng = np.random.default_rng(3)
    for dim in (6, 7):
        first, second = rng.normal(size=(5, dim)), rng.normal(size=(5, dim))
        np.testing.assert_allclose(
            angle_similarity(first, second).numpy(), reference_angle(first, second), rtol=1e-12
        )

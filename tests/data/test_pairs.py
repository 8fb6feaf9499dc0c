"""Text-pair data (`tapefit.data.pairs`): `synthetic_splits`' per-process cache hands out copies."""

import numpy as np

from tapefit.data.pairs import synthetic_splits
from tapefit.data.synthetic_pairs import PairGenerator


def test_synthetic_splits_are_drawn_once_and_handed_out_as_copies():
    sizes = {"train": 64, "val": 16, "test": 16}
    first, _ = synthetic_splits(sizes, "graded", seed=11)
    first["train"].texts_a[0] = "changed by its user"
    first["train"].labels[0] = -1.0
    again, _ = synthetic_splits(sizes, "graded", seed=11)
    fresh = PairGenerator(seed=11).pairs(64)
    assert again["train"].texts_a.tolist() == fresh[0].tolist()
    np.testing.assert_array_equal(again["train"].labels, fresh[2])
    binary, label_range = synthetic_splits(sizes, "binary", seed=11)  # the same draws, binarised
    assert label_range == (0.0, 1.0)
    np.testing.assert_array_equal(binary["train"].labels, (fresh[2] >= 2.5).astype("float32"))

"""The synthetic pair generator: its fast draws are `rng.choice`'s, from the same stream, and
the per-process cache of `synthetic_splits` hands out copies."""

import numpy as np

from tapefit.data.pairs import synthetic_splits
from tapefit.data.synthetic_pairs import FILLERS, PairGenerator


class ChoiceGenerator(PairGenerator):
    """The generator as it was written before: `rng.choice` for every synonym and filler."""

    def _realise(self, concepts, edits):
        rng = self.rng
        words = [str(rng.choice(self.surface[c])) for c in concepts]
        if edits:
            for i in range(len(words) - 1):
                if rng.random() < 0.3:
                    words[i], words[i + 1] = words[i + 1], words[i]
        for _ in range(rng.integers(0, 3)):
            words.insert(int(rng.integers(0, len(words) + 1)), str(rng.choice(FILLERS)))
        return " ".join(words)


def test_the_fast_draws_are_the_ones_rng_choice_makes():
    fast, reference = PairGenerator(seed=5).pairs(400), ChoiceGenerator(seed=5).pairs(400)
    for got, want in zip(fast, reference, strict=True):
        assert got.tolist() == want.tolist()
    assert len(set(fast[0].tolist())) > 300  # varied sentences, not one repeated


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

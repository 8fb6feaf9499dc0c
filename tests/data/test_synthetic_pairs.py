"""The synthetic pair generator: its fast draws are `rng.choice`'s, from the same stream."""

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

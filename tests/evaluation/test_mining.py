"""Hard-negative mining (`tapefit.evaluation.mining`): the block-wise miner equals a brute-force
reference with every filter; impossible ranges are refused. The command that runs it,
`python -m tapefit.mine`, is tested in tests/test_mine.py."""

import numpy as np
import pytest

from tapefit import TapefitError
from tapefit.evaluation.mining import MiningOptions, mine
from tests.helpers import unit


def reference(anchors, corpus, positive_index, excluded, options):
    """The whole score matrix at once, every filter written out."""
    scores = anchors @ corpus.T
    chosen, ranks = [], []
    for row, positive in enumerate(positive_index):
        positive_score = scores[row, positive]
        ranks.append(1 + int((scores[row] > positive_score).sum()))
        order = [
            i
            for i in np.argsort(-scores[row], kind="stable")
            if i != positive and i not in excluded[row]
        ][options.range_min : options.range_max]
        if options.margin is not None:
            order = [i for i in order if scores[row, i] <= positive_score - options.margin]
        if options.relative_margin is not None:
            ceiling = positive_score * (1 - options.relative_margin)
            order = [i for i in order if scores[row, i] <= ceiling]
        chosen.append(order[: options.num_negatives])
    return chosen, ranks


@pytest.mark.parametrize(
    "options",
    [
        MiningOptions(block=7),
        MiningOptions(num_negatives=3, range_min=2, range_max=12, block=5),
        MiningOptions(margin=0.05, block=64),
        MiningOptions(num_negatives=2, relative_margin=0.1, range_max=20, block=3),
    ],
)
def test_the_block_wise_miner_equals_the_brute_force_reference(options):
    rng = np.random.default_rng(0)
    corpus = unit(rng.normal(size=(40, 6))).astype("float32")
    positive_index = rng.integers(0, 40, 25)
    anchors = unit(corpus[positive_index] + rng.normal(0, 0.6, (25, 6))).astype("float32")
    excluded = [frozenset({int(i), int((i + 1) % 40)}) for i in positive_index]
    mined = mine(anchors, corpus[positive_index], corpus, positive_index, excluded, options)
    chosen, ranks = reference(anchors, corpus, positive_index, excluded, options)
    for row, want in enumerate(chosen):
        got = [int(i) for i in mined.negatives[row] if i >= 0]
        assert got == want, row
    assert mined.positive_ranks.tolist() == ranks
    assert (mined.negatives >= 0).sum() < mined.negatives.size or options.margin is None


def test_impossible_ranges_are_refused():
    with pytest.raises(TapefitError, match="range_max=2 must be at least range_min"):
        MiningOptions(range_min=2, range_max=2)

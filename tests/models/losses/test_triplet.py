"""tapefit/models/losses/triplet.py: `TripletLoss` against its NumPy reference, shared texts
masked and with hard negatives; its options checked and serialised."""

import keras
import pytest

from tapefit import TapefitError
from tapefit.models.losses import TripletLoss, make_pair_loss
from tests.models.pair_loss_references import in_batch, reference_triplet, triples


@pytest.mark.parametrize("mining", ["hard", "all"])
@pytest.mark.parametrize("margin", [0.3, 1.5])
def test_triplet_equals_its_reference_with_shared_texts_masked(mining, margin):
    ids, pairs = in_batch(8)
    expected = reference_triplet(ids, pairs, margin, mining)
    loss = TripletLoss(margin=margin, mining=mining)
    assert float(loss.call(ids, pairs).numpy().mean()) == pytest.approx(expected, rel=1e-12)
    assert float(loss(ids, pairs.astype("float32"))) == pytest.approx(expected, rel=1e-5)


def test_triplet_options_are_checked_and_serialise():
    with pytest.raises(TapefitError, match=r"triplet mining='easy' must be hard or all"):
        TripletLoss(mining="easy")
    with pytest.raises(TapefitError, match=r"triplet margin=3 must lie in \(0, 2\]"):
        TripletLoss(margin=3)
    loss = make_pair_loss("triplet", margin=0.2, mining="all", scale=3.0)
    again = keras.losses.deserialize(keras.losses.serialize(loss))
    assert (type(again), again.margin, again.mining) == (TripletLoss, 0.2, "all")
    symmetric = make_pair_loss("in_batch_negatives", symmetric=True)
    assert keras.losses.deserialize(keras.losses.serialize(symmetric)).symmetric is True


@pytest.mark.parametrize("mining", ["hard", "all"])
@pytest.mark.parametrize("margin", [0.3, 1.5])
def test_triplet_with_hard_negatives_equals_its_reference(mining, margin):
    ids, rows = triples(3)
    loss = TripletLoss(margin=margin, mining=mining)
    expected = reference_triplet(ids, rows, margin, mining)
    assert float(loss.call(ids, rows).numpy().mean()) == pytest.approx(expected, rel=1e-12)

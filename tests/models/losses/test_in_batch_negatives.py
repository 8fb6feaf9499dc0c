"""tapefit/models/losses/in_batch_negatives.py: `InBatchNegativesLoss` against NumPy, with
duplicate texts masked, symmetric, and with hard negatives."""

import numpy as np
import pytest

from tapefit.models.losses import InBatchNegativesLoss
from tests.models.pair_loss_references import (
    PAIR,
    A,
    B,
    in_batch,
    reference_in_batch_negatives,
    triples,
)


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


def test_symmetric_in_batch_negatives_equals_its_reference():
    ids, pairs = in_batch(9)
    loss = InBatchNegativesLoss(scale=5.0, symmetric=True)
    expected = reference_in_batch_negatives(ids, pairs, 5.0, symmetric=True)
    assert float(loss.call(ids, pairs).numpy().mean()) == pytest.approx(expected, rel=1e-10)
    one_way = float(InBatchNegativesLoss(scale=5.0)(ids, pairs))
    assert one_way != pytest.approx(expected, rel=1e-6)  # the backward half counts


@pytest.mark.parametrize("symmetric", [False, True])
def test_in_batch_negatives_with_hard_negatives_equals_its_reference(symmetric):
    ids, rows = triples(2)
    loss = InBatchNegativesLoss(scale=5.0, symmetric=symmetric)
    expected = reference_in_batch_negatives(ids, rows, 5.0, symmetric)
    assert float(loss.call(ids, rows).numpy().mean()) == pytest.approx(expected, rel=1e-10)
    assert float(loss(ids, rows.astype("float32"))) == pytest.approx(expected, rel=1e-5)
    # the third text counts: the same pairs without it give another loss
    without = float(loss.call(ids[:, :2], rows[:, :2]).numpy().mean())
    assert without < expected - 1e-3

"""tapefit/models/losses/candidates.py: the hard negatives' collisions masked, and the
negatives gathered across two replicas equal to one device's, values and gradients."""

import numpy as np
import pytest
import tensorflow as tf

from tapefit.models.losses import InBatchNegativesLoss, TripletLoss, hard_negative_candidates
from tests.models.pair_loss_references import in_batch, triples


def replicated_loss_and_gradient(strategy, loss, ids, pairs):
    """The global batch split in two halves, one per replica; each replica's share of the
    global mean loss and its gradient with respect to all pairs, summed over replicas."""
    with strategy.scope():
        shared = tf.Variable(pairs)
    half = len(pairs) // 2

    @tf.function
    def step():
        def replica_step():
            replica = tf.distribute.get_replica_context().replica_id_in_sync_group
            rows = tf.range(half) + half * replica
            with tf.GradientTape() as tape:
                per_row = loss.call(tf.gather(ids, rows), tf.gather(shared, rows))
                value = tf.reduce_sum(per_row) / len(pairs)
            return value, tf.convert_to_tensor(tape.gradient(value, shared))

        values, gradients = strategy.run(replica_step)
        total = strategy.reduce(tf.distribute.ReduceOp.SUM, values, axis=None)
        return total, strategy.reduce(tf.distribute.ReduceOp.SUM, gradients, axis=None)

    value, gradient = step()
    return float(value), gradient.numpy()


# Both in-batch-negative losses, with or without gathering across replicas.
GATHERING_LOSSES = pytest.mark.parametrize(
    "make",
    [
        lambda gather: InBatchNegativesLoss(5.0, symmetric=True, across_replicas=gather),
        lambda gather: TripletLoss(margin=1.5, mining="all", across_replicas=gather),
    ],
    ids=["in_batch_negatives", "triplet"],
)


def test_the_collisions_are_masked_and_nothing_else():
    ids, rows = triples(1)
    _, masked = hard_negative_candidates(rows, ids, across_replicas=False)
    expected = np.zeros((8, 8), bool)
    expected[0, 1] = expected[1, 1] = True  # row 1's negative is rows 0 and 1's anchor text
    expected[3, 2] = True  # row 2's negative is row 3's positive text
    np.testing.assert_array_equal(masked.numpy(), expected)
    assert hard_negative_candidates(rows[:, :2], ids[:, :2], across_replicas=False) is None


@pytest.mark.slow
@GATHERING_LOSSES
def test_negatives_gathered_across_replicas_equal_one_device(mirrored_strategy, make):
    ids, pairs = in_batch(12, size=8)
    pairs = pairs.astype("float32")
    whole = tf.Variable(pairs)
    with tf.GradientTape() as tape:
        expected = tf.reduce_mean(make(False).call(ids, whole))
    expected_gradient = tape.gradient(expected, whole).numpy()
    value, gradient = replicated_loss_and_gradient(mirrored_strategy, make(True), ids, pairs)
    assert value == pytest.approx(float(expected), abs=1e-6)
    np.testing.assert_allclose(gradient, expected_gradient, atol=1e-6)
    # without gathering each replica sees only its half's negatives: another loss
    alone, _ = replicated_loss_and_gradient(mirrored_strategy, make(False), ids, pairs)
    assert abs(alone - float(expected)) > 1e-3


@pytest.mark.slow
@GATHERING_LOSSES
def test_hard_negatives_gathered_across_replicas_equal_one_device(mirrored_strategy, make):
    ids, rows = triples(5)
    rows = rows.astype("float32")
    whole = tf.Variable(rows)
    with tf.GradientTape() as tape:
        expected = tf.reduce_mean(make(False).call(ids, whole))
    expected_gradient = tape.gradient(expected, whole).numpy()
    value, gradient = replicated_loss_and_gradient(mirrored_strategy, make(True), ids, rows)
    assert value == pytest.approx(float(expected), abs=1e-6)
    np.testing.assert_allclose(gradient, expected_gradient, atol=1e-6)

"""NumPy references of the in-batch pair losses, written one row at a time from their
definitions, and a loss's value and gradient over two replicas: shared by
tests/models/test_pair_losses.py (pairs: `ids` and `rows` of two texts) and
tests/models/test_hard_negatives.py (triples: a third text, the pair's hard negative)."""

import numpy as np
import pytest
import tensorflow as tf

from tapefit.models.losses import InBatchNegativesLoss, TripletLoss


def negatives_of(ids, i):
    """Rows j whose positive is a true negative of row i (no shared text)."""
    return [
        j for j in range(len(ids)) if j != i and ids[j, 0] != ids[i, 0] and ids[j, 1] != ids[i, 1]
    ]


def hard_negatives_of(ids, i):
    """Rows j whose negative (third text) is a negative of row i: not row i's anchor or
    positive text; none for pairs."""
    if ids.shape[1] < 3:
        return []
    return [j for j in range(len(ids)) if ids[j, 2] not in (ids[i, 0], ids[i, 1])]


def _cross_entropy(logits):  # the target is the first logit
    return -(logits[0] - np.log(np.sum(np.exp(logits))))


def reference_in_batch_negatives(ids, rows, scale, symmetric):
    """`in_batch_negatives`: each anchor against its positive (first), the batch's other
    positives and the hard negatives; `symmetric` also each positive against the anchors."""
    forward, backward = [], []
    for i in range(len(ids)):
        others = negatives_of(ids, i)
        hard = [row[2] for row in rows[hard_negatives_of(ids, i)]]
        candidates = [rows[i, 1], *rows[others, 1], *hard]
        forward.append(_cross_entropy(scale * np.array(candidates) @ rows[i, 0]))
        backward.append(_cross_entropy(scale * rows[[i, *others], 0] @ rows[i, 1]))
    return (np.mean(forward) + np.mean(backward)) / 2 if symmetric else np.mean(forward)


def reference_triplet(ids, rows, margin, mining):
    """`triplet`: the margin violations of each anchor's negatives (the batch's other
    positives and the hard negatives), the hardest (`mining="hard"`) or the mean of the
    active ones (`"all"`)."""
    losses = []
    for i in range(len(ids)):
        positive = rows[i, 0] @ rows[i, 1]
        negatives = [
            *rows[negatives_of(ids, i), 1],
            *(row[2] for row in rows[hard_negatives_of(ids, i)]),
        ]
        violations = [max(0.0, rows[i, 0] @ n - positive + margin) for n in negatives]
        active = [v for v in violations if v > 0]
        losses.append(max(violations) if mining == "hard" else sum(active) / max(len(active), 1))
    return np.mean(losses)


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

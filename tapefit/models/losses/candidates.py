"""The candidates in-batch losses rank an anchor against: the batch's (or global batch's)
positives, explicit hard negatives, and which of them are not true negatives."""

from __future__ import annotations

from typing import Any, NamedTuple

import tensorflow as tf


class BatchCandidates(NamedTuple):
    """A replica's rows and the candidate rows its anchors are ranked against."""

    anchors: tf.Tensor  # (batch, dim): this replica's anchors
    positives: tf.Tensor  # (batch, dim): their positives
    ids: tf.Tensor  # (batch, 2): the rows' text fingerprints
    all_anchors: tf.Tensor  # (candidates, dim): every candidate row's anchor
    all_positives: tf.Tensor  # (candidates, dim): every candidate row's positive
    all_ids: tf.Tensor  # (candidates, 2): their fingerprints
    targets: tf.Tensor  # (batch,): each row's own index among the candidates


class HardNegatives(NamedTuple):
    """The batch's explicit hard negatives as extra candidates."""

    negatives: tf.Tensor  # (candidates, dim)
    masked: tf.Tensor  # (batch, candidates): where one is not a negative of a row


def batch_candidates(
    pair_embeddings: tf.Tensor, text_ids: tf.Tensor, across_replicas: bool
) -> BatchCandidates:
    """The rows a batch's in-batch negatives are drawn from: this replica's rows, or, with
    `across_replicas` under a distribution strategy, every replica's (an all-gather).

    Why: each replica sees only its share of the global batch, so its anchors would meet
    batch/replicas - 1 negatives; gathering restores the global batch's. The all-gather is
    differentiable, so the other replicas' positives get their gradients too.

    Args:
        pair_embeddings: `(batch, 2, dim)`: anchors and positives of this replica's rows.
        text_ids: `(batch, 2)` text fingerprints of the rows.
        across_replicas: Gather every replica's rows when more than one is in sync.

    Returns:
        `BatchCandidates`: this replica's rows, the candidate rows, and each row's own index
        among the candidates.

    Example:
        >>> import numpy as np
        >>> ids = np.arange(6).reshape(3, 2)
        >>> rows = batch_candidates(np.zeros((3, 2, 4), "float32"), ids, across_replicas=True)
        >>> rows.targets.numpy().tolist()  # one replica: a row is its own candidate
        [0, 1, 2]
    """
    pair_embeddings = tf.convert_to_tensor(pair_embeddings)
    anchors, positives = pair_embeddings[:, 0], pair_embeddings[:, 1]
    ids = _row_ids(text_ids, pair_embeddings)[:, :2]
    context = tf.distribute.get_replica_context()
    offset = tf.constant(0, tf.int32)
    all_anchors, all_positives, all_ids = anchors, positives, ids
    if across_replicas and context is not None and context.num_replicas_in_sync > 1:
        sizes = context.all_gather(tf.shape(anchors)[:1], axis=0)
        offset = tf.reduce_sum(sizes[: context.replica_id_in_sync_group])
        all_anchors = context.all_gather(anchors, axis=0)
        all_positives = context.all_gather(positives, axis=0)
        all_ids = context.all_gather(ids, axis=0)
    targets = offset + tf.range(tf.shape(anchors)[0])
    return BatchCandidates(anchors, positives, ids, all_anchors, all_positives, all_ids, targets)


def _row_ids(text_ids: Any, embeddings: tf.Tensor) -> tf.Tensor:
    """The fingerprints as `(batch, texts per row)`, whatever shape Keras passed them in."""
    return tf.reshape(tf.convert_to_tensor(text_ids), [tf.shape(embeddings)[0], -1])


def hard_negative_candidates(
    embeddings: tf.Tensor, text_ids: tf.Tensor, across_replicas: bool
) -> HardNegatives | None:
    """The explicit hard negatives of a batch as extra candidates, or None without them.

    Why: in-batch negatives are mostly easy (another pair's unrelated text); a third text
    per row, chosen to be close but wrong (a contradiction, a near-duplicate question),
    teaches the finer distinctions. Every row's negative is a candidate for every anchor, as
    the other rows' positives are; a negative whose text is a row's own anchor or positive
    is masked for that row.

    Args:
        embeddings: `(batch, 3, dim)` anchors, positives and negatives (or `(batch, 2, dim)`,
            which has none).
        text_ids: `(batch, 3)` text fingerprints of the rows.
        across_replicas: Gather every replica's negatives when more than one is in sync.

    Returns:
        `HardNegatives`: the candidate negatives `(candidates, dim)` and where one is not a
        negative of a row `(batch, candidates)`; None for two texts per row.

    Example:
        >>> import numpy as np
        >>> rows = np.zeros((2, 3, 4), "float32")
        >>> ids = np.array([[1, 2, 3], [4, 5, 1]])  # row 1's negative is row 0's anchor text
        >>> hard = hard_negative_candidates(rows, ids, across_replicas=False)
        >>> hard.masked.numpy().tolist()
        [[False, True], [False, False]]
    """
    embeddings = tf.convert_to_tensor(embeddings)
    if embeddings.shape[1] != 3:
        return None
    ids = _row_ids(text_ids, embeddings)
    negatives, negative_ids = embeddings[:, 2], ids[:, 2]
    context = tf.distribute.get_replica_context()
    if across_replicas and context is not None and context.num_replicas_in_sync > 1:
        negatives = context.all_gather(negatives, axis=0)
        negative_ids = context.all_gather(negative_ids, axis=0)
    masked = tf.equal(ids[:, None, 0], negative_ids[None, :]) | tf.equal(
        ids[:, None, 1], negative_ids[None, :]
    )
    return HardNegatives(negatives, masked)


def false_negatives(ids: tf.Tensor, candidate_ids: tf.Tensor, targets: tf.Tensor) -> tf.Tensor:
    """Where candidate j is not a true negative of row i: another row that shares the
    anchor's or the positive's text (the same question twice is not a negative).

    Args:
        ids: `(batch, 2)` text fingerprints of the rows.
        candidate_ids: `(candidates, 2)` text fingerprints of the candidate rows.
        targets: `(batch,)` each row's own index among the candidates (never masked).

    Returns:
        `(batch, candidates)` booleans.

    Example:
        >>> import tensorflow as tf
        >>> ids = tf.constant([[1, 2], [1, 3]])  # the same anchor text twice
        >>> false_negatives(ids, ids, tf.range(2)).numpy().tolist()
        [[False, True], [True, False]]
    """
    same_anchor = tf.equal(ids[:, None, 0], candidate_ids[None, :, 0])
    same_positive = tf.equal(ids[:, None, 1], candidate_ids[None, :, 1])
    own = tf.equal(targets[:, None], tf.range(tf.shape(candidate_ids)[0])[None, :])
    return (same_anchor | same_positive) & ~own

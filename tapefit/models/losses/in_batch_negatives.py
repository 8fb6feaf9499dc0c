"""Multiple-negatives ranking (Henderson et al., 2017), sentence-transformers'
MultipleNegativesRankingLoss."""

from __future__ import annotations

from typing import Any, ClassVar

import keras
import tensorflow as tf

from tapefit.models.losses.candidates import (
    batch_candidates,
    false_negatives,
    hard_negative_candidates,
)


@keras.saving.register_keras_serializable(package="tapefit")
class InBatchNegativesLoss(keras.losses.Loss):
    """Multiple-negatives ranking: softmax cross-entropy of each anchor over `scale * cos` with
    every positive in the batch, its own positive being the target.

    Formula, for a batch of `B` pairs `(a_i, p_i)` and scale `s`:
    `loss_i = -log(exp(s * cos(a_i, p_i)) / sum_j exp(s * cos(a_i, p_j)))`, the mean over `i`.
    From Henderson et al., 2017 (Efficient Natural Language Response Suggestion for Smart
    Reply); sentence-transformers' `MultipleNegativesRankingLoss`. It needs positive pairs only:
    the batch's other positives are the negatives.

    Inputs: `y_true` is each row's `(anchor_id, positive_id)` text fingerprints, `(batch, 2)`
    integers (`SiameseModel` computes them, `uses_text_ids`); `y_pred` the L2-normalised
    embeddings, `(batch, 2, dim)`, or `(batch, 3, dim)` with a hard negative per row.

    `y_true` holds `(anchor_id, positive_id)` text fingerprints per row: a column whose anchor or
    positive text equals the row's is another true positive, not a negative, so it is masked out.
    `symmetric` adds the reverse direction (each positive picks its anchor);
    `across_replicas` draws the negatives from the whole global batch under a distribution
    strategy (see `batch_candidates`). With `(batch, 3, dim)` embeddings, each row's third
    text is a hard negative, a candidate for every anchor beside the batch's positives
    (`hard_negative_candidates`).

    Args:
        scale: Multiplies the cosines before the softmax (an inverse temperature).
        symmetric: Also rank the anchors for each positive, and average both directions.
        across_replicas: Draw the negatives from every replica's share of the batch.
        name: The loss's name in logs.
        **kwargs: `keras.losses.Loss`'s other arguments.

    Examples:
        >>> import numpy as np
        >>> ids = np.array([[1, 2], [3, 4]])  # four different texts
        >>> right = np.array([[[1.0, 0.0], [1.0, 0.0]], [[0.0, 1.0], [0.0, 1.0]]])
        >>> crossed = np.array([[[1.0, 0.0], [0.0, 1.0]], [[0.0, 1.0], [1.0, 0.0]]])
        >>> loss = InBatchNegativesLoss(scale=20.0)
        >>> round(float(loss(ids, right)), 6), round(float(loss(ids, crossed)), 6)
        (0.0, 20.0)
    """

    label_type: ClassVar[str | None] = None
    uses_text_ids = True  # SiameseModel passes text fingerprints as y_true
    uses_negatives = True  # and a third text per row, when the data have one

    def __init__(
        self,
        scale: float = 20.0,
        symmetric: bool = False,
        across_replicas: bool = False,
        name: str = "in_batch_negatives",
        **kwargs: Any,
    ) -> None:
        super().__init__(name=name, **kwargs)
        self.scale = float(scale)
        self.symmetric = bool(symmetric)
        self.across_replicas = bool(across_replicas)

    def call(self, y_true: tf.Tensor, y_pred: tf.Tensor) -> tf.Tensor:
        rows = batch_candidates(y_pred, y_true, self.across_replicas)
        targets = rows.targets
        masked = false_negatives(rows.ids, rows.all_ids, targets)

        def cross_entropy(queries: tf.Tensor, candidates: tf.Tensor, masked) -> tf.Tensor:
            scores = self.scale * tf.matmul(queries, candidates, transpose_b=True)
            scores = tf.where(masked, tf.cast(-1e9, scores.dtype), scores)
            return tf.nn.sparse_softmax_cross_entropy_with_logits(labels=targets, logits=scores)

        candidates, candidates_masked = rows.all_positives, masked
        hard = hard_negative_candidates(y_pred, y_true, self.across_replicas)
        if hard is not None:
            candidates = tf.concat([rows.all_positives, hard.negatives], axis=0)
            candidates_masked = tf.concat([masked, hard.masked], axis=1)
        loss = cross_entropy(rows.anchors, candidates, candidates_masked)
        if not self.symmetric:
            return loss
        # each positive also picks its own anchor among the batch's anchors
        return (loss + cross_entropy(rows.positives, rows.all_anchors, masked)) / 2.0

    def get_config(self) -> dict:
        return {
            **super().get_config(),
            "scale": self.scale,
            "symmetric": self.symmetric,
            "across_replicas": self.across_replicas,
        }

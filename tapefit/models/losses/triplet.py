"""The triplet margin loss (Schroff et al., 2015, FaceNet) over the cosine, with in-batch
negatives."""

from __future__ import annotations

from typing import Any, ClassVar

import keras
import tensorflow as tf

from tapefit.errors import TapefitError
from tapefit.models.losses.candidates import (
    batch_candidates,
    false_negatives,
    hard_negative_candidates,
)


@keras.saving.register_keras_serializable(package="tapefit")
class TripletLoss(keras.losses.Loss):
    """Triplet margin loss over in-batch negatives: `max(0, cos(a, n) - cos(a, p) + margin)`.

    Why: the positive pairs of a batch supply every anchor's negatives (the other rows'
    positives), so triplets need no third column. `mining="hard"` takes each anchor's most
    similar negative (batch-hard, Hermans et al., 2017); `mining="all"` averages over every
    negative that still violates the margin (batch-all). Rows sharing a text are not
    negatives of each other. `across_replicas` draws the negatives from the whole global
    batch under a distribution strategy. With `(batch, 3, dim)` embeddings, each row's third
    text is one more negative for every anchor (`hard_negative_candidates`). The triplet
    loss itself is Schroff, Kalenichenko and Philbin's, 2015 (FaceNet).

    Inputs: `y_true` is each row's `(anchor_id, positive_id)` text fingerprints, `(batch, 2)`
    integers (`SiameseModel` computes them, `uses_text_ids`); `y_pred` the L2-normalised
    embeddings, `(batch, 2, dim)`, or `(batch, 3, dim)` with a hard negative per row.

    Args:
        margin: How much more similar the positive must be than a negative, in (0, 2].
        mining: `hard` or `all`.
        across_replicas: Gather every replica's rows as candidates (`batch_candidates`).
        name: The loss's name in logs.
        **kwargs: `keras.losses.Loss`'s other arguments.

    Raises:
        TapefitError: a margin outside (0, 2] or an unknown mining.

    Example:
        >>> import numpy as np
        >>> pairs = np.array([[[1.0, 0.0], [1.0, 0.0]], [[0.0, 1.0], [0.0, 1.0]]], "float32")
        >>> ids = np.array([[1, 2], [3, 4]])  # four different texts
        >>> float(TripletLoss(margin=0.5)(ids, pairs))  # each positive beats its negative by 1
        0.0
    """

    label_type: ClassVar[str | None] = None
    uses_text_ids = True
    uses_negatives = True

    def __init__(
        self,
        margin: float = 0.5,
        mining: str = "hard",
        across_replicas: bool = False,
        name: str = "triplet",
        **kwargs: Any,
    ) -> None:
        super().__init__(name=name, **kwargs)
        if not 0.0 < margin <= 2.0:
            raise TapefitError(f"triplet margin={margin} must lie in (0, 2] (cosine difference)")
        if mining not in ("hard", "all"):
            raise TapefitError(f"triplet mining={mining!r} must be hard or all")
        self.margin, self.mining = float(margin), mining
        self.across_replicas = bool(across_replicas)

    def call(self, y_true: tf.Tensor, y_pred: tf.Tensor) -> tf.Tensor:
        rows = batch_candidates(y_pred, y_true, self.across_replicas)
        candidates = rows.all_positives
        own = tf.equal(rows.targets[:, None], tf.range(tf.shape(rows.all_ids)[0])[None, :])
        not_negative = false_negatives(rows.ids, rows.all_ids, rows.targets) | own
        hard = hard_negative_candidates(y_pred, y_true, self.across_replicas)
        if hard is not None:
            candidates = tf.concat([rows.all_positives, hard.negatives], axis=0)
            not_negative = tf.concat([not_negative, hard.masked], axis=1)
        similarities = tf.matmul(rows.anchors, candidates, transpose_b=True)
        positive = tf.reduce_sum(rows.anchors * rows.positives, axis=-1)
        negatives = tf.where(not_negative, tf.cast(-3.0, similarities.dtype), similarities)
        violations = tf.nn.relu(negatives - positive[:, None] + self.margin)
        if self.mining == "hard":
            return tf.reduce_max(violations, axis=1)
        active = tf.cast(violations > 0, violations.dtype)
        return tf.reduce_sum(violations, axis=1) / tf.maximum(tf.reduce_sum(active, axis=1), 1.0)

    def get_config(self) -> dict:
        return {
            **super().get_config(),
            "margin": self.margin,
            "mining": self.mining,
            "across_replicas": self.across_replicas,
        }

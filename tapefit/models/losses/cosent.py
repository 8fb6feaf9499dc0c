"""CoSENT (Su, 2022): rank a batch's pairs by their cosine in the order of their labels."""

from __future__ import annotations

from typing import Any, ClassVar

import keras
import tensorflow as tf

from tapefit.errors import TapefitError
from tapefit.models.losses.common import computing_dtype, pair_cosine


def ranking_loss(labels: tf.Tensor, scores: tf.Tensor) -> tf.Tensor:
    """CoSENT's ranking of a batch's pairs: `log(1 + sum over y_i < y_j of exp(s_i - s_j))`.

    Every pair whose label is lower than another's but whose score is not is penalised, so
    the loss asks only for the labels' order, not their values.

    Args:
        labels: The pairs' graded labels, shape `(batch,)`.
        scores: The pairs' scaled similarities, shape `(batch,)`.

    Returns:
        The batch's loss, a scalar (float32 for half-precision scores).

    Example:
        >>> import tensorflow as tf
        >>> right = ranking_loss(tf.constant([0.0, 1.0]), tf.constant([-5.0, 5.0]))
        >>> wrong = ranking_loss(tf.constant([0.0, 1.0]), tf.constant([5.0, -5.0]))
        >>> bool(right < 0.001) and bool(wrong > 9.9)
        True
    """
    scores = tf.reshape(tf.convert_to_tensor(scores), [-1])
    scores = tf.cast(scores, computing_dtype(scores))
    labels = tf.cast(tf.reshape(labels, [-1]), scores.dtype)
    differences = scores[:, None] - scores[None, :]
    lower = labels[:, None] < labels[None, :]
    terms = tf.where(
        lower, differences, tf.fill(tf.shape(differences), tf.cast(-1e12, scores.dtype))
    )
    flat = tf.concat([tf.zeros([1], scores.dtype), tf.reshape(terms, [-1])], axis=0)
    return tf.reduce_logsumexp(flat)


@keras.saving.register_keras_serializable(package="tapefit")
class CoSENTLoss(keras.losses.Loss):
    """CoSENT: rank the batch's pairs by `scale * cos` in the order of their graded labels.

    Why: regressing the cosine onto rescaled labels (cosine_mse) asks for values the labels
    do not really give; CoSENT asks only that a pair labelled more similar score higher,
    which usually raises Spearman (Su, 2022; sentence-transformers' `CoSENTLoss`). The loss
    is one value per batch (under a distribution strategy, per replica's share).

    Formula, over the batch's pairs with labels `y` and cosines `c`:
    `loss = log(1 + sum over y_i < y_j of exp(scale * (c_i - c_j)))` (`ranking_loss`).

    Inputs: `y_true` is the pairs' graded labels, `(batch,)`; `y_pred` the pairs'
    L2-normalised embeddings, `(batch, 2, dim)`.

    Args:
        scale: Multiplies the cosines before the ranking (an inverse temperature), > 0.
        name: The loss's name in logs.
        **kwargs: `keras.losses.Loss`'s other arguments.

    Raises:
        TapefitError: `scale` is not positive.

    Example:
        >>> import numpy as np
        >>> pairs = np.array([[[1.0, 0.0], [0.0, 1.0]], [[1.0, 0.0], [1.0, 0.0]]], "float32")
        >>> loss = CoSENTLoss()  # the second pair is labelled more similar and scores higher
        >>> float(loss(np.array([0.0, 5.0]), pairs)) < 1e-6
        True
    """

    label_type: ClassVar[str | None] = "graded"

    def __init__(self, scale: float = 20.0, name: str = "cosent", **kwargs: Any) -> None:
        super().__init__(name=name, **kwargs)
        if not scale > 0:
            raise TapefitError(f"{name} scale={scale} must be > 0")
        self.scale = float(scale)

    def similarity(self, pair_embeddings: tf.Tensor) -> tf.Tensor:
        """The similarity ranked: the cosine of each pair."""
        return pair_cosine(pair_embeddings)

    def call(self, y_true: tf.Tensor, y_pred: tf.Tensor) -> tf.Tensor:
        similarity = self.similarity(y_pred)
        return ranking_loss(y_true, self.scale * tf.cast(similarity, computing_dtype(similarity)))

    def get_config(self) -> dict:
        return {**super().get_config(), "scale": self.scale}

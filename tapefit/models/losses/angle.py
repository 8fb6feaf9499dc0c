"""AnglE (Li and Li, 2023): CoSENT's ranking over an angle similarity in complex space."""

from __future__ import annotations

from typing import Any

import keras
import tensorflow as tf

from tapefit.models.losses.common import computing_dtype
from tapefit.models.losses.cosent import CoSENTLoss


def angle_similarity(first: tf.Tensor, second: tf.Tensor) -> tf.Tensor:
    """AnglE's similarity: each embedding's halves are the real and imaginary parts of a
    complex vector; the quotient `first / second`, normalised by the two norms, summed over
    real and imaginary parts, in absolute value.

    Why: the cosine's gradient vanishes near cos = ±1 (saturated pairs stop learning); the
    angle difference in complex space keeps a gradient there (Li and Li, 2023). An odd
    width is padded with a zero, as sentence-transformers does.

    Args:
        first: Embeddings, shape `(batch, dim)`.
        second: Embeddings, shape `(batch, dim)`.

    Returns:
        The similarity of each row pair, shape `(batch,)`.

    Example:
        >>> import tensorflow as tf
        >>> x = tf.constant([[1.0, 2.0, 3.0, 4.0]])
        >>> round(float(angle_similarity(x, x)[0]), 6)
        1.0
        >>> e1, e2 = tf.constant([[1.0, 0.0, 0.0, 0.0]]), tf.constant([[0.0, 1.0, 0.0, 0.0]])
        >>> float(angle_similarity(e1, e2)[0])  # two orthogonal complex components
        0.0
    """
    first, second = tf.convert_to_tensor(first), tf.convert_to_tensor(second)
    dtype = computing_dtype(first)
    first, second = tf.cast(first, dtype), tf.cast(second, dtype)
    if first.shape[-1] is not None and first.shape[-1] % 2:
        first = tf.pad(first, [[0, 0], [0, 1]])
        second = tf.pad(second, [[0, 0], [0, 1]])
    a, b = tf.split(first, 2, axis=-1)
    c, d = tf.split(second, 2, axis=-1)
    second_sq = tf.reduce_sum(c**2 + d**2, axis=-1, keepdims=True)
    scale = tf.sqrt(second_sq) / tf.sqrt(tf.reduce_sum(a**2 + b**2, axis=-1, keepdims=True))
    real = (a * c + b * d) / second_sq * scale
    imaginary = (b * c - a * d) / second_sq * scale
    return tf.abs(tf.reduce_sum(real, axis=-1) + tf.reduce_sum(imaginary, axis=-1))


@keras.saving.register_keras_serializable(package="tapefit")
class AnglELoss(CoSENTLoss):
    """AnglE: CoSENT's ranking over `angle_similarity` instead of the cosine.

    Why: near cos = ±1 the cosine's gradient vanishes; the angle in complex space keeps
    one, so saturated pairs still learn (Li and Li, 2023; sentence-transformers'
    `AnglELoss`).

    Formula: CoSENT's, `log(1 + sum over y_i < y_j of exp(scale * (a_i - a_j)))`, with `a` the
    pairs' `angle_similarity` (each embedding's halves the real and imaginary parts of a
    complex vector; their quotient, normalised, summed, in absolute value) in place of the
    cosine.

    Inputs: `y_true` is the pairs' graded labels, `(batch,)`; `y_pred` the pairs' embeddings,
    `(batch, 2, dim)` (an odd `dim` is padded with a zero).

    Args:
        scale: Multiplies the similarities before the ranking, > 0.
        name: The loss's name in logs.
        **kwargs: `keras.losses.Loss`'s other arguments.

    Example:
        >>> import numpy as np
        >>> unlike = [[1.0, 0.0, 0.0, 0.0], [0.0, 1.0, 0.0, 0.0]]
        >>> alike = [[1.0, 0.0, 0.0, 0.0], [1.0, 0.0, 0.0, 0.0]]
        >>> pairs = np.array([unlike, alike], "float32")
        >>> float(AnglELoss()(np.array([0.0, 5.0]), pairs)) < 1e-6
        True
    """

    def __init__(self, scale: float = 20.0, name: str = "angle", **kwargs: Any) -> None:
        super().__init__(scale=scale, name=name, **kwargs)

    def similarity(self, pair_embeddings: tf.Tensor) -> tf.Tensor:
        """The similarity ranked: AnglE's normalised angle similarity of each pair."""
        return angle_similarity(pair_embeddings[:, 0], pair_embeddings[:, 1])

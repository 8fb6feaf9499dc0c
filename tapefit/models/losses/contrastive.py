"""The contrastive loss of Hadsell, Chopra and LeCun (2006) over the cosine distance."""

from __future__ import annotations

from typing import Any, ClassVar

import keras
import tensorflow as tf

from tapefit.errors import TapefitError
from tapefit.models.losses.common import pair_cosine


@keras.saving.register_keras_serializable(package="tapefit")
class ContrastiveLoss(keras.losses.Loss):
    """Binary labels, cosine distance d = 1 - cos: y * d^2 + (1 - y) * max(0, margin - d)^2.

    From Hadsell, Chopra and LeCun, 2006 (Dimensionality Reduction by Learning an Invariant
    Mapping), with the cosine distance in place of the Euclidean one, as sentence-transformers'
    `ContrastiveLoss`: similar pairs (`y = 1`) are pulled together, dissimilar ones (`y = 0`)
    pushed apart until their distance reaches `margin`, and no further.

    Inputs: `y_true` is the pairs' 0/1 labels, `(batch,)`; `y_pred` the pairs' L2-normalised
    embeddings, `(batch, 2, dim)`.

    Args:
        margin: The cosine distance beyond which a dissimilar pair costs nothing, in (0, 2].
        name: The loss's name in logs.
        **kwargs: `keras.losses.Loss`'s other arguments.

    Raises:
        TapefitError: `margin` outside (0, 2].

    Examples:
        >>> import numpy as np
        >>> same, orthogonal = [[1.0, 0.0], [1.0, 0.0]], [[1.0, 0.0], [0.0, 1.0]]
        >>> pairs = np.array([same, orthogonal])
        >>> float(ContrastiveLoss(margin=0.5)(np.array([1.0, 0.0]), pairs))  # both right
        0.0
        >>> float(ContrastiveLoss(margin=0.5)(np.array([0.0, 1.0]), pairs))  # (0.25 + 1) / 2
        0.625
    """

    label_type: ClassVar[str | None] = "binary"

    def __init__(self, margin: float = 0.5, name: str = "contrastive", **kwargs: Any) -> None:
        super().__init__(name=name, **kwargs)
        if not 0.0 < margin <= 2.0:
            raise TapefitError(f"contrastive margin={margin} must lie in (0, 2] (cosine distance)")
        self.margin = float(margin)

    def call(self, y_true: tf.Tensor, y_pred: tf.Tensor) -> tf.Tensor:
        labels = tf.reshape(y_true, [-1])
        distance = 1.0 - pair_cosine(y_pred)
        negative = tf.square(tf.nn.relu(self.margin - distance))
        return labels * tf.square(distance) + (1.0 - labels) * negative

    def get_config(self) -> dict:
        return {**super().get_config(), "margin": self.margin}

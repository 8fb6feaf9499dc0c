"""The contrastive loss of Hadsell, Chopra and LeCun (2006) over the cosine distance."""

from __future__ import annotations

from typing import Any, ClassVar

import keras
import tensorflow as tf

from tapefit.errors import TapefitError
from tapefit.models.losses.common import pair_cosine


@keras.saving.register_keras_serializable(package="tapefit")
class ContrastiveLoss(keras.losses.Loss):
    """Binary labels, cosine distance d = 1 - cos: y * d^2 + (1 - y) * max(0, margin - d)^2."""

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

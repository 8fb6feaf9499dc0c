"""Cosine regression: (cos - rescaled label)^2, sentence-transformers' CosineSimilarityLoss."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, ClassVar

import keras
import tensorflow as tf

from tapefit.errors import TapefitError
from tapefit.models.losses.common import pair_cosine


@keras.saving.register_keras_serializable(package="tapefit")
class CosineMSELoss(keras.losses.Loss):
    """Regress the cosine onto a graded label rescaled from `label_range` to `target_range`."""

    label_type: ClassVar[str | None] = "graded"

    def __init__(
        self,
        label_range: Sequence[float] = (0.0, 5.0),
        target_range: Sequence[float] = (0.0, 1.0),
        name: str = "cosine_mse",
        **kwargs: Any,
    ) -> None:
        super().__init__(name=name, **kwargs)
        self.label_range = tuple(float(v) for v in label_range)
        self.target_range = tuple(float(v) for v in target_range)
        if self.label_range[1] <= self.label_range[0]:
            raise TapefitError(
                f"label_range={list(self.label_range)} must be [low, high], low < high"
            )
        if self.target_range not in ((0.0, 1.0), (-1.0, 1.0)):
            raise TapefitError(
                f"target_range={list(self.target_range)} must be [0, 1] or [-1, 1] (cosine's range)"
            )

    def rescale(self, labels: tf.Tensor) -> tf.Tensor:
        """Map labels linearly from `label_range` onto `target_range`."""
        (low, high), (target_low, target_high) = self.label_range, self.target_range
        return target_low + (labels - low) * (target_high - target_low) / (high - low)

    def call(self, y_true: tf.Tensor, y_pred: tf.Tensor) -> tf.Tensor:
        target = self.rescale(tf.reshape(y_true, [-1]))
        return tf.square(pair_cosine(y_pred) - target)

    def get_config(self) -> dict:
        return {
            **super().get_config(),
            "label_range": list(self.label_range),
            "target_range": list(self.target_range),
        }

"""The GradientTape tutorial's loss: 1 - cos of each pair."""

from __future__ import annotations

from typing import Any, ClassVar

import keras
import tensorflow as tf

from tapefit.models.losses.common import pair_cosine


@keras.saving.register_keras_serializable(package="tapefit")
class CosineLoss(keras.losses.Loss):
    """The GradientTape tutorial's objective: maximise each pair's cosine; labels are ignored.

    On its own it collapses: mapping every text to one vector gives every pair cosine 1.
    """

    label_type: ClassVar[str | None] = None  # the kind of labels the loss needs (None: any)

    def __init__(self, name: str = "cosine", **kwargs: Any) -> None:
        super().__init__(name=name, **kwargs)

    def call(self, y_true: tf.Tensor, y_pred: tf.Tensor) -> tf.Tensor:
        return 1.0 - pair_cosine(y_pred)

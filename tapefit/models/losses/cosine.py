"""The GradientTape tutorial's loss: 1 - cos of each pair."""

from __future__ import annotations

from typing import Any, ClassVar

import keras
import tensorflow as tf

from tapefit.models.losses.common import pair_cosine


@keras.saving.register_keras_serializable(package="tapefit")
class CosineLoss(keras.losses.Loss):
    """The GradientTape tutorial's objective: maximise each pair's cosine; labels are ignored.

    Formula, per pair of L2-normalised embeddings `(u, v)`: `loss = 1 - cos(u, v) = 1 - u . v`.
    It is the cosine of the twin ("Siamese") networks of Bromley et al., 1993 (Signature
    Verification using a "Siamese" Time Delay Neural Network), kept as the tutorial's baseline.
    On its own it collapses: mapping every text to one vector gives every pair cosine 1.

    Inputs: `y_true` is ignored (any `(batch,)` labels); `y_pred` is the pairs' embeddings,
    `(batch, 2, dim)`, each L2-normalised (`SiameseModel`'s output).

    Examples:
        >>> import numpy as np
        >>> same, orthogonal = [[1.0, 0.0], [1.0, 0.0]], [[1.0, 0.0], [0.0, 1.0]]
        >>> float(CosineLoss()(np.zeros(2), np.array([same, orthogonal])))  # (0 + 1) / 2
        0.5
    """

    label_type: ClassVar[str | None] = None  # the kind of labels the loss needs (None: any)

    def __init__(self, name: str = "cosine", **kwargs: Any) -> None:
        super().__init__(name=name, **kwargs)

    def call(self, y_true: tf.Tensor, y_pred: tf.Tensor) -> tf.Tensor:
        return 1.0 - pair_cosine(y_pred)

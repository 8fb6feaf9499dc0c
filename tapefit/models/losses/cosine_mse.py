"""Cosine regression: (cos - rescaled label)^2, sentence-transformers' CosineSimilarityLoss."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, ClassVar

import keras
import numpy as np
import tensorflow as tf

from tapefit.errors import TapefitError
from tapefit.models.losses.common import pair_cosine


@keras.saving.register_keras_serializable(package="tapefit")
class CosineMSELoss(keras.losses.Loss):
    """Regress the cosine onto a graded label rescaled from `label_range` to `target_range`.

    Formula, per pair: `loss = (cos(u, v) - t)^2` with the label `y` mapped linearly,
    `t = target_low + (y - label_low) * (target_high - target_low) / (label_high - label_low)`.
    The regression objective Sentence-BERT fine-tunes on STS (Reimers and Gurevych, 2019),
    sentence-transformers' `CosineSimilarityLoss`; `to_label_scale` maps a cosine back.

    Inputs: `y_true` is the pairs' graded labels in `label_range`, `(batch,)`; `y_pred` the
    pairs' L2-normalised embeddings, `(batch, 2, dim)`.

    Args:
        label_range: The labels' `[low, high]` (STS: `[0, 5]`).
        target_range: The cosines the labels map onto: `[0, 1]` or `[-1, 1]`.
        name: The loss's name in logs.
        **kwargs: `keras.losses.Loss`'s other arguments.

    Raises:
        TapefitError: an empty `label_range`, or a `target_range` outside the cosine's.

    Examples:
        >>> import numpy as np
        >>> same, orthogonal = [[1.0, 0.0], [1.0, 0.0]], [[1.0, 0.0], [0.0, 1.0]]
        >>> pairs = np.array([same, orthogonal])  # cosines 1 and 0
        >>> loss = CosineMSELoss(label_range=(0, 5))
        >>> float(loss(np.array([5.0, 0.0]), pairs)), float(loss(np.array([0.0, 5.0]), pairs))
        (0.0, 1.0)
    """

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

    def to_label_scale(self, similarities: Any) -> np.ndarray:
        """The inverse of `rescale`: cosines mapped from `target_range` back onto
        `label_range`, clipped to it (a cosine below the target range's low end, such as a
        negative one for [0, 1], is the lowest label).

        Examples:
            >>> CosineMSELoss(label_range=(0, 5)).to_label_scale([0.5, 1.0, -0.2]).tolist()
            [2.5, 5.0, 0.0]
        """
        (low, high), (target_low, target_high) = self.label_range, self.target_range
        cosines = np.asarray(similarities, dtype="float64")
        labels = low + (cosines - target_low) * (high - low) / (target_high - target_low)
        return np.clip(labels, low, high)

    def call(self, y_true: tf.Tensor, y_pred: tf.Tensor) -> tf.Tensor:
        target = self.rescale(tf.reshape(y_true, [-1]))
        return tf.square(pair_cosine(y_pred) - target)

    def get_config(self) -> dict:
        return {
            **super().get_config(),
            "label_range": list(self.label_range),
            "target_range": list(self.target_range),
        }

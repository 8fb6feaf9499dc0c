"""MixUp and CutMix for the image classifier (`model.mixing`): each training batch's images
blended (MixUp, Zhang et al. 2018) or patched (CutMix, Yun et al. 2019) with those of a
shuffled copy of the batch, and the one-hot labels mixed in the same proportions.

Both are written here, not taken from Keras 3.15: its `keras.layers.MixUp` mixes the images
of a `{"images", "labels"}` batch but returns the labels unmixed, and its `CutMix` weights
the labels by the box drawn before it is clipped at the image's border, not by the pixels
pasted (up to 9 points off on an 8 by 8 image). Either would train on wrong targets without a
word. Both draw from a Keras seed generator, whose state the checkpoints keep, so a resumed
run draws what the uninterrupted one drew.
"""

from __future__ import annotations

from typing import Any

import keras

from tapefit.errors import TapefitError

KINDS = ("mixup", "cutmix")


@keras.saving.register_keras_serializable(package="tapefit")
class BatchMixing(keras.layers.Layer):
    """Mix a batch of images and its one-hot labels with a shuffled copy of the batch.

    Args:
        kind: `mixup` (a per-image weight drawn from Beta(alpha, alpha) blends two images
            and their labels) or `cutmix` (a box of another image pasted in, its area drawn
            from Beta(alpha, alpha); the labels weighted by the pixels each image gives).
        alpha: The Beta distribution's parameter; above 0.
        seed: The seed generator's seed (None: drawn from Keras' global seed).
        **kwargs: `keras.layers.Layer`'s keyword arguments.

    Example:
        >>> import numpy as np
        >>> mixing = BatchMixing("mixup", alpha=1.0, seed=0)
        >>> images, labels = mixing(np.random.rand(4, 8, 8, 3), np.eye(4))
        >>> np.allclose(np.asarray(labels).sum(axis=1), 1.0)
        True
    """

    def __init__(self, kind: str = "mixup", alpha: float = 0.2, seed: int | None = None, **kwargs):
        super().__init__(**kwargs)
        if kind not in KINDS:
            raise TapefitError(f"model.mixing.kind={kind} must be one of {', '.join(KINDS)}")
        if not alpha > 0:
            raise TapefitError(f"model.mixing.alpha={alpha} must be above 0")
        self.kind, self.alpha, self.seed = kind, float(alpha), seed
        self.seed_generator = keras.random.SeedGenerator(seed)

    def call(self, images: Any, labels: Any) -> tuple[Any, Any]:
        """The mixed images and labels (float one-hot labels in, soft labels out)."""
        batch = keras.ops.shape(images)[0]
        weight = keras.random.beta((batch,), self.alpha, self.alpha, seed=self.seed_generator)
        order = keras.random.shuffle(keras.ops.arange(batch), seed=self.seed_generator)
        if self.kind == "cutmix":
            return self.cut_and_paste(images, labels, weight, order)
        weight = keras.ops.cast(weight, images.dtype)
        shape = [-1] + [1] * (len(images.shape) - 1)
        images = keras.ops.reshape(weight, shape) * images + keras.ops.reshape(
            1.0 - weight, shape
        ) * keras.ops.take(images, order, axis=0)
        weight = keras.ops.cast(keras.ops.reshape(weight, [-1, 1]), labels.dtype)
        labels = weight * labels + (1.0 - weight) * keras.ops.take(labels, order, axis=0)
        return images, labels

    def cut_and_paste(self, images: Any, labels: Any, kept: Any, order: Any) -> tuple[Any, Any]:
        """CutMix: a box covering about 1 - `kept` of each image, at a uniform centre and
        clipped at the border, filled from the image `order` names; the labels weighted by
        the pixels each image gives."""
        ops = keras.ops
        height, width = ops.shape(images)[1], ops.shape(images)[2]
        batch = ops.shape(images)[0]
        side = ops.sqrt(1.0 - ops.cast(kept, "float32"))
        centres = keras.random.uniform((batch, 2), seed=self.seed_generator)

        def span(size: Any, column: int) -> tuple[Any, Any]:
            size = ops.cast(size, "float32")
            half = side * size / 2.0
            middle = centres[:, column] * size
            low = ops.clip(ops.round(middle - half), 0.0, size)
            return low, ops.clip(ops.round(middle + half), 0.0, size)

        top, bottom = span(height, 0)
        left, right = span(width, 1)
        rows = ops.cast(ops.arange(height), "float32")[None, :, None]
        columns = ops.cast(ops.arange(width), "float32")[None, None, :]
        inside = (
            (rows >= top[:, None, None])
            & (rows < bottom[:, None, None])
            & (columns >= left[:, None, None])
            & (columns < right[:, None, None])
        )
        images = ops.where(inside[..., None], ops.take(images, order, axis=0), images)
        pasted = ops.mean(ops.cast(inside, "float32"), axis=(1, 2))
        pasted = ops.cast(ops.reshape(pasted, [-1, 1]), labels.dtype)
        labels = (1.0 - pasted) * labels + pasted * ops.take(labels, order, axis=0)
        return images, labels

    def get_config(self) -> dict[str, Any]:
        """The kind, alpha and seed."""
        return {**super().get_config(), "kind": self.kind, "alpha": self.alpha, "seed": self.seed}

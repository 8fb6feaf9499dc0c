"""Matryoshka embeddings (Kusupati et al. 2022): any pair loss summed over nested prefixes of
the embedding, so its first 64, 128, ... dimensions each work on their own; sentence-
transformers' `MatryoshkaLoss`."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import keras
import tensorflow as tf

from tapefit.errors import TapefitError


def check_matryoshka(dims: Any, weights: Any) -> tuple[list[int], list[float]] | None:
    """`model.loss.matryoshka_dims` and `matryoshka_weights` as lists, or None when unset.

    Raises:
        TapefitError: dims that are not distinct whole numbers >= 1, or weights that are not
            one positive number per dimension.

    Examples:
        >>> check_matryoshka([64, 16], None)
        ([64, 16], [1.0, 1.0])
        >>> check_matryoshka([16, 16], None)
        Traceback (most recent call last):
        ...
        tapefit.errors.TapefitError: model.loss.matryoshka_dims=[16, 16] must be distinct ...
    """
    if dims is None:
        if weights is not None:
            raise TapefitError(
                "model.loss.matryoshka_weights needs model.loss.matryoshka_dims: set the "
                "dimensions the weights are for, or leave the weights out"
            )
        return None
    dims = list(dims) if isinstance(dims, Sequence) and not isinstance(dims, str) else [dims]
    if not dims or not all(isinstance(d, int) and not isinstance(d, bool) and d > 0 for d in dims):
        raise TapefitError(
            f"model.loss.matryoshka_dims={dims} must be a list of whole numbers >= 1, e.g. "
            "[256, 128, 64] (include the full width to train it too)"
        )
    if len(set(dims)) != len(dims):
        raise TapefitError(f"model.loss.matryoshka_dims={dims} must be distinct dimensions")
    weights = [1.0] * len(dims) if weights is None else [float(w) for w in weights]
    if len(weights) != len(dims) or min(weights) <= 0:
        raise TapefitError(
            f"model.loss.matryoshka_weights={weights} must be one positive number per "
            f"dimension of model.loss.matryoshka_dims={dims}"
        )
    return dims, weights


def truncated(embeddings: tf.Tensor, dim: int) -> tf.Tensor:
    """The first `dim` components of each embedding, L2-normalised again.

    Raises:
        TapefitError: `dim` is wider than the embeddings.

    Examples:
        >>> vectors = tf.constant([[3.0, 4.0, 12.0]])
        >>> [round(float(x), 2) for x in truncated(vectors, 2)[0]]
        [0.6, 0.8]
    """
    width = embeddings.shape[-1]
    if width is not None and dim > width:
        raise TapefitError(
            f"model.loss.matryoshka_dims: {dim} is wider than the {width}-dimensional "
            "embeddings; use dimensions up to the encoder's width"
        )
    return tf.math.l2_normalize(embeddings[..., :dim], axis=-1)


@keras.saving.register_keras_serializable(package="tapefit")
class MatryoshkaLoss(keras.losses.Loss):
    """`loss` summed over the embeddings' nested prefixes: `sum_d weight_d * loss(E[..., :d])`,
    each prefix L2-normalised again.

    The wrapped loss's needs (its labels, text ids, hard negatives) are the wrapper's.
    From Kusupati et al., 2022 (Matryoshka Representation Learning); sentence-transformers'
    `MatryoshkaLoss`: the leading `d` dimensions of an embedding work on their own, so a
    search can use short vectors.

    Inputs: the wrapped loss's `y_true`; `y_pred` the embeddings, `(batch, 2 or 3, dim)`, whose
    last axis is cut to each of `dims` (each at most `dim`).

    Example:
        >>> from tapefit.models.losses import CosineMSELoss
        >>> loss = MatryoshkaLoss(CosineMSELoss(), dims=[2, 3])
        >>> pairs = tf.math.l2_normalize(tf.random.normal((4, 2, 3), seed=1), -1)
        >>> labels = tf.constant([0.0, 5.0, 2.5, 1.0])
        >>> one = CosineMSELoss()
        >>> expected = one(labels, truncated(pairs, 2)) + one(labels, pairs)
        >>> bool(abs(float(loss(labels, pairs)) - float(expected)) < 1e-6)
        True
    """

    def __init__(
        self,
        loss: keras.losses.Loss | dict,
        dims: Sequence[int],
        weights: Sequence[float] | None = None,
        name: str = "matryoshka",
        **kwargs: Any,
    ) -> None:
        super().__init__(name=name, **kwargs)
        if isinstance(loss, dict):
            loss = keras.saving.deserialize_keras_object(loss)
        self.loss = loss
        self.dims, self.weights = check_matryoshka(list(dims), weights)  # type: ignore[misc]

    @property
    def label_type(self) -> str | None:
        """The labels the wrapped loss takes."""
        return getattr(self.loss, "label_type", None)

    @property
    def uses_text_ids(self) -> bool:
        """Whether the wrapped loss takes text fingerprints as targets."""
        return bool(getattr(self.loss, "uses_text_ids", False))

    @property
    def uses_negatives(self) -> bool:
        """Whether the wrapped loss can use a hard negative per row."""
        return bool(getattr(self.loss, "uses_negatives", False))

    def call(self, y_true: tf.Tensor, y_pred: tf.Tensor) -> tf.Tensor:
        total = None
        for dim, weight in zip(self.dims, self.weights, strict=True):
            part = weight * self.loss.call(y_true, truncated(y_pred, dim))
            total = part if total is None else total + part
        return total

    def get_config(self) -> dict:
        return {
            **super().get_config(),
            "loss": keras.saving.serialize_keras_object(self.loss),
            "dims": list(self.dims),
            "weights": list(self.weights),
        }

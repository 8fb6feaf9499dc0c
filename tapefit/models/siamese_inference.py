"""A trained `SiameseModel` in use: texts encoded in batches by a traced function, the
signatures a SavedModel export serves, and the columns `python -m tapefit.predict` writes."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import keras
import numpy as np
import tensorflow as tf


def inference_function(model: keras.Model, method: str) -> Any:
    """`model.<method>(texts, training=False)` as a `tf.function`, traced once per model and
    input signature.

    The encoder's graph instead of eager ops (for an LSTM, a Python loop over the time steps):
    the same values, many times faster on large collections.

    Args:
        model: The model (its traced functions are kept on it, untracked by Keras).
        method: `embed` or `pooled`.

    Returns:
        The function of a batch of texts.

    Examples:
        >>> from tapefit import SiameseModel
        >>> model = SiameseModel.from_texts(["a cat sat"], encoder={"units": 8})
        >>> inference_function(model, "embed") is inference_function(model, "embed")
        True
    """
    functions = model.__dict__.setdefault("_inference_functions", {})  # untracked by Keras
    if method not in functions:
        bound = getattr(model, method)
        functions[method] = tf.function(
            lambda texts: bound(texts, training=False), reduce_retracing=True
        )
    return functions[method]


def encode_in_batches(
    model: keras.Model, texts: Sequence[Any], batch_size: int, normalize: bool
) -> np.ndarray:
    """The embeddings of `texts`, `batch_size` at a time, as a NumPy array `(n, dim)`.

    Args:
        model: The model whose `embed` (or `pooled`) encodes a batch.
        texts: Raw strings (or token-id rows for a model without a vocabulary).
        batch_size: Texts encoded per batch.
        normalize: True: unit-length vectors (`embed`); False: before that (`pooled`).

    Returns:
        float32 array `(len(texts), dim)`.

    Examples:
        >>> from tapefit import SiameseModel
        >>> model = SiameseModel.from_texts(["a cat sat"], encoder={"units": 8})
        >>> encode_in_batches(model, ["a cat", "a dog", "sat"], 2, normalize=True).shape
        (3, 8)
    """
    texts = tf.convert_to_tensor(texts)
    embed = inference_function(model, "embed" if normalize else "pooled")
    chunks = [
        embed(texts[start : start + batch_size]).numpy()
        for start in range(0, int(texts.shape[0]), batch_size)
    ]
    return np.concatenate(chunks) if chunks else np.zeros((0, model.encoder.output_dim))


def serving_endpoints(model: keras.Model) -> dict[str, tuple[Any, list[Any]]]:
    """The signatures a SavedModel export of the model offers: `serve`, `encode`, and for a
    Matryoshka model `encode_<dim>` per dimension of `model.loss.matryoshka_dims` (the
    leading components, normalised again).

    Args:
        model: The model; its `call` scores pairs, its `embed` encodes texts.

    Returns:
        `{name: (function, input specs)}` for the export.

    Examples:
        >>> from tapefit import SiameseModel
        >>> model = SiameseModel.from_texts(["a cat sat"], encoder={"units": 8})
        >>> sorted(serving_endpoints(model))
        ['encode', 'serve']
    """
    texts = tf.TensorSpec((None,), tf.string)

    def serve(texts_a: tf.Tensor, texts_b: tf.Tensor) -> tf.Tensor:
        return model((texts_a, texts_b), training=False)

    def encode(texts: tf.Tensor) -> tf.Tensor:
        return model.embed(texts, training=False)

    endpoints = {"serve": (serve, [texts, texts]), "encode": (encode, [texts])}
    for dim in getattr(model, "matryoshka_dims", []):

        def encode_leading(texts: tf.Tensor, dim: int = dim) -> tf.Tensor:
            return tf.math.l2_normalize(model.pooled(texts, training=False)[:, :dim], axis=-1)

        endpoints[f"encode_{dim}"] = (encode_leading, [texts])
    return endpoints


def prediction_columns(pairs: Any, similarities: Any) -> dict[str, Any]:
    """The columns `python -m tapefit.predict` writes for a batch of pairs.

    Args:
        pairs: `(texts_a, texts_b)` of the batch.
        similarities: The model's outputs, one cosine per pair.

    Returns:
        `{"text1": ..., "text2": ..., "similarity": ...}` (no texts for token ids).

    Examples:
        >>> prediction_columns((np.array([b"a cat"]), np.array(["a dog"])), np.array([0.5]))
        {'text1': ['a cat'], 'text2': ['a dog'], 'similarity': [0.5]}
    """
    columns: dict[str, Any] = {}
    first, second = (np.asarray(part) for part in pairs)
    if first.dtype.kind in "SUO":  # raw strings: keep them beside their score
        columns["text1"] = [_text(t) for t in first.reshape(-1)]
        columns["text2"] = [_text(t) for t in second.reshape(-1)]
    columns["similarity"] = np.asarray(similarities).reshape(-1).tolist()
    return columns


def _text(value: Any) -> str:
    return value.decode("utf-8") if isinstance(value, bytes) else str(value)

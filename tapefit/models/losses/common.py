"""What several pair losses share: the pair cosine, and the dtype they compute in."""

from __future__ import annotations

import tensorflow as tf


def pair_cosine(pair_embeddings: tf.Tensor) -> tf.Tensor:
    """Cosine of each pair of already L2-normalised embeddings, shape `(batch,)`."""
    return tf.reduce_sum(pair_embeddings[:, 0] * pair_embeddings[:, 1], axis=-1)


def computing_dtype(tensor: tf.Tensor) -> tf.DType:
    """float32 for half-precision inputs (mixed precision), the input's own dtype otherwise."""
    return tf.float32 if tensor.dtype in (tf.float16, tf.bfloat16) else tensor.dtype

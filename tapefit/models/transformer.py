"""The Transformer encoder block of `TextEncoder(rnn="transformer")`: sinusoidal positions,
self-attention (its softmax in float32 under mixed precision), a feed-forward network."""

from __future__ import annotations

from typing import Any

import keras
from keras import layers

from tapefit.errors import TapefitError
from tapefit.models.precision import wide_dtype


def sine_positions(length: Any, width: int, dtype: str = "float32") -> Any:
    """The Transformer's sinusoidal position encoding, shape `(length, width)`.

    Why: attention alone does not know token order; fixed sines and cosines of geometric
    frequencies (Vaswani et al., 2017) tell it, for any length, with no weights to learn.

    Args:
        length: The number of positions.
        width: The embedding width.
        dtype: The encoding's dtype.

    Returns:
        `sin(p / 10000^(2i/width))` in even columns, `cos(...)` in odd ones.

    Example:
        >>> import numpy as np
        >>> encoding = np.asarray(sine_positions(3, 4))
        >>> encoding.shape, float(encoding[0, 1]), round(float(encoding[1, 0]), 6)  # cos 0, sin 1
        ((3, 4), 1.0, 0.841471)
    """
    ops = keras.ops
    positions = ops.cast(ops.arange(length), "float32")[:, None]
    columns = ops.arange(width)
    rates = ops.power(10000.0, -ops.cast(2 * (columns // 2), "float32") / float(width))
    angles = positions * rates[None, :]
    encoding = ops.where(columns[None, :] % 2 == 0, ops.sin(angles), ops.cos(angles))
    return ops.cast(encoding, dtype)


class Float32SoftmaxAttention(layers.MultiHeadAttention):
    """Keras' `MultiHeadAttention` whose attention weights are a float32 softmax under mixed
    precision, as in Keras' fused path (`ops.dot_product_attention`, taken without attention
    dropout); Keras' explicit path, taken with dropout, would take it in float16.

    Example:
        >>> import numpy as np
        >>> attention = Float32SoftmaxAttention(num_heads=2, key_dim=4, dropout=0.1)
        >>> tuple(attention(np.ones((1, 3, 8), "float32"), np.ones((1, 3, 8), "float32")).shape)
        (1, 3, 8)
    """

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.float32_softmax = layers.Softmax(axis=-1, dtype=wide_dtype())

    def _masked_softmax(self, attention_scores: Any, attention_mask: Any = None) -> Any:
        """Keras' masked softmax over the key axis, in float32."""
        if attention_mask is not None:  # (batch, query, key) -> (batch, heads, query, key)
            while len(attention_mask.shape) < len(attention_scores.shape):
                attention_mask = keras.ops.expand_dims(attention_mask, axis=-3)
        weights = self.float32_softmax(attention_scores, mask=attention_mask)
        return keras.ops.cast(weights, attention_scores.dtype)


@keras.saving.register_keras_serializable(package="tapefit")
class TransformerBlock(layers.Layer):
    """One post-norm Transformer encoder block: self-attention over the text's real tokens,
    then a two-layer feed-forward network (GELU), each added back and layer-normalised.

    Args:
        width: The token vectors' width (the embedding's).
        num_heads: Attention heads; `width` must divide by it.
        units: The feed-forward network's hidden width.
        dropout: Dropout on the attention weights and after each sub-layer while training.
        **kwargs: `keras.layers.Layer`'s keyword arguments.

    Raises:
        TapefitError: `width` does not divide by `num_heads`.

    Example:
        >>> import numpy as np
        >>> block = TransformerBlock(width=8, num_heads=2, units=16)
        >>> tuple(block(np.ones((2, 5, 8), "float32"), np.ones((2, 5), bool)).shape)
        (2, 5, 8)
    """

    def __init__(
        self, width: int, num_heads: int = 4, units: int = 64, dropout: float = 0.1, **kwargs: Any
    ) -> None:
        super().__init__(**kwargs)
        if num_heads < 1 or width % num_heads:
            raise TapefitError(
                f"model.encoder.num_heads={num_heads} must divide model.encoder.embedding_dim="
                f"{width}: choose a divisor (e.g. 1, 2, 4)"
            )
        self.settings = {"width": width, "num_heads": num_heads, "units": units, "dropout": dropout}
        self.attention = Float32SoftmaxAttention(num_heads, width // num_heads, dropout=dropout)
        self.feed_forward = [layers.Dense(units, activation="gelu"), layers.Dense(width)]
        self.norms = [layers.LayerNormalization(epsilon=1e-6) for _ in range(2)]
        self.dropout = layers.Dropout(dropout)

    def build(self, input_shape: tuple) -> None:
        """Create the attention, feed-forward and normalisation weights.

        Args:
            input_shape: `(batch, time, width)`.
        """
        self.attention.build(input_shape, input_shape)
        self.feed_forward[0].build(input_shape)
        self.feed_forward[1].build((*input_shape[:-1], self.settings["units"]))
        for norm in self.norms:
            norm.build(input_shape)
        self.built = True

    def call(self, tokens: Any, mask: Any = None, training: bool | None = None) -> Any:
        """Attend, then transform, each with a residual connection and layer norm.

        Args:
            tokens: `(batch, time, width)`.
            mask: `(batch, time)`, True for real tokens (keys that may be attended to).
            training: Whether dropout runs.

        Returns:
            `(batch, time, width)`.
        """
        attention_mask = None if mask is None else keras.ops.expand_dims(mask, 1)
        attended = self.attention(tokens, tokens, attention_mask=attention_mask, training=training)
        hidden = self.norms[0](tokens + self.dropout(attended, training=training))
        transformed = self.feed_forward[1](self.feed_forward[0](hidden))
        return self.norms[1](hidden + self.dropout(transformed, training=training))

    def compute_mask(self, tokens: Any, mask: Any = None) -> Any:
        """The padding mask passes through unchanged."""
        return mask

    def get_config(self) -> dict:
        """Keras' layer config plus the block's options, so it reloads.

        Returns:
            The config `from_config` rebuilds the block from.
        """
        return {**super().get_config(), **self.settings}

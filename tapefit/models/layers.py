"""Serialisable building blocks: the text encoder shared by both sides of a Siamese model."""

from __future__ import annotations

from enum import Enum
from typing import Any

import keras
from keras import layers

from tapefit.choices import choice_enum, parse_choice
from tapefit.errors import TapefitError
from tapefit.models.precision import at_least_float32, wide_dtype
from tapefit.models.transformer import TransformerBlock, sine_positions

RNNS = {"lstm": layers.LSTM, "gru": layers.GRU, "transformer": None, "none": None}
Rnn = choice_enum("Rnn", RNNS)


class Pooling(str, Enum):
    """How a sequence of RNN states (or, with `rnn: none`, token embeddings) becomes one
    vector."""

    last = "last"  # the final state
    mean = "mean"  # the masked mean over time
    max = "max"  # the masked maximum over time, per feature
    first = "first"  # the first token's state (BERT's `cls`)
    mean_sqrt_len = "mean_sqrt_len"  # the masked sum over time divided by sqrt(length)


def pool_states(states: Any, mask: Any, pooling: str) -> Any:
    """One vector per text from its per-token states, ignoring masked (padding) positions.

    Args:
        states: `(batch, time, features)`.
        mask: `(batch, time)` booleans, True for real tokens; None: every position counts.
        pooling: `max`, `first` or `mean_sqrt_len` (`last` and `mean` are the RNN's own and
            Keras' `GlobalAveragePooling1D`).

    Returns:
        `(batch, features)`, at least float32 (also under mixed precision) but for `first`;
        a text with no token pools to zeros.

    Example:
        >>> import numpy as np
        >>> states = np.array([[[1.0], [3.0], [9.0]]], "float32")
        >>> mask = np.array([[True, True, False]])
        >>> [float(pool_states(states, mask, p)[0, 0]) for p in ("max", "first")]
        [3.0, 1.0]
        >>> round(float(pool_states(states, mask, "mean_sqrt_len")[0, 0]), 4)  # 4 / sqrt(2)
        2.8284
    """
    ops = keras.ops
    if pooling == "first":
        return states[:, 0]
    states = at_least_float32(states)  # sums and divisions in float32 under mixed precision
    if mask is None:
        mask = ops.ones(ops.shape(states)[:2], dtype="bool")
    present = ops.expand_dims(ops.cast(mask, states.dtype), -1)
    if pooling == "max":  # a padded position takes the text's smallest state: never the max
        masked = ops.where(present > 0, states, ops.min(states, axis=1, keepdims=True))
        any_token = ops.any(ops.cast(mask, "bool"), axis=1, keepdims=True)
        return ops.where(any_token, ops.max(masked, axis=1), ops.zeros_like(states[:, 0]))
    if pooling == "mean_sqrt_len":
        length = ops.maximum(ops.sum(present, axis=1), 1.0)
        return ops.sum(states * present, axis=1) / ops.sqrt(length)
    raise TapefitError(f"pool_states: unknown pooling {pooling!r}")


@keras.saving.register_keras_serializable(package="tapefit")
class TextEncoder(layers.Layer):
    """Token ids -> one vector per text: Embedding, RNN (or none), then a pooling over time.

    The encoder `SiameseModel` shares between both texts of a pair, as a serialisable layer
    so that a `.keras` file rebuilds it from its options. The RNNs may be stacked and
    bidirectional; padding (id 0) is masked when `mask_padding`. The default is the
    GradientTape tutorial's encoder: `Embedding(vocab, 100)` -> `LSTM(64,
    recurrent_dropout=0.1)`. `rnn="transformer"` stacks `num_layers` Transformer blocks
    (self-attention with sinusoidal positions) over the embeddings; `rnn="none"` is the
    bag-of-embeddings baseline, the token embeddings pooled directly. Neither has a final
    state, so both take any pooling but `last`.

    Args:
        vocab_size: Token ids lie below it (0 is padding).
        embedding_dim: Size of the token embeddings.
        rnn: `lstm`, `gru`, `transformer` or `none` (bag of embeddings).
        units: Units of each RNN (per direction); a Transformer block's feed-forward width.
        num_layers: Stacked RNN layers or Transformer blocks.
        bidirectional: Run each RNN both ways and concatenate (doubles `output_dim`).
        pooling: `last` (the final state), `mean` (the masked mean over time), `max` (the
            masked maximum per feature), `first` (the first token's state) or
            `mean_sqrt_len` (the masked sum over sqrt(length)).
        recurrent_dropout: The RNNs' recurrent dropout rate; the Transformer's dropout.
        mask_padding: Mask id 0, so padding does not reach the RNN or attention.
        num_heads: A Transformer block's attention heads (`embedding_dim` must divide by it).
        train_embeddings: False keeps the token embeddings fixed (frozen pretrained vectors).
        projection: A linear layer of this width after the pooling (a projection head, as in
            SimCSE and sentence-transformers' `Dense` module); None: the pooled vector.
        dropout: Dropout on the encoder's inputs, one mask per text: each RNN's input
            dropout (Keras' `dropout`, which, unlike `recurrent_dropout`, lets an LSTM or GRU
            run on cuDNN on a GPU); without an RNN, on the token embeddings.
        **kwargs: `keras.layers.Layer`'s keyword arguments (`name`, `dtype`, ...).

    Raises:
        TapefitError: an unknown `rnn` or `pooling`, `num_layers` below 1, `vocab_size`
            below 2, or `pooling="last"` without an RNN.

    Examples:
        >>> import numpy as np
        >>> from tapefit import TextEncoder
        >>> encoder = TextEncoder(vocab_size=50, units=8, bidirectional=True, pooling="mean")
        >>> tuple(encoder(np.array([[3, 4, 0, 0], [5, 0, 0, 0]])).shape), encoder.output_dim
        ((2, 16), 16)
    """

    def __init__(
        self,
        vocab_size: int,
        embedding_dim: int = 100,
        rnn: str = "lstm",
        units: int = 64,
        num_layers: int = 1,
        bidirectional: bool = False,
        pooling: str = "last",
        recurrent_dropout: float = 0.1,
        mask_padding: bool = True,
        num_heads: int = 4,
        train_embeddings: bool = True,
        projection: int | None = None,
        dropout: float = 0.0,
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        rnn = parse_choice(Rnn, rnn, "model.encoder.rnn").value
        pooling = parse_choice(Pooling, pooling, "model.encoder.pooling").value
        if num_layers < 1 or vocab_size < 2:
            raise TapefitError(
                f"TextEncoder needs num_layers >= 1 and vocab_size >= 2; got {num_layers}, "
                f"{vocab_size}"
            )
        if rnn in ("none", "transformer") and pooling == "last":
            raise TapefitError(
                "model.encoder.pooling=last needs an RNN (its final state): with "
                f"model.encoder.rnn={rnn} choose pooling mean, max, first or mean_sqrt_len"
            )
        self.settings = {
            "vocab_size": int(vocab_size),
            "embedding_dim": int(embedding_dim),
            "rnn": rnn,
            "units": int(units),
            "num_layers": int(num_layers),
            "bidirectional": bool(bidirectional),
            "pooling": pooling,
            "recurrent_dropout": float(recurrent_dropout),
            "mask_padding": bool(mask_padding),
            "num_heads": int(num_heads),
            "train_embeddings": bool(train_embeddings),
            "projection": int(projection) if projection else None,
            "dropout": float(dropout),
        }
        self.embedding = layers.Embedding(vocab_size, embedding_dim, mask_zero=mask_padding)
        self.embedding.trainable = bool(train_embeddings)
        self.recurrent = []
        self.blocks = [
            TransformerBlock(embedding_dim, num_heads, units, recurrent_dropout, name=f"block_{i}")
            for i in range(num_layers if rnn == "transformer" else 0)
        ]
        for index in range(num_layers if rnn in ("lstm", "gru") else 0):
            last = index == num_layers - 1
            cell = RNNS[rnn](
                units,
                dropout=dropout,
                recurrent_dropout=recurrent_dropout,
                return_sequences=not last or pooling != "last",
            )
            self.recurrent.append(layers.Bidirectional(cell) if bidirectional else cell)
        # in float32 under mixed precision: the sum over time and the division by its length
        self.mean = layers.GlobalAveragePooling1D(dtype=wide_dtype()) if pooling == "mean" else None
        self.embedding_dropout = (  # an RNN drops its own inputs (cuDNN runs it)
            layers.Dropout(dropout, noise_shape=(None, 1, embedding_dim))
            if dropout and rnn not in ("lstm", "gru")
            else None
        )
        self.projection = layers.Dense(projection, name="projection") if projection else None

    @property
    def output_dim(self) -> int:
        """Size of the text vector: `projection` when set, else `state_dim`."""
        return self.settings["projection"] or self.state_dim

    @property
    def state_dim(self) -> int:
        """Size of a token's state: `units` (doubled when bidirectional), or `embedding_dim`.

        Without an RNN (`rnn="none"` or `"transformer"`) the states keep the embedding's width.
        """
        if self.settings["rnn"] in ("none", "transformer"):
            return self.settings["embedding_dim"]
        return self.settings["units"] * (2 if self.settings["bidirectional"] else 1)

    def build(self, input_shape: tuple) -> None:
        """Create the embedding and RNN weights for token ids of `input_shape`.

        Args:
            input_shape: `(batch, time)`; either may be None.
        """
        self.embedding.build(input_shape)
        shape = (*input_shape, self.settings["embedding_dim"])
        for block in self.blocks:
            block.build(shape)
        for rnn in self.recurrent:
            rnn.build(shape)
            shape = (*input_shape, self.state_dim)
        if self.projection is not None:
            self.projection.build((input_shape[0], self.state_dim))
        self.built = True

    def call(self, tokens: Any, training: bool | None = None) -> Any:
        """Encode a batch of token-id sequences, shape `(batch, time)` -> `(batch, output_dim)`.

        Args:
            tokens: Integer token ids `(batch, time)`, padded with 0.
            training: Whether recurrent dropout runs in training mode.

        Returns:
            One vector per text `(batch, output_dim)`.
        """
        hidden = self.embedding(tokens)
        mask = self.embedding.compute_mask(tokens)
        if self.embedding_dropout is not None:
            hidden = self.embedding_dropout(hidden, training=training)
        if self.blocks:
            width = self.settings["embedding_dim"]
            positions = sine_positions(keras.ops.shape(tokens)[1], width, hidden.dtype)
            hidden = hidden * keras.ops.cast(width**0.5, hidden.dtype) + positions[None]
            for block in self.blocks:
                hidden = block(hidden, mask=mask, training=training)
        for rnn in self.recurrent:
            hidden = rnn(hidden, mask=mask, training=training)
        if self.mean is not None:
            hidden = self.mean(hidden, mask=mask)
        elif self.settings["pooling"] != "last":
            hidden = pool_states(hidden, mask, self.settings["pooling"])
        return hidden if self.projection is None else self.projection(hidden)

    def compute_output_shape(self, input_shape: tuple) -> tuple:
        """The shape `call` returns, without running it.

        Args:
            input_shape: `(batch, time)`.

        Returns:
            `(batch, output_dim)`.
        """
        return (input_shape[0], self.output_dim)

    def get_config(self) -> dict:
        """Keras' layer config plus every constructor option, so the layer reloads.

        Returns:
            The config `from_config` rebuilds the layer from.
        """
        return {**super().get_config(), **self.settings}

"""Serialisable building blocks: the text encoder shared by both sides of a Siamese model."""

from __future__ import annotations

from enum import Enum
from typing import Any

import keras
from keras import layers

from tapefit.choices import choice_enum, parse_choice
from tapefit.errors import TapefitError

RNNS = {"lstm": layers.LSTM, "gru": layers.GRU}
Rnn = choice_enum("Rnn", RNNS)


class Pooling(str, Enum):
    """How a sequence of RNN states becomes one vector."""

    last = "last"  # the final state
    mean = "mean"  # the masked mean over time


@keras.saving.register_keras_serializable(package="tapefit")
class TextEncoder(layers.Layer):
    """Token ids -> one vector per text: Embedding, RNN, then last state or mean over time.

    The encoder `SiameseModel` shares between both texts of a pair, as a serialisable layer
    so that a `.keras` file rebuilds it from its options. The RNNs may be stacked and
    bidirectional; padding (id 0) is masked when `mask_padding`. The default is the
    GradientTape tutorial's encoder: `Embedding(vocab, 100)` -> `LSTM(64,
    recurrent_dropout=0.1)`.

    Args:
        vocab_size: Token ids lie below it (0 is padding).
        embedding_dim: Size of the token embeddings.
        rnn: `lstm` or `gru`.
        units: Units of each RNN (per direction).
        num_layers: Stacked RNN layers.
        bidirectional: Run each RNN both ways and concatenate (doubles `output_dim`).
        pooling: `last` (the final state) or `mean` (the masked mean over time).
        recurrent_dropout: The RNNs' recurrent dropout rate.
        mask_padding: Mask id 0, so padding does not reach the RNN.
        **kwargs: `keras.layers.Layer`'s keyword arguments (`name`, `dtype`, ...).

    Raises:
        TapefitError: an unknown `rnn` or `pooling`, `num_layers` below 1 or `vocab_size`
            below 2.

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
        }
        self.embedding = layers.Embedding(vocab_size, embedding_dim, mask_zero=mask_padding)
        self.recurrent = []
        for index in range(num_layers):
            last = index == num_layers - 1
            cell = RNNS[rnn](
                units,
                recurrent_dropout=recurrent_dropout,
                return_sequences=not last or pooling == "mean",
            )
            self.recurrent.append(layers.Bidirectional(cell) if bidirectional else cell)
        self.mean = layers.GlobalAveragePooling1D() if pooling == "mean" else None

    @property
    def output_dim(self) -> int:
        """Size of the text vector: `units`, doubled when `bidirectional`."""
        return self.settings["units"] * (2 if self.settings["bidirectional"] else 1)

    def build(self, input_shape: tuple) -> None:
        """Create the embedding and RNN weights for token ids of `input_shape`.

        Args:
            input_shape: `(batch, time)`; either may be None.
        """
        self.embedding.build(input_shape)
        shape = (*input_shape, self.settings["embedding_dim"])
        for rnn in self.recurrent:
            rnn.build(shape)
            shape = (*input_shape, self.output_dim)
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
        for rnn in self.recurrent:
            hidden = rnn(hidden, mask=mask, training=training)
        if self.mean is not None:
            hidden = self.mean(hidden, mask=mask)
        return hidden

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

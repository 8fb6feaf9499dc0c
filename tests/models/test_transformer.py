"""tapefit/models/transformer.py: the Transformer block's positions and its heads' check."""

import keras
import numpy as np
import pytest

from tapefit import TapefitError, TextEncoder


def test_the_transformer_sees_token_order_through_its_positions():
    encoder = TextEncoder(vocab_size=12, embedding_dim=8, rnn="transformer", pooling="mean")
    forward = keras.ops.convert_to_numpy(encoder(np.array([[3, 7, 5]])))
    backward = keras.ops.convert_to_numpy(encoder(np.array([[5, 7, 3]])))
    assert np.abs(forward - backward).max() > 1e-3  # a bag of embeddings would not tell
    with pytest.raises(
        TapefitError, match=r"num_heads=3 must divide model.encoder.embedding_dim=8"
    ):
        TextEncoder(vocab_size=12, embedding_dim=8, rnn="transformer", num_heads=3, pooling="max")

"""tapefit/models/layers.py: TextEncoder's poolings and the bag-of-embeddings encoder: values
against NumPy, padding ignored, gradients reach every variable, and the encoder reloads from a
`.keras` file."""

import keras
import numpy as np
import pytest
import tensorflow as tf

import tapefit
from tapefit import SiameseModel, TapefitError, TextEncoder
from tapefit.models.layers import pool_states
from tapefit.models.losses import CoSENTLoss
from tapefit.models.siamese_options import check_siamese_options

TOKENS = np.array([[3, 7, 2, 0, 0], [5, 0, 0, 0, 0], [4, 4, 9, 8, 6]])


def reference_pool(states, lengths, pooling):
    rows = []
    for row, length in zip(states, lengths, strict=True):
        real = row[:length]
        rows.append(
            {
                "mean": real.mean(axis=0),
                "max": real.max(axis=0),
                "first": row[0],
                "mean_sqrt_len": real.sum(axis=0) / np.sqrt(length),
            }[pooling]
        )
    return np.array(rows)


@pytest.mark.parametrize("pooling", ["mean", "max", "first", "mean_sqrt_len"])
def test_bag_of_embeddings_pools_the_real_tokens_as_numpy_does(pooling):
    encoder = TextEncoder(vocab_size=12, embedding_dim=6, rnn="none", pooling=pooling)
    got = keras.ops.convert_to_numpy(encoder(TOKENS))
    embeddings = keras.ops.convert_to_numpy(encoder.embedding.embeddings)[TOKENS]
    lengths = (TOKENS > 0).sum(axis=1)
    np.testing.assert_allclose(got, reference_pool(embeddings, lengths, pooling), rtol=1e-6)
    assert encoder.output_dim == got.shape[1] == 6
    assert len(encoder.trainable_variables) == 1  # only the embedding: no RNN


@pytest.mark.parametrize("rnn", ["lstm", "transformer"])
@pytest.mark.parametrize("pooling", ["max", "first", "mean_sqrt_len"])
def test_rnn_and_transformer_poolings_ignore_padding(rnn, pooling):
    encoder = TextEncoder(
        vocab_size=12, embedding_dim=4, units=3, pooling=pooling, rnn=rnn, num_heads=2
    )
    short = keras.ops.convert_to_numpy(encoder(np.array([[3, 7, 0, 0, 0, 0, 0, 0]])))
    long = keras.ops.convert_to_numpy(encoder(np.array([[3, 7, 0]])))
    np.testing.assert_allclose(short, long, rtol=1e-5, atol=1e-6)
    assert short.shape == (1, encoder.output_dim) == (1, 3 if rnn == "lstm" else 4)


def test_pool_states_of_a_text_with_no_token_is_zero():
    states = np.arange(6, dtype="float32").reshape(1, 3, 2) - 10.0
    mask = np.zeros((1, 3), bool)
    for pooling in ("max", "mean_sqrt_len"):
        np.testing.assert_array_equal(
            keras.ops.convert_to_numpy(pool_states(states, mask, pooling)), [[0.0, 0.0]]
        )


def test_last_pooling_without_an_rnn_is_refused_naming_the_choices():
    with pytest.raises(TapefitError, match=r"pooling=last needs an RNN.*mean, max, first"):
        TextEncoder(vocab_size=12, rnn="none")
    with pytest.raises(TapefitError, match=r"model.encoder.pooling"):
        TextEncoder(vocab_size=12, pooling="median")


@pytest.mark.slow  # trains, saves and reloads each encoder: make test-fast leaves it out
@pytest.mark.parametrize(
    "encoder",
    [
        {"rnn": "none", "pooling": "mean_sqrt_len", "embedding_dim": 8},
        {"units": 4, "embedding_dim": 8, "pooling": "max", "bidirectional": True},
        {"rnn": "transformer", "embedding_dim": 8, "units": 16, "num_heads": 2, "pooling": "mean"},
        {"units": 4, "embedding_dim": 8, "num_layers": 2, "projection": 6},
    ],
)
def test_new_encoders_reach_every_variable_and_reload(encoder, tmp_path):
    texts = np.array(["red apple pie", "green apple", "blue sky today", "sky"])
    model = SiameseModel.from_texts(texts, sequence_length=6, encoder=encoder)
    model.compile(optimizer="adam", loss=CoSENTLoss())
    batch = ((texts, texts[::-1]), np.array([1.0, 3.0, 0.0, 5.0]))
    check = tapefit.gradcheck(model, batch, samples=2)
    assert check.unreached == {} and check.max_relative_error < 1e-3
    model.fit(tf.data.Dataset.from_tensor_slices(batch).batch(4), epochs=1, verbose=0)
    model.save(tmp_path / "m.keras")
    again = keras.models.load_model(tmp_path / "m.keras")
    np.testing.assert_array_equal(again.encode(texts), model.encode(texts))


def test_a_projection_head_sets_the_vector_width_and_is_checked():
    encoder = TextEncoder(vocab_size=12, embedding_dim=8, units=5, num_layers=2, projection=3)
    assert (encoder.state_dim, encoder.output_dim) == (5, 3)
    assert tuple(encoder(TOKENS).shape) == (3, 3)
    assert "projection" in [v.path.split("/")[-2] for v in encoder.trainable_variables]
    with pytest.raises(TapefitError, match=r"model.encoder.projection=0 must be null"):
        SiameseModel(vocab_size=12, encoder={"projection": 0})


def test_input_dropout_reaches_each_rnn_or_the_embeddings():
    """`dropout` is the RNNs' input dropout (which cuDNN runs, unlike `recurrent_dropout`):
    each stacked and bidirectional LSTM gets it, it reloads; without an RNN it drops token
    embeddings; a rate outside [0, 1) is one line."""
    encoder = TextEncoder(vocab_size=12, units=4, num_layers=2, bidirectional=True, dropout=0.2,
                          recurrent_dropout=0.0)  # fmt: skip
    encoder(TOKENS)
    rnns = [layer for rnn in encoder.recurrent for layer in (rnn.forward_layer, rnn.backward_layer)]
    assert [rnn.dropout for rnn in rnns] == [0.2] * 4
    assert TextEncoder.from_config(encoder.get_config()).settings["dropout"] == 0.2
    training = [np.array(encoder(TOKENS, training=True)) for _ in range(2)]
    assert not np.array_equal(*training)  # a new mask each call while training
    np.testing.assert_array_equal(encoder(TOKENS), encoder(TOKENS))
    bag = TextEncoder(vocab_size=12, rnn="none", pooling="mean", embedding_dim=6, dropout=0.5)
    assert not np.array_equal(bag(TOKENS, training=True), bag(TOKENS, training=True))
    np.testing.assert_array_equal(bag(TOKENS), bag(TOKENS))  # without an RNN: the embeddings
    with pytest.raises(TapefitError, match=r"model.encoder.dropout=1.0 must lie in \[0, 1\)"):
        check_siamese_options({"encoder": {"dropout": 1.0}})

"""`tapefit.readiness.inputs`: what the training split's shapes retrace, its last batch, and
the token length a text model tokenizes to."""

import keras
import numpy as np
import tensorflow as tf

from tapefit.readiness.inputs import inputs_of


def test_inputs_say_what_retraces():
    rows = tf.data.Dataset.range(10).map(lambda i: (tf.range(i % 4 + 1), i))
    varying = inputs_of(rows.padded_batch(4), keras.Sequential())
    assert varying.varying and "its length varies by batch" in varying.shapes[0]
    assert any("XLA compiles each new length" in line for line in varying.lines())
    fixed = tf.data.Dataset.from_tensor_slices((np.zeros((12, 3)), np.zeros(12))).batch(4)
    assert (
        inputs_of(fixed, keras.Sequential()).lines()[1]
        == "retracing: none, every batch has one shape"
    )
    twelve = tf.data.Dataset.from_tensor_slices((np.zeros((12, 3)), np.zeros(12)))
    assert inputs_of(twelve.batch(5), keras.Sequential()).partial_last_batch == 2


def test_text_inputs_report_the_models_token_length():
    vectorizer = keras.layers.TextVectorization(output_sequence_length=7)
    vectorizer.adapt(["a b c"])
    inputs = keras.Input((), dtype="string")
    model = keras.Model(inputs, vectorizer(inputs))
    texts = tf.data.Dataset.from_tensor_slices((["a b", "c"], [0.0, 1.0])).batch(2)
    assert inputs_of(texts, model).shapes == (
        "string (batch), tokenized inside the model to 7 tokens",
    )

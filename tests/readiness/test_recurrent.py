"""`tapefit.readiness.recurrent`: the cuDNN and XLA verdict of each LSTM and GRU, checked on a
CPU against Keras' own code: a GPU is faked where Keras asks for one (`_is_gpu_available`), and
what Keras then does (tries its cuDNN kernel, marks a layer as not XLA-compilable) is the truth
each verdict must equal."""

import importlib
import random
import re
from contextlib import contextmanager

import keras
import numpy as np
import pytest

from tapefit.readiness.recurrent import recurrent_layers
from tests.readiness.models import model_of

keras_rnn = importlib.import_module("keras.src.backend.tensorflow.rnn")

LAYERS = {
    "lstm": lambda: keras.layers.LSTM(4),
    "lstm recurrent_dropout": lambda: keras.layers.LSTM(4, recurrent_dropout=0.1),
    "lstm relu": lambda: keras.layers.LSTM(4, activation="relu"),
    "lstm unroll": lambda: keras.layers.LSTM(4, unroll=True),
    "lstm no bias": lambda: keras.layers.LSTM(4, use_bias=False),
    "lstm use_cudnn false": lambda: keras.layers.LSTM(4, use_cudnn=False),
    "lstm dropout only": lambda: keras.layers.LSTM(4, dropout=0.2),
    "gru": lambda: keras.layers.GRU(4),
    "gru reset_after false": lambda: keras.layers.GRU(4, reset_after=False),
    "gru hard_sigmoid": lambda: keras.layers.GRU(4, recurrent_activation="hard_sigmoid"),
    "gru recurrent_dropout": lambda: keras.layers.GRU(4, recurrent_dropout=0.3),
}
BLOCKERS = {
    "lstm": (),
    "lstm recurrent_dropout": ("recurrent_dropout=0.1",),
    "lstm relu": ("activation=relu",),
    "lstm unroll": ("unroll=True",),
    "lstm no bias": ("use_bias=False",),
    "lstm use_cudnn false": ("use_cudnn=False",),
    "lstm dropout only": (),
    "gru": (),
    "gru reset_after false": ("reset_after=False",),
    "gru hard_sigmoid": ("recurrent_activation=hard_sigmoid",),
    "gru recurrent_dropout": ("recurrent_dropout=0.3",),
}


@contextmanager
def a_fake_gpu():
    """Keras believes it has a GPU; its cuDNN kernels record that they were called."""
    called = []
    real = {name: getattr(keras_rnn, name) for name in ("_is_gpu_available", "_cudnn_lstm")}
    real["_cudnn_gru"] = keras_rnn._cudnn_gru

    def recorder(*args, **kwargs):
        called.append(True)
        raise NotImplementedError  # the generic loop runs, as after a refused kernel

    keras_rnn._is_gpu_available = lambda: True
    keras_rnn._cudnn_lstm = keras_rnn._cudnn_gru = recorder
    try:
        yield called
    finally:
        for name, function in real.items():
            setattr(keras_rnn, name, function)


@pytest.mark.parametrize("name", list(LAYERS))
def test_each_verdict_is_what_keras_does_on_a_gpu(name):
    verdict = recurrent_layers(model_of(LAYERS[name]()))[0]
    assert verdict.blockers == BLOCKERS[name]
    with a_fake_gpu() as called:
        on_gpu = LAYERS[name]()
        on_gpu(np.zeros((2, 5, 3), "float32"), training=True)
    assert verdict.cudnn_on_gpu == bool(called)  # Keras tried its cuDNN kernel
    assert verdict.blocks_xla_on_gpu == (not on_gpu.supports_jit)  # Keras' own mark


def test_bidirectional_and_stacked_layers_are_each_found():
    from tapefit import TextEncoder

    encoder = TextEncoder(vocab_size=30, units=4, num_layers=2, bidirectional=True)
    encoder(np.array([[3, 4, 0]]))
    found = recurrent_layers(encoder)
    names = [re.sub(r"_\d+$", "", f.path.split("/")[-1]) for f in found]
    assert names == ["forward_lstm", "backward_lstm"] * 2
    assert {f.blockers for f in found} == {("recurrent_dropout=0.1",)}


def test_the_probe_leaves_no_trace_on_what_is_built_after_it():
    """Keras' name counters and the random states are as they were: a run's layers and seeds
    do not depend on whether the report was made."""

    def number(name):
        return int(name.rsplit("_", 1)[1]) if "_" in name else 0

    model = model_of(keras.layers.LSTM(4, recurrent_dropout=0.2))
    keras.utils.set_random_seed(3)
    expected = (random.random(), np.random.rand())
    before = keras.layers.LSTM(2).name
    keras.utils.set_random_seed(3)
    recurrent_layers(model)
    assert (random.random(), np.random.rand()) == expected
    assert number(keras.layers.LSTM(2).name) == number(before) + 1

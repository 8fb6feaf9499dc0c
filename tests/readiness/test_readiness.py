"""The readiness report, checked on a CPU against Keras' own code: a GPU is faked where Keras
asks for one (`_is_gpu_available`), and what Keras then does (tries its cuDNN kernel, marks a
layer as not XLA-compilable) is the truth each verdict must equal."""

import importlib
import json
import random
import re
from contextlib import contextmanager

import keras
import numpy as np
import pytest
import tensorflow as tf

from tapefit.readiness import readiness_of
from tapefit.readiness.inputs import inputs_of
from tapefit.readiness.recurrent import recurrent_layers
from tapefit.readiness.report import loss_scale_line
from tapefit.readiness.xla import xla_verdict

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


def model_of(layer):
    inputs = keras.Input((5, 3))
    return keras.Model(inputs, layer(inputs))


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


@pytest.fixture
def determinism(monkeypatch):
    """Op determinism as a test chooses it: TensorFlow cannot turn it off once a run of the
    same process turned it on (`trainer.deterministic=true`), and Keras reads it too."""
    import tensorflow.python.framework.config as tf_config

    import tapefit.readiness.xla as xla

    def choose(enabled: bool) -> None:
        monkeypatch.setattr(tf_config, "is_op_determinism_enabled", lambda: enabled)
        monkeypatch.setattr(xla, "is_op_determinism_enabled", lambda: enabled)

    choose(False)
    return choose


def dense_model(**compile_kwargs):
    return compiled(keras.Sequential([keras.Input((3,)), keras.layers.Dense(2)]), **compile_kwargs)


def compiled(model, **compile_kwargs):
    model.compile(optimizer="adam", loss="mse", **compile_kwargs)
    return model


def test_xla_here_and_on_a_gpu_follow_keras_rules(determinism):
    dense = compiled(keras.Sequential([keras.Input((3,)), keras.layers.Dense(2)]))
    verdict = xla_verdict(dense, None, [])
    assert (verdict.here, verdict.on_gpu) == (False, True)
    assert verdict.here_why == "auto: Keras turns XLA off without a GPU"
    assert not xla_verdict(dense, False, []).on_gpu
    assert not xla_verdict(dense, None, [], distributed=True).on_gpu
    lstm = compiled(model_of(keras.layers.LSTM(4)))
    verdict = xla_verdict(lstm, None, recurrent_layers(lstm))
    assert not verdict.on_gpu and "lstm" in verdict.on_gpu_why
    eager = compiled(keras.Sequential([keras.Input((3,)), keras.layers.Dense(2)]), run_eagerly=True)
    assert "no compiled functions" in xla_verdict(eager, None, []).here_why
    determinism(True)
    verdict = xla_verdict(dense, None, [])
    assert not verdict.on_gpu and "op determinism" in verdict.on_gpu_why


def test_xla_here_is_kerass_resolved_flag(determinism):
    assert xla_verdict(dense_model(jit_compile=True), True, []).here is True
    determinism(True)  # Keras' setter refuses jit_compile=True now, and says so
    with pytest.warns(UserWarning, match="doesn't support `jit_compile=True`"):
        refused = dense_model(jit_compile=True)
    verdict = xla_verdict(refused, True, [])
    assert verdict.here is False and "op determinism" in verdict.here_why


@pytest.mark.parametrize(
    ("policy", "expected"),
    [
        ("float32", "off (not needed: float32)"),
        ("mixed_bfloat16", "off (not needed: bfloat16)"),
        ("mixed_float16", "on (dynamic LossScaleOptimizer: optimizer)"),
    ],
)
def test_the_loss_scale_line_follows_the_policy(policy, expected):
    keras.config.set_dtype_policy(policy)
    try:
        model = compiled(keras.Sequential([keras.Input((3,)), keras.layers.Dense(2)]))
        assert loss_scale_line({"optimizer": model.optimizer}) == expected
        if policy == "mixed_float16":
            plain = {"optimizer": model.optimizer, "critic": keras.optimizers.Adam()}
            assert loss_scale_line(plain).startswith("OFF for critic")
    finally:
        keras.config.set_dtype_policy("float32")


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


def test_the_report_is_json_and_lines():
    model = compiled(model_of(keras.layers.GRU(4, reset_after=False)))
    train = tf.data.Dataset.from_tensor_slices((np.zeros((8, 5, 3)), np.zeros((8, 4)))).batch(4)
    report = readiness_of(model, train.prefetch(2), tf.distribute.get_strategy(), None)
    lines = report.lines()
    assert lines[0].startswith("devices: cpu:0") and "(no GPU TensorFlow can use)" in lines[0]
    assert "recurrent: functional" in lines[4] and "no (reset_after=False)" in lines[4]
    assert lines[-2] == "input pipeline: batch(4) -> prefetch(2); tf.data autotuner on"
    assert json.loads(json.dumps(report.as_dict()))["recurrent"][0]["kind"] == "GRU"

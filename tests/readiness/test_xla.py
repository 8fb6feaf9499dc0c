"""`tapefit.readiness.xla`: whether XLA compiles the step here and would on a GPU, by Keras'
own rules (no GPU, a distribution strategy, run_eagerly, op determinism, a recurrent layer
Keras marks)."""

import keras
import pytest

from tapefit.readiness.recurrent import recurrent_layers
from tapefit.readiness.xla import xla_verdict
from tests.readiness.models import compiled, model_of


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

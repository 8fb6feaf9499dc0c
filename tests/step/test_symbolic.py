"""tapefit/step/symbolic.py: a TapeModel's optimizers are built before its step is traced, so
`fit` traces it once, and a model its step built without calling it is marked built."""

import warnings

import keras
import numpy as np
import pytest
import tensorflow as tf
from keras import layers

import tapefit
from tapefit import TapeModel
from tests.step.keras_patterns import PATTERNS, outputs, train
from tests.step.tracing import traced_steps


class TwoParts(TapeModel):
    """Two dense parts, each trained by an optimizer of its own (a GAN's shape)."""

    def __init__(self, declared=True, **kwargs):
        super().__init__(**kwargs)
        self.declared = declared
        self.first, self.second = layers.Dense(3), layers.Dense(1)
        self.first.build((None, 2))
        self.second.build((None, 3))
        self.built = True

    def call(self, x, training=False):
        return self.second(self.first(x))

    def train_step(self, data):
        x, y = data
        with tf.GradientTape(persistent=True) as tape:
            loss = tf.reduce_mean(tf.square(self(x, training=True) - y))
        self.apply_tape_gradients(tape, loss, self.first.trainable_variables, optimizer="first")
        self.apply_tape_gradients(tape, loss, self.second.trainable_variables, optimizer="second")
        return {"loss": loss}

    def variables_by_optimizer(self):
        if not self.declared:
            return super().variables_by_optimizer()
        return {"first": self.first.trainable_variables, "second": self.second.trainable_variables}


def test_fit_traces_a_fresh_models_step_once():
    inputs = keras.Input((2,))
    model = TapeModel(inputs, layers.Dense(1)(layers.Dense(4)(inputs)))
    model.compile(optimizer="adam", loss="mse")
    traces = traced_steps(model)
    model.fit(np.ones((8, 2)), np.ones((8, 1)), batch_size=4, epochs=2, verbose=0)
    assert len(traces) == 1
    assert model.optimizer.built and int(model.optimizer.iterations) == 4


@pytest.mark.parametrize("declared", [True, False])
def test_optimizers_declared_with_their_variables_are_built_before_the_step_is_traced(declared):
    model = TwoParts(declared=declared)
    model.compile(optimizer={"first": "adam", "second": "adam"})
    traces = traced_steps(model)
    model.fit(np.ones((8, 2)), np.ones((8, 1)), batch_size=4, epochs=2, verbose=0)
    # Undeclared, the step builds them itself, and TensorFlow traces it again to check that
    # later calls create no variables.
    assert len(traces) == (1 if declared else 2)
    for name, part in {"first": model.first, "second": model.second}.items():
        optimizer = model.get_optimizer(name)
        assert int(optimizer.iterations) == 4
        # Adam's two slots per variable of its own part, none for the other part's
        assert len(optimizer.variables) == 2 + 2 * len(part.trainable_variables)


def encoder_step(base):
    """A train_step that uses a layer directly and never calls self(x)."""

    @keras.saving.register_keras_serializable(package=f"compat_{base.__name__}")
    class EncoderStep(base):
        def __init__(self, **kwargs):
            super().__init__(**kwargs)
            self.encoder = keras.layers.Dense(1)

        def call(self, x, training=False):
            return self.encoder(x)

        def train_step(self, data):
            x, y = data
            with tf.GradientTape() as tape:
                loss = tf.reduce_mean(tf.square(self.encoder(x) - y))
            grads = tape.gradient(loss, self.trainable_weights)
            self.optimizer.apply_gradients(zip(grads, self.trainable_weights, strict=True))
            return {"loss": loss}

    model = EncoderStep()
    model.compile(optimizer=keras.optimizers.SGD(0.05))
    return model


@pytest.mark.tf_defaults  # compared with Keras: TensorFlow as users run it
def test_a_model_its_step_built_without_calling_it_saves_its_weights(tmp_path):
    """Keras saves such a model unbuilt, without its weights (a warning only); TapeModel marks
    it built once its step has built every layer, so the file reloads."""
    PATTERNS["encoder_step"] = (encoder_step, {})
    try:
        control, control_history = train(keras.Model, "encoder_step")
        tape, tape_history = train(tapefit.TapeModel, "encoder_step")
    finally:
        PATTERNS.pop("encoder_step")
    assert tape_history == control_history and not control.built and tape.built
    for model, name in ((control, "control"), (tape, "tape")):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            model.save(tmp_path / f"{name}.keras")
            reloaded = keras.models.load_model(tmp_path / f"{name}.keras")
        same = np.array_equal(outputs(reloaded), outputs(model))
        assert same == (name == "tape")

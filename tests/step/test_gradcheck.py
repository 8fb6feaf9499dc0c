"""`gradcheck`: the GradientTape tutorials' values, tape options, and finite differences that
catch a wrong gradient."""

import keras
import numpy as np
import pytest
import tensorflow as tf

import tapefit
from tapefit import StepOutput, TapeModel


def loop_and_branch(x, y):
    """The tutorial's control flow: multiply by x on iterations 2, 3 and 4 only."""
    output = tf.constant(1.0, x.dtype)
    for i in range(y):
        if 1 < i < 5:
            output = output * x
    return output


@pytest.mark.parametrize(
    ("function", "inputs", "expected"),
    [
        (lambda x: x**2, (3.0,), [6.0]),
        (lambda x: x**4, (3.0,), [108.0]),
        (lambda y: y * y, ((lambda x: x * x)(3.0),), [18.0]),  # dz/dy through y = x^2
        (lambda a, b: a * b * tf.sin(a), (1.0, 2.0), [2.7635465, 0.84147096]),
        (lambda x: loop_and_branch(x, 6), (2.0,), [12.0]),
        (lambda x: loop_and_branch(x, 6), (1.0,), [3.0]),
        (lambda x: loop_and_branch(x, 6), (8.0,), [192.0]),
        (lambda x: loop_and_branch(x, 4), (2.0,), [4.0]),
    ],
)
def test_tutorial_gradients_and_finite_differences_agree(function, inputs, expected):
    check = tapefit.gradcheck(function, *inputs)
    np.testing.assert_allclose([float(g) for g in check.gradients], expected, rtol=1e-6)
    assert check.checked == len(inputs) and check.max_relative_error < 1e-7


def test_a_persistent_tape_gives_each_output_its_gradient():
    # y = x^2 and z = y^2 at x = 3: dy/dx = 6, dz/dx = 108, from one (persistent) tape.
    check = tapefit.gradcheck(lambda x: [x * x, (x * x) ** 2], 3.0)
    assert [float(g[0]) for g in check.gradients] == [6.0, 108.0]
    assert check.max_relative_error < 1e-7


def test_only_watched_inputs_get_gradients_without_watch_accessed_variables():
    check = tapefit.gradcheck(
        lambda a, b: a * a + b * b, 2.0, 5.0, watch=[1], watch_accessed_variables=False
    )
    assert check.gradients[0] is None and float(check.gradients[1]) == 10.0
    watched_all = tapefit.gradcheck(lambda a, b: a * a + b * b, 2.0, 5.0)
    assert [float(g) for g in watched_all.gradients] == [4.0, 10.0]


def test_tensor_inputs_are_compared_entry_by_entry():
    matrix = np.random.default_rng(0).normal(size=(4, 3))
    check = tapefit.gradcheck(lambda w: tf.reduce_sum(tf.tanh(w) ** 3), matrix, samples=5)
    assert check.gradients[0].shape == (4, 3) and check.checked == 5
    assert check.max_relative_error < 1e-7


@tf.custom_gradient
def wrong_square(x):
    """x^2 with a deliberately wrong gradient (3x instead of 2x)."""
    return x * x, lambda upstream: upstream * 3.0 * x


def test_a_wrong_gradient_is_caught():
    check = tapefit.gradcheck(lambda x: tf.reduce_sum(wrong_square(x)), np.array([1.0, 2.0]))
    assert check.max_relative_error == pytest.approx(1 / 3, rel=1e-6)  # |3x - 2x| / 3x


class Smooth(TapeModel):
    def __init__(self, **kwargs):
        super().__init__(**kwargs)
        self.hidden = keras.layers.Dense(5, activation="tanh")
        self.out = keras.layers.Dense(3, activation="softmax")

    def call(self, x, training=False):
        return self.out(self.hidden(x))

    def forward(self, data, training):
        x, y = data
        probabilities = self(x, training=training)
        loss = tf.reduce_mean(keras.losses.sparse_categorical_crossentropy(y, probabilities))
        return StepOutput(loss, y, probabilities)

    def get_config(self):
        return {"name": self.name}


@pytest.mark.parametrize("compiled_loss", [False, True])
def test_a_model_step_loss_is_checked_in_float64(compiled_loss):
    x = np.random.default_rng(1).normal(size=(16, 4)).astype("float32")
    y = np.arange(16) % 3
    model = TapeModel(*_functional()) if compiled_loss else Smooth()
    model.compile(optimizer="sgd", loss="sparse_categorical_crossentropy")
    model(x)
    check = tapefit.gradcheck(model, (x, y), samples=4)
    sampled = sum(min(4, int(np.prod(v.shape))) for v in model.trainable_variables)
    assert check.unreached == {} and check.checked == sampled
    assert check.max_relative_error < 1e-6  # float64: far below float32's 1e-3
    assert model.dtype_policy.name == "float32"  # the model itself is untouched


def _functional():
    inputs = keras.Input((4,))
    return inputs, keras.layers.Dense(3, activation="softmax")(keras.layers.Dense(5)(inputs))


@keras.saving.register_keras_serializable(package="tests")
class Triplet(TapeModel):
    """A step whose input is not call's: {anchor, positive, negative}, embedded one by one."""

    def __init__(self, **kwargs):
        super().__init__(**kwargs)
        self.embed = keras.layers.Dense(3)

    def call(self, x, training=False):
        return self.embed(x)

    def forward(self, data, training):
        anchor, positive, negative = (
            self(data[key], training=training) for key in ("anchor", "positive", "negative")
        )
        near = tf.reduce_sum(tf.square(anchor - positive), axis=1)
        far = tf.reduce_sum(tf.square(anchor - negative), axis=1)
        return StepOutput(tf.reduce_mean(tf.nn.relu(near - far + 1.0)))


def test_a_model_whose_step_input_is_not_calls_is_checked():
    parts = {
        key: tf.constant(np.random.default_rng(i).normal(size=(4, 5)), tf.float32)
        for i, key in enumerate(("anchor", "positive", "negative"))
    }
    model = Triplet()
    model.compile(optimizer="sgd")
    model.forward(parts, training=False)  # built by its own step, as fit would
    check = tapefit.gradcheck(model, parts)
    assert check.max_relative_error < 1e-6 and check.checked > 0
    # a triplet loss compares embeddings, so the bias cancels out of it: reported, not a crash
    assert [(name.rsplit("/", 1)[1], why) for name, why in check.unreached.items()] == [
        ("bias", "zero")
    ]

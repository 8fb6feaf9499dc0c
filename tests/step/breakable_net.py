"""A small regressor whose `forward` a test can break, its data, a batch with a NaN, and its
training under each `on_nonfinite`: what tests/step/test_step_guards.py and
test_nonfinite_guard.py train."""

import keras
import numpy as np
import tensorflow as tf

from tapefit import StepOutput, TapeModel
from tapefit.step.nonfinite_guard import NonFiniteGuard

X = np.random.default_rng(0).normal(size=(96, 3)).astype("float32")
Y = (X @ np.array([[1.0], [2.0], [-1.0]], "float32")).astype("float32")


class Net(TapeModel):
    """A small regressor whose `forward` a test can break in one way."""

    def __init__(self, mistake=None, **kwargs):
        super().__init__(**kwargs)
        self.mistake = mistake
        self.body = keras.layers.Dense(4, activation="tanh", name="body")
        self.head = keras.layers.Dense(1, name="head")
        self.unused = keras.layers.Dense(1, name="unused")
        self.unused.build((None, 3))

    def call(self, x, training=False):
        return self.head(self.body(x))

    def forward(self, data, training):
        x, y = data
        y_pred = tf.cast(self(x, training=training), tf.float32)  # float32 under mixed precision
        if self.mistake == "numpy":  # a NumPy round trip: no gradient flows back through it
            y_pred = tf.numpy_function(lambda a: a, [y_pred], tf.float32, stateful=False)
            y_pred.set_shape((None, 1))
        if self.mistake == "integer":  # rounding through an integer: not differentiable
            y_pred = tf.cast(tf.cast(y_pred * 100.0, tf.int32), tf.float32) / 100.0
        return StepOutput(tf.reduce_mean(tf.square(y - y_pred)), y, y_pred)


def poisoned(batch_index=1, batch_size=32):
    x = X.copy()
    x[batch_index * batch_size] = np.nan
    return x


def train(on_nonfinite, x, epochs=2, seed=3, strategy=None):
    keras.utils.set_random_seed(seed)
    with (strategy or tf.distribute.get_strategy()).scope():
        model = Net()
        model.compile(
            optimizer=keras.optimizers.Adam(1e-2),
            on_nonfinite=on_nonfinite,
            allow_missing_gradients=["*unused*"],
        )
    callbacks = [] if on_nonfinite == "ignore" else [NonFiniteGuard()]
    keras.utils.set_random_seed(seed)
    history = model.fit(
        x,
        Y[: len(x)],
        batch_size=32,
        epochs=epochs,
        verbose=0,
        shuffle=False,
        callbacks=callbacks,
    )
    return model, history.history

"""A complete custom TapeModel in a few lines: a gradient-penalised regressor that still gets
`fit`, `History` and TensorBoard. Run: `python experiments/custom_step.py [log_dir]`."""

import sys

import keras
import numpy as np
import tensorflow as tf

import tapefit


class SmoothRegressor(tapefit.TapeModel):
    """Regression whose loss also penalises the input gradient (a nested tape inside the step)."""

    def __init__(self, penalty: float = 0.1, **kwargs):
        super().__init__(**kwargs)
        self.penalty = penalty
        self.hidden = keras.layers.Dense(32, activation="tanh")
        self.out = keras.layers.Dense(1, dtype="float32")  # float32 output under mixed precision

    def call(self, x, training=False):
        return self.out(self.hidden(x))

    def forward(self, data, training):
        x, y = data
        with tf.GradientTape() as input_tape:
            input_tape.watch(x)
            y_pred = self(x, training=training)
        slope = input_tape.gradient(y_pred, x)
        mse = tf.reduce_mean(tf.square(y - y_pred))
        loss = mse + self.penalty * tf.reduce_mean(tf.square(slope))
        return tapefit.StepOutput(loss, y, y_pred)


def main(log_dir: str = "outputs/custom_step") -> keras.callbacks.History:
    """Fit the regressor on noisy sin(x) with TensorBoard logging; return the History."""
    keras.utils.set_random_seed(0)
    x = np.linspace(-3, 3, 512, dtype="float32")[:, None]
    y = np.sin(x) + np.random.default_rng(0).normal(0, 0.1, x.shape).astype("float32")
    model = SmoothRegressor(penalty=0.1)
    model.compile(optimizer=keras.optimizers.Adam(1e-2), metrics=["mae"])
    return model.fit(
        x,
        y,
        batch_size=64,
        epochs=20,
        validation_split=0.2,
        verbose=0,
        callbacks=[keras.callbacks.TensorBoard(log_dir)],
    )


if __name__ == "__main__":
    history = main(*sys.argv[1:])
    print({key: round(values[-1], 4) for key, values in history.history.items()})

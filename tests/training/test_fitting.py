"""The pieces of a run's `fit` that only whole runs reached: the callback list of one `fit`
among several, the log line naming the callback that stopped training, and the epoch length
Keras counts."""

import logging

import keras
import numpy as np
import tensorflow as tf

from tapefit.training.fitting import ContinuedCallbacks, steps_of, stop_message


class Recorder(keras.callbacks.Callback):
    def __init__(self, stop_at_batch=None):
        super().__init__()
        self.calls, self.stop_at_batch = [], stop_at_batch

    def on_train_begin(self, logs=None):
        self.calls.append("train_begin")

    def on_train_end(self, logs=None):
        self.calls.append("train_end")

    def on_train_batch_end(self, batch, logs=None):
        if batch == self.stop_at_batch:
            self.model.stop_training = True

    def stop_reason(self):
        return "it was told to"


def fitted(callbacks: list, begins: bool) -> None:
    """Two epochs of four batches, with `callbacks` in a `ContinuedCallbacks` as `Fitting`
    makes it."""
    model = keras.Sequential([keras.Input((2,)), keras.layers.Dense(1)])
    model.compile("sgd", "mse")
    history = keras.callbacks.History()  # fit returns it (Fitting keeps its own)
    history.on_train_begin()  # as an earlier fit of the run began it
    continued = ContinuedCallbacks(
        [*callbacks, history], begins=begins, model=model, epochs=2, steps=4
    )
    x, y = np.ones((8, 2)), np.ones((8, 1))
    model.fit(x, y, batch_size=2, epochs=2, verbose=0, callbacks=continued)


def test_only_the_first_fit_of_a_run_begins_and_none_ends_the_callbacks():
    first, later = Recorder(), Recorder()
    fitted([first], begins=True)
    fitted([later], begins=False)
    assert first.calls == ["train_begin"] and later.calls == []  # Fitting.end ends them once


def test_the_callback_that_stops_training_is_logged_with_its_reason(caplog):
    with caplog.at_level(logging.INFO, logger="tapefit"):
        fitted([Recorder(stop_at_batch=1)], begins=True)
    assert "Recorder stopped training in epoch 1, after batch 2: it was told to" in caplog.text


def test_early_stoppings_reason_is_read_from_its_state():
    stopping = keras.callbacks.EarlyStopping(monitor="val_loss", patience=2)
    stopping.wait, stopping.best = 2, 0.5
    assert stop_message(stopping, "at the end of epoch 4") == (
        "EarlyStopping stopped training at the end of epoch 4: val_loss did not improve for 2 "
        "epochs (patience 2, best 0.5)"
    )


def test_an_epoch_is_the_datasets_length_or_the_steps_asked_for():
    dataset = tf.data.Dataset.range(10).batch(3)
    assert steps_of(dataset, None) == 4
    assert steps_of(dataset, 2) == 2

"""The progress bar (`StepProgbar`): it ends at N/N when `steps_per_execution` does not divide
the epoch, for a sized dataset and a stream of unknown length alike (issue 22)."""

import keras
import numpy as np
import pytest
import tensorflow as tf

from tapefit import TapeModel
from tapefit.callbacks.progress import StepProgbar


def small_model(accumulate: int | None = None) -> TapeModel:
    inputs = keras.Input((4,))
    model = TapeModel(inputs, keras.layers.Dense(1)(inputs))
    optimizer = keras.optimizers.SGD(gradient_accumulation_steps=accumulate)
    model.compile(optimizer=optimizer, loss="mse", steps_per_execution=8)
    return model


def recording(progbar_class: type) -> keras.callbacks.ProgbarLogger:
    """`progbar_class` noting every count it shows (`seen`, out of `target`): what the bar
    prints, without the bar's time-based throttling of what reaches the terminal."""

    class Recording(progbar_class):
        def __init__(self):
            super().__init__()
            self.shown: list[tuple[int, int | None]] = []

        def on_train_batch_end(self, batch, logs=None):
            super().on_train_batch_end(batch, logs)
            self.shown.append((self.seen, self.target))

        def on_epoch_end(self, epoch, logs=None):
            super().on_epoch_end(epoch, logs)
            self.shown.append((self.progbar._seen_so_far, self.progbar.target))

    return Recording()


def thirty_nine_batches(known_length: bool) -> tf.data.Dataset:
    x, y = np.ones((39, 4), "float32"), np.ones((39, 1), "float32")
    data = tf.data.Dataset.from_tensor_slices((x, y)).batch(1)
    return data if known_length else data.filter(lambda *_: True)  # a stream: length unknown


@pytest.mark.parametrize(
    ("known_length", "accumulate"),
    [(True, None), (False, None), (False, 4)],
    ids=["sized", "stream", "stream-accumulating"],
)
def test_the_progress_bar_ends_at_n_of_n_when_steps_per_execution_does_not_divide_the_epoch(
    known_length, accumulate
):
    progbar = recording(StepProgbar)
    model = small_model(accumulate)
    model.fit(thirty_nine_batches(known_length), epochs=3, verbose=1, callbacks=[progbar])
    shown = progbar.shown
    assert [seen for seen, _ in shown] == [8, 16, 24, 32, 39, 39] * 3
    # a stream's length is known once its first epoch has run out: 39, not 40
    assert [target for _, target in shown[6:]] == [39] * 12


def test_keras_own_progress_bar_counts_past_the_end_there():
    """The control: Keras' bar on the same model and data shows 40/39 (and a stream's size
    as 40), so the test above would see it if StepProgbar were not taken."""
    for known_length in (True, False):
        progbar = recording(keras.callbacks.ProgbarLogger)
        small_model().fit(
            thirty_nine_batches(known_length), epochs=2, verbose=1, callbacks=[progbar]
        )
        assert (40, 39 if known_length else 40) in progbar.shown

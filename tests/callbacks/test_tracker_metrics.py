"""The tracker's callback: each epoch once (a resume does not send an epoch again), and the
batch logs every N optimizer steps."""

import keras
import numpy as np

from tapefit.callbacks.tracker_metrics import EpochMetrics


class Recorded:
    """A tracker that keeps what it is sent."""

    def __init__(self, every=None, logged=()):
        self.log_every_n_steps, self.logged_steps, self.sent = every, set(logged), []

    def log_metrics(self, metrics, step):
        self.sent.append((step, dict(metrics)))


def test_each_epoch_is_sent_once_even_after_a_resume():
    tracker = Recorded(logged={0})  # epoch 0 was sent before the stop
    callback = EpochMetrics(tracker)
    callback.on_epoch_end(0, {"loss": 1.0})
    callback.on_epoch_end(1, {"loss": 0.5})
    callback.on_epoch_end(1, {"loss": 0.5})
    assert tracker.sent == [(1, {"loss": 0.5})] and tracker.logged_steps == {0, 1}


def test_batch_logs_go_every_n_optimizer_steps_and_not_without_it():
    model = keras.Sequential([keras.Input((2,)), keras.layers.Dense(1)])
    model.compile("sgd", "mse")
    every_two, never = Recorded(every=2), Recorded()
    model.fit(
        np.ones((8, 2)),
        np.ones((8, 1)),
        batch_size=2,
        epochs=1,
        verbose=0,
        callbacks=[EpochMetrics(every_two), EpochMetrics(never)],
    )
    batches = [step for step, metrics in every_two.sent if "step/loss" in metrics]
    assert batches == [2, 4]
    assert [step for step, _ in never.sent] == [0]  # the epoch only

"""`tapefit.callbacks.best_epoch`: the best epoch's weights kept in memory (ties to the first,
non-finite values never), or the last epoch's when nothing is watched, and carried through a
resume by `get_state` / `set_state`."""

import json
import math

import keras
import numpy as np

from tapefit.callbacks.best_epoch import BestEpochWeights
from tapefit.files import to_builtin
from tapefit.objective import Objective


def model_and_weights(callback):
    """A Dense(1) on 1 input the callback watches, and a setter of its kernel and bias."""
    model = keras.Sequential([keras.Input((1,)), keras.layers.Dense(1)])
    callback.set_model(model)

    def set_to(value):
        model.set_weights([np.full((1, 1), value, "float32"), np.full((1,), value, "float32")])

    return set_to


def run_epochs(callback, epochs):
    """Each (weights' value, logs) pair as an epoch's end."""
    set_to = model_and_weights(callback)
    for epoch, (value, logs) in enumerate(epochs):
        set_to(value)
        callback.on_epoch_end(epoch, logs)
    set_to(99.0)  # training goes on: the kept weights are copies


def test_the_first_of_the_best_epochs_is_kept_and_non_finite_or_missing_values_never_are():
    best = BestEpochWeights(Objective("val_loss", "min"))
    run_epochs(
        best,
        [
            (1.0, {"val_loss": 0.5}),
            (2.0, {"val_loss": 0.7}),
            (3.0, {"val_loss": 0.5}),  # as good: the first stays
            (4.0, {"val_loss": math.nan}),
            (5.0, {"loss": 0.1}),  # no validation this epoch
        ],
    )
    assert (best.epoch, best.value, best.last_epoch) == (0, 0.5, 4)
    assert [w.tolist() for w in best.weights] == [[[1.0]], [1.0]]


def test_watching_nothing_keeps_the_last_epochs_weights():
    last = BestEpochWeights(None)
    run_epochs(last, [(1.0, {"val_loss": 0.1}), (2.0, {"val_loss": 0.9})])
    assert (last.epoch, last.last_epoch) == (1, 1) and math.isnan(last.value)
    assert [w.tolist() for w in last.weights] == [[[2.0]], [2.0]]


def test_a_resumed_callback_knows_the_best_epoch_before_the_stop():
    before = BestEpochWeights(Objective("val_accuracy", "max"))
    run_epochs(before, [(1.0, {"val_accuracy": 0.8}), (2.0, {"val_accuracy": 0.6})])
    resumed = BestEpochWeights(Objective("val_accuracy", "max"))
    resumed.set_state(before.get_state())
    assert (resumed.epoch, resumed.value, resumed.last_epoch) == (0, 0.8, 1)
    run_epochs(resumed, [(3.0, {"val_accuracy": 0.7})])  # epoch 0 again, but worse than 0.8
    assert resumed.epoch == 0 and [w.tolist() for w in resumed.weights] == [[[1.0]], [1.0]]


def test_the_state_before_any_epoch_survives_json():
    fresh = BestEpochWeights(Objective("val_loss", "min"))
    state = json.loads(json.dumps(to_builtin(fresh.get_state())))  # NaN written as null
    restored = BestEpochWeights(Objective("val_loss", "min"))
    restored.set_state(state)
    assert restored.epoch is None and math.isnan(restored.value) and restored.weights == []
    assert restored.better(10.0)  # the first finite value will be the best

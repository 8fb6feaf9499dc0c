"""Callback states as a checkpoint records them and a resume puts them back, without a run."""

import json

import keras
import numpy as np

from tapefit.checkpointing.callback_state import (
    CallbackStates,
    CarryCallbackStates,
    apply,
    collect,
    keyed,
)


class Counter(keras.callbacks.Callback):
    """A user callback with state: a count and an array."""

    def __init__(self) -> None:
        super().__init__()
        self.count, self.seen = 0, np.zeros(2)

    def get_state(self) -> dict:
        return {"count": self.count, "seen": self.seen}

    def set_state(self, state: dict) -> None:
        self.count, self.seen = state["count"], state["seen"]


def stopped_early() -> keras.callbacks.EarlyStopping:
    stopping = keras.callbacks.EarlyStopping(patience=3)
    stopping.wait, stopping.best, stopping.best_epoch = 2, np.float32(0.25), 4
    stopping.best_weights = [np.arange(3.0), np.ones((2, 2))]
    return stopping


def test_collected_states_are_json_and_arrays_and_apply_back_into_new_callbacks():
    counter = Counter()
    counter.count, counter.seen = 7, np.array([1.0, 2.0])
    recorded = collect([stopped_early(), keras.callbacks.History(), counter])

    assert set(recorded.values) == {"EarlyStopping#0", "Counter#0"}  # History has no state
    json.dumps(recorded.values)  # what the checkpoint's marker holds
    assert recorded.values["EarlyStopping#0"]["best_weights"] == {"arrays": 2}
    assert recorded.values["EarlyStopping#0"]["best"] == 0.25  # a NumPy scalar made plain
    assert sorted(recorded.arrays) == [
        "Counter#0/seen/0",
        "EarlyStopping#0/best_weights/0",
        "EarlyStopping#0/best_weights/1",
    ]

    fresh_stopping, fresh_counter = keras.callbacks.EarlyStopping(patience=3), Counter()
    apply([fresh_stopping, fresh_counter], recorded)
    assert (fresh_stopping.wait, fresh_stopping.best, fresh_stopping.best_epoch) == (2, 0.25, 4)
    np.testing.assert_array_equal(fresh_stopping.best_weights[1], np.ones((2, 2)))
    assert fresh_counter.count == 7
    np.testing.assert_array_equal(fresh_counter.seen, [1.0, 2.0])


def test_keys_follow_each_class_position_so_two_of_a_kind_keep_their_own_state():
    first, second = Counter(), Counter()
    first.count, second.count = 1, 2
    assert list(keyed([first, keras.callbacks.History(), second])) == ["Counter#0", "Counter#1"]
    again = [Counter(), Counter()]
    apply(again, collect([first, second]))
    assert [c.count for c in again] == [1, 2]


def test_no_recorded_state_is_false_and_changes_nothing():
    assert not CallbackStates() and CallbackStates({"Counter#0": {"count": 1}})
    counter = Counter()
    apply([counter], CallbackStates({"Other#0": {"count": 5}}))  # a key it does not have
    assert counter.count == 0


def test_carry_puts_states_back_after_train_begin_and_takes_them_at_train_end():
    counter = Counter()
    carry = CarryCallbackStates(CallbackStates({"Counter#0": {"count": 3, "seen": [0, 1]}}))
    carry.use_callbacks([counter])
    carry.on_train_begin()
    assert counter.count == 3
    counter.count = 9
    carry.on_train_end()  # what the next fit of the same run starts from
    assert carry.states.values["Counter#0"]["count"] == 9

"""Callback state in resume checkpoints: Keras' EarlyStopping, ReduceLROnPlateau and
ModelCheckpoint keep their patience counters and best values in attributes that `on_train_begin`
resets, so a resumed run would forget them. A checkpoint records them, and a resume puts them
back after `on_train_begin`. A callback of yours takes part by defining `get_state()` (a dict of
JSON values, or NumPy arrays) and `set_state(state)`."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any

import keras
import numpy as np

# The attributes that make up the state of Keras' stateful callbacks (Keras 3).
KERAS_STATE: dict[type, tuple[str, ...]] = {
    keras.callbacks.EarlyStopping: ("wait", "stopped_epoch", "best", "best_epoch", "best_weights"),
    keras.callbacks.ReduceLROnPlateau: ("wait", "cooldown_counter", "best"),
    keras.callbacks.ModelCheckpoint: ("best",),
}


def _attributes(callback: Any) -> tuple[str, ...] | None:
    for kind, names in KERAS_STATE.items():
        if isinstance(callback, kind):
            return names
    return None


def keyed(callbacks: list[Any]) -> dict[str, Any]:
    """The stateful callbacks by a key stable across runs of one config: class name and the
    position among callbacks of that class."""
    seen: dict[str, int] = {}
    out = {}
    for callback in callbacks:
        if not (hasattr(callback, "get_state") or _attributes(callback)):
            continue
        name = type(callback).__name__
        out[f"{name}#{seen.get(name, 0)}"] = callback
        seen[name] = seen.get(name, 0) + 1
    return out


@dataclass(frozen=True)
class CallbackStates:
    """The recorded states of a run's stateful callbacks, as a checkpoint holds them.

    Attributes:
        values: `{callback key: {field: JSON value}}`; an array field is a placeholder
            (`{"array": true}` or `{"arrays": n}`) naming its entries in `arrays`.
        arrays: `{"<key>/<field>/<index>": array}` (EarlyStopping's best weights, a user
            state's arrays), written to a file of their own.

    Example:
        >>> CallbackStates().values, bool(CallbackStates({"early_stopping": {"wait": 1}}))
        ({}, True)
    """

    values: dict[str, Any] = dataclasses.field(default_factory=dict)
    arrays: dict[str, np.ndarray] = dataclasses.field(default_factory=dict)

    def __bool__(self) -> bool:
        return bool(self.values)


def collect(callbacks: list[Any]) -> CallbackStates:
    """The states of every stateful callback: arrays (EarlyStopping's best weights, a user
    state's arrays) apart, named `<key>/<field>/<index>`."""
    states: dict[str, Any] = {}
    arrays: dict[str, np.ndarray] = {}
    for key, callback in keyed(callbacks).items():
        names = _attributes(callback)
        state = (
            dict(callback.get_state())
            if names is None
            else {name: getattr(callback, name, None) for name in names}
        )
        plain = {}
        for field, value in state.items():
            if isinstance(value, list | tuple) and value and isinstance(value[0], np.ndarray):
                for index, array in enumerate(value):
                    arrays[f"{key}/{field}/{index}"] = array
                plain[field] = {"arrays": len(value)}
            elif isinstance(value, np.ndarray):
                arrays[f"{key}/{field}/0"] = value
                plain[field] = {"array": True}
            else:
                plain[field] = value.item() if isinstance(value, np.generic) else value
        states[key] = plain
    return CallbackStates(states, arrays)


def apply(callbacks: list[Any], recorded: CallbackStates) -> None:
    """Put recorded states back into the callbacks they came from."""
    states, arrays = recorded.values, recorded.arrays
    for key, callback in keyed(callbacks).items():
        if key not in states:
            continue
        state = {}
        for field, value in states[key].items():
            if isinstance(value, dict) and "arrays" in value:
                value = [arrays[f"{key}/{field}/{i}"] for i in range(value["arrays"])]
            elif isinstance(value, dict) and value.get("array"):
                value = arrays[f"{key}/{field}/0"]
            state[field] = value
        if _attributes(callback) is None:
            callback.set_state(state)
        else:
            for field, value in state.items():
                setattr(callback, field, value)


class CarryCallbackStates(keras.callbacks.Callback):
    """Carries callback states into a `fit`: those a checkpoint recorded (a resume), then those
    the previous `fit` of the same run ended with (a resumed partial epoch is its own `fit`,
    with new callback objects). Applied after the other callbacks' `on_train_begin`, which
    resets them; `fit` hands it the run's callback list."""

    def __init__(self, states: CallbackStates) -> None:
        super().__init__()
        self.states = states
        self.callbacks: list[Any] = []

    def use_callbacks(self, callbacks: list[Any]) -> None:
        """The callbacks of the `fit` about to run."""
        self.callbacks = callbacks

    def on_train_begin(self, logs: dict | None = None) -> None:
        if self.states:
            apply(self.callbacks, self.states)

    def on_train_end(self, logs: dict | None = None) -> None:
        self.states = collect(self.callbacks)

"""Weight EMA (`optimizer.use_ema=true`): validation, selection and the saved model use the
optimizer's moving average of the weights, training goes on from the raw ones.

Why: Keras' optimizers keep the average (`use_ema`, `ema_momentum`) and put it into the
model when `fit` ends, but everything in between (validation metrics, EarlyStopping, the
best-epoch selection, ModelCheckpoint) would see the raw weights, and so would a run that
selects an earlier epoch. `AveragedWeights` swaps the averages in when validation begins and
keeps them in through the epoch-end callbacks that judge or keep weights, then swaps the raw
weights back before the resume checkpoint is written, so a resumed run continues exactly.
"""

from __future__ import annotations

from typing import Any

import keras

from tapefit.keras_compat import moving_average_pairs


def averaged_pairs(model: keras.Model) -> list[tuple[Any, Any]]:
    """(variable, moving average) over every optimizer of `model` that keeps an EMA.

    Args:
        model: A compiled model (a TapeModel's several optimizers are all looked at).

    Returns:
        The pairs; empty when no optimizer has `use_ema=True` or none is built yet.

    Example:
        >>> model = keras.Sequential([keras.Input((2,)), keras.layers.Dense(1)])
        >>> model.compile(optimizer=keras.optimizers.SGD(use_ema=True), loss="mse")
        >>> model.optimizer.build(model.trainable_variables)
        >>> len(averaged_pairs(model))
        2
    """
    optimizers = getattr(model, "optimizers", None)
    if not isinstance(optimizers, dict):
        optimizers = {"optimizer": model.optimizer}
    return [pair for o in optimizers.values() if o is not None for pair in moving_average_pairs(o)]


def uses_averages(model: keras.Model) -> bool:
    """Whether any optimizer of `model` is configured with `use_ema=True`."""
    optimizers = getattr(model, "optimizers", None)
    if not isinstance(optimizers, dict):
        optimizers = {"optimizer": model.optimizer}
    return any(
        getattr(getattr(o, "inner_optimizer", o), "use_ema", False) for o in optimizers.values()
    )


def put_averages_in(model: keras.Model) -> None:
    """Overwrite the model's variables with their moving averages (the end of training:
    what Keras' `finalize_variable_values` does, for every optimizer of the model)."""
    for variable, average in averaged_pairs(model):
        variable.assign(average)


class AveragedWeights:
    """The two callbacks that bracket the part of an epoch that sees averaged weights:
    `swap_in` (first in the run's list) and `swap_out` (before the resume checkpointer).

    Args:
        model: The compiled model whose optimizers keep EMAs.

    Example:
        >>> model = keras.Sequential([keras.Input((1,)), keras.layers.Dense(1)])
        >>> model.compile(optimizer=keras.optimizers.SGD(0.1, use_ema=True), loss="mse")
        >>> averages = AveragedWeights(model)
        >>> x = keras.ops.ones((4, 1))
        >>> history = model.fit(x, x, validation_data=(x, x), epochs=2, verbose=0,
        ...                     callbacks=[averages.swap_in, averages.swap_out])
        >>> averages.averaged_in
        False
    """

    def __init__(self, model: keras.Model) -> None:
        self.model = model
        self.averaged_in = False
        self.swap_in = _SwapIn(self)
        self.swap_out = _SwapOut(self)

    def swap(self) -> None:
        """Exchange every variable with its moving average (the raw values wait in the
        average's place), in place."""
        for variable, average in averaged_pairs(self.model):
            raw = keras.ops.convert_to_numpy(variable)
            variable.assign(average)
            average.assign(raw)
        self.averaged_in = not self.averaged_in

    def use_averages(self) -> None:
        """The averages into the model, if they are not in yet."""
        if not self.averaged_in:
            self.swap()

    def use_raw(self) -> None:
        """The raw weights back, if the averages are in."""
        if self.averaged_in:
            self.swap()


class _SwapIn(keras.callbacks.Callback):
    """Averages in when validation (or, without it, the epoch's end) begins; out again after
    an `evaluate` outside training."""

    def __init__(self, averages: AveragedWeights) -> None:
        super().__init__()
        self.averages = averages
        self.training = False

    def on_train_begin(self, logs: dict | None = None) -> None:
        self.training = True

    def on_epoch_begin(self, epoch: int, logs: dict | None = None) -> None:
        self.training = True
        self.averages.use_raw()

    def on_test_begin(self, logs: dict | None = None) -> None:
        self.averages.use_averages()

    def on_test_end(self, logs: dict | None = None) -> None:
        if not self.training:
            self.averages.use_raw()

    def on_epoch_end(self, epoch: int, logs: dict | None = None) -> None:
        self.averages.use_averages()

    def on_train_end(self, logs: dict | None = None) -> None:
        self.training = False


class _SwapOut(keras.callbacks.Callback):
    """Raw weights back at the epoch's end, once the callbacks before it have judged and
    kept the averaged ones."""

    def __init__(self, averages: AveragedWeights) -> None:
        super().__init__()
        self.averages = averages

    def on_epoch_end(self, epoch: int, logs: dict | None = None) -> None:
        self.averages.use_raw()

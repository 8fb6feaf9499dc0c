"""The Keras callbacks a search adds to each trial's run: a clock of the time spent in `fit`'s
epochs (the rest of a trial is its overhead), and the hand-over of each epoch's objective
value to the engine, which may prune the trial there."""

from __future__ import annotations

import math
import time
import warnings
from collections.abc import Callable
from typing import Any

import keras

from tapefit.checkpointing.checkpoints import EpochCheckpoint


class EpochClock(keras.callbacks.Callback):
    """Seconds spent inside `fit`'s epochs; the rest of a trial is its overhead.

    Example:
        >>> clock = EpochClock()
        >>> clock.on_epoch_begin(0)
        >>> clock.on_epoch_end(0)
        >>> 0 <= clock.seconds < 1
        True
    """

    def __init__(self) -> None:
        super().__init__()
        self.seconds = 0.0

    def on_epoch_begin(self, epoch: int, logs: dict | None = None) -> None:
        self.started = time.perf_counter()

    def on_epoch_end(self, epoch: int, logs: dict | None = None) -> None:
        self.seconds += time.perf_counter() - self.started


class EpochReport(keras.callbacks.Callback):
    """Hands each epoch's objective value to `report(value, epoch)`; when it answers True (a
    pruner's verdict) training stops after that epoch and `stopped_at` says which.

    Args:
        objective: The metric reported, by its logged name.
        report: Takes the epoch's value and the (0-based) epoch; True stops training.

    Example:
        >>> told = []
        >>> watch = EpochReport("val_loss", lambda value, epoch: told.append(epoch) or False)
        >>> watch.on_epoch_end(0, {"val_loss": 0.5})
        >>> told, watch.stopped_at
        ([0], None)
    """

    def __init__(self, objective: str, report: Callable[[float, int], bool]) -> None:
        super().__init__()
        self.objective, self.report = objective, report
        self.stopped_at: int | None = None
        self.earlier: list[dict] = []

    def use_callbacks(self, callbacks: list[Any]) -> None:
        """The run's callbacks: a resumed run's checkpointer holds the epochs before the stop."""
        found = (c.history for c in callbacks if isinstance(c, EpochCheckpoint))
        self.earlier = list(next(found, []))

    def on_train_begin(self, logs: dict | None = None) -> None:
        self.stopped_at = None
        # A resumed trial reports its epochs from before the stop again, in case the stop came
        # between an epoch's checkpoint and its report (the engine ignores repeats).
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            for epoch, logs_then in enumerate(self.earlier):
                value = logs_then.get(self.objective)
                if value is not None and math.isfinite(float(value)):
                    self.report(float(value), epoch)

    def on_epoch_end(self, epoch: int, logs: dict | None = None) -> None:
        value = (logs or {}).get(self.objective)
        if value is None or not math.isfinite(float(value)):
            return  # a test_* objective has no epoch value; a non-finite one fails the run
        if self.report(float(value), epoch):
            self.stopped_at = epoch
            self.model.stop_training = True

    def stop_reason(self) -> str:
        """Why this callback stopped training (logged by the run)."""
        return f"the search pruned this trial on {self.objective}"

"""The shared base of callbacks that judge epochs by one logged metric, as Keras'
`MonitorCallback` is for its own: the monitored name and its direction are settled once (the
run's `Objective`), and every such callback reads and compares values the same way."""

from __future__ import annotations

import math

import keras

from tapefit.objective import Objective


class MonitoredCallback(keras.callbacks.Callback):
    """A callback watching `objective.name` in the epoch logs, better in `objective.direction`.

    Args:
        objective: The metric and its direction; None for a callback that watches nothing
            (then every epoch counts as an improvement: the last one wins).

    Example:
        >>> watcher = MonitoredCallback(Objective("val_loss", "min"))
        >>> watcher.monitored_value({"val_loss": 0.25}), watcher.improves(0.2, 0.25)
        (0.25, True)
        >>> watcher.improves(float("nan"), 0.25), watcher.improves(0.3, None)
        (False, True)
    """

    def __init__(self, objective: Objective | None) -> None:
        super().__init__()
        self.objective = objective
        self.monitor = None if objective is None else objective.name

    @property
    def direction(self) -> str | None:
        """`"max"` or `"min"`, None when nothing is watched."""
        return None if self.objective is None else self.objective.direction

    def monitored_value(self, logs: dict | None) -> float | None:
        """The watched metric in `logs`, None when it is not there (or nothing is watched)."""
        value = (logs or {}).get(self.monitor) if self.monitor else None
        return None if value is None else float(value)

    def improves(self, value: float, best: float | None) -> bool:
        """Whether `value` beats `best` (None: nothing yet). A non-finite value never does;
        of equal values the first is kept. With nothing watched, every value does."""
        if self.objective is None:
            return True
        if not math.isfinite(value):
            return False
        return best is None or self.objective.better(value, best)

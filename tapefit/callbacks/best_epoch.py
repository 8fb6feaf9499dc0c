"""The weights of the best epoch so far, kept in memory for the run to test and save
(`trainer.test_weights=best`; `tapefit.training.selection` decides when it is needed)."""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from tapefit.callbacks.monitored import MonitoredCallback
from tapefit.objective import Objective


class BestEpochWeights(MonitoredCallback):
    """Keeps a copy of the weights of the epoch whose `monitor` value is the best so far (the
    first such epoch on ties, as `Objective.value_in` picks it), or, with no objective, of the
    last epoch (which `EarlyStopping(restore_best_weights=True)` would otherwise replace at
    the end). Its state rides in the resume checkpoints (`get_state`), so a resumed run still
    knows the best epoch before the stop."""

    def __init__(self, objective: Objective | None) -> None:
        super().__init__(objective)
        self.epoch: int | None = None  # 0-based, as Keras counts epochs
        self.value = math.nan
        self.weights: list[np.ndarray] = []
        self.last_epoch: int | None = None

    def better(self, value: float) -> bool:
        """Whether `value` beats the best so far (a non-finite value never does)."""
        return self.improves(value, None if self.epoch is None else self.value)

    def on_epoch_end(self, epoch: int, logs: dict | None = None) -> None:
        self.last_epoch = epoch
        value = (logs or {}).get(self.monitor) if self.monitor else math.nan
        if value is not None and self.better(float(value)):
            self.epoch, self.value = epoch, float(value)
            self.weights = [np.array(w, copy=True) for w in self.model.get_weights()]

    def get_state(self) -> dict[str, Any]:
        """The selected epoch, its value and weights, and the last epoch seen (JSON + arrays)."""
        return {
            "epoch": self.epoch,
            "value": self.value,
            "weights": self.weights,
            "last_epoch": self.last_epoch,
        }

    def set_state(self, state: dict[str, Any]) -> None:
        """Put back what `get_state` returned (a resume)."""
        value = state["value"]  # None: NaN in JSON, before the first epoch ended
        self.epoch, self.value = state["epoch"], math.nan if value is None else float(value)
        self.weights = list(state["weights"]) if state["weights"] else []
        self.last_epoch = state.get("last_epoch")

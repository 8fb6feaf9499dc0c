"""The weights a run is tested and saved with: those of the epoch its objective selects, as
lightning-hydra-template tests `best_model_path` (`trainer.test_weights=best`), or the last."""

from __future__ import annotations

import logging
import math
from typing import Any

import keras
import numpy as np

from tapefit.config.schemas import ObjectiveMode, TestWeights
from tapefit.training.callbacks import resolve_mode

log = logging.getLogger("tapefit")


class BestEpochWeights(keras.callbacks.Callback):
    """Keeps a copy of the weights of the epoch whose `monitor` value is the best so far (the
    first such epoch on ties, as `objective_value` picks it). Its state rides in the resume
    checkpoints (`get_state`), so a resumed run still knows the best epoch before the stop."""

    def __init__(self, monitor: str) -> None:
        super().__init__()
        self.monitor = monitor
        self.higher_is_better = resolve_mode(monitor, "auto") == "max"
        self.epoch: int | None = None  # 0-based, as Keras counts epochs
        self.value = math.nan
        self.weights: list[np.ndarray] = []
        self.last_epoch: int | None = None

    def better(self, value: float) -> bool:
        """Whether `value` beats the best so far (a non-finite value never does)."""
        if not math.isfinite(value):
            return False
        if self.epoch is None:
            return True
        return value > self.value if self.higher_is_better else value < self.value

    def on_epoch_end(self, epoch: int, logs: dict | None = None) -> None:
        self.last_epoch = epoch
        value = (logs or {}).get(self.monitor)
        if value is not None and self.better(float(value)):
            self.epoch, self.value = epoch, float(value)
            self.weights = [np.array(w, copy=True) for w in self.model.get_weights()]

    def get_state(self) -> dict[str, Any]:
        return {
            "epoch": self.epoch,
            "value": self.value,
            "weights": self.weights,
            "last_epoch": self.last_epoch,
        }

    def set_state(self, state: dict[str, Any]) -> None:
        self.epoch, self.value = state["epoch"], float(state["value"])
        self.weights = list(state["weights"]) if state["weights"] else []
        self.last_epoch = state.get("last_epoch")


def selector(cfg: Any, objective: str) -> BestEpochWeights | None:
    """The callback that keeps the selected epoch's weights, or None when the run is tested
    with its last weights (`trainer.test_weights=last`, `objective_mode=last`, or an objective
    that is a test metric, which no epoch can select)."""
    if TestWeights(cfg.trainer.test_weights) == TestWeights.last:
        return None
    if ObjectiveMode(cfg.objective_mode) == ObjectiveMode.last or objective.startswith("test_"):
        return None
    return BestEpochWeights(objective)


def use_selected_weights(model: keras.Model, chosen: BestEpochWeights | None) -> dict[str, Any]:
    """Put the selected epoch's weights into `model` (if they are not already its weights);
    return what `metrics.json` says about them: `tested_weights` and `tested_epoch`
    (counted from 1, as `objective_epoch`)."""
    if chosen is None or chosen.epoch is None or not chosen.weights:
        return {"tested_weights": "last"}
    if chosen.epoch != chosen.last_epoch:
        model.set_weights(chosen.weights)
        log.info(
            "testing and saving the weights of epoch %d (best %s=%.4g), not the last epoch's "
            "(trainer.test_weights=last keeps those)",
            chosen.epoch + 1,
            chosen.monitor,
            chosen.value,
        )
    return {"tested_weights": "best", "tested_epoch": chosen.epoch + 1}

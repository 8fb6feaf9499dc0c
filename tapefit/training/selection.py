"""The weights a run is tested and saved with: those of the epoch its objective selects, as
lightning-hydra-template tests `best_model_path` (`trainer.test_weights=best`), or the last."""

from __future__ import annotations

import logging
import math
from typing import Any

import keras
import numpy as np

from tapefit.config.schemas import EarlyStoppingConfig, ObjectiveMode, TestWeights
from tapefit.training.objective import Objective

log = logging.getLogger("tapefit")


class BestEpochWeights(keras.callbacks.Callback):
    """Keeps a copy of the weights of the epoch whose `monitor` value is the best so far (the
    first such epoch on ties, as `Objective.value_in` picks it), or, with no objective, of the
    last epoch (which `EarlyStopping(restore_best_weights=True)` would otherwise replace at
    the end). Its state rides in the resume checkpoints (`get_state`), so a resumed run still
    knows the best epoch before the stop."""

    def __init__(self, objective: Objective | None) -> None:
        super().__init__()
        self.objective = objective
        self.monitor = None if objective is None else objective.name
        self.epoch: int | None = None  # 0-based, as Keras counts epochs
        self.value = math.nan
        self.weights: list[np.ndarray] = []
        self.last_epoch: int | None = None

    def better(self, value: float) -> bool:
        """Whether `value` beats the best so far (a non-finite value never does)."""
        if self.monitor is None:
            return True
        if not math.isfinite(value):
            return False
        if self.epoch is None:
            return True
        return self.objective.better(value, self.value)

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


def selector(
    objective: Objective, test_weights: TestWeights, early_stopping: EarlyStoppingConfig
) -> BestEpochWeights | None:
    """The callback that keeps the weights the run is tested with: the objective's best
    epoch's, or the last epoch's (`trainer.test_weights=last`, `objective_mode=last`, or an
    objective that is a test metric, which no epoch can select). None when the model ends
    training with them anyway (last weights, no EarlyStopping restoring its own best).

    Example:
        >>> from tapefit.config.schemas import EarlyStoppingConfig
        >>> objective = Objective("val_loss", "min")
        >>> selector(objective, TestWeights.best, EarlyStoppingConfig()).monitor
        'val_loss'
    """
    last = (
        TestWeights(test_weights) == TestWeights.last
        or ObjectiveMode(objective.mode) == ObjectiveMode.last
        or objective.name.startswith("test_")
    )
    if not last:
        return BestEpochWeights(objective)
    restores = early_stopping.enabled and early_stopping.restore_best_weights
    return BestEpochWeights(None) if restores else None


def use_selected_weights(
    model: keras.Model, chosen: BestEpochWeights | None, first_epoch: int = 0
) -> dict[str, Any]:
    """Put the selected epoch's weights into `model`; return what `metrics.json` says about
    them: `tested_weights` and `tested_epoch` (counted from 1 within this run's history, as
    `objective_epoch`: a Hyperband round continuing after `first_epoch` epochs counts its own)."""
    if chosen is None or chosen.epoch is None or not chosen.weights:
        return {"tested_weights": "last"}
    model.set_weights(chosen.weights)  # also undoes an EarlyStopping's restore of its own best
    tested = {
        "tested_weights": "best" if chosen.monitor else "last",
        "tested_epoch": chosen.epoch + 1 - first_epoch,
    }
    if chosen.monitor and chosen.epoch != chosen.last_epoch:
        log.info(
            "testing and saving the weights of epoch %d (best %s=%.4g), not the last epoch's "
            "(trainer.test_weights=last keeps those)",
            chosen.epoch + 1,
            chosen.monitor,
            chosen.value,
        )
    return tested

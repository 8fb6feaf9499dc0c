"""The weights a run is tested and saved with: those of the epoch its objective selects, as
lightning-hydra-template tests `best_model_path` (`trainer.test_weights=best`), or the last."""

from __future__ import annotations

import logging
from typing import Any

import keras

from tapefit.callbacks.best_epoch import BestEpochWeights
from tapefit.config.schemas import EarlyStoppingConfig, ObjectiveMode, TestWeights
from tapefit.objective import Objective

log = logging.getLogger("tapefit")


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

"""Checkpoints and resume (Lightning's checkpoint connector): what a run restores from its
run directory's last checkpoint (or a warm start), and the checkpointer that writes new ones."""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import keras
import tensorflow as tf

from tapefit.config.snapshot import config_snapshot
from tapefit.training.callback_state import CarryCallbackStates
from tapefit.training.checkpoints import (
    EpochCheckpoint,
    RestoreMetrics,
    build_optimizers,
    restore_latest,
)
from tapefit.training.lifecycle import RESUME_DIR
from tapefit.training.objective import Objective
from tapefit.training.resume import check_same_config, fill_tensorboard, rewrite_csv
from tapefit.training.top_k import FOLDER, KeepBestCheckpoints
from tapefit.training.warm_start import init_from

log = logging.getLogger("tapefit")


@dataclass
class Resumption:
    """Where a run starts: epochs done, steps into the next one, the History so far, and the
    states of the metrics and callbacks at that point (all empty for a fresh run)."""

    done: int = 0
    steps_in: int = 0
    epochs: list[dict[str, float]] = field(default_factory=list)
    metric_states: Any = None
    callback_states: tuple[dict, dict] = ({}, {})


class CheckpointConnector:
    """The run directory's `resume/` folder: restore from it, write to it."""

    def __init__(self, cfg: Any, run_dir: Path) -> None:
        self.cfg, self.run_dir = cfg, run_dir
        self.folder = run_dir / RESUME_DIR

    def restore(
        self,
        model: keras.Model,
        strategy: tf.distribute.Strategy,
        warm_start: tuple[Path, int] | None = None,
        epoch_steps: int | None = None,
    ) -> Resumption:
        """Load `init_from`'s weights, then a warm start's (epochs it trained count as done),
        then, with `resume=true`, the last checkpoint: weights, optimizer, History, metric and
        callback states; the CSV and TensorBoard files are rewritten to the checkpointed
        epochs. `epoch_steps`: the steps of one Keras epoch, where known (`FitPlan`)."""
        state = Resumption()
        if self.cfg.get("init_from"):  # another run's weights, before any resume
            with strategy.scope():
                init_from(model, self.cfg.init_from, bool(self.cfg.get("init_from_strict", True)))
        if warm_start is not None:
            with strategy.scope():  # the optimizers' variables belong to the strategy
                build_optimizers(model)
                model.load_weights(warm_start[0])
            state.done = warm_start[1]
        if not self.cfg.resume:
            return state
        with strategy.scope():
            restored = restore_latest(self.folder, model, epoch_steps)
        if restored is None:
            log.warning(
                "resume=true but %s holds no checkpoint: starting from scratch", self.run_dir
            )
            return state
        check_same_config(restored["config"], config_snapshot(self.cfg), self.cfg.force_resume)
        state = Resumption(
            done=restored["epochs_done"],
            steps_in=restored["steps_in_epoch"],
            epochs=restored["history"],
            metric_states=restored["metric_states"],
            callback_states=(restored.get("callback_states", {}), restored["callback_arrays"]),
        )
        model.stop_training = restored.get("stop_training", False)
        log.info(
            "resuming %s after epoch %d and %d steps", self.run_dir, state.done, state.steps_in
        )
        callbacks = self.cfg.callbacks
        if callbacks.csv_logger.enabled:
            rewrite_csv(self.run_dir / callbacks.csv_logger.filename, state.epochs)
        if callbacks.tensorboard.enabled:
            fill_tensorboard(self.run_dir / "tensorboard", state.epochs)
        return state

    def checkpointer(self, state: Resumption) -> EpochCheckpoint:
        """The callback writing a checkpoint per epoch (and every N steps), continuing the
        History of `state`."""
        trainer = self.cfg.trainer
        checkpointer = EpochCheckpoint(
            self.folder,
            {"config": config_snapshot(self.cfg)},
            state.epochs,
            save=trainer.checkpoints,
            every_steps=trainer.checkpoint_every_steps,
        )
        checkpointer.skipped_steps = state.steps_in
        return checkpointer

    @staticmethod
    def restoring_callbacks(state: Resumption) -> list[keras.callbacks.Callback]:
        """Callbacks that put the checkpointed callback states back after `on_train_begin`
        reset them, and the metric sums of an interrupted epoch after Keras resets them
        (before the checkpointer, after the monitors)."""
        return [
            CarryCallbackStates(*state.callback_states),
            RestoreMetrics(state.metric_states if state.steps_in else None),
        ]

    def kept_models(self, objective: Objective) -> list[keras.callbacks.Callback]:
        """The callback keeping the best epochs' models (`checkpoint.save_top_k`), if asked."""
        keep = self.cfg.checkpoint
        if keep.save_top_k < 1:
            return []
        return [
            KeepBestCheckpoints(self.run_dir / FOLDER, objective, keep.save_top_k, keep.save_last)
        ]

    def discard(self) -> None:
        """Remove the checkpoints of a completed run: `model.keras` supersedes them."""
        import shutil

        shutil.rmtree(self.folder, ignore_errors=True)

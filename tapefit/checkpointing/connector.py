"""Checkpoints and resume (Lightning's checkpoint connector): what a run restores from its
run directory's last checkpoint (or a warm start), and the checkpointer that writes new ones.

Each part of a run's state, its save beside its restore:

- weights and optimizer: saved by `EpochCheckpoint` (`checkpoints.py`), restored by
  `restore_latest`;
- the History so far (and the CSV and TensorBoard logs): the checkpoint's marker, restored as
  `Resumption.epochs`, with `rewrite_csv` and `fill_tensorboard`;
- the metric sums of an interrupted epoch: the marker's `metric_states`, `RestoreMetrics`;
- the callbacks' states: `collect` (`callback_state.py`), `CarryCallbackStates` (`apply`);
- the config it ran with: `CheckpointPolicy.config`, compared by `check_same_config`;
- the best epochs' models: `kept_models` (`top_k.py`), read by `tapefit.evaluate ckpt=`;
- another run's weights: that run's `model.keras`, loaded by `init_from` or, in Hyperband's
  next round, a `WarmStart` (`warm_start.py`).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import keras
import tensorflow as tf

from tapefit.checkpointing.callback_state import CallbackStates, CarryCallbackStates
from tapefit.checkpointing.checkpoints import (
    EpochCheckpoint,
    RestoreMetrics,
    build_optimizers,
    restore_latest,
)
from tapefit.checkpointing.config_match import check_same_config
from tapefit.checkpointing.history_files import fill_tensorboard, rewrite_csv
from tapefit.checkpointing.top_k import FOLDER, KeepBestCheckpoints
from tapefit.checkpointing.warm_start import WarmStart, init_from
from tapefit.objective import Objective
from tapefit.training.run_status import RESUME_DIR

log = logging.getLogger("tapefit")


@dataclass
class Resumption:
    """Where a run starts: epochs done, steps into the next one, the History so far, and the
    states of the metrics and callbacks at that point (all empty for a fresh run)."""

    done: int = 0
    steps_in: int = 0
    epochs: list[dict[str, float]] = field(default_factory=list)
    metric_states: Any = None
    callback_states: CallbackStates = field(default_factory=CallbackStates)


@dataclass(frozen=True)
class CheckpointPolicy:
    """What a run restores and what it checkpoints, resolved once from the config
    (`tapefit.runner.spec.RunSpec`).

    Attributes:
        resume: `resume`: continue from the run directory's last checkpoint.
        force_resume: `force_resume`: resume even if the config differs.
        init_from: `init_from`: another run's weights to start from, or None.
        init_from_strict: `init_from_strict`: every layer must match.
        every_epoch: `trainer.checkpoints`: a resume checkpoint per epoch.
        every_steps: `trainer.checkpoint_every_steps`: also mid-epoch, every N steps.
        save_top_k: `checkpoint.save_top_k`: keep the K best epochs' models (0: none).
        save_last: `checkpoint.save_last`: with them, the last epoch's model.
        config: The run's `config_snapshot`, recorded in each checkpoint and compared on
            resume.
        csv_file: The CSV logger's file (relative to the run directory), None when off.
        tensorboard: Whether TensorBoard logs are written (a resume rewrites them).

    Example:
        >>> policy = CheckpointPolicy(resume=True, config={"seed": 0})
        >>> policy.every_epoch, policy.save_top_k
        (True, 0)
    """

    resume: bool = False
    force_resume: bool = False
    init_from: str | None = None
    init_from_strict: bool = True
    every_epoch: bool = True
    every_steps: int | None = None
    save_top_k: int = 0
    save_last: bool = True
    config: dict[str, Any] = field(default_factory=dict)
    csv_file: str | None = None
    tensorboard: bool = False


class CheckpointConnector:
    """The run directory's `resume/` folder: restore from it, write to it.

    Args:
        policy: What to restore and write.
        run_dir: The run directory.
    """

    def __init__(self, policy: CheckpointPolicy, run_dir: Path) -> None:
        self.policy, self.run_dir = policy, run_dir
        self.folder = run_dir / RESUME_DIR

    def restore(
        self,
        model: keras.Model,
        strategy: tf.distribute.Strategy,
        warm_start: WarmStart | None = None,
        epoch_steps: int | None = None,
    ) -> Resumption:
        """Load `init_from`'s weights, then a warm start's (epochs it trained count as done),
        then, with `resume=true`, the last checkpoint: weights, optimizer, History, metric and
        callback states; the CSV and TensorBoard files are rewritten to the checkpointed
        epochs. `epoch_steps`: the steps of one Keras epoch, where known (`FitPlan`)."""
        state, policy = Resumption(), self.policy
        if policy.init_from:  # another run's weights, before any resume
            with strategy.scope():
                init_from(model, policy.init_from, policy.init_from_strict)
        if warm_start is not None:
            with strategy.scope():  # the optimizers' variables belong to the strategy
                build_optimizers(model)
                model.load_weights(warm_start.model_file)
            state.done = warm_start.epochs_done
        if not policy.resume:
            return state
        with strategy.scope():
            restored = restore_latest(self.folder, model, epoch_steps)
        if restored is None:
            log.warning(
                "resume=true but %s holds no checkpoint: starting from scratch", self.run_dir
            )
            return state
        check_same_config(restored["config"], policy.config, policy.force_resume)
        state = Resumption(
            done=restored["epochs_done"],
            steps_in=restored["steps_in_epoch"],
            epochs=restored["history"],
            metric_states=restored["metric_states"],
            callback_states=CallbackStates(
                restored.get("callback_states", {}), restored["callback_arrays"]
            ),
        )
        model.stop_training = restored.get("stop_training", False)
        log.info(
            "resuming %s after epoch %d and %d steps", self.run_dir, state.done, state.steps_in
        )
        if policy.csv_file is not None:
            rewrite_csv(self.run_dir / policy.csv_file, state.epochs)
        if policy.tensorboard:
            fill_tensorboard(self.run_dir / "tensorboard", state.epochs)
        return state

    def checkpointer(self, state: Resumption) -> EpochCheckpoint:
        """The callback writing a checkpoint per epoch (and every N steps), continuing the
        History of `state`."""
        checkpointer = EpochCheckpoint(
            self.folder,
            {"config": self.policy.config},
            state.epochs,
            save=self.policy.every_epoch,
            every_steps=self.policy.every_steps,
        )
        checkpointer.skipped_steps = state.steps_in
        return checkpointer

    @staticmethod
    def restoring_callbacks(state: Resumption) -> list[keras.callbacks.Callback]:
        """Callbacks that put the checkpointed callback states back after `on_train_begin`
        reset them, and the metric sums of an interrupted epoch after Keras resets them
        (before the checkpointer, after the monitors)."""
        return [
            CarryCallbackStates(state.callback_states),
            RestoreMetrics(state.metric_states if state.steps_in else None),
        ]

    def kept_models(self, objective: Objective) -> list[keras.callbacks.Callback]:
        """The callback keeping the best epochs' models (`checkpoint.save_top_k`), if asked."""
        policy = self.policy
        if policy.save_top_k < 1:
            return []
        return [
            KeepBestCheckpoints(
                self.run_dir / FOLDER, objective, policy.save_top_k, policy.save_last
            )
        ]

    def discard(self) -> None:
        """Remove the checkpoints of a completed run: `model.keras` supersedes them."""
        import shutil

        shutil.rmtree(self.folder, ignore_errors=True)

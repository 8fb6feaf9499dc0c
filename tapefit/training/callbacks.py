"""Keras callbacks built from the `callbacks` config group, writing into the run directory."""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

import keras

from tapefit.config.schemas import MonitorMode
from tapefit.config.targets import instantiate
from tapefit.step.monitor import StepTelemetry
from tapefit.training.direction import resolve_direction
from tapefit.training.objective import Objective
from tapefit.training.tensorboard import StepTensorBoard

log = logging.getLogger("tapefit")

MONITORING = ("early_stopping", "model_checkpoint", "reduce_lr_on_plateau")
# Words in a metric's name that make higher better (sparse_categorical_accuracy, f1_score,
# mean_io_u, r2_score, val_spearman); Keras' mode="auto" guesses "min" for names it does not know.


class StepProgbar(keras.callbacks.ProgbarLogger):
    """Keras' progress bar, ending at N/N: with `steps_per_execution` > 1 Keras reports each
    execution's last step as if it were full, so an epoch of 39 steps at 8 per execution
    ends at `40/39`, and a stream of unknown length would keep that count as its size. The
    count is capped by the epoch's steps, or by the optimizer steps taken (and skipped) when
    the length is unknown. Taken as the run's progress bar, Keras adds no other."""

    def on_epoch_begin(self, epoch: int, logs: dict | None = None) -> None:
        self.steps_at_epoch_start = self.steps_taken()
        super().on_epoch_begin(epoch, logs)

    def steps_taken(self) -> int:
        """Steps run so far: the optimizer's own call count (each accumulated batch counts, as
        `iterations` does not), plus the steps `trainer.on_nonfinite=skip` skipped. Steps a
        loss scaler skips are not counted: under `mixed_float16` a stream's first epoch can
        end a few steps short."""
        optimizer = self.model.optimizer
        inner = getattr(optimizer, "inner_optimizer", optimizer)
        calls = getattr(inner, "_iterations", optimizer.iterations)
        state = getattr(self.model, "_step_state", None)
        skipped = int(state.skipped_steps.numpy()) if state is not None else 0
        return int(calls.numpy()) + skipped

    def on_train_batch_end(self, batch: int, logs: dict | None = None) -> None:
        done = batch + 1
        if self.target is not None:
            done = min(done, self.target)
        else:
            done = min(done, max(self.steps_taken() - self.steps_at_epoch_start, 1))
        super().on_train_batch_end(done - 1, logs)


class EpochLog(keras.callbacks.Callback):
    """One `logging` line per epoch (terminal and the run directory's tapefit.log)."""

    def on_epoch_end(self, epoch: int, logs: dict | None = None) -> None:
        shown = ", ".join(f"{k}={v:.4g}" for k, v in sorted((logs or {}).items()))
        log.info("epoch %d: %s", epoch + 1, shown)


def monitor_mode(monitor: str, mode: str, key: str, objective: Objective | None) -> str:
    """A callback's `mode`: as configured, or for `auto` the objective's direction when it
    watches the objective, else the known direction of `monitor` (refused when unknown)."""
    if MonitorMode(mode) == MonitorMode.auto and objective and monitor == objective.name:
        return objective.direction
    return resolve_direction(monitor, mode, key)


def build_callbacks(
    cfg: Any,
    run_dir: Path,
    before_writers: list[keras.callbacks.Callback] | None = None,
    append: bool = False,
    objective: Objective | None = None,
) -> list[keras.callbacks.Callback]:
    """The enabled callbacks of `cfg` (the `callbacks` group), with files under `run_dir`:
    those that change the logs or the run (early stopping, learning-rate plateau, checkpoints)
    first, then `extra` (callbacks named by `_target_`), then `before_writers`, then those that
    write the logs (TensorBoard, telemetry, CSV; the CSV is appended to when `append`).
    `objective` gives the `auto` mode of a callback watching it.
    Monitored names are checked before training (`validation.check_config`): Keras would only
    warn and never act."""
    callbacks: list[keras.callbacks.Callback] = []
    writers: list[keras.callbacks.Callback] = []
    if cfg.tensorboard.enabled:
        writers.append(
            StepTensorBoard(
                log_dir=str(run_dir / "tensorboard"),
                update_freq=cfg.tensorboard.update_freq.value,
                histogram_freq=cfg.tensorboard.histogram_freq,
                write_graph=cfg.tensorboard.write_graph,
                profile_batch=cfg.tensorboard.profile_batch,
            )
        )
    if cfg.early_stopping.enabled:
        stop = cfg.early_stopping
        callbacks.append(
            keras.callbacks.EarlyStopping(
                monitor=stop.monitor,
                mode=monitor_mode(
                    stop.monitor, stop.mode, "callbacks.early_stopping.mode", objective
                ),
                patience=stop.patience,
                min_delta=stop.min_delta,
                restore_best_weights=stop.restore_best_weights,
            )
        )
    if cfg.model_checkpoint.enabled:
        checkpoint = cfg.model_checkpoint
        path = run_dir / checkpoint.filename
        path.parent.mkdir(parents=True, exist_ok=True)
        callbacks.append(
            keras.callbacks.ModelCheckpoint(
                filepath=str(path),
                monitor=checkpoint.monitor,
                mode=monitor_mode(
                    checkpoint.monitor,
                    checkpoint.mode,
                    "callbacks.model_checkpoint.mode",
                    objective,
                ),
                save_best_only=checkpoint.save_best_only,
                save_weights_only=str(path).endswith(".weights.h5"),
            )
        )
    if cfg.reduce_lr_on_plateau.enabled:
        plateau = cfg.reduce_lr_on_plateau
        callbacks.append(
            keras.callbacks.ReduceLROnPlateau(
                monitor=plateau.monitor,
                mode=monitor_mode(
                    plateau.monitor,
                    plateau.mode,
                    "callbacks.reduce_lr_on_plateau.mode",
                    objective,
                ),
                factor=plateau.factor,
                patience=plateau.patience,
                min_delta=plateau.min_delta,
                min_lr=plateau.min_lr,
            )
        )
    callbacks += [instantiate(node, f"callbacks.extra.{name}") for name, node in cfg.extra.items()]
    callbacks += list(before_writers or [])
    if cfg.step_telemetry.enabled:
        writers.append(
            StepTelemetry(
                run_dir / "tensorboard",
                every_n_steps=cfg.step_telemetry.every_n_steps,
                csv_path=run_dir / "steps.csv",
            )
        )
    if cfg.csv_logger.enabled:
        path = str(run_dir / cfg.csv_logger.filename)
        writers.append(keras.callbacks.CSVLogger(path, append=append))
    return callbacks + writers

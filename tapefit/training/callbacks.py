"""Keras callbacks built from the `callbacks` config group, writing into the run directory."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import keras

from tapefit.config.schemas import MonitorMode
from tapefit.config.targets import instantiate
from tapefit.step.monitor import StepTelemetry

MONITORING = ("early_stopping", "model_checkpoint", "reduce_lr_on_plateau")
# Metrics where higher is better; Keras' mode="auto" guesses "min" for names it does not know.
HIGHER_IS_BETTER = ("accuracy", "acc", "auc", "pearson", "spearman", "best_accuracy")


def resolve_mode(monitor: str, mode: str) -> str:
    """`mode` as configured, or `max`/`min` from the metric's name when it is `auto`."""
    mode = MonitorMode(mode).value
    if mode != MonitorMode.auto:
        return mode
    name = monitor.removeprefix("val_")
    return "max" if name in HIGHER_IS_BETTER else "min"


def build_callbacks(
    cfg: Any,
    run_dir: Path,
    before_writers: list[keras.callbacks.Callback] | None = None,
    append: bool = False,
) -> list[keras.callbacks.Callback]:
    """The enabled callbacks of `cfg` (the `callbacks` group), with files under `run_dir`:
    those that change the logs or the run (early stopping, learning-rate plateau, checkpoints)
    first, then `extra` (callbacks named by `_target_`), then `before_writers`, then those that
    write the logs (TensorBoard, telemetry, CSV; the CSV is appended to when `append`).
    Monitored names are checked before training (`validation.check_config`): Keras would only
    warn and never act."""
    callbacks: list[keras.callbacks.Callback] = []
    writers: list[keras.callbacks.Callback] = []
    if cfg.tensorboard.enabled:
        writers.append(
            keras.callbacks.TensorBoard(
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
                mode=resolve_mode(stop.monitor, stop.mode),
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
                mode=resolve_mode(checkpoint.monitor, checkpoint.mode),
                save_best_only=checkpoint.save_best_only,
                save_weights_only=str(path).endswith(".weights.h5"),
            )
        )
    if cfg.reduce_lr_on_plateau.enabled:
        plateau = cfg.reduce_lr_on_plateau
        callbacks.append(
            keras.callbacks.ReduceLROnPlateau(
                monitor=plateau.monitor,
                mode=resolve_mode(plateau.monitor, plateau.mode),
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

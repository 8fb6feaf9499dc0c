"""Keras callbacks built from the `callbacks` config group, writing into the run directory."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import keras

from tapefit.config import MonitorMode
from tapefit.errors import TapefitError
from tapefit.step_monitor import StepTelemetry

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


class MonitorCheck(keras.callbacks.Callback):
    """Stops at the end of the first epoch if a callback monitors a metric that does not exist.

    Keras only warns and then silently never stops, saves or lowers the learning rate.
    """

    def __init__(self, monitors: dict[str, str]) -> None:
        super().__init__()
        self.monitors = monitors

    def on_epoch_end(self, epoch: int, logs: dict | None = None) -> None:
        available = sorted(logs or {})
        for option, monitor in self.monitors.items():
            if monitor not in available:
                raise TapefitError(
                    f"callbacks.{option}.monitor={monitor} is not a logged metric: choose one of "
                    f"{', '.join(available)}"
                )
        self.monitors = {}


def build_callbacks(cfg: Any, run_dir: Path) -> list[keras.callbacks.Callback]:
    """The enabled callbacks of `cfg` (the `callbacks` group), with files under `run_dir`."""
    monitors = {name: cfg[name].monitor for name in MONITORING if cfg[name].enabled}
    callbacks: list[keras.callbacks.Callback] = [MonitorCheck(monitors)] if monitors else []
    if cfg.tensorboard.enabled:
        callbacks.append(
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
                min_lr=plateau.min_lr,
            )
        )
    if cfg.step_telemetry.enabled:
        callbacks.append(
            StepTelemetry(
                run_dir / "tensorboard",
                every_n_steps=cfg.step_telemetry.every_n_steps,
                csv_path=run_dir / "steps.csv",
            )
        )
    if cfg.csv_logger.enabled:
        callbacks.append(keras.callbacks.CSVLogger(str(run_dir / cfg.csv_logger.filename)))
    return callbacks

"""Keras callbacks built from the `callbacks` config group (Keras', tapefit's or yours, named by
`_target_`), writing into the run directory."""

from __future__ import annotations

import logging
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import keras

from tapefit.config.schemas import MonitorMode
from tapefit.config.target_spec import TargetSpec
from tapefit.config.targets import accepted_arguments, locate
from tapefit.objective import Objective, resolve_direction

log = logging.getLogger("tapefit")

MONITORING = ("early_stopping", "model_checkpoint", "reduce_lr_on_plateau")


def monitor_mode(monitor: str, mode: str, key: str, objective: Objective | None) -> str:
    """A callback's `mode`: as configured, or for `auto` the objective's direction when it
    watches the objective, else the known direction of `monitor` (refused when unknown)."""
    if MonitorMode(mode) == MonitorMode.auto and objective and monitor == objective.name:
        return objective.direction
    return resolve_direction(monitor, mode, key)


# The configured callbacks by role: those that change the logs or the run come first, those
# that write the logs last (after the checkpointer, which must see an epoch before them).
ACTING = ("early_stopping", "model_checkpoint", "reduce_lr_on_plateau")
WRITERS = ("tensorboard", "step_telemetry", "csv_logger")
OWNED_KEYS = ("enabled", "histograms")  # tapefit's switches, not constructor arguments
RENAMED = {"filename": {"keras.callbacks.ModelCheckpoint": "filepath"}}
PATH_ARGUMENTS = ("filename", "filepath")  # relative to the run directory
SUPPLIED = ("log_dir", "csv_path", "append", "save_weights_only")  # tapefit passes these


@dataclass(frozen=True)
class CallbackSettings:
    """The `callbacks` group as typed objects, resolved once at the run's edge
    (`tapefit.runner.spec`): each enabled callback's class and arguments, by role.

    Attributes:
        acting: The enabled callbacks of `ACTING` (early stopping, checkpoints, plateau).
        extra: `callbacks.extra`, in their order.
        writers: The enabled callbacks of `WRITERS` (TensorBoard, telemetry, CSV).

    Example:
        >>> stop = TargetSpec("callbacks.early_stopping", "keras.callbacks.EarlyStopping",
        ...                   {"monitor": "loss", "mode": "auto", "patience": 1})
        >>> [type(c).__name__ for c in build_callbacks(CallbackSettings(acting=(stop,)), Path("."))]
        ['EarlyStopping']
    """

    acting: tuple[TargetSpec, ...] = ()
    extra: tuple[TargetSpec, ...] = ()
    writers: tuple[TargetSpec, ...] = ()

    def enabled(self, name: str) -> TargetSpec | None:
        """`callbacks.<name>` (one of `ACTING` or `WRITERS`) when it is enabled, else None."""
        key = f"callbacks.{name}"
        return next((spec for spec in (*self.acting, *self.writers) if spec.key == key), None)


def callback_arguments(spec: TargetSpec, run_dir: Path | None, supplied: dict[str, Any]) -> dict:
    """The constructor arguments of a configured callback: its arguments without tapefit's own
    keys, `filename` under the name its class takes, paths inside `run_dir` (when given), and
    the `supplied` values its signature takes and the config does not set (`log_dir`, ...)."""
    target = spec.target
    arguments = {}
    for key, value in spec.arguments.items():
        if key in OWNED_KEYS:
            continue
        name = RENAMED.get(key, {}).get(target, key)
        if name in PATH_ARGUMENTS and run_dir is not None:
            value = str(run_dir / value)
        arguments[name] = value
    accepted, takes_any = accepted_arguments(locate(target, "_target_"))
    for name, value in supplied.items():
        if name not in arguments and (name in accepted or takes_any):
            arguments[name] = value
    return arguments


def build_callback(
    spec: TargetSpec, run_dir: Path, objective: Objective | None, append: bool
) -> keras.callbacks.Callback:
    """The callback `spec` configures: its `_target_` (a Keras class, tapefit's, or yours)
    with its arguments; a `mode: auto` next to a `monitor` becomes the direction tapefit
    knows (the objective's, or the metric's), files land in the run directory."""
    supplied: dict[str, Any] = {
        "log_dir": str(run_dir / "tensorboard"),
        "csv_path": run_dir / "steps.csv",
        "append": append,
    }
    arguments = callback_arguments(spec, run_dir, supplied)
    if "filepath" in arguments:
        Path(arguments["filepath"]).parent.mkdir(parents=True, exist_ok=True)
        arguments.setdefault("save_weights_only", arguments["filepath"].endswith(".weights.h5"))
    if "monitor" in arguments and "mode" in arguments:
        arguments["mode"] = monitor_mode(
            arguments["monitor"], arguments["mode"], f"{spec.key}.mode", objective
        )
    return TargetSpec(spec.key, spec.target, arguments, spec.checked).build()


def build_callbacks(
    settings: CallbackSettings,
    run_dir: Path,
    before_writers: list[keras.callbacks.Callback] | None = None,
    append: bool = False,
    objective: Objective | None = None,
) -> list[keras.callbacks.Callback]:
    """The callbacks of `settings`, with files under `run_dir`: those that change the logs or
    the run (early stopping, checkpoints, learning-rate plateau) first, then `extra` (more
    callbacks named by `_target_`), then the step telemetry, then `before_writers`, then those
    that write the epoch logs (TensorBoard, CSV; the CSV is appended to when `append`).
    `objective` gives the `auto` mode of a callback watching it. Monitored names are checked
    before training (`validation.check_logged_names`): Keras would only warn and never act.

    The step telemetry writes a step's row before `before_writers` checkpoint that step: a
    run killed between the two resumes from the checkpoint before, which drops the row and
    writes it again; killed after both, its resume starts past the row it keeps."""

    def built(specs: tuple[TargetSpec, ...]) -> list[keras.callbacks.Callback]:
        return [build_callback(spec, run_dir, objective, append) for spec in specs]

    extra = [spec.build() for spec in settings.extra]
    steps = [spec for spec in settings.writers if spec.key == "callbacks.step_telemetry"]
    epochs = tuple(spec for spec in settings.writers if spec not in steps)
    return [
        *built(settings.acting),
        *extra,
        *built(tuple(steps)),
        *(before_writers or []),
        *built(epochs),
    ]

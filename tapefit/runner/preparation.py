"""The phases a run (and a sweep's trial, and a benchmark) is made of, each a function of the
config: `prepare` the process, `build_data`, shard it across workers, `build_model`."""

from __future__ import annotations

import dataclasses
import logging
import math
from dataclasses import dataclass
from typing import Any

import keras
import tensorflow as tf

from tapefit.config.schemas import TrainerConfig
from tapefit.config.targets import instantiate
from tapefit.runner.data_from_config import load_data
from tapefit.runner.model_from_config import build_model_from_config, own_callbacks
from tapefit.runner.spec import RunSpec
from tapefit.runner.validation import check_logged_names
from tapefit.training.build_from_data import build_before_training, build_step_variables
from tapefit.training.compiling import CompileSettings, compile_model
from tapefit.training.export import ExportEndpoint, check_exportable
from tapefit.training.fitting import steps_of
from tapefit.training.run_files import check_saveable
from tapefit.training.runtime import (
    make_strategy,
    seed_everything,
    set_precision,
    shard_options,
    worker_position,
)

log = logging.getLogger("tapefit")


def prepare(seed: int, trainer: TrainerConfig) -> tf.distribute.Strategy:
    """Reset Keras' global state, seed everything (`seed`), set the dtype policy; return the
    strategy (`trainer.precision`, `trainer.strategy`, `trainer.devices`).

    Run it before every model that is built in the same process (sweeps, tuner trials):
    `clear_session` resets the dtype policy and the seed, so both are set after it.
    """
    keras.backend.clear_session()
    seed_everything(seed, trainer.deterministic)
    set_precision(trainer.precision)
    return make_strategy(trainer.strategy, trainer.devices)


def build_data(cfg: Any) -> Any:
    """The data of a composed config, loaded from Python (the run itself loads it through its
    `load_data` hook): what the loader `cfg.data._target_` returns, as pipelines, after the
    data node's checks.

    Example:
        >>> import tapefit
        >>> build_data(tapefit.compose(["data.train_limit=64"])).sizes["train"]
        64
    """
    return load_data(cfg.data, cfg.seed)


def sharded(data: Any, policy: str, strategy: tf.distribute.Strategy) -> Any:
    """`data` whose splits are divided among the workers by `policy` (trainer.shard_policy).
    `file`: this worker's training stream reads only its own files (no further split), and
    the held-out splits are split by element."""
    options = {name: shard_options(policy) for name in ("train", "val", "test")}
    if policy == "file":
        workers, index = worker_position(strategy)
        data = data.sharded_by_file(workers, index)
        log.info("this worker reads %d training files: %s", len(data.train_files), data.train_files)
        options = {"train": shard_options("off"), "val": shard_options("data")}
        options["test"] = options["val"]
    return dataclasses.replace(
        data,
        **{
            name: None if getattr(data, name) is None else getattr(data, name).with_options(option)
            for name, option in options.items()
        },
    )


@dataclass(frozen=True)
class BuiltModel:
    """A run's model, built, compiled and checked, with its own callbacks.

    Attributes:
        model: The compiled TapeModel.
        own_callbacks: Its `training_callbacks(data)`, asked once: the checks used them, the
            callback order places them.
        endpoints: What the export serves (`check_exportable`, which checked them against
            `trainer.export_formats` before training); None when the run exports nothing.
    """

    model: keras.Model
    own_callbacks: list[keras.callbacks.Callback]
    endpoints: list[ExportEndpoint] | None = None


def build_model(spec: RunSpec, data: Any, strategy: tf.distribute.Strategy) -> keras.Model:
    """Build the run's TapeModel (`spec`: `RunSpec.of` a checked config) and compile it,
    inside `strategy`'s scope; it is built from the data's element spec and checked before
    training."""
    return build_checked_model(spec, data, strategy).model


def build_checked_model(spec: RunSpec, data: Any, strategy: tf.distribute.Strategy) -> BuiltModel:
    """`build_model`, keeping the model's own callbacks for the run's callback order."""
    trainer = spec.trainer
    with strategy.scope():
        model = build_model_from_config(
            spec.model, data, spec.model_class, spec.data_target, spec.checkpoint.init_from
        )
        settings = whole_executions(replica_safe(spec.compile, strategy), trainer)
        compiled = compile_model(model, settings, steps_of(data.train, trainer.steps_per_epoch))
        build_before_training(model, data.train, f"model._target_={spec.model.target}")
        build_step_variables(model, data.train, f"model._target_={spec.model.target}")
    if trainer.save_model:
        check_saveable(model)  # refused now, not after training
    endpoints = None
    if trainer.export:  # a format the model cannot go through: refused now too
        endpoints = check_exportable(model, list(trainer.export_formats))
    own = own_callbacks(model, data)
    metrics = compiled.get("metrics", [])
    check_logged_names(spec.callbacks, trainer, model, data, spec.objective_name, metrics, own)
    return BuiltModel(model, own, endpoints)


def replica_safe(settings: CompileSettings, strategy: tf.distribute.Strategy) -> CompileSettings:
    """The compile settings, with one step per execution when several replicas train: Keras 3
    fails on a step that syncs replicas inside its multi-step loop (keras-team/keras#19246),
    so a config written for one device (the default experiment's 8) runs, and says so.

    Example:
        >>> from tapefit.training.compiling import CompileSettings
        >>> replica_safe(CompileSettings(steps_per_execution=8), tf.distribute.get_strategy())
        ... # doctest: +ELLIPSIS
        CompileSettings(...steps_per_execution=8...)
    """
    replicas = strategy.num_replicas_in_sync
    if replicas == 1 or settings.steps_per_execution == 1:
        return settings
    log.warning(
        "trainer.steps_per_execution=%d runs as 1 over %d replicas: Keras 3 cannot sync "
        "replicas inside its multi-step loop (keras-team/keras#19246)",
        settings.steps_per_execution,
        replicas,
    )
    return dataclasses.replace(settings, steps_per_execution=1)


def whole_executions(settings: CompileSettings, trainer: TrainerConfig) -> CompileSettings:
    """The compile settings, with as many steps per execution as divide the run's counted
    lengths (`trainer.steps_per_epoch`, `trainer.validation_steps`,
    `trainer.val_check_interval`). Keras runs whole executions: with 8 steps an execution
    and `steps_per_epoch=2` it trains 8 steps an epoch, not 2 (and validates 8 batches for
    `validation_steps=1`). So a count that 8 does not divide runs with fewer steps an
    execution (their greatest common divisor), and says so.

    Example:
        >>> from tapefit.training.compiling import CompileSettings
        >>> whole_executions(
        ...     CompileSettings(steps_per_execution=8), TrainerConfig(steps_per_epoch=12)
        ... ).steps_per_execution
        4
    """
    counted = {
        "trainer.steps_per_epoch": trainer.steps_per_epoch,
        "trainer.validation_steps": trainer.validation_steps,
        "trainer.val_check_interval": trainer.val_check_interval,
    }
    per_execution = settings.steps_per_execution
    uneven = {key: value for key, value in counted.items() if value and value % per_execution}
    if not uneven:
        return settings
    steps = math.gcd(per_execution, *uneven.values())
    log.warning(
        "trainer.steps_per_execution=%d runs as %d: Keras runs whole executions, so %s "
        "would run past %s (not a multiple of %d); give counts %d divides to keep %d",
        per_execution,
        steps,
        " and ".join(f"{key}={value}" for key, value in uneven.items()),
        "its count" if len(uneven) == 1 else "their counts",
        per_execution,
        per_execution,
        per_execution,
    )
    return dataclasses.replace(settings, steps_per_execution=steps)


def build_logger(node: Any) -> Any:
    """The experiment tracker the `logger` node names by `_target_` (checked, then built).

    Args:
        node: The `logger` node, a `_target_` node (`logger=mlflow`).

    Returns:
        The tracker: an object with `start`, `callback` and `end`
        (`tapefit.training.tracking.MLflowLogger`).

    Raises:
        TapefitError: the node names something that cannot be built with its keys.
    """
    return instantiate(node, "logger")

"""Checks of a composed config that Hydra's schemas cannot make (ranges, paths, names that
will be logged), run before anything is built so a bad value costs one line, not a traceback."""

from __future__ import annotations

import dataclasses
import difflib
import json
import os
from pathlib import PurePath
from typing import Any

from omegaconf import DictConfig, OmegaConf

from tapefit.callbacks.configured import (
    ACTING,
    MONITORING,
    SUPPLIED,
    WRITERS,
    CallbackSettings,
    callback_arguments,
)
from tapefit.config.schemas import DebugConfig, TrainerConfig
from tapefit.config.target_spec import TargetSpec
from tapefit.config.targets import checked_target, has_target
from tapefit.config.typed import typed
from tapefit.errors import TapefitError
from tapefit.objective import check_objective
from tapefit.runner.data_from_config import check_data
from tapefit.runner.model_from_config import check_model, logged_metrics
from tapefit.runner.optimizer_checks import check_optimizers, check_scheduler
from tapefit.step.step_guards import OnNonFinite
from tapefit.training.debugging import check_debug
from tapefit.training.runtime import cluster_source, device_names


def _unknown_keys(node: Any, prefix: str) -> None:
    """`+group.key=...` adds keys Hydra's schema check lets through: refuse them by name."""
    if not isinstance(node, DictConfig):
        return
    schema = OmegaConf.get_type(node)
    if dataclasses.is_dataclass(schema):
        known = {field.name for field in dataclasses.fields(schema)}
        for key in node:
            if key not in known:
                close = difflib.get_close_matches(str(key), known, n=1)
                hint = f" (did you mean {prefix}{close[0]}?)" if close else ""
                raise TapefitError(
                    f"{prefix}{key} is not a config key{hint}: remove it; "
                    f"{prefix.rstrip('.') or 'the root'} has {', '.join(sorted(known))}"
                )
    for key in node:
        if key != "hydra":
            _unknown_keys(node._get_node(key), f"{prefix}{key}.")


def at_least(value: Any, minimum: float, key: str, allow_null: bool = False) -> None:
    """A one-line error unless `value >= minimum` (or null where allowed)."""
    if value is None and allow_null:
        return
    if value is None or value < minimum:
        null = " or null" if allow_null else ""
        raise TapefitError(f"{key}={value} must be at least {minimum}{null}")


def inside_run_dir(name: str, key: str) -> None:
    """Files that callbacks write must stay inside the run directory."""
    path = PurePath(name)
    if path.is_absolute() or ".." in path.parts or not path.parts:
        raise TapefitError(
            f"{key}={name} would be written outside the run directory: give a relative path "
            "without '..'"
        )


def check_tf_config() -> None:
    """`TF_CONFIG` for multi-worker training must be JSON with a cluster and this task."""
    raw = os.environ.get("TF_CONFIG")
    if raw is None:
        if cluster_source() == "slurm":
            return
        raise TapefitError(
            "trainer.strategy=multi_worker needs the TF_CONFIG environment variable (JSON with "
            "'cluster' and 'task') on every worker, or a SLURM job of several tasks: start "
            "the workers with python -m tapefit.launch --workers N"
        )
    try:
        parsed = json.loads(raw)
        assert isinstance(parsed["cluster"], dict) and parsed["cluster"]
        task = parsed["task"]
        assert task["type"] in parsed["cluster"] and int(task["index"]) >= 0
    except (ValueError, KeyError, TypeError, AssertionError):
        raise TapefitError(
            'TF_CONFIG is malformed: it must be JSON like {"cluster": {"worker": '
            '["host:port", ...]}, "task": {"type": "worker", "index": 0}}'
        ) from None


def check_distribution(trainer: Any, streamed: bool = False) -> None:
    """Strategy, devices and sharding that can run together, and TF_CONFIG where it matters."""
    devices = device_names(trainer.devices)
    strategy = str(getattr(trainer.strategy, "value", trainer.strategy))
    if devices and strategy not in ("one_device", "mirrored", "auto"):
        raise TapefitError(
            f"trainer.devices applies to trainer.strategy=one_device, mirrored or auto, not "
            f"{strategy}: remove trainer.devices (multi_worker uses every local GPU; limit them "
            "with CUDA_VISIBLE_DEVICES)"
        )
    if strategy == "one_device" and len(devices) > 1:
        raise TapefitError(
            f"trainer.strategy=one_device takes one device, got {len(devices)}: use "
            "trainer.strategy=mirrored for several"
        )
    if getattr(trainer.shard_policy, "value", trainer.shard_policy) == "file" and not streamed:
        raise TapefitError(
            "trainer.shard_policy=file gives each worker its own training files: it needs data "
            "read from files as a stream (data=pairs_file data.stream=true); use data or auto"
        )
    if strategy == "multi_worker":
        check_tf_config()
        if trainer.steps_per_execution > 1:
            raise TapefitError(
                f"trainer.steps_per_execution={trainer.steps_per_execution} cannot run under "
                "trainer.strategy=multi_worker (Keras 3 fails on a multi-worker step inside its "
                "multi-step loop): set trainer.steps_per_execution=1"
            )
    elif len(tf_config_tasks()) > 1:
        raise TapefitError(
            f"TF_CONFIG describes a cluster of {len(tf_config_tasks())} tasks but "
            f"trainer.strategy={strategy}: every task would train alone and write the same "
            "run directory; set trainer.strategy=multi_worker or unset TF_CONFIG"
        )


def tf_config_tasks() -> list[str]:
    """Every task address TF_CONFIG's cluster lists (none without a readable TF_CONFIG)."""
    try:
        cluster = json.loads(os.environ.get("TF_CONFIG", "{}")).get("cluster", {})
        return [address for addresses in cluster.values() for address in addresses]
    except (ValueError, AttributeError, TypeError):
        return []


def expected_logs(
    settings: CallbackSettings,
    trainer: TrainerConfig,
    model: Any,
    data: Any,
    metrics: list[Any],
    own: list[Any],
) -> set[str]:
    """Every key the epoch logs of this run will hold, known once the model is built and
    compiled with `metrics`: what its step logs (with `val_` when `data` has a validation
    split), what its own callbacks (`own`, its `training_callbacks`) add, the learning rate
    and skipped steps when they are logged (`settings`: the configured callbacks)."""
    names = set(logged_metrics(model, metrics))
    if OnNonFinite(trainer.on_nonfinite) == OnNonFinite.skip:
        names.add("skipped_steps")
    logged = set(names)
    if data.val is not None:
        logged |= {f"val_{name}" for name in names if name != "skipped_steps"}
    for callback in own:
        logged |= set(getattr(callback, "logged_names", []))
    if settings.enabled("reduce_lr_on_plateau") is not None:
        logged.add("learning_rate")
    return logged


def check_profile_batch(value: Any) -> None:
    """`callbacks.tensorboard.profile_batch`: a batch >= 0 (0: none) or "start,stop"."""
    key = "callbacks.tensorboard.profile_batch"
    if isinstance(value, int) and not isinstance(value, bool):
        at_least(value, 0, key)
        return
    parts = str(value).split(",")
    if len(parts) != 2 or not all(p.strip().isdigit() and int(p) >= 1 for p in parts):
        raise TapefitError(
            f"{key}={value} must be a batch (0: none) or 'start,stop' batches from 1, e.g. '3,8'"
        )
    if int(parts[0]) > int(parts[1]):
        raise TapefitError(f"{key}={value}: the start batch comes after the stop batch")


def check_config(cfg: Any) -> Any:
    """Every check a composed config must pass before a run starts.

    Returns:
        The class (or function) `model._target_` names, located by the check: the run takes
        it from here (`RunSpec.of`) rather than locating it again.
    """
    _unknown_keys(cfg, "")
    trainer = cfg.trainer
    at_least(cfg.seed, 0, "seed")
    at_least(trainer.epochs, 1, "trainer.epochs")
    at_least(trainer.steps_per_epoch, 1, "trainer.steps_per_epoch", allow_null=True)
    at_least(trainer.validation_steps, 1, "trainer.validation_steps", allow_null=True)
    at_least(trainer.steps_per_execution, 1, "trainer.steps_per_execution")
    at_least(trainer.checkpoint_every_steps, 1, "trainer.checkpoint_every_steps", allow_null=True)
    if "batch_size" in cfg.data:
        at_least(cfg.data.batch_size, 1, "data.batch_size")
    at_least(
        cfg.callbacks.step_telemetry.every_n_steps, 1, "callbacks.step_telemetry.every_n_steps"
    )
    check_optimizers(cfg)
    check_scheduler(cfg)
    at_least(trainer.val_check_interval, 1, "trainer.val_check_interval", allow_null=True)
    check_profile_batch(cfg.callbacks.tensorboard.profile_batch)
    check_debug(typed(DebugConfig, cfg.get("debug")))
    if not 0.0 < cfg.callbacks.reduce_lr_on_plateau.factor < 1.0:
        raise TapefitError(
            f"callbacks.reduce_lr_on_plateau.factor={cfg.callbacks.reduce_lr_on_plateau.factor}"
            " must lie in (0, 1): it multiplies the learning rate on a plateau"
        )
    for key in ("csv_logger", "model_checkpoint"):
        inside_run_dir(cfg.callbacks[key].filename, f"callbacks.{key}.filename")
    for name in (*ACTING, *WRITERS):
        node = cfg.callbacks[name]
        if node.enabled:
            arguments = callback_arguments(TargetSpec.of(node, f"callbacks.{name}"), None, {})
            node_arguments = {"_target_": node._target_, **arguments}
            checked_target(node_arguments, f"callbacks.{name}", supplied=SUPPLIED)
    for name, node in cfg.callbacks.extra.items():
        if not has_target(node):
            raise TapefitError(
                f"callbacks.extra.{name} needs _target_: the Keras callback class to build"
            )
        checked_target(node, f"callbacks.extra.{name}")
    check_distribution(trainer, streamed=bool(cfg.data.get("stream", False)))
    located = check_model(cfg.model, cfg.data)
    check_data(cfg.data)
    return located


def check_logged_names(
    settings: CallbackSettings,
    trainer: TrainerConfig,
    model: Any,
    data: Any,
    objective: str,
    metrics: list[Any],
    own: list[Any],
) -> None:
    """Callback monitors (`settings`: the configured callbacks) and the run's `objective` must
    be names the run logs: checked once the model is built and compiled with `metrics`, still
    before training."""
    logged = expected_logs(settings, trainer, model, data, metrics, own)
    for option in MONITORING:
        callback = settings.enabled(option)
        monitor = None if callback is None else callback.arguments.get("monitor")
        if callback is not None and monitor not in logged:
            raise TapefitError(
                f"callbacks.{option}.monitor={monitor} is not a logged metric: choose one of "
                f"{', '.join(sorted(logged))}"
            )
    check_logged_objective(objective, logged)


def check_logged_objective(name: str, logged: set[str]) -> None:
    """The objective `name` must be a metric the run logs, or (named explicitly) a test
    metric `evaluate` reports."""
    per_epoch_only = {"learning_rate", "skipped_steps"}  # not something evaluate() reports
    tests = {f"test_{n.removeprefix('val_')}" for n in logged if n not in per_epoch_only}
    check_objective(name, logged, tests)

"""`Model.compile`'s arguments from config: the optimizer (or several, by name), the loss and
metrics of the `compile` section on top of the model's own, and the tape step's policies."""

from __future__ import annotations

from typing import Any

import keras
from omegaconf import DictConfig

from tapefit.config.targets import checked_target, has_target, instantiate
from tapefit.errors import TapefitError
from tapefit.training.optimizers import build_optimizer
from tapefit.training.runtime import jit_compile_argument


def step_policies(cfg: Any) -> dict[str, Any]:
    """TapeModel.compile's step options from `cfg.trainer` and `cfg.callbacks.step_telemetry`."""
    telemetry = cfg.callbacks.step_telemetry
    return {
        "on_nonfinite": cfg.trainer.on_nonfinite,
        "on_missing_gradients": cfg.trainer.on_missing_gradients,
        "allow_missing_gradients": list(cfg.trainer.allow_missing_gradients),
        "gradient_telemetry": (
            "off" if not telemetry.enabled else "histograms" if telemetry.histograms else "norm"
        ),
    }


def configured_optimizer(cfg: Any, steps_per_epoch: int | None = None) -> Any:
    """`cfg.optimizer`, or `{name: optimizer}` for every entry of `cfg.optimizers`, each
    with the `scheduler` group's schedule over its learning rate (`steps_per_epoch`: the
    training split's batches, None for an endless stream)."""
    accumulate = cfg.trainer.gradient_accumulation_steps
    schedule = learning_rate_schedule(cfg, steps_per_epoch)
    if cfg.optimizers:
        return {
            name: build_optimizer(options, accumulate, f"optimizers.{name}", schedule)
            for name, options in cfg.optimizers.items()
        }
    return build_optimizer(cfg.optimizer, accumulate, schedule=schedule)


def learning_rate_schedule(cfg: Any, steps_per_epoch: int | None) -> Any:
    """`learning_rate -> schedule` for the configured `scheduler` (None without one): its
    `_target_` called with the learning rate, the run's total steps (`trainer.epochs` times
    `steps_per_epoch`) and `steps_per_epoch`."""
    node = cfg.get("scheduler")
    if node is None:
        return None
    total = None if steps_per_epoch is None else cfg.trainer.epochs * steps_per_epoch
    supplied = {"total_steps": total, "steps_per_epoch": steps_per_epoch}
    checked_target(node, "scheduler", supplied=("learning_rate", *supplied))
    return lambda learning_rate: instantiate(
        node, "scheduler", learning_rate=learning_rate, **supplied
    )


COMPILE_ONLY_NAMES = ("accuracy", "acc", "crossentropy", "ce")  # names compile() resolves


def keras_object(value: Any, key: str, kind: str) -> Any:
    """A Keras name, checked to exist, or the object a `_target_` node builds."""
    if has_target(value):
        return instantiate(value, key)
    if isinstance(value, str) and value not in COMPILE_ONLY_NAMES:
        lookup = keras.losses.get if kind == "loss" else keras.metrics.get
        try:
            lookup(value)
        except (ValueError, TypeError):
            raise TapefitError(
                f"{key}={value} is not a Keras {kind}: use a name such as "
                f"{'mse, mae, binary_crossentropy' if kind == 'loss' else 'mae, accuracy, auc'}"
                ", or a node with _target_"
            ) from None
    return value


def compile_objects(cfg: Any, defaults: dict[str, Any]) -> dict[str, Any]:
    """The model's own `loss`/`metrics` (`defaults`), with `compile.loss` replacing the loss
    and `compile.metrics` added to the metrics."""
    arguments = dict(defaults)
    if cfg.compile.loss is not None:
        arguments["loss"] = keras_object(cfg.compile.loss, "compile.loss", "loss")
    extra = [
        keras_object(m, f"compile.metrics[{i}]", "metric")
        for i, m in enumerate(cfg.compile.metrics)
    ]
    if extra:
        arguments["metrics"] = [*arguments.get("metrics", []), *extra]
    return arguments


def model_compile_defaults(model: keras.Model) -> dict[str, Any]:
    """The `loss`/`metrics` a model brings itself (its optional `compile_defaults()`), used
    when the config names none: a subclass of a tapefit model trains with no more config."""
    defaults = getattr(model, "compile_defaults", None)
    return dict(defaults()) if callable(defaults) else {}


def compile_model(model: keras.Model, cfg: Any, steps_per_epoch: int | None = None) -> None:
    """Compile `model` as the config says (inside the strategy's scope, by the caller): the
    model's own defaults (`compile_defaults()`), then `compile.loss`/`compile.metrics`;
    `steps_per_epoch` (the training split's batches) sets the learning-rate schedule's length."""
    model.compile(
        optimizer=configured_optimizer(cfg, steps_per_epoch),
        steps_per_execution=cfg.trainer.steps_per_execution,
        jit_compile=jit_compile_argument(cfg.trainer.jit_compile),
        run_eagerly=cfg.trainer.run_eagerly,
        **step_policies(cfg),
        **compile_objects(cfg, model_compile_defaults(model)),
    )


def metric_name(metric: Any) -> str:
    """The name Keras logs a configured metric under: the string itself, or the object's name
    (`name` if the config gives one, else the class's default)."""
    if isinstance(metric, str):
        return metric
    if isinstance(metric, DictConfig | dict) and "name" in metric:
        return str(metric["name"])
    built = instantiate(metric, "compile.metrics")
    return str(built.name)

"""`Model.compile`'s arguments from the run's typed settings: the optimizer (or several, by
name) with its schedule, the loss and metrics of the `compile` section on top of the model's
own, and the tape step's policies."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import keras

from tapefit.config.target_spec import TargetSpec
from tapefit.errors import TapefitError
from tapefit.training.optimizers import build_optimizer
from tapefit.training.runtime import jit_compile_argument


@dataclass(frozen=True)
class StepPolicies:
    """The tape step's policies (`TapeModel.compile`'s own arguments): what a NaN/inf step does,
    what a variable without a gradient does, which may have none, and the gradient telemetry.

    Example:
        >>> StepPolicies().arguments()["on_nonfinite"]
        'stop'
    """

    on_nonfinite: str = "stop"
    on_missing_gradients: str = "error"
    allow_missing_gradients: tuple[str, ...] = ()
    gradient_telemetry: str = "norm"  # off | norm | histograms

    def arguments(self) -> dict[str, Any]:
        """The keyword arguments `TapeModel.compile` takes for them."""
        return {
            "on_nonfinite": self.on_nonfinite,
            "on_missing_gradients": self.on_missing_gradients,
            "allow_missing_gradients": list(self.allow_missing_gradients),
            "gradient_telemetry": self.gradient_telemetry,
        }


@dataclass(frozen=True)
class CompileSettings:
    """Everything `Model.compile` gets, resolved at the run's edge (`tapefit.runner.spec`).

    Attributes:
        optimizer: The `optimizer` (used when `optimizers` is empty).
        optimizers: `{NAME: spec}` for every optimizer a step names (`optimizers`); when
            given, they replace `optimizer`.
        scheduler: The `scheduler` (called with the learning rate and the run's steps), or
            None for a constant rate.
        loss: `compile.loss` (a Keras name or a `_target_`), None for the model's own.
        metrics: `compile.metrics` (Keras names or `_target_`s), added to the model's own.
        epochs: `trainer.epochs` (a schedule's length is epochs times steps per epoch).
        accumulate: `trainer.gradient_accumulation_steps`.
        steps_per_execution: `trainer.steps_per_execution`.
        jit_compile: `trainer.jit_compile` (None: Keras' auto).
        run_eagerly: `trainer.run_eagerly`.
        policies: The tape step's policies.

    Example:
        >>> sgd = TargetSpec("optimizer", "keras.optimizers.SGD", {"learning_rate": 0.1})
        >>> settings = CompileSettings(optimizer=sgd)
        >>> type(configured_optimizer(settings)).__name__
        'SGD'
    """

    optimizer: TargetSpec | None = None
    optimizers: dict[str, TargetSpec] = field(default_factory=dict)
    scheduler: TargetSpec | None = None
    loss: str | TargetSpec | None = None
    metrics: tuple[str | TargetSpec, ...] = ()
    epochs: int = 1
    accumulate: int | None = None
    steps_per_execution: int = 1
    jit_compile: bool | None = None
    run_eagerly: bool = False
    policies: StepPolicies = field(default_factory=StepPolicies)


def configured_optimizer(settings: CompileSettings, steps_per_epoch: int | None = None) -> Any:
    """The optimizer, or `{name: optimizer}` for several named ones, each with the schedule
    over its learning rate (`steps_per_epoch`: the training split's batches, None for an
    endless stream)."""
    schedule = learning_rate_schedule(settings.scheduler, settings.epochs, steps_per_epoch)
    if settings.optimizers:
        return {
            name: build_optimizer(spec, settings.accumulate, schedule)
            for name, spec in settings.optimizers.items()
        }
    if settings.optimizer is None:
        raise TapefitError("no optimizer: set optimizer._target_ (e.g. optimizer=adamw)")
    return build_optimizer(settings.optimizer, settings.accumulate, schedule)


def learning_rate_schedule(
    scheduler: TargetSpec | None, epochs: int, steps_per_epoch: int | None
) -> Any:
    """`learning_rate -> schedule` for the `scheduler` (None without one): its `_target_`
    called with the learning rate, the run's total steps (`epochs` times `steps_per_epoch`)
    and `steps_per_epoch`."""
    if scheduler is None:
        return None
    total = None if steps_per_epoch is None else epochs * steps_per_epoch
    supplied = {"total_steps": total, "steps_per_epoch": steps_per_epoch}
    return lambda learning_rate: scheduler.build(learning_rate=learning_rate, **supplied)


COMPILE_ONLY_NAMES = ("accuracy", "acc", "crossentropy", "ce")  # names compile() resolves


def keras_object(value: str | TargetSpec, key: str, kind: str) -> Any:
    """A Keras name, checked to exist, or the object a `_target_` builds."""
    if isinstance(value, TargetSpec):
        return value.build()
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


def compile_objects(settings: CompileSettings, defaults: dict[str, Any]) -> dict[str, Any]:
    """The model's own `loss`/`metrics` (`defaults`), with `compile.loss` replacing the loss
    and `compile.metrics` added to the metrics."""
    arguments = dict(defaults)
    if settings.loss is not None:
        arguments["loss"] = keras_object(settings.loss, "compile.loss", "loss")
    extra = [
        keras_object(m, f"compile.metrics[{i}]", "metric") for i, m in enumerate(settings.metrics)
    ]
    if extra:
        arguments["metrics"] = [*arguments.get("metrics", []), *extra]
    return arguments


def model_compile_defaults(model: keras.Model) -> dict[str, Any]:
    """The `loss`/`metrics` a model brings itself (its optional `compile_defaults()`), used
    when the config names none: a subclass of a tapefit model trains with no more config."""
    defaults = getattr(model, "compile_defaults", None)
    return dict(defaults()) if callable(defaults) else {}


def compile_model(
    model: keras.Model, settings: CompileSettings, steps_per_epoch: int | None = None
) -> dict[str, Any]:
    """Compile `model` as `settings` say (inside the strategy's scope, by the caller): the
    model's own defaults (`compile_defaults()`, asked once), then `compile.loss`/`compile.metrics`;
    `steps_per_epoch` (the training split's batches) sets the learning-rate schedule's length.

    Returns:
        The `loss` and `metrics` compile got (what the step will log, with the trackers).
    """
    objects = compile_objects(settings, model_compile_defaults(model))
    model.compile(
        optimizer=configured_optimizer(settings, steps_per_epoch),
        steps_per_execution=settings.steps_per_execution,
        jit_compile=jit_compile_argument(settings.jit_compile),
        run_eagerly=settings.run_eagerly,
        **settings.policies.arguments(),
        **objects,
    )
    return objects


def metric_name(metric: Any) -> str:
    """The name Keras logs a configured metric under: the string itself, or the object's name
    (`name` if the config gives one, else the class's default)."""
    if isinstance(metric, str):
        return metric
    if isinstance(metric, keras.metrics.Metric):  # built already (compile_objects)
        return str(metric.name)
    if isinstance(metric, TargetSpec):
        if "name" in metric.arguments:
            return str(metric.arguments["name"])
        return str(metric.build().name)
    return str(getattr(metric, "__name__", metric))  # a metric function

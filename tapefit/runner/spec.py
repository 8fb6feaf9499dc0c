"""The run's specification: the composed config turned, once, at the run's edge, into frozen
typed objects. Below the edge (`tapefit.training`), functions take these, never the config.

What is resolved here is resolved once per run: the objective (its name, direction and
mode), the model's class, the compile settings (optimizers, schedule, loss, metrics and the
tape step's policies), the trainer's and the debug preset's settings.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from omegaconf import DictConfig

from tapefit.callbacks.configured import ACTING, OWNED_KEYS, WRITERS, CallbackSettings
from tapefit.checkpointing.connector import CheckpointPolicy
from tapefit.config.schemas import DebugConfig, EarlyStoppingConfig, ObjectiveMode, TrainerConfig
from tapefit.config.snapshot import config_snapshot
from tapefit.config.target_spec import TargetSpec
from tapefit.config.targets import has_target
from tapefit.config.typed import typed
from tapefit.errors import TapefitError
from tapefit.objective import Objective, resolve_direction
from tapefit.runner.model_from_config import default_objective, model_class
from tapefit.training.compiling import CompileSettings, StepPolicies


@dataclass(frozen=True)
class RunSpec:
    """One run's settings as typed objects.

    Attributes:
        trainer: `trainer`, typed (choices are enums).
        debug: `debug`, typed.
        early_stopping: `callbacks.early_stopping`, typed (whether it restores its own best
            weights decides which weights the run is tested with).
        objective_name: The metric the run selects on (`objective`, or the model's default).
        resolved_objective: It with its direction and mode; None when `auto` cannot know the
            direction, which `objective` then refuses (after the run has checked that it logs
            the name: a name it never logs is the first thing to fix).
        model_class: The class (or function) `model._target_` names.
        model: The `model` node's target and arguments (checked: `check_model`).
        data_target: `data._target_`, the loader (named in the model's errors).
        compile: Everything `Model.compile` gets.
        callbacks: The configured callbacks' classes and arguments, by role.
        checkpoint: What the run restores (resume, warm start) and checkpoints.
        profile_batch: `callbacks.tensorboard.profile_batch` (what `debug=profile` profiles).

    Example:
        >>> import tapefit
        >>> spec = RunSpec.of(tapefit.compose(["trainer.epochs=2"]))
        >>> spec.trainer.epochs, spec.objective.name, spec.objective.direction
        (2, 'val_accuracy', 'max')
    """

    trainer: TrainerConfig
    debug: DebugConfig
    early_stopping: EarlyStoppingConfig
    objective_name: str
    resolved_objective: Objective | None
    model_class: Any
    model: TargetSpec
    data_target: str
    compile: CompileSettings
    callbacks: CallbackSettings
    checkpoint: CheckpointPolicy
    profile_batch: Any = None
    objective_refusal: str = ""

    @property
    def objective(self) -> Objective:
        """The run's objective: name, direction and mode.

        Raises:
            TapefitError: `objective_direction=auto` cannot tell its direction.
        """
        if self.resolved_objective is None:
            raise TapefitError(self.objective_refusal)
        return self.resolved_objective

    @classmethod
    def of(
        cls, cfg: DictConfig, snapshot: dict[str, Any] | None = None, located: Any = None
    ) -> RunSpec:
        """The specification of the composed `cfg` (checked before: `check_config`);
        `snapshot`: its `config_snapshot` and `located`: the model's class, when the caller
        has them already (`check_config` returns the class)."""
        trainer = typed(TrainerConfig, cfg.trainer)
        target = located or model_class(cfg.model)
        name = objective_name(cfg, target)
        try:
            objective, refusal = objective_of(cfg, target, name), ""
        except TapefitError as error:
            objective, refusal = None, str(error)
        return cls(
            trainer=trainer,
            debug=typed(DebugConfig, cfg.get("debug")),
            early_stopping=typed(EarlyStoppingConfig, cfg.callbacks.early_stopping),
            objective_name=name,
            resolved_objective=objective,
            objective_refusal=refusal,
            model_class=target,
            model=TargetSpec.of(cfg.model, "model", checked=True, located=target),
            data_target=str(cfg.data.get("_target_", "the data")),
            compile=compile_settings(cfg, trainer),
            callbacks=callback_settings(cfg.callbacks),
            checkpoint=checkpoint_policy(cfg, snapshot),
            profile_batch=cfg.callbacks.tensorboard.get("profile_batch"),
        )


def compile_settings(cfg: DictConfig, trainer: TrainerConfig) -> CompileSettings:
    """`Model.compile`'s settings from the composed config: the optimizer nodes by their keys,
    the scheduler, `compile.loss`/`compile.metrics`, and the trainer's step options."""
    telemetry = cfg.callbacks.step_telemetry
    scheduler = cfg.get("scheduler")
    optimizers = {
        name: TargetSpec.of(node, f"optimizers.{name}", checked=True)
        for name, node in cfg.optimizers.items()
    }
    if scheduler is not None:
        scheduler = TargetSpec.of(scheduler, "scheduler", checked=True)
    return CompileSettings(  # several optimizers replace the one
        optimizer=None if optimizers else TargetSpec.of(cfg.optimizer, "optimizer", checked=True),
        optimizers=optimizers,
        scheduler=scheduler,
        loss=keras_name_or_spec(cfg.compile.loss, "compile.loss"),
        metrics=tuple(
            keras_name_or_spec(metric, f"compile.metrics[{index}]")
            for index, metric in enumerate(cfg.compile.metrics)
        ),
        epochs=trainer.epochs,
        accumulate=trainer.gradient_accumulation_steps,
        steps_per_execution=trainer.steps_per_execution,
        jit_compile=trainer.jit_compile,
        run_eagerly=trainer.run_eagerly,
        policies=StepPolicies(
            on_nonfinite=trainer.on_nonfinite.value,
            on_missing_gradients=trainer.on_missing_gradients.value,
            allow_missing_gradients=tuple(trainer.allow_missing_gradients),
            gradient_telemetry=(
                "off" if not telemetry.enabled else "histograms" if telemetry.histograms else "norm"
            ),
        ),
    )


def keras_name_or_spec(value: Any, key: str) -> Any:
    """A `compile` entry as `Model.compile` takes it: a Keras name as it is, a `_target_` node
    as a `TargetSpec` (checked when it is built), None as None."""
    return TargetSpec.of(value, key) if has_target(value) else value


def callback_settings(node: DictConfig) -> CallbackSettings:
    """The `callbacks` node's enabled callbacks and `extra`, as `TargetSpec`s by role (each
    checked already by `check_config`: building them checks nothing again)."""

    def enabled(names: tuple[str, ...]) -> tuple[TargetSpec, ...]:
        return tuple(
            TargetSpec.of(node[name], f"callbacks.{name}", exclude=OWNED_KEYS, checked=True)
            for name in names
            if node[name].enabled
        )

    extra = tuple(
        TargetSpec.of(extra, f"callbacks.extra.{name}", checked=True)
        for name, extra in node.extra.items()
    )
    return CallbackSettings(acting=enabled(ACTING), extra=extra, writers=enabled(WRITERS))


def checkpoint_policy(cfg: DictConfig, snapshot: dict[str, Any] | None = None) -> CheckpointPolicy:
    """What the run restores and checkpoints: `resume`, `force_resume`, `init_from`, the
    trainer's checkpoint switches, `checkpoint.*`, and the log files a resume rewrites."""
    callbacks, trainer = cfg.callbacks, cfg.trainer
    return CheckpointPolicy(
        resume=bool(cfg.resume),
        force_resume=bool(cfg.force_resume),
        init_from=str(cfg.init_from) if cfg.get("init_from") else None,
        init_from_strict=bool(cfg.get("init_from_strict", True)),
        every_epoch=bool(trainer.checkpoints),
        every_steps=trainer.checkpoint_every_steps,
        save_top_k=int(cfg.checkpoint.save_top_k),
        save_last=bool(cfg.checkpoint.save_last),
        config=config_snapshot(cfg) if snapshot is None else snapshot,
        csv_file=str(callbacks.csv_logger.filename) if callbacks.csv_logger.enabled else None,
        tensorboard=bool(callbacks.tensorboard.enabled),
    )


def objective_name(cfg: DictConfig, target: Any) -> str:
    """The metric the run selects on: `objective`, or the default validation metric of the
    model class `target` (located by `check_config`) for the run's data."""
    return cfg.objective or default_objective(cfg.data, target)


def objective_of(cfg: DictConfig, target: Any, name: str | None = None) -> Objective:
    """The run's objective: `objective_name` (or `name`, when the caller has it), with its
    direction (`objective_direction`) and mode (`objective_mode`).

    Args:
        cfg: The composed config.
        target: The model's class, as `check_config` returned it.
        name: The objective's name, when the caller has resolved it already.

    Raises:
        TapefitError: `objective_direction=auto` for a metric whose direction is not known.
    """
    name = name or objective_name(cfg, target)
    direction = resolve_direction(
        name, cfg.get("objective_direction", "auto"), "objective_direction"
    )
    return Objective(name, direction, ObjectiveMode(cfg.get("objective_mode", "best")).value)

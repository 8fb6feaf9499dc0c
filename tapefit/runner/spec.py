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

from tapefit.config.schemas import DebugConfig, EarlyStoppingConfig, TrainerConfig
from tapefit.config.typed import typed
from tapefit.errors import TapefitError
from tapefit.runner.model_node import default_objective, model_class, objective_of
from tapefit.training.compiling import CompileSettings, StepPolicies
from tapefit.training.objective import Objective


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
        compile: Everything `Model.compile` gets.
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
    compile: CompileSettings
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
    def of(cls, cfg: DictConfig) -> RunSpec:
        """The specification of the composed `cfg` (checked before: `check_config`)."""
        trainer = typed(TrainerConfig, cfg.trainer)
        target = model_class(cfg)
        name = cfg.objective or default_objective(cfg, target)
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
            compile=compile_settings(cfg, trainer),
            profile_batch=cfg.callbacks.tensorboard.get("profile_batch"),
        )


def compile_settings(cfg: DictConfig, trainer: TrainerConfig) -> CompileSettings:
    """`Model.compile`'s settings from the composed config: the optimizer nodes by their keys,
    the scheduler, `compile.loss`/`compile.metrics`, and the trainer's step options."""
    telemetry = cfg.callbacks.step_telemetry
    return CompileSettings(
        optimizer=None if cfg.optimizers else cfg.optimizer,  # several replace the one
        optimizers=dict(cfg.optimizers),
        scheduler=cfg.get("scheduler"),
        loss=cfg.compile.loss,
        metrics=tuple(cfg.compile.metrics),
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

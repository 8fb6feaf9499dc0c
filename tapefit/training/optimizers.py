"""Optimizers from the `optimizer` config group: a class named by `_target_` (Keras' own, such
as `keras.optimizers.AdamW` or `keras.optimizers.Lion`, or one of yours)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import keras

from tapefit.config.target_spec import TargetSpec
from tapefit.errors import TapefitError

TAPEFIT_KEYS = ("ema",)  # tapefit's own keys of an optimizer node, not arguments of its class


def build_optimizer(
    spec: TargetSpec,
    gradient_accumulation_steps: int | None = None,
    schedule: Callable[[float], Any] | None = None,
) -> keras.optimizers.Optimizer:
    """The optimizer `spec` names: its `_target_` class, called with its arguments.

    `gradient_accumulation_steps` k > 1 makes the optimizer average k batches' gradients and
    update once every k steps (Keras' own accumulation). `schedule(learning_rate)` turns the
    spec's learning rate into the one the optimizer gets (the `scheduler` group's). Its `ema`
    (tapefit's short name for Keras' `use_ema`) is not passed to the class as such.

    Example:
        >>> adam = TargetSpec("optimizer", "keras.optimizers.Adam", {"learning_rate": 0.01})
        >>> optimizer = build_optimizer(adam, gradient_accumulation_steps=4)
        >>> float(optimizer.learning_rate), optimizer.gradient_accumulation_steps
        (0.009999999776482582, 4)
    """
    check_accumulation(gradient_accumulation_steps)
    arguments = {k: v for k, v in spec.arguments.items() if k not in TAPEFIT_KEYS}
    added: dict[str, Any] = {}  # what tapefit passes beside the configured arguments
    ema = spec.arguments.get("ema")  # checked with the config (runner.optimizer_checks)
    if ema is not None and "use_ema" not in arguments:  # `+optimizer.ema=true`
        added["use_ema"] = bool(ema)
    if gradient_accumulation_steps is not None and gradient_accumulation_steps > 1:
        added["gradient_accumulation_steps"] = int(gradient_accumulation_steps)
    if schedule is not None and isinstance(arguments.get("learning_rate"), int | float):
        added["learning_rate"] = schedule(float(arguments["learning_rate"]))
    optimizer = TargetSpec(spec.key, spec.target, arguments, spec.checked).build(**added)
    if not isinstance(optimizer, keras.optimizers.Optimizer):
        raise TapefitError(
            f"{spec.key}._target_={spec.target} built a {type(optimizer).__name__}, not a "
            "keras.optimizers.Optimizer: name an optimizer class (e.g. keras.optimizers.Adam)"
        )
    return optimizer


def check_accumulation(steps: int | None) -> None:
    """`trainer.gradient_accumulation_steps` is null (off) or at least 1."""
    if steps is not None and steps < 1:
        raise TapefitError(
            f"trainer.gradient_accumulation_steps={steps} must be null (off) or a number of "
            "batches >= 1"
        )

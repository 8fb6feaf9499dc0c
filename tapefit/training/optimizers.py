"""Optimizers from the `optimizer` config group: a class named by `_target_` (Keras' own, such
as `keras.optimizers.AdamW` or `keras.optimizers.Lion`, or one of yours)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import keras

from tapefit.config.targets import checked_target, has_target, instantiate
from tapefit.errors import TapefitError

TAPEFIT_KEYS = ("ema",)  # tapefit's own keys of an optimizer node, not arguments of its class


def build_optimizer(
    node: Any,
    gradient_accumulation_steps: int | None = None,
    key: str = "optimizer",
    schedule: Callable[[float], Any] | None = None,
) -> keras.optimizers.Optimizer:
    """The optimizer `node` (the config node at `key`) describes: its `_target_` class, called
    with the node's arguments.

    `gradient_accumulation_steps` k > 1 makes the optimizer average k batches' gradients and
    update once every k steps (Keras' own accumulation). `schedule(learning_rate)` turns the
    node's learning rate into the one the optimizer gets (the `scheduler` group's). The node's
    `ema` (tapefit's short name for Keras' `use_ema`) is not passed to the class.
    """
    check_accumulation(gradient_accumulation_steps)
    accumulate: dict[str, Any] = {}
    if gradient_accumulation_steps is not None and gradient_accumulation_steps > 1:
        accumulate["gradient_accumulation_steps"] = int(gradient_accumulation_steps)
    if schedule is not None and isinstance(node.get("learning_rate"), int | float):
        accumulate["learning_rate"] = schedule(float(node.learning_rate))
    if has_target(node):  # its tapefit keys were checked with the config (check_optimizer_node)
        if "ema" in node and "use_ema" not in node:  # `+optimizer.ema=true` on a node without it
            accumulate["use_ema"] = bool(node.ema)
        optimizer = instantiate(node, key, exclude=TAPEFIT_KEYS, **accumulate)
        if not isinstance(optimizer, keras.optimizers.Optimizer):
            raise TapefitError(
                f"{key}._target_={node._target_} built a {type(optimizer).__name__}, not a "
                "keras.optimizers.Optimizer: name an optimizer class (e.g. keras.optimizers.Adam)"
            )
        return optimizer
    raise missing_target(key)


def missing_target(key: str) -> TapefitError:
    """The one-line refusal of an optimizer node without `_target_` at `key`.

    Example:
        >>> str(missing_target("optimizers.critic"))  # doctest: +ELLIPSIS
        'optimizers.critic needs _target_: ... optimizers.critic._target_=keras.optimizers.Adam'
    """
    choose = "optimizer=adamw, or " if key == "optimizer" else ""
    return TapefitError(
        f"{key} needs _target_: the optimizer class to build, e.g. {choose}"
        f"{key}._target_=keras.optimizers.Adam"
    )


def check_accumulation(steps: int | None) -> None:
    """`trainer.gradient_accumulation_steps` is null (off) or at least 1."""
    if steps is not None and steps < 1:
        raise TapefitError(
            f"trainer.gradient_accumulation_steps={steps} must be null (off) or a number of "
            "batches >= 1"
        )


def check_optimizer_node(node: Any, key: str = "optimizer") -> None:
    """Refuse, before anything is built, an optimizer node whose arguments its `_target_` does
    not take or whose types are wrong, and a `name` that reads like the old way of choosing
    the class (it would only rename the optimizer).

    Raises:
        TapefitError: one line naming the key, e.g. `optimizer.beta1: Adam takes no argument
            'beta1' (did you mean optimizer.beta_1?)`.
    """
    ema = node.get("ema")
    if ema is not None and not isinstance(ema, bool):
        raise TapefitError(f"{key}.ema={ema} must be true or false")
    target = checked_target(node, key, exclude=TAPEFIT_KEYS)
    name = node.get("name")
    if isinstance(name, str) and name != getattr(target, "__name__", "").lower():
        try:
            named = type(keras.optimizers.get(name))
        except (ValueError, TypeError):
            return
        raise TapefitError(
            f"{key}.name={name} no longer chooses the optimizer class ({key}._target_ does, "
            f"here {node._target_}): choose {key}={name} or set "
            f"{key}._target_=keras.optimizers.{named.__name__}"
        )
    learning_rate = node.get("learning_rate")
    if isinstance(learning_rate, int | float) and not learning_rate > 0:
        raise TapefitError(f"{key}.learning_rate={learning_rate} must be > 0")

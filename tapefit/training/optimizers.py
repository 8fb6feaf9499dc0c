"""Optimizers from the `optimizer` config group: a class named by `_target_` (Keras' own, such
as `keras.optimizers.AdamW` or `keras.optimizers.Lion`, or one of yours), or, in configs
written before `_target_`, a `keras.optimizers` class by `name`."""

from __future__ import annotations

import difflib
import inspect
from collections.abc import Callable
from typing import Any

import keras

from tapefit.config.targets import checked_target, has_target, instantiate
from tapefit.errors import TapefitError

OPTIONAL_KEYS = ("weight_decay", "momentum", "clipnorm", "global_clipnorm", "clipvalue")
TAPEFIT_KEYS = ("ema",)  # tapefit's own keys of an optimizer node, not arguments of its class


def build_optimizer(
    node: Any,
    gradient_accumulation_steps: int | None = None,
    key: str = "optimizer",
    schedule: Callable[[float], Any] | None = None,
) -> keras.optimizers.Optimizer:
    """The optimizer `node` (the config node at `key`) describes: `_target_` and its arguments, or a
    `keras.optimizers` name with options (null options keep Keras' defaults).

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
    options = {"learning_rate": node.learning_rate}
    options.update({key: node[key] for key in OPTIONAL_KEYS if node.get(key) is not None})
    options.update(dict(node.get("options") or {}))
    options.update(accumulate)
    check_option_names(node.name, options, set(dict(node.get("options") or {})))
    try:
        return keras.optimizers.get({"class_name": node.name, "config": options})
    except (ValueError, TypeError) as error:
        if "not recognized" in str(error):
            bad = sorted(set(options) - {"learning_rate"})
            raise TapefitError(
                f"optimizer {node.name!r} does not accept {', '.join(bad)}: set them to null "
                f"or pick an optimizer that has them ({error})"
            ) from error
        raise TapefitError(
            f"optimizer.name={node.name!r} is not a keras.optimizers class: use e.g. adam, "
            "adamw, sgd, rmsprop"
        ) from error


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


def check_option_names(name: str, options: dict[str, Any], from_options: set[str]) -> None:
    """Refuse, naming it, the first option `name`'s optimizer class does not take (with the
    closest name it does take); `from_options` are the keys given under `optimizer.options`."""
    try:
        optimizer_class = type(keras.optimizers.get(name))
    except (ValueError, TypeError):
        return  # not an optimizer name: refused with its own message
    accepted = {
        parameter.name
        for function in (optimizer_class.__init__, keras.optimizers.Optimizer.__init__)
        for parameter in list(inspect.signature(function).parameters.values())[1:]
        if parameter.kind in (parameter.POSITIONAL_OR_KEYWORD, parameter.KEYWORD_ONLY)
    } - {"name"}
    for key in options:
        if key not in accepted:
            where = f"optimizer.options.{key}" if key in from_options else f"optimizer.{key}"
            close = difflib.get_close_matches(key, sorted(accepted), n=1)
            hint = f"did you mean {close[0]}? " if close else ""
            raise TapefitError(
                f"{where}: optimizer {name!r} ({optimizer_class.__name__}) takes no argument "
                f"{key!r}; {hint}it takes {', '.join(sorted(accepted))}"
            )

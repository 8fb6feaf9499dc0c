"""Optimizers by name from the `optimizer` config group."""

from __future__ import annotations

import difflib
import inspect
from typing import Any

import keras

from tapefit.errors import TapefitError

OPTIONAL_KEYS = ("weight_decay", "momentum", "clipnorm", "global_clipnorm", "clipvalue")


def build_optimizer(
    cfg: Any, gradient_accumulation_steps: int | None = None
) -> keras.optimizers.Optimizer:
    """A `keras.optimizers` instance named by `cfg.name`; options left null keep Keras' defaults.

    `gradient_accumulation_steps` k > 1 makes the optimizer average k batches' gradients and
    update once every k steps (Keras' own accumulation).
    """
    options = {"learning_rate": cfg.learning_rate}
    options.update({key: cfg[key] for key in OPTIONAL_KEYS if cfg.get(key) is not None})
    options.update(dict(cfg.get("options") or {}))
    if gradient_accumulation_steps is not None and gradient_accumulation_steps < 1:
        raise TapefitError(
            f"trainer.gradient_accumulation_steps={gradient_accumulation_steps} must be null "
            "(off) or a number of batches >= 1"
        )
    if gradient_accumulation_steps is not None and gradient_accumulation_steps > 1:
        options["gradient_accumulation_steps"] = int(gradient_accumulation_steps)
    check_option_names(cfg.name, options, set(dict(cfg.get("options") or {})))
    try:
        return keras.optimizers.get({"class_name": cfg.name, "config": options})
    except (ValueError, TypeError) as error:
        if "not recognized" in str(error):
            bad = sorted(set(options) - {"learning_rate"})
            raise TapefitError(
                f"optimizer {cfg.name!r} does not accept {', '.join(bad)}: set them to null "
                f"or pick an optimizer that has them ({error})"
            ) from error
        raise TapefitError(
            f"optimizer.name={cfg.name!r} is not a keras.optimizers class: use e.g. adam, "
            "adamw, sgd, rmsprop"
        ) from error


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

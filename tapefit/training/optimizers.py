"""Optimizers by name from the `optimizer` config group."""

from __future__ import annotations

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

"""Optimizers by name from the `optimizer` config group."""

from __future__ import annotations

from typing import Any

import keras

from tapefit.errors import TapefitError

OPTIONAL_KEYS = ("weight_decay", "momentum", "clipnorm", "global_clipnorm")


def build_optimizer(cfg: Any) -> keras.optimizers.Optimizer:
    """A `keras.optimizers` instance named by `cfg.name`; options left null keep Keras' defaults."""
    options = {"learning_rate": cfg.learning_rate}
    options.update({key: cfg[key] for key in OPTIONAL_KEYS if cfg.get(key) is not None})
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

"""Every private Keras API tapefit uses, in one place.

Keras keeps these under `keras.src`, which may change in any release, so tapefit imports them
only here and bounds Keras to the versions its suite has run on (`pyproject.toml`). Each name
says what it is for; `tests/test_architecture.py` fails on a `keras.src` import anywhere else.
"""

from keras.src.backend import compute_output_spec  # a symbolic run of a step, for building
from keras.src.backend.common import global_state  # Keras' name counters, kept by save checks
from keras.src.models.functional import Functional  # Keras' own functional model class
from keras.src.saving import saving_lib  # H5IOStore: Keras' weights file, in memory
from keras.src.saving.serialization_lib import ObjectSharingScope  # shared sub-objects
from keras.src.utils import python_utils  # @default, is_default, pythonify_logs


def moving_average_pairs(optimizer) -> list:
    """(model variable, its moving average) for every variable an EMA optimizer
    (`use_ema=True`) updates; [] without EMA or before the optimizer is built. Keras keeps
    both lists private (`_trainable_variables`, `_model_variables_moving_average`)."""
    inner = getattr(optimizer, "inner_optimizer", optimizer)  # a LossScaleOptimizer's
    averages = getattr(inner, "_model_variables_moving_average", None)
    if not getattr(inner, "use_ema", False) or not averages:
        return []
    return [
        (v, a) for v, a in zip(inner._trainable_variables, averages, strict=True) if a is not None
    ]


__all__ = [
    "Functional",
    "ObjectSharingScope",
    "compute_output_spec",
    "global_state",
    "moving_average_pairs",
    "python_utils",
    "saving_lib",
]

"""The readiness report: what a built, compiled model will run like on this machine and on a
GPU (devices, dtype policy and loss scale, XLA, cuDNN per recurrent layer, retracing,
steps per execution, the input pipeline). `python -m tapefit.doctor` prints it; every run
logs it."""

from __future__ import annotations

import dataclasses
import logging
from dataclasses import dataclass
from typing import Any

import keras
import tensorflow as tf

from tapefit.readiness.inputs import Inputs, inputs_of
from tapefit.readiness.recurrent import RecurrentLayer, recurrent_layers
from tapefit.readiness.xla import XlaVerdict, xla_verdict

log = logging.getLogger("tapefit")


@dataclass(frozen=True)
class Readiness:
    """What the report says.

    Attributes:
        devices: The devices TensorFlow sees, and the strategy's replicas.
        precision: The dtype policy, with its compute and variable dtypes.
        loss_scale: Whether each optimizer scales the loss, and whether it must.
        xla: XLA here and on a GPU.
        recurrent: cuDNN per recurrent layer.
        inputs: Shapes, retracing and the input pipeline.
        steps_per_execution: Steps Keras runs per call of its compiled function.
    """

    devices: str
    precision: str
    loss_scale: str
    xla: XlaVerdict
    recurrent: tuple[RecurrentLayer, ...]
    inputs: Inputs
    steps_per_execution: int

    def lines(self) -> list[str]:
        """The report, a line per fact."""
        lines = [
            f"devices: {self.devices}",
            f"dtype policy: {self.precision}",
            f"loss scale: {self.loss_scale}",
            self.xla.line(),
        ]
        if self.recurrent:
            lines += [f"recurrent: {layer.line()}" for layer in self.recurrent]
        else:
            lines.append("recurrent: no LSTM or GRU layers")
        lines += self.inputs.lines()
        lines.append(f"steps_per_execution: {self.steps_per_execution}")
        return lines

    def as_dict(self) -> dict[str, Any]:
        """Everything, JSON-ready."""
        return dataclasses.asdict(self)


def devices_line(replicas: int) -> str:
    """The physical devices TensorFlow sees, and how many replicas train.

    Example:
        >>> devices_line(1).startswith("cpu:0")
        True
    """
    gpus = tf.config.list_physical_devices("GPU")
    logical = tf.config.list_logical_devices()
    names = ", ".join(f"{d.device_type.lower()}:{d.name.rsplit(':', 1)[-1]}" for d in logical)
    gpu = f"{len(gpus)} GPU(s)" if gpus else "no GPU TensorFlow can use"
    return f"{names} ({gpu}); {replicas} replica(s) train"


def precision_line() -> str:
    """The global dtype policy, with its compute and variable dtypes."""
    policy = keras.config.dtype_policy()
    return f"{policy.name} (compute {policy.compute_dtype}, variables {policy.variable_dtype})"


def loss_scale_line(optimizers: dict[str, Any]) -> str:
    """Whether the optimizers scale the loss; mixed_float16 needs it (float16 gradients
    underflow), bfloat16 and float32 do not.

    Example:
        >>> loss_scale_line({"optimizer": keras.optimizers.Adam()})
        'off (not needed: float32)'
    """
    policy = keras.config.dtype_policy()
    scaled = [
        n for n, o in optimizers.items() if isinstance(o, keras.optimizers.LossScaleOptimizer)
    ]
    if policy.compute_dtype != "float16":
        return f"{'on' if scaled else 'off'} (not needed: {policy.compute_dtype})"
    unscaled = sorted(set(optimizers) - set(scaled))
    if unscaled:
        return f"OFF for {', '.join(unscaled)}: float16 gradients may underflow to zero"
    return f"on (dynamic LossScaleOptimizer: {', '.join(scaled)})"


def readiness_of(
    model: Any,
    train: tf.data.Dataset,
    strategy: tf.distribute.Strategy,
    jit_compile: bool | None,
) -> Readiness:
    """The report for a compiled `model` about to train on `train` under `strategy`.

    Args:
        model: The compiled model.
        train: The training split.
        strategy: The run's strategy.
        jit_compile: `trainer.jit_compile` (None: Keras' auto).

    Example:
        >>> import numpy as np
        >>> inputs = keras.Input((6, 3))
        >>> model = keras.Model(inputs, keras.layers.LSTM(4)(inputs))
        >>> model.compile(loss="mse")
        >>> train = tf.data.Dataset.from_tensor_slices((np.zeros((8, 6, 3)), np.zeros((8, 4))))
        >>> report = readiness_of(model, train.batch(4), tf.distribute.get_strategy(), None)
        >>> report.recurrent[0].cudnn_on_gpu, report.xla.on_gpu
        (True, False)
    """
    optimizers = getattr(model, "optimizers", None)
    if not isinstance(optimizers, dict):
        optimizers = {"optimizer": model.optimizer}
    recurrent = recurrent_layers(model)
    distributed = strategy is not tf.distribute.get_strategy() or strategy.num_replicas_in_sync > 1
    return Readiness(
        devices=devices_line(strategy.num_replicas_in_sync),
        precision=precision_line(),
        loss_scale=loss_scale_line(optimizers),
        xla=xla_verdict(model, jit_compile, recurrent, distributed),
        recurrent=tuple(recurrent),
        inputs=inputs_of(train, model),
        steps_per_execution=int(getattr(model, "steps_per_execution", 1) or 1),
    )


def log_readiness(
    model: Any, train: tf.data.Dataset, strategy: tf.distribute.Strategy, jit_compile: bool | None
) -> None:
    """Log the report's lines (`readiness: ...`) at the start of a run; a model the report
    cannot read is said in one warning, and the run goes on."""
    try:
        report = readiness_of(model, train, strategy, jit_compile)
    except Exception as error:  # a user's layer the probes do not know: say so, train anyway
        log.warning("readiness: no report for this model (%s: %s)", type(error).__name__, error)
        return
    for line in report.lines():
        log.info("readiness: %s", line)

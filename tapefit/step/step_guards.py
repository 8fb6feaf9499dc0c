"""The checks and bookkeeping behind TapeModel's step: loss validation, missing-gradient
diagnosis, the non-finite guard and the per-step state that telemetry reads."""

from __future__ import annotations

import fnmatch
import warnings
from collections.abc import Callable, Sequence
from enum import Enum
from typing import Any

import keras
import tensorflow as tf

from tapefit.errors import TapefitError


class OnMissingGradients(str, Enum):
    """What a variable without a gradient does at the first step."""

    error = "error"
    warn = "warn"


class OnNonFinite(str, Enum):
    """What a step whose loss or gradients are NaN/inf does."""

    ignore = "ignore"  # apply it anyway, as Keras does
    skip = "skip"  # leave the weights and optimizer state untouched, count the step
    stop = "stop"  # skip it and stop training, naming the epoch and step


class GradientTelemetry(str, Enum):
    """What the step records for `StepTelemetry`."""

    off = "off"
    norm = "norm"  # the global gradient norm
    histograms = "histograms"  # the norm and every gradient


MISSING_GRADIENT_CAUSES = (
    "the loss or the model output was computed outside the GradientTape, "
    "went through NumPy (.numpy(), np.* or a Python float), "
    "does not depend on these variables, "
    "or passes through an integer or non-differentiable op (argmax, round, a cast to int)"
)


def checked_loss(loss: Any, where: str = "forward()") -> tf.Tensor:
    """The loss as a float32 scalar, or a one-line error if it is not a floating scalar."""
    loss = tf.convert_to_tensor(loss)
    if not loss.dtype.is_floating:
        raise TapefitError(
            f"{where} returned a {loss.dtype.name} loss: return a floating-point scalar "
            "(e.g. tf.reduce_mean of per-sample losses)"
        )
    if loss.shape.rank not in (0, None):
        raise TapefitError(
            f"{where} returned a loss of shape {loss.shape}: reduce it to a scalar, the mean "
            "over the batch the replica sees (e.g. tf.reduce_mean)"
        )
    return tf.cast(loss, tf.float32) if loss.dtype != tf.float32 else loss


def variable_name(variable: Any) -> str:
    """`variable.path` for Keras variables, `variable.name` for plain TensorFlow ones."""
    return getattr(variable, "path", None) or variable.name


def drop_missing_gradients(
    gradients: Sequence[Any],
    variables: Sequence[Any],
    policy: OnMissingGradients,
    allowed: Sequence[str],
) -> tuple[list, list]:
    """Gradients and variables without the `None` gradients; unexpected ones raise (or warn)
    with the variables' names and the likely causes. Runs when the step is traced."""
    missing = [variable_name(v) for g, v in zip(gradients, variables, strict=True) if g is None]
    unexpected = [name for name in missing if not any(fnmatch.fnmatch(name, p) for p in allowed)]
    if unexpected:
        message = (
            f"no gradient reached {len(unexpected)} of {len(variables)} variables "
            f"({', '.join(unexpected)}): {MISSING_GRADIENT_CAUSES}; fix the step, or allow them "
            "with allow_missing_gradients (trainer.allow_missing_gradients)"
        )
        if policy == OnMissingGradients.error or len(unexpected) == len(variables):
            raise TapefitError(message)
        warnings.warn(message, stacklevel=3)
    kept = [(g, v) for g, v in zip(gradients, variables, strict=True) if g is not None]
    return [g for g, _ in kept], [v for _, v in kept]


def dense(gradient: Any) -> tf.Tensor:
    """A gradient as a dense tensor (embedding gradients arrive as IndexedSlices)."""
    return tf.convert_to_tensor(gradient)


def all_finite(tensors: Sequence[Any]) -> tf.Tensor:
    """True where every element of every tensor (or IndexedSlices' values) is finite."""
    checks = [
        tf.reduce_all(tf.math.is_finite(getattr(t, "values", t))) for t in tensors if t is not None
    ]
    return tf.reduce_all(tf.stack(checks)) if checks else tf.constant(True)


def same_on_every_replica(flag: tf.Tensor) -> tf.Tensor:
    """A boolean that is true only if it is true on every replica (one all-reduce)."""
    context = tf.distribute.get_replica_context()
    if context is None or context.num_replicas_in_sync == 1:
        return flag
    # tf.distribute reduces only by SUM or MEAN: count the replicas where it is false.
    false_on = context.all_reduce(tf.distribute.ReduceOp.SUM, 1.0 - tf.cast(flag, tf.float32))
    return false_on < 0.5


def apply_if(
    condition: tf.Tensor,
    apply: Callable[..., Any],
    skip: Callable[[], Any],
    args: tuple = (),
) -> None:
    """`apply(*args)` if `condition`, else `skip()`; valid inside a `tf.distribute` replica
    function. As in Keras' LossScaleOptimizer, the branch runs in cross-replica context because
    optimizers call `merge_call`; `args` must carry every per-replica tensor `apply` uses."""
    if not tf.distribute.has_strategy() or (
        tf.__internal__.distribute.strategy_supports_no_merge_call()
    ):
        tf.cond(condition, lambda: apply(*args), skip)
        return

    def cross_replica(distribution: tf.distribute.Strategy, condition: Any, *args: Any) -> None:
        first = distribution.experimental_local_results(condition)[0]
        tf.cond(
            first,
            lambda: distribution.extended.call_for_each_replica(apply, args=args),
            skip,
        )

    tf.distribute.get_replica_context().merge_call(cross_replica, args=(condition, *args))


class StepState:
    """Per-step values the step writes and callbacks read: skipped steps, the first skipped
    optimizer step, the last gradient norm and, on request, the last gradients.

    A plain object (not a Keras layer), so its variables are neither weights nor saved.
    """

    def __init__(self, variables: Sequence[Any] = (), keep_gradients: bool = False) -> None:
        def counter(name: str, value: Any, dtype: str) -> tf.Variable:
            return tf.Variable(
                value,
                dtype=dtype,
                trainable=False,
                name=name,
                synchronization=tf.VariableSynchronization.ON_WRITE,
                aggregation=tf.VariableAggregation.ONLY_FIRST_REPLICA,
            )

        self.skipped_steps = counter("skipped_steps", 0, "int64")
        self.first_skipped_step = counter("first_skipped_step", -1, "int64")
        self.gradient_norm = counter("gradient_norm", 0.0, "float32")
        self.gradients = (
            {variable_name(v): counter("gradient", tf.zeros(v.shape), "float32") for v in variables}
            if keep_gradients
            else {}
        )

    def record_skip(self, step: tf.Tensor) -> None:
        """Count a skipped step; remember the first one."""
        self.skipped_steps.assign_add(1)
        if_first = tf.where(
            self.first_skipped_step < 0, tf.cast(step, "int64"), self.first_skipped_step
        )
        self.first_skipped_step.assign(if_first)

    def record_gradients(self, gradients: Sequence[Any], variables: Sequence[Any], scale: Any):
        """The global norm of the gradients (all-reduced over replicas, divided by `scale`),
        and the gradients themselves if they are kept."""
        context = tf.distribute.get_replica_context()
        gradients = [tf.cast(dense(g), tf.float32) for g in gradients]
        if context is not None and context.num_replicas_in_sync > 1:
            gradients = context.all_reduce(tf.distribute.ReduceOp.SUM, gradients)
        if scale is not None:
            gradients = [g / tf.cast(scale, tf.float32) for g in gradients]
        self.gradient_norm.assign(tf.linalg.global_norm(gradients))
        for gradient, variable in zip(gradients, variables, strict=True):
            kept = self.gradients.get(variable_name(variable))
            if kept is not None:
                kept.assign(gradient)


def is_loss_scaled(optimizer: Any) -> bool:
    """Whether `optimizer` scales the loss (mixed_float16's LossScaleOptimizer)."""
    return isinstance(optimizer, keras.optimizers.LossScaleOptimizer)


def in_multi_worker_mode(strategy: tf.distribute.Strategy | None) -> bool:
    """Whether `strategy` spans several workers (a MultiWorkerMirroredStrategy with a cluster
    in TF_CONFIG; without one it runs like a one-worker MirroredStrategy)."""
    if not isinstance(strategy, tf.distribute.MultiWorkerMirroredStrategy):
        return False
    return bool(strategy.extended._in_multi_worker_mode())  # the predicate Keras itself uses


def with_leading_axis(step: Callable[[Any], Any]) -> Callable[[Any], Any]:
    """`step` whose scalar outputs get a leading axis of 1, so a mean over axis 0 across the
    replicas (Keras' multi-worker reduction of the logs) averages them."""

    def step_with_leading_axis(data: Any) -> Any:
        return tf.nest.map_structure(
            lambda value: (
                tf.expand_dims(value, 0)
                if isinstance(value, tf.Tensor) and value.shape.rank == 0
                else value
            ),
            step(data),
        )

    return step_with_leading_axis

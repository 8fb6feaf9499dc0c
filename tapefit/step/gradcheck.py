"""Gradient checks: tape gradients against central finite differences in float64, and which
variables a TapeModel's loss does not reach (the GradientTape tutorial's lesson as a check)."""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

import keras
import numpy as np
import tensorflow as tf

from tapefit.errors import TapefitError
from tapefit.keras_compat import flatten_layers
from tapefit.step.step_guards import variable_name
from tapefit.step.tape_model import TapeModel

RELATIVE_FLOOR = 1e-7  # relative errors of gradients smaller than this are taken as absolute


@dataclass
class GradCheck:
    """The result of `gradcheck`: the tape's gradients and how far finite differences agree.

    Attributes:
        gradients: The tape's gradients (NumPy float64, None where the tape gave none): one
            per input for a function of one output, one list per output for a function of
            several, one per trainable variable for a model.
        max_relative_error: The largest relative difference between a gradient entry and
            its central difference, over the sampled entries (about 1e-8 or less when the
            gradients are right).
        checked: How many entries were compared.
        unreached: Model variables whose gradient is missing (`"none"`) or exactly zero
            (`"zero"`), by path: what the loss does not reach.
    """

    gradients: list
    max_relative_error: float
    checked: int
    unreached: dict[str, str] = field(default_factory=dict)


@contextmanager
def float64_keras() -> Iterator[None]:
    """Keras' float type and dtype policy set to float64 inside the block.

    Finite differences need float64 to be meaningful; the previous settings come back on
    leaving the block, even after an error.
    """
    floatx, policy = keras.config.floatx(), keras.config.dtype_policy()
    keras.config.set_floatx("float64")
    keras.config.set_dtype_policy("float64")
    try:
        yield
    finally:
        keras.config.set_floatx(floatx)
        keras.config.set_dtype_policy(policy)


def _to_numpy(gradient: Any) -> np.ndarray | None:
    return None if gradient is None else np.asarray(tf.convert_to_tensor(gradient), "float64")


def _relative_error(analytic: float, numeric: float) -> float:
    return abs(analytic - numeric) / max(abs(analytic), abs(numeric), RELATIVE_FLOOR)


def _compare(
    evaluate: Callable[[], float],
    sources: Sequence[tf.Variable],
    gradients: Sequence[np.ndarray | None],
    samples: int,
    epsilon: float,
    rng: np.random.Generator,
) -> tuple[float, int]:
    """Central differences of `evaluate()` at up to `samples` entries of each source."""
    worst, checked = 0.0, 0
    for source, gradient in zip(sources, gradients, strict=True):
        if gradient is None:
            continue
        original = source.numpy()
        flat = original.reshape(-1)
        picks = rng.choice(flat.size, size=min(samples, flat.size), replace=False)  # 0: none
        for index in picks:
            values = []
            for sign in (1.0, -1.0):
                shifted = flat.copy()
                shifted[index] += sign * epsilon
                source.assign(shifted.reshape(original.shape))
                values.append(evaluate())
            source.assign(original)
            numeric = (values[0] - values[1]) / (2 * epsilon)
            worst = max(worst, _relative_error(float(gradient.reshape(-1)[index]), numeric))
            checked += 1
    return worst, checked


def _check_function(
    function: Callable[..., Any],
    inputs: Sequence[Any],
    watch: Sequence[int] | None,
    watch_accessed_variables: bool,
    samples: int,
    epsilon: float,
    rng: np.random.Generator,
) -> GradCheck:
    sources = [tf.Variable(tf.cast(tf.convert_to_tensor(x), tf.float64)) for x in inputs]
    watched = range(len(sources)) if watch is None else watch
    with tf.GradientTape(
        persistent=True, watch_accessed_variables=watch_accessed_variables
    ) as tape:
        for index in watched:
            tape.watch(sources[index])
        outputs = function(*sources)
    several = isinstance(outputs, list | tuple)
    targets = list(outputs) if several else [outputs]
    per_target = [[_to_numpy(g) for g in tape.gradient(t, sources)] for t in targets]
    del tape
    worst, checked = 0.0, 0
    for position, gradients in enumerate(per_target):

        def evaluate(position: int = position) -> float:
            result = function(*sources)
            return float((list(result) if several else [result])[position])

        error, count = _compare(evaluate, sources, gradients, samples, epsilon, rng)
        worst, checked = max(worst, error), checked + count
    return GradCheck(per_target if several else per_target[0], worst, checked)


FLOAT_POLICIES = ("float32", "float16", "bfloat16", "mixed_float16", "mixed_bfloat16")


def _in_float64(config: Any) -> Any:
    """A layer/model config with every floating dtype policy in it replaced by float64."""
    if isinstance(config, dict):
        if config.get("class_name") == "DTypePolicy" and isinstance(config.get("config"), dict):
            name = config["config"].get("name")
            if name in FLOAT_POLICIES:
                return {**config, "config": {**config["config"], "name": "float64"}}
        return {
            key: "float64" if key == "dtype" and value in FLOAT_POLICIES else _in_float64(value)
            for key, value in config.items()
        }
    if isinstance(config, list):
        return [_in_float64(value) for value in config]
    return config


def _float64_clone(model: TapeModel, batch: Any) -> TapeModel:
    """The same model, weights and loss, computing in float64."""
    with float64_keras():
        try:
            clone = type(model).from_config(_in_float64(model.get_config()))
        except Exception as error:
            raise TapefitError(
                f"gradcheck rebuilds {type(model).__name__} in float64 from get_config() and "
                f"that failed ({error}): give the model a complete get_config"
            ) from error
        loss = model.loss
        if isinstance(loss, keras.losses.Loss):
            loss = keras.losses.deserialize(keras.losses.serialize(loss))
        clone.compile(optimizer="sgd", loss=loss)
        if not all(layer.built for layer in flatten_layers(clone)):
            # through the step, whatever it feeds the model (not only call's inputs)
            clone.build_from_batch(
                tf.nest.map_structure(
                    lambda t: (
                        keras.KerasTensor(tf.convert_to_tensor(t).shape, "float64")
                        if tf.as_dtype(tf.convert_to_tensor(t).dtype).is_floating
                        else keras.KerasTensor(t.shape, tf.convert_to_tensor(t).dtype.name)
                    ),
                    batch,
                )
            )
    if any(v.dtype != "float64" for v in clone.trainable_variables):
        raise TapefitError(
            f"gradcheck could not rebuild {type(model).__name__} in float64 (a layer fixes its "
            "dtype): let its layers take Keras' dtype policy"
        )
    weights = model.get_weights()
    clone.set_weights(
        [w.astype("float64") if np.issubdtype(w.dtype, np.floating) else w for w in weights]
    )
    return clone


def _as_float64(batch: Any) -> Any:
    return tf.nest.map_structure(
        lambda t: tf.cast(t, tf.float64) if tf.as_dtype(t.dtype).is_floating else t, batch
    )


def _check_model(
    model: TapeModel, batch: Any, training: bool, samples: int, epsilon: float, rng: Any
) -> GradCheck:
    clone = _float64_clone(model, batch)
    batch = _as_float64(batch)
    variables = clone.trainable_variables
    with float64_keras(), tf.GradientTape() as tape:  # compiled losses build lazily: float64
        loss = clone.forward(batch, training=training).loss
    gradients = [_to_numpy(g) for g in tape.gradient(loss, variables)]
    unreached = {}
    for variable, gradient in zip(variables, gradients, strict=True):
        if gradient is None:
            unreached[variable_name(variable)] = "none"
        elif not np.any(gradient):
            unreached[variable_name(variable)] = "zero"

    # traced once: every central difference then runs the graph, not eager ops (for an RNN, a
    # Python loop over its time steps), reading the variables as `_compare` shifts them
    loss_of_current_variables = tf.function(lambda: clone.forward(batch, training=training).loss)

    def evaluate() -> float:
        return float(loss_of_current_variables())

    worst, checked = _compare(evaluate, variables, gradients, samples, epsilon, rng)
    return GradCheck(gradients, worst, checked, unreached)


def gradcheck(
    target: TapeModel | Callable[..., Any],
    *inputs: Any,
    watch: Sequence[int] | None = None,
    watch_accessed_variables: bool = True,
    training: bool = False,
    samples: int = 8,
    epsilon: float = 1e-6,
    seed: int = 0,
) -> GradCheck:
    """Compare tape gradients with central differences in float64 on sampled entries.

    A wrong gradient trains silently badly, so a custom loss, layer or `forward` is worth
    checking once: the tape's gradients should match finite differences, and every trainable
    variable should get one (the GradientTape tutorial's lesson, as a check).

    Args:
        target: A function of `inputs` returning a scalar (or a list of scalars: the tape is
            then persistent and each gets its gradients), or a TapeModel, whose `forward`
            loss on one batch is differentiated with respect to its trainable variables (the
            model is rebuilt in float64 from `get_config`).
        *inputs: The function's arguments (converted to float64 variables), or the model's
            one batch.
        watch: The positions of the inputs the tape watches; None: all.
        watch_accessed_variables: As for `tf.GradientTape`: with False, inputs not in
            `watch` get no gradient.
        training: The `training` flag of the model's `forward`; False keeps dropout out of
            the difference.
        samples: Entries compared per input or variable, sampled at random.
        epsilon: The step of the central differences.
        seed: Seeds the sampling of entries.

    Returns:
        The gradients, the largest relative error, how many entries were compared and, for a
        model, the variables its loss does not reach.

    Raises:
        TapefitError: a model is given more than one batch, or cannot be rebuilt in float64
            from its `get_config`.

    Examples:
        >>> import keras, numpy as np, tapefit
        >>> check = tapefit.gradcheck(lambda x: x**4, 3.0)
        >>> float(check.gradients[0])
        108.0
        >>> check.max_relative_error < 1e-8
        True

        A model's loss, with respect to each of its variables:

        >>> inputs = keras.Input((3,))
        >>> model = tapefit.TapeModel(inputs, keras.layers.Dense(1)(inputs))
        >>> model.compile(optimizer="sgd", loss="mse")
        >>> check = tapefit.gradcheck(model, (np.ones((4, 3)), np.zeros((4, 1))))
        >>> check.max_relative_error < 1e-6, check.unreached
        (True, {})

        Only the watched input gets a gradient:

        >>> check = tapefit.gradcheck(
        ...     lambda x, y: x * y, 2.0, 5.0, watch=[0], watch_accessed_variables=False
        ... )
        >>> check.gradients
        [array(5.), None]
    """
    rng = np.random.default_rng(seed)
    if isinstance(target, TapeModel):
        if len(inputs) != 1:
            raise TapefitError("gradcheck(model, batch) takes exactly one batch")
        return _check_model(target, inputs[0], training, samples, epsilon, rng)
    return _check_function(target, inputs, watch, watch_accessed_variables, samples, epsilon, rng)

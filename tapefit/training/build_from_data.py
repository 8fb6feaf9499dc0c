"""Build a user's model before training, from the dataset's element spec, and refuse in one
line what would otherwise fail later: a model its step never builds (its `.keras` file and
checkpoints would have no weights) or a model with no loss at all."""

from __future__ import annotations

import contextlib
import logging
import re
from collections.abc import Iterator
from typing import Any

import keras
import tensorflow as tf

from tapefit.data.splits import Splits
from tapefit.errors import TapefitError
from tapefit.keras_compat import compiled_parts, flatten_layers
from tapefit.step.symbolic import builds_weights
from tapefit.step.tape_model import TapeModel

log = logging.getLogger("tapefit")


def symbolic_batch(dataset: tf.data.Dataset) -> Any:
    """A batch of `KerasTensor`s shaped like the dataset's elements."""
    return tf.nest.map_structure(
        lambda spec: keras.KerasTensor(spec.shape, spec.dtype.name), dataset.element_spec
    )


@contextlib.contextmanager
def step_on_the_data(dataset: tf.data.Dataset, name: str) -> Iterator[None]:
    """Run the model's step symbolically on a batch of `dataset`'s shape: a failure (the
    user's step, or a model built for other inputs) becomes one line naming `name`."""
    try:
        yield
    except TapefitError:
        raise
    except Exception as error:  # the step on this data: say so in one line
        first = keras_message(error)
        if "No loss to compute" in first:
            raise TapefitError(
                f"{name} has no loss: set compile.loss (e.g. compile.loss=mse), return the "
                "loss from forward(), add it with add_loss(), or write train_step"
            ) from None
        raise TapefitError(
            f"{name}: its test step failed on a batch of the data's shape "
            f"({type(error).__name__}: {first}); {unbatched_hint(dataset)}check that "
            "forward/call accept what the loader returns (and the model's input shape, if the "
            "config sets it, the data's)"
        ) from None


def build_before_training(model: keras.Model, dataset: tf.data.Dataset, name: str) -> None:
    """Run the test step once symbolically so every layer is built (and, for a model compiled
    without a loss, so that a step with no loss at all is refused now, not after `Epoch 1`),
    then check that the model has weights. `name` says which model in errors."""
    unbuilt = not all(layer.built for layer in flatten_layers(model))
    if unbuilt or compiled_parts(model)[1] is None:
        with step_on_the_data(dataset, name):
            model.build_from_batch(symbolic_batch(dataset))
    unbuilt = [
        layer.name
        for layer in flatten_layers(model, include_self=False)
        if not layer.built and builds_weights(layer)
    ]
    if unbuilt or not model.weights:
        what = (
            f"layer{'s' if len(unbuilt) > 1 else ''} {', '.join(unbuilt)} "
            f"{'are' if len(unbuilt) > 1 else 'is'}"
            if unbuilt
            else "it has no weights: it is"
        )
        raise TapefitError(
            f"{name}: {what} never built by the step, so its .keras file and checkpoints would "
            "miss those weights; call every layer in forward/call, or build it in __init__ "
            "(layer.build(shape))"
        )
    # every layer and weight exists: saving keeps them, and a reloaded model builds again
    model.mark_built(keras.utils.unpack_x_y_sample_weight(symbolic_batch(dataset))[0])


def build_step_variables(
    model: keras.Model, dataset: tf.data.Dataset, name: str = "the model"
) -> None:
    """Create the variables the first train step would create (the compiled metrics' and
    loss's, the optimizer's slots) before it runs, inside the caller's strategy scope.

    TensorFlow traces a `tf.function` that creates variables a second time, to check that
    later calls create none: with everything built up front the train step is traced once
    (measured by `experiments/startup_benchmark.py`).
    """
    tape_model = isinstance(model, TapeModel)
    if tape_model and any(part is not None and not part.built for part in compiled_parts(model)):
        with step_on_the_data(dataset, name):
            model.build_from_batch(symbolic_batch(dataset))
    if tape_model:
        # One optimizer updates every trainable variable; several (a GAN's) each update the
        # part the model declares (`variables_by_optimizer`), or, undeclared, the part the step
        # gives them, known only when it runs: they are built there.
        model.build_optimizers_ahead()
    elif model.optimizer is not None and not model.optimizer.built:
        model.optimizer.build(model.trainable_variables)


def check_epoch_lengths(
    data: Any, steps_per_epoch: int | None, validation_steps: int | None
) -> None:
    """Refuse a training or validation dataset that repeats forever without the number of
    steps that ends its epoch (Keras would run the first epoch forever), and warn about a
    loader's dataset whose length TensorFlow cannot know (its epoch ends when it does).

    Raises:
        TapefitError: an infinite split without `trainer.steps_per_epoch` /
            `trainer.validation_steps`.
    """
    for split, steps, key in (
        (data.train, steps_per_epoch, "trainer.steps_per_epoch"),
        (getattr(data, "val", None), validation_steps, "trainer.validation_steps"),
    ):
        if split is None or steps:
            continue
        name = "training" if split is data.train else "validation"
        length = int(split.cardinality())
        if length == tf.data.INFINITE_CARDINALITY:
            raise TapefitError(
                f"the {name} dataset repeats forever (.repeat()) and {key} is not set, so its "
                f"first epoch would never end: set {key}=N (batches per epoch), or drop .repeat()"
            )
        given = data.given.values() if isinstance(data, Splits) else ()  # a loader's datasets
        if length == tf.data.UNKNOWN_CARDINALITY and any(split is d for d in given):
            log.warning(
                "the %s dataset's length is unknown to TensorFlow (a filter or a generator): "
                "each epoch runs until it ends; if it repeats, set %s",
                name,
                key,
            )


def keras_message(error: Exception) -> str:
    """The line of `error` that says what went wrong: Keras wraps a layer's error as
    "Exception encountered when calling X.call()", the cause on the next line, in bold."""
    text = re.sub(r"\x1b\[[0-9;]*m", "", str(error))
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    causes = [
        line
        for line in lines
        if not line.startswith(("Exception encountered when calling", "Arguments received by"))
        and not line.startswith("•")
    ]
    return (causes or lines or [""])[0]


def looks_unbatched(dataset: tf.data.Dataset) -> bool:
    """Whether no step of the dataset's pipeline batches it (read from its chain of
    transformations; a dataset from a generator or a file may batch in ways this misses)."""
    node: Any = dataset
    while node is not None:
        if "Batch" in type(node).__name__:
            return False
        node = getattr(node, "_input_dataset", None)
    return True


def unbatched_hint(dataset: tf.data.Dataset) -> str:
    """A sentence on the missing batch axis when the dataset looks unbatched, else ''."""
    if not looks_unbatched(dataset):
        return ""
    first = tf.nest.flatten(dataset.element_spec)[0]
    return (
        "the training dataset looks unbatched (no .batch() in its pipeline; its elements have "
        f"shape {tuple(first.shape)}, with no batch axis): batch it in the loader "
        "(dataset.batch(32)), or "
    )

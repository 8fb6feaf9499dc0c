"""Build a user's model before training, from the dataset's element spec, and refuse in one
line what would otherwise fail later: a model its step never builds (its `.keras` file and
checkpoints would have no weights) or a model with no loss at all."""

from __future__ import annotations

from typing import Any

import keras
import tensorflow as tf

from tapefit.errors import TapefitError


def symbolic_batch(dataset: tf.data.Dataset) -> Any:
    """A batch of `KerasTensor`s shaped like the dataset's elements."""
    return tf.nest.map_structure(
        lambda spec: keras.KerasTensor(spec.shape, spec.dtype.name), dataset.element_spec
    )


def build_before_training(model: keras.Model, dataset: tf.data.Dataset, name: str) -> None:
    """Run the test step once symbolically so every layer is built, then check that the model
    has weights. `name` says which model in errors (`model._target_=...`)."""
    if not all(layer.built for layer in model._flatten_layers()):
        try:
            model.build_from_batch(symbolic_batch(dataset))
        except Exception as error:  # the user's step on this data: say so in one line
            first = str(error).splitlines()[0] if str(error) else ""
            if "No loss to compute" in first:
                raise TapefitError(
                    f"{name} has no loss: set compile.loss (e.g. compile.loss=mse), return the "
                    "loss from forward(), add it with add_loss(), or write train_step"
                ) from None
            raise TapefitError(
                f"{name}: its test step failed on a batch of the data's shape "
                f"({type(error).__name__}: {first}); check that forward/call accept what the "
                "loader returns"
            ) from None
    unbuilt = [layer.name for layer in model._flatten_layers(include_self=False) if not layer.built]
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


def build_step_variables(model: keras.Model, dataset: tf.data.Dataset) -> None:
    """Create the variables the first train step would create (the compiled metrics' and
    loss's, every optimizer's slots) before it runs, inside the caller's strategy scope.

    TensorFlow traces a `tf.function` that creates variables a second time, to check that
    later calls create none: with everything built up front the train step is traced once
    (measured by `experiments/startup_benchmark.py`).
    """
    if hasattr(model, "build_from_batch") and any(
        part is not None and not part.built
        for part in (
            getattr(model, "_compile_metrics", None),
            getattr(model, "_compile_loss", None),
        )
    ):
        model.build_from_batch(symbolic_batch(dataset))
    for optimizer in getattr(model, "optimizers", {"": model.optimizer}).values():
        if optimizer is not None and not optimizer.built:
            optimizer.build(model.trainable_variables)

"""Build a user's model before training, from the dataset's element spec, and refuse in one
line what would otherwise fail later: a model its step never builds (its `.keras` file and
checkpoints would have no weights) or a model with no loss at all."""

from __future__ import annotations

from typing import Any

import keras
import tensorflow as tf

from tapefit.errors import TapefitError
from tapefit.step.tape_model import TapeModel


def symbolic_batch(dataset: tf.data.Dataset) -> Any:
    """A batch of `KerasTensor`s shaped like the dataset's elements."""
    return tf.nest.map_structure(
        lambda spec: keras.KerasTensor(spec.shape, spec.dtype.name), dataset.element_spec
    )


def overrides(model: keras.Model, method: str) -> bool:
    """Whether `model`'s class defines `method` itself rather than inheriting TapeModel's."""
    return getattr(type(model), method) is not getattr(TapeModel, method)


def build_before_training(model: keras.Model, dataset: tf.data.Dataset, name: str) -> None:
    """Run the test step once symbolically so every layer is built, then check the model has
    weights and a loss. `name` says which model in errors (`model._target_=...`)."""
    if not all(layer.built for layer in model._flatten_layers()):
        try:
            keras.src.backend.compute_output_spec(model.test_step, symbolic_batch(dataset))
        except Exception as error:
            first = str(error).splitlines()[0] if str(error) else ""
            raise TapefitError(
                f"{name}: its test step failed on a batch of the data's shape "
                f"({type(error).__name__}: {first}); check that forward/call accept what the "
                "loader returns"
            ) from None
    unbuilt = [layer.name for layer in model._flatten_layers(include_self=False) if not layer.built]
    if unbuilt or not model.weights:
        what = f"layers {', '.join(unbuilt)} are" if unbuilt else "it has no weights: it is"
        raise TapefitError(
            f"{name}: {what} never built by the step, so its .keras file and checkpoints would "
            "hold no weights; call every layer in forward/call, or build them in __init__ "
            "(layer.build(shape))"
        )
    model.built = True  # every layer and weight exists: saving keeps them
    custom_loss = any(overrides(model, m) for m in ("forward", "train_step", "compute_loss"))
    if not custom_loss and model._compile_loss is None and not model.losses:
        raise TapefitError(
            f"{name} has no loss: set compile.loss (e.g. compile.loss=mse), or return the loss "
            "from forward(), or write train_step"
        )

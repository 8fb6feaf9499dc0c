"""TapeModel: a `keras.Model` whose train and test steps are explicit `tf.GradientTape` code.

The step is written once, in the order of Keras' own TensorFlow step, so it reproduces `fit()`
exactly; subclasses change only `forward` (one batch -> loss and what the metrics need).
"""

from __future__ import annotations

import warnings
from typing import Any, NamedTuple

import keras
import tensorflow as tf


class StepOutput(NamedTuple):
    """What `TapeModel.forward` returns: the loss to minimise and what the metrics need."""

    loss: Any
    y: Any = None
    y_pred: Any = None
    sample_weight: Any = None


def unscale_loss_for_distribution(loss: Any) -> Any:
    """Undo the 1/replicas scaling Keras losses apply under `tf.distribute`, for reporting."""
    replicas = tf.distribute.get_strategy().num_replicas_in_sync
    if replicas > 1:
        loss = loss * tf.cast(replicas, loss.dtype)
    return loss


def batch_size_of(x: Any) -> Any:
    """The number of samples in a (possibly nested) batch of inputs."""
    first = next(t for t in tf.nest.flatten(x) if t is not None)
    return tf.shape(first)[0]


def _has_functional_arguments(args: tuple, kwargs: dict) -> bool:
    return len(args) == 2 or (len(args) == 1 and "outputs" in kwargs) or "outputs" in kwargs


@keras.saving.register_keras_serializable(package="tapefit")
class TapeModel(keras.Model):
    """A `keras.Model` trained by an explicit GradientTape step that behaves like Keras' own.

    Subclass it and define `call` (and, when the loss needs more than `compile`'s loss, override
    `forward`), or pass `inputs, outputs` as for a functional `keras.Model`. `fit`, `evaluate`,
    `predict`, callbacks, `History`, TensorBoard, mixed precision and `tf.distribute` all work.

    Example:

    ```python
    class Regressor(tapefit.TapeModel):
        def __init__(self, **kwargs):
            super().__init__(**kwargs)
            self.dense = keras.layers.Dense(1)

        def call(self, x, training=False):
            return self.dense(x)

    model = Regressor()
    model.compile(optimizer="adam", loss="mse")
    model.fit(x, y, epochs=2)
    ```
    """

    def __init__(self, *args: Any, network: keras.Model | None = None, **kwargs: Any) -> None:
        if _has_functional_arguments(args, kwargs):
            inputs = args[0] if args else kwargs.pop("inputs")
            outputs = args[1] if len(args) > 1 else kwargs.pop("outputs")
            args = ()
            # Wrap instead of becoming Functional: Keras would rewrite TapeModel's base classes.
            network = keras.Model(inputs=inputs, outputs=outputs)
        super().__init__(*args, **kwargs)
        self.network = network

    def call(self, inputs: Any, training: bool | None = None) -> Any:
        """Run the wrapped functional network; subclasses define their own `call`."""
        if self.network is None:
            raise NotImplementedError(
                f"{type(self).__name__} has no call(): define call() in the subclass "
                "or pass inputs and outputs as for a functional keras.Model"
            )
        return self.network(inputs, training=training)

    # -- the hook ---------------------------------------------------------------------------
    def forward(self, data: Any, training: bool) -> StepOutput:
        """Map one batch to its loss (and y, y_pred, sample_weight for the metrics).

        Runs inside the tape during training, so everything that must be differentiated belongs
        here. The default is Keras' own: `self(x)` then `compute_loss` (compiled loss plus
        `self.losses`).
        """
        x, y, sample_weight = keras.utils.unpack_x_y_sample_weight(data)
        y_pred = self(x, training=training)
        loss = self.compute_loss(
            x=x, y=y, y_pred=y_pred, sample_weight=sample_weight, training=training
        )
        return StepOutput(loss, y, y_pred, sample_weight)

    # -- public helpers for subclasses that write their own train_step ----------------------
    def track_loss(self, loss: Any, x: Any) -> None:
        """Add a batch's loss to the running `loss` metric, weighted by its batch size."""
        if self._loss_tracker is not None:
            self._loss_tracker.update_state(
                unscale_loss_for_distribution(loss), sample_weight=batch_size_of(x)
            )

    def apply_tape_gradients(
        self, tape: tf.GradientTape, scaled_loss: Any, variables: list | None = None
    ) -> list:
        """Differentiate `scaled_loss` and let the optimizer apply (and unscale) the gradients."""
        variables = self.trainable_weights if variables is None else variables
        if not variables:
            warnings.warn("The model does not have any trainable weights.", stacklevel=2)
            return []
        gradients = tape.gradient(scaled_loss, variables)
        self.optimizer.apply_gradients(zip(gradients, variables, strict=True))
        return gradients

    # -- the steps --------------------------------------------------------------------------
    def train_step(self, data: Any) -> dict:
        """One optimisation step: forward and loss inside the tape, then apply the gradients."""
        x = keras.utils.unpack_x_y_sample_weight(data)[0]
        with tf.GradientTape() as tape:
            out = self.forward(data, training=True)
            self.track_loss(out.loss, x)
            scaled_loss = self.optimizer.scale_loss(out.loss)
        self.apply_tape_gradients(tape, scaled_loss)
        return self.compute_metrics(x, out.y, out.y_pred, sample_weight=out.sample_weight)

    def test_step(self, data: Any) -> dict:
        """One evaluation step: the same forward pass without the tape."""
        x = keras.utils.unpack_x_y_sample_weight(data)[0]
        out = self.forward(data, training=False)
        self.track_loss(out.loss, x)
        return self.compute_metrics(x, out.y, out.y_pred, sample_weight=out.sample_weight)

    # -- saving -----------------------------------------------------------------------------
    def get_config(self) -> dict:
        """Serialise the wrapped network, or defer to Keras for subclasses."""
        if self.network is None:
            return super().get_config()
        return {
            "name": self.name,
            "trainable": self.trainable,
            "network": keras.saving.serialize_keras_object(self.network),
        }

    @classmethod
    def from_config(cls, config: dict, custom_objects: dict | None = None) -> TapeModel:
        """Rebuild a wrapped functional network; subclasses get their config as kwargs."""
        if "network" in config:
            config = dict(config)
            config["network"] = keras.saving.deserialize_keras_object(
                config["network"], custom_objects=custom_objects
            )
        return cls(**config)

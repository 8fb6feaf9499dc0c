"""TapeModel: a `keras.Model` whose train and test steps are explicit `tf.GradientTape` code.

The step is written once, in the order of Keras' own TensorFlow step, so it reproduces `fit()`
exactly; subclasses change only `forward` (one batch -> loss and what the metrics need), or
write their own `train_step` with the helpers `apply_tape_gradients` and `apply_gradients`.

The loss contract: every loss a step differentiates is written **as on one device** (the mean
over the batch the replica sees). TapeModel divides it by the replica count under
`tf.distribute` and multiplies it by the loss scale under `mixed_float16` when it takes the
gradient, and reports it un-scaled.
"""

from __future__ import annotations

import warnings
from collections.abc import Sequence
from typing import Any, NamedTuple

import keras
import tensorflow as tf

from tapefit.choices import parse_choice
from tapefit.errors import TapefitError
from tapefit.keras_compat import python_utils
from tapefit.step.constructor_config import (
    captured_arguments,
    constructor_keywords,
    model_config,
)
from tapefit.step.functional import FunctionalAccess
from tapefit.step.monitor import NonFiniteGuard
from tapefit.step.rebuild_check import check_rebuildable
from tapefit.step.symbolic import SymbolicBuild
from tapefit.step.tools import (
    GradientTelemetry,
    OnMissingGradients,
    OnNonFinite,
    StepState,
    all_finite,
    apply_if,
    checked_loss,
    drop_missing_gradients,
    is_loss_scaled,
    same_on_every_replica,
)


class StepOutput(NamedTuple):
    """What `TapeModel.forward` returns: the loss to minimise and what the metrics need."""

    loss: Any
    y: Any = None
    y_pred: Any = None
    sample_weight: Any = None


def replicas_in_sync() -> int:
    """How many replicas the current `tf.distribute` strategy runs (1 outside any)."""
    return tf.distribute.get_strategy().num_replicas_in_sync


def batch_size_of(x: Any) -> Any:
    """The number of samples in a (possibly nested) batch of inputs."""
    first = next(t for t in tf.nest.flatten(x) if t is not None)
    return tf.shape(first)[0]


def _has_functional_arguments(args: tuple, kwargs: dict) -> bool:
    return len(args) == 2 or (len(args) == 1 and "outputs" in kwargs) or "outputs" in kwargs


@keras.saving.register_keras_serializable(package="tapefit")
class TapeModel(FunctionalAccess, SymbolicBuild, keras.Model):
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

    def __new__(cls, *args: Any, **kwargs: Any) -> TapeModel:
        """Keras' `__new__`, plus the constructor's arguments as passed, which Keras'
        automatic config does not see (see `get_config`)."""
        instance = super().__new__(cls, *args, **kwargs)
        if cls.__init__ is not TapeModel.__init__:  # a subclass with a constructor of its own
            # as Keras stores its auto-config; in a holder Keras' tracking does not look into,
            # so that the sub-models are not tracked a second time
            instance._lock = False
            instance._constructor_arguments = captured_arguments(cls, args, kwargs)
            instance._lock = True
        return instance

    def __init__(
        self, *args: Any, functional_network: keras.Model | None = None, **kwargs: Any
    ) -> None:
        if _has_functional_arguments(args, kwargs):
            inputs = args[0] if args else kwargs.pop("inputs")
            outputs = args[1] if len(args) > 1 else kwargs.pop("outputs")
            args = ()
            # Wrap instead of becoming Functional: Keras would rewrite TapeModel's base classes
            # for good, and every subclassed TapeModel would then be a broken Functional. The
            # functional attributes below reach through to the wrapped network.
            functional_network = keras.Model(inputs=inputs, outputs=outputs)
        super().__init__(*args, **kwargs)
        self._functional_network = functional_network

    def call(self, inputs: Any, training: bool | None = None) -> Any:
        """Run the wrapped functional network; subclasses define their own `call`."""
        if self._functional_network is None:
            raise NotImplementedError(
                f"{type(self).__name__} has no call(): define call() in the subclass "
                "or pass inputs and outputs as for a functional keras.Model"
            )
        return self._functional_network(inputs, training=training)

    # -- compile: several optimizers and the step's policies --------------------------------
    def compile(
        self,
        optimizer: Any = "rmsprop",
        loss: Any = None,
        *,
        on_missing_gradients: str = "error",
        allow_missing_gradients: Sequence[str] = (),
        on_nonfinite: str = "ignore",
        gradient_telemetry: str = "off",
        **kwargs: Any,
    ) -> None:
        """`keras.Model.compile`, plus:

        Args:
            optimizer: one optimizer, or a dict `{name: optimizer}` for steps that update parts
                of the model separately (the first is `self.optimizer`, which counts steps).
            on_missing_gradients: `error` (default) or `warn` when a variable gets no gradient.
            allow_missing_gradients: variable paths (fnmatch patterns) allowed to get none.
            on_nonfinite: `ignore` (Keras' behaviour), `skip` or `stop` for NaN/inf steps.
            gradient_telemetry: `off`, `norm` or `histograms`: what `StepTelemetry` can read.
        """
        named = dict(optimizer) if isinstance(optimizer, dict) else {"optimizer": optimizer}
        if not named:
            raise TapefitError("compile(optimizer={}) names no optimizer: give at least one")
        names = list(named)
        super().compile(optimizer=named[names[0]], loss=loss, **kwargs)
        extra = {name: keras.optimizers.get(named[name]) for name in names[1:]}
        if self.dtype_policy.name == "mixed_float16":
            extra = {
                name: o if is_loss_scaled(o) else keras.optimizers.LossScaleOptimizer(o)
                for name, o in extra.items()
            }
        self._optimizer_names = names
        self._extra_optimizers = extra
        self._on_missing_gradients = parse_choice(
            OnMissingGradients, on_missing_gradients, "on_missing_gradients"
        )
        self._allow_missing_gradients = [str(pattern) for pattern in allow_missing_gradients]
        self._on_nonfinite = parse_choice(OnNonFinite, on_nonfinite, "on_nonfinite")
        self._gradient_telemetry = parse_choice(
            GradientTelemetry, gradient_telemetry, "gradient_telemetry"
        )
        keep = self._gradient_telemetry == GradientTelemetry.histograms
        self._step_state = StepState(self.trainable_variables if keep else (), keep_gradients=keep)
        self._compile_config.config.update(
            optimizer=named if len(named) > 1 else named[names[0]],
            on_missing_gradients=self._on_missing_gradients.value,
            allow_missing_gradients=self._allow_missing_gradients,
            on_nonfinite=self._on_nonfinite.value,
            gradient_telemetry=self._gradient_telemetry.value,
        )

    @property
    def optimizers(self) -> dict[str, keras.optimizers.Optimizer]:
        """Every optimizer by name (`{"optimizer": self.optimizer}` for a single one)."""
        names = getattr(self, "_optimizer_names", ["optimizer"])
        return {names[0]: self.optimizer, **getattr(self, "_extra_optimizers", {})}

    @optimizers.setter
    def optimizers(self, _: Any) -> None:
        raise TapefitError(
            f"{type(self).__name__}.optimizers is TapeModel's (every optimizer by name, set by "
            "compile(optimizer={...})): give your attribute another name"
        )

    def get_optimizer(self, name: str | None = None) -> keras.optimizers.Optimizer:
        """The optimizer called `name` (`None`: `self.optimizer`)."""
        if name is None:
            return self.optimizer
        optimizers = self.optimizers
        if name not in optimizers:
            raise TapefitError(
                f"no optimizer named {name!r}: compile(optimizer={{...}}) named "
                f"{', '.join(optimizers)}"
            )
        return optimizers[name]

    def get_compile_config(self) -> dict:
        """Keras' compile config plus which variables each optimizer updates, as positions in
        `trainable_variables` (layer names are not stable across instances), for reloading."""
        config = super().get_compile_config()
        if config:
            position = {id(v): i for i, v in enumerate(self.trainable_variables)}
            updated = {
                name: [
                    position.get(id(v))
                    for v in getattr(o, "inner_optimizer", o)._trainable_variables
                ]
                for name, o in self.optimizers.items()
                if o.built
            }
            config["optimizer_variables"] = {
                name: indices for name, indices in updated.items() if None not in indices
            }
        return config

    def compile_from_config(self, config: dict) -> None:
        """Recompile from a `.keras` file and build every optimizer on the variables it had,
        so all optimizer states reload."""
        if type(self).compile is not TapeModel.compile:
            # As Keras does for a custom compile(): its signature is the subclass's own, so
            # the saved arguments may not fit it. The weights load; compile again by hand.
            warnings.warn(
                f"compile() was not called as part of loading {type(self).__name__} because "
                "its compile() method is custom: override get_compile_config() and "
                "compile_from_config(config) as well, or call compile() after loading",
                stacklevel=2,
            )
            return
        config = dict(config)
        positions = config.pop("optimizer_variables", {})
        self.compile(**keras.saving.deserialize_keras_object(config))
        variables = self.trainable_variables
        for name, optimizer in self.optimizers.items():
            indices = positions.get(name, [])
            if indices and max(indices) < len(variables):
                optimizer.build([variables[i] for i in indices])

    # -- the loss ------------------------------------------------------------------------
    def compute_loss(
        self,
        x: Any = None,
        y: Any = None,
        y_pred: Any = None,
        sample_weight: Any = None,
        training: bool = True,
    ) -> Any:
        """Keras' compiled loss plus `self.losses`, as on one device (Keras divides it by the
        replica count under `tf.distribute`; TapeModel's step does that for every loss)."""
        loss = super().compute_loss(
            x=x, y=y, y_pred=y_pred, sample_weight=sample_weight, training=training
        )
        replicas = replicas_in_sync()
        return loss * tf.cast(replicas, loss.dtype) if replicas > 1 else loss

    def forward(self, data: Any, training: bool) -> StepOutput:
        """Map one batch to its loss (and y, y_pred, sample_weight for the metrics).

        Runs inside the tape during training, so everything that must be differentiated belongs
        here. Return the loss as on one device: a float scalar, the mean over this batch. The
        default is Keras' own: `self(x)` then `compute_loss` (compiled loss plus `self.losses`).
        """
        x, y, sample_weight = keras.utils.unpack_x_y_sample_weight(data)
        y_pred = self(x, training=training)
        # Keras' wrapper: an override of compute_loss without `training` (Keras < 3.3) works
        loss = self._compute_loss(
            x=x, y=y, y_pred=y_pred, sample_weight=sample_weight, training=training
        )
        return StepOutput(loss, y, y_pred, sample_weight)

    # -- public helpers for subclasses that write their own train_step ----------------------
    def track_loss(self, loss: Any, x: Any) -> None:
        """Add a batch's loss (as on one device) to the running `loss` metric; with
        `on_nonfinite` `skip` or `stop`, a NaN/inf loss is left out as its step is."""
        if self._loss_tracker is None:
            return
        weight = batch_size_of(x)
        if getattr(self, "_on_nonfinite", OnNonFinite.ignore) != OnNonFinite.ignore:
            finite = tf.math.is_finite(loss)
            loss = tf.where(finite, loss, tf.zeros_like(loss))
            weight = weight * tf.cast(finite, weight.dtype)
        self._loss_tracker.update_state(loss, sample_weight=weight)

    def gradient_scale(self, optimizer: str | None = None) -> Any:
        """What the gradient of a one-device loss is multiplied by before `optimizer` sees it:
        1/replicas under `tf.distribute`, times the loss scale under `mixed_float16` (None: 1)."""
        replicas, scaled = replicas_in_sync(), is_loss_scaled(self.get_optimizer(optimizer))
        if replicas == 1 and not scaled:
            return None
        factor = tf.constant(1.0 / replicas, tf.float32)
        return self.get_optimizer(optimizer).scale_loss(factor) if scaled else factor

    def apply_tape_gradients(
        self,
        tape: tf.GradientTape,
        loss: Any,
        variables: Sequence[Any] | None = None,
        optimizer: str | None = None,
    ) -> list:
        """Differentiate `loss` (as on one device) with respect to `variables` (default: all
        trainable ones) and apply the gradients with the optimizer called `optimizer`.

        Scaling for `tf.distribute` and mixed precision happens here; returns the gradients as
        the optimizer received them.
        """
        variables = list(self.trainable_weights if variables is None else variables)
        if not variables:
            warnings.warn("The model does not have any trainable weights.", stacklevel=2)
            return []
        loss = checked_loss(loss, "the loss given to apply_tape_gradients")
        scale = self.gradient_scale(optimizer)
        gradients = tape.gradient(loss, variables, output_gradients=scale)
        self._apply(gradients, variables, optimizer, scale, loss_finite=tf.math.is_finite(loss))
        return gradients

    def apply_gradients(
        self, gradients: Sequence[Any], variables: Sequence[Any], optimizer: str | None = None
    ) -> None:
        """Apply gradients of a one-device loss that were computed already (accumulation,
        gradient surgery), with the same scaling and checks as `apply_tape_gradients`."""
        scale = self.gradient_scale(optimizer)
        if scale is not None:
            gradients = [None if g is None else g * tf.cast(scale, g.dtype) for g in gradients]
        self._apply(list(gradients), list(variables), optimizer, scale, loss_finite=None)

    def _apply(
        self, gradients: list, variables: list, name: str | None, scale: Any, loss_finite: Any
    ) -> None:
        policy = getattr(self, "_on_missing_gradients", OnMissingGradients.error)
        allowed = getattr(self, "_allow_missing_gradients", [])
        gradients, variables = drop_missing_gradients(gradients, variables, policy, allowed)
        optimizer = self.get_optimizer(name)
        state: StepState | None = getattr(self, "_step_state", None)
        if state is not None and self._gradient_telemetry != GradientTelemetry.off:
            state.record_gradients(gradients, variables, scale)
        guard = getattr(self, "_on_nonfinite", OnNonFinite.ignore)
        if guard == OnNonFinite.ignore or state is None:
            optimizer.apply(gradients, variables)
            return
        # Under loss scaling, overflowing gradients are the LossScaleOptimizer's to skip (it
        # halves the scale); the guard then only skips steps whose loss itself is not finite.
        if is_loss_scaled(optimizer):
            finite = loss_finite if loss_finite is not None else tf.constant(True)
        else:
            finite = all_finite(gradients)
            if loss_finite is not None:
                finite = tf.logical_and(finite, loss_finite)
        if not optimizer.built:
            optimizer.build(variables)  # not inside the cond: variables are made once
        step = self.optimizer.iterations

        def skip() -> None:
            state.record_skip(step)

        apply_if(same_on_every_replica(finite), optimizer.apply, skip, args=(gradients, variables))

    # -- fit: the guard a stop needs -----------------------------------------------------------
    def fit(self, *args: Any, **kwargs: Any) -> Any:
        """Keras' `fit`, plus a `NonFiniteGuard` when `compile(on_nonfinite=...)` asks to stop
        at (or count) non-finite steps and the callbacks hold none: the step only skips, and
        the guard is what stops training with the epoch and step."""
        if len(args) > 5:  # callbacks given by position, as Keras' signature allows
            args = (*args[:5], self._with_guard(args[5]), *args[6:])
        else:
            kwargs["callbacks"] = self._with_guard(kwargs.get("callbacks"))
        return super().fit(*args, **kwargs)

    def _with_guard(self, callbacks: Any) -> Any:
        guard = getattr(self, "_on_nonfinite", OnNonFinite.ignore)
        if guard == OnNonFinite.ignore or isinstance(callbacks, keras.callbacks.CallbackList):
            return callbacks
        given = list(callbacks or [])
        if any(isinstance(callback, NonFiniteGuard) for callback in given):
            return callbacks
        return [NonFiniteGuard(), *given]

    # -- the steps --------------------------------------------------------------------------
    def train_step(self, data: Any) -> dict:
        """One optimisation step: forward and loss inside the tape, then apply the gradients."""
        x = keras.utils.unpack_x_y_sample_weight(data)[0]
        with tf.GradientTape() as tape:
            out = self.forward(data, training=True)
            loss = checked_loss(out.loss)
            self.track_loss(loss, x)
        self.apply_tape_gradients(tape, loss)
        return self.compute_metrics(x, out.y, out.y_pred, sample_weight=out.sample_weight)

    def test_step(self, data: Any) -> dict:
        """One evaluation step: the same forward pass without the tape."""
        x = keras.utils.unpack_x_y_sample_weight(data)[0]
        out = self.forward(data, training=False)
        self.track_loss(checked_loss(out.loss), x)
        return self.compute_metrics(x, out.y, out.y_pred, sample_weight=out.sample_weight)

    # -- saving -----------------------------------------------------------------------------
    def save(self, filepath: Any, overwrite: bool = True, zipped: bool | None = None, **kwargs):
        """Keras' `save`, refusing (one line, nothing written) a `.keras` file whose config
        cannot rebuild the model: a file tapefit writes loads again.

        Raises:
            UnsaveableModelError: the model's config cannot rebuild it; the message says why and how
                to fix it.
        """
        if str(filepath).endswith(".keras"):
            check_rebuildable(self)
        return super().save(filepath, overwrite=overwrite, zipped=zipped, **kwargs)

    # Marked as Keras' default get_config, so that Keras and the rebuild check can tell a
    # subclass that writes its own.
    @python_utils.default
    def get_config(self) -> dict:
        """The wrapped functional network's config, or the constructor's arguments as passed
        for a subclass without a get_config of its own (sub-models, layers, losses and metrics
        serialised; Keras would refuse such a model, or record the defaults of optional
        arguments instead of the values passed).

        Raises:
            NotImplementedError: an argument cannot be serialised, or was passed as
                positional-only or variadic (as Keras refuses).
        """
        holder = getattr(self, "_constructor_arguments", None)
        if holder is not None and python_utils.is_default(self.get_config):
            if holder.values is None:
                name = type(self).__name__
                raise NotImplementedError(
                    f"{name} cannot be saved to .keras: {holder.unsupported}, so its "
                    f"arguments cannot be passed back by name; give {name} a get_config() "
                    "and from_config()"
                )
            return model_config(self, holder.values)
        if self._functional_network is None:
            return super().get_config()
        return {
            "name": self.name,
            "trainable": self.trainable,
            "functional_network": keras.saving.serialize_keras_object(self._functional_network),
        }

    @classmethod
    def from_config(cls, config: dict, custom_objects: dict | None = None) -> TapeModel:
        """Rebuild a model from `get_config`'s config: its Keras objects deserialised, the
        rest passed to the constructor, `name`/`trainable` set afterwards when the
        constructor cannot take them."""
        keywords, attributes = constructor_keywords(config, custom_objects)
        if "functional_network" in keywords:
            keywords["functional_network"] = keras.saving.deserialize_keras_object(
                keywords["functional_network"], custom_objects=custom_objects
            )
        try:
            model = cls(**keywords)
        except TypeError as error:
            raise TypeError(
                f"{cls.__name__} cannot be rebuilt from its saved config ({error}); give it a "
                "from_config() that matches its get_config()"
            ) from None
        for key, value in attributes.items():
            setattr(model, key, value)
        return model


TapeModel.from_config.__func__.rebuilds_by_constructor = True  # for the rebuild check

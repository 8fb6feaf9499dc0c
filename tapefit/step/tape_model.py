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
from tapefit.keras_compat import python_utils, untracked_attributes
from tapefit.step.constructor_config import (
    captured_arguments,
    constructor_keywords,
    forwards_all_arguments,
    model_config,
)
from tapefit.step.functional import FunctionalAccess
from tapefit.step.loss_contract import batch_size_of, replicas_in_sync
from tapefit.step.nonfinite_guard import NonFiniteGuard
from tapefit.step.optimizer_variables import build_at_positions, optimizer_positions
from tapefit.step.rebuild_check import check_rebuildable
from tapefit.step.step_guards import (
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
from tapefit.step.symbolic import SymbolicBuild


class StepOutput(NamedTuple):
    """What `TapeModel.forward` returns: the loss to minimise and what the metrics need.

    Keeping the loss and the metrics' inputs apart lets `forward` differentiate something
    other than what the metrics compare (a Siamese loss sees pair embeddings, its metrics the
    cosine scores). The step differentiates `loss` and passes the rest to `compute_metrics`.

    Attributes:
        loss: The scalar loss of the batch, as on one device (the mean over the batch).
        y: The targets the compiled metrics compare with (None: no target metrics).
        y_pred: The predictions the compiled metrics read.
        sample_weight: Per-sample weights for the metrics, if the data carry them.

    Examples:
        >>> import tapefit
        >>> out = tapefit.StepOutput(loss=0.5, y=[1], y_pred=[0.9])
        >>> out.loss, out.sample_weight
        (0.5, None)
    """

    loss: Any
    y: Any = None
    y_pred: Any = None
    sample_weight: Any = None


def _has_functional_arguments(args: tuple, kwargs: dict) -> bool:
    return len(args) == 2 or (len(args) == 1 and "outputs" in kwargs) or "outputs" in kwargs


@keras.saving.register_keras_serializable(package="tapefit")
class TapeModel(FunctionalAccess, SymbolicBuild, keras.Model):
    """A `keras.Model` trained by an explicit GradientTape step that behaves like Keras' own.

    The step is tape code you can read and change (a loss that needs more than `call`'s
    output, several optimizers, gradient surgery) while `fit`, `evaluate`, `predict`,
    callbacks, `History`, TensorBoard, mixed precision and `tf.distribute` keep working as for
    any `keras.Model`. Subclass it and define `call` (and, when the loss needs more than
    `compile`'s loss, override `forward`), or pass `inputs, outputs` as for a functional
    `keras.Model`.

    Args:
        *args: `inputs, outputs` for a functional model (they may also be given by keyword),
            otherwise `keras.Model`'s own positional arguments.
        functional_network: A functional `keras.Model` to wrap; what `from_config` passes
            back. Give `inputs, outputs` instead.
        **kwargs: `keras.Model`'s keyword arguments (`name`, `trainable`, `dtype`, ...).

    Examples:
        A subclassed model:

        >>> import keras, numpy as np, tapefit
        >>> class Regressor(tapefit.TapeModel):
        ...     def __init__(self, **kwargs):
        ...         super().__init__(**kwargs)
        ...         self.dense = keras.layers.Dense(1)
        ...
        ...     def call(self, x, training=False):
        ...         return self.dense(x)
        >>> model = Regressor()
        >>> model.compile(optimizer="sgd", loss="mse")
        >>> x, y = np.ones((8, 2)), np.ones((8, 1))
        >>> history = model.fit(x, y, epochs=2, verbose=0)
        >>> len(history.history["loss"])
        2

        A functional one, as `keras.Model(inputs, outputs)`:

        >>> inputs = keras.Input((2,))
        >>> model = tapefit.TapeModel(inputs, keras.layers.Dense(1)(inputs))
        >>> model.compile(optimizer="sgd", loss="mse")
        >>> model.evaluate(x, y, verbose=0) >= 0.0
        True
    """

    def __new__(cls, *args: Any, **kwargs: Any) -> TapeModel:
        """Keras' `__new__`, plus the constructor's arguments as passed, which Keras'
        automatic config does not see (see `get_config`)."""
        instance = super().__new__(cls, *args, **kwargs)
        if cls.__init__ is not TapeModel.__init__:  # a subclass with a constructor of its own
            # as Keras stores its auto-config; in a holder Keras' tracking does not look into,
            # so that the sub-models are not tracked a second time
            with untracked_attributes(instance):
                instance._constructor_arguments = captured_arguments(cls, args, kwargs)
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
        """Run the wrapped functional network; subclasses define their own `call`.

        A functional `TapeModel(inputs, outputs)` computes its outputs here; a subclass
        replaces this method as it would `keras.Model.call`.

        Args:
            inputs: A batch of inputs, structured as the network's `inputs`.
            training: Whether layers such as dropout run in training mode.

        Returns:
            The network's outputs for `inputs`.

        Raises:
            NotImplementedError: a subclass without a `call` of its own and no functional
                network to run.
        """
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
        """Configure the model for training: `keras.Model.compile` plus the step's policies.

        The policies say what the step does when something goes wrong that Keras' own step
        passes over silently (a variable the loss never reaches, a NaN loss), and what it
        records for `StepTelemetry`; several optimizers let a step update parts of the
        model separately (a GAN's generator and discriminator).

        Args:
            optimizer: One optimizer (name, instance or config), or a dict
                `{name: optimizer}` for steps that update parts of the model separately; the
                first is `self.optimizer`, which counts the steps.
            loss: The loss `compute_loss` applies to `call`'s output, as in Keras.
            on_missing_gradients: `error` (default) or `warn` when a variable gets no
                gradient.
            allow_missing_gradients: Variable paths (fnmatch patterns) allowed to get none.
            on_nonfinite: `ignore` (Keras' behaviour), `skip` (the optimizer step is left out
                and counted) or `stop` (training ends with an error naming the step) for
                NaN/inf losses or gradients.
            gradient_telemetry: `off`, `norm` or `histograms`: what `StepTelemetry` can read.
            **kwargs: `keras.Model.compile`'s other arguments (`metrics`, `jit_compile`,
                `steps_per_execution`, ...).

        Raises:
            TapefitError: `optimizer` is an empty dict, or a policy is not one of its values.

        Examples:
            >>> import keras, tapefit
            >>> inputs = keras.Input((2,))
            >>> model = tapefit.TapeModel(inputs, keras.layers.Dense(1)(inputs))
            >>> model.compile(
            ...     optimizer={"main": "adam", "slow": keras.optimizers.SGD(0.01)},
            ...     loss="mse",
            ...     on_nonfinite="skip",
            ...     allow_missing_gradients=["*/bias"],
            ... )
            >>> sorted(model.optimizers)
            ['main', 'slow']
            >>> model.compile(optimizer="sgd", on_nonfinite="retry")
            Traceback (most recent call last):
            ...
            tapefit.errors.TapefitError: on_nonfinite='retry' is unknown: choose one of ...
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
        """Every optimizer by name (`{"optimizer": self.optimizer}` for a single one).

        The first is `self.optimizer`; the names are those given to
        `compile(optimizer={...})`, which `get_optimizer` and the gradient helpers take.
        The attribute is read-only: a subclass cannot assign its own `optimizers`.

        Examples:
            >>> import keras, tapefit
            >>> inputs = keras.Input((2,))
            >>> model = tapefit.TapeModel(inputs, keras.layers.Dense(1)(inputs))
            >>> model.compile(optimizer="adam", loss="mse")
            >>> list(model.optimizers)
            ['optimizer']
        """
        names = getattr(self, "_optimizer_names", ["optimizer"])
        return {names[0]: self.optimizer, **getattr(self, "_extra_optimizers", {})}

    @optimizers.setter
    def optimizers(self, _: Any) -> None:
        raise TapefitError(
            f"{type(self).__name__}.optimizers is TapeModel's (every optimizer by name, set by "
            "compile(optimizer={...})): give your attribute another name"
        )

    def get_optimizer(self, name: str | None = None) -> keras.optimizers.Optimizer:
        """The optimizer called `name` in `compile(optimizer={...})`.

        A step that updates parts of the model separately looks its optimizers up by name.

        Args:
            name: A name given to `compile`; None: `self.optimizer`, the first.

        Returns:
            The optimizer (a `LossScaleOptimizer` under `mixed_float16`).

        Raises:
            TapefitError: no optimizer has that name.

        Examples:
            >>> import keras, tapefit
            >>> inputs = keras.Input((2,))
            >>> model = tapefit.TapeModel(inputs, keras.layers.Dense(1)(inputs))
            >>> model.compile(optimizer={"generator": "adam", "critic": "sgd"}, loss="mse")
            >>> model.get_optimizer("critic") is model.optimizers["critic"]
            True
            >>> model.get_optimizer() is model.optimizer is model.get_optimizer("generator")
            True
        """
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
        """Keras' compile config plus which variables each optimizer updates.

        The variables are given as positions in `trainable_variables` (layer names are not
        stable across instances), so that `compile_from_config` can build every optimizer
        and a `.keras` file reloads all optimizer states.

        Returns:
            Keras' compile config with an `optimizer_variables` entry (empty before
            `compile`).
        """
        config = super().get_compile_config()
        if config:
            positions = optimizer_positions(self.trainable_variables, self.optimizers)
            config["optimizer_variables"] = positions
        return config

    def compile_from_config(self, config: dict) -> None:
        """Recompile from a `.keras` file and build every optimizer on the variables it had.

        Building the optimizers before the weights load is what lets every optimizer's state
        (not only the first's) reload. A subclass with a `compile` of its own is not
        recompiled (as Keras does): a warning says so.

        Args:
            config: What `get_compile_config` returned when the model was saved.
        """
        if type(self).compile is not TapeModel.compile and not forwards_all_arguments(
            type(self).compile
        ):
            # As Keras does for a custom compile(): its signature is the subclass's own, so
            # the saved arguments may not fit it (one that takes *args, **kwargs and passes
            # them on to TapeModel's is recompiled). The weights load; compile again by hand.
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
        build_at_positions(self.optimizers, self.trainable_variables, positions)

    # -- the loss ------------------------------------------------------------------------
    def compute_loss(
        self,
        x: Any = None,
        y: Any = None,
        y_pred: Any = None,
        sample_weight: Any = None,
        training: bool = True,
    ) -> Any:
        """Keras' compiled loss plus `self.losses`, as on one device.

        Keras divides this loss by the replica count under `tf.distribute`; TapeModel undoes
        that here, because its step scales every loss it differentiates (yours in `forward`
        too) when it takes the gradient.

        Args:
            x: The batch's inputs.
            y: The targets.
            y_pred: The model's predictions.
            sample_weight: Per-sample weights, if any.
            training: Whether the loss is computed for a training step.

        Returns:
            The scalar loss: the mean over the batch this replica sees.

        Examples:
            >>> import keras, numpy as np, tapefit
            >>> inputs = keras.Input((1,))
            >>> model = tapefit.TapeModel(inputs, inputs)
            >>> model.compile(loss="mse")
            >>> float(model.compute_loss(y=np.zeros((2, 1)), y_pred=np.full((2, 1), 2.0)))
            4.0
        """
        loss = super().compute_loss(
            x=x, y=y, y_pred=y_pred, sample_weight=sample_weight, training=training
        )
        replicas = replicas_in_sync()
        return loss * tf.cast(replicas, loss.dtype) if replicas > 1 else loss

    def forward(self, data: Any, training: bool) -> StepOutput:
        """Map one batch to its loss (and y, y_pred, sample_weight for the metrics).

        The one method to override for a loss that needs more than `compile`'s loss of
        `call`'s output. It runs inside the tape during training, so everything that must be
        differentiated belongs here, and `test_step` runs it too. Return the loss as on one
        device: a float scalar, the mean over this batch. The default is Keras' own:
        `self(x)` then `compute_loss` (compiled loss plus `self.losses`).

        Args:
            data: One batch as the dataset yields it: `x`, `(x, y)` or
                `(x, y, sample_weight)`.
            training: True in `train_step` (inside the tape), False in `test_step`.

        Returns:
            The loss and what the compiled metrics compare.

        Examples:
            >>> import keras, numpy as np, tensorflow as tf, tapefit
            >>> class Penalised(tapefit.TapeModel):
            ...     def forward(self, data, training):
            ...         out = super().forward(data, training)
            ...         penalty = tf.add_n([tf.reduce_sum(w**2) for w in self.trainable_weights])
            ...         return out._replace(loss=out.loss + 0.01 * penalty)
            >>> inputs = keras.Input((2,))
            >>> model = Penalised(inputs, keras.layers.Dense(1)(inputs))
            >>> model.compile(optimizer="sgd", loss="mse")
            >>> out = model.forward((np.ones((4, 2)), np.ones((4, 1))), training=False)
            >>> tuple(out.y_pred.shape), tuple(out.loss.shape)
            ((4, 1), ())
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
        """Add a batch's loss (as on one device) to the running `loss` metric.

        A `train_step` of your own calls it so that `fit`'s logs and `History` show the loss
        as Keras' own step would (weighted by the batch size). With `on_nonfinite` `skip` or
        `stop`, a NaN/inf loss is left out, as its step is.

        Args:
            loss: The batch's scalar loss.
            x: The batch's inputs; their first dimension is the loss's weight.

        Examples:
            >>> import keras, numpy as np, tapefit
            >>> inputs = keras.Input((2,))
            >>> model = tapefit.TapeModel(inputs, keras.layers.Dense(1)(inputs))
            >>> model.compile(optimizer="sgd", loss="mse")
            >>> model.track_loss(2.0, np.ones((4, 2)))
            >>> model.track_loss(5.0, np.ones((2, 2)))
            >>> float(model.metrics[0].result())  # the `loss` metric: (4 * 2 + 2 * 5) / 6
            3.0
        """
        if self._loss_tracker is None:
            return
        weight = batch_size_of(x)
        if getattr(self, "_on_nonfinite", OnNonFinite.ignore) != OnNonFinite.ignore:
            finite = tf.math.is_finite(loss)
            loss = tf.where(finite, loss, tf.zeros_like(loss))
            weight = weight * tf.cast(finite, weight.dtype)
        self._loss_tracker.update_state(loss, sample_weight=weight)

    def gradient_scale(self, optimizer: str | None = None) -> Any:
        """What the gradient of a one-device loss is multiplied by before `optimizer` sees it.

        A step that calls `tape.gradient` itself passes this as `output_gradients`, so that
        its gradients are those `apply_tape_gradients` would compute: 1/replicas under
        `tf.distribute`, times the loss scale under `mixed_float16`.

        Args:
            optimizer: The optimizer's name in `compile`; None: `self.optimizer`.

        Returns:
            A float32 scalar tensor, or None when the factor is 1 (one replica, no loss
            scaling).

        Raises:
            TapefitError: no optimizer has that name.

        Examples:
            >>> import keras, tapefit
            >>> inputs = keras.Input((2,))
            >>> model = tapefit.TapeModel(inputs, keras.layers.Dense(1)(inputs))
            >>> model.compile(optimizer="sgd", loss="mse")
            >>> model.gradient_scale() is None  # one device, float32
            True
        """
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
        """Differentiate `loss` and apply the gradients with the optimizer called `optimizer`.

        The helper a `train_step` of your own calls instead of `tape.gradient` and
        `optimizer.apply`: the scaling for `tf.distribute` and mixed precision and the
        `compile` policies (missing gradients, non-finite steps, telemetry) happen here, as
        in TapeModel's own step.

        Args:
            tape: The tape the loss was computed under.
            loss: The scalar loss, as on one device (the mean over the replica's batch).
            variables: The variables to update; None: all trainable ones.
            optimizer: The optimizer's name in `compile`; None: `self.optimizer`.

        Returns:
            The gradients as the optimizer received them (empty when there are no
            variables to update, with a warning).

        Raises:
            TapefitError: `loss` is not a floating scalar, a variable gets no gradient under
                `on_missing_gradients="error"`, or no optimizer has that name.

        Examples:
            >>> import keras, numpy as np, tensorflow as tf, tapefit
            >>> inputs = keras.Input((2,))
            >>> model = tapefit.TapeModel(inputs, keras.layers.Dense(1)(inputs))
            >>> model.compile(optimizer="sgd", loss="mse")
            >>> batch = (np.ones((4, 2)), np.ones((4, 1)))
            >>> with tf.GradientTape() as tape:
            ...     loss = model.forward(batch, training=True).loss
            >>> gradients = model.apply_tape_gradients(tape, loss)
            >>> len(gradients), int(model.optimizer.iterations)
            (2, 1)
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
        """Apply gradients of a one-device loss that were computed already.

        For steps that change the gradients between the tape and the optimizer
        (accumulation, gradient surgery): the same scaling and checks as
        `apply_tape_gradients`, which are then not lost.

        Args:
            gradients: One gradient per variable (None where the loss does not reach it),
                unscaled, as `tape.gradient` returns them.
            variables: The variables the gradients belong to.
            optimizer: The optimizer's name in `compile`; None: `self.optimizer`.

        Raises:
            TapefitError: a variable has no gradient under `on_missing_gradients="error"`,
                or no optimizer has that name.

        Examples:
            >>> import keras, numpy as np, tensorflow as tf, tapefit
            >>> inputs = keras.Input((2,))
            >>> model = tapefit.TapeModel(inputs, keras.layers.Dense(1)(inputs))
            >>> model.compile(optimizer="sgd", loss="mse")
            >>> with tf.GradientTape() as tape:
            ...     loss = model.forward((np.ones((4, 2)), np.ones((4, 1))), training=True).loss
            >>> gradients = tape.gradient(loss, model.trainable_variables)
            >>> clipped = [tf.clip_by_norm(g, 1.0) for g in gradients]
            >>> model.apply_gradients(clipped, model.trainable_variables)
            >>> int(model.optimizer.iterations)
            1
        """
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
        """Keras' `fit`, with the optimizers built first and the non-finite guard added.

        The guard is the one `compile(on_nonfinite=...)` needs. Once every layer is built,
        each optimizer is built on its variables (`build_optimizers_ahead`) before the first
        step is traced, so TensorFlow traces it once; Keras' own `fit` traces a fresh model's
        step twice. With `on_nonfinite` `skip` or `stop` a `NonFiniteGuard` callback is added
        unless the callbacks hold one: the step only skips a non-finite step, and the guard is
        what stops training with the epoch and step (`stop`) or logs `skipped_steps` (`skip`).

        Args:
            *args: `keras.Model.fit`'s positional arguments (`x`, `y`, `batch_size`, ...).
            **kwargs: `keras.Model.fit`'s keyword arguments.

        Returns:
            Keras' `History`.

        Raises:
            TapefitError: with `on_nonfinite="stop"`, at the first non-finite step.
        """
        self._build_optimizers_before_fit()  # the first step is then traced once, not twice
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
        """One optimisation step: forward and loss inside the tape, then apply the gradients.

        Written in the order of Keras' own TensorFlow step, so `fit` gives the same results;
        override `forward` rather than this, or write your own with `apply_tape_gradients`.

        Args:
            data: One batch as the dataset yields it: `x`, `(x, y)` or
                `(x, y, sample_weight)`.

        Returns:
            The metrics' current results by name (`loss` first): what `fit` logs.

        Raises:
            TapefitError: `forward`'s loss is not a floating scalar, or a variable gets no
                gradient under `on_missing_gradients="error"`.
        """
        x = keras.utils.unpack_x_y_sample_weight(data)[0]
        with tf.GradientTape() as tape:
            out = self.forward(data, training=True)
            loss = checked_loss(out.loss)
            self.track_loss(loss, x)
        self.apply_tape_gradients(tape, loss)
        return self.compute_metrics(x, out.y, out.y_pred, sample_weight=out.sample_weight)

    def test_step(self, data: Any) -> dict:
        """One evaluation step: the same `forward` pass, without the tape.

        `evaluate` and the validation of `fit` run it, so validation sees the training loss.

        Args:
            data: One batch as the dataset yields it: `x`, `(x, y)` or
                `(x, y, sample_weight)`.

        Returns:
            The metrics' current results by name (`loss` first).

        Raises:
            TapefitError: `forward`'s loss is not a floating scalar.
        """
        x = keras.utils.unpack_x_y_sample_weight(data)[0]
        out = self.forward(data, training=False)
        self.track_loss(checked_loss(out.loss), x)
        return self.compute_metrics(x, out.y, out.y_pred, sample_weight=out.sample_weight)

    # -- saving -----------------------------------------------------------------------------
    def save(self, filepath: Any, overwrite: bool = True, zipped: bool | None = None, **kwargs):
        """Keras' `save`, refusing a `.keras` file whose config cannot rebuild the model.

        Keras writes such a file and fails only when it is loaded; tapefit refuses it at
        save time (one line, nothing written), so a file tapefit writes loads again.

        Args:
            filepath: Where to save; a `.keras` path is checked first.
            overwrite: Whether to replace an existing file.
            zipped: Whether Keras zips the `.keras` file (None: Keras' default).
            **kwargs: Keras' other `save` arguments.

        Returns:
            What `keras.Model.save` returns.

        Raises:
            UnsaveableModelError: the model's config cannot rebuild it; the message says why
                and how to fix it.

        Examples:
            >>> import keras, tapefit
            >>> class Scaled(tapefit.TapeModel):
            ...     def __init__(self, factor, **kwargs):
            ...         super().__init__(**kwargs)
            ...         self.dense = keras.layers.Dense(1)
            ...         self.factor = factor
            ...
            ...     def call(self, x, training=False):
            ...         return self.factor * self.dense(x)
            >>> Scaled(factor=object()).save("scaled.keras")
            Traceback (most recent call last):
            ...
            tapefit.errors.UnsaveableModelError: Scaled cannot be saved ...
        """
        if str(filepath).endswith(".keras"):
            check_rebuildable(self)
        return super().save(filepath, overwrite=overwrite, zipped=zipped, **kwargs)

    # Marked as Keras' default get_config, so that Keras and the rebuild check can tell a
    # subclass that writes its own.
    @python_utils.default
    def get_config(self) -> dict:
        """The config `from_config` rebuilds the model from, for `.keras` files and clones.

        For `TapeModel(inputs, outputs)`, the wrapped functional network's config; for a
        subclass without a `get_config` of its own, the constructor's arguments as passed
        (sub-models, layers, losses and metrics serialised), where Keras would refuse such a
        model, or record the defaults of optional arguments instead of the values passed.

        Returns:
            A JSON-serialisable dict.

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
        """Rebuild a model from `get_config`'s config, as `keras.saving.load_model` does.

        The config's Keras objects are deserialised and the rest passed to the constructor;
        `name`/`trainable` are set afterwards when the constructor cannot take them.

        Args:
            config: What `get_config` returned.
            custom_objects: Classes and functions the config names that Keras does not know.

        Returns:
            A new model of this class with fresh weights (a `.keras` file loads the saved
            ones into it afterwards).

        Raises:
            TypeError: the constructor does not accept the config's arguments.

        Examples:
            >>> import keras, tapefit
            >>> inputs = keras.Input((2,))
            >>> model = tapefit.TapeModel(inputs, keras.layers.Dense(1)(inputs))
            >>> clone = tapefit.TapeModel.from_config(model.get_config())
            >>> [w.shape for w in clone.get_weights()]
            [(2, 1), (1,)]
        """
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

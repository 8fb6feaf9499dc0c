"""How a TapeModel gets built: from the dataset's element spec through its own step (under
`tf.distribute`, and before a run's training), and, after its first traced step, marked built
when the step built every layer without calling `self(x)`; the trace also notes the stateful
random ops the step uses, which no checkpoint can replay. Its optimizers are built before the
first step is traced, on the variables each updates (`variables_by_optimizer`), so TensorFlow
traces the step once."""

from __future__ import annotations

from typing import Any

import keras
import tensorflow as tf

from tapefit.keras_compat import compiled_parts, compute_output_spec, flatten_layers
from tapefit.step.step_guards import in_multi_worker_mode, with_leading_axis

# TensorFlow's global-seeded random ops (tf.random.normal and friends): their state lives in the
# op itself, so no checkpoint can restore it. keras.random and tf.random.Generator are stateless
# ops over a state variable, which checkpoints carry.
STATEFUL_RANDOM_OPS = frozenset(
    {
        "RandomStandardNormal",
        "RandomUniform",
        "RandomUniformInt",
        "TruncatedNormal",
        "RandomShuffle",
        "Multinomial",
        "RandomGamma",
        "RandomPoissonV2",
        "ParameterizedTruncatedNormal",
    }
)


class SymbolicBuild:
    """The building side of TapeModel (a mixin before `keras.Model`)."""

    # -- Keras 3 under tf.distribute ------------------------------------------------------
    # Under a strategy, Keras' TF trainer builds every variable up front from the first batch
    # of a fresh iterator, calling the model for `y_pred`. That costs the shuffle an epoch (the
    # data order then differs from a run without a strategy), fails in multi-worker mode on a
    # nested batch (keras-team/keras#20585), and misses what the tape step computes (a Siamese
    # loss takes pair embeddings, not `call`'s scores). TapeModel builds from the dataset's
    # element spec through its own test step instead.
    def _maybe_symbolic_build(self, iterator: Any = None, data_batch: Any = None) -> None:
        strategy = getattr(self, "_distribute_strategy", None)
        adapter = getattr(iterator, "data_adapter", None)
        if strategy is None or adapter is None or data_batch is not None:
            return super()._maybe_symbolic_build(iterator=iterator, data_batch=data_batch)
        batch = tf.nest.map_structure(
            lambda spec: keras.KerasTensor(spec.shape, spec.dtype.name),
            adapter.get_tf_dataset().element_spec,
        )
        with strategy.scope():
            unbuilt = not all(layer.built for layer in flatten_layers(self)) or any(
                part is not None and not part.built for part in compiled_parts(self)
            )
            if unbuilt:
                self.build_from_batch(batch)
            self.build_optimizers_ahead()
            if self.optimizer is not None and not self.optimizer.built:  # several, undeclared
                self.optimizer.build(self.trainable_variables)
            self._post_build()

    def variables_by_optimizer(self) -> dict[str, list]:
        """The variables each optimizer updates, where the model knows them before its step.

        `fit` builds each optimizer on them before the first step is traced. An optimizer
        that a step builds itself creates variables while TensorFlow traces, and TensorFlow
        then traces the whole step a second time (to check that later calls create none).
        With one optimizer it is every trainable variable; a model with several returns
        `{}` unless it says which part each one updates, as a GAN can:
        `{"critic": self.critic.trainable_variables, "generator": ...}`.

        Returns:
            Optimizer name (as in `compile`) to the variables it updates.

        Examples:
            >>> import keras, tapefit
            >>> inputs = keras.Input((2,))
            >>> model = tapefit.TapeModel(inputs, keras.layers.Dense(1)(inputs))
            >>> model.compile(optimizer={"main": "adam", "slow": "sgd"}, loss="mse")
            >>> model.variables_by_optimizer()
            {}
            >>> model.compile(optimizer="adam", loss="mse")
            >>> [len(v) for v in model.variables_by_optimizer().values()]
            [2]
        """
        optimizers = self.optimizers
        if len(optimizers) != 1:
            return {}
        return {name: list(self.trainable_variables) for name in optimizers}

    def build_optimizers_ahead(self) -> None:
        """Build each optimizer on the variables `variables_by_optimizer` gives it.

        Done before the first step is traced; an optimizer built already is left as it is.
        `fit` calls it once every layer is built: a step that built an optimizer itself would
        create variables while TensorFlow traces it, and TensorFlow would then trace the whole
        step again.

        Examples:
            >>> import keras, tapefit
            >>> inputs = keras.Input((2,))
            >>> model = tapefit.TapeModel(inputs, keras.layers.Dense(1)(inputs))
            >>> model.compile(optimizer="adam", loss="mse")
            >>> model.build_optimizers_ahead()
            >>> model.optimizer.built
            True
        """
        for name, variables in self.variables_by_optimizer().items():
            optimizer = self.get_optimizer(name)
            if variables and not optimizer.built:
                optimizer.build(variables)

    def _build_optimizers_before_fit(self) -> None:
        """`build_optimizers_ahead` before Keras' `fit` traces the first step, where every
        layer is built; under a model's strategy `_maybe_symbolic_build` does it instead."""
        if getattr(self, "optimizer", None) is None or getattr(self, "_distribute_strategy", None):
            return
        layers = flatten_layers(self, include_self=False)
        if self.weights and all(layer.built or not builds_weights(layer) for layer in layers):
            with self.distribute_strategy.scope():
                self.build_optimizers_ahead()

    def build_from_batch(self, batch: Any) -> None:
        """Build every layer from a batch of `KerasTensor`s, without running anything.

        The build goes through `test_step` (so a loss's own layers are built too), or, for a
        model whose own `train_step` needs no compiled loss, through `call` on the batch's
        inputs. TapeModel builds this way under `tf.distribute`, from the dataset's element
        spec.

        Args:
            batch: A batch as the dataset yields it, of `keras.KerasTensor`s.

        Raises:
            ValueError: the step cannot run on the batch (Keras' error, re-raised).
        """
        try:
            compute_output_spec(self.test_step, batch)
        except ValueError as error:
            custom_step = type(self).train_step.__qualname__ != "TapeModel.train_step"
            if "No loss to compute" not in str(error) or not custom_step:
                raise
            x = keras.utils.unpack_x_y_sample_weight(batch)[0]
            compute_output_spec(lambda inputs: self(inputs), x)

    # Keras averages a multi-worker step's logs with `strategy.reduce("MEAN", value, axis=0)`,
    # which fails on a scalar: give scalars a leading axis (multi-worker runs only).
    def _make_function(self, step_function: Any) -> Any:
        if in_multi_worker_mode(getattr(self, "_distribute_strategy", None)):
            step_function = with_leading_axis(step_function)  # the mean over axis 0 works
        return super()._make_function(self._marking_built(step_function))

    def mark_built(self, x: Any) -> None:
        """Count the model as built, its step having built every layer.

        `x`'s shape is recorded when it is one tensor, so that a reloaded model builds from
        `call(x)` before its weights load.

        Args:
            x: The inputs of the batch the step was traced with.
        """
        self.built = True
        if hasattr(x, "shape") and hasattr(x, "dtype"):
            self._build_shapes_dict = {"input_shape": (None, *tuple(x.shape)[1:])}

    def _marking_built(self, step_function: Any) -> Any:
        """`step_function`, after which (once, when it is traced) a model whose step built
        every layer without calling `self(x)` counts as built (Keras would otherwise save it
        without its weights, with only a warning), and the stateful random ops the step uses
        are noted (`_stateful_random_ops`: a resume cannot replay them)."""

        def step(data: Any) -> Any:
            outputs = step_function(data)
            if not tf.executing_eagerly():  # tracing: which random ops does the step use?
                ops = {op.type for op in tf.compat.v1.get_default_graph().get_operations()}
                if ops & STATEFUL_RANDOM_OPS:
                    self._stateful_random_ops = sorted(ops & STATEFUL_RANDOM_OPS)
            if not self.built and self.weights:
                layers = flatten_layers(self, include_self=False)
                if all(layer.built for layer in layers):
                    self.mark_built(keras.utils.unpack_x_y_sample_weight(data)[0])
            return outputs

        return step


def builds_weights(layer: keras.layers.Layer) -> bool:
    """Whether `layer`'s class creates weights in `build` (a lookup layer inside
    `TextVectorization` or a tokenizer keeps the base `build`: its tables are not weights).

    Examples:
        >>> import keras
        >>> builds_weights(keras.layers.Dense(2)), builds_weights(keras.layers.Dropout(0.5))
        (True, False)
    """
    return type(layer).build is not keras.layers.Layer.build

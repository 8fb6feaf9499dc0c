"""Every private Keras API tapefit uses, in one place.

Keras keeps these under `keras.src` or behind a leading underscore, which may change in any
release, so tapefit imports and reads them only here and bounds Keras to the versions its
suite has run on (`pyproject.toml`). Each name says what it is for; `tests/test_architecture.py`
fails on a `keras.src` import, or a read of a private Keras attribute, anywhere else.
"""

import copy
import importlib
import random
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import numpy as np
from keras.src import backend as keras_backend  # the fused LSTM/GRU kernels an RNN tries
from keras.src.backend import compute_output_spec  # a symbolic run of a step, for building
from keras.src.backend.common import global_state  # Keras' name counters, kept by save checks
from keras.src.models.functional import Functional  # Keras' own functional model class
from keras.src.saving import saving_lib  # H5IOStore: Keras' weights file, in memory
from keras.src.saving.serialization_lib import ObjectSharingScope  # shared sub-objects
from keras.src.utils import python_utils  # @default, is_default, pythonify_logs

# Keras' cuDNN argument rules (a module: its package exports a function of the same name)
tensorflow_rnn = importlib.import_module("keras.src.backend.tensorflow.rnn")


def moving_average_pairs(optimizer) -> list:
    """(model variable, its moving average) for every variable an EMA optimizer
    (`use_ema=True`) updates; [] without EMA or before the optimizer is built. Keras keeps
    both lists private (`_trainable_variables`, `_model_variables_moving_average`)."""
    inner = getattr(optimizer, "inner_optimizer", optimizer)  # a LossScaleOptimizer's
    averages = getattr(inner, "_model_variables_moving_average", None)
    if not getattr(inner, "use_ema", False) or not averages:
        return []
    return [
        (v, a) for v, a in zip(inner._trainable_variables, averages, strict=True) if a is not None
    ]


# Private Keras attributes and methods that tapefit's subclasses of Keras classes (TapeModel's
# parts, the TensorBoard callback) read on `self` or override and call through `super()`: the
# only private Keras names used outside this module (tests/test_architecture.py).
SUBCLASS_PRIVATES = (
    "_async_train",  # ContinuedCallbacks: whether Keras' CallbackList runs batch hooks async
    "_build_shapes_dict",  # TapeModel: the shapes it was built with, as Keras records them
    "_compile_config",  # TapeModel: Keras' record of compile's arguments
    "_compute_loss",  # TapeModel: Keras' loss of the compiled loss and regularisers
    "_distribute_strategy",  # TapeModel: the strategy the model was created under
    "_flush_futures",  # ContinuedCallbacks: CallbackList's wait for its async batch hooks
    "_functional",  # TapeModel(inputs, outputs): Keras' functional network inside
    "_global_train_batch",  # TensorBoard: the batch counter its profiler uses
    "_log_epoch_metrics",  # TensorBoard: overridden to write tapefit's epoch scalars too
    "_loss_tracker",  # TapeModel: the mean of the loss Keras logs as `loss`
    "_make_function",  # TapeModel: overridden to trace the tape step
    "_masked_softmax",  # Float32SoftmaxAttention: overridden for a float32 softmax
    "_maybe_symbolic_build",  # TapeModel: overridden to build from the data's element spec
    "_on_begin",  # ContinuedCallbacks: CallbackList's own start (its async executor)
    "_on_end",  # ContinuedCallbacks: CallbackList's own end (the executor shut down)
    "_on_train_batch_end",  # ContinuedCallbacks: overridden, CallbackList's per-batch loop
    "_post_build",  # TapeModel: what Keras does once a model is built
    "_should_trace",  # TensorBoard: whether the profiler is on for this batch
    "_should_write_train_graph",  # TensorBoard: off, tapefit's writer traces the graph
    "_start_batch",  # TensorBoard: the profiler's first batch
    "_stop_trace",  # TensorBoard: overridden to stop the profiler at the right batch
    "_train_writer",  # TensorBoard: its summary writer for `train/`
)


def seed_generator_states(model: Any) -> list:
    """The state variables of every seed generator `model`'s layers draw from (dropout),
    and Keras' global generator's when one exists (both private: `_seed_generators`, the
    `global_seed_generator` attribute)."""
    states = [
        generator.state
        for layer in model._flatten_layers(include_self=True)
        for generator in getattr(layer, "_seed_generators", [])
    ]
    shared = global_state.get_global_attribute("global_seed_generator")
    return states + ([shared.state] if shared is not None else [])


def flatten_layers(layer: Any, include_self: bool = True, recursive: bool = True) -> list:
    """`layer` and every layer inside it, as Keras walks them (`Layer._flatten_layers`)."""
    return list(layer._flatten_layers(include_self=include_self, recursive=recursive))


def compiled_parts(model: Any) -> tuple[Any, Any]:
    """The compiled metrics and loss containers `compile` made (None before `compile`, or
    for a model compiled without them)."""
    return getattr(model, "_compile_metrics", None), getattr(model, "_compile_loss", None)


def optimizer_calls(optimizer: Any) -> Any:
    """The variable counting an optimizer's `apply` calls: every batch, accumulated ones
    included (`iterations` counts updates)."""
    return optimizer._iterations


def learning_rate_setting(optimizer: Any) -> Any:
    """What the optimizer was given as its learning rate: a number, a variable or a
    `LearningRateSchedule` (`learning_rate` reads only its current value)."""
    return getattr(optimizer, "_learning_rate", None)


def updated_variables(optimizer: Any) -> list:
    """The variables a built optimizer updates, in its slot order."""
    return list(optimizer._trainable_variables)


def write_weights(model: Any, store: Any) -> None:
    """What `model.save_weights` writes (optimizer state included), into `store` (an
    `H5IOStore`)."""
    saving_lib._save_state(
        model, weights_store=store, assets_store=None, inner_path="", visited_saveables=set()
    )


@contextmanager
def untracked_attributes(layer: Any) -> Iterator[None]:
    """Within the block, attributes set on `layer` are not tracked by Keras (its `_lock`)."""
    layer._lock = False
    try:
        yield
    finally:
        layer._lock = True


@contextmanager
def name_counters_kept() -> Iterator[None]:
    """Keras' name counters, and Python's and NumPy's random states (a layer without a seed
    draws one from them), as they were before the block: objects made inside it leave no
    trace on the objects made after it."""
    counters = copy.copy(global_state.get_global_attribute("object_name_uids"))
    python_state, numpy_state = random.getstate(), np.random.get_state()
    try:
        yield
    finally:
        global_state.set_global_attribute("object_name_uids", counters)
        random.setstate(python_state)
        np.random.set_state(numpy_state)


def cudnn_argument_rule(kind: str) -> Callable[..., bool]:
    """Keras' own test of whether an `LSTM`'s or a `GRU`'s arguments suit its cuDNN kernel
    (`cudnn_ok` without its GPU check): `rule(activation, recurrent_activation, unroll,
    use_bias)`, and `reset_after` for a GRU."""
    if kind == "GRU":
        return tensorflow_rnn._do_gru_arguments_support_cudnn
    return tensorflow_rnn._do_lstm_arguments_support_cudnn


@contextmanager
def fused_kernel_calls() -> Iterator[list[str]]:
    """Within the block, a call of Keras' fused `lstm`/`gru` kernel (what `LSTM.inner_loop`
    tries first, when its own options allow cuDNN) is recorded by name and refused with
    `NotImplementedError`, so the layer falls back to its generic loop as on a CPU."""
    calls: list[str] = []
    originals = {name: getattr(keras_backend, name) for name in ("lstm", "gru")}

    def refusing(name: str) -> Callable[..., Any]:
        def kernel(*args: Any, **kwargs: Any) -> Any:
            calls.append(name)
            raise NotImplementedError

        return kernel

    for name in originals:
        setattr(keras_backend, name, refusing(name))
    try:
        yield calls
    finally:
        for name, original in originals.items():
            setattr(keras_backend, name, original)


__all__ = [
    "SUBCLASS_PRIVATES",
    "Functional",
    "ObjectSharingScope",
    "compiled_parts",
    "compute_output_spec",
    "cudnn_argument_rule",
    "flatten_layers",
    "fused_kernel_calls",
    "global_state",
    "learning_rate_setting",
    "moving_average_pairs",
    "name_counters_kept",
    "optimizer_calls",
    "python_utils",
    "saving_lib",
    "untracked_attributes",
    "updated_variables",
    "write_weights",
]

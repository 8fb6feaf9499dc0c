"""What an export serves: the model's `serving_endpoints()`, each a function with its input
signature, wrapped in a small Keras model Keras can export, and refused before training when a
format cannot take it."""

from __future__ import annotations

import inspect
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import keras
import numpy as np
import tensorflow as tf

from tapefit.errors import TapefitError
from tapefit.training.export.formats import (
    EXTRA,
    INFO,
    SAVED_MODEL,
    missing_packages,
    normalize_formats,
)

ENDPOINT = "serve"  # Keras' default endpoint name, and the first (serving_default) one


@dataclass(frozen=True)
class ExportEndpoint:
    """One serving function: `function(*arguments)` on the Keras model, its flat input specs
    (named) and how flat inputs pack into its positional arguments. Keras' default endpoint
    (a model without `serving_endpoints()`) has no specs of its own: Keras traces what the
    model was built with, and it is checked on the batch's structure (`for_inputs`)."""

    name: str
    function: Callable[..., Any]
    structure: tuple[Any, ...] | None  # one spec structure per positional argument
    specs: tuple[tf.TensorSpec, ...]  # flat, each named

    @property
    def keras_default(self) -> bool:
        """Whether this is Keras' default `serve`, exported by `model.export` as it is."""
        return self.structure is None

    def for_inputs(self, x: Any) -> ExportEndpoint:
        """Keras' default endpoint as taking `x` (a batch's inputs) as its one argument
        (others are returned as they are)."""
        if not self.keras_default:
            return self
        arrays = [np.asarray(a) for a in keras.tree.flatten(x)]
        specs = tuple(
            tf.TensorSpec((None, *a.shape[1:]), tf.as_dtype(a.dtype), name=f"inputs_{i}")
            for i, a in enumerate(arrays)
        )
        structure = keras.tree.pack_sequence_as(x, list(specs))
        return ExportEndpoint(self.name, self.function, (structure,), specs)

    def arguments(self, flat: Sequence[Any]) -> list[Any]:
        """Pack flat inputs into the endpoint's positional arguments.

        Args:
            flat: One value per flat spec, in order.

        Returns:
            The positional arguments of `function` (and of the SavedModel's endpoint).
        """
        return list(keras.tree.pack_sequence_as(self.structure, list(flat)))


def serving_endpoints(model: keras.Model) -> list[ExportEndpoint]:
    """The model's endpoints as flat, named functions.

    The model's `serving_endpoints()` when it has them, else Keras' default: `serve`, which
    calls the model on what it was built with (`ExportEndpoint.keras_default`).

    Args:
        model: The trained Keras model.

    Returns:
        One `ExportEndpoint` per endpoint, the first being `serving_default`.
    """
    own = getattr(model, "serving_endpoints", None)
    if callable(own):
        endpoints = []
        for name, (function, signature) in own().items():
            names = _argument_names(function, len(signature))
            endpoints.append(_endpoint(name, function, list(signature), names))
        return endpoints

    def serve(*arguments: Any) -> Any:
        return model(*arguments, training=False)

    return [ExportEndpoint("serve", serve, None, ())]


def _argument_names(function: Callable[..., Any], count: int) -> list[str]:
    """A name for each of `count` positional arguments: the parameter's, `<name>_<i>` for those
    a `*<name>` takes (`args_0`, `args_1`), `input_<i>` for any left over."""
    names: list[str] = []
    for parameter in inspect.signature(function).parameters.values():
        if parameter.kind == parameter.VAR_POSITIONAL:
            names += [f"{parameter.name}_{i}" for i in range(count - len(names))]
        elif parameter.kind in (parameter.POSITIONAL_ONLY, parameter.POSITIONAL_OR_KEYWORD):
            names.append(parameter.name)
    return names[:count] + [f"input_{i}" for i in range(len(names), count)]


def _endpoint(
    name: str, function: Callable[..., Any], signature: list[Any], names: list[str]
) -> ExportEndpoint:
    """An endpoint whose flat specs are `tf.TensorSpec`s named after its arguments (a nested
    argument's leaves get `_<i>` suffixes)."""
    structure = tuple(keras.tree.map_structure(_tensor_spec, signature))
    specs: list[tf.TensorSpec] = []
    for argument, base in zip(structure, names, strict=False):
        leaves = keras.tree.flatten(argument)
        for i, spec in enumerate(leaves):
            label = spec.name or (base if len(leaves) == 1 else f"{base}_{i}")
            specs.append(tf.TensorSpec(spec.shape, spec.dtype, name=label))
    named = keras.tree.pack_sequence_as(list(structure), specs)
    return ExportEndpoint(name, function, tuple(named), tuple(specs))


def _tensor_spec(spec: Any) -> tf.TensorSpec:
    """A `keras.InputSpec` or `tf.TensorSpec` as a `tf.TensorSpec`."""
    if isinstance(spec, tf.TensorSpec):
        return spec
    return tf.TensorSpec(spec.shape, spec.dtype, name=getattr(spec, "name", None))


def check_exportable(model: keras.Model, formats: Sequence[str]) -> list[ExportEndpoint]:
    """Refuse the formats a model's endpoints cannot go through, before anything is written.

    Args:
        model: The trained Keras model.
        formats: Format names.

    Returns:
        The model's endpoints (`serving_endpoints`).

    Raises:
        TapefitError: a format whose packages are missing, or that cannot take the model's
            string inputs, in one line naming each format and why.
    """
    formats = normalize_formats(formats)  # names, whatever the config held (enums)
    missing = missing_packages(formats)
    if missing:
        needs = "; ".join(f"{name} needs {', '.join(p)}" for name, p in missing.items())
        raise TapefitError(f"trainer.export_formats: {needs}, which are not installed: {EXTRA}")
    compute = str(getattr(model.dtype_policy, "compute_dtype", "float32"))
    converted = [name for name in formats if name != SAVED_MODEL]
    if converted and compute != "float32":
        raise TapefitError(
            f"trainer.export_formats: {' and '.join(converted)} cannot take "
            f"{type(model).__name__}: it computes in {compute} (mixed precision), and their "
            "converters need a float32 model (Keras' rule for ONNX; LiteRT's built-ins and "
            "OpenVINO's CPU plugin refuse its 16-bit graph); train with "
            f"trainer.precision=float32 for them, or export it as {SAVED_MODEL}"
        )
    endpoints = serving_endpoints(model)
    strings = [
        f"{e.name}: {', '.join(s.name for s in e.specs)}"
        for e in endpoints
        if any(s.dtype == tf.string for s in e.specs)
    ]
    refused = [name for name in formats if name != SAVED_MODEL and strings]
    if refused:
        lacks = " and ".join(INFO[name].strings for name in refused)
        raise TapefitError(
            f"trainer.export_formats: {' and '.join(refused)} cannot take "
            f"{type(model).__name__}: its endpoints take strings ({'; '.join(strings)}), and "
            f"the text processing inside has {lacks}; export it as {SAVED_MODEL}, whose "
            "endpoints keep the text processing inside"
        )
    return endpoints


class EndpointModel(keras.Model):
    """One endpoint as a Keras model taking flat named tensors, so that Keras' own
    `model.export(format=...)`, which exports a model's `__call__`, exports that endpoint."""

    def __init__(self, model: keras.Model, endpoint: ExportEndpoint) -> None:
        super().__init__(name=endpoint.name, dtype="float32")
        self.source = model  # tracked: its variables and lookup tables go into the export
        self.endpoint = endpoint
        self.built = True

    def call(self, *flat: Any, training: bool = False) -> Any:
        return self.endpoint.function(*self.endpoint.arguments(flat))

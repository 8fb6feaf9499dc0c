"""Proof, at save time, that a model's config rebuilds it: a `.keras` file tapefit writes loads
again, or is not written.

Keras writes a subclass's config without trying it: a constructor that cannot take a key of
the config, or a sub-object that cannot be deserialised, shows up only at `load_model`, later
and elsewhere. `check_rebuildable` runs the loading half on the config the file would hold —
`from_config`, then the build — in this process, and refuses in one line what would fail.
"""

from __future__ import annotations

import inspect
import json
import weakref
from typing import Any

import keras

from tapefit.errors import UnsaveableModelError
from tapefit.keras_compat import (
    Functional,
    ObjectSharingScope,
    flatten_layers,
    name_counters_kept,
)
from tapefit.step.constructor_config import PRIVATE_KEYS, accepted_keywords, leaves


def check_rebuildable(model: keras.Model) -> None:
    """Refuse a model whose saved config would not rebuild it in a fresh process.

    Checks that `get_config` works, that the constructor takes every key of the config and
    gets every argument it requires (when `from_config` is Keras' or TapeModel's, which pass
    the config to the constructor), that a `get_config` of the user's own leaves out no
    argument passed with a non-default value, and finally that the config rebuilds a model
    with the same weights. Classes are looked up as in the saving process: a class defined in
    a script is found here, and at load needs `custom_objects`, as Keras documents.

    Args:
        model: the model about to be saved.

    Raises:
        UnsaveableModelError: the file would not load, or would load a different model; one line
            naming the argument or key, and what to change.

    Examples:
        >>> import tapefit
        >>> class Wrapper(tapefit.TapeModel):
        ...     def __init__(self, inner):
        ...         super().__init__()
        ...         self.inner = inner
        ...
        ...     def call(self, x):
        ...         return self.inner(x)
        >>> inner = keras.Sequential([keras.Input((2,)), keras.layers.Dense(1)])
        >>> check_rebuildable(Wrapper(inner))  # passes: nothing is printed or raised
    """
    if type(model) in (Functional, keras.Sequential):
        return  # Keras' own configs
    name = type(model).__name__
    try:
        config = model.get_config()
    except NotImplementedError as error:
        raise UnsaveableModelError(_refusal(name, error)) from None
    fingerprint = _fingerprint(model)
    if fingerprint is not None and _passed.get(model) == fingerprint:
        return  # this model, with this config and these weight shapes, passed already
    if _rebuilds_by_constructor(type(model)):
        _check_constructor_takes(type(model), config)
        _check_nothing_left_out(model, config)
    _check_config_rebuilds(model)
    if fingerprint is not None:
        _passed[model] = fingerprint


# The models that passed, with what they passed with (`_fingerprint`): a run checks before
# training and saves after it (`model.keras`, through `TapeModel.save`), and the rebuild is the
# costly part (a second model built in this process), so an unchanged model is checked once.
_passed: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def _fingerprint(model: keras.Model) -> str | None:
    """What the check's verdict depends on: the serialised config (classes and arguments) and
    the weights' shapes; None when the config does not serialise (the check says why)."""
    try:
        with name_counters_kept(), ObjectSharingScope():
            config = keras.saving.serialize_keras_object(model)
        config.pop("compile_config", None)
        return json.dumps(
            [config, _weight_shapes(model) if model.built else None], sort_keys=True, default=repr
        )
    except Exception:  # the full check reports it
        return None


def _refusal(name: str, error: NotImplementedError) -> str:
    message = str(error).strip()
    if message.startswith(name):  # tapefit's own one-line refusal
        return message
    return (
        f"{name} cannot be saved to .keras: its constructor took values Keras cannot serialise "
        f"(sub-models, arrays, objects) and it has no get_config(); give {name} a get_config() "
        "that returns its constructor's arguments and a from_config() that rebuilds them"
    )


def _rebuilds_by_constructor(cls: type) -> bool:
    """Whether `cls.from_config` passes the config to the constructor (Keras' or TapeModel's)."""
    function = getattr(cls.from_config, "__func__", None)
    return getattr(function, "rebuilds_by_constructor", False) or function in (
        keras.Model.from_config.__func__,
        keras.layers.Layer.from_config.__func__,
    )


def _check_constructor_takes(cls: type, config: dict[str, Any]) -> None:
    name = cls.__name__
    named, takes_any = accepted_keywords(cls)
    unknown = [key for key in config if key not in PRIVATE_KEYS and key not in named]
    if unknown and not takes_any:
        raise UnsaveableModelError(
            f"{name} cannot be saved to .keras: its config holds {unknown[0]!r}, which "
            f"{name}.__init__ does not take; accept **kwargs in __init__ and pass them to "
            f"super().__init__(**kwargs), or give {name} a from_config()"
        )
    parameters = list(inspect.signature(cls.__init__).parameters.values())[1:]
    required = [
        p.name
        for p in parameters
        if p.default is inspect.Parameter.empty
        and p.kind in (inspect.Parameter.POSITIONAL_OR_KEYWORD, inspect.Parameter.KEYWORD_ONLY)
    ]
    missing = [key for key in required if key not in config]
    if missing:
        raise UnsaveableModelError(
            f"{name} cannot be saved to .keras: its get_config() leaves out {missing[0]!r}, "
            f"which {name}.__init__ requires; return it from get_config()"
        )


def _check_nothing_left_out(model: keras.Model, config: dict[str, Any]) -> None:
    holder = getattr(model, "_constructor_arguments", None)
    if holder is None or holder.values is None:
        return
    name = type(model).__name__
    parameters = inspect.signature(type(model).__init__).parameters
    for key, value in holder.values.items():
        if key in config:
            continue
        default = parameters[key].default if key in parameters else inspect.Parameter.empty
        if _differs(value, default):
            shown = "" if default is inspect.Parameter.empty else f", the default is {default!r}"
            raise UnsaveableModelError(
                f"{name} cannot be saved to .keras: its get_config() leaves out {key!r} "
                f"(passed {_short(value)}{shown}), so the reloaded model would differ; "
                "return it from get_config()"
            )


def _differs(value: Any, default: Any) -> bool:
    if value is default:
        return False
    try:
        return not bool(value == default)
    except (TypeError, ValueError):  # arrays and the like
        return True


def _short(value: Any) -> str:
    text = repr(value) if isinstance(value, (str, int, float, bool)) else type(value).__name__
    return text if len(text) <= 40 else text[:37] + "..."


def _check_config_rebuilds(model: keras.Model) -> None:
    name = type(model).__name__
    with name_counters_kept():
        with ObjectSharingScope():
            config = keras.saving.serialize_keras_object(model)
        config.pop("compile_config", None)  # compiling is not part of rebuilding
        try:
            with ObjectSharingScope():
                rebuilt = keras.saving.deserialize_keras_object(
                    config, custom_objects=_classes_in(model), safe_mode=True
                )
        except Exception as error:  # whatever load_model would raise
            reason = str(error).strip().splitlines()[0] if str(error).strip() else ""
            raise UnsaveableModelError(
                f"{name} cannot be saved to .keras: its config does not rebuild it "
                f"({type(error).__name__}: {reason}); give {name} a get_config() and "
                "from_config() that do"
            ) from None
    if model.built and model.weights and not rebuilt.weights:
        raise UnsaveableModelError(
            f"{name} cannot be saved to .keras: a reloaded {name} would have no weights (Keras "
            "builds it by calling call() on the saved input shape, and that does not build its "
            f"layers); give {name} a call() that runs every layer, or a build_from_config()"
        )
    if model.built and _weight_shapes(rebuilt) != _weight_shapes(model):
        raise UnsaveableModelError(
            f"{name} cannot be saved to .keras: its config rebuilds a model with other weights "
            f"({len(rebuilt.weights)} instead of {len(model.weights)}, or of other shapes); "
            f"return every argument that sizes a layer from {name}.get_config()"
        )


def _weight_shapes(model: keras.Model) -> list[tuple]:
    return [tuple(weight.shape) for weight in model.weights]


def _classes_in(model: keras.Model) -> dict[str, type]:
    """The classes of the model's layers and of its constructor's Keras objects, by name: what
    a loading script passes as `custom_objects` for classes it defines itself."""
    objects: list[Any] = []
    for layer in flatten_layers(model):
        objects.append(layer)
        holder = getattr(layer, "_constructor_arguments", None)
        if holder is not None and holder.values is not None:
            objects.extend(leaves(holder.values))
    return {type(obj).__name__: type(obj) for obj in objects if hasattr(obj, "get_config")}

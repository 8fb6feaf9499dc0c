"""The constructor arguments of a TapeModel subclass, captured so that its saved config rebuilds it.

Keras' `Model.__new__` drops the constructor's arguments before its automatic config sees them:
a required argument makes Keras refuse to save, and an optional one is recorded with its
*default* (a model built with `penalty=0.5` reloads with the default). TapeModel captures the
arguments actually passed — plain values and Keras objects (layers, sub-models, losses,
metrics, optimizers), also inside lists, tuples and dicts — and serialises them, so the usual
`__init__(self, generator, discriminator, latent_dim)` saves and reloads. A constructor that
cannot take `name` or `trainable` gets them set after construction instead.
"""

from __future__ import annotations

import inspect
import types
from dataclasses import dataclass
from typing import Any

import keras

OBJECTS_KEY = "tapefit_keras_objects"  # names of the config entries that hold Keras objects
ATTRIBUTES_KEY = "tapefit_attributes"  # name/trainable, set after construction
PRIVATE_KEYS = (OBJECTS_KEY, ATTRIBUTES_KEY)
MODEL_KEYS = ("name", "trainable", "dtype")  # what every Keras model's config holds
PLAIN = (str, int, float, bool, type(None))


class UnsaveableArgumentError(NotImplementedError):
    """A constructor argument no config can hold; a NotImplementedError, as Keras' refusal is."""


@dataclass
class ConstructorArguments:
    """The arguments a model was constructed with, by name (None, with the reason, when they
    cannot be passed back by name). A holder Keras' attribute tracking does not look into: the
    sub-models it holds are tracked where the model assigns them."""

    values: dict[str, Any] | None
    unsupported: str | None = None


def captured_arguments(cls: type, args: tuple, kwargs: dict) -> ConstructorArguments:
    """The arguments `cls(*args, **kwargs)` receives, by name, defaults applied; `name`,
    `trainable` and `dtype` left out (the model's config records them itself)."""
    signature = inspect.signature(cls.__init__)
    try:
        bound = signature.bind(None, *args, **kwargs)
    except TypeError as error:
        return ConstructorArguments(None, f"its arguments do not match __init__ ({error})")
    bound.apply_defaults()
    arguments = dict(bound.arguments)
    parameters = list(signature.parameters.values())
    arguments.pop(parameters[0].name)  # self
    for parameter in parameters[1:]:
        if parameter.kind is inspect.Parameter.POSITIONAL_ONLY:
            return ConstructorArguments(
                None, f"__init__ takes {parameter.name!r} as positional-only"
            )
        if parameter.kind is inspect.Parameter.VAR_POSITIONAL and arguments.pop(parameter.name, ()):
            return ConstructorArguments(None, f"it was given *{parameter.name}")
        if parameter.kind is inspect.Parameter.VAR_KEYWORD:
            arguments |= arguments.pop(parameter.name, {})
    for key in MODEL_KEYS:
        arguments.pop(key, None)
    return ConstructorArguments(arguments)


def accepted_keywords(cls: type) -> tuple[set[str], bool]:
    """The names `cls.__init__` takes by keyword, and whether it takes any (`**kwargs`)."""
    parameters = list(inspect.signature(cls.__init__).parameters.values())[1:]
    named = {
        p.name
        for p in parameters
        if p.kind in (inspect.Parameter.POSITIONAL_OR_KEYWORD, inspect.Parameter.KEYWORD_ONLY)
    }
    return named, any(p.kind is inspect.Parameter.VAR_KEYWORD for p in parameters)


def leaves(value: Any) -> list[Any]:
    """The values inside nested lists, tuples and dicts."""
    if isinstance(value, (list, tuple)):
        return [leaf for item in value for leaf in leaves(item)]
    if isinstance(value, dict):
        return [leaf for item in value.values() for leaf in leaves(item)]
    return [value]


def serialized_argument(model_name: str, key: str, value: Any) -> Any:
    """`value` as a config holds it; UnsaveableArgumentError when no config can."""
    for leaf in leaves(value):
        if isinstance(leaf, types.LambdaType) and leaf.__name__ == "<lambda>":
            raise UnsaveableArgumentError(
                f"{model_name} cannot be saved to .keras: its constructor argument {key!r} "
                "holds a lambda, which Keras reloads only with safe_mode=False; pass a named "
                "function instead"
            )
    try:
        return keras.saving.serialize_keras_object(value)
    except (TypeError, ValueError, NotImplementedError) as error:
        reason = str(error).strip().splitlines()[0] if str(error).strip() else type(error).__name__
        raise UnsaveableArgumentError(
            f"{model_name} cannot be saved to .keras: its constructor argument {key!r} "
            f"({type(value).__name__}) cannot be serialised ({reason}); pass values Keras can "
            f"serialise (numbers, strings, layers, models, losses, metrics) or give "
            f"{model_name} a get_config() and from_config()"
        ) from None


def model_config(model: keras.Model, arguments: dict[str, Any]) -> dict[str, Any]:
    """The config that rebuilds `model` from its captured constructor `arguments`: Keras
    objects serialised (listed under OBJECTS_KEY), and `name`/`trainable`/`dtype` passed to
    the constructor when it accepts them, `name`/`trainable` under ATTRIBUTES_KEY otherwise."""
    model_name = type(model).__name__
    config: dict[str, Any] = {}
    objects = []
    for key, value in arguments.items():
        if all(isinstance(leaf, PLAIN) for leaf in leaves(value)):
            config[key] = value
        else:
            config[key] = serialized_argument(model_name, key, value)
            objects.append(key)
    named, takes_any = accepted_keywords(type(model))
    model_values = {
        "name": model.name,
        "trainable": model.trainable,
        "dtype": keras.dtype_policies.serialize(model.dtype_policy),
    }
    attributes = {}
    for key, value in model_values.items():
        if takes_any or key in named:
            config[key] = value
        elif key != "dtype":  # the layers' own configs carry their dtypes
            attributes[key] = value
    if objects:
        config[OBJECTS_KEY] = objects
    if attributes:
        config[ATTRIBUTES_KEY] = attributes
    return config


def constructor_keywords(
    config: dict[str, Any], custom_objects: dict | None = None
) -> tuple[dict[str, Any], dict[str, Any]]:
    """A config written by `model_config` split into the constructor's keywords (Keras objects
    rebuilt) and the attributes to set after construction."""
    config = dict(config)
    attributes = config.pop(ATTRIBUTES_KEY, {})
    for key in config.pop(OBJECTS_KEY, []):
        config[key] = keras.saving.deserialize_keras_object(
            config[key], custom_objects=custom_objects
        )
    return config, attributes


def forwards_all_arguments(method: Any) -> bool:
    """Whether `method` takes exactly `(self, *args, **kwargs)`: an override that passes
    every argument on (to `TapeModel.compile`).

    Example:
        >>> class Model:
        ...     def compile(self, *args, **kwargs): ...
        >>> forwards_all_arguments(Model.compile)
        True
    """
    kinds = [p.kind for p in inspect.signature(method).parameters.values()]
    return kinds == [
        inspect.Parameter.POSITIONAL_OR_KEYWORD,
        inspect.Parameter.VAR_POSITIONAL,
        inspect.Parameter.VAR_KEYWORD,
    ]

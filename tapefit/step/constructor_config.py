"""Constructor arguments Keras' automatic `get_config` leaves out: Keras objects (sub-models,
layers) passed to a TapeModel subclass's constructor. Keras refuses to save such a model unless
it writes `get_config`; TapeModel serialises those arguments itself, so the file reloads."""

from __future__ import annotations

import inspect
from typing import Any

import keras

OBJECTS_KEY = "tapefit_keras_objects"  # names of the config entries that are Keras objects
PLAIN = (str, int, float, bool, type(None))


class ConstructorArguments:
    """A holder Keras' attribute tracking does not look into (the sub-models it holds are
    tracked where the model assigns them)."""

    def __init__(self, values: dict[str, Any] | None) -> None:
        self.values = values


def captured_arguments(cls: type, args: tuple, kwargs: dict) -> dict[str, Any] | None:
    """The constructor's arguments by name if each is a plain value or a Keras layer or model
    (and at least one is the latter); None when they cannot all be saved."""
    try:
        bound = inspect.signature(cls.__init__).bind(None, *args, **kwargs)
    except TypeError:
        return None
    bound.apply_defaults()
    arguments = dict(bound.arguments)
    arguments.pop(next(iter(inspect.signature(cls.__init__).parameters)))  # self
    spec = inspect.getfullargspec(cls.__init__)
    if spec.varargs and arguments.pop(spec.varargs, ()):
        return None
    if spec.varkw:
        arguments |= arguments.pop(spec.varkw, {})
    arguments.pop("name", None)
    objects = [v for v in arguments.values() if isinstance(v, keras.layers.Layer)]
    if not objects or not all(
        isinstance(v, (*PLAIN, keras.layers.Layer)) for v in arguments.values()
    ):
        return None
    return arguments


def serialized(arguments: dict[str, Any]) -> dict[str, Any]:
    """`arguments` for a config: Keras objects serialised and listed under OBJECTS_KEY."""
    objects = [k for k, v in arguments.items() if isinstance(v, keras.layers.Layer)]
    config = {
        k: keras.saving.serialize_keras_object(v) if k in objects else v
        for k, v in arguments.items()
    }
    return {**config, OBJECTS_KEY: objects}


def deserialized(config: dict[str, Any], custom_objects: dict | None = None) -> dict[str, Any]:
    """A config written by `serialized`, with its Keras objects rebuilt."""
    config = dict(config)
    for key in config.pop(OBJECTS_KEY, []):
        config[key] = keras.saving.deserialize_keras_object(
            config[key], custom_objects=custom_objects
        )
    return config

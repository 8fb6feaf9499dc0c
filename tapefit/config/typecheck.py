"""Values of a `_target_` node checked against the type hints of what it names, before anything
is built: `model.dropout=abc` fails in one line, as a Hydra schema would have refused it.

The hints are the target's own (`typing.get_type_hints` of a function, or of each `__init__`
along a class's MRO, as `accepted_arguments` follows forwarded `**kwargs`). A parameter without
a hint takes any value here, and the target judges it when built: a default's type is no
promise (`weights="imagenet"` also takes None). Keras' own classes have no hints at all, so
theirs are read from their numeric and boolean defaults, which Keras documents as such
(`optimizer.beta_1=abc` is refused before training, not at the first step).
A `TypedDict` hint is a schema for a nested node: its keys are checked by name ("did you
mean") and by type. Hints this module cannot read (a class, a callable) accept any value.
"""

from __future__ import annotations

import difflib
import enum
import inspect
import types
import typing
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from tapefit.errors import TapefitError


def parameter_types(target: Callable) -> dict[str, Any]:
    """Each keyword argument of `target` that has a type hint, with that hint (for Keras' own
    classes, also each argument with a number or a boolean as its default).

    Examples:
        >>> def build(units: int, weights="imagenet", rate: float | None = None): ...
        >>> parameter_types(build)
        {'units': <class 'int'>, 'rate': float | None}
    """
    functions = []
    if inspect.isclass(target):
        for cls in target.__mro__:
            if cls is object or "__init__" not in vars(cls):
                continue
            functions.append(cls.__init__)
            if cls.__module__.startswith("keras."):
                break
    else:
        functions.append(target)
    found: dict[str, Any] = {}
    for function in functions:
        try:
            hints = typing.get_type_hints(function, include_extras=False)
        except Exception:  # a hint naming something the module cannot resolve
            hints = {}
        try:
            parameters = inspect.signature(function).parameters.values()
        except (TypeError, ValueError):
            continue
        for parameter in parameters:
            if parameter.name in found or parameter.kind in (
                parameter.VAR_KEYWORD,
                parameter.VAR_POSITIONAL,
            ):
                continue
            if parameter.name in hints:
                found[parameter.name] = hints[parameter.name]
            elif _is_keras(function) and isinstance(parameter.default, bool | int | float):
                found[parameter.name] = bool if isinstance(parameter.default, bool) else float
    return found


def _is_keras(function: Callable) -> bool:
    return getattr(function, "__module__", "").split(".")[0] == "keras"


def check_arguments_types(target: Callable, arguments: Mapping[str, Any], key: str) -> None:
    """Refuse, in one line naming `key.<argument>`, the first value whose type the target's
    hints do not allow."""
    types_of = parameter_types(target)
    for name, value in arguments.items():
        if name in types_of:
            check_value(value, types_of[name], f"{key}.{name}")


def check_value(value: Any, annotation: Any, key: str) -> None:
    """A one-line `TapefitError` unless `value` (plain config data) fits `annotation`."""
    if not fits(value, annotation, key):
        raise TapefitError(f"{key}={_shown(value)} must be {describe(annotation)}")


def _shown(value: Any) -> str:
    return repr(value) if isinstance(value, str) else str(value)


def fits(value: Any, annotation: Any, key: str = "") -> bool:
    """Whether `value` fits `annotation`; a `TypedDict` schema raises on an unknown key."""
    if annotation is Any or annotation is inspect.Parameter.empty:
        return True
    if isinstance(value, Mapping) and "_target_" in value:
        return True  # an object built by Hydra: checked where it is instantiated
    if annotation is None or annotation is type(None):
        return value is None
    origin = typing.get_origin(annotation)
    arguments = typing.get_args(annotation)
    if origin in (typing.Union, types.UnionType):
        return any(fits(value, member, key) for member in arguments)
    if origin is typing.Literal:
        return value in arguments
    if _is_typed_dict(annotation):
        return isinstance(value, Mapping) and _fits_typed_dict(value, annotation, key)
    if annotation is bool:
        return isinstance(value, bool)
    if annotation is int:
        return isinstance(value, int) and not isinstance(value, bool)
    if annotation is float:
        return isinstance(value, int | float) and not isinstance(value, bool)
    if annotation is str:
        return isinstance(value, str)
    if inspect.isclass(annotation) and issubclass(annotation, enum.Enum):
        return value in {member.value for member in annotation} or isinstance(value, annotation)
    container = origin or annotation
    if container in (list, tuple, Sequence, typing.Sequence) or container is set:
        if isinstance(value, str) or not isinstance(value, list | tuple):
            return False
        if origin is tuple and arguments and arguments[-1] is not Ellipsis:
            return len(value) == len(arguments) and all(
                fits(v, a, key) for v, a in zip(value, arguments, strict=True)
            )
        element = arguments[0] if arguments else Any
        return all(fits(item, element, key) for item in value)
    if container in (dict, Mapping, typing.Mapping):
        return isinstance(value, Mapping)
    return True  # a class or protocol config data cannot be checked against here


def _is_typed_dict(annotation: Any) -> bool:
    return (
        isinstance(annotation, type)
        and issubclass(annotation, dict)
        and hasattr(annotation, "__total__")
    )


def _fits_typed_dict(value: Mapping, schema: Any, key: str) -> bool:
    hints = typing.get_type_hints(schema)
    for name, item in value.items():
        if name not in hints:
            close = difflib.get_close_matches(str(name), list(hints), n=1)
            hint = f" (did you mean {key}.{close[0]}?)" if close else ""
            raise TapefitError(
                f"{key}.{name} is not a key of {key}{hint}; it has {', '.join(hints)}"
            )
        check_value(item, hints[name], f"{key}.{name}")
    return True


def describe(annotation: Any) -> str:
    """The words an error uses for `annotation` ("a float", "one of cnn, mlp", "null")."""
    if annotation is None or annotation is type(None):
        return "null"
    origin = typing.get_origin(annotation)
    arguments = typing.get_args(annotation)
    if origin in (typing.Union, types.UnionType):
        return " or ".join(dict.fromkeys(describe(member) for member in arguments))
    if origin is typing.Literal:
        return "one of " + ", ".join(str(a) for a in arguments)
    if inspect.isclass(annotation) and issubclass(annotation, enum.Enum):
        return "one of " + ", ".join(str(member.value) for member in annotation)
    if _is_typed_dict(annotation):
        return "a mapping of " + ", ".join(typing.get_type_hints(annotation))
    names = {bool: "true or false", int: "an integer", float: "a number", str: "a string"}
    if annotation in names:
        return names[annotation]
    container = origin or annotation
    if container in (list, tuple, Sequence, typing.Sequence, set):
        element = arguments[0] if arguments else Any
        return "a list" + ("" if element is Any else f" of {_plural(describe(element))}")
    if container in (dict, Mapping, typing.Mapping):
        return "a mapping"
    return getattr(annotation, "__name__", str(annotation))


def _plural(words: str) -> str:
    singular = {"an integer": "integers", "a number": "numbers", "a string": "strings"}
    if words.startswith("a list"):
        return "lists" + words.removeprefix("a list")
    return singular.get(words, words)

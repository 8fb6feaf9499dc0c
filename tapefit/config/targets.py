"""Objects named by `_target_` in config (a user's model, loader, metric or callback): imported
with an error that says what must be on the path, their arguments checked against the
signature before anything runs (as LightningCLI does), then built by Hydra's `instantiate`."""

from __future__ import annotations

import difflib
import importlib
import importlib.util
import inspect
import pkgutil
import sys
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

from omegaconf import DictConfig, OmegaConf

from tapefit.config.typecheck import check_arguments_types
from tapefit.errors import TapefitError

# Keyword arguments every keras.Layer/Model constructor accepts through **kwargs.
KERAS_BASE_ARGUMENTS = ("name", "dtype", "trainable", "autocast")
HYDRA_KEYS = ("_target_", "_partial_", "_args_", "_convert_", "_recursive_")


def has_target(node: Any) -> bool:
    """Whether a config node names an object to build with `_target_`."""
    return isinstance(node, DictConfig | dict) and "_target_" in node


def ensure_working_directory_importable() -> None:
    """Put the working directory on `sys.path` as `python -m` does, so the `tapefit` script
    finds a project run from its root the same way `python -m tapefit` does."""
    cwd = str(Path.cwd())
    if "" not in sys.path and cwd not in sys.path:
        sys.path.insert(0, cwd)


def locate(path: str, key: str) -> Any:
    """The object a dotted path names, or a one-line error saying what to put on the path."""
    if not isinstance(path, str) or not path or any(not part for part in path.split(".")):
        raise TapefitError(f"{key}={path!r} must be a dotted path such as my_project.models.Net")
    ensure_working_directory_importable()
    parts = path.split(".")
    module, found = None, 0
    for end in range(1, len(parts) + 1):  # shortest first: a failure is the module's own
        name = ".".join(parts[:end])
        if module is not None and not hasattr(module, "__path__"):
            break  # a module, not a package: the rest of the path are its attributes
        try:
            spec = importlib.util.find_spec(name)
        except (ImportError, ValueError):
            spec = None
        if spec is None:
            break  # no such module: the rest of the path are attributes
        try:
            module = importlib.import_module(name)
        except ModuleNotFoundError as error:  # the module itself imports something missing
            raise TapefitError(
                f"{key}={path}: importing {name} failed: {error}; install that package"
            ) from None
        except Exception as error:
            raise TapefitError(
                f"{key}={path}: importing {name} raised {type(error).__name__}: {error}"
            ) from None
        found = end
    if module is None:
        raise TapefitError(
            f"{key}={path}: no module named {parts[0]!r}; run from the folder that holds "
            f"{parts[0]}/ (or {parts[0]}.py), or install it (pip install -e .)"
        )
    target = module
    for depth, attribute in enumerate(parts[found:], start=found):
        if not hasattr(target, attribute):
            owner = ".".join(parts[:depth])
            names = [n for n in dir(target) if not n.startswith("_")]
            if hasattr(target, "__path__"):  # a package: its modules not yet imported too
                names += [m.name for m in pkgutil.iter_modules(target.__path__)]
            close = difflib.get_close_matches(attribute, names, n=1)
            hint = f" (did you mean {owner}.{close[0]}?)" if close else ""
            raise TapefitError(f"{key}={path}: {owner} has no {attribute!r}{hint}")
        target = getattr(target, attribute)
    return target


def accepted_arguments(target: Callable) -> tuple[list[str], bool]:
    """The keyword names `target` takes, and whether it takes any (`**kwargs` that does not
    end in a Keras constructor, which accepts only a few). A class whose `__init__` passes
    `*args`/`**kwargs` on takes its parents' arguments too, followed along its MRO (as
    jsonargparse does): a subclass of `tapefit.models.Classifier` takes `image_shape`."""
    if inspect.isclass(target) and not target.__module__.startswith("keras."):
        return _class_arguments(target)
    function = target.__init__ if inspect.isclass(target) else target
    try:
        parameters = list(inspect.signature(function).parameters.values())
    except (TypeError, ValueError):
        return [], True
    if inspect.isclass(target) and parameters and parameters[0].name == "self":
        parameters = parameters[1:]
    names = [
        p.name
        for p in parameters
        if p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY) and not p.name.startswith("_")
    ]
    takes_kwargs = any(p.kind == p.VAR_KEYWORD for p in parameters)
    if takes_kwargs and inspect.isclass(target) and _is_keras_layer(target):
        return [*names, *(n for n in KERAS_BASE_ARGUMENTS if n not in names)], False
    if takes_kwargs and getattr(target, "__module__", "").startswith("keras."):
        return names, False  # Keras' own classes keep **kwargs only for legacy names
    return names, takes_kwargs


INTERNAL_ARGUMENTS = ("functional_network",)  # TapeModel's own, never a config key


def _class_arguments(target: type) -> tuple[list[str], bool]:
    names: list[str] = []
    for cls in target.__mro__:
        if "__init__" not in vars(cls) or cls is object:
            continue
        if cls.__module__.startswith("keras."):  # a Keras class: its named arguments only
            if cls not in (_keras_model_class(), _keras_layer_class()):
                keras_names, _ = accepted_arguments(cls)
                names += [n for n in keras_names if n not in names]
            if _is_keras_layer(target):
                names += [n for n in KERAS_BASE_ARGUMENTS if n not in names]
            return names, False
        try:
            parameters = list(inspect.signature(cls.__init__).parameters.values())[1:]
        except (TypeError, ValueError):
            return names, True
        names += [
            p.name
            for p in parameters
            if p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)
            and not p.name.startswith("_")
            and p.name not in INTERNAL_ARGUMENTS
            and p.name not in names
        ]
        if not any(p.kind in (p.VAR_KEYWORD, p.VAR_POSITIONAL) for p in parameters):
            return names, False  # passes nothing on
    return names, True


def _keras_model_class() -> type:
    import keras

    return keras.Model


def _keras_layer_class() -> type:
    import keras

    return keras.layers.Layer


def _is_keras_layer(target: type) -> bool:
    import keras

    return issubclass(target, keras.layers.Layer)


def required_arguments(target: Callable) -> list[str]:
    """Keyword names `target` needs a value for."""
    function = target.__init__ if inspect.isclass(target) else target
    try:
        parameters = list(inspect.signature(function).parameters.values())
    except (TypeError, ValueError):
        return []
    if inspect.isclass(target) and parameters and parameters[0].name == "self":
        parameters = parameters[1:]
    return [
        p.name
        for p in parameters
        if p.default is p.empty and p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)
    ]


def check_arguments(
    target: Callable, given: Iterable[str], key: str, supplied: Iterable[str] = ()
) -> None:
    """Refuse an argument `target` does not take (with the closest name) and a required one
    that is missing; `supplied` are the names tapefit passes itself (seed, batch_size)."""
    accepted, takes_any = accepted_arguments(target)
    name = getattr(target, "__qualname__", repr(target))
    if not takes_any:
        for argument in given:
            if argument not in accepted:
                close = difflib.get_close_matches(argument, accepted, n=1)
                hint = f" (did you mean {key}.{close[0]}?)" if close else ""
                shown = ", ".join(accepted) or "no arguments"
                raise TapefitError(
                    f"{key}.{argument}: {name} takes no argument {argument!r}{hint}; it "
                    f"takes {shown}"
                )
    missing = [n for n in required_arguments(target) if n not in set(given) | set(supplied)]
    if missing:
        raise TapefitError(
            f"{key}: {name} needs {', '.join(missing)}: set "
            + ", ".join(f"{key}.{n}=..." for n in missing)
        )


def target_arguments(node: Any, exclude: Iterable[str] = ()) -> dict[str, Any]:
    """The keys of a `_target_` node that are the target's arguments (resolved, plain)."""
    return plain_arguments(node, (*HYDRA_KEYS, *exclude))


def plain_arguments(
    node: Any, skipped: Iterable[str], *, enum_to_str: bool = False
) -> dict[str, Any]:
    """A node's keys but `skipped` and those the config leaves `???` (required, for something
    else to supply), as plain resolved values (`enum_to_str`: enums as their names).

    Example:
        >>> from omegaconf import OmegaConf
        >>> node = OmegaConf.create({"_target_": "f", "a": "${b}", "b": 1, "c": "???"})
        >>> plain_arguments(node, ["_target_"])
        {'a': 1, 'b': 1}
    """
    skipped = set(skipped)
    if isinstance(node, DictConfig):
        skipped |= {key for key in node if OmegaConf.is_missing(node, key)}
        node = OmegaConf.to_container(node, resolve=True, enum_to_str=enum_to_str)
    return {key: value for key, value in node.items() if key not in skipped}


def checked_target(
    node: Any, key: str, exclude: Iterable[str] = (), supplied=(), target: Any = None
) -> Callable:
    """Import `node._target_` (unless the caller `target` located it already) and check the
    node's arguments against its signature, the types its hints (or defaults) allow, and the
    target's own `check_options(arguments)` when it has one (value checks a signature cannot
    say: ranges, combinations)."""
    target = target or locate(node["_target_"], f"{key}._target_")
    if not callable(target):
        raise TapefitError(f"{key}._target_={node['_target_']} is not callable")
    arguments = target_arguments(node, exclude)
    check_arguments(target, arguments, key, supplied)
    check_arguments_types(target, arguments, key)
    check_options = getattr(target, "check_options", None)
    if callable(check_options):
        check_options(arguments)
    return target


def instantiate(
    node: Any,
    key: str,
    exclude: Iterable[str] = (),
    *,
    check: bool = True,
    located: Any = None,
    **extra: Any,
) -> Any:
    """Build `node` as Hydra's `instantiate` would, after the checks of `checked_target`
    (`check=False`: the run's checks passed this node already); `located`: the class or
    function `node._target_` names, when the caller has it (it is not imported again);
    `extra` are keyword arguments tapefit adds. An exception the target raises becomes one
    line naming it."""
    from hydra.utils import instantiate as hydra_instantiate

    if check:
        target = checked_target(node, key, exclude, supplied=extra, target=located)
    else:
        target = located or locate(node["_target_"], f"{key}._target_")
    arguments = {k: node[k] for k in node if k not in set(exclude) and k != "_target_"}
    config = OmegaConf.create({"_target_": node["_target_"], **arguments})
    try:
        if located is not None:  # called here: Hydra would import its path again
            del config["_target_"]  # Hydra builds the arguments' own `_target_` nodes
            return target(**hydra_instantiate(config, _convert_="all"), **extra)
        return hydra_instantiate(config, _convert_="all", **extra)
    except TapefitError:
        raise
    except Exception as error:
        cause = error.__cause__ or error
        if isinstance(cause, TapefitError):  # the target's own one-line refusal
            raise cause from None
        message = str(cause).splitlines()[0] if str(cause) else ""
        raise TapefitError(
            f"{key}: {getattr(target, '__qualname__', target)}(...) raised "
            f"{type(cause).__name__}: {message}"
        ) from error

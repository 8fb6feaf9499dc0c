"""The `model` node: a `TapeModel` subclass (or a function returning one) named by `_target_`,
tapefit's own in `conf/model/*.yaml` or yours, checked against its signature before anything
runs and built with what the data decide (`model_arguments()`: image shape, classes,
vocabulary) for the arguments the config leaves out. Also what follows from the model's
class before it exists: the run's default objective."""

from __future__ import annotations

import inspect
from dataclasses import replace
from typing import Any

import keras
from omegaconf import DictConfig, OmegaConf

from tapefit.checkpointing.warm_start import shared_vocabulary
from tapefit.config.target_spec import TargetSpec
from tapefit.config.targets import (
    accepted_arguments,
    checked_target,
    has_target,
    locate,
    required_arguments,
)
from tapefit.errors import TapefitError
from tapefit.keras_compat import compiled_parts
from tapefit.protocols import hook
from tapefit.step.tape_model import TapeModel
from tapefit.training.compiling import metric_name

NOT_A_TAPE_MODEL = (
    "subclass tapefit.TapeModel instead of keras.Model (or wrap a functional network: "
    "tapefit.TapeModel(inputs, outputs))"
)


def model_class(model: Any) -> Any:
    """The class or function the `model` node's `_target_` names (imported, not called)."""
    if not has_target(model):
        raise TapefitError(
            "model needs _target_: the TapeModel class to build, e.g. model=classifier, or "
            "model._target_=my_project.models.Net"
        )
    return locate(model._target_, "model._target_")


def check_model(model: Any, data: Any) -> Any:
    """Refuse a `model` node that cannot build, before anything is built: not a TapeModel
    class, an argument it does not take, a wrong type, a value its `check_options` refuses.
    Arguments the data will supply are not required yet.

    Args:
        model: The `model` node.
        data: The `data` node (its tokenizer must be one the model takes).

    Returns:
        The class (or function) the node names.
    """
    target = model_class(model)
    if inspect.isclass(target) and not issubclass(target, TapeModel):
        raise TapefitError(
            f"model._target_={model._target_} is not a tapefit.TapeModel subclass: "
            + NOT_A_TAPE_MODEL
        )
    checked = checked_target(model, "model", supplied=required_arguments(target), target=target)
    check_tokenizer(model, data, target)
    return checked


def check_tokenizer(model: Any, data: Any, target: Any) -> None:
    """Refuse a `data.tokenizer` the model would not get: a WordPiece vocabulary means
    nothing to a word vectoriser (and a word vocabulary nothing to WordPiece), so a model
    that takes no `tokenizer` argument, or a `model.tokenizer` other than the data's, would
    train on the wrong tokens."""
    if not isinstance(data, DictConfig) or not str(data.get("_target_", "")).startswith(
        "tapefit.data."
    ):
        return  # a loader of your own means by its keys what it says
    tokenizer = data.get("tokenizer")
    if tokenizer is None:  # data that decide no tokenizer (images)
        return
    encoder = model.get("encoder")
    preset = isinstance(encoder, DictConfig) and encoder.get("preset") is not None
    if preset != (tokenizer == "pretrained"):
        raise TapefitError(
            f"model.encoder.preset brings its own tokenizer and data.tokenizer={tokenizer} "
            "would learn another: set data.tokenizer=pretrained"
            if preset
            else "data.tokenizer=pretrained needs a pretrained encoder to bring the tokenizer: "
            "use model=siamese_pretrained with model.encoder.preset=<folder or preset>"
        )
    configured = model.get("tokenizer", tokenizer)
    if configured != tokenizer:
        raise TapefitError(
            f"model.tokenizer={configured} differs from data.tokenizer={tokenizer}, which "
            f"learns the vocabulary: set data.tokenizer={configured} and leave model.tokenizer "
            "out (the data pass it on)"
        )
    if tokenizer != "word" and "tokenizer" not in accepted_arguments(target)[0]:
        name = getattr(target, "__qualname__", target)
        raise TapefitError(
            f"data.tokenizer={tokenizer}: model {name} takes no tokenizer argument, so its "
            "vectoriser could not read the data's vocabulary; use data.tokenizer=word"
        )


def build_model_from_config(
    model: Any,
    data: Any,
    target: Any = None,
    loader: str = "the data",
    init_from: str | None = None,
) -> keras.Model:
    """The model `model` configures (the `model` node, or the run's `TargetSpec` of it), given
    the `data` object's `model_arguments()` its signature takes and the config does not set.
    `target`: the class `model._target_` names, if located already; `loader`: the data's
    `_target_`, for the error; `init_from`: the run whose weights the model will start from
    (its vocabulary replaces the data's)."""
    spec = model if isinstance(model, TargetSpec) else TargetSpec.of(model, "model")
    target = target or spec.located or locate(spec.target, "model._target_")
    spec = replace(spec, located=target)  # built without importing it again
    offered = hook(data, "model_arguments")
    accepted = set(accepted_arguments(target)[0])
    given = spec.arguments
    supplied = {
        name: value
        for name, value in (offered() if offered else {}).items()
        if name in accepted and name not in given
    }
    if init_from:
        supplied = shared_vocabulary(init_from, supplied)
    missing = [
        name for name in required_arguments(target) if name not in given and name not in supplied
    ]
    shown = getattr(target, "__qualname__", target)
    if missing and offered is not None:
        raise TapefitError(
            f"model: {shown} needs {', '.join(missing)}, "
            f"which data={loader} does not supply: choose data that does, or set "
            + ", ".join(f"model.{name}=..." for name in missing)
        )
    if missing:  # the config's checks left them to the data, which has no model_arguments()
        raise TapefitError(
            f"model: {shown} needs {', '.join(missing)}: set "
            + ", ".join(f"model.{n}=..." for n in missing)
        )
    model = spec.build(**supplied)
    if not isinstance(model, TapeModel):
        raise TapefitError(
            f"model._target_={spec.target} built a {type(model).__name__}, not a "
            f"tapefit.TapeModel: {NOT_A_TAPE_MODEL}"
        )
    return model


def default_objective(data: Any, target: Any) -> str:
    """The validation metric a run selects on when `objective` is null: the model class's
    `default_objective(data config)` if it has one, else `val_loss`.

    Args:
        data: The `data` node (given to the hook as plain values).
        target: The class `model._target_` names.
    """
    chooser = hook(target, "default_objective")
    if chooser is None:
        return "val_loss"
    plain = OmegaConf.to_container(data, resolve=True) if isinstance(data, DictConfig) else data
    return str(chooser(plain))


def tracker_names(model: keras.Model) -> list[str]:
    """Names of the metrics `model` reports itself: its loss tracker and its own trackers."""
    compiled = compiled_parts(model)[0]
    return [m.name for m in model.metrics if m is not compiled and m.name != "compile_metrics"]


def logged_metrics(model: keras.Model, metrics: list[Any]) -> list[str]:
    """What the step logs for training (and, with `val_`, validation): the model's trackers
    and the `metrics` it was compiled with (its own and the configured ones)."""
    compiled = [metric_name(m) for m in metrics]
    return list(dict.fromkeys([*tracker_names(model), *compiled]))


def own_callbacks(model: keras.Model, data: Any) -> list[keras.callbacks.Callback]:
    """The model's `training_callbacks(data)` (none without the hook). A run asks once
    (`preparation.build_checked_model`): the checks before training and the callback order use
    the same ones."""
    hooked = hook(model, "training_callbacks")
    return list(hooked(data)) if hooked is not None else []

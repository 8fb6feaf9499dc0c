"""Your own model and data, named by `_target_` as in lightning-hydra-template: no family class,
no registration, no schema file.

`model._target_` names a `TapeModel` subclass (or a function returning one); the node's other
keys are its constructor's arguments. `data._target_` names a loader; the node's keys are its
arguments, except the keys tapefit owns (`TargetDataOptions`), and it gets `seed` and
`batch_size` too when its signature takes them. It returns the splits `tapefit.data.splits`
describes. `data` may also be a built-in dataset (`data=digits`). Both are checked against
their signatures before anything runs.
"""

from __future__ import annotations

import dataclasses
import inspect
import logging
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, ClassVar

import keras
import tensorflow as tf
from omegaconf import OmegaConf
from omegaconf.errors import OmegaConfBaseException

from tapefit.config.targets import (
    accepted_arguments,
    checked_target,
    has_target,
    instantiate,
    locate,
)
from tapefit.data.splits import ALIASES, PipelineOptions, splits_from_loader
from tapefit.errors import TapefitError
from tapefit.families.base import FAMILIES, Dataset, Family
from tapefit.step.tape_model import TapeModel
from tapefit.training.compiling import metric_name, model_compile_defaults


@dataclass
class TargetDataOptions:
    """The keys of a `data._target_` node that tapefit owns (the rest go to the loader): how
    array splits become pipelines. A `tf.data.Dataset` the loader returns is used as it is."""

    batch_size: int = 32
    shuffle: bool = True  # reshuffle the training arrays each epoch, from the run's seed
    cache: bool = True
    val_fraction: float = 0.1  # split off the training arrays when no validation is returned


log = logging.getLogger("tapefit")
OWNED_DATA_KEYS = tuple(field.name for field in dataclasses.fields(TargetDataOptions))
SUPPLIED = ("seed", "batch_size")  # passed to a loader whose signature takes them


def data_options(data: Any) -> PipelineOptions:
    """The tapefit-owned keys of a `data._target_` node, type-checked against their schema."""
    given = {key: data[key] for key in OWNED_DATA_KEYS if key in data}
    try:
        merged = OmegaConf.merge(OmegaConf.structured(TargetDataOptions), given)
    except OmegaConfBaseException as error:
        key = f"data.{error.key}" if getattr(error, "key", None) else "data"
        raise TapefitError(f"{key}: {str(error).splitlines()[0]}") from None
    options = PipelineOptions(**OmegaConf.to_container(merged))
    if options.batch_size < 1:
        raise TapefitError(f"data.batch_size={options.batch_size} must be at least 1")
    if not 0.0 <= options.val_fraction < 1.0:
        raise TapefitError(f"data.val_fraction={options.val_fraction} must lie in [0, 1)")
    return options


def ignored_data_keys(data: Any, returned: Any, loader_gets_batch_size: bool) -> dict[str, str]:
    """The tapefit-owned `data` keys the config sets that cannot act on what the loader
    returned (datasets are used as built), each with the reason and the fix."""
    if not isinstance(returned, Mapping):
        return {}  # refused by splits_from_loader
    splits = {ALIASES.get(k, k): v for k, v in returned.items() if v is not None}
    datasets = {name for name, split in splits.items() if isinstance(split, tf.data.Dataset)}
    as_built = "the loader returns tf.data.Datasets, which tapefit uses as built"
    reasons = {}
    if datasets and datasets == set(splits):
        if not loader_gets_batch_size:
            reasons["batch_size"] = f"{as_built}: batch them in the loader (or give it a "
            reasons["batch_size"] += "batch_size argument, which receives data.batch_size)"
        reasons["cache"] = f"{as_built}: cache them in the loader"
    if "train" in datasets:
        reasons["shuffle"] = "the loader's 'train' is a tf.data.Dataset: shuffle it in the loader"
    if "validation" in splits:
        reasons["val_fraction"] = "the loader returns its own 'validation' split"
    return {key: reasons[key] for key in OWNED_DATA_KEYS if key in data and key in reasons}


def builtin_dataset(name: str) -> Dataset:
    """A dataset some registered family ships (`data=digits` under a `_target_` model)."""
    for family in FAMILIES.values():
        if name in family.datasets:
            return family.datasets[name]
    known = sorted({n for family in FAMILIES.values() for n in family.datasets})
    raise TapefitError(
        f"data={name} is not a dataset tapefit knows: give data._target_ (your loader) or "
        f"one of {', '.join(known)}"
    )


def tracker_names(model: keras.Model) -> list[str]:
    """Names of the metrics `model` reports itself: its loss tracker and its own trackers."""
    compiled = getattr(model, "_compile_metrics", None)
    return [m.name for m in model.metrics if m is not compiled and m.name != "compile_metrics"]


class TargetFamily(Family):
    """A `_target_` model trained on a `_target_` loader's splits (or a built-in dataset)."""

    name = "target"
    model_schema = dict
    datasets: ClassVar[dict[str, Dataset]] = {}

    def build_data(self, cfg: Any) -> Any:
        if not has_target(cfg.data):
            return builtin_dataset(cfg.data.name).load(cfg.data, cfg.seed)
        loader = checked_target(cfg.data, "data", OWNED_DATA_KEYS, SUPPLIED)
        accepted, takes_any = accepted_arguments(loader)
        supplied = {
            "seed": cfg.seed,
            "batch_size": cfg.data.get("batch_size", TargetDataOptions.batch_size),
        }
        extra = {k: v for k, v in supplied.items() if takes_any or k in accepted}
        returned = instantiate(cfg.data, "data", OWNED_DATA_KEYS, **extra)
        for key, why in ignored_data_keys(cfg.data, returned, "batch_size" in extra).items():
            log.warning("data.%s=%s is ignored: %s", key, cfg.data[key], why)
        return splits_from_loader(
            returned, f"data._target_={cfg.data._target_}", data_options(cfg.data), cfg.seed
        )

    def model(self, cfg: Any, data: Any) -> keras.Model:
        model = instantiate(cfg.model, "model")
        if not isinstance(model, TapeModel):
            kind = type(model).__name__
            raise TapefitError(
                f"model._target_={cfg.model._target_} built a {kind}, not a tapefit.TapeModel: "
                "subclass tapefit.TapeModel instead of keras.Model (or wrap a functional "
                "network: tapefit.TapeModel(inputs, outputs))"
            )
        return model

    def compile_arguments(self, cfg: Any, data: Any) -> dict[str, Any]:
        return {}  # loss and metrics come from the `compile` config section

    def check(self, cfg: Any) -> None:
        target = locate(cfg.model._target_, "model._target_")
        if inspect.isclass(target) and not issubclass(target, TapeModel):
            raise TapefitError(
                f"model._target_={cfg.model._target_} is not a tapefit.TapeModel subclass: "
                "subclass tapefit.TapeModel instead of keras.Model (or name a function that "
                "returns a TapeModel)"
            )
        checked_target(cfg.model, "model")

    def check_data(self, cfg: Any) -> None:
        if has_target(cfg.data):
            checked_target(cfg.data, "data", OWNED_DATA_KEYS, SUPPLIED)
            data_options(cfg.data)
            return
        dataset = builtin_dataset(cfg.data.get("name"))
        if dataset.check is not None:
            dataset.check(cfg.data)

    def logged_metrics(self, cfg: Any, model: keras.Model | None = None) -> list[str] | None:
        if model is None:
            return None  # the model's own trackers are known once it exists
        own = model_compile_defaults(model).get("metrics", [])
        configured = [metric_name(m) for m in [*own, *cfg.compile.metrics]]
        return list(dict.fromkeys([*tracker_names(model), *configured]))

    def default_objective(self, cfg: Any) -> str:
        return "val_loss"


TARGET_FAMILY = TargetFamily()

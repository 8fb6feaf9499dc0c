"""The `data` node: a loader named by `_target_` (tapefit's own in `conf/data/*.yaml`, or
yours), checked against its signature, then called for the run's data object.

The node's keys are the loader's arguments; `seed` and `batch_size` are passed too when its
signature takes them. Four keys are tapefit's when the loader does not take them itself
(`DataOptions`): how the arrays a loader returns become pipelines. A loader returns either a
data object (`train`, `val`, `test` pipelines and `sizes`: tapefit's loaders do) or the
mapping of splits `tapefit.data.splits` describes.
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

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

log = logging.getLogger("tapefit")


@dataclass
class DataOptions:
    """The keys of a `data` node tapefit owns when its loader does not take them: how array
    splits become pipelines. A `tf.data.Dataset` the loader returns is used as it is."""

    batch_size: int = 32
    shuffle: bool = True  # reshuffle the training arrays each epoch, from the run's seed
    cache: bool = True
    val_fraction: float = 0.1  # split off the training arrays when no validation is returned


OWNED_DATA_KEYS = tuple(field.name for field in dataclasses.fields(DataOptions))
SUPPLIED = ("seed", "batch_size")  # passed to a loader whose signature takes them


def owned_keys(loader: Any) -> tuple[str, ...]:
    """The tapefit-owned keys this loader does not take itself (they stay tapefit's)."""
    named = set(accepted_arguments(loader)[0])
    return tuple(key for key in OWNED_DATA_KEYS if key not in named)


def check_data(data: Any) -> Any:
    """Refuse a `data` node that cannot load, before anything is loaded: no `_target_`, an
    argument the loader does not take, a wrong type, a value its `check_options` refuses.

    Returns:
        The loader the node names.
    """
    if not has_target(data):
        raise TapefitError(
            "data needs _target_: the loader to call, e.g. data=digits, or "
            "data._target_=my_project.data.load"
        )
    owned = owned_keys(locate(data["_target_"], "data._target_"))
    loader = checked_target(data, "data", owned, SUPPLIED)
    data_options(data, owned)
    return loader


def data_options(data: Any, owned: tuple[str, ...] = OWNED_DATA_KEYS) -> PipelineOptions:
    """The tapefit-owned keys of a `data` node, type-checked against their schema."""
    given = {key: data[key] for key in owned if key in data}
    try:
        merged = OmegaConf.merge(OmegaConf.structured(DataOptions), given)
    except OmegaConfBaseException as error:
        key = f"data.{error.key}" if getattr(error, "key", None) else "data"
        raise TapefitError(f"{key}: {str(error).splitlines()[0]}") from None
    options = PipelineOptions(**OmegaConf.to_container(merged))
    if options.batch_size < 1:
        raise TapefitError(f"data.batch_size={options.batch_size} must be at least 1")
    if not 0.0 <= options.val_fraction < 1.0:
        raise TapefitError(f"data.val_fraction={options.val_fraction} must lie in [0, 1)")
    return options


def load_data(node: Any, seed: int, *, checked: bool = False) -> Any:
    """Call the loader the `data` node names and return the run's data object, checking the
    node against the loader's signature first (`check_data`'s checks) unless `checked`.

    Args:
        node: The `data` node.
        seed: The run's seed, given to a loader that takes `seed`.
        checked: The node passed `check_data` already, with the run's config: it is not
            checked again.
    """
    if not checked and not has_target(node):
        check_data(node)  # its one-line refusal
    loader = locate(node["_target_"], "data._target_")
    owned = owned_keys(loader)
    options = data_options(node, owned)
    accepted, takes_any = accepted_arguments(loader)
    supplied = {"seed": seed, "batch_size": node.get("batch_size", DataOptions.batch_size)}
    extra = {
        key: value
        for key, value in supplied.items()
        if (takes_any or key in accepted) and key not in node
    }
    returned = instantiate(node, "data", owned, check=not checked, **extra)
    if not isinstance(returned, Mapping) and hasattr(returned, "train"):
        return returned  # a data object, as tapefit's own loaders return
    gets_batch_size = "batch_size" in extra or "batch_size" in accepted
    for key, why in ignored_data_keys(node, returned, gets_batch_size, owned).items():
        log.warning("data.%s=%s is ignored: %s", key, node[key], why)
    return splits_from_loader(returned, f"data._target_={node._target_}", options, seed)


def load_checked_data(node: Any, seed: int) -> Any:
    """`load_data` of a node `check_config` has checked: a run's default data hook (`Run`'s
    `load_data`), which takes the run's `data` node and seed.

    Example:
        >>> import tapefit
        >>> cfg = tapefit.compose(["data.train_limit=64"])
        >>> from tapefit.runner.validation import check_config
        >>> _ = check_config(cfg)
        >>> load_checked_data(cfg.data, cfg.seed).sizes["train"]
        64
    """
    return load_data(node, seed, checked=True)


def ignored_data_keys(
    data: Any, returned: Any, loader_gets_batch_size: bool, owned: tuple[str, ...]
) -> dict[str, str]:
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
    return {key: reasons[key] for key in owned if key in data and key in reasons}

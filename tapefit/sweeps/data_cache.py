"""The data a search loads once: its trials' runs call `DataCache` instead of the configured
loader (`run(..., load_data=...)`)."""

from __future__ import annotations

import json
from typing import Any

from omegaconf import OmegaConf

from tapefit.runner.data_from_config import load_checked_data


class DataCache:
    """Data loaded once per search: trials that change only the batch size (or nothing in
    `data`) get fresh pipelines over the same arrays, so each trial still starts from the
    first epoch's shuffle, exactly like an ordinary run.

    Args:
        keep: How many loaded datasets (distinct `data` options and seeds) are kept.

    Example:
        >>> cache = DataCache(keep=2)
        >>> cache.keep, cache.loaded
        (2, {})
    """

    def __init__(self, keep: int = 4) -> None:
        self.loaded: dict[str, Any] = {}
        self.keep = keep

    def __call__(self, node: Any, seed: int) -> Any:
        """The data of a trial's `data` node (checked with its config) and seed, the runner's
        `load_data` hook: the loaded arrays again, in pipelines of its batch size, when its
        `data` options (but the batch size) and seed were loaded before."""
        options = OmegaConf.to_container(node, resolve=True, enum_to_str=True)
        options.pop("batch_size", None)
        key = json.dumps([options, seed], sort_keys=True, default=str)
        if key in self.loaded and hasattr(self.loaded[key], "rebuilt"):
            cached = self.loaded[key]  # a loader's node may leave batch_size to its default
            return cached.rebuilt(node.get("batch_size") or cached.options.batch_size)
        data = load_checked_data(node, seed)
        self.loaded[key] = data
        while len(self.loaded) > self.keep:
            self.loaded.pop(next(iter(self.loaded)))
        return data

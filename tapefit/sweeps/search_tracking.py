"""A search's parent run in the experiment tracker (`logger=...`): the trials nest under it."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from enum import Enum
from pathlib import Path
from typing import Any

from tapefit.config.schemas import SpaceEntry
from tapefit.config.targets import instantiate
from tapefit.training.tracking import RUN_ID_FILE, MLflowLogger


def search_tracker(logger: Any, search_dir: Path, params: Mapping[str, Any]) -> MLflowLogger | None:
    """The parent MLflow run of a search (`logger=...` with `tune=...`, or a Hydra multirun),
    with the search's settings and space as params; None without a logger. A resumed search
    continues its own.

    Args:
        logger: The `logger` node of the search's config (None: no tracker).
        search_dir: The search directory (its `mlflow_run.json` names the parent run).
        params: What the run logs (`search_params`).

    Returns:
        The started tracker, whose `run_id` the trials nest under (None if it failed to start).
    """
    if logger is None:
        return None
    name = f"search {Path(search_dir).name}"
    tracker = instantiate(logger, "logger", exclude=("run_name",), run_name=name)
    resume = (Path(search_dir) / RUN_ID_FILE).is_file()
    tracker.start(Path(search_dir), params, resume=resume)
    return tracker if tracker.run_id else None


def search_params(snapshot: Mapping[str, Any], searched: Mapping[str, Any]) -> dict[str, Any]:
    """A search's params: its settings (the config's snapshot, without the logger's own keys
    and `tune.space`'s flattened entries), then what it searches, by key.

    Example:
        >>> snapshot = {"seed": 0, "logger.tracking_uri": None, "tune.space.x.min": 0.1}
        >>> search_params(snapshot, {"tune.space.x": {"type": "float", "min": 0.1}})
        {'seed': 0, 'tune.space.x': {'type': 'float', 'min': 0.1}}
    """
    params = {
        key: value
        for key, value in snapshot.items()
        if not key.startswith(("logger.", "tune.space."))
    }
    params.update(searched)
    return params


def space_params(space: Mapping[str, SpaceEntry]) -> dict[str, dict[str, Any]]:
    """One param per searched key, `tune.space.<key>`: its whole entry, without unset fields.

    Example:
        >>> from tapefit.config.schemas import ParamType
        >>> space_params({"model.units": SpaceEntry(ParamType.int, min=8, max=64)})
        {'tune.space.model.units': {'type': 'int', 'min': 8, 'max': 64, 'sampling': 'linear'}}
    """
    return {
        f"tune.space.{key}": {
            field: value.name if isinstance(value, Enum) else value  # as enum_to_str writes it
            for field, value in dataclasses.asdict(entry).items()
            if value is not None
        }
        for key, entry in space.items()
    }

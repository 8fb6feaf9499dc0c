"""A search's parent run in the experiment tracker (`logger=...`): the trials nest under it."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from omegaconf import OmegaConf

from tapefit.config.snapshot import config_snapshot
from tapefit.config.targets import instantiate
from tapefit.training.tracking import RUN_ID_FILE, MLflowLogger


def search_tracker(
    cfg: Any, search_dir: Path, space: dict[str, Any] | None = None
) -> MLflowLogger | None:
    """The parent MLflow run of a search (`logger=...` with `tune=...`, or a Hydra multirun),
    with the search's settings and space as params; None without a logger. A resumed search
    continues its own.

    Args:
        cfg: The search's composed config.
        search_dir: The search directory (its `mlflow_run.json` names the parent run).
        space: What is searched, by key (default: `cfg.tune.space`'s entries).

    Returns:
        The started tracker, whose `run_id` the trials nest under (None if it failed to start).
    """
    if cfg.get("logger") is None:
        return None
    name = f"search {Path(search_dir).name}"
    tracker = instantiate(cfg.logger, "logger", exclude=("run_name",), run_name=name)
    params = {
        k: v
        for k, v in config_snapshot(cfg).items()
        if not k.startswith(("logger.", "tune.space."))
    }
    if space is None:  # one param per searched key: its whole entry
        entries = OmegaConf.to_container(cfg.tune.space, resolve=True, enum_to_str=True)
        space = {
            f"tune.space.{key}": {k: v for k, v in entry.items() if v is not None}
            for key, entry in entries.items()
        }
    params.update(space)
    resume = (Path(search_dir) / RUN_ID_FILE).is_file()
    tracker.start(Path(search_dir), params, resume=resume)
    return tracker if tracker.run_id else None

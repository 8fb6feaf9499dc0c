"""A Hydra callback that writes `trials.csv` in a multirun's sweep directory: every job's
status, objective, timings and overrides, best job first (configured in conf/config.yaml)."""

from __future__ import annotations

import logging
import os
from pathlib import Path
from typing import Any

from hydra.experimental.callback import Callback
from omegaconf import DictConfig, OmegaConf

from tapefit.config.snapshot import config_snapshot
from tapefit.files import read_json
from tapefit.objective import metric_direction
from tapefit.sweeps.records import best_first, write_trials_csv
from tapefit.sweeps.search_tracking import search_params, search_tracker
from tapefit.training.run_status import METRICS_FILE, STATUS_FILE
from tapefit.training.tracking import PARENT_ENV

log = logging.getLogger("tapefit")


def job_record(job_dir: Path) -> dict[str, Any]:
    """A multirun job as a trial record: from its status.json, metrics.json and overrides."""
    status = read_json(job_dir / STATUS_FILE, {})
    metrics = read_json(job_dir / METRICS_FILE, {})
    overrides = OmegaConf.load(job_dir / ".hydra" / "overrides.yaml")
    values = dict(str(o).split("=", 1) for o in overrides if "=" in str(o))
    return {
        "trial_id": job_dir.name,
        "status": status.get("state", "unknown"),
        "objective": metrics.get("objective") or status.get("objective"),
        "direction": metrics.get("objective_direction") or status.get("objective_direction"),
        "objective_value": metrics.get("objective_value"),
        "epochs": metrics.get("epochs_run"),
        "duration_s": metrics.get("wall_time_s"),
        "fit_s": metrics.get("train_time_s"),
        "values": values,
        "reason": status.get("error", ""),
    }


def summarize_sweep(sweep_dir: Path) -> list[dict[str, Any]]:
    """Write `sweep_dir/trials.csv` for every job directory in it; return the records."""
    jobs = sorted(
        (d for d in sweep_dir.iterdir() if (d / ".hydra" / "overrides.yaml").is_file()),
        key=lambda d: (len(d.name), d.name),
    )
    records = [job_record(job) for job in jobs]
    if not records:
        return records
    objective = next((r["objective"] for r in records if r["objective"]), "objective")
    direction = next(
        (r["direction"] for r in records if r["direction"]), metric_direction(objective) or "min"
    )
    parameters = sorted({key for record in records for key in record["values"]})
    write_trials_csv(sweep_dir / "trials.csv", records, parameters, direction)
    return best_first(records, direction)


class SweepSummary(Callback):
    """After a multirun: `trials.csv` in the sweep directory, best job first. With a logger
    (`-m logger=mlflow ...`), the multirun is a parent MLflow run its jobs nest under."""

    def __init__(self) -> None:
        self.tracker: Any = None

    def on_multirun_start(self, config: DictConfig, **kwargs: Any) -> None:
        if config.get("logger") is None:
            return
        sweep_dir = Path(config.hydra.sweep.dir)
        sweep_dir.mkdir(parents=True, exist_ok=True)
        job_config = OmegaConf.masked_copy(config, [k for k in config if k != "hydra"])
        swept = {
            f"sweep.{key}": values
            for key, _, values in (str(o).partition("=") for o in config.hydra.overrides.task)
            if "," in values
        }
        params = search_params(config_snapshot(job_config), swept)
        self.tracker = search_tracker(job_config.get("logger"), sweep_dir, params)
        if self.tracker is not None:
            os.environ[PARENT_ENV] = self.tracker.run_id

    def on_multirun_end(self, config: DictConfig, **kwargs: Any) -> None:
        os.environ.pop(PARENT_ENV, None)
        sweep_dir = Path(config.hydra.sweep.dir)
        if not sweep_dir.is_dir():
            return
        records = summarize_sweep(sweep_dir)
        if self.tracker is not None:
            done = [r for r in records if r["status"] == "completed"]
            best = {"objective_value": done[0]["objective_value"]} if done else None
            self.tracker.end("completed" if done else "failed", sweep_dir, best)
        if records:
            best = records[0]
            log.info(
                "sweep summary: %s (best job %s: %s=%s)",
                sweep_dir / "trials.csv",
                best["trial_id"],
                best["objective"],
                best["objective_value"],
            )

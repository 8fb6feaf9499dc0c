"""A search's trials as ordinary tapefit runs, for every engine (keras-tuner's
`tune=<algorithm>`, Optuna's `tune=optuna`): each in `<search dir>/trials/<id>/`, its
executions averaged (execution k runs with seed + k), the loaded data reused, its outcome
recorded in `trial.json` (failures with their reason) and as an HParams session.

The engines only draw the values, keep their own bookkeeping and turn a trial's outcome into
their own verdict; `search_results` writes what the search leaves at the end.
"""

from __future__ import annotations

import json
import logging
import math
import time
from collections.abc import Collection
from pathlib import Path
from typing import Any

from tapefit.callbacks.stop_on_signal import RunInterrupted
from tapefit.checkpointing.warm_start import WarmStart
from tapefit.config.snapshot import config_snapshot
from tapefit.errors import TapefitError
from tapefit.files import read_json, write_json
from tapefit.runner.run import Run
from tapefit.sweeps.data_cache import DataCache
from tapefit.sweeps.records import (
    current_rss_mb,
    placeholders,
    trial_hyperparameters,
    write_trial_session,
)
from tapefit.sweeps.search_dir import TRIALS
from tapefit.sweeps.search_space import apply_values
from tapefit.sweeps.search_tracking import search_params, search_tracker, space_params
from tapefit.sweeps.spec import SearchSpec
from tapefit.sweeps.trial_callbacks import EpochClock, EpochReport
from tapefit.training.run_status import METRICS_FILE, RESUME_DIR, read_status

log = logging.getLogger("tapefit")

RECORD = "trial.json"


def _same(a: Any, b: Any) -> bool:
    return json.dumps(a, sort_keys=True, default=str) == json.dumps(b, sort_keys=True, default=str)


class TrialRuns:
    """A search's trials as tapefit runs: where each lives, how it runs (executions averaged,
    seed + k) and what its record says.

    Args:
        spec: The search.
        search_dir: The search directory; trial `<id>` runs in `trials/<id>/`.
        overrides: The command line's overrides (a re-run command keeps them).
        worker: The process that runs the trials, as each record names it.
    """

    def __init__(
        self, spec: SearchSpec, search_dir: Path, overrides: list[str], worker: str
    ) -> None:
        self.spec, self.search_dir, self.overrides = spec, Path(search_dir), overrides
        self.objective, self.direction = spec.objective.name, spec.objective.direction
        self.worker = worker
        self.load_data = DataCache()
        self.placeholders = placeholders(spec.tune.space, spec.configured)
        self.tracker = None
        if spec.logger is not None:  # the trials' parent MLflow run
            params = search_params(config_snapshot(spec.config), space_params(spec.tune.space))
            self.tracker = search_tracker(spec.logger, self.search_dir, params)
        for key in pinned(overrides, spec.tune.space):
            log.warning(
                "%s is set on the command line, but tune.space searches it: each trial's "
                "value replaces it; to keep it fixed, search a space without it "
                "(search_space=<your file>)",
                key,
            )

    def trial_dir(self, trial_id: str, execution: int = 0) -> Path:
        """Where a trial's run lives (one directory per execution when there are several)."""
        base = self.search_dir / TRIALS / trial_id
        if self.spec.tune.executions_per_trial == 1:
            return base
        return base / f"execution-{execution}"

    def run_trial(
        self,
        trial_id: str,
        values: dict[str, Any],
        warm_start: WarmStart | None = None,
        report: EpochReport | None = None,
        settings: dict[str, Any] | None = None,
    ) -> dict[str, Any]:
        """Every execution of a trial (`report` watches the first) of the search's config
        with the trial's `values` (and the engine's own `settings`, e.g. Hyperband's
        epochs); the outcome is the first record that did not complete, else a completed
        one with the averaged objective."""
        trial_cfg = apply_values(self.spec.config, {**values, **(settings or {})})
        scores, record = [], {}
        for execution in range(self.spec.tune.executions_per_trial):
            watch = report if execution == 0 else None
            record = self.execute(trial_id, trial_cfg, execution, values, warm_start, watch)
            if record["status"] != "completed":
                break
            scores.append(record["objective_value"])
        else:
            record = {**record, "objective_value": sum(scores) / len(scores)}
        self.write_session(trial_id, values, record)
        return record

    def write_session(self, trial_id: str, values: dict[str, Any], record: dict) -> None:
        """The trial as an HParams session in `trials/<id>/` (records.py): every searched
        value, Success (a pruned trial too) or Failure with its reason, and the objective
        averaged over the executions; its runs' curves lie below it."""
        failed = record["status"] == "failed"
        write_trial_session(
            self.search_dir / TRIALS / trial_id,
            trial_hyperparameters(self.spec.tune.space, values, self.placeholders),
            "failed" if failed else "completed",
            self.objective,
            None if failed else record.get("objective_value"),
            record.get("reason") or None,
        )

    def execute(
        self,
        trial_id: str,
        trial_cfg: Any,
        execution: int,
        values: dict[str, Any],
        warm_start: WarmStart | None = None,
        report: EpochReport | None = None,
    ) -> dict[str, Any]:
        """One run of a trial (its config `trial_cfg`, handed to the run with the execution's
        seed); its record (`trial.json`) says how it went. `RunInterrupted` goes through: the
        search stops, and its next start continues this run."""
        run_dir = self.trial_dir(trial_id, execution)
        previous = read_status(run_dir) or {}
        recorded = read_record(run_dir / RECORD)
        if (
            previous.get("state") == "completed"
            and recorded.get("status") in ("completed", "pruned")
            and _same(recorded.get("values"), values)
        ):
            return recorded  # finished and recorded, but not yet told to the engine
        first_seed = int(values.get("seed", self.spec.seed))  # a searched seed is the trial's
        settings = {
            "seed": first_seed + execution,
            "resume": (run_dir / RESUME_DIR).is_dir(),  # a trial the search was killed in
        }
        if self.tracker is not None:  # the trial's run nests under the search's
            name = f"trial {trial_id}" + (f" execution {execution}" if execution else "")
            settings.update({"logger.parent_run_id": self.tracker.run_id, "logger.run_name": name})
        run_cfg = apply_values(trial_cfg, settings)
        record = {"trial_id": trial_id, "execution": execution, "values": values}
        record["tuner"] = self.worker
        started, clock = time.perf_counter(), EpochClock()
        extra = [clock, *([report] if report is not None else [])]
        try:
            if previous.get("state") == "completed" and not recorded:  # killed before the record
                metrics = json.loads((run_dir / METRICS_FILE).read_text())
            else:
                metrics = Run(  # one run of the search's config: not `run`, which refuses it
                    run_cfg,
                    run_dir,
                    extra,
                    load_data=self.load_data,
                    warm_start=warm_start,
                    hparams_session=False,  # the trial is the session (write_session)
                ).execute()
        except RunInterrupted:
            raise
        except Exception as error:  # a failed trial is recorded; the search goes on
            reason = str(error) if isinstance(error, TapefitError) else repr(error)
            record.update(status="failed", reason=reason.splitlines()[0] if reason else "")
            log.warning("trial %s failed: %s", trial_id, record["reason"])
        else:
            value = metrics.get("objective_value")
            if value is None or not math.isfinite(value):
                record.update(status="failed", reason=f"{self.objective} is not finite")
            elif report is not None and report.stopped_at is not None:
                record.update(
                    status="pruned",
                    objective_value=float(value),
                    reason=f"pruned after epoch {report.stopped_at + 1}",
                )
            else:
                record.update(status="completed", objective_value=float(value))
            record.update(epochs=metrics.get("epochs_run"))
        duration = time.perf_counter() - started
        record.update(
            objective=self.objective,
            duration_s=round(duration, 3),
            fit_s=round(clock.seconds, 3),
            overhead_s=round(duration - clock.seconds, 3),
            rss_mb=round(current_rss_mb(), 1),
        )
        write_json(run_dir / RECORD, record)
        return record


def pinned(overrides: list[str], space: Collection[str]) -> list[str]:
    """The searched keys that the command line also sets.

    Example:
        >>> pinned(["model.architecture=mlp", "+trainer.epochs=2"], ["model.architecture"])
        ['model.architecture']
    """
    keys = [o.lstrip("+~").split("=", 1)[0] for o in overrides if "=" in o]
    return [key for key in keys if key in space]


def read_record(path: Path) -> dict[str, Any]:
    """A JSON record (`trial.json`), or {} when there is none (or an unreadable one)."""
    return read_json(path, {})

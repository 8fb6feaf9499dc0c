"""What every search engine shares (keras-tuner's `tune=<algorithm>`, Optuna's `tune=optuna`):
a trial runs as an ordinary tapefit run in `<search dir>/trials/<id>/`, with its record, the
loaded data reused, failures recorded; and the search directory's claim and summary.

The engines only draw the values, keep their own bookkeeping and turn a trial's outcome into
their own verdict.
"""

from __future__ import annotations

import json
import logging
import math
import os
import shlex
import shutil
import time
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import Any

import keras
from hydra.core.hydra_config import HydraConfig
from omegaconf import OmegaConf

from tapefit.config.schemas import TuneAlgorithm
from tapefit.config.snapshot import config_snapshot
from tapefit.errors import TapefitError
from tapefit.files import atomic_write, read_json, write_json
from tapefit.runner.train import build_data, run
from tapefit.runner.validation import check_config
from tapefit.sweeps.records import (
    current_rss_mb,
    placeholders,
    trial_hyperparameters,
    write_hparams_config,
    write_trial_session,
    write_trials_csv,
)
from tapefit.sweeps.search_space import apply_values, corner_values, declare, override_text
from tapefit.sweeps.search_tracking import search_tracker
from tapefit.training.checkpoints import EpochCheckpoint
from tapefit.training.lifecycle import (
    METRICS_FILE,
    RESUME_DIR,
    RunInterrupted,
    alive,
    read_status,
    write_status,
)
from tapefit.training.resume import MAY_DIFFER, check_same_config

log = logging.getLogger("tapefit")

TRIALS = "trials"
RECORD = "trial.json"
SEARCH_MAY_DIFFER = (*MAY_DIFFER, "tune.max_trials", "tune.overwrite")
HIDDEN_OVERRIDES = ("tune", "search_space", "hydra.", "resume", "force_resume", "+tune")


class EpochClock(keras.callbacks.Callback):
    """Seconds spent inside `fit`'s epochs; the rest of a trial is its overhead."""

    def __init__(self) -> None:
        super().__init__()
        self.seconds = 0.0

    def on_epoch_begin(self, epoch: int, logs: dict | None = None) -> None:
        self.started = time.perf_counter()

    def on_epoch_end(self, epoch: int, logs: dict | None = None) -> None:
        self.seconds += time.perf_counter() - self.started


class EpochReport(keras.callbacks.Callback):
    """Hands each epoch's objective value to `report(value, epoch)`; when it answers True (a
    pruner's verdict) training stops after that epoch and `stopped_at` says which."""

    def __init__(self, objective: str, report: Callable[[float, int], bool]) -> None:
        super().__init__()
        self.objective, self.report = objective, report
        self.stopped_at: int | None = None
        self.earlier: list[dict] = []

    def use_callbacks(self, callbacks: list[Any]) -> None:
        """The run's callbacks: a resumed run's checkpointer holds the epochs before the stop."""
        found = (c.history for c in callbacks if isinstance(c, EpochCheckpoint))
        self.earlier = list(next(found, []))

    def on_train_begin(self, logs: dict | None = None) -> None:
        self.stopped_at = None
        # A resumed trial reports its epochs from before the stop again, in case the stop came
        # between an epoch's checkpoint and its report (the engine ignores repeats).
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            for epoch, logs_then in enumerate(self.earlier):
                value = logs_then.get(self.objective)
                if value is not None and math.isfinite(float(value)):
                    self.report(float(value), epoch)

    def on_epoch_end(self, epoch: int, logs: dict | None = None) -> None:
        value = (logs or {}).get(self.objective)
        if value is None or not math.isfinite(float(value)):
            return  # a test_* objective has no epoch value; a non-finite one fails the run
        if self.report(float(value), epoch):
            self.stopped_at = epoch
            self.model.stop_training = True

    def stop_reason(self) -> str:
        """Why this callback stopped training (logged by the run)."""
        return f"the search pruned this trial on {self.objective}"


class DataCache:
    """Data loaded once per search: trials that change only the batch size (or nothing in
    `data`) get fresh pipelines over the same arrays, so each trial still starts from the
    first epoch's shuffle, exactly like an ordinary run."""

    def __init__(self, keep: int = 4) -> None:
        self.loaded: dict[str, Any] = {}
        self.keep = keep

    def __call__(self, cfg: Any) -> Any:
        options = OmegaConf.to_container(cfg.data, resolve=True, enum_to_str=True)
        options.pop("batch_size", None)
        key = json.dumps([options, cfg.seed], sort_keys=True, default=str)
        if key in self.loaded and hasattr(self.loaded[key], "rebuilt"):
            cached = self.loaded[key]  # a loader's node may leave batch_size to its default
            return cached.rebuilt(cfg.data.get("batch_size") or cached.options.batch_size)
        data = build_data(cfg)
        self.loaded[key] = data
        while len(self.loaded) > self.keep:
            self.loaded.pop(next(iter(self.loaded)))
        return data


def _same(a: Any, b: Any) -> bool:
    return json.dumps(a, sort_keys=True, default=str) == json.dumps(b, sort_keys=True, default=str)


class TrialRuns:
    """A search's trials as tapefit runs: where each lives, how it runs (executions averaged,
    seed + k), what its record says, and the search directory's summary."""

    def __init__(
        self,
        cfg: Any,
        search_dir: Path,
        objective: str,
        direction: str,
        overrides: list[str],
        worker: str,
    ) -> None:
        self.cfg, self.search_dir, self.overrides = cfg, Path(search_dir), overrides
        self.objective, self.direction, self.worker = objective, direction, worker
        self.load_data = DataCache()
        self.placeholders = placeholders(cfg, cfg.tune.space)
        self.tracker = search_tracker(cfg, self.search_dir)  # the trials' parent MLflow run
        for key in pinned(overrides, cfg.tune.space):
            log.warning(
                "%s is set on the command line, but tune.space searches it: each trial's "
                "value replaces it; to keep it fixed, search a space without it "
                "(search_space=<your file>)",
                key,
            )

    def trial_dir(self, trial_id: str, execution: int = 0) -> Path:
        """Where a trial's run lives (one directory per execution when there are several)."""
        base = self.search_dir / TRIALS / trial_id
        return base if self.cfg.tune.executions_per_trial == 1 else base / f"execution-{execution}"

    def run_trial(
        self,
        trial_id: str,
        trial_cfg: Any,
        values: dict[str, Any],
        warm_start: tuple[Path, int] | None = None,
        report: EpochReport | None = None,
    ) -> dict[str, Any]:
        """Every execution of a trial (`report` watches the first); the outcome is the first
        record that did not complete, else a completed one with the averaged objective."""
        scores, record = [], {}
        for execution in range(self.cfg.tune.executions_per_trial):
            run_cfg = apply_values(trial_cfg, {"seed": trial_cfg.seed + execution})
            watch = report if execution == 0 else None
            record = self.execute(trial_id, run_cfg, execution, values, warm_start, watch)
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
            trial_hyperparameters(self.cfg.tune.space, values, self.placeholders),
            "failed" if failed else "completed",
            self.objective,
            None if failed else record.get("objective_value"),
            record.get("reason") or None,
        )

    def execute(
        self,
        trial_id: str,
        cfg: Any,
        execution: int,
        values: dict[str, Any],
        warm_start: tuple[Path, int] | None = None,
        report: EpochReport | None = None,
    ) -> dict[str, Any]:
        """One run of a trial; its record (`trial.json`) says how it went. `RunInterrupted`
        goes through: the search stops, and its next start continues this run."""
        run_dir = self.trial_dir(trial_id, execution)
        previous = read_status(run_dir) or {}
        recorded = read_record(run_dir / RECORD)
        if (
            previous.get("state") == "completed"
            and recorded.get("status") in ("completed", "pruned")
            and _same(recorded.get("values"), values)
        ):
            return recorded  # finished and recorded, but not yet told to the engine
        cfg.resume = (run_dir / RESUME_DIR).is_dir()  # a trial the search was killed in
        if self.tracker is not None:  # the trial's run nests under the search's
            name = f"trial {trial_id}" + (f" execution {execution}" if execution else "")
            nested = {"logger.parent_run_id": self.tracker.run_id, "logger.run_name": name}
            cfg = apply_values(cfg, nested)
        record = {"trial_id": trial_id, "execution": execution, "values": values}
        record["tuner"] = self.worker
        started, clock = time.perf_counter(), EpochClock()
        extra = [clock, *([report] if report is not None else [])]
        try:
            if previous.get("state") == "completed" and not recorded:  # killed before the record
                metrics = json.loads((run_dir / METRICS_FILE).read_text())
            else:
                metrics = run(
                    cfg,
                    run_dir,
                    extra,
                    load_data=self.load_data,
                    warm_start=warm_start,
                    hparams_session=False,  # the trial is the session (write_session)
                )
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

    def write_summary(self, rows: list[dict[str, Any]], final: bool) -> dict[str, Any]:
        """`trials.csv` from the engine's `rows` (one record per trial), and at the end `best/`,
        `best_config.yaml` and `search.json`."""
        write_trials_csv(
            self.search_dir / "trials.csv", rows, list(self.cfg.tune.space), self.direction
        )
        completed = [r for r in rows if r["status"] == "completed" and "objective_value" in r]
        summary: dict[str, Any] = {
            "objective": self.objective,
            "direction": self.direction,
            "trials": {s: sum(r["status"] == s for r in rows) for s in {r["status"] for r in rows}},
        }
        if not final or not completed:
            return summary
        pick = max if self.direction == "max" else min
        best = pick(completed, key=lambda r: r["objective_value"])
        best_cfg = apply_values(self.cfg, best["values"])
        best_cfg.tune.algorithm = TuneAlgorithm.none
        command = best_command(self.overrides, best["values"], self.cfg)
        atomic_write(
            self.search_dir / "best_config.yaml",
            lambda file: file.write(
                f"# trial {best['trial_id']}: {self.objective}={best['objective_value']}\n"
                f"# re-run it as an ordinary run:\n#   {command}\n" + OmegaConf.to_yaml(best_cfg)
            ),
        )
        source = Path(best.get("run_dir") or self.trial_dir(best["trial_id"]))
        if source.is_dir():
            copy_best(source, self.search_dir / "best")
        else:  # a trial another machine ran into a directory this one cannot see
            log.warning("best/ not written: trial %s ran in %s", best["trial_id"], source)
        overheads = sorted(r["overhead_s"] for r in rows if "overhead_s" in r)
        summary.update(
            best_trial=best["trial_id"],
            best_value=best["objective_value"],
            best_values=best["values"],
            best_command=command,
            median_overhead_s=overheads[len(overheads) // 2] if overheads else None,
        )
        write_json(self.search_dir / "search.json", summary)
        return summary

    def finish(
        self, rows: list[dict[str, Any]], started: float, stopped: str | None
    ) -> dict[str, Any]:
        """The final summary and status; a search in which no trial completed is an error."""
        summary = self.write_summary(rows, final=True)
        summary["wall_time_s"] = round(time.perf_counter() - started, 3)
        if "best_trial" not in summary:
            reasons = [r.get("reason") for r in rows if r.get("reason")]
            error = f"no trial completed ({stopped or 'every trial failed'})" + (
                f"; the last failure: {reasons[-1]}" if reasons else ""
            )
            write_status(self.search_dir, "failed", error=error)
            if self.tracker is not None:
                self.tracker.end("failed", self.search_dir)
            raise TapefitError(error)
        summary["objective_value"] = summary["best_value"]
        if stopped:
            summary["stopped"] = stopped
        write_json(self.search_dir / "search.json", summary)
        write_status(
            self.search_dir,
            "completed",
            objective=self.objective,
            objective_value=summary["best_value"],
        )
        if self.tracker is not None:
            self.tracker.end(
                "completed", self.search_dir, {"objective_value": summary["best_value"]}
            )
        return summary


def pinned(overrides: list[str], space: Any) -> list[str]:
    """The searched keys that the command line also sets."""
    keys = [o.lstrip("+~").split("=", 1)[0] for o in overrides if "=" in o]
    return [key for key in keys if key in space]


def read_record(path: Path) -> dict[str, Any]:
    """A JSON record (`trial.json`), or {} when there is none (or an unreadable one)."""
    return read_json(path, {})


def best_command(overrides: list[str], values: dict[str, Any], cfg: Any = None) -> str:
    """The command that re-runs a trial as an ordinary run, each argument shell-quoted (it
    pastes into a shell as it is); a searched argument of a `_target_` object that the config
    does not list is added with `++`."""
    kept = [o for o in overrides if not o.lstrip("+~").startswith(HIDDEN_OVERRIDES)]
    kept = [o for o in kept if o.lstrip("+~").split("=", 1)[0] not in values]  # the trial's win

    def setting(key: str, value: Any) -> str:
        listed = cfg is None or OmegaConf.select(cfg, key, default=None) is not None
        return override_text(key, value) if listed else "++" + override_text(key, value)

    arguments = [*kept, *(setting(k, v) for k, v in values.items())]
    return " ".join(["python -m tapefit", *(shlex.quote(argument) for argument in arguments)])


def copy_best(trial_dir: Path, best_dir: Path) -> None:
    """Replace `best/` with a copy of the best trial's run directory, but for its TensorBoard
    files: the trial's own are already in the search's TensorBoard view, once."""
    staging = best_dir.with_name(best_dir.name + ".tmp")
    shutil.rmtree(staging, ignore_errors=True)
    shutil.copytree(
        trial_dir, staging, ignore=shutil.ignore_patterns("tensorboard", "events.out.tfevents.*")
    )
    shutil.rmtree(best_dir, ignore_errors=True)
    staging.rename(best_dir)


def check_space(cfg: Any) -> None:
    """Every entry names a config key, and every bound or choice gives a config a run can use."""
    if not cfg.tune.space:
        raise TapefitError(
            "tune.space is empty: pick a search_space=<name> or list entries under tune.space"
        )
    declare(cfg.tune.space)
    for corner in corner_values(cfg.tune.space):
        key, value = next(iter(corner.items()))
        try:
            check_config(apply_values(cfg, corner))
        except TapefitError as error:
            message = str(error).removeprefix(f"tune.space.{key}: ")
            raise TapefitError(
                f"tune.space.{key}: value {value!r} cannot run: {message}{space_origin(key)}"
            ) from None


def space_origin(key: str) -> str:
    """Where tune.space's entries came from, when the CLI composed them from a
    `search_space` option: a key the user never wrote may be that option's."""
    if not HydraConfig.initialized():
        return ""
    choice = HydraConfig.get().runtime.choices.get("search_space")
    if choice in (None, "null"):
        return ""
    return (
        f" (tune.space holds the entries of search_space={choice}; if tune.space.{key} is not "
        "yours, pick a search_space for your model, or drop it with "
        "'- override /search_space: null' in your experiment's defaults)"
    )


def claim_search(search_dir: Path, cfg: Any) -> None:
    """Refuse a search directory another live process is searching in, or whose search had
    another config (unless tune.overwrite); mark it running."""
    search_dir.mkdir(parents=True, exist_ok=True)
    status = read_status(search_dir) or {}
    pid = status.get("pid")
    if status.get("state") == "running" and pid not in (None, os.getpid()) and alive(pid):
        raise TapefitError(
            f"search directory {search_dir} is in use by a running process (pid {pid}): "
            "wait for it, stop it, or choose another hydra.run.dir"
        )
    saved = search_dir / "search_config.json"
    if saved.is_file() and not cfg.tune.overwrite:
        check_same_config(
            json.loads(saved.read_text()),
            config_snapshot(cfg),
            cfg.force_resume,
            may_differ=SEARCH_MAY_DIFFER,
        )
    write_json(saved, config_snapshot(cfg))
    write_status(search_dir, "running", kind="search")


def begin_search(search_dir: Path, cfg: Any, objective: str) -> None:
    """Claim the search directory (with tune.overwrite, dropping the earlier search's trial
    runs, which a new trial of the same id would otherwise meet) and declare the HParams
    dashboard's columns."""
    claim_search(search_dir, cfg)
    if cfg.tune.overwrite:
        for name in (TRIALS, "tensorboard", "best"):
            shutil.rmtree(search_dir / name, ignore_errors=True)
    # -- HParams view, per search (records.py): the searched keys, typed, and the metrics ----
    first_run = "tensorboard" if cfg.tune.executions_per_trial == 1 else "execution-0/tensorboard"
    shown = placeholders(cfg, cfg.tune.space)
    write_hparams_config(search_dir / "tensorboard", cfg.tune.space, objective, shown, first_run)

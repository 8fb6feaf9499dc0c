"""`tune=<algorithm>`: a keras-tuner search whose every trial is an ordinary tapefit run (the
same phases, callbacks and run-directory outputs) in `<search dir>/trials/<id>/`.

keras-tuner owns the oracle (random, Bayesian, Hyperband, grid), the trial bookkeeping, the
resume of an interrupted search and the chief/worker protocol; tapefit runs the trials, reuses
the loaded data, records failures with their reason and writes the summary.
"""

from __future__ import annotations

import json
import logging
import math
import os
import shutil
import time
from pathlib import Path
from typing import Any

import keras
import keras_tuner as kt
from keras_tuner.src.distribute import utils as dist_utils
from omegaconf import OmegaConf

from tapefit.config.schemas import TuneAlgorithm
from tapefit.config.validation import check_config, checked_objective
from tapefit.errors import TapefitError
from tapefit.sweeps.records import (
    current_rss_mb,
    write_hparams_config,
    write_hparams_trial,
    write_trials_csv,
)
from tapefit.sweeps.search_space import (
    active_values,
    apply_values,
    corner_values,
    declare,
    override_text,
)
from tapefit.training.callbacks import resolve_mode
from tapefit.training.lifecycle import CHECKPOINTS, RunInterrupted, alive, read_status, write_status
from tapefit.training.outputs import atomic_write, write_json
from tapefit.training.resume import MAY_DIFFER, check_same_config, config_snapshot
from tapefit.training.train import build_data, run

log = logging.getLogger("tapefit")

PROJECT = "tuner"  # keras-tuner's project folder inside the search directory
TRIALS = "trials"
RECORD = "trial.json"
SEARCH_MAY_DIFFER = (*MAY_DIFFER, "tune.max_trials", "tune.overwrite")
TUNER_ID = "KERASTUNER_TUNER_ID"  # keras-tuner's name for this process in a distributed search
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
            return self.loaded[key].rebuilt(cfg.data.batch_size)
        data = build_data(cfg)
        self.loaded[key] = data
        while len(self.loaded) > self.keep:
            self.loaded.pop(next(iter(self.loaded)))
        return data


def make_oracle(cfg: Any, hyperparameters: kt.HyperParameters, objective: kt.Objective) -> Any:
    """keras-tuner's oracle for `cfg.tune.algorithm`, seeded and bounded from config."""
    tune = cfg.tune
    common = {
        "objective": objective,
        "hyperparameters": hyperparameters,
        "tune_new_entries": False,
        "allow_new_entries": False,
        # keras-tuner draws a random seed for a falsy one, so seed 0 would not repeat itself
        "seed": (tune.seed if tune.seed is not None else cfg.seed) + 1,
        "max_consecutive_failed_trials": tune.max_consecutive_failures,
    }
    algorithm = TuneAlgorithm(tune.algorithm)
    if algorithm == TuneAlgorithm.hyperband:
        return kt.oracles.HyperbandOracle(
            max_epochs=tune.max_epochs or cfg.trainer.epochs,
            factor=tune.factor,
            hyperband_iterations=tune.hyperband_iterations,
            **common,
        )
    if algorithm == TuneAlgorithm.bayesian:
        return kt.oracles.BayesianOptimizationOracle(
            max_trials=tune.max_trials, num_initial_points=tune.num_initial_points, **common
        )
    oracle_class = {
        TuneAlgorithm.random: kt.oracles.RandomSearchOracle,
        TuneAlgorithm.grid: kt.oracles.GridSearchOracle,
    }[algorithm]
    return oracle_class(max_trials=tune.max_trials, **common)


class TrialRunner(kt.engine.base_tuner.BaseTuner):
    """Runs each keras-tuner trial as a tapefit run and returns its objective."""

    def __init__(
        self, cfg: Any, search_dir: Path, oracle: Any, overwrite: bool, overrides: list[str]
    ) -> None:
        self.cfg, self.search_dir, self.overrides = cfg, search_dir, overrides
        self.objective_name = oracle.objective.name
        self.load_data = DataCache()
        self.interrupted: RunInterrupted | None = None
        super().__init__(
            oracle=oracle, directory=str(search_dir), project_name=PROJECT, overwrite=overwrite
        )

    def trial_dir(self, trial_id: str, execution: int = 0) -> Path:
        """Where a trial's run lives (one directory per execution when there are several)."""
        base = self.search_dir / TRIALS / trial_id
        return base if self.cfg.tune.executions_per_trial == 1 else base / f"execution-{execution}"

    def run_trial(self, trial: Any, *args: Any, **kwargs: Any) -> dict[str, float]:
        hp = trial.hyperparameters
        values = active_values(hp, self.cfg.tune.space)
        trial_cfg = apply_values(self.cfg, values)
        warm_start = None
        if "tuner/epochs" in hp.values:  # Hyperband: train to tuner/epochs, continuing a round
            trial_cfg.trainer.epochs = int(hp.values["tuner/epochs"])
            trial_cfg.trainer.save_model = True  # the next round starts from this model
            previous = hp.values.get("tuner/trial_id")
            if previous:
                warm_start = (
                    self.trial_dir(previous) / "model.keras",
                    int(hp.values["tuner/initial_epoch"]),
                )
        scores = []
        for execution in range(self.cfg.tune.executions_per_trial):
            run_cfg = apply_values(trial_cfg, {"seed": trial_cfg.seed + execution})
            record = self.execute(trial.trial_id, run_cfg, execution, values, warm_start)
            if record["status"] != "completed":
                raise kt.errors.FailedTrialError(record["reason"])
            scores.append(record["objective_value"])
        return {self.objective_name: sum(scores) / len(scores)}

    def execute(
        self,
        trial_id: str,
        cfg: Any,
        execution: int,
        values: dict[str, Any],
        warm_start: tuple[Path, int] | None,
    ) -> dict[str, Any]:
        """One run of a trial; its record (`trial.json`) says how it went."""
        run_dir = self.trial_dir(trial_id, execution)
        previous = read_status(run_dir) or {}
        cfg.resume = (run_dir / CHECKPOINTS).is_dir()  # a trial the search was killed in
        record = {
            "trial_id": trial_id,
            "execution": execution,
            "values": values,
            "tuner": os.environ.get(TUNER_ID, "tuner0"),
        }
        started, clock = time.perf_counter(), EpochClock()
        try:
            if previous.get("state") == "completed":  # finished, but not yet told the oracle
                metrics = json.loads((run_dir / "metrics.json").read_text())
            else:
                metrics = run(
                    cfg, run_dir, [clock], load_data=self.load_data, warm_start=warm_start
                )
        except RunInterrupted as stop:
            self.interrupted = stop
            raise kt.errors.FatalError(str(stop)) from stop
        except Exception as error:  # a failed trial is recorded; the search goes on
            reason = str(error) if isinstance(error, TapefitError) else repr(error)
            record.update(status="failed", reason=reason.splitlines()[0] if reason else "")
            log.warning("trial %s failed: %s", trial_id, record["reason"])
        else:
            value = metrics.get("objective_value")
            if value is None or not math.isfinite(value):
                record.update(status="failed", reason=f"{self.objective_name} is not finite")
            else:
                record.update(status="completed", objective_value=float(value))
            record.update(epochs=metrics.get("epochs_run"))
        duration = time.perf_counter() - started
        record.update(
            objective=self.objective_name,
            duration_s=round(duration, 3),
            fit_s=round(clock.seconds, 3),
            overhead_s=round(duration - clock.seconds, 3),
            rss_mb=round(current_rss_mb(), 1),
        )
        write_json(run_dir / RECORD, record)
        if record["status"] == "completed" and execution == 0:
            write_hparams_trial(
                self.search_dir / "tensorboard",
                trial_id,
                values,
                self.objective_name,
                record["objective_value"],
            )
        return record

    def on_trial_end(self, trial: Any) -> None:
        super().on_trial_end(trial)
        if not dist_utils.has_chief_oracle():  # with a chief, it writes the summary at the end
            write_summary(self, final=False)

    def save_model(self, trial_id: str, model: Any, step: int = 0) -> None:
        """Each trial's run directory already holds its model.keras."""

    def load_model(self, trial: Any) -> keras.Model:
        return keras.models.load_model(self.trial_dir(trial.trial_id) / "model.keras")


def records(runner: TrialRunner) -> list[dict[str, Any]]:
    """One record per trial the oracle knows: its `trial.json` (execution 0), with the
    oracle's status and averaged score."""
    rows = []
    for trial_id, trial in sorted(runner.oracle.trials.items()):
        path = runner.trial_dir(trial_id) / RECORD
        record = json.loads(path.read_text()) if path.is_file() else {"trial_id": trial_id}
        status = str(getattr(trial.status, "value", trial.status)).lower()
        record["status"] = status if status != "invalid" else "failed"
        if trial.score is not None and math.isfinite(trial.score):
            record["objective_value"] = trial.score
        record.setdefault("values", active_values(trial.hyperparameters, runner.cfg.tune.space))
        record.setdefault("reason", (trial.message or "").strip().splitlines()[-1:] or [""])
        if isinstance(record["reason"], list):
            record["reason"] = record["reason"][0]
        rows.append(record)
    return rows


def write_summary(runner: TrialRunner, final: bool) -> dict[str, Any]:
    """`trials.csv`, and at the end `best/`, `best_config.yaml` and `search.json`."""
    direction = runner.oracle.objective.direction
    rows = records(runner)
    write_trials_csv(runner.search_dir / "trials.csv", rows, list(runner.cfg.tune.space), direction)
    completed = [r for r in rows if r["status"] == "completed" and "objective_value" in r]
    summary: dict[str, Any] = {
        "objective": runner.objective_name,
        "direction": direction,
        "trials": {s: sum(r["status"] == s for r in rows) for s in {r["status"] for r in rows}},
    }
    if not final or not completed:
        return summary
    pick = max if direction == "max" else min
    best = pick(completed, key=lambda r: r["objective_value"])
    best_cfg = apply_values(runner.cfg, best["values"])
    best_cfg.tune.algorithm = TuneAlgorithm.none
    command = best_command(runner.overrides, best["values"], runner.cfg)
    atomic_write(
        runner.search_dir / "best_config.yaml",
        lambda file: file.write(
            f"# trial {best['trial_id']}: {runner.objective_name}={best['objective_value']}\n"
            f"# re-run it as an ordinary run:\n#   {command}\n" + OmegaConf.to_yaml(best_cfg)
        ),
    )
    copy_best(runner.trial_dir(best["trial_id"]), runner.search_dir / "best")
    overheads = sorted(r["overhead_s"] for r in rows if "overhead_s" in r)
    summary.update(
        best_trial=best["trial_id"],
        best_value=best["objective_value"],
        best_values=best["values"],
        best_command=command,
        median_overhead_s=overheads[len(overheads) // 2] if overheads else None,
    )
    write_json(runner.search_dir / "search.json", summary)
    return summary


def best_command(overrides: list[str], values: dict[str, Any], cfg: Any = None) -> str:
    """The command that re-runs a trial as an ordinary run; a searched argument of a
    `_target_` object that the config does not list is added with `++`."""
    kept = [o for o in overrides if not o.lstrip("+~").startswith(HIDDEN_OVERRIDES)]

    def setting(key: str, value: Any) -> str:
        listed = cfg is None or OmegaConf.select(cfg, key, default=None) is not None
        return override_text(key, value) if listed else "++" + override_text(key, value)

    return " ".join(["python -m tapefit", *kept, *(setting(k, v) for k, v in values.items())])


def copy_best(trial_dir: Path, best_dir: Path) -> None:
    """Replace `best/` with a copy of the best trial's run directory."""
    staging = best_dir.with_name(best_dir.name + ".tmp")
    shutil.rmtree(staging, ignore_errors=True)
    shutil.copytree(trial_dir, staging)
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
            raise TapefitError(f"tune.space.{key}: value {value!r} cannot run: {message}") from None


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
            json.loads(saved.read_text()), cfg, cfg.force_resume, may_differ=SEARCH_MAY_DIFFER
        )
    write_json(saved, config_snapshot(cfg))
    write_status(search_dir, "running", kind="search")


def search(cfg: Any, search_dir: str | Path, overrides: list[str] | None = None) -> dict:
    """Run (or continue) the configured search in `search_dir`; return its summary, whose
    `objective_value` is the best trial's. One trial failing does not stop it; more than
    `tune.max_consecutive_failures` in a row, or no completed trial at all, is an error."""
    search_dir = Path(search_dir)
    check_config(cfg)
    name = checked_objective(cfg)
    check_space(cfg)
    chief = not dist_utils.has_chief_oracle() or dist_utils.is_chief_oracle()
    if chief:
        claim_search(search_dir, cfg)
        write_hparams_config(search_dir / "tensorboard", cfg.tune.space, name)
    objective = kt.Objective(name, resolve_mode(name, "auto"))
    oracle = make_oracle(cfg, declare(cfg.tune.space), objective)
    started = time.perf_counter()
    runner = TrialRunner(
        cfg, search_dir, oracle, cfg.tune.overwrite and chief, list(overrides or [])
    )
    stopped = None
    try:
        runner.search(verbose=int(cfg.trainer.verbose > 0))
    except kt.errors.FatalError:
        if runner.interrupted is None:
            raise
        if chief:
            write_summary(runner, final=False)
            write_status(search_dir, "interrupted", signal=runner.interrupted.signum)
        raise runner.interrupted from None
    except RuntimeError as error:  # keras-tuner: too many consecutive failed trials
        if "consecutive failures" not in str(error):
            raise
        stopped = f"stopped after {cfg.tune.max_consecutive_failures} failed trials in a row"
    if not chief:  # the chief, once every tuner has stopped, writes the summary
        return {"objective": name, "objective_value": None, "worker": os.environ[TUNER_ID]}
    summary = write_summary(runner, final=True)
    summary["wall_time_s"] = round(time.perf_counter() - started, 3)
    if "best_trial" not in summary:
        reasons = [r.get("reason") for r in records(runner) if r.get("reason")]
        error = f"no trial completed ({stopped or 'every trial failed'})" + (
            f"; the last failure: {reasons[-1]}" if reasons else ""
        )
        write_status(search_dir, "failed", error=error)
        raise TapefitError(error)
    summary["objective_value"] = summary["best_value"]
    if stopped:
        summary["stopped"] = stopped
    write_json(search_dir / "search.json", summary)
    write_status(search_dir, "completed", objective=name, objective_value=summary["best_value"])
    return summary

"""`tune=<algorithm>`: a keras-tuner search whose every trial is an ordinary tapefit run (the
same phases, callbacks and run-directory outputs) in `<search dir>/trials/<id>/`.

keras-tuner owns the oracle (random, Bayesian, Hyperband, grid), the trial bookkeeping, the
resume of an interrupted search and the chief/worker protocol; tapefit's `sweeps.trials` runs
the trials, reuses the loaded data, records failures with their reason and writes the summary.
"""

from __future__ import annotations

import math
import os
import time
from pathlib import Path
from typing import Any

import keras
import keras_tuner as kt
from keras_tuner.src.distribute import utils as dist_utils
from omegaconf import DictConfig

from tapefit.callbacks.stop_on_signal import RunInterrupted
from tapefit.checkpointing.warm_start import WarmStart
from tapefit.config.schemas import OPTUNA_KEYS, TuneAlgorithm, TuneConfig
from tapefit.errors import TapefitError
from tapefit.runner.validation import check_config
from tapefit.sweeps.oracle_chief import serve_oracle
from tapefit.sweeps.search_dir import begin_search
from tapefit.sweeps.search_results import finish, write_summary
from tapefit.sweeps.search_space import active_values, declare
from tapefit.sweeps.space_check import check_space
from tapefit.sweeps.spec import SearchSpec
from tapefit.sweeps.trials import RECORD, TrialRuns, read_record
from tapefit.training.run_status import write_status

PROJECT = "tuner"  # keras-tuner's project folder inside the search directory
TUNER_ID = "KERASTUNER_TUNER_ID"  # keras-tuner's name for this process in a distributed search


def make_oracle(
    spec: SearchSpec, hyperparameters: kt.HyperParameters, objective: kt.Objective
) -> Any:
    """keras-tuner's oracle for `tune.algorithm`, seeded and bounded by the search's settings.

    Example:
        >>> import tapefit
        >>> spec = SearchSpec.of(tapefit.compose(["tune=random", "seed=0"]))
        >>> oracle = make_oracle(spec, declare(spec.tune.space), kt.Objective("val_loss", "min"))
        >>> type(oracle).__name__, oracle.seed  # seed + 1: keras-tuner redraws a seed of 0
        ('RandomSearchOracle', 1)
    """
    tune = spec.tune
    common = {
        "objective": objective,
        "hyperparameters": hyperparameters,
        "tune_new_entries": False,
        "allow_new_entries": False,
        # keras-tuner draws a random seed for a falsy one, so seed 0 would not repeat itself
        "seed": spec.tune_seed + 1,
        "max_consecutive_failed_trials": tune.max_consecutive_failures,
    }
    algorithm = TuneAlgorithm(tune.algorithm)
    if algorithm == TuneAlgorithm.hyperband:
        return kt.oracles.HyperbandOracle(
            max_epochs=tune.max_epochs or spec.epochs,
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
    """Runs each keras-tuner trial as a tapefit run (`TrialRuns`) and returns its objective."""

    def __init__(
        self,
        spec: SearchSpec,
        search_dir: Path,
        oracle: Any,
        overwrite: bool,
        overrides: list[str],
    ) -> None:
        self.spec, self.search_dir = spec, search_dir
        self.objective_name = oracle.objective.name
        worker = os.environ.get(TUNER_ID, "tuner0")
        self.runs = TrialRuns(spec, search_dir, overrides, worker=worker)
        self.interrupted: RunInterrupted | None = None
        super().__init__(
            oracle=oracle, directory=str(search_dir), project_name=PROJECT, overwrite=overwrite
        )

    def trial_dir(self, trial_id: str, execution: int = 0) -> Path:
        return self.runs.trial_dir(trial_id, execution)

    def search(self, *fit_args: Any, **fit_kwargs: Any) -> None:
        """keras-tuner's search; the chief of a distributed one serves its oracle until the
        last tuner is done, then returns at once (`serve_oracle`; keras-tuner's own loop
        lingers up to 20 s more)."""
        if not dist_utils.is_chief_oracle():
            return super().search(*fit_args, **fit_kwargs)
        self.oracle.verbose = fit_kwargs.get("verbose", self.oracle.verbose)
        self.save()  # as keras-tuner's chief does: a resumed chief reloads it
        address = f"{os.environ['KERASTUNER_ORACLE_IP']}:{os.environ['KERASTUNER_ORACLE_PORT']}"
        serve_oracle(self.oracle, address)
        return None

    def run_trial(self, trial: Any, *args: Any, **kwargs: Any) -> dict[str, float]:
        hp = trial.hyperparameters
        values = active_values(hp, self.spec.tune.space)
        settings, warm_start = {}, None
        if "tuner/epochs" in hp.values:  # Hyperband: train to tuner/epochs, continuing a round
            settings["trainer.epochs"] = int(hp.values["tuner/epochs"])
            settings["trainer.save_model"] = True  # the next round starts from this model
            previous = hp.values.get("tuner/trial_id")
            if previous:
                warm_start = WarmStart(
                    self.trial_dir(previous) / "model.keras",
                    int(hp.values["tuner/initial_epoch"]),
                )
        try:
            outcome = self.runs.run_trial(trial.trial_id, values, warm_start, settings=settings)
        except RunInterrupted as stop:
            self.interrupted = stop
            raise kt.errors.FatalError(str(stop)) from stop
        if outcome["status"] != "completed":
            raise kt.errors.FailedTrialError(outcome["reason"])
        return {self.objective_name: outcome["objective_value"]}

    def on_trial_end(self, trial: Any) -> None:
        super().on_trial_end(trial)
        if not dist_utils.has_chief_oracle():  # with a chief, it writes the summary at the end
            write_summary(self.runs, records(self), final=False)

    def save_model(self, trial_id: str, model: Any, step: int = 0) -> None:
        """Each trial's run directory already holds its model.keras."""

    def load_model(self, trial: Any) -> keras.Model:
        return keras.models.load_model(self.trial_dir(trial.trial_id) / "model.keras")


def records(runner: TrialRunner) -> list[dict[str, Any]]:
    """One record per trial the oracle knows: its `trial.json` (execution 0), with the
    oracle's status and averaged score."""
    rows = []
    for trial_id, trial in sorted(runner.oracle.trials.items()):
        record = read_record(runner.trial_dir(trial_id) / RECORD) or {"trial_id": trial_id}
        status = str(getattr(trial.status, "value", trial.status)).lower()
        record["status"] = status if status != "invalid" else "failed"
        if trial.score is not None and math.isfinite(trial.score):
            record["objective_value"] = trial.score
        record.setdefault("values", active_values(trial.hyperparameters, runner.spec.tune.space))
        record.setdefault("reason", (trial.message or "").strip().splitlines()[-1:] or [""])
        if isinstance(record["reason"], list):
            record["reason"] = record["reason"][0]
        rows.append(record)
    return rows


def check_no_optuna_keys(tune: TuneConfig) -> None:
    """A key only `tune=optuna` reads, changed for a keras-tuner search, is a mistake (a wrong
    `tune=` or a misplaced setting): refused in one line rather than ignored.

    Example:
        >>> check_no_optuna_keys(TuneConfig(algorithm=TuneAlgorithm.random, storage="x.db"))
        Traceback (most recent call last):
        tapefit.errors.TapefitError: tune.storage=x.db is read only by tune=optuna, not by ...
    """
    changed = [key for key, default in OPTUNA_KEYS.items() if getattr(tune, key) != default]
    if changed:
        value = getattr(tune, changed[0])
        raise TapefitError(
            f"tune.{changed[0]}={getattr(value, 'value', value)} is read only by tune=optuna, "
            f"not by tune={TuneAlgorithm(tune.algorithm).value}: use tune=optuna, or "
            "drop the key"
        )


def search(cfg: DictConfig, search_dir: str | Path, overrides: list[str] | None = None) -> dict:
    """Run (or continue) the configured search in `search_dir`; return its summary, whose
    `objective_value` is the best trial's. One trial failing does not stop it; more than
    `tune.max_consecutive_failures` in a row, or no completed trial at all, is an error.

    Args:
        cfg: The composed config with `tune=<algorithm>`: the sweep's edge, where it becomes
            a `SearchSpec`; each trial's config is made from it.
        search_dir: The search directory (keras-tuner's project in `tuner/`).
        overrides: The command line's overrides, kept in the best trial's re-run command.

    Returns:
        The summary (`search.json`), with the best trial's id, values and command; a tuner
        process of a distributed search returns only its name (`worker`).

    Raises:
        TapefitError: Bad input (before any trial), or no trial completed.

    Example:
        >>> import tapefit
        >>> cfg = tapefit.compose(["tune=random", "tune.max_trials=4"])
        >>> search(cfg, "outputs/random")["best_trial"]  # doctest: +SKIP
        '2'
    """
    search_dir = Path(search_dir)
    spec = SearchSpec.of(cfg, check_config(cfg))  # refuses an objective of unknown direction
    name = spec.objective.name
    check_space(spec)
    check_no_optuna_keys(spec.tune)
    chief = not dist_utils.has_chief_oracle() or dist_utils.is_chief_oracle()
    if chief:
        begin_search(search_dir, spec)  # the claim and the HParams columns
    objective = kt.Objective(name, spec.objective.direction)
    oracle = make_oracle(spec, declare(spec.tune.space), objective)
    started = time.perf_counter()
    runner = TrialRunner(
        spec, search_dir, oracle, spec.tune.overwrite and chief, list(overrides or [])
    )
    stopped = None
    try:
        runner.search(verbose=int(spec.verbose > 0))
    except kt.errors.FatalError:
        if runner.interrupted is None:
            raise
        if chief:
            write_summary(runner.runs, records(runner), final=False)
            write_status(search_dir, "interrupted", signal=runner.interrupted.signum)
        raise runner.interrupted from None
    except RuntimeError as error:  # keras-tuner: too many consecutive failed trials
        if "consecutive failures" not in str(error):
            raise
        stopped = f"stopped after {spec.tune.max_consecutive_failures} failed trials in a row"
    if not chief:  # the chief, once every tuner has stopped, writes the summary
        return {"objective": name, "objective_value": None, "worker": os.environ[TUNER_ID]}
    return finish(runner.runs, records(runner), started, stopped)

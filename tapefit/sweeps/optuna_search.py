"""`tune=optuna`: Optuna's own study (Optuna >= 4) over `tune.space`, each trial an ordinary
tapefit run in `<search dir>/trials/<number>/` (`sweeps.trials`), reported to Optuna after
every epoch and stopped there when its pruner says the trial is unpromising.

The study lives in a database, `<search dir>/optuna.db` (SQLite) unless `tune.storage` names
one that processes on several machines share; Optuna keeps the trials, their values and their
epoch values, so a restarted search continues the same study.
"""

from __future__ import annotations

import logging
import os
import re
import socket
import time
import zlib
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from omegaconf import DictConfig

from tapefit.callbacks.stop_on_signal import RunInterrupted
from tapefit.choices import parse_choice
from tapefit.config.schemas import ParamType, Pruner, Sampler, SpaceEntry, TuneConfig
from tapefit.errors import TapefitError
from tapefit.runner.validation import at_least, check_config
from tapefit.sweeps.search_dir import begin_search
from tapefit.sweeps.search_results import finish, write_summary
from tapefit.sweeps.space_check import check_space
from tapefit.sweeps.spec import SearchSpec
from tapefit.sweeps.trial_callbacks import EpochReport
from tapefit.sweeps.trials import RECORD, TrialRuns, read_record
from tapefit.training.run_status import write_status

log = logging.getLogger("tapefit")

NEEDS_OPTUNA = "tune=optuna needs Optuna: pip install 'tapefit[sweep]'"
STATUS = {  # Optuna's trial states as trials.csv says them
    "COMPLETE": "completed",
    "PRUNED": "pruned",
    "FAIL": "failed",
    "RUNNING": "running",
    "WAITING": "waiting",
}


def require_optuna() -> Any:
    """The `optuna` module (>= 4), imported only for `tune=optuna`; else a one-line error."""
    try:
        import optuna
    except ImportError:
        raise TapefitError(NEEDS_OPTUNA) from None
    if int(optuna.__version__.split(".")[0]) < 4:
        raise TapefitError(f"{NEEDS_OPTUNA} (Optuna >= 4; {optuna.__version__} is installed)")
    return optuna


def check_optuna(spec: SearchSpec) -> None:
    """What Optuna cannot search or run, refused in one line before the study opens.

    Raises:
        TapefitError: A setting out of range, or a space entry only keras-tuner can search.
    """
    tune = spec.tune
    parse_choice(Sampler, tune.sampler, "tune.sampler")
    for key in ("max_trials", "executions_per_trial", "max_consecutive_failures"):
        at_least(getattr(tune, key), 1, f"tune.{key}")
    if parse_choice(Pruner, tune.pruner, "tune.pruner") == Pruner.hyperband:
        at_least(tune.factor, 2, "tune.factor")
        max_epochs = tune.max_epochs if tune.max_epochs is not None else spec.epochs
        at_least(max_epochs, 1, "tune.max_epochs")
    at_least(tune.pruner_startup_trials, 0, "tune.pruner_startup_trials")
    at_least(tune.pruner_warmup_epochs, 0, "tune.pruner_warmup_epochs")
    for name, entry in tune.space.items():
        where, kind = f"tune.space.{name}", ParamType(entry.type)
        sampling = str(getattr(entry.sampling, "value", entry.sampling))
        if kind in (ParamType.float, ParamType.int) and sampling == "reverse_log":
            raise TapefitError(
                f"{where}: sampling=reverse_log is keras-tuner's; tune=optuna samples linear or log"
            )
        if kind in (ParamType.float, ParamType.int) and sampling == "log" and entry.step:
            raise TapefitError(f"{where}: tune=optuna cannot take a step with log sampling")
        if kind == ParamType.choice:
            odd = [v for v in entry.values if not isinstance(v, (bool, int, float, str))]
            if odd:
                raise TapefitError(
                    f"{where}: tune=optuna's choices are numbers, strings or booleans, not {odd[0]}"
                )


def suggest(trial: Any, space: Mapping[str, SpaceEntry]) -> dict[str, Any]:
    """Optuna's define-by-run search space: each active entry of `space` suggested in order;
    an entry whose `when` does not hold is not suggested (nor applied)."""
    values: dict[str, Any] = {}
    for name, entry in space.items():
        conditions = (entry.when or {}).items()
        if all(parent in values and values[parent] in list(ok) for parent, ok in conditions):
            values[name] = _suggest_one(trial, name, entry)
    return values


def _suggest_one(trial: Any, name: str, entry: SpaceEntry) -> Any:
    kind = ParamType(entry.type)
    log_scale = str(getattr(entry.sampling, "value", entry.sampling)) == "log"
    if kind == ParamType.float:
        step = float(entry.step) if entry.step else None
        return trial.suggest_float(
            name, float(entry.min), float(entry.max), step=step, log=log_scale
        )
    if kind == ParamType.int:
        step = int(entry.step) if entry.step else 1
        return trial.suggest_int(name, int(entry.min), int(entry.max), step=step, log=log_scale)
    if kind == ParamType.choice:
        return trial.suggest_categorical(name, list(entry.values))
    return trial.suggest_categorical(name, [False, True])


def storage_url(storage: str | None, search_dir: Path) -> str:
    """`tune.storage`, or a SQLite file in the search directory.

    Example:
        >>> storage_url("postgresql://me@db-host/studies", Path("outputs/search"))
        'postgresql://me@db-host/studies'
    """
    return storage or f"sqlite:///{(search_dir / 'optuna.db').resolve()}"


def open_study(optuna: Any, spec: SearchSpec, search_dir: Path) -> Any:
    """The study named `tune.study_name` (null: experiment_name) in the storage, created if
    new (deleted first with tune.overwrite); a storage that cannot be opened, or a study that
    optimises the other way than the objective, is a one-line error."""
    url = storage_url(spec.tune.storage, search_dir)
    name = spec.tune.study_name or spec.experiment_name
    objective, direction = spec.objective.name, spec.objective.direction
    shown = re.sub(r"://([^:/@]*):[^@/]*@", r"://\1:***@", url)  # no password in messages
    goal = "maximize" if direction == "max" else "minimize"
    try:
        if spec.tune.overwrite and name in optuna.get_all_study_names(storage=url):
            optuna.delete_study(study_name=name, storage=url)
        study = optuna.create_study(
            storage=url, study_name=name, direction=goal, load_if_exists=True
        )
    except Exception as error:  # SQLAlchemy's and the drivers' errors, a malformed URL
        first = (str(error).strip().splitlines() or [""])[0]
        raise TapefitError(
            f"tune.storage={shown} cannot be opened ({type(error).__name__}: {first}): give a "
            "database URL such as sqlite:////path/optuna.db or postgresql://user@host/db"
        ) from None
    if [d.name.lower() for d in study.directions] != [goal]:
        raise TapefitError(
            f"study {name} in {shown} does not {goal} one value as {objective} needs: choose "
            "another tune.study_name (or tune.overwrite=true to replace it)"
        )
    return study


def sampler_seed(spec: SearchSpec, trials_so_far: int) -> int:
    """`tune.seed` (null: `seed`) moved on by the trials the study already holds, so a resumed
    search does not draw its first trials again; with a shared `tune.storage` also by this
    process, so processes started together do not draw the same trials."""
    seed = spec.tune_seed + trials_so_far
    if spec.tune.storage:
        seed += zlib.crc32(f"{socket.gethostname()}:{os.getpid()}".encode())
    return seed % 2**32


def make_sampler(optuna: Any, tune: TuneConfig, seed: int) -> Any:
    """Optuna's TPE (random for its first trials) or random sampler, seeded."""
    if parse_choice(Sampler, tune.sampler, "tune.sampler") == Sampler.random:
        return optuna.samplers.RandomSampler(seed=seed)
    startup = tune.num_initial_points if tune.num_initial_points is not None else 10
    return optuna.samplers.TPESampler(n_startup_trials=startup, seed=seed)


def make_pruner(optuna: Any, tune: TuneConfig, epochs: int) -> Any:
    """Optuna's median or Hyperband pruner over epochs (`tune.max_epochs`, null: `epochs`),
    or none (epoch values still kept)."""
    kind = parse_choice(Pruner, tune.pruner, "tune.pruner")
    if kind == Pruner.median:
        return optuna.pruners.MedianPruner(
            n_startup_trials=tune.pruner_startup_trials,
            n_warmup_steps=tune.pruner_warmup_epochs,
        )
    if kind == Pruner.hyperband:
        return optuna.pruners.HyperbandPruner(
            min_resource=1,
            max_resource=tune.max_epochs or epochs,
            reduction_factor=tune.factor,
        )
    return optuna.pruners.NopPruner()


def reattach(optuna: Any, study: Any, frozen: Any) -> Any:
    """A live `Trial` for a trial a stopped process of this search left RUNNING, so the same
    trial (number, values, epoch values) continues; Optuna's ask/tell has no public call for
    this, hence its `Trial(study, trial_id)` constructor."""
    return optuna.trial.Trial(study, frozen._trial_id)


def next_step(study: Any, tune: TuneConfig) -> tuple[bool, str | None]:
    """Whether to ask for another trial, and why not: `tune.max_trials` finished trials
    (completed, pruned or failed) in the study, or `tune.max_consecutive_failures` failures
    in a row."""
    finished = sorted(
        (t for t in study.get_trials(deepcopy=False) if t.state.is_finished()),
        key=lambda t: t.number,
    )
    if len(finished) >= tune.max_trials:
        return False, None
    failures = 0
    for trial in reversed(finished):
        if trial.state.name != "FAIL":
            break
        failures += 1
    if failures >= tune.max_consecutive_failures:
        return False, f"stopped after {failures} failed trials in a row"
    return True, None


def run_one(optuna: Any, study: Any, trial: Any, runs: TrialRuns) -> None:
    """One Optuna trial as a tapefit trial, then told to the study: completed with its
    objective, pruned, or failed (its record is kept in the trial's user attributes)."""
    TrialState = optuna.trial.TrialState  # noqa: N806 - Optuna's enum
    try:
        values = suggest(trial, runs.spec.tune.space)
    except ValueError as error:  # the study's earlier trials drew this key from another range
        study.tell(trial, state=TrialState.FAIL)
        raise TapefitError(
            f"tune.space does not match study {study.study_name}'s earlier trials "
            f"({str(error).splitlines()[0]}): choose another tune.study_name"
        ) from None

    def report(value: float, epoch: int) -> bool:
        trial.report(value, epoch)
        return trial.should_prune()

    watch = EpochReport(runs.objective, report)
    outcome = runs.run_trial(str(trial.number), values, None, watch)
    trial.set_user_attr("record", outcome)
    state = {"completed": TrialState.COMPLETE, "pruned": TrialState.PRUNED}.get(
        outcome["status"], TrialState.FAIL
    )
    value = outcome["objective_value"] if state == TrialState.COMPLETE else None
    study.tell(trial, value, state=state)
    log.info("trial %s %s: %s=%s", trial.number, outcome["status"], runs.objective, value)


def rows(study: Any, runs: TrialRuns) -> list[dict[str, Any]]:
    """One record per trial in the study, whichever process ran it: its record (kept by
    Optuna, else this directory's `trial.json`) with Optuna's state and value."""
    found = []
    for trial in study.get_trials(deepcopy=False):
        trial_id = str(trial.number)
        record = dict(
            trial.user_attrs.get("record") or read_record(runs.trial_dir(trial_id) / RECORD)
        )
        record.update(trial_id=trial_id, status=STATUS.get(trial.state.name, "unknown"))
        if trial.state.name == "COMPLETE" and trial.value is not None:
            record["objective_value"] = trial.value
        record.setdefault("values", dict(trial.params))
        record.setdefault("reason", "")
        if trial.user_attrs.get("run_dir"):
            record["run_dir"] = trial.user_attrs["run_dir"]
        found.append(record)
    return found


def search(cfg: DictConfig, search_dir: str | Path, overrides: list[str] | None = None) -> dict:
    """Run (or continue) the Optuna study in `search_dir`; return its summary, whose
    `objective_value` is the best trial's. Like keras-tuner searches, one failed trial does
    not stop it; `tune.max_consecutive_failures` in a row, or no completed trial, is an error.

    Args:
        cfg: The composed config with `tune=optuna`: the sweep's edge, where it becomes a
            `SearchSpec`; each trial's config is made from it.
        search_dir: The search directory (the study's SQLite file unless `tune.storage`).
        overrides: The command line's overrides, kept in the best trial's re-run command.

    Returns:
        The summary (`search.json`), with the best trial's id, values and command.

    Raises:
        TapefitError: Bad input (before any trial), or no trial completed.

    Example:
        >>> import tapefit
        >>> cfg = tapefit.compose(["tune=optuna", "tune.max_trials=4"])
        >>> search(cfg, "outputs/optuna")["best_trial"]  # doctest: +SKIP
        '2'
    """
    optuna = require_optuna()
    search_dir = Path(search_dir)
    spec = SearchSpec.of(cfg, check_config(cfg))  # refuses an objective of unknown direction
    check_space(spec)
    check_optuna(spec)
    host = socket.gethostname()
    runs = TrialRuns(spec, search_dir, list(overrides or []), worker=host)
    begin_search(search_dir, spec)  # the claim and the HParams columns
    try:
        study = open_study(optuna, spec, search_dir)
    except TapefitError as error:
        write_status(search_dir, "failed", error=str(error))
        raise
    study.sampler = make_sampler(optuna, spec.tune, sampler_seed(spec, len(study.trials)))
    study.pruner = make_pruner(optuna, spec.tune, spec.epochs)
    # This search directory's trials that a killed process left RUNNING: the claim above
    # makes this process the directory's only one, so they are continued, not waited for.
    owner = {"host": host, "search_dir": str(search_dir.resolve())}
    running = study.get_trials(deepcopy=False, states=(optuna.trial.TrialState.RUNNING,))
    orphans = [t for t in running if t.user_attrs.get("owner") == owner]
    started, stopped = time.perf_counter(), None
    try:
        while True:
            if orphans:
                trial = reattach(optuna, study, orphans.pop(0))
                log.info("trial %s: continuing it (a stopped search left it running)", trial.number)
            else:
                go_on, stopped = next_step(study, spec.tune)
                if not go_on:
                    break
                trial = study.ask()
                trial.set_user_attr("owner", owner)
                trial.set_user_attr("run_dir", str(runs.trial_dir(str(trial.number)).resolve()))
            run_one(optuna, study, trial, runs)
            write_summary(runs, rows(study, runs), final=False)
    except RunInterrupted as stop:  # the trial stays RUNNING: the next start continues it
        write_summary(runs, rows(study, runs), final=False)
        write_status(search_dir, "interrupted", signal=stop.signum)
        raise
    except TapefitError as error:  # a space that does not match the study's
        write_status(search_dir, "failed", error=str(error))
        raise
    return finish(runs, rows(study, runs), started, stopped)

"""`python -m tapefit` / `tapefit`: compose the config with Hydra and call `train.run`.

The backend guard runs in `tapefit/__init__.py`, which Python imports before this module.
"""

from __future__ import annotations

import contextlib
import logging
import math
import os
import sys
from pathlib import Path

import hydra
from hydra.core.hydra_config import HydraConfig
from hydra.errors import CompactHydraException
from hydra.types import RunMode
from omegaconf import DictConfig
from omegaconf.errors import OmegaConfBaseException

from tapefit.backend import freeze_startup_objects
from tapefit.config.compose_once import composed_once
from tapefit.config.schemas import config_dir
from tapefit.errors import TapefitError
from tapefit.objective import worst_value
from tapefit.runner.composition import register_schemas

register_schemas()


@hydra.main(config_path=str(config_dir()), config_name="config", version_base="1.3")
def main(cfg: DictConfig) -> float:
    """Train the composed experiment (or search, with `tune=<algorithm>`); return its
    objective for Hydra sweepers.

    Bad input ends with one `tapefit: error:` line and exit code 2, except inside a multirun,
    where the failed job returns the worst value (`failure_value`) and the sweep goes on;
    SIGINT/SIGTERM/SIGUSR1 end with exit code 130/143/138 after the current step and its
    checkpoint; in a SLURM batch job SIGUSR1 also requeues the job, whose next start resumes.
    `status.json` says so.
    """
    from tapefit.callbacks.stop_on_signal import RunInterrupted

    logging.captureWarnings(True)  # warnings reach tapefit.log through Hydra's job logging
    freeze_startup_objects()  # each run's clear_session then collects only what runs made
    hydra_cfg = HydraConfig.get()
    try:
        command = [*config_dir_arguments(hydra_cfg), *hydra_cfg.overrides.task]
        metrics = execute(cfg, hydra_cfg.runtime.output_dir, command)
    except TapefitError as error:
        print(f"tapefit: error: {error}", file=sys.stderr)
        if hydra_cfg.mode == RunMode.MULTIRUN:
            return failure_value(cfg)
        remove_if_refused_before_training(Path(hydra_cfg.runtime.output_dir))
        sys.exit(2)
    except RunInterrupted as stop:
        print(f"tapefit: {stop}; status.json says interrupted", file=sys.stderr)
        sys.exit(128 + stop.signum)
    value = metrics.get("objective_value")
    if value is None or not math.isfinite(value):  # no finite epoch value: the run's worst
        return worst_value(str(metrics.get("objective_direction")))
    print(f"objective: {metrics['objective']}={value:.4f}")
    return float(value)


# What a run directory holds when the run was refused before it trained: Hydra's copy of the
# config, the log, tapefit's status and TensorBoard's HParams session (no train/ or
# validation/ logs) (see docs/reference/errors.md).
REFUSED_RUN_FILES = {".hydra", "tapefit.log", "status.json", "tensorboard"}


def remove_if_refused_before_training(run_dir: Path) -> bool:
    """Remove the run directory of a command refused before training (a bad config, a missing
    file), so mistakes do not pile up in `outputs/`; the error line on stderr says it all. The
    folders of the default layout it leaves empty (`outputs/<experiment>/`, `outputs/`) go too.
    A directory that holds anything else (checkpoints, logs of a run that started, a resumed
    run's files, files of the user's) is left as it is, its status.json saying failed.

    Returns:
        Whether the directory was removed.
    """
    import shutil

    if not run_dir.is_dir() or {path.name for path in run_dir.iterdir()} - REFUSED_RUN_FILES:
        return False
    tensorboard = run_dir / "tensorboard"
    if tensorboard.is_dir() and any(path.is_dir() for path in tensorboard.iterdir()):
        return False  # epochs were logged: it failed while training
    for logger in (logging.getLogger(), logging.getLogger("tapefit")):
        for handler in list(logger.handlers):  # Hydra's job log: closed before its file goes
            if isinstance(handler, logging.FileHandler) and Path(
                handler.baseFilename
            ).is_relative_to(run_dir.resolve()):
                logger.removeHandler(handler)
                handler.close()
    shutil.rmtree(run_dir, ignore_errors=True)
    outputs = (Path.cwd() / "outputs").resolve()  # the default layout's folders, left empty
    for parent in run_dir.resolve().parents:
        if not parent.is_relative_to(outputs):
            break
        with contextlib.suppress(OSError):  # only an empty folder goes
            parent.rmdir()
    return True


def config_dir_arguments(hydra_cfg: DictConfig) -> list[str]:
    """`--config-dir DIR` when the command line added one (a user project's conf/), so a
    printed re-run command finds the same configs."""
    for source in hydra_cfg.runtime.config_sources:
        if source.provider == "command-line" and source.schema == "file":
            return ["--config-dir", source.path]
    return []


def failure_value(cfg: DictConfig) -> float:
    """What a job refused before its run resolved an objective returns to a sweeper: the worst
    value for the configured objective's direction (-inf when higher is better). Optuna
    records it and goes on; NaN would abort its sweep."""
    from tapefit.runner.model_from_config import model_class
    from tapefit.runner.spec import objective_of

    try:
        return objective_of(cfg, model_class(cfg.model)).worst
    except TapefitError:
        return math.nan


def execute(cfg: DictConfig, output_dir: str, overrides: list[str]) -> dict:
    """One run, or a search when `tune.algorithm` is not `none` (keras-tuner's, or Optuna's
    study for `optuna`); an override that would do nothing in `cfg` is refused first."""
    from tapefit.config.inert_settings import check_no_inert_overrides

    try:
        check_no_inert_overrides(cfg, overrides)
    except TapefitError as error:
        from tapefit.training.run_status import record_end

        record_end(Path(output_dir), "failed", error=str(error))
        raise
    if cfg.tune.algorithm == "none":
        from tapefit.callbacks.stop_on_signal import RunInterrupted
        from tapefit.config.schemas import TrainerConfig
        from tapefit.config.typed import typed
        from tapefit.runner.train import run
        from tapefit.training.preemption import requeue, requeued_start
        from tapefit.training.run_status import write_status

        if not cfg.resume and requeued_start(cfg.trainer.requeue):
            cfg.resume = True  # a requeued SLURM job continues from its last checkpoint
        try:
            metrics = run(cfg, output_dir)
        except RunInterrupted as stop:
            if requeue(typed(TrainerConfig, cfg.trainer), stop.signum):
                status = {"signal": stop.signum, "error": str(stop), "requeued": True}
                write_status(Path(output_dir), "interrupted", **status)
            raise
        tests = [f"{k}={v:.4f}" for k, v in metrics.items() if k.startswith("test_")]
        print("test metrics: " + (", ".join(tests) or "none (the data has no test split)"))
        return metrics
    try:
        return run_search(cfg, output_dir, overrides)
    except TapefitError as error:  # refused before (or while) the search wrote its own status
        from tapefit.training.run_status import read_status, record_end

        if (read_status(Path(output_dir)) or {}).get("state") != "failed":
            record_end(Path(output_dir), "failed", error=str(error))
        raise


def run_search(cfg: DictConfig, output_dir: str, overrides: list[str]) -> dict:
    """A learning-rate finder's sweep, keras-tuner's search or Optuna's study in `output_dir`."""
    if cfg.tune.algorithm == "lr_find":
        from tapefit.sweeps.lr_find import find
        from tapefit.training.run_status import write_status

        write_status(Path(output_dir), "running", kind="lr_find")
        summary = find(cfg, output_dir)
        write_status(Path(output_dir), "completed", kind="lr_find", **summary)
        print(
            f"suggested learning rate: {summary['suggested_lr']:.3g} "
            f"(lr_find.png, lr_find.csv); train with: {summary['override']}"
        )
        return summary
    if cfg.tune.algorithm == "optuna":  # Optuna is imported only here (the sweep extra)
        from tapefit.sweeps.optuna_search import search
    else:
        from tapefit.sweeps.tuning import search

    summary = search(cfg, output_dir, overrides)
    if summary.get("worker"):
        print(f"{summary['worker']}: no trial left; the chief writes the search's summary")
        return summary
    print(f"best trial {summary['best_trial']}: {summary['best_command']}")
    return summary


def cli() -> None:
    """The command line (`python -m tapefit`, the `tapefit` script): Hydra's `main`, with an
    override of a key the config does not hold (`trainer.epoch=3`) answered by tapefit's line,
    the closest key and exit code 2, instead of Hydra's advice to append it with `+`.

    Hydra reports a failed composition itself and exits; with `HYDRA_FULL_ERROR=1` (its
    documented switch, set for this call only) it raises instead, and every error other than
    a misspelt key is printed as Hydra prints it (its message, exit code 1); an error raised
    while training that is not tapefit's own one-line error ends with its whole traceback.
    """
    from tapefit.config.override_errors import misspelt_override_line

    asked = os.environ.get("HYDRA_FULL_ERROR")
    os.environ["HYDRA_FULL_ERROR"] = "1"
    try:
        with composed_once():  # not twice (hydra-ecosystem/hydra#3440)
            main()
    except CompactHydraException as error:  # composition, overrides, missing config files
        line = misspelt_override_line(error)
        if line is not None:
            print(f"tapefit: error: {line}", file=sys.stderr)
            sys.exit(2)
        if asked == "1":
            raise
        print(error, file=sys.stderr)  # as Hydra prints it
        if isinstance(error.__cause__, OmegaConfBaseException):
            print(error.__cause__, file=sys.stderr)
        sys.exit(1)
    finally:
        if asked is None:
            os.environ.pop("HYDRA_FULL_ERROR", None)
        else:
            os.environ["HYDRA_FULL_ERROR"] = asked


if __name__ == "__main__":
    cli()

"""What a search leaves in its directory, whichever engine ran it: `trials.csv` after every
trial, and at the end `best/`, `best_config.yaml` (with the command that re-runs the best
trial as an ordinary run), `search.json` and the final status."""

from __future__ import annotations

import logging
import shlex
import shutil
import time
from collections.abc import Collection
from pathlib import Path
from typing import Any

from omegaconf import OmegaConf

from tapefit.config.schemas import TuneAlgorithm
from tapefit.errors import TapefitError
from tapefit.files import atomic_write, write_json
from tapefit.objective import rank
from tapefit.sweeps.records import write_trials_csv
from tapefit.sweeps.search_space import apply_values, override_text
from tapefit.sweeps.trials import TrialRuns
from tapefit.training.run_status import write_status

log = logging.getLogger("tapefit")

HIDDEN_OVERRIDES = ("tune", "search_space", "hydra.", "resume", "force_resume", "+tune")


def write_summary(runs: TrialRuns, rows: list[dict[str, Any]], final: bool) -> dict[str, Any]:
    """`trials.csv` from the engine's `rows` (one record per trial), and at the end `best/`,
    `best_config.yaml` and `search.json`.

    Args:
        runs: The search's trials.
        rows: One record per trial, as the engine knows them.
        final: Also the best trial's files (the search has ended).

    Returns:
        The summary: objective, direction, trials by status, and at the end the best trial.
    """
    search_dir, space = runs.search_dir, runs.spec.tune.space
    write_trials_csv(search_dir / "trials.csv", rows, list(space), runs.direction)
    completed = [r for r in rows if r["status"] == "completed" and "objective_value" in r]
    summary: dict[str, Any] = {
        "objective": runs.objective,
        "direction": runs.direction,
        "trials": {s: sum(r["status"] == s for r in rows) for s in {r["status"] for r in rows}},
    }
    if not final or not completed:
        return summary
    best = min(completed, key=lambda r: rank(r["objective_value"], runs.direction))
    ordinary = {**best["values"], "tune.algorithm": TuneAlgorithm.none}
    best_cfg = apply_values(runs.spec.config, ordinary)
    command = best_command(runs.overrides, best["values"], runs.spec.unlisted)
    atomic_write(
        search_dir / "best_config.yaml",
        lambda file: file.write(
            f"# trial {best['trial_id']}: {runs.objective}={best['objective_value']}\n"
            f"# re-run it as an ordinary run:\n#   {command}\n" + OmegaConf.to_yaml(best_cfg)
        ),
    )
    source = Path(best.get("run_dir") or runs.trial_dir(best["trial_id"]))
    if source.is_dir():
        copy_best(source, search_dir / "best")
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
    write_json(search_dir / "search.json", summary)
    return summary


def finish(
    runs: TrialRuns, rows: list[dict[str, Any]], started: float, stopped: str | None
) -> dict[str, Any]:
    """The final summary and status; a search in which no trial completed is an error.

    Args:
        runs: The search's trials.
        rows: One record per trial, as the engine knows them.
        started: When the search started (`time.perf_counter()`).
        stopped: Why the search stopped before its budget ran out (None: it did not).

    Returns:
        The summary, whose `objective_value` is the best trial's.

    Raises:
        TapefitError: No trial completed (`status.json` says failed, with the last reason).
    """
    summary = write_summary(runs, rows, final=True)
    summary["wall_time_s"] = round(time.perf_counter() - started, 3)
    if "best_trial" not in summary:
        reasons = [r.get("reason") for r in rows if r.get("reason")]
        error = f"no trial completed ({stopped or 'every trial failed'})" + (
            f"; the last failure: {reasons[-1]}" if reasons else ""
        )
        write_status(runs.search_dir, "failed", error=error)
        if runs.tracker is not None:
            runs.tracker.end("failed", runs.search_dir)
        raise TapefitError(error)
    summary["objective_value"] = summary["best_value"]
    if stopped:
        summary["stopped"] = stopped
    write_json(runs.search_dir / "search.json", summary)
    write_status(
        runs.search_dir,
        "completed",
        objective=runs.objective,
        objective_value=summary["best_value"],
    )
    if runs.tracker is not None:
        runs.tracker.end("completed", runs.search_dir, {"objective_value": summary["best_value"]})
    return summary


def best_command(
    overrides: list[str], values: dict[str, Any], unlisted: Collection[str] = ()
) -> str:
    """The command that re-runs a trial as an ordinary run, each argument shell-quoted (it
    pastes into a shell as it is); a searched key in `unlisted` (an argument of a `_target_`
    object that the config does not list) is added with `++`.

    Example:
        >>> best_command(["tune=random", "trainer.epochs=1"], {"model.dropout": 0.25})
        'python -m tapefit trainer.epochs=1 model.dropout=0.25'
        >>> best_command([], {"model.units": 64}, unlisted={"model.units"})
        'python -m tapefit ++model.units=64'
    """
    kept = [o for o in overrides if not o.lstrip("+~").startswith(HIDDEN_OVERRIDES)]
    kept = [o for o in kept if o.lstrip("+~").split("=", 1)[0] not in values]  # the trial's win

    def setting(key: str, value: Any) -> str:
        return "++" + override_text(key, value) if key in unlisted else override_text(key, value)

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

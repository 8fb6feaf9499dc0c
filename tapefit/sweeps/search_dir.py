"""A search's directory: claimed by one process and one config at a time (a stopped search
continues there), its trial runs under `trials/`, and the HParams dashboard's columns."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

from tapefit.checkpointing.config_match import MAY_DIFFER, check_same_config
from tapefit.config.snapshot import config_snapshot
from tapefit.errors import TapefitError
from tapefit.files import write_json
from tapefit.sweeps.records import placeholders, write_hparams_config
from tapefit.sweeps.spec import SearchSpec
from tapefit.training.run_status import alive, read_status, write_status

TRIALS = "trials"  # the trials' run directories, <search dir>/trials/<id>/
SEARCH_MAY_DIFFER = (*MAY_DIFFER, "tune.max_trials", "tune.overwrite")


def claim_search(search_dir: Path, spec: SearchSpec) -> None:
    """Refuse a search directory another live process is searching in, or whose search had
    another config (unless tune.overwrite); mark it running.

    Args:
        search_dir: The search directory (created if new).
        spec: The search; its config is compared with `search_config.json` and saved there.

    Raises:
        TapefitError: Another live process holds the directory, or the config differs from
            the earlier search's in a key that may not (without `force_resume`).
    """
    search_dir.mkdir(parents=True, exist_ok=True)
    status = read_status(search_dir) or {}
    pid = status.get("pid")
    if status.get("state") == "running" and pid not in (None, os.getpid()) and alive(pid):
        raise TapefitError(
            f"search directory {search_dir} is in use by a running process (pid {pid}): "
            "wait for it, stop it, or choose another hydra.run.dir"
        )
    saved = search_dir / "search_config.json"
    snapshot = config_snapshot(spec.config)
    if saved.is_file() and not spec.tune.overwrite:
        check_same_config(
            json.loads(saved.read_text()),
            snapshot,
            spec.force_resume,
            may_differ=SEARCH_MAY_DIFFER,
        )
    write_json(saved, snapshot)
    write_status(search_dir, "running", kind="search")


def begin_search(search_dir: Path, spec: SearchSpec) -> None:
    """Claim the search directory (with tune.overwrite, dropping the earlier search's trial
    runs, which a new trial of the same id would otherwise meet) and declare the HParams
    dashboard's columns: the searched keys, typed, and the objective's and loss's curves."""
    claim_search(search_dir, spec)
    if spec.tune.overwrite:
        for name in (TRIALS, "tensorboard", "best"):
            shutil.rmtree(search_dir / name, ignore_errors=True)
    space = spec.tune.space
    first_run = "tensorboard" if spec.tune.executions_per_trial == 1 else "execution-0/tensorboard"
    shown = placeholders(space, spec.configured)
    write_hparams_config(search_dir / "tensorboard", space, spec.objective.name, shown, first_run)

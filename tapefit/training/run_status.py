"""A run directory's status: checked before use, claimed by one process, `status.json` telling
the truth (running, completed, failed, interrupted), and a scratch directory for the workers
that do not write it (a signal's clean stop is `tapefit.callbacks.stop_on_signal`)."""

from __future__ import annotations

import logging
import os
import shutil
import socket
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from tapefit.errors import TapefitError
from tapefit.files import read_json, write_json

STATUS_FILE = "status.json"
METRICS_FILE = "metrics.json"  # written last: only a completed run has it
RESUME_DIR = "resume"  # epoch checkpoints for resume=true (not callbacks.model_checkpoint)
# What a fresh run removes from a directory whose earlier run failed or was interrupted: the
# files every run writes, the pictures and JSON a model's report writes, and (from the config)
# the callbacks' own files (`claim(..., named=...)`).
STALE = (
    "history.json",
    "steps.csv",
    "tensorboard",
    METRICS_FILE,
    "model.keras",
    "export",
    "classes.json",
    "model_summary.txt",
    "mlflow_run.json",  # a fresh run is a new MLflow run, not the failed one's
)
STALE_PATTERNS = ("*.png",)


def read_status(run_dir: Path) -> dict[str, Any] | None:
    """The run directory's status, or None if it has none (or an unreadable one)."""
    return read_json(run_dir / STATUS_FILE)


def write_status(run_dir: Path, state: str, **fields: Any) -> None:
    """Replace `status.json` atomically with `state` and `fields`."""
    previous = read_status(run_dir) or {}
    status = {
        "state": state,
        "pid": os.getpid(),
        "host": socket.gethostname(),
        "started": previous.get("started") if state != "running" else time.time(),
        "updated": time.time(),
        **fields,
    }
    write_json(run_dir / STATUS_FILE, status)


def record_end(run_dir: Path, state: str, **fields: Any) -> None:
    """`write_status` for a run that is ending badly: if even that small write fails (the disk
    that failed the run is full), say so in the log and let the original error through."""
    try:
        write_status(run_dir, state, **fields)
    except OSError as error:
        logging.getLogger("tapefit").error(
            "status.json could not be updated to %s (%s): it still says running",
            state,
            error.strerror or error,
        )


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def check_not_a_file(run_dir: Path) -> None:
    """A one-line error if `run_dir`, or the nearest of its parents that exists, is a file;
    nothing is created."""
    for parent in [run_dir, *run_dir.parents]:
        if parent.exists() and not parent.is_dir():
            raise TapefitError(
                f"run directory {run_dir} cannot be used: {parent} is a file; choose another "
                "hydra.run.dir"
            )
        if parent.exists():
            break


def check_writable(run_dir: Path) -> None:
    """A one-line error unless `run_dir` is (or can become) a writable directory."""
    check_not_a_file(run_dir)
    try:
        run_dir.mkdir(parents=True, exist_ok=True)
        probe = run_dir / f".write-test-{os.getpid()}"
        probe.write_text("")
        probe.unlink()
    except OSError as error:
        raise TapefitError(
            f"run directory {run_dir} is not writable ({error.strerror}): fix its permissions "
            "or choose another hydra.run.dir"
        ) from None


def claim(run_dir: Path, resume: bool, named: tuple[str, ...] = ()) -> None:
    """Check `run_dir`, refuse it if another run owns it or finished in it, clear what a failed
    run left (`STALE`, `STALE_PATTERNS` and the configured file names `named`), and mark it
    running."""
    check_writable(run_dir)
    previous = read_status(run_dir)
    state = (previous or {}).get("state")
    if state == "running" and previous.get("pid") != os.getpid() and alive(previous["pid"]):
        raise TapefitError(
            f"run directory {run_dir} is in use by a running process (pid {previous['pid']}): "
            "wait for it, stop it, or choose another hydra.run.dir"
        )
    if state == "completed":
        raise TapefitError(
            f"run directory {run_dir} already holds a completed run: choose another "
            "hydra.run.dir (or delete that directory)"
        )
    checkpoints = run_dir / RESUME_DIR
    has_checkpoints = checkpoints.is_dir() and any(checkpoints.glob("*.json"))
    if not resume and has_checkpoints:
        described = "killed" if state == "running" else state or "stopped"
        raise TapefitError(
            f"run directory {run_dir} holds a {described} run with checkpoints: add "
            "resume=true to continue it, or choose another hydra.run.dir"
        )
    if not resume and previous is not None:
        patterns = [path.name for pattern in STALE_PATTERNS for path in run_dir.glob(pattern)]
        for name in (*STALE, *named, *patterns, RESUME_DIR):
            path = run_dir / name
            if path.is_dir():
                shutil.rmtree(path)
            else:
                path.unlink(missing_ok=True)
    write_status(run_dir, "running")


@contextmanager
def scratch_run_dir(run_dir: Path, resume: bool) -> Iterator[Path]:
    """A temporary run directory for a multi-worker task that is not the chief, removed when
    it ends. On resume it starts from a copy of the chief's checkpoints, so every worker
    restores the same step (across machines, `run_dir` must be on a shared file system)."""
    scratch = Path(tempfile.mkdtemp(prefix="tapefit-worker-"))
    try:
        if resume and (run_dir / RESUME_DIR).is_dir():
            shutil.copytree(run_dir / RESUME_DIR, scratch / RESUME_DIR)
        yield scratch
    finally:
        shutil.rmtree(scratch, ignore_errors=True)

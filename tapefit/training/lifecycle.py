"""A run directory's life: checked before use, claimed by one process, `status.json` telling
the truth (running, completed, failed, interrupted), and SIGINT/SIGTERM/SIGUSR1 turned into a
clean stop after the current step (and its checkpoint)."""

from __future__ import annotations

import logging
import os
import shutil
import signal
import socket
import tempfile
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import keras
import tensorflow as tf

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


class RunInterrupted(Exception):  # noqa: N818 - a stop, not an error
    """A signal stopped the run after a step; the CLI exits with 128 + signal (SIGINT 130,
    SIGTERM 143, SIGUSR1 138)."""

    def __init__(self, signum: int) -> None:
        super().__init__(f"interrupted by {signal.Signals(signum).name} after the current step")
        self.signum = signum


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


class StopOnSignal(keras.callbacks.Callback):
    """Raises `RunInterrupted` at the end of the step during which SIGINT, SIGTERM or SIGUSR1
    arrived. With a `checkpoint` (an `EpochCheckpoint`, placed before this callback) it first
    writes a checkpoint of the steps done; a signal during the epoch's last step or its
    validation stops at the epoch's end, after the epoch's own checkpoint."""

    def __init__(self) -> None:
        super().__init__()
        self.signum: int | None = None
        self.training = False
        self.checkpoint: Any = None
        self.later: list[Any] = []  # the callbacks after this one, which the stop skips
        self.handler: Any = None  # set by `interruptible`

    def rearm(self) -> None:
        """Install the handlers again: TensorFlow's multi-worker runtime replaces the SIGTERM
        handler with its own preemption notifier when the strategy is created, after which a
        SIGTERM (the launcher's, a scheduler's) would stop nothing."""
        if self.handler is not None and threading.current_thread() is threading.main_thread():
            for signum in STOP_SIGNALS:
                signal.signal(signum, self.handler)

    def agreed(self) -> int | None:
        """The signal to stop with now (None: go on), the same on every worker of a
        multi-worker strategy: they step together, so one that stopped alone would leave the
        others waiting in the next step's all-reduce. One worker's signal stops them all after
        the same step. `signum` (what this process received) is only read here: a signal that
        arrives during the all-reduce is agreed on at the next check."""
        strategy = self.model.distribute_strategy if self.model is not None else None
        if not isinstance(strategy, tf.distribute.MultiWorkerMirroredStrategy):
            return self.signum
        local = [float(self.signum == signum) for signum in STOP_SIGNALS]
        value = strategy.run(lambda: tf.constant(local))
        counts = strategy.reduce(tf.distribute.ReduceOp.SUM, value, axis=None).numpy()
        chosen = [int(signum) for signum, n in zip(STOP_SIGNALS, counts, strict=True) if n]
        return chosen[0] if chosen else None

    def use_callbacks(self, callbacks: list[Any]) -> None:
        """The run's callbacks: those after this one get `on_interrupt(batch)` before the stop
        (a step's telemetry writer records the step and flushes what it holds)."""
        self.later = callbacks[callbacks.index(self) + 1 :] if self in callbacks else []

    def on_train_begin(self, logs: dict | None = None) -> None:
        self.training = True

    def on_train_end(self, logs: dict | None = None) -> None:
        self.training = False

    def on_train_batch_end(self, batch: int, logs: dict | None = None) -> None:
        signum = self.agreed()
        if signum is None:
            return
        if self.checkpoint is not None and not self.checkpoint.save_steps_done(batch):
            return  # the epoch's last step: its validation and checkpoint come first
        self._interrupt(batch, signum)

    def on_test_batch_end(self, batch: int, logs: dict | None = None) -> None:
        if self.checkpoint is None and self.training:
            signum = self.agreed()
            if signum is not None:
                raise RunInterrupted(signum)

    def on_epoch_end(self, epoch: int, logs: dict | None = None) -> None:
        signum = self.agreed()
        if signum is not None:
            self._interrupt(None, signum)

    def _interrupt(self, batch: int | None, signum: int) -> None:
        """Tell the callbacks after this one (`on_interrupt(batch)`; None at an epoch's end),
        then stop."""
        for callback in self.later:
            if hasattr(callback, "on_interrupt"):
                callback.on_interrupt(batch)
        raise RunInterrupted(signum)


STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGUSR1)


@contextmanager
def interruptible(stopper: StopOnSignal) -> Iterator[StopOnSignal]:
    """Inside the block, SIGINT/SIGTERM/SIGUSR1 ask `stopper` to stop after the current step
    (outside training, and at a second signal, `RunInterrupted` is raised at once); the
    handlers are restored afterwards."""
    if threading.current_thread() is not threading.main_thread():
        yield stopper
        return

    def handle(signum: int, frame: Any) -> None:
        if not stopper.training or stopper.signum is not None:
            raise RunInterrupted(signum)  # outside fit there is no step to finish
        stopper.signum = signum

    stopper.handler = handle
    previous = {s: signal.signal(s, handle) for s in STOP_SIGNALS}
    try:
        yield stopper
    finally:
        for signum, handler in previous.items():
            signal.signal(signum, handler)


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

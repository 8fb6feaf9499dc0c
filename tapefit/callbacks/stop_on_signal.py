"""Stop a run cleanly on SIGINT, SIGTERM or SIGUSR1: after the current step (and its
checkpoint), the same step on every worker, with `RunInterrupted` for the CLI to exit with
128 + the signal's number."""

from __future__ import annotations

import signal
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import keras
import tensorflow as tf


class RunInterrupted(Exception):  # noqa: N818 - a stop, not an error
    """A signal stopped the run after a step; the CLI exits with 128 + signal (SIGINT 130,
    SIGTERM 143, SIGUSR1 138)."""

    def __init__(self, signum: int) -> None:
        super().__init__(f"interrupted by {signal.Signals(signum).name} after the current step")
        self.signum = signum


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

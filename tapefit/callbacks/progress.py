"""What a run shows while it trains: a progress bar that ends at N/N and one log line per
epoch (or validation interval)."""

from __future__ import annotations

import logging

import keras

from tapefit.keras_compat import optimizer_calls

log = logging.getLogger("tapefit")


class StepProgbar(keras.callbacks.ProgbarLogger):
    """Keras' progress bar, ending at N/N: with `steps_per_execution` > 1 Keras reports each
    execution's last step as if it were full, so an epoch of 39 steps at 8 per execution
    ends at `40/39`, and a stream of unknown length would keep that count as its size. The
    count is capped by the epoch's steps, or by the optimizer steps taken (and skipped) when
    the length is unknown. Taken as the run's progress bar, Keras adds no other. Its
    `Epoch N/M` counts the run's epochs (`params["run_epochs"]`), also in the `fit` of a
    resume that finishes an interrupted epoch first.

    Example:
        >>> bar = StepProgbar()
        >>> bar.set_params({"verbose": 1, "epochs": 2, "run_epochs": 3, "steps": 4})
        >>> bar.epochs, bar.target
        (3, 4)
    """

    def set_params(self, params: dict) -> None:
        super().set_params(params)
        self.epochs = params.get("run_epochs", self.epochs)

    def on_epoch_begin(self, epoch: int, logs: dict | None = None) -> None:
        self.steps_at_epoch_start = self.steps_taken()
        super().on_epoch_begin(epoch, logs)

    def steps_taken(self) -> int:
        """Steps run so far: the optimizer's own call count (each accumulated batch counts, as
        `iterations` does not), plus the steps `trainer.on_nonfinite=skip` skipped. Steps a
        loss scaler skips are not counted: under `mixed_float16` a stream's first epoch can
        end a few steps short."""
        optimizer = self.model.optimizer
        inner = getattr(optimizer, "inner_optimizer", optimizer)
        calls = optimizer_calls(inner)
        state = getattr(self.model, "_step_state", None)
        skipped = int(state.skipped_steps.numpy()) if state is not None else 0
        return int(calls.numpy()) + skipped

    def on_train_batch_end(self, batch: int, logs: dict | None = None) -> None:
        done = batch + 1
        if self.target is not None:
            done = min(done, self.target)
        else:
            done = min(done, max(self.steps_taken() - self.steps_at_epoch_start, 1))
        super().on_train_batch_end(done - 1, logs)


class EpochLog(keras.callbacks.Callback):
    """One `logging` line per epoch, or per validation interval (terminal and the run
    directory's tapefit.log)."""

    intervals = False

    def use_intervals(self) -> None:
        """Validation intervals are this run's epochs: name them so, with their step."""
        self.intervals = True

    def on_epoch_end(self, epoch: int, logs: dict | None = None) -> None:
        shown = ", ".join(f"{k}={v:.4g}" for k, v in sorted((logs or {}).items()))
        if self.intervals:
            step = int(self.model.optimizer.iterations.numpy())
            log.info("interval %d (step %d): %s", epoch + 1, step, shown)
        else:
            log.info("epoch %d: %s", epoch + 1, shown)

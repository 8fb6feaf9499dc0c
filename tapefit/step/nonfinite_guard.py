"""The non-finite guard `TapeModel.fit` adds: stop at, or count, the steps whose loss or
gradients were NaN/inf (`compile(on_nonfinite=...)`)."""

from __future__ import annotations

from typing import Any

import keras

from tapefit.errors import TapefitError


def recorded_step_state(model: keras.Model) -> Any:
    """What `model`'s tape step records (`StepState`): refused for a model that records none."""
    state = getattr(model, "_step_state", None)
    if state is None:
        raise TapefitError(
            f"{type(model).__name__} records no step state: step callbacks need a "
            "tapefit.TapeModel compiled with TapeModel.compile"
        )
    return state


class NonFiniteGuard(keras.callbacks.Callback):
    """Stop at, or count, the non-finite steps TapeModel's step skipped.

    `TapeModel.fit` adds one when `compile(on_nonfinite=...)` is `skip` or `stop`. With
    `stop`, it ends training at the first skipped non-finite step with an error naming its
    epoch and optimizer step; with `skip`, it adds the epoch's `skipped_steps` to the logs
    (History, CSV, TensorBoard).
    """

    def on_train_begin(self, logs: dict | None = None) -> None:
        self.state = recorded_step_state(self.model)
        self.epoch, self.skipped_at_epoch_start = 0, int(self.state.skipped_steps.numpy())

    def on_epoch_begin(self, epoch: int, logs: dict | None = None) -> None:
        self.epoch = epoch
        self.skipped_at_epoch_start = int(self.state.skipped_steps.numpy())

    def on_train_batch_end(self, batch: int, logs: dict | None = None) -> None:
        if self.model._on_nonfinite.value != "stop":
            return
        if int(self.state.skipped_steps.numpy()) > self.skipped_at_epoch_start:
            step = int(self.state.first_skipped_step.numpy()) + 1
            raise TapefitError(
                f"the loss or gradients became NaN/inf at epoch {self.epoch + 1}, optimizer "
                f"step {step}: training stopped with the last finite weights "
                "(on_nonfinite=stop: trainer.on_nonfinite in a run's config); lower the learning "
                "rate, check the data for NaN/inf, or use on_nonfinite=skip"
            )

    def on_epoch_end(self, epoch: int, logs: dict | None = None) -> None:
        if logs is not None and self.model._on_nonfinite.value == "skip":
            logs["skipped_steps"] = int(self.state.skipped_steps.numpy()) - (
                self.skipped_at_epoch_start
            )

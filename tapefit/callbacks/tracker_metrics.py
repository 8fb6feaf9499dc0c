"""The experiment tracker's Keras callback: each epoch's logs, and every N steps the batch
logs, sent to the tracker's run (`logger=mlflow`: `tapefit.training.tracking`)."""

from __future__ import annotations

from typing import Any, Protocol

import keras


class MetricsTracker(Protocol):
    """What the callback needs of a tracker: a way to send metrics at a step, the epochs it
    has sent already (a resumed run sends each once) and how often to send batch logs."""

    logged_steps: set[int]
    log_every_n_steps: int | None

    def log_metrics(self, metrics: dict[str, Any], step: int | None) -> None: ...


class EpochMetrics(keras.callbacks.Callback):
    """Sends each epoch's logs to the tracker with `step=epoch` (epochs counted from 0, as
    `History`, `history.csv` and TensorBoard count them); with `log_every_n_steps`, also the
    batch logs, at the optimizer's step.

    Example:
        >>> class Printed:
        ...     logged_steps, log_every_n_steps = set(), None
        ...     def log_metrics(self, metrics, step):
        ...         print(step, metrics)
        >>> EpochMetrics(Printed()).on_epoch_end(0, {"loss": 0.5})
        0 {'loss': 0.5}
    """

    def __init__(self, tracker: MetricsTracker) -> None:
        super().__init__()
        self.tracker = tracker

    def on_epoch_end(self, epoch: int, logs: dict | None = None) -> None:
        if epoch in self.tracker.logged_steps:
            return  # a resumed run already logged this epoch before its stop
        self.tracker.log_metrics(dict(logs or {}), epoch)
        self.tracker.logged_steps.add(epoch)

    def on_train_batch_end(self, batch: int, logs: dict | None = None) -> None:
        every = self.tracker.log_every_n_steps
        if not every or not logs:
            return
        step = int(self.model.optimizer.iterations.numpy())
        if step % every == 0:
            self.tracker.log_metrics({f"step/{k}": v for k, v in logs.items()}, step)

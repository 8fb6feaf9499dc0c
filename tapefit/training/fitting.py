"""One run's training as Keras' `fit` sees it, even when a resume splits it in two calls.

A run resumed in the middle of an epoch finishes that epoch with one `fit` (its first batches
skipped) and then trains the remaining epochs with another. To the callbacks this must look
like the single `fit` of the uninterrupted run: the same callback objects, `on_train_begin`
once before the first call and `on_train_end` once after the last. Two plain `fit` calls would
end and restart every callback in between, and Keras' `EarlyStopping(restore_best_weights=
True)` then puts its best weights back after the resumed epoch, so the rest of the run trains
from other weights; a `CSVLogger` or `TensorBoard` would close and reopen their files.
`ContinuedCallbacks` is Keras' `CallbackList` with those two calls left to the run.
"""

from __future__ import annotations

import logging
import warnings
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

import keras
import tensorflow as tf

from tapefit.callbacks.averaging import put_averages_in
from tapefit.config.schemas import TrainerConfig
from tapefit.keras_compat import python_utils
from tapefit.training.fit_plan import FitPlan

log = logging.getLogger("tapefit")


class ContinuedCallbacks(keras.callbacks.CallbackList):
    """The callback list of one `fit` call of a run that may span several: `on_train_begin`
    only when `begins` (the run's first call), `on_train_end` never (`Fitting.end` calls it
    once, after the last). Keras uses a `CallbackList` it is given as it is."""

    def __init__(
        self, callbacks: list[Any], *, begins: bool, intervals: bool = False, **params: Any
    ) -> None:
        super().__init__(callbacks, add_history=False, add_progbar=False, **params)
        self.begins = begins
        self.intervals = intervals  # epochs are validation intervals over one stream
        self.batches = 0

    def on_train_begin(self, logs: dict | None = None) -> None:
        if self.begins:
            super().on_train_begin(logs)
        else:
            self._on_begin()  # Keras' own bookkeeping of this list (its async executor)

    def on_train_end(self, logs: dict | None = None) -> None:
        """Only Keras' bookkeeping: the callbacks' `on_train_end` is `Fitting.end`'s, as
        another `fit` of the same run may follow."""
        if self._async_train:
            self._flush_futures()
        self._on_end()

    # Keras' loops over the callbacks, watching which one stops the run: it is logged.
    def on_epoch_begin(self, epoch: int, logs: dict | None = None) -> None:
        self.epoch, self.batches = epoch, 0
        super().on_epoch_begin(epoch, logs)

    def on_epoch_end(self, epoch: int, logs: dict | None = None) -> None:
        if self._async_train:
            self._flush_futures()
        logs = python_utils.pythonify_logs(logs)
        short = self.batches < (self.params.get("steps") or 0) and not self.model.stop_training
        if self.intervals and short:
            # The stream ran out inside this interval: Keras would read it again from its
            # start in the next. An interval with no step is no point at all.
            self.model.stop_training = True
            if epoch + 1 < self.params.get("epochs", 0):
                log.info("the training stream ended in interval %d", epoch + 1)
            if not self.batches:
                return
        if not self.batches and not self.intervals:
            # A resume whose checkpoint holds every step of this epoch (data of unknown length
            # ends only by running out): the epoch's training logs are the restored metrics'.
            logs = {**python_utils.pythonify_logs(self.model.get_metrics_result()), **logs}
        for callback in self.callbacks:
            stopped = self.model.stop_training
            callback.on_epoch_end(epoch, logs)
            if self.model.stop_training and not stopped:
                log.info("%s", stop_message(callback, f"at the end of epoch {epoch + 1}"))

    def _on_train_batch_end(self, batch: int, logs: dict | None = None) -> None:
        self.batches = batch + 1
        logs = python_utils.pythonify_logs(logs)
        for callback in self.callbacks:
            stopped = self.model.stop_training
            callback.on_train_batch_end(batch, logs=logs)
            if self.model.stop_training and not stopped:
                when = f"in epoch {getattr(self, 'epoch', 0) + 1}, after batch {batch + 1}"
                log.info("%s", stop_message(callback, when))


def stop_message(callback: Any, when: str) -> str:
    """One line: which callback stopped training, when, and why (a callback says why by a
    `stop_reason()` method; EarlyStopping's reason is read from its state)."""
    name = type(callback).__name__
    if hasattr(callback, "stop_reason"):
        why = callback.stop_reason()
    elif isinstance(callback, keras.callbacks.EarlyStopping):
        best = f"{float(callback.best):.4g}" if callback.best is not None else "none"
        why = (
            f"{callback.monitor} did not improve for {callback.wait} epochs "
            f"(patience {callback.patience}, best {best})"
        )
        if callback.restore_best_weights and callback.best_weights is not None:
            why += f"; it restores the weights of epoch {callback.best_epoch + 1}"
    elif isinstance(callback, keras.callbacks.TerminateOnNaN):
        why = "the loss is NaN or infinite"
    else:
        why = "it set model.stop_training"
    return f"{name} stopped training {when}: {why}"


@dataclass
class Segment:
    """One `fit` call: epochs `first` (from 0) up to `stop` (exclusive), the first
    `skip_steps` batches of epoch `first` already trained before a resume."""

    first: int
    stop: int
    skip_steps: int = 0


def steps_of(dataset: tf.data.Dataset, steps_per_epoch: int | None) -> int | None:
    """The epoch's length as Keras' epoch iterator counts it (`params["steps"]`): the
    configured steps, else the dataset's known, finite cardinality, else None (a stream)."""
    if steps_per_epoch:
        return steps_per_epoch
    cardinality = int(dataset.cardinality())
    return cardinality if cardinality >= 0 else None


class Fitting:
    """`model.fit` for a run: its `callbacks` (built once, in their final order) see one
    training however many `fit` calls a resume needs; `history` is Keras' `History` over all
    of them (the epochs trained in this process)."""

    def __init__(
        self, trainer: TrainerConfig, model: keras.Model, data: Any, callbacks: list
    ) -> None:
        self.trainer, self.model, self.data = trainer, model, data
        self.plan = FitPlan.of(trainer, data.train)
        self.stream = self.plan.stream(data.train, trainer.epochs)
        self.history = keras.callbacks.History()
        self.callbacks = [*callbacks, self.history]
        for callback in self.callbacks if self.plan.interval else []:
            if hasattr(callback, "use_intervals"):  # those that say "epoch" otherwise
                callback.use_intervals()
        self.active: ContinuedCallbacks | None = None  # the list of the latest `fit`
        self.last_logs: dict | None = None

    def restart_stream(self, data: Any) -> None:
        """Read the training stream of `data` (the same data, built afresh) from now on."""
        self.stream = self.plan.stream(data.train, self.trainer.epochs)

    def run(self, segment: Segment, unknown_length: bool) -> None:
        """Train the epochs of `segment` with `model.fit`."""
        trainer, plan = self.trainer, self.plan
        offset = plan.stream_offset(segment.first, segment.skip_steps)
        train = self.stream.skip(offset) if offset else self.stream
        steps_per_epoch = (
            plan.steps_per_epoch - segment.skip_steps if plan.steps_per_epoch else None
        )
        callbacks = ContinuedCallbacks(
            self.callbacks,
            begins=self.active is None,
            intervals=plan.interval is not None,
            model=self.model,
            verbose=trainer.verbose,
            epochs=segment.stop,
            run_epochs=plan.epochs,  # the run's, however many fit calls a resume makes
            steps=steps_of(train, steps_per_epoch),
        )
        self.active = callbacks
        with warnings.catch_warnings(), deferred_finalize(self.model.optimizer):
            if unknown_length or plan.interval:  # a stream ends by running out: no warning
                warnings.filterwarnings("ignore", message="Your input ran out of data")
            self.model.fit(
                train,
                validation_data=self.data.val,
                shuffle=False,  # the tf.data pipeline already reshuffles, from the seed
                epochs=segment.stop,
                initial_epoch=segment.first,
                steps_per_epoch=steps_per_epoch,
                validation_steps=trainer.validation_steps,
                callbacks=callbacks,
                verbose=trainer.verbose,
            )
        if self.history.history:
            self.last_logs = {key: values[-1] for key, values in self.history.history.items()}

    def end(self) -> None:
        """What Keras' `fit` does after its last epoch, once, after the run's last `fit`: the
        optimizers' final values (`use_ema=True` puts the averages into the model), then
        `on_train_end` of every callback (EarlyStopping restores its best weights, CSVLogger
        and TensorBoard close their files)."""
        if self.active is not None:
            put_averages_in(self.model)  # every EMA optimizer's, each over its own variables
            for callback in self.callbacks:
                callback.on_train_end(self.last_logs)


@contextmanager
def deferred_finalize(optimizer: Any) -> Iterator[None]:
    """Within the block, `optimizer.finalize_variable_values` (which Keras' `fit` calls at its
    end) does nothing: `Fitting.end` calls it once, after the run's last `fit`, so an EMA
    optimizer does not overwrite the weights between the two calls of a resume."""
    if optimizer is None:
        yield
        return
    optimizer.finalize_variable_values = lambda var_list: None
    try:
        yield
    finally:
        del optimizer.finalize_variable_values


def replay_shuffles(
    train: Any, epochs_done: int, steps_per_epoch: int | None, unknown_length: bool = False
) -> None:
    """Advance the training pipeline's shuffle as `epochs_done` epochs of `fit` did, so a
    resumed run sees the same batches in the same order. Every `iter()` of the dataset draws
    a new order, and Keras' EpochIterator (3.x) creates two per epoch when steps_per_epoch is
    None (one at the epoch's start, one when it runs out), but one for data of unknown length
    (a stream), which it reads every epoch until it runs out, and whose shuffles draw their
    order at the first element; tests/checkpointing/test_resume.py checks both."""
    if steps_per_epoch is not None and epochs_done:
        log.warning(
            "resuming with trainer.steps_per_epoch set: the data order after the resume "
            "is not the one the uninterrupted run would have seen"
        )
        return
    if unknown_length:  # a stream draws its files' and rows' order at its first element
        for _ in range(epochs_done):
            next(iter(train), None)
        return
    for _ in range(2 * epochs_done):
        iter(train)

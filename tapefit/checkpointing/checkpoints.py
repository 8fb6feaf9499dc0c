"""Epoch checkpoints for resuming a run: model and optimizer weights plus the history so far,
written atomically, the last few kept, a corrupt latest one skipped for the one before."""

from __future__ import annotations

import io
import json
import warnings
from contextlib import nullcontext
from pathlib import Path
from typing import Any

import keras
import numpy as np
import tensorflow as tf

from tapefit.checkpointing.callback_state import collect
from tapefit.errors import TapefitError
from tapefit.files import atomic_write, to_builtin, write_json
from tapefit.keras_compat import flatten_layers, saving_lib, write_weights
from tapefit.step.optimizer_variables import build_at_positions, optimizer_positions

PREFIX = "epoch-"
ARRAYS = ".callbacks.npz"  # beside each checkpoint: the callbacks' arrays (best weights)


def random_states(model: keras.Model) -> list:
    """Every random state of the model: Keras SeedGenerators anywhere in it (part of
    `model.variables` but not of the weights Keras saves) and the states of `tf.random.Generator`
    attributes of the model or its layers (Keras does not track them), so a checkpoint carries
    them itself."""
    weights = {id(w) for w in model.weights}
    states = [v for v in model.variables if id(v) not in weights]
    for layer in flatten_layers(model):
        states += [
            value.state for value in vars(layer).values() if isinstance(value, tf.random.Generator)
        ]
    return states


def weights_file_bytes(model: keras.Model) -> bytes:
    """What `model.save_weights` writes to a `.weights.h5` file (optimizer state included),
    built in memory: a full disk then fails a plain file write, cleanly, and not HDF5, whose
    clean-up after a failed write crashes the process (h5py, errno 27/28)."""
    buffer = io.BytesIO()
    store = saving_lib.H5IOStore(buffer, mode="w")
    write_weights(model, store)
    store.close()
    return buffer.getvalue()


def _order(marker: Path) -> tuple[int, int]:
    """(epochs done, steps into the next epoch) from `epoch-NNNN[-step-SSSSS].json`."""
    parts = marker.stem.split("-")
    return int(parts[1]), int(parts[3]) if len(parts) > 3 else 0


def checkpoints_in(directory: Path) -> list[Path]:
    """The checkpoint markers in `directory`, oldest first."""
    return sorted(directory.glob(f"{PREFIX}*.json"), key=_order)


class CheckpointWriteError(TapefitError):
    """A checkpoint could not be written (disk full, quota, permissions); the ones before it
    are untouched."""

    def __init__(self, directory: Path, name: str, reason: str) -> None:
        before = [m.stem for m in checkpoints_in(directory) if m.stem != name]
        kept = f"the last complete one, {before[-1]}, is intact" if before else "none before it"
        super().__init__(
            f"checkpoint {name} could not be written to {directory} ({reason}); {kept}: free "
            "space there and continue with resume=true"
        )


class EpochCheckpoint(keras.callbacks.Callback):
    """At each epoch end (and every `every_steps` optimizer steps if set), save
    `epoch-NNNN[-step-SSSSS].weights.h5` and then its `.json` (the commit marker: epochs done,
    steps into the next, history, random and metric states, `metadata`) into `directory`; keep
    the newest `keep`. With `save=False` it only collects the epochs' logs (`history`).

    Put it after callbacks that add to the epoch logs and before those that write them
    (TensorBoard, CSVLogger), so every logged epoch is in a checkpoint.
    """

    def __init__(
        self,
        directory: str | Path,
        metadata: dict[str, Any],
        history: list[dict[str, float]] | None = None,
        keep: int = 2,
        save: bool = True,
        every_steps: int | None = None,
    ) -> None:
        super().__init__()
        self.directory, self.metadata, self.keep = Path(directory), metadata, keep
        self.history, self.save, self.every_steps = list(history or []), save, every_steps
        self.epoch = 0
        self.skipped_steps = 0  # batches of the current epoch done before this fit (a resume)
        self.callbacks: list[Any] = []
        self.warned = False
        self.saved: tuple[int, int] | None = None  # (epochs done, steps) of the last checkpoint

    def use_callbacks(self, callbacks: list[Any]) -> None:
        """The run's callbacks, whose states (patience counters, best values) each checkpoint
        records."""
        self.callbacks = callbacks

    def on_train_begin(self, logs: dict | None = None) -> None:
        self.last_step = int(self.model.optimizer.iterations.numpy())

    def on_epoch_begin(self, epoch: int, logs: dict | None = None) -> None:
        self.epoch = epoch

    def steps_done(self, batch: int) -> tuple[int, bool]:
        """The steps of the current epoch done after Keras' `batch` (its end step), and whether
        they are all of the epoch's steps. With `steps_per_execution` > 1 Keras names the last
        execution's end step as if it were full (31 for an epoch of 30 steps run 8 at a time):
        the epoch's length (`params["steps"]`) caps it, so a checkpoint taken there is never
        one of "30 steps into the epoch" for an epoch whose steps are all done. For data of
        unknown length the last step is known only when the data runs out; a resume of such a
        checkpoint finishes the epoch with no batch (`Fitting`)."""
        steps = self.params.get("steps")
        last = steps is not None and batch + 1 >= steps
        return self.skipped_steps + (min(batch + 1, steps) if last else batch + 1), last

    def on_train_batch_end(self, batch: int, logs: dict | None = None) -> None:
        if not (self.save and self.every_steps):
            return
        step = int(self.model.optimizer.iterations.numpy())
        if step // self.every_steps > self.last_step // self.every_steps:
            self.last_step = step
            steps, last = self.steps_done(batch)
            if not last:  # the epoch's end saves a full one
                self._save(self.epoch, steps)

    def save_steps_done(self, batch: int) -> bool:
        """Checkpoint the steps of this epoch done so far, at once (a signal asked to stop);
        False after the epoch's last step, whose checkpoint comes at the epoch's end."""
        steps, last = self.steps_done(batch)
        if last:
            return False
        if self.save and self.saved != (self.epoch, steps):
            self._save(self.epoch, steps)
        return True

    def on_epoch_end(self, epoch: int, logs: dict | None = None) -> None:
        self.skipped_steps = 0
        self.history.append(to_builtin(dict(logs or {})))
        if self.save:  # else only the history is collected: it is the run's history.json
            self._save(epoch + 1, 0)

    def _save(self, epochs_done: int, steps_in_epoch: int) -> None:
        ops = getattr(self.model, "_stateful_random_ops", None)
        if ops and not self.warned:
            self.warned = True
            warnings.warn(
                f"the step uses TensorFlow's global-seeded random ops ({', '.join(ops)}), whose "
                "state no checkpoint can hold: a resumed run will not draw the numbers an "
                "uninterrupted one would; draw with keras.random and a "
                "keras.random.SeedGenerator, or a tf.random.Generator, which are checkpointed",
                stacklevel=2,
            )
        name = f"{PREFIX}{epochs_done:04d}" + (
            f"-step-{steps_in_epoch:05d}" if steps_in_epoch else ""
        )
        callbacks = collect(self.callbacks)
        marker = {
            "epochs_done": epochs_done,
            "steps_in_epoch": steps_in_epoch,
            "history": self.history,
            "random_states": [to_builtin(v.numpy()) for v in random_states(self.model)],
            # which variables each optimizer updates (a backbone's own optimizer updates some)
            "optimizer_variables": optimizer_positions(
                self.model.trainable_variables,
                getattr(self.model, "optimizers", {"optimizer": self.model.optimizer}),
            ),
            "metric_states": [to_builtin(v.numpy()) for v in self.model.metrics_variables],
            # an EarlyStopping (or any callback) ended training at this epoch's end
            "stop_training": bool(self.model.stop_training) and steps_in_epoch == 0,
            "callback_states": callbacks.values,
            **self.metadata,
        }
        try:
            self._write(name, marker, callbacks.arrays)
            self.saved = (epochs_done, steps_in_epoch)
        except OSError as error:  # disk full, file-size limit, quota, permissions
            raise CheckpointWriteError(self.directory, name, error.strerror or str(error)) from None
        for old in checkpoints_in(self.directory)[: -self.keep]:
            old.unlink(missing_ok=True)
            old.with_suffix(".weights.h5").unlink(missing_ok=True)
            old.with_suffix(ARRAYS).unlink(missing_ok=True)

    def _write(self, name: str, marker: dict[str, Any], callback_arrays: dict) -> None:
        """The weights, the callbacks' arrays, then the marker that commits them; each file
        through a temporary name, so a failed write leaves the earlier checkpoints as they
        were."""
        weights = weights_file_bytes(self.model)
        atomic_write(self.directory / f"{name}.weights.h5", lambda f: f.write(weights), "wb")
        atomic_write(
            self.directory / f"{name}{ARRAYS}", lambda f: np.savez(f, **callback_arrays), "wb"
        )
        write_json(self.directory / f"{name}.json", marker)


class RestoreMetrics(keras.callbacks.Callback):
    """Put back the metric states of a checkpoint taken mid-epoch, so the resumed epoch's
    averages include the steps before the checkpoint, bit for bit: the running sums (total
    and count, true positives, ...) are assigned at the start of the resumed epoch, after
    `fit` reset them, so every later step adds to them in the uninterrupted run's order.
    A metric Keras has not built by then (built inside the first step) gets its state added
    after the first step instead, which is exact up to the order of one addition."""

    def __init__(self, states: list | None) -> None:
        super().__init__()
        self.states = states

    def on_epoch_begin(self, epoch: int, logs: dict | None = None) -> None:
        if self.states is not None and len(self.model.metrics_variables) == len(self.states):
            self._put(lambda variable, value: variable.assign(value))

    def on_train_batch_end(self, batch: int, logs: dict | None = None) -> None:
        if self.states is None:
            return
        if len(self.model.metrics_variables) != len(self.states):
            warnings.warn(
                "the checkpoint's metric states do not fit this model's metrics: the resumed "
                "epoch's averages cover only the steps after the resume",
                stacklevel=2,
            )
            self.states = None
            return
        self._put(lambda variable, value: variable.assign_add(value))

    def _put(self, put: Any) -> None:
        variables = self.model.metrics_variables
        for variable, value in zip(variables, self.states, strict=True):
            put(variable, keras.ops.cast(value, variable.dtype))
        self.states = None


def build_optimizers(model: keras.Model, positions: dict[str, list[int]] | None = None) -> None:
    """Create every optimizer's variables, so weights saved after training load into them:
    on the variables at their saved `positions` (`optimizer_positions`), else on all."""
    optimizers = getattr(model, "optimizers", {"optimizer": model.optimizer})
    unbuilt = {name: o for name, o in optimizers.items() if not o.built}
    if positions:
        build_at_positions(unbuilt, model.trainable_variables, positions)
    for optimizer in unbuilt.values():
        if not optimizer.built:
            optimizer.build(model.trainable_variables)


def restore_latest(
    directory: Path, model: keras.Model, epoch_steps: int | None = None
) -> dict[str, Any] | None:
    """Load the newest checkpoint that reads back into `model` and return its metadata; an
    unreadable one is skipped for the one before, with a warning. None if there is none.

    A step checkpoint claiming `epoch_steps` or more steps into an epoch of `epoch_steps`
    (earlier tapefit wrote one at an epoch's last step with `steps_per_execution` > 1, before
    that epoch's validation) holds an epoch that is done but not validated: it is skipped for
    the one before, which repeats a few steps instead of losing the epoch's validation."""
    for marker in reversed(checkpoints_in(directory)):
        epochs_done, steps_in = _order(marker)
        if steps_in and epoch_steps is not None and steps_in >= epoch_steps:
            warnings.warn(
                f"checkpoint {marker.stem} counts all {epoch_steps} steps of epoch "
                f"{epochs_done + 1} but not its validation; resuming from the one before",
                stacklevel=2,
            )
            continue
        try:
            metadata = json.loads(marker.read_text())
            build_optimizers(model, metadata.get("optimizer_variables"))
            model.load_weights(marker.with_suffix(".weights.h5"))
            states = random_states(model)
            if len(states) != len(metadata.get("random_states", [])):
                raise ValueError("the model's random states do not match the checkpoint's")
            for variable, value in zip(states, metadata["random_states"], strict=True):
                variable.assign(value)
            arrays_file = marker.with_suffix(ARRAYS)
            with np.load(arrays_file) if arrays_file.exists() else nullcontext({}) as arrays:
                metadata["callback_arrays"] = {key: arrays[key] for key in arrays}
        except Exception as error:
            warnings.warn(
                f"checkpoint {marker.stem} is unreadable ({type(error).__name__}); trying the "
                "one before",
                stacklevel=2,
            )
            continue
        return metadata
    return None

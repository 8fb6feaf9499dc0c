"""Epoch checkpoints for resuming a run: model and optimizer weights plus the history so far,
written atomically, the last few kept, a corrupt latest one skipped for the one before."""

from __future__ import annotations

import json
import warnings
from pathlib import Path
from typing import Any

import keras

from tapefit.outputs import atomic_path, to_builtin, write_json

PREFIX = "epoch-"


def random_states(model: keras.Model) -> list:
    """The layers' random-seed states (Dropout's SeedGenerators): part of `model.variables`
    but not of the weights Keras saves, so a checkpoint carries them itself."""
    weights = {id(w) for w in model.weights}
    return [v for v in model.variables if id(v) not in weights]


class EpochCheckpoint(keras.callbacks.Callback):
    """At each epoch end, save `epoch-NNNN.weights.h5` and then `epoch-NNNN.json` (the commit
    marker: epoch count, history, `metadata`) into `directory`; keep the newest `keep`. With
    `save=False` it only collects the epochs' logs (`history`).

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
    ) -> None:
        super().__init__()
        self.directory, self.metadata, self.keep = Path(directory), metadata, keep
        self.history, self.save = list(history or []), save

    def on_epoch_end(self, epoch: int, logs: dict | None = None) -> None:
        self.history.append(to_builtin(dict(logs or {})))
        if not self.save:
            return  # the history is still collected: it is the run's history.json
        name = f"{PREFIX}{epoch + 1:04d}"
        with atomic_path(self.directory / f"{name}.weights.h5", suffix=".weights.h5") as path:
            self.model.save_weights(path)
        states = [to_builtin(v.numpy()) for v in random_states(self.model)]
        write_json(
            self.directory / f"{name}.json",
            {
                "epochs_done": epoch + 1,
                "history": self.history,
                "random_states": states,
                **self.metadata,
            },
        )
        for old in sorted(self.directory.glob(f"{PREFIX}*.json"))[: -self.keep]:
            old.unlink(missing_ok=True)
            old.with_suffix(".weights.h5").unlink(missing_ok=True)


def restore_latest(directory: Path, model: keras.Model) -> dict[str, Any] | None:
    """Load the newest checkpoint that reads back into `model` and return its metadata; an
    unreadable one is skipped for the one before, with a warning. None if there is none."""
    for marker in sorted(directory.glob(f"{PREFIX}*.json"), reverse=True):
        try:
            metadata = json.loads(marker.read_text())
            for optimizer in getattr(model, "optimizers", {"": model.optimizer}).values():
                if not optimizer.built:
                    optimizer.build(model.trainable_variables)
            model.load_weights(marker.with_suffix(".weights.h5"))
            states = random_states(model)
            if len(states) != len(metadata.get("random_states", [])):
                raise ValueError("the model's random states do not match the checkpoint's")
            for variable, value in zip(states, metadata["random_states"], strict=True):
                variable.assign(value)
        except Exception as error:
            warnings.warn(
                f"checkpoint {marker.stem} is unreadable ({type(error).__name__}); trying the "
                "one before",
                stacklevel=2,
            )
            continue
        return metadata
    return None

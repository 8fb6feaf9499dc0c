"""Continuing a stopped run in its own directory: the checkpointed config must match, and the
history files and TensorBoard hold every completed epoch exactly once afterwards."""

from __future__ import annotations

import csv
import io
from pathlib import Path
from typing import Any

import tensorflow as tf
from tensorflow.core.util import event_pb2

from tapefit.errors import TapefitError
from tapefit.files import atomic_write

# Keys a resumed run may change: how long to train, how chatty, and the resume switches.
MAY_DIFFER = ("trainer.epochs", "trainer.verbose", "resume", "force_resume")
MAY_DIFFER_GROUPS = ("logger",)  # where a run is tracked does not change what it trains


def check_same_config(
    saved: dict[str, Any],
    current: dict[str, Any],
    force: bool,
    may_differ: tuple[str, ...] = MAY_DIFFER,
) -> None:
    """Refuse a resume whose config differs from the checkpointed run's (unless `force`).

    Args:
        saved: The checkpointed run's `config_snapshot`.
        current: This run's.
        force: `force_resume`: compare nothing.
        may_differ: Keys that may change between the two.

    Example:
        >>> check_same_config({"seed": 0}, {"seed": 1}, force=False)  # doctest: +ELLIPSIS
        Traceback (most recent call last):
        tapefit.errors.TapefitError: resume refused: ... in seed (0 -> 1); ...
    """
    if "model.name" in saved and "model._target_" not in saved and not force:
        raise TapefitError(
            "resume refused: this run directory was checkpointed by a tapefit from before "
            f"models, data and optimizers were _target_ configs (model.name={saved['model.name']}"
            "); the same model=/data= options build the same model, so add force_resume=true "
            "to resume it (its checkpointed config is then not compared)"
        )
    differing = sorted(
        key
        for key in set(saved) | set(current)
        if key not in may_differ
        and key.split(".")[0] not in MAY_DIFFER_GROUPS
        and saved.get(key) != current.get(key)
    )
    if differing and not force:
        shown = ", ".join(f"{k} ({saved.get(k)!r} -> {current.get(k)!r})" for k in differing[:6])
        raise TapefitError(
            f"resume refused: the config differs from the checkpointed run's in {shown}; "
            "resume with the same overrides, or add force_resume=true"
        )


def history_lists(epochs: list[dict[str, float]]) -> dict[str, list[float]]:
    """Per-epoch log dicts -> Keras' History layout (one list per key)."""
    keys = sorted({key for logs in epochs for key in logs})
    return {key: [logs.get(key) for logs in epochs] for key in keys}


def rewrite_csv(path: Path, epochs: list[dict[str, float]]) -> None:
    """history.csv as Keras' CSVLogger writes it, for exactly the checkpointed epochs (no
    file when there are none, so the logger writes its own header)."""
    if not epochs:
        path.unlink(missing_ok=True)
        return
    keys = sorted({key for logs in epochs for key in logs})
    buffer = io.StringIO()
    writer = csv.DictWriter(buffer, fieldnames=["epoch", *keys], lineterminator="\n")
    writer.writeheader()
    for index, logs in enumerate(epochs):
        writer.writerow({"epoch": index, **logs})
    atomic_write(path, lambda file: file.write(buffer.getvalue()))


def _logged_epochs(log_dir: Path) -> set[int]:
    steps: set[int] = set()
    for events in log_dir.glob("events.out.tfevents.*"):
        try:
            for record in tf.data.TFRecordDataset(str(events)):
                event = event_pb2.Event.FromString(record.numpy())
                if any(value.tag == "epoch_loss" for value in event.summary.value):
                    steps.add(int(event.step))
        except tf.errors.DataLossError:
            continue  # a file cut short by the kill: what it holds up to there was read
    return steps


def fill_tensorboard(log_dir: Path, epochs: list[dict[str, float]]) -> int:
    """Write the epochs of `epochs` that TensorBoard lacks (the run stopped between saving a
    checkpoint and logging it), with Keras' tags; returns how many were written."""
    present = _logged_epochs(log_dir / "train")
    missing = [i for i in range(len(epochs)) if i not in present]
    if not missing:
        return 0
    writers = {
        split: tf.summary.create_file_writer(str(log_dir / split))
        for split in ("train", "validation")
    }
    for index in missing:
        for key, value in epochs[index].items():
            split = "validation" if key.startswith("val_") else "train"
            with writers[split].as_default(step=index):
                tf.summary.scalar(f"epoch_{key.removeprefix('val_')}", value)
    for writer in writers.values():
        writer.close()
    return len(missing)

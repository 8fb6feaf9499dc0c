"""A resumed run's history files: `history.csv` and TensorBoard hold every checkpointed epoch
exactly once, whatever the stopped run had written after its last checkpoint."""

from __future__ import annotations

import csv
import io
from pathlib import Path

import tensorflow as tf
from tensorflow.core.util import event_pb2

from tapefit.files import atomic_write


def history_lists(epochs: list[dict[str, float]]) -> dict[str, list[float]]:
    """Per-epoch log dicts -> Keras' History layout (one list per key)."""
    keys = sorted({key for logs in epochs for key in logs})
    return {key: [logs.get(key) for logs in epochs] for key in keys}


def rewrite_csv(path: Path, epochs: list[dict[str, float]]) -> None:
    """history.csv as Keras' CSVLogger writes it (csv's `excel` dialect: `\\r\\n` ends each
    line), for exactly the checkpointed epochs (no file when there are none, so the logger
    writes its own header)."""
    if not epochs:
        path.unlink(missing_ok=True)
        return
    keys = sorted({key for logs in epochs for key in logs})
    buffer = io.StringIO()
    writer = csv.DictWriter(buffer, fieldnames=["epoch", *keys], dialect=csv.excel)
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

"""Named kill points of a run, for the resume sweeps (test-only: nothing here is in tapefit).

A run passes points in a fixed order; each has a name:

- `begin-S`: before optimizer step S (the callbacks of step S-1 all done);
- `batch_end-S-I-NAME`: after the I-th callback's `on_train_batch_end` of step S (the resume
  checkpointer's step checkpoint is written inside its own);
- `validation-E-K`: during epoch E's validation, after its batch K (from 1);
- `epoch_end-E-I-NAME`: inside `on_epoch_end` of epoch E, after the I-th callback's;
- `checkpoint-NAME`: between a checkpoint's weights (and callback arrays) and its marker;
- `final-history`, `final-test`, `final-model`, `final-metrics`, `final-written`: the last
  phase, before history.json, during the test (after history.json), before model.keras, before
  metrics.json, and after it (before status.json says completed).

`KillPoints(action, at)` acts at one point: `kill` SIGKILLs the process (what a crash leaves),
`term` sends it SIGTERM (a graceful stop), `snapshot` copies the run directory at every point
(what a SIGKILL there would leave: the bytes written so far, not what the process buffers) and
lets the run go on. `install(points, patch)` wires it in through `patch(obj, name, value)`
(pytest's `monkeypatch.setattr`, or plain `setattr` in a process of its own) and returns the
callback to add to the run's.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import signal
from pathlib import Path
from typing import Any

import keras

from tapefit.files import read_json

FINAL_WRITES = {"history.json": "final-history", "metrics.json": "final-metrics"}


class KillPoints(keras.callbacks.Callback):
    """Names the points a run passes and acts at `at` (or, `snapshot`, at every one)."""

    def __init__(
        self,
        run_dir: str | Path,
        action: str = "none",
        at: str | None = None,
        snapshots: str | Path | None = None,
    ) -> None:
        super().__init__()
        self.run_dir, self.action, self.at = Path(run_dir), action, at
        self.snapshots = Path(snapshots) if snapshots else None
        self.passed: list[str] = []
        self.epoch = 0
        self.fitting = False

    def point(self, name: str) -> None:
        """The run is at point `name`."""
        self.passed.append(name)
        if self.action == "snapshot":
            target = self.snapshots / f"{len(self.passed):04d}"
            shutil.copytree(self.run_dir, target)
            (target.parent / f"{target.name}.point").write_text(name)
        elif name == self.at and self.action == "kill":
            os.kill(os.getpid(), signal.SIGKILL)
        elif name == self.at and self.action == "term":
            signal.raise_signal(signal.SIGTERM)

    def on_train_begin(self, logs=None):
        self.fitting = True

    def on_train_end(self, logs=None):
        self.fitting = False

    def on_epoch_begin(self, epoch, logs=None):
        self.epoch = epoch + 1

    def on_train_batch_begin(self, batch, logs=None):
        self.point(f"begin-{int(self.model.optimizer.iterations) + 1}")

    def on_test_batch_end(self, batch, logs=None):
        if self.fitting:
            self.point(f"validation-{self.epoch}-{batch + 1}")


def _after(method: Any, then: Any) -> Any:
    def wrapped(*args: Any, **kwargs: Any) -> Any:
        result = method(*args, **kwargs)
        then(*args)
        return result

    return wrapped


def _before(function: Any, first: Any) -> Any:
    def wrapped(*args: Any, **kwargs: Any) -> Any:
        first(*args)
        return function(*args, **kwargs)

    return wrapped


def install(points: KillPoints, patch: Any) -> KillPoints:
    """Wire `points` into tapefit's run through `patch(obj, name, value)`; returns it (the
    callback to pass to `tapefit.run`)."""
    from tapefit.checkpointing import checkpoints
    from tapefit.runner import results, run

    def assembled(*args: Any, **kwargs: Any) -> list:
        callbacks = original_assemble(*args, **kwargs)
        for index, callback in enumerate(callbacks):
            name = f"{index:02d}-{type(callback).__name__}"

            def batch_end(batch, logs=None, name=name, callback=callback):
                step = int(callback.model.optimizer.iterations)
                points.point(f"batch_end-{step}-{name}")

            def epoch_end(epoch, logs=None, name=name):
                points.point(f"epoch_end-{epoch + 1}-{name}")

            callback.on_train_batch_end = _after(callback.on_train_batch_end, batch_end)
            callback.on_epoch_end = _after(callback.on_epoch_end, epoch_end)
        return callbacks

    original_assemble = run.assemble_callbacks
    patch(run, "assemble_callbacks", assembled)

    def marker(path: Path, *args: Any) -> None:
        if path.parent.name == "resume":
            points.point(f"checkpoint-{path.stem}")

    patch(checkpoints, "write_json", _before(checkpoints.write_json, marker))

    def before_final(path: Path, *args: Any) -> None:
        if path.name in FINAL_WRITES:
            points.point(FINAL_WRITES[path.name])

    def after_final(path: Path, *args: Any) -> None:
        if path.name == "history.json":
            points.point("final-test")  # the test runs next; nothing is written until then
        if path.name == "metrics.json":
            points.point("final-written")

    patch(results, "write_json", _after(_before(results.write_json, before_final), after_final))
    patch(
        results, "save_model", _before(results.save_model, lambda *a: points.point("final-model"))
    )
    return points


def epoch_scalars(log_dir: Path) -> list[tuple[str, str, int]]:
    """(split, tag, step) of every epoch scalar in the TensorBoard files under `log_dir`.

    Read with TensorFlow's record reader (checksums checked, a cut-short record raises
    DataLossError as with `tf.data.TFRecordDataset`), not a `TFRecordDataset` per file: the
    sweeps digest every snapshot, and a dataset pipeline per file cost 0.08 s a snapshot
    (13 s of a sweep) where this takes 0.3 ms."""
    import tensorflow as tf
    from tensorflow.core.util import event_pb2

    found = []
    for events in sorted(log_dir.rglob("events.out.tfevents.*")):
        split = events.parent.relative_to(log_dir).as_posix()
        try:
            for record in tf.compat.v1.io.tf_record_iterator(str(events)):
                event = event_pb2.Event.FromString(record)
                found += [
                    (split, value.tag, int(event.step))
                    for value in event.summary.value
                    if value.tag.startswith("epoch_")
                ]
        except tf.errors.DataLossError:  # cut short: what it holds up to there counts
            continue
    return sorted(found)


def state_digest(run_dir: Path) -> str:
    """What a resume's outcome, as the sweeps compare it, depends on, as one digest: the
    checkpoint files, the epoch scalars TensorBoard holds (a resume writes those it lacks;
    the sweeps count them), the step telemetry's `steps.csv` (a resume keeps its rows up to
    its step), and whether status.json says running. The other files are rewritten whole by
    a resume (history.csv from the checkpoint; history.json, model.keras, metrics.json and
    the pictures by the last phase) or are not compared (the log, TensorBoard's step
    scalars)."""
    digest = hashlib.sha256()
    for path in sorted(p for p in (run_dir / "resume").rglob("*") if p.is_file()):
        digest.update(path.name.encode() + b"\0" + path.read_bytes() + b"\0")
    if (run_dir / "tensorboard").is_dir():
        digest.update(repr(epoch_scalars(run_dir / "tensorboard")).encode())
    if (run_dir / "steps.csv").is_file():
        digest.update(b"steps.csv\0" + (run_dir / "steps.csv").read_bytes())
    status = read_json(run_dir / "status.json") or {}
    digest.update(str(status.get("state")).encode())
    return digest.hexdigest()

"""TensorBoard HParams sessions: each run (ordinary, multirun job or search trial) is a session
whose hyperparameters sit beside its own curves, and which ends Success, Failure or Aborted,
so runs compare side by side in the HParams dashboard (`tensorboard --logdir outputs`)."""

from __future__ import annotations

import json
import logging
import math
import time
from pathlib import Path
from typing import Any

import tensorflow as tf
from tensorboard.plugins.hparams import api as hparams_api
from tensorboard.plugins.hparams import api_pb2
from tensorboard.plugins.hparams import summary as hparams_summary

log = logging.getLogger("tapefit")

# HParams knows no "interrupted": such a session ends as a failure, with the signal as its error,
# and a resume writes the session afresh.
STATUS = {
    "completed": api_pb2.STATUS_SUCCESS,
    "failed": api_pb2.STATUS_FAILURE,
    "interrupted": api_pb2.STATUS_FAILURE,
}
# Keys that say how a run was started, not what it trained.
NOT_HYPERPARAMETERS = ("resume", "force_resume", "trainer.verbose", "tune.", "callbacks.")

Scalar = bool | int | float | str


def hyperparameters_of(snapshot: dict[str, Any]) -> dict[str, Scalar]:
    """A config's values (its `config_snapshot`) as HParams can hold them, by dotted key:
    scalars as they are, lists as JSON text; unset (null) keys and run-control keys left out.

    Example:
        >>> hyperparameters_of({"seed": 0, "resume": True, "model.units": [8, 4], "x": None})
        {'seed': 0, 'model.units': '[8, 4]'}
    """
    values: dict[str, Scalar] = {}
    for key, value in snapshot.items():
        if value is None or key.startswith(NOT_HYPERPARAMETERS):
            continue
        values[key] = value if isinstance(value, Scalar) else json.dumps(value, default=str)
    return values


def write_session(
    session_dir: Path,
    hyperparameters: dict[str, Scalar],
    state: str | None = None,
    error: str | None = None,
    started: float | None = None,
) -> None:
    """Write an HParams session into `session_dir` (a TensorBoard run: the metrics of the
    session are the scalars of the runs below it): its start with `hyperparameters`, and, if
    `state` is given (`completed`, `failed`, `interrupted`), its end with that status and the
    `error` as a text summary. An earlier session there (a resumed run's) is replaced:
    TensorBoard keeps the first value it reads of a session's start and end."""
    for old in Path(session_dir).glob("events.out.tfevents.*"):  # the curves are in subfolders
        old.unlink()
    writer = tf.summary.create_file_writer(str(session_dir))
    with writer.as_default():
        start = hparams_api.hparams_pb(hyperparameters, start_time_secs=started or time.time())
        tf.summary.experimental.write_raw_pb(start.SerializeToString(), step=0)
        if state is not None:
            end = hparams_summary.session_end_pb(STATUS[state])
            tf.summary.experimental.write_raw_pb(end.SerializeToString(), step=0)
        if error:
            tf.summary.text("error", error, step=0)
    writer.close()


def end_session(session_dir: Path, state: str, error: str | None = None) -> None:
    """Write only the end of a session that `write_session` started; best effort (a full disk
    that failed the run must not hide its error)."""
    try:
        writer = tf.summary.create_file_writer(str(session_dir))
        with writer.as_default():
            end = hparams_summary.session_end_pb(STATUS[state])
            tf.summary.experimental.write_raw_pb(end.SerializeToString(), step=0)
            if error:
                tf.summary.text("error", error, step=0)
        writer.close()
    except Exception as failure:
        log.warning("the HParams session end could not be written: %s", failure)


class RunSession:
    """The HParams session of one run in `session_dir`: started once the run's strategy exists
    (a multi-worker strategy must come before any TensorFlow op), ended only if started, so a
    run refused before training leaves no TensorBoard files."""

    def __init__(self, session_dir: Path, hyperparameters: dict[str, Scalar]) -> None:
        self.session_dir, self.hyperparameters = Path(session_dir), hyperparameters
        self.started = False

    def start(self) -> None:
        """Write the session's start (its hyperparameters), replacing an earlier one."""
        write_session(self.session_dir, self.hyperparameters)
        self.started = True

    def end(self, state: str, error: str | None = None, results: dict | None = None) -> None:
        """Write the session's end (`completed`, `failed`, `interrupted`), if it started; a
        completed run's `results` add its objective and test metrics as session metrics."""
        if not self.started:
            return
        end_session(self.session_dir, state, error)
        if results:
            write_results(self.session_dir, results)


def write_results(session_dir: Path, results: dict[str, Any]) -> None:
    """A completed run's selected objective (`run/<objective>`, the value `metrics.json`
    reports), its test metrics (`run/test_*`) and parameter counts (`run/params_*`), as
    scalars of the session itself: the HParams table then shows what was selected and
    tested, not only the last epoch's curves."""
    shown = {f"run/{k}": v for k, v in results.items() if k.startswith(("test_", "params_"))}
    shown[f"run/{results['objective']}"] = results.get("objective_value")
    writer = tf.summary.create_file_writer(str(session_dir))
    with writer.as_default():
        for tag, value in shown.items():
            if isinstance(value, int | float) and math.isfinite(value):
                tf.summary.scalar(tag, value, step=0)
    writer.close()

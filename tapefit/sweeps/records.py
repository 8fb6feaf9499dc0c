"""What a sweep leaves behind, for keras-tuner searches and Hydra multiruns alike: `trials.csv`
(best first), the TensorBoard HParams view, and the process facts a trial records."""

from __future__ import annotations

import csv
import io
import math
import os
import resource
import sys
from pathlib import Path
from typing import Any

import tensorflow as tf
from tensorboard.plugins.hparams import api as hparams_api

from tapefit.training.outputs import atomic_write

RECORD_FIELDS = (
    "trial_id",
    "status",
    "objective",
    "objective_value",
    "epochs",
    "duration_s",
    "fit_s",
    "overhead_s",
    "rss_mb",
)


def current_rss_mb() -> float:
    """This process's resident memory now (Linux /proc), else its peak (getrusage)."""
    try:
        with open(f"/proc/{os.getpid()}/statm") as file:
            pages = int(file.read().split()[1])
        return pages * os.sysconf("SC_PAGE_SIZE") / 2**20
    except (OSError, ValueError, IndexError):
        peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
        return peak / 2**20 if sys.platform == "darwin" else peak / 2**10


def _sort_key(record: dict[str, Any], direction: str) -> tuple:
    value = record.get("objective_value")
    finite = isinstance(value, (int, float)) and math.isfinite(value)
    ok = record.get("status") == "completed" and finite
    return (not ok, -value if ok and direction == "max" else value if ok else 0.0)


def best_first(records: list[dict[str, Any]], direction: str) -> list[dict[str, Any]]:
    """Completed records with a finite objective, best first; the others after them."""
    return sorted(records, key=lambda record: _sort_key(record, direction))


def write_trials_csv(
    path: Path, records: list[dict[str, Any]], parameters: list[str], direction: str
) -> Path:
    """`trials.csv`: one row per trial (best first): id, status, objective, epochs, timings,
    memory, the tuner process that ran it (distributed searches), every parameter, and the
    reason of a failure."""
    fields = [*RECORD_FIELDS, *(["tuner"] if any("tuner" in r for r in records) else [])]
    buffer = io.StringIO()
    writer = csv.DictWriter(
        buffer, fieldnames=[*fields, *parameters, "reason"], extrasaction="ignore"
    )
    writer.writeheader()
    for record in best_first(records, direction):
        row = {key: record.get(key, "") for key in (*fields, "reason")}
        row.update({name: record.get("values", {}).get(name, "") for name in parameters})
        writer.writerow({k: "" if v is None else v for k, v in row.items()})
    return atomic_write(path, lambda file: file.write(buffer.getvalue()))


def _domain(entry: Any) -> Any:
    kind = str(getattr(entry.type, "value", entry.type))
    if kind == "float":
        return hparams_api.RealInterval(float(entry.min), float(entry.max))
    if kind == "int":
        return hparams_api.IntInterval(int(entry.min), int(entry.max))
    if kind == "bool":
        return hparams_api.Discrete([False, True])
    values = list(entry["values"])
    same_type = len({type(v) for v in values}) == 1 and isinstance(values[0], (str, float, bool))
    return hparams_api.Discrete(values) if same_type else None


def write_hparams_config(log_dir: Path, space: Any, objective: str) -> None:
    """The HParams dashboard's columns: every searched key and the objective."""
    hparams = [hparams_api.HParam(name, _domain(entry)) for name, entry in space.items()]
    with tf.summary.create_file_writer(str(log_dir)).as_default():
        hparams_api.hparams_config(hparams=hparams, metrics=[hparams_api.Metric(objective)])


def write_hparams_trial(
    log_dir: Path, trial_id: str, values: dict[str, Any], objective: str, value: float
) -> None:
    """One HParams session: the trial's values and its objective."""
    shown = {k: v if isinstance(v, (bool, int, float, str)) else str(v) for k, v in values.items()}
    writer = tf.summary.create_file_writer(str(log_dir / trial_id))
    with writer.as_default():
        hparams_api.hparams(shown, trial_id=trial_id)
        tf.summary.scalar(objective, value, step=0)
    writer.close()

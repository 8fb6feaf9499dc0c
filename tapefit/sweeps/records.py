"""What a sweep leaves behind, for keras-tuner searches and Hydra multiruns alike: `trials.csv`
(best first), the TensorBoard HParams view, and the process facts a trial records."""

from __future__ import annotations

import csv
import io
import math
import os
import resource
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import tensorflow as tf
from tensorboard.plugins.hparams import api as hparams_api

from tapefit.config.schemas import SpaceEntry
from tapefit.files import atomic_write
from tapefit.objective import rank
from tapefit.training.hparams import write_session

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
    return (not ok, rank(value, direction) if ok else 0.0)


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


def hparam_domain(entry: SpaceEntry, placeholder: Any = None) -> Any:
    """The HParams domain of a `tune.space` entry, typed as its values are (int, float, bool,
    str), widened to hold `placeholder` (the value an inactive conditional entry shows)."""
    kind = str(getattr(entry.type, "value", entry.type))
    number = isinstance(placeholder, int | float) and not isinstance(placeholder, bool)
    if kind in ("float", "int"):
        low, high = float(entry.min), float(entry.max)
        if number:
            low, high = min(low, placeholder), max(high, placeholder)
        if kind == "int" and float(low).is_integer() and float(high).is_integer():
            return hparams_api.IntInterval(int(low), int(high))
        return hparams_api.RealInterval(float(low), float(high))
    values = [False, True] if kind == "bool" else list(entry.values)
    if placeholder is not None and placeholder not in values:
        values.append(placeholder)
    if all(isinstance(v, int | float) and not isinstance(v, bool) for v in values):
        same = all(isinstance(v, int) for v in values)
        return hparams_api.Discrete([v if same else float(v) for v in values])
    if len({type(v) for v in values}) == 1 and isinstance(values[0], bool | str):
        return hparams_api.Discrete(values)
    return hparams_api.Discrete([str(v) for v in values])


def shown_value(value: Any, domain: Any = None) -> Any:
    """`value` as its HParams domain holds it (a float for a float domain, text otherwise)."""
    dtype = getattr(domain, "dtype", None)
    if dtype is float and isinstance(value, int | float) and not isinstance(value, bool):
        return float(value)
    if dtype is str or not isinstance(value, bool | int | float | str):
        return str(value)
    return value


def placeholders(space: Mapping[str, SpaceEntry], configured: Mapping[str, Any]) -> dict[str, Any]:
    """What an inactive conditional entry shows in a trial's session: the search config's own
    value of that key (`configured`; the trial's config holds it, unused), or the entry's
    first value.

    Example:
        >>> from tapefit.config.schemas import SpaceEntry
        >>> when = {"model.architecture": ["cnn"]}
        >>> space = {"model.bn_momentum": SpaceEntry("choice", values=[0.5, 0.9], when=when)}
        >>> placeholders(space, {"model.bn_momentum": None})
        {'model.bn_momentum': 0.5}
    """
    shown = {}
    for name, entry in space.items():
        if not entry.when:
            continue
        value = configured.get(name)
        if value is None:
            kind = str(getattr(entry.type, "value", entry.type))
            value = {"bool": False}.get(kind, entry.min if kind in ("float", "int") else None)
            value = entry.values[0] if value is None else value
        shown[name] = getattr(value, "value", value)
    return shown


def curve_metrics(objective: str, curves: str) -> list[Any]:
    """The HParams metrics of a trial session: the trial's objective (the mean over its
    executions) and the objective's and the loss's epoch curves of its run (`curves`: the
    path of that run's `tensorboard/` from the session's folder)."""
    metrics = [
        hparams_api.Metric(
            f"trial/{objective}",
            display_name=f"{objective} (trial, mean over executions)",
        )
    ]
    for name in dict.fromkeys([objective, "val_loss", "loss"]):
        if name.startswith("test_"):  # a test metric has no epoch curve
            continue
        split = "validation" if name.startswith("val_") else "train"
        metrics.append(
            hparams_api.Metric(
                f"epoch_{name.removeprefix('val_')}",
                group=f"{curves}/{split}",
                display_name=name,
                dataset_type=hparams_api.Metric.VALIDATION
                if split == "validation"
                else hparams_api.Metric.TRAINING,
            )
        )
    return metrics


def write_hparams_config(
    log_dir: Path,
    space: Mapping[str, SpaceEntry],
    objective: str,
    shown: dict[str, Any],
    curves: str,
) -> None:
    """The HParams dashboard's columns for a search: every searched key, typed, with its
    domain (holding the placeholders `shown` for inactive entries), and `curve_metrics`."""
    hparams = [
        hparams_api.HParam(name, hparam_domain(entry, shown.get(name)))
        for name, entry in space.items()
    ]
    with tf.summary.create_file_writer(str(log_dir)).as_default():
        hparams_api.hparams_config(hparams=hparams, metrics=curve_metrics(objective, curves))


def trial_hyperparameters(
    space: Mapping[str, SpaceEntry], values: dict[str, Any], shown: dict[str, Any]
) -> dict[str, Any]:
    """A trial's value of every searched key (an inactive entry's placeholder included: a
    session lacking a value is left out of parallel coordinates), typed as its domain."""
    result = {}
    for name, entry in space.items():
        value = values.get(name, shown.get(name))
        result[name] = shown_value(value, hparam_domain(entry, shown.get(name)))
    return result


def write_trial_session(
    trial_dir: Path,
    hyperparameters: dict[str, Any],
    state: str,
    objective: str,
    value: float | None = None,
    error: str | None = None,
) -> None:
    """A trial as an HParams session in its own folder (its runs' curves below it): its
    searched values, Success or Failure (with the error), and its objective."""
    write_session(trial_dir, hyperparameters, state, error)
    if value is not None and math.isfinite(value):
        writer = tf.summary.create_file_writer(str(trial_dir))
        with writer.as_default():
            tf.summary.scalar(f"trial/{objective}", value, step=0)
        writer.close()

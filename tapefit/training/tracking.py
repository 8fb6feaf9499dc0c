"""Experiment tracking in MLflow (`logger=mlflow`): a run's resolved config as params, its epoch
metrics with `step=epoch`, its test metrics and selected epoch, its status as MLflow knows it,
and its files as artifacts — so a team compares runs in one tracker.

tapefit talks to MLflow through `MlflowClient` only (no active run, no global state), and a
tracker that cannot be reached or fails mid-run never stops training: the first failure is one
warning line, the run and its directory go on, and the end of the run says what was not
logged. A resumed run continues the same MLflow run (its id is kept in the run directory),
and the epochs it already logged are not logged twice.
"""

from __future__ import annotations

import json
import logging
import os
import socket
import subprocess
import time
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import Any

import keras

from tapefit.callbacks.tracker_metrics import EpochMetrics
from tapefit.files import write_json

log = logging.getLogger("tapefit")

RUN_ID_FILE = "mlflow_run.json"  # in the run (or search) directory: which MLflow run it is
PARENT_ENV = "TAPEFIT_MLFLOW_PARENT_RUN_ID"  # set by a multirun for its jobs' runs
STATUS = {"completed": "FINISHED", "failed": "FAILED", "interrupted": "KILLED"}
MAX_PARAM_LENGTH = 6000  # MLflow's limit on a param's value
MAX_KEY_LENGTH = 250  # MLflow's limit on a param's or metric's key
# What a finished run uploads, when the files exist and are not larger than the size limit.
ARTIFACTS = (
    ".hydra/config.yaml",
    "metrics.json",
    "history.json",
    "curves.png",
    "model_summary.txt",
    "model.keras",
    "export",
)


def default_tracking_uri() -> str:
    """`MLFLOW_TRACKING_URI`, else a SQLite store in `outputs/mlflow.db` (MLflow's local store).

    Returns:
        A tracking URI MLflow's client accepts.

    Examples:
        >>> uri = default_tracking_uri()
        >>> uri == os.environ.get("MLFLOW_TRACKING_URI", uri) and ":" in uri
        True
    """
    found = os.environ.get("MLFLOW_TRACKING_URI")
    if found:
        return found
    return f"sqlite:///{(Path.cwd() / 'outputs' / 'mlflow.db').as_posix()}"


def params_of(values: Mapping[str, Any]) -> dict[str, str]:
    """Dotted config values as MLflow params: text, cut to MLflow's length limits, never refused.

    Args:
        values: Dotted key to value (`trainer.epochs` -> 2); lists and mappings become JSON.

    Returns:
        Key to text, both within MLflow's limits (a cut value ends with `...`).

    Examples:
        >>> params_of({"trainer.epochs": 2, "model.hidden_units": [64, 64], "x": None})
        {'trainer.epochs': '2', 'model.hidden_units': '[64, 64]', 'x': 'None'}
    """
    params = {}
    for key, value in values.items():
        text = value if isinstance(value, str) else _text(value)
        if len(text) > MAX_PARAM_LENGTH:
            text = text[: MAX_PARAM_LENGTH - 3] + "..."
        params[str(key)[:MAX_KEY_LENGTH]] = text
    return params


def _text(value: Any) -> str:
    if isinstance(value, list | tuple | dict):
        return json.dumps(value, default=str)
    return str(value)


def git_commit(directory: Path) -> str | None:
    """The commit checked out in `directory`'s repository, if it is one and git is there."""
    try:
        done = subprocess.run(
            ["git", "rev-parse", "HEAD"],
            cwd=directory,
            capture_output=True,
            text=True,
            timeout=5,
        )
    except (OSError, subprocess.SubprocessError):
        return None
    return done.stdout.strip() if done.returncode == 0 else None


class MLflowLogger:
    """Logs one tapefit run to MLflow; named by `logger._target_` (`conf/logger/mlflow.yaml`).

    The run calls `start`, adds `callback()` to `fit`'s callbacks, and calls `end` with the
    state `status.json` records. Any MLflow error is caught: one warning, training goes on.

    Args:
        tracking_uri: Where runs are stored; None: `MLFLOW_TRACKING_URI`, else
            `sqlite:///outputs/mlflow.db` under the working directory.
        experiment_name: The MLflow experiment (created if missing).
        run_name: The MLflow run's name; None: the run directory's name.
        tags: Extra tags for the run.
        log_every_n_steps: Also log the training batch metrics every N optimizer steps
            (`step` = the optimizer step); None: epoch metrics only.
        artifact_max_mb: Files (or folders) larger than this are not uploaded (said at the end).
        parent_run_id: Nest this run under another (a search's parent run); None: the
            run named by `TAPEFIT_MLFLOW_PARENT_RUN_ID` if set (a Hydra multirun's jobs).

    Examples:
        >>> logger = MLflowLogger(experiment_name="demo", run_name="first")
        >>> logger.run_name
        'first'
    """

    def __init__(
        self,
        tracking_uri: str | None = None,
        experiment_name: str = "tapefit",
        run_name: str | None = None,
        tags: dict[str, str] | None = None,
        log_every_n_steps: int | None = None,
        artifact_max_mb: float = 200.0,
        parent_run_id: str | None = None,
    ) -> None:
        self.tracking_uri = tracking_uri
        self.experiment_name = experiment_name
        self.run_name = run_name
        self.tags = dict(tags or {})
        self.log_every_n_steps = log_every_n_steps
        self.artifact_max_mb = artifact_max_mb
        self.parent_run_id = parent_run_id or os.environ.get(PARENT_ENV) or None
        self.client: Any = None
        self.run_id: str | None = None
        self.logged_steps: set[int] = set()
        self.not_logged: list[str] = []

    # -- safety: MLflow never stops training ------------------------------------------------

    def _safely(self, what: str, call: Callable[[], Any]) -> Any:
        """`call()`, or None after one warning (the first failure) when MLflow fails."""
        if self.client is None and what != "start":
            self.not_logged.append(what)
            return None
        try:
            return call()
        except Exception as error:  # MLflow's, the network's, the store's: all the same here
            if not self.not_logged:
                log.warning(
                    "MLflow: could not %s (%s: %s); training goes on, the run directory stays "
                    "complete",
                    what,
                    type(error).__name__,
                    str(error).splitlines()[0] if str(error) else "",
                )
            self.not_logged.append(what)
            if what == "start":
                self.client = None
            return None

    # -- the run's lifecycle ------------------------------------------------------------------

    def start(self, run_dir: Path, params: Mapping[str, Any], resume: bool) -> None:
        """Open the MLflow run for `run_dir` (the same one again on resume) and log `params`.

        Args:
            run_dir: The run directory; `mlflow_run.json` there names the MLflow run.
            params: The resolved config, dotted.
            resume: Continue the run recorded in `run_dir` if there is one.
        """
        self._safely("start", lambda: self._start(Path(run_dir), params, resume))

    def _start(self, run_dir: Path, params: Mapping[str, Any], resume: bool) -> None:
        from mlflow.entities import Param, RunTag
        from mlflow.tracking import MlflowClient

        uri = self.tracking_uri or default_tracking_uri()
        self.client = MlflowClient(tracking_uri=uri)
        recorded = _read_run_id(run_dir)
        if resume and recorded:
            self.run_id = recorded
            self.client.update_run(recorded, status="RUNNING")
            history = self.client.get_metric_history(recorded, "loss")
            self.logged_steps = {m.step for m in history}
            log.info("MLflow: continuing run %s (%s)", recorded, uri)
            return
        experiment_id = self._experiment_id(uri)
        tags = {"host": socket.gethostname(), "tapefit.run_dir": str(run_dir.resolve())}
        commit = git_commit(Path.cwd())
        if commit:
            tags["mlflow.source.git.commit"] = commit
        if self.parent_run_id:
            tags["mlflow.parentRunId"] = self.parent_run_id
        tags.update(self.tags)
        run = self.client.create_run(
            experiment_id, run_name=self.run_name or run_dir.name, tags=tags
        )
        self.run_id = run.info.run_id
        write_json(run_dir / RUN_ID_FILE, {"run_id": self.run_id, "tracking_uri": uri})
        items = [Param(k, v) for k, v in params_of(params).items()]
        for batch in _chunks(items, 100):  # MLflow takes at most 100 params a call
            self.client.log_batch(self.run_id, params=batch)
        self.client.log_batch(self.run_id, tags=[RunTag("tapefit.status", "running")])
        log.info("MLflow: run %s in experiment %r (%s)", self.run_id, self.experiment_name, uri)

    def _experiment_id(self, uri: str) -> str:
        found = self.client.get_experiment_by_name(self.experiment_name)
        if found is not None:
            return found.experiment_id
        location = None
        if uri.startswith("sqlite:///"):  # artifacts beside the database, not in the cwd
            location = (Path(uri[len("sqlite:///") :]).parent / "mlartifacts").resolve().as_uri()
        return self.client.create_experiment(self.experiment_name, artifact_location=location)

    def log_metrics(self, metrics: Mapping[str, Any], step: int | None) -> None:
        """Log numeric `metrics` at `step` (None: the run's final values, at step 0)."""

        def send() -> None:
            from mlflow.entities import Metric

            now = int(time.time() * 1000)
            items = [
                Metric(str(k)[:MAX_KEY_LENGTH], float(v), now, step or 0)
                for k, v in metrics.items()
                if isinstance(v, int | float) and not isinstance(v, bool)
            ]
            for batch in _chunks(items, 1000):
                self.client.log_batch(self.run_id, metrics=batch)

        self._safely(f"log metrics at step {step}", send)

    def callback(self) -> keras.callbacks.Callback:
        """The Keras callback that logs each epoch's logs (and steps, if asked) to this run."""
        return EpochMetrics(self)

    def end(self, state: str, run_dir: Path, results: Mapping[str, Any] | None = None) -> None:
        """Close the run: final metrics, artifacts, the status tag and MLflow's status.

        Args:
            state: `completed`, `failed` or `interrupted` (as `status.json` says).
            run_dir: The run directory whose files are uploaded.
            results: The run's final metrics (`metrics.json`), when it completed.
        """
        if results:
            final = {k: v for k, v in results.items() if k.startswith(("test_", "params_"))}
            for key in ("objective_value", "objective_epoch", "tested_epoch", "epochs_run"):
                if isinstance(results.get(key), int | float):
                    final[key] = results[key]
            self.log_metrics(final, None)
        if state == "completed":
            for name in ARTIFACTS:
                self._upload(Path(run_dir) / name, name)
        self._safely("set the status", lambda: self._terminate(state))
        if self.not_logged:
            missing = sorted(set(self.not_logged))
            log.warning("MLflow did not receive: %s", "; ".join(missing))

    def _terminate(self, state: str) -> None:
        from mlflow.entities import RunTag

        self.client.log_batch(self.run_id, tags=[RunTag("tapefit.status", state)])
        self.client.set_terminated(self.run_id, status=STATUS[state])

    def _upload(self, path: Path, name: str) -> None:
        if not path.exists():
            return
        size_mb = _size(path) / 2**20
        if size_mb > self.artifact_max_mb:
            self.not_logged.append(
                f"{name} ({size_mb:.1f} MB > logger.artifact_max_mb={self.artifact_max_mb})"
            )
            return
        folder = str(Path(name).parent) if Path(name).parent != Path(".") else None
        if path.is_dir():
            upload = lambda: self.client.log_artifacts(self.run_id, str(path), name)  # noqa: E731
        else:
            upload = lambda: self.client.log_artifact(self.run_id, str(path), folder)  # noqa: E731
        self._safely(f"upload {name}", upload)


def _read_run_id(run_dir: Path) -> str | None:
    path = run_dir / RUN_ID_FILE
    try:
        return json.loads(path.read_text()).get("run_id")
    except (OSError, ValueError):
        return None


def _chunks(items: list, size: int) -> Iterable[list]:
    for start in range(0, len(items), size):
        yield items[start : start + size]


def _size(path: Path) -> int:
    if path.is_file():
        return path.stat().st_size
    return sum(p.stat().st_size for p in path.rglob("*") if p.is_file())

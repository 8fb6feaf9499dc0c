"""MLflow tracking (`logger=mlflow`), read back with `MlflowClient` from a SQLite store in a
temporary directory: params, the full metric history, artifacts, status, a resumed run that
stays one MLflow run, nested trial runs, and a tracker failing without stopping training."""

import json
import logging
import os
import shutil
import sys

import keras
import pytest

import tapefit
from tapefit.callbacks.stop_on_signal import RunInterrupted
from tapefit.training.tracking import RUN_ID_FILE, params_of
from tests import processes
from tests.helpers import REPO, built_once_per_session

mlflow = pytest.importorskip("mlflow")
from mlflow.tracking import MlflowClient  # noqa: E402

pytestmark = pytest.mark.slow
QUICK = ["trainer.verbose=0", "data.train_limit=256", "trainer.steps_per_execution=1"]
QUICK += ["model.architecture=mlp"]


def runs_of(uri: str, experiment: str = "classifier") -> list:
    client = MlflowClient(tracking_uri=uri)
    found = client.get_experiment_by_name(experiment)
    return [] if found is None else client.search_runs([found.experiment_id])


def history(uri: str, run_id: str, key: str) -> list[tuple[int, float]]:
    return sorted((m.step, m.value) for m in MlflowClient(uri).get_metric_history(run_id, key))


@pytest.fixture(scope="session")
@built_once_per_session
def pristine_store(tmp_path_factory):
    """A SQLite tracking store as MLflow initialises it (every table migrated, the Default
    experiment, no run), once a session: the path of its file."""
    path = tmp_path_factory.mktemp("mlflow-pristine") / "mlflow.db"
    assert [e.name for e in MlflowClient(f"sqlite:///{path}").search_experiments()] == ["Default"]
    return path


@pytest.fixture
def store_uri(pristine_store, tmp_path):
    """This test's own SQLite store, `sqlite:///<tmp_path>/mlflow.db`: a copy of the pristine
    one, which MLflow opens without migrating it again (creating one costs 1.4 s a test, the
    copy a few milliseconds). cli_run's store is still made from nothing, by the run."""
    shutil.copyfile(pristine_store, tmp_path / "mlflow.db")
    return f"sqlite:///{tmp_path / 'mlflow.db'}"


@pytest.fixture(scope="session")
@built_once_per_session
def cli_run(tmp_path_factory):
    """One CLI run with logger=mlflow and MLFLOW_TRACKING_URI naming a SQLite store."""
    root = tmp_path_factory.mktemp("mlflow-cli")
    uri = f"sqlite:///{root / 'mlflow.db'}"
    env = dict(os.environ, MLFLOW_TRACKING_URI=uri, KERAS_BACKEND="tensorflow")
    done = processes.run(
        [
            sys.executable,
            "-m",
            "tapefit",
            "logger=mlflow",
            "trainer.epochs=2",
            "logger.log_every_n_steps=4",
            "logger.tags={team: nlp}",  # the form conf/logger/mlflow.yaml shows
            *QUICK,
            f"hydra.run.dir={root / 'run'}",
        ],
        cwd=REPO,
        env={**env, "TF_CPP_MIN_LOG_LEVEL": "2"},
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return uri, root / "run", done


def test_a_cli_run_is_one_finished_mlflow_run_with_params_history_and_artifacts(cli_run):
    uri, run_dir, _ = cli_run
    (run,) = runs_of(uri)
    assert run.info.status == "FINISHED"
    assert run.data.params["trainer.epochs"] == "2"
    assert run.data.params["model._target_"] == "tapefit.models.Classifier"
    assert run.data.tags["tapefit.status"] == "completed"
    assert run.data.tags["team"] == "nlp"
    run_history = json.loads((run_dir / "history.json").read_text())
    for key in ("loss", "val_loss", "val_accuracy"):
        assert history(uri, run.info.run_id, key) == list(enumerate(run_history[key]))
    metrics = json.loads((run_dir / "metrics.json").read_text())
    assert run.data.metrics["test_accuracy"] == pytest.approx(metrics["test_accuracy"], abs=0)
    assert run.data.metrics["tested_epoch"] == metrics["tested_epoch"]
    steps = [step for step, _ in history(uri, run.info.run_id, "step/loss")]
    total = 2 * -(-256 // 32)  # two epochs of 256 training images in batches of 32
    assert steps == list(range(4, total + 1, 4))
    names = {a.path for a in MlflowClient(uri).list_artifacts(run.info.run_id)}
    assert {"model.keras", "metrics.json", "curves.png", "model_summary.txt"} <= names
    assert json.loads((run_dir / RUN_ID_FILE).read_text())["run_id"] == run.info.run_id


def test_the_uploaded_model_loads_and_predicts_as_the_run_dir_one(cli_run, tmp_path):
    uri, run_dir, _ = cli_run
    (run,) = runs_of(uri)
    path = MlflowClient(uri).download_artifacts(run.info.run_id, "model.keras", str(tmp_path))
    x = keras.random.uniform((4, 8, 8, 1), seed=1)
    ours = keras.models.load_model(run_dir / "model.keras")
    assert (keras.models.load_model(path).predict(x, verbose=0) == ours.predict(x, verbose=0)).all()


class SigtermAt(keras.callbacks.Callback):
    """This process gets SIGTERM at the end of optimizer step `step`, as from a scheduler."""

    def __init__(self, step: int) -> None:
        super().__init__()
        self.step = step

    def on_train_batch_end(self, batch, logs=None):
        import signal

        if int(self.model.optimizer.iterations) == self.step:
            signal.raise_signal(signal.SIGTERM)


def test_sigterm_in_epoch_two_then_resume_is_one_mlflow_run_with_each_epoch_once(
    tmp_path, store_uri
):
    uri = store_uri
    overrides = ["logger=mlflow", f"logger.tracking_uri={uri}", "trainer.epochs=3", *QUICK]
    overrides += ["data.batch_size=32"]  # 8 steps an epoch: step 11 is in epoch 2
    run_dir = tmp_path / "run"
    with pytest.raises(RunInterrupted):
        tapefit.run(tapefit.compose(overrides), run_dir, [SigtermAt(11)])
    (stopped,) = runs_of(uri)
    assert stopped.info.status == "KILLED"
    assert [s for s, _ in history(uri, stopped.info.run_id, "loss")] == [0]
    tapefit.run(tapefit.compose([*overrides, "resume=true"]), run_dir)
    (run,) = runs_of(uri)
    assert run.info.run_id == stopped.info.run_id and run.info.status == "FINISHED"
    run_history = json.loads((run_dir / "history.json").read_text())
    for key in ("loss", "val_loss"):
        assert history(uri, run.info.run_id, key) == list(enumerate(run_history[key]))


def test_a_failing_tracker_warns_once_and_the_run_completes(
    tmp_path, store_uri, monkeypatch, caplog
):
    uri = store_uri
    original = MlflowClient.log_batch

    def broken(self, run_id, metrics=(), params=(), tags=(), **kwargs):
        if metrics:
            raise ConnectionError("tracking server went away")
        return original(self, run_id, metrics=metrics, params=params, tags=tags, **kwargs)

    monkeypatch.setattr(MlflowClient, "log_batch", broken)
    overrides = ["logger=mlflow", f"logger.tracking_uri={uri}", "trainer.epochs=2", *QUICK]
    with caplog.at_level(logging.WARNING, logger="tapefit"):
        metrics = tapefit.run(tapefit.compose(overrides), tmp_path / "run")
    run_dir = tmp_path / "run"
    assert json.loads((run_dir / "status.json").read_text())["state"] == "completed"
    assert (
        json.loads((run_dir / "metrics.json").read_text())["epochs_run"]
        == 2
        == len(metrics and json.loads((run_dir / "history.json").read_text())["loss"])
    )
    assert (run_dir / "model.keras").is_file()
    warnings = [r.getMessage() for r in caplog.records if "MLflow" in r.getMessage()]
    assert sum("could not" in w for w in warnings) == 1, warnings
    assert any(w.startswith("MLflow did not receive: log metrics at step 0") for w in warnings)
    (run,) = runs_of(uri)
    assert run.info.status == "FINISHED" and run.data.params["trainer.epochs"] == "2"


def test_an_unreachable_tracker_does_not_stop_the_run(tmp_path, monkeypatch, caplog):
    monkeypatch.setenv("MLFLOW_HTTP_REQUEST_MAX_RETRIES", "0")
    monkeypatch.setenv("MLFLOW_HTTP_REQUEST_TIMEOUT", "2")
    overrides = ["logger=mlflow", "logger.tracking_uri=http://127.0.0.1:9", "trainer.epochs=1"]
    with caplog.at_level(logging.WARNING, logger="tapefit"):
        metrics = tapefit.run(tapefit.compose([*overrides, *QUICK]), tmp_path / "run")
    assert json.loads((tmp_path / "run" / "status.json").read_text())["state"] == "completed"
    assert metrics["epochs_run"] == 1
    messages = [r.getMessage() for r in caplog.records]
    assert sum(m.startswith("MLflow: could not start") for m in messages) == 1


def test_a_search_is_a_parent_run_with_one_child_per_trial(tmp_path, store_uri):
    uri = store_uri
    overrides = ["logger=mlflow", f"logger.tracking_uri={uri}", "tune=random", "tune.max_trials=2"]
    overrides += ["trainer.epochs=1", "model.architecture=mlp", *QUICK]
    overrides += ["tune.space={optimizer.learning_rate: {type: float, min: 1e-3, max: 1e-2}}"]
    from tapefit.sweeps.tuning import search

    search(tapefit.compose(overrides), tmp_path / "search", overrides)
    runs = runs_of(uri)
    parents = [r for r in runs if "mlflow.parentRunId" not in r.data.tags]
    children = [r for r in runs if "mlflow.parentRunId" in r.data.tags]
    assert len(parents) == 1 and len(children) == 2
    (parent,) = parents
    assert {c.data.tags["mlflow.parentRunId"] for c in children} == {parent.info.run_id}
    assert parent.info.status == "FINISHED"
    assert "tune.space.optimizer.learning_rate" in parent.data.params
    assert all(c.info.status == "FINISHED" for c in children)
    rates = {c.data.params["optimizer.learning_rate"] for c in children}
    assert len(rates) == 2


def test_params_are_cut_to_mlflow_limits_never_refused():
    params = params_of({"k" * 300: "v" * 7000, "list": list(range(3))})
    (key, value), (_, listed) = params.items()
    assert len(key) == 250 and len(value) == 6000 and value.endswith("...")
    assert listed == "[0, 1, 2]"


def test_only_the_chief_logs(tmp_path, store_uri, monkeypatch):
    """A worker that is not the chief (it trains in a scratch directory) logs nothing."""
    import tapefit.runner.run as run_module

    monkeypatch.setattr(run_module, "writes_run_dir", lambda strategy: False)
    uri = store_uri
    overrides = ["logger=mlflow", f"logger.tracking_uri={uri}", "trainer.epochs=1", *QUICK]
    tapefit.run(tapefit.compose(overrides), tmp_path / "worker")
    assert runs_of(uri) == []
    assert not (tmp_path / "worker" / RUN_ID_FILE).exists()

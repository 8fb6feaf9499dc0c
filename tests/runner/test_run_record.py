"""`tapefit.runner.run_record`: what a run directory's `status.json` says of the run's end."""

import json
import logging
import signal

import pytest
import tensorflow as tf
from omegaconf import OmegaConf

from tapefit.callbacks.stop_on_signal import RunInterrupted
from tapefit.errors import TapefitError
from tapefit.runner.run_record import RunRecord
from tests.helpers import run_status


def config(resume=False, strategy="default"):
    return OmegaConf.create(
        {
            "seed": 3,
            "resume": resume,
            "trainer": {"strategy": strategy},
            "callbacks": {
                "tensorboard": {"enabled": False},
                "csv_logger": {"filename": "history.csv"},
                "model_checkpoint": {"filename": "checkpoints/best.weights.h5"},
            },
        }
    )


class Tracker:
    """An experiment tracker that notes what it is told."""

    def __init__(self):
        self.told = []

    def start(self, run_dir, params, resume):
        self.told.append(("start", run_dir, params, resume))

    def end(self, state, run_dir, results=None):
        self.told.append(("end", state, results))

    def callback(self):
        return "the tracker's callback"


def test_entering_claims_the_directory_and_writes_the_config(tmp_path):
    with RunRecord(config(), tmp_path / "run", hparams_session=False):
        assert run_status(tmp_path / "run")["state"] == "running"
    written = OmegaConf.load(tmp_path / "run" / ".hydra" / "config.yaml")
    assert written == config()


def test_a_failed_runs_configured_files_are_removed_when_it_runs_again(tmp_path):
    run_dir = tmp_path / "run"
    (run_dir / "checkpoints").mkdir(parents=True)
    (run_dir / "checkpoints" / "best.weights.h5").write_text("stale")
    (run_dir / "history.csv").write_text("stale")
    (run_dir / "status.json").write_text(json.dumps({"state": "failed", "pid": 1}))
    with RunRecord(config(), run_dir, hparams_session=False):
        assert not (run_dir / "checkpoints").exists() and not (run_dir / "history.csv").exists()


def test_a_resumed_run_keeps_the_config_it_started_with(tmp_path):
    (tmp_path / ".hydra").mkdir()
    (tmp_path / ".hydra" / "config.yaml").write_text("seed: 1\n")
    with RunRecord(config(resume=True), tmp_path, hparams_session=False):
        pass
    assert (tmp_path / ".hydra" / "config.yaml").read_text() == "seed: 1\n"


@pytest.mark.parametrize(
    ("error", "state", "fields"),
    [
        (TapefitError("data.x=1 is wrong"), "failed", {"error": "data.x=1 is wrong"}),
        (ValueError("boom"), "failed", {"error": "ValueError: boom"}),
        (
            RunInterrupted(signal.SIGTERM),
            "interrupted",
            {"signal": 15, "error": "interrupted by SIGTERM after the current step"},
        ),
    ],
    ids=["refused", "crashed", "interrupted"],
)
def test_an_error_leaving_the_block_ends_the_run_and_goes_on(tmp_path, error, state, fields):
    tracker = Tracker()
    with (
        pytest.raises(type(error)) as raised,
        RunRecord(config(), tmp_path, hparams_session=False) as record,
    ):
        record.track(tracker)
        raise error
    assert raised.value is error
    said = run_status(tmp_path)
    assert said["state"] == state and {k: said[k] for k in fields} == fields
    assert tracker.told[-1] == ("end", state, None)


def test_a_lost_worker_of_a_multi_worker_run_is_one_line_naming_it(tmp_path, monkeypatch):
    monkeypatch.delenv("TF_CONFIG", raising=False)  # this process is no task of the cluster
    lost = tf.errors.UnavailableError(None, None, "aborted by /job:worker/replica:0/task:1")
    with (
        pytest.raises(TapefitError, match=r"^worker 1 of the cluster stopped during a step"),
        RunRecord(config(strategy="multi_worker"), tmp_path, hparams_session=False),
    ):
        raise lost
    assert run_status(tmp_path)["error"].startswith("worker 1 of the cluster stopped")


def test_a_completed_run_records_its_objective_and_tells_the_tracker(tmp_path, caplog):
    tracker = Tracker()
    results = {
        "objective": "val_accuracy",
        "objective_direction": "max",
        "objective_value": 0.875,
        "test_accuracy": 0.9,
    }
    with RunRecord(config(resume=True), tmp_path, hparams_session=False) as record:
        record.track(tracker)
        assert record.tracker_callbacks() == ["the tracker's callback"]
        with caplog.at_level(logging.INFO, logger="tapefit"):
            record.completed(results)
    said = run_status(tmp_path)
    assert (said["state"], said["objective"], said["objective_direction"]) == (
        "completed",
        "val_accuracy",
        "max",
    )
    assert tracker.told[0][2]["seed"] == 3 and tracker.told[0][3] is True  # resumed
    assert tracker.told[-1] == ("end", "completed", results)
    assert "completed: test_accuracy=0.9000; objective val_accuracy=0.8750" in caplog.text


def test_a_run_without_test_split_or_objective_value_says_so(tmp_path, caplog):
    results = {"objective": "val_loss", "objective_direction": "min", "objective_value": None}
    with RunRecord(config(), tmp_path, hparams_session=False) as record:
        assert record.tracker_callbacks() == []
        with caplog.at_level(logging.INFO, logger="tapefit"):
            record.completed(results)
    assert "completed: no test split; objective val_loss=none" in caplog.text

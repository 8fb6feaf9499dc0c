"""`tapefit.sweeps.summary`: a multirun's `trials.csv`, read from its job directories."""

import csv
import json
import logging
import os

import pytest
from omegaconf import OmegaConf

from tapefit.sweeps.summary import SweepSummary, job_record, summarize_sweep
from tapefit.training.tracking import PARENT_ENV


def job(sweep_dir, name, overrides, status=None, metrics=None):
    """A job directory as Hydra and the job's run leave it."""
    job_dir = sweep_dir / name
    (job_dir / ".hydra").mkdir(parents=True)
    OmegaConf.save(OmegaConf.create(overrides), job_dir / ".hydra" / "overrides.yaml")
    for file, content in (("status.json", status), ("metrics.json", metrics)):
        if content is not None:
            (job_dir / file).write_text(json.dumps(content))
    return job_dir


def completed(value, **more):
    return {"objective": "val_accuracy", "objective_value": value, "epochs_run": 2, **more}


def rows(path):
    with path.open(newline="") as file:
        return list(csv.DictReader(file))


def test_a_completed_job_is_a_record_of_its_metrics_and_overrides(tmp_path):
    metrics = completed(0.75, objective_direction="max", wall_time_s=3.5, train_time_s=2.0)
    job_dir = job(
        tmp_path, "4", ["seed=2", "model.units=32", "+x"], {"state": "completed"}, metrics
    )
    assert job_record(job_dir) == {
        "trial_id": "4",
        "status": "completed",
        "objective": "val_accuracy",
        "direction": "max",
        "objective_value": 0.75,
        "epochs": 2,
        "duration_s": 3.5,
        "fit_s": 2.0,
        "values": {"seed": "2", "model.units": "32"},  # an override without a value is none
        "reason": "",
    }


def test_a_failed_job_has_its_status_and_error_and_a_job_without_status_is_unknown(tmp_path):
    status = {"state": "failed", "error": "data.x is wrong", "objective": "val_loss"}
    failed = job_record(job(tmp_path, "0", ["seed=1"], status))
    assert (failed["status"], failed["reason"], failed["objective"]) == (
        "failed",
        "data.x is wrong",
        "val_loss",
    )
    assert failed["objective_value"] is None
    assert job_record(job(tmp_path, "1", []))["status"] == "unknown"


def test_trials_csv_lists_every_job_best_first_in_the_objectives_direction(tmp_path):
    job(tmp_path, "0", ["seed=0"], {"state": "completed"}, completed(0.5))
    job(tmp_path, "2", ["seed=2"], {"state": "completed"}, completed(0.9))
    job(tmp_path, "9", ["seed=9", "model.units=8"], {"state": "failed", "error": "boom"})
    job(tmp_path, "10", ["seed=10"])  # killed before its status was written
    job(tmp_path, "11", ["seed=11"], {"state": "completed"}, completed(0.7))
    (tmp_path / "not-a-job").mkdir()
    records = summarize_sweep(tmp_path)
    # val_accuracy: max; the jobs without an objective after, in the jobs' order (9 before 10)
    assert [r["trial_id"] for r in records] == ["2", "11", "0", "9", "10"]
    written = rows(tmp_path / "trials.csv")
    assert [(r["trial_id"], r["status"], r["objective_value"], r["seed"]) for r in written] == [
        ("2", "completed", "0.9", "2"),
        ("11", "completed", "0.7", "11"),
        ("0", "completed", "0.5", "0"),
        ("9", "failed", "", "9"),
        ("10", "unknown", "", "10"),
    ]
    assert list(written[0])[-3:] == ["model.units", "seed", "reason"]
    assert (written[3]["model.units"], written[3]["reason"]) == ("8", "boom")


def test_a_direction_the_jobs_state_wins_over_the_metrics_name(tmp_path):
    for name, value in (("0", 0.5), ("1", 0.9)):
        metrics = completed(value, objective_direction="min")
        job(tmp_path, name, [f"seed={name}"], {"state": "completed"}, metrics)
    assert [r["trial_id"] for r in summarize_sweep(tmp_path)] == ["0", "1"]


def test_a_sweep_without_jobs_writes_nothing(tmp_path):
    assert summarize_sweep(tmp_path) == []
    assert not (tmp_path / "trials.csv").exists()


class Tracker:
    def __init__(self):
        self.ended = None

    def end(self, state, run_dir, results=None):
        self.ended = (state, run_dir, results)


def multirun(sweep_dir):
    return OmegaConf.create({"hydra": {"sweep": {"dir": str(sweep_dir)}}, "logger": None})


def test_the_multiruns_end_writes_the_summary_and_ends_the_parent_run(
    tmp_path, monkeypatch, caplog
):
    job(tmp_path, "0", ["seed=0"], {"state": "completed"}, completed(0.5))
    job(tmp_path, "1", ["seed=1"], {"state": "completed"}, completed(0.9))
    monkeypatch.setenv(PARENT_ENV, "parent-1")
    callback = SweepSummary()
    callback.tracker = Tracker()
    with caplog.at_level(logging.INFO, logger="tapefit"):
        callback.on_multirun_end(multirun(tmp_path))
    assert callback.tracker.ended == ("completed", tmp_path, {"objective_value": 0.9})
    assert "(best job 1: val_accuracy=0.9)" in caplog.text
    assert (tmp_path / "trials.csv").is_file()
    assert PARENT_ENV not in os.environ


def test_a_multirun_whose_jobs_all_failed_ends_its_parent_run_failed(tmp_path):
    job(tmp_path, "0", ["seed=0"], {"state": "failed", "error": "boom"})
    callback = SweepSummary()
    callback.tracker = Tracker()
    callback.on_multirun_end(multirun(tmp_path))
    assert callback.tracker.ended == ("failed", tmp_path, None)


@pytest.mark.parametrize("made", [False, True], ids=["no-sweep-dir", "empty-sweep-dir"])
def test_without_a_logger_there_is_no_parent_run_and_no_jobs_no_summary(tmp_path, made):
    sweep_dir = tmp_path / "sweep"
    if made:
        sweep_dir.mkdir()
    callback = SweepSummary()
    callback.on_multirun_start(multirun(sweep_dir))
    assert callback.tracker is None and sweep_dir.exists() is made  # not even created
    callback.on_multirun_end(multirun(sweep_dir))
    assert not (sweep_dir / "trials.csv").exists()

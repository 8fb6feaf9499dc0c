"""`tapefit.sweeps.trials`: a search's trials as runs, and what each trial's record says."""

import dataclasses
import json
import logging
import math

import pytest

from tapefit.errors import TapefitError
from tapefit.sweeps import trials
from tapefit.sweeps.trial_callbacks import EpochClock, EpochReport
from tapefit.sweeps.trials import TrialRuns, pinned, read_record

VALUES = {"optimizer.learning_rate": 0.001, "model.architecture": "mlp", "data.batch_size": 64}


@pytest.fixture(scope="module")
def spec(search_spec):
    """`tune=random` over the classifier's space (val_accuracy, max), its seed 42."""
    return search_spec(seed=42)


def executions(spec, count):
    return dataclasses.replace(
        spec, tune=dataclasses.replace(spec.tune, executions_per_trial=count)
    )


class Runs:
    """Stands in for `Run`: each run gives the next outcome (metrics, or an error to raise)
    and notes its seed, resume flag, directory and extra callbacks."""

    def __init__(self, monkeypatch, *outcomes):
        self.outcomes, self.made = list(outcomes), []
        monkeypatch.setattr(trials, "Run", self.run)

    def run(self, cfg, run_dir, extra, **settings):
        self.made.append((cfg.seed, cfg.resume, run_dir, extra))
        outcome = self.outcomes.pop(0)

        class Executed:
            def execute(self):
                if isinstance(outcome, Exception):
                    raise outcome
                return outcome

        return Executed()


def metrics(value, epochs=2):
    return {"objective_value": value, "epochs_run": epochs}


def test_only_searched_keys_the_command_line_sets_are_pinned():
    overrides = ["++model.units=3", "~model.dropout", "seed=1", "model.dropout", "x=1"]
    assert pinned(overrides, {"model.units", "model.dropout", "seed"}) == ["model.units", "seed"]


def test_a_searched_key_set_on_the_command_line_is_warned_about_once(spec, tmp_path, caplog):
    with caplog.at_level(logging.WARNING, logger="tapefit"):
        TrialRuns(spec, tmp_path, ["model.architecture=cnn", "trainer.epochs=1"], "chief")
    warned = [r.getMessage() for r in caplog.records]
    assert len(warned) == 1
    assert warned[0].startswith("model.architecture is set on the command line, but tune.space")


def test_a_trial_with_several_executions_runs_each_in_a_folder_of_its_own(spec, tmp_path):
    assert TrialRuns(spec, tmp_path, [], "chief").trial_dir("03") == tmp_path / "trials" / "03"
    two = TrialRuns(executions(spec, 2), tmp_path, [], "chief")
    assert two.trial_dir("03", 1) == tmp_path / "trials" / "03" / "execution-1"


def test_a_missing_or_unreadable_record_reads_as_empty(tmp_path):
    assert read_record(tmp_path / "trial.json") == {}
    (tmp_path / "trial.json").write_text('{"status": "compl')  # killed mid-write by hand
    assert read_record(tmp_path / "trial.json") == {}
    (tmp_path / "trial.json").write_text('{"status": "completed"}')
    assert read_record(tmp_path / "trial.json") == {"status": "completed"}


def test_the_executions_run_with_seed_plus_k_and_their_objective_is_averaged(
    spec, tmp_path, monkeypatch
):
    runs = Runs(monkeypatch, metrics(0.6), metrics(0.8, epochs=3))
    record = TrialRuns(executions(spec, 2), tmp_path, [], "tuner0").run_trial("07", VALUES)
    assert [(seed, resume) for seed, resume, *_ in runs.made] == [(42, False), (43, False)]
    assert record["objective_value"] == pytest.approx(0.7)
    assert (record["status"], record["execution"], record["epochs"]) == ("completed", 1, 3)
    first = json.loads((tmp_path / "trials" / "07" / "execution-0" / "trial.json").read_text())
    assert (first["objective_value"], first["tuner"], first["values"]) == (0.6, "tuner0", VALUES)
    assert first["objective"] == "val_accuracy"
    assert list((tmp_path / "trials" / "07").glob("events.out.tfevents.*"))  # its session


def test_a_searched_seed_is_the_trials_first_seed(spec, tmp_path, monkeypatch):
    runs = Runs(monkeypatch, metrics(0.5))
    TrialRuns(spec, tmp_path, [], "chief").execute("0", spec.config, 0, {"seed": 7})
    assert runs.made[0][0] == 7


def test_the_first_execution_that_fails_is_the_trials_outcome(spec, tmp_path, monkeypatch):
    refusal = TapefitError("model.units=0 must be positive\nsecond line")
    runs = Runs(monkeypatch, refusal, metrics(0.8))
    record = TrialRuns(executions(spec, 2), tmp_path, [], "chief").run_trial("1", VALUES)
    assert len(runs.made) == 1  # the second execution never ran
    assert (record["status"], record["reason"]) == ("failed", "model.units=0 must be positive")
    assert "objective_value" not in record


@pytest.mark.parametrize(
    ("outcome", "reason"),
    [
        (ValueError("bad shape"), "ValueError('bad shape')"),
        (metrics(math.nan), "val_accuracy is not finite"),
        (metrics(None), "val_accuracy is not finite"),
    ],
    ids=["crashed", "nan", "none"],
)
def test_a_crash_or_an_objective_that_is_not_finite_fails_the_trial(
    spec, tmp_path, monkeypatch, outcome, reason
):
    Runs(monkeypatch, outcome)
    record = TrialRuns(spec, tmp_path, [], "chief").execute("2", spec.config, 0, VALUES)
    assert (record["status"], record["reason"]) == ("failed", reason)
    assert read_record(tmp_path / "trials" / "2" / "trial.json")["status"] == "failed"


def test_a_trial_its_report_stopped_is_pruned_with_its_objective(spec, tmp_path, monkeypatch):
    runs = Runs(monkeypatch, metrics(0.4, epochs=1))
    report = EpochReport("val_accuracy", lambda value, epoch: True)
    report.stopped_at = 0  # as the pruner's verdict after the first epoch leaves it
    record = TrialRuns(spec, tmp_path, [], "chief").execute(
        "3", spec.config, 0, VALUES, None, report
    )
    assert (record["status"], record["objective_value"]) == ("pruned", 0.4)
    assert record["reason"] == "pruned after epoch 1"
    clock, watched = runs.made[0][3]
    assert isinstance(clock, EpochClock) and watched is report


def test_a_recorded_execution_with_the_same_values_is_not_run_again(spec, tmp_path, monkeypatch):
    Runs(monkeypatch)  # any run fails the test: no outcome left
    run_dir = tmp_path / "trials" / "4"
    run_dir.mkdir(parents=True)
    (run_dir / "status.json").write_text('{"state": "completed"}')
    recorded = {"status": "completed", "values": VALUES, "objective_value": 0.9, "epochs": 5}
    (run_dir / "trial.json").write_text(json.dumps(recorded))
    assert TrialRuns(spec, tmp_path, [], "chief").execute("4", spec.config, 0, VALUES) == recorded


def test_a_recorded_execution_of_other_values_runs_again(spec, tmp_path, monkeypatch):
    runs = Runs(monkeypatch, metrics(0.3))
    run_dir = tmp_path / "trials" / "4"
    run_dir.mkdir(parents=True)
    (run_dir / "status.json").write_text('{"state": "completed"}')
    recorded = {"status": "completed", "values": {**VALUES, "data.batch_size": 32}}
    (run_dir / "trial.json").write_text(json.dumps({**recorded, "objective_value": 0.9}))
    record = TrialRuns(spec, tmp_path, [], "chief").execute("4", spec.config, 0, VALUES)
    assert len(runs.made) == 1 and record["objective_value"] == 0.3


def test_a_run_that_completed_before_its_record_was_written_is_recorded_from_its_metrics(
    spec, tmp_path, monkeypatch
):
    Runs(monkeypatch)
    run_dir = tmp_path / "trials" / "5"
    run_dir.mkdir(parents=True)
    (run_dir / "status.json").write_text('{"state": "completed"}')
    (run_dir / "metrics.json").write_text(json.dumps(metrics(0.55, epochs=4)))
    record = TrialRuns(spec, tmp_path, [], "chief").execute("5", spec.config, 0, VALUES)
    assert (record["status"], record["objective_value"], record["epochs"]) == ("completed", 0.55, 4)
    assert read_record(run_dir / "trial.json")["objective_value"] == 0.55


def test_a_trial_the_search_was_killed_in_resumes(spec, tmp_path, monkeypatch):
    runs = Runs(monkeypatch, metrics(0.5))
    (tmp_path / "trials" / "6" / "resume").mkdir(parents=True)
    TrialRuns(spec, tmp_path, [], "chief").execute("6", spec.config, 0, VALUES)
    assert runs.made[0][1] is True

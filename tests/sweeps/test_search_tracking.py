"""`tapefit.sweeps.search_tracking`: a search's parent run in the tracker, and what it logs."""

import pytest

from tapefit.config.schemas import ParamType, Sampling, SpaceEntry
from tapefit.sweeps import search_tracking
from tapefit.sweeps.search_tracking import search_params, search_tracker, space_params


class Tracker:
    """A tracker that notes how it was built and started; `run_id` None: it failed to start."""

    def __init__(self, run_id):
        self.run_id, self.built, self.started = run_id, None, None

    def start(self, run_dir, params, resume):
        self.started = (run_dir, params, resume)


@pytest.fixture
def built(monkeypatch):
    """Trackers `instantiate` builds, each with the run id the test puts in `run_ids`."""
    trackers, run_ids = [], ["parent-1"]

    def instantiate(node, key, exclude=(), **extra):
        tracker = Tracker(run_ids[len(trackers)])
        tracker.built = (node, key, tuple(exclude), extra)
        trackers.append(tracker)
        return tracker

    monkeypatch.setattr(search_tracking, "instantiate", instantiate)
    return trackers, run_ids


def test_a_search_without_a_logger_has_no_parent_run(built, tmp_path):
    assert search_tracker(None, tmp_path, {"seed": 0}) is None
    assert built[0] == []


def test_the_parent_run_is_named_after_the_search_directory_and_logs_its_params(built, tmp_path):
    logger = {"_target_": "tapefit.training.tracking.MLflowLogger", "run_name": "mine"}
    tracker = search_tracker(logger, tmp_path / "lr-search", {"seed": 0})
    assert tracker.built == (logger, "logger", ("run_name",), {"run_name": "search lr-search"})
    assert tracker.started == (tmp_path / "lr-search", {"seed": 0}, False)


def test_a_search_that_has_its_run_file_continues_its_run(built, tmp_path):
    (tmp_path / "mlflow_run.json").write_text('{"run_id": "parent-1"}')
    assert search_tracker({"_target_": "x"}, tmp_path, {}).started[2] is True


def test_a_tracker_that_did_not_start_a_run_is_no_parent(built, tmp_path):
    trackers, run_ids = built
    run_ids[0] = None
    assert search_tracker({"_target_": "x"}, tmp_path, {}) is None
    assert trackers[0].started is not None  # it was tried


def test_search_params_drop_the_loggers_keys_and_the_flat_space_and_add_the_searched():
    snapshot = {
        "seed": 0,
        "logger.run_name": "a",
        "tune.space.model.units.max": 64,
        "tune.max_trials": 5,
        "model.units": 32,
    }
    searched = {"model.units": {"type": "int", "min": 8, "max": 64}}
    assert search_params(snapshot, searched) == {
        "seed": 0,
        "tune.max_trials": 5,
        "model.units": {"type": "int", "min": 8, "max": 64},  # the searched entry, not 32
    }


def test_space_params_name_enums_and_leave_unset_fields_out():
    space = {
        "model.architecture": SpaceEntry(ParamType.choice, values=["cnn", "mlp"]),
        "optimizer.learning_rate": SpaceEntry(min=1e-4, max=1e-2, sampling=Sampling.log),
        "model.bn_momentum": SpaceEntry(
            ParamType.bool, sampling=None, when={"model.architecture": ["cnn"]}
        ),
    }
    params = space_params(space)
    assert {type(entry["type"]) for entry in params.values()} == {str}  # not the enum
    assert params == {
        "tune.space.model.architecture": {
            "type": "choice",
            "sampling": "linear",
            "values": ["cnn", "mlp"],
        },
        "tune.space.optimizer.learning_rate": {
            "type": "float",
            "min": 1e-4,
            "max": 1e-2,
            "sampling": "log",
        },
        "tune.space.model.bn_momentum": {
            "type": "bool",
            "when": {"model.architecture": ["cnn"]},
        },
    }

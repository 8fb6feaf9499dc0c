"""The weights a run is tested and saved with (`trainer.test_weights`): the epoch its objective
selects, the last one, through EarlyStopping's own restore and across a resume (issue 22)."""

import json
import os
import signal

import keras
import numpy as np
import pytest

from tests.helpers import built_once_per_session

pytestmark = pytest.mark.slow  # trains seven runs


SELECTION = [
    "model.architecture=mlp",
    "objective=val_loss",
    "optimizer.learning_rate=0.05",  # too high on purpose: val_loss is best early, then rises
    "trainer.epochs=6",
    "trainer.verbose=0",
    "data.train_limit=320",
]


class StopAt(keras.callbacks.Callback):
    """SIGINT to this process at the end of epoch `epoch` (1-based): the run checkpoints and
    stops, as a preempted run does."""

    def __init__(self, epoch: int) -> None:
        super().__init__()
        self.epoch = epoch

    def on_epoch_end(self, epoch, logs=None):
        if epoch + 1 == self.epoch:
            os.kill(os.getpid(), signal.SIGINT)


@pytest.fixture(scope="session")
@built_once_per_session
def selected_runs(tmp_path_factory):
    """The same run tested with the best epoch's weights (default), with the last epoch's,
    and stopped after epoch 4 then resumed (default)."""
    from tapefit.callbacks.stop_on_signal import RunInterrupted
    from tapefit.runner.composition import compose
    from tapefit.runner.train import run

    runs = {}
    for name, extra in (("best", []), ("last", ["trainer.test_weights=last"])):
        runs[name] = tmp_path_factory.mktemp(name)
        run(compose([*SELECTION, *extra]), runs[name])
    runs["resumed"] = tmp_path_factory.mktemp("resumed")
    with pytest.raises(RunInterrupted):
        run(compose(SELECTION), runs["resumed"], callbacks=[StopAt(4)])
    run(compose([*SELECTION, "resume=true"]), runs["resumed"])
    # killed after the last epoch's checkpoint (while testing): the resume fits nothing
    runs["resumed_at_end"] = tmp_path_factory.mktemp("resumed_at_end")
    with pytest.raises(RuntimeError, match="killed while testing"):
        run(compose(SELECTION), runs["resumed_at_end"], callbacks=[FailAtTrainEnd()])
    run(compose([*SELECTION, "resume=true"]), runs["resumed_at_end"])
    # EarlyStopping restores the weights of its own monitor's best epoch at the end
    stopping = [
        "callbacks.early_stopping.enabled=true",
        "callbacks.early_stopping.monitor=val_accuracy",
        "callbacks.early_stopping.patience=10",
        "callbacks.early_stopping.restore_best_weights=true",
    ]
    for name, extra in (("stopping_best", []), ("stopping_last", ["trainer.test_weights=last"])):
        runs[name] = tmp_path_factory.mktemp(name)
        run(compose([*SELECTION, *stopping, *extra]), runs[name])
    return runs


class FailAtTrainEnd(keras.callbacks.Callback):
    """Fail once training has ended and every epoch is checkpointed."""

    def on_train_end(self, logs=None):
        raise RuntimeError("killed while testing")


def read(run_dir, name):
    return json.loads((run_dir / name).read_text())


def test_the_tested_and_saved_model_is_the_one_the_objective_selects(selected_runs):
    from tapefit.runner.composition import compose
    from tapefit.runner.train import build_data

    best, last = (
        read(selected_runs["best"], "metrics.json"),
        read(selected_runs["last"], "metrics.json"),
    )
    history = read(selected_runs["best"], "history.json")
    assert history == read(selected_runs["last"], "history.json")  # the same training
    epoch = best["objective_epoch"]
    assert epoch < best["epochs_run"] == 6, "the setup must make an earlier epoch the best"
    assert (best["tested_weights"], best["tested_epoch"]) == ("best", epoch)
    assert (last["tested_weights"], last["tested_epoch"]) == ("last", 6)
    assert best["test_loss"] != last["test_loss"]
    # model.keras holds that epoch's weights: on the validation split it gives that epoch's
    # val_loss, and the last-weights run's model gives the last epoch's
    data = build_data(compose(SELECTION))
    for run_dir, index in ((selected_runs["best"], epoch - 1), (selected_runs["last"], 5)):
        model = keras.models.load_model(run_dir / "model.keras")
        val_loss = model.evaluate(data.val, verbose=0, return_dict=True)["loss"]
        assert val_loss == pytest.approx(history["val_loss"][index], rel=1e-5)


@pytest.mark.parametrize(
    ("name", "weights", "index"),
    [("stopping_best", "best", None), ("stopping_last", "last", 5)],
)
def test_early_stopping_restoring_its_own_best_does_not_change_the_tested_model(
    selected_runs, name, weights, index
):
    from tapefit.runner.composition import compose
    from tapefit.runner.train import build_data

    metrics = read(selected_runs[name], "metrics.json")
    history = read(selected_runs[name], "history.json")
    accuracy_best = int(np.argmax(history["val_accuracy"]))
    index = metrics["objective_epoch"] - 1 if index is None else index
    assert accuracy_best != index, "EarlyStopping's best epoch must differ from the tested one"
    assert (metrics["tested_weights"], metrics["tested_epoch"]) == (weights, index + 1)
    model = keras.models.load_model(selected_runs[name] / "model.keras")
    val_loss = model.evaluate(build_data(compose(SELECTION)).val, verbose=0, return_dict=True)
    assert val_loss["loss"] == pytest.approx(history["val_loss"][index], rel=1e-5)


@pytest.mark.parametrize("resumed", ["resumed", "resumed_at_end"])
def test_a_resumed_run_still_selects_the_best_epoch_from_before_the_stop(selected_runs, resumed):
    best, resumed = selected_runs["best"], selected_runs[resumed]
    assert read(best, "metrics.json")["objective_epoch"] <= 4, (
        "the best epoch must precede the stop"
    )
    for key in ("tested_epoch", "tested_weights", "test_loss", "test_accuracy"):
        assert read(resumed, "metrics.json")[key] == read(best, "metrics.json")[key]
    expected = keras.models.load_model(best / "model.keras").get_weights()
    for actual, wanted in zip(
        keras.models.load_model(resumed / "model.keras").get_weights(), expected, strict=True
    ):
        np.testing.assert_array_equal(actual, wanted)

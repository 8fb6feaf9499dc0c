"""TensorBoard HParams sessions of ordinary runs, read back from a real TensorBoard server: the
run's hyperparameters, Success or Failure, its last epoch's curves and its selected and tested
metrics (issue 22)."""

import json

import keras
import pytest

from tests.helpers import built_once_per_session

pytestmark = pytest.mark.slow  # two runs and a TensorBoard server


class FailAt(keras.callbacks.Callback):
    """Raise at the end of epoch 1: a run that fails after writing some curves."""

    def on_epoch_end(self, epoch, logs=None):
        raise RuntimeError("the data went away")


@pytest.fixture(scope="session")
@built_once_per_session
def two_runs(tmp_path_factory):
    """Two ordinary runs in one folder, as `tensorboard --logdir outputs` sees them: one
    completed with learning rate 0.003, one failed in its first epoch with 0.01."""
    from tapefit.runner.composition import compose
    from tapefit.runner.train import run

    outputs = tmp_path_factory.mktemp("outputs")
    base = ["model.architecture=mlp", "trainer.epochs=2", "trainer.verbose=0"]
    base.append("data.train_limit=320")
    run(compose([*base, "optimizer.learning_rate=0.003"]), outputs / "good")
    with pytest.raises(RuntimeError, match="the data went away"):
        run(compose([*base, "optimizer.learning_rate=0.01"]), outputs / "bad", [FailAt()])
    return outputs


def test_ordinary_runs_are_hparams_sessions_read_back_from_a_tensorboard_server(two_runs):
    from tests.helpers import TensorBoardServer

    with TensorBoardServer(two_runs) as server:
        experiment, groups = server.hparams_sessions(expected=2)
    names = {info["name"] for info in experiment["hparamInfos"]}
    assert {"optimizer.learning_rate", "model.architecture", "data.batch_size", "seed"} <= names
    assert not names & {"resume", "trainer.verbose"}
    metrics = {(m["name"]["group"], m["name"]["tag"]) for m in experiment["metricInfos"]}
    assert {("validation", "epoch_loss"), ("train", "epoch_accuracy")} <= metrics
    sessions = {group["sessions"][0]["name"].split("/")[0]: group for group in groups}
    assert set(sessions) == {"good", "bad"}
    good, bad = sessions["good"], sessions["bad"]
    assert good["hparams"]["optimizer.learning_rate"] == pytest.approx(0.003)
    assert bad["hparams"]["optimizer.learning_rate"] == pytest.approx(0.01)
    assert good["sessions"][0]["status"] == "STATUS_SUCCESS"
    assert bad["sessions"][0]["status"] == "STATUS_FAILURE"
    # the session's metrics are the run's own curves: the last epoch's values
    history = json.loads((two_runs / "good" / "history.json").read_text())
    served = {(m["name"]["group"], m["name"]["tag"]): m["value"] for m in good["metricValues"]}
    assert served["validation", "epoch_loss"] == pytest.approx(history["val_loss"][-1], rel=1e-6)
    assert served["train", "epoch_accuracy"] == pytest.approx(history["accuracy"][-1], rel=1e-6)
    # and what was selected and tested, as metrics.json reports it
    metrics = json.loads((two_runs / "good" / "metrics.json").read_text())
    assert served["", "run/val_accuracy"] == pytest.approx(metrics["objective_value"], rel=1e-6)
    assert served["", "run/test_accuracy"] == pytest.approx(metrics["test_accuracy"], rel=1e-6)

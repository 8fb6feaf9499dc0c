"""`train.run` in-process: accuracy on digits, callbacks from config, the mnist path."""

import json

import numpy as np
import pytest

from tapefit.runner.train import run
from tests.data.files import write_mnist
from tests.helpers import SMALL_CNN, built_once_per_session, live_graphs


@pytest.fixture(scope="session")
@built_once_per_session
def notebook_run(tmp_path_factory):
    """The public API's example, as a notebook runs it: the MLP on digits for 5 epochs
    (metrics, run directory)."""
    import tapefit

    cfg = tapefit.compose(["model.architecture=mlp", "trainer.epochs=5", "trainer.verbose=0"])
    run_dir = tmp_path_factory.mktemp("notebook") / "notebook-run"
    return tapefit.run(cfg, run_dir), run_dir


@pytest.mark.slow  # trains whole runs: make test-fast leaves it out
def test_mlp_reaches_high_accuracy_on_digits(notebook_run):
    # the notebook example's 5 epochs: test accuracy 0.925, measured (0.964 after 15)
    metrics, _ = notebook_run
    assert metrics["test_accuracy"] >= 0.9
    assert metrics["epochs_run"] == 5


@pytest.mark.slow
def test_every_callback_from_config_does_its_job(compose, tmp_path):
    cfg = compose(
        [
            "model.architecture=mlp",
            "trainer.epochs=30",
            "trainer.verbose=0",
            "optimizer.learning_rate=0.05",  # too high on purpose: validation loss stalls
            "callbacks.early_stopping.enabled=true",
            "callbacks.early_stopping.patience=2",
            "callbacks.model_checkpoint.enabled=true",
            "callbacks.reduce_lr_on_plateau.enabled=true",
            "callbacks.reduce_lr_on_plateau.patience=1",
            "trainer.save_model=false",
        ]
    )
    metrics = run(cfg, tmp_path)
    history = json.loads((tmp_path / "history.json").read_text())
    assert metrics["epochs_run"] < 30  # early stopping ended the run
    assert min(history["learning_rate"]) < 0.05  # the plateau callback lowered the rate
    assert (tmp_path / "checkpoints" / "best.weights.h5").is_file()
    assert (tmp_path / "history.csv").read_text().count("\n") == metrics["epochs_run"] + 1
    assert not (tmp_path / "model.keras").exists()


@pytest.mark.slow  # trains whole runs: make test-fast leaves it out
def test_mnist_experiment_trains_from_a_local_file(compose, tmp_path):
    write_mnist(tmp_path / "mnist.npz", n_train=200, n_test=40)
    # the CNN cut to one block (SMALL_CNN): the local file and its split are the subject
    cfg = compose(
        ["experiment=mnist", f"data.path={tmp_path / 'mnist.npz'}", "trainer.verbose=0", *SMALL_CNN]
    )
    metrics = run(cfg, tmp_path / "run")
    assert metrics["samples"] == {"train": 180, "val": 20, "test": 40}
    assert np.isfinite(metrics["test_loss"])


def test_unknown_optimizer_is_a_clear_error(compose, tmp_path):
    from tapefit import TapefitError

    cfg = compose(["optimizer._target_=keras.optimizers.Adamm", "trainer.epochs=1"])
    with pytest.raises(
        TapefitError, match=r"has no 'Adamm' \(did you mean keras\.optimizers\.Adam"
    ):
        run(cfg, tmp_path)


@pytest.mark.parametrize("algorithm", ["random", "optuna", "lr_find"])
def test_run_refuses_a_config_that_asks_for_a_search_it_would_ignore(compose, tmp_path, algorithm):
    from tapefit import TapefitError

    with pytest.raises(TapefitError) as refused:
        run(compose([f"tune={algorithm}"]), tmp_path / "run")
    assert str(refused.value) == (
        f"tune.algorithm={algorithm} asks for a search, which tapefit.run (one run) would ignore: "
        f"run it with python -m tapefit tune={algorithm}, or compose with tune=none"
    )
    assert not (tmp_path / "run").exists()


def test_public_api_example_from_the_readme(notebook_run):
    metrics, run_dir = notebook_run
    assert metrics["test_accuracy"] > 0.85
    saved = json.loads((run_dir / "metrics.json").read_text())
    assert saved["test_accuracy"] == pytest.approx(metrics["test_accuracy"])


def test_monitoring_a_metric_that_does_not_exist_lists_the_real_ones(compose, tmp_path):
    from tapefit import TapefitError

    cfg = compose(
        [
            "model.architecture=mlp",
            "trainer.epochs=3",
            "trainer.verbose=0",
            "callbacks.early_stopping.enabled=true",
            "callbacks.early_stopping.monitor=val_acc",
        ]
    )
    with pytest.raises(
        TapefitError, match=r"monitor=val_acc is not a logged metric: .*val_accuracy"
    ):
        run(cfg, tmp_path)


@pytest.mark.slow  # end to end: make test-fast leaves it out
@pytest.mark.parametrize(
    "overrides",
    [
        ["model.architecture=mlp", "optimizer=adam"],
        ["experiment=siamese", "data.train_size=128", "data.val_size=64", "data.test_size=64"],
    ],
    ids=["mlp-adam", "siamese"],
)
@pytest.mark.slow  # trains whole runs: make test-fast leaves it out
def test_a_finished_run_leaves_none_of_its_traced_graphs_alive(compose, tmp_path, overrides):
    """TensorFlow's gradient registry keeps every graph-mode custom gradient (Keras' all-reduce
    in each train step), and with it the graph; a run must release them, or a sweep grows."""
    cfg = compose([*overrides, "trainer.epochs=1", "trainer.verbose=0", "trainer.save_model=false"])
    before = live_graphs()
    run(cfg, tmp_path)
    assert live_graphs() == before


STOPPING = '''
import keras


class LoudStopping(keras.callbacks.EarlyStopping):
    """EarlyStopping that counts the epochs it watched."""

    watched = 0

    def on_epoch_end(self, epoch, logs=None):
        LoudStopping.watched += 1
        super().on_epoch_end(epoch, logs)
'''


@pytest.mark.slow
def test_a_configured_callback_takes_a_users_class_by_target(compose, tmp_path, monkeypatch):
    from tapefit import TapefitError

    (tmp_path / "my_callbacks.py").write_text(STOPPING)
    monkeypatch.syspath_prepend(str(tmp_path))
    common = ["model.architecture=mlp", "trainer.verbose=0", "data.train_limit=128"]
    switched = ["callbacks.early_stopping.enabled=true", "trainer.epochs=2"]
    cfg = compose(
        [*common, *switched, "callbacks.early_stopping._target_=my_callbacks.LoudStopping"]
    )
    run(cfg, tmp_path / "run")
    import my_callbacks

    assert my_callbacks.LoudStopping.watched == 2
    cfg = compose(
        [*common, *switched, "callbacks.early_stopping._target_=keras.callbacks.CSVLogger"]
    )
    with pytest.raises(TapefitError, match=r"callbacks.early_stopping.monitor: CSVLogger takes no"):
        run(cfg, tmp_path / "bad")

"""What a user's own project hits, through the real CLI from a project in a temporary folder:
a maximised user metric, ignored data keys, re-run commands that paste into a shell, the line
saying a callback stopped the run, and a typo in the optimizer's options."""

import json
import os
import sys
import textwrap
from pathlib import Path

import pytest
from omegaconf import OmegaConf

from tests import processes

MODULE = textwrap.dedent(
    '''
    import keras
    import numpy as np
    import tensorflow as tf

    import tapefit


    class AutoEncoder(tapefit.TapeModel):
        def __init__(self, width=2, **kwargs):
            super().__init__(**kwargs)
            self.width = width
            self.encode = keras.layers.Dense(width, activation="tanh")
            self.decode = keras.layers.Dense(4)

        def call(self, x, training=False):
            return self.decode(self.encode(x))


    class Agreement(keras.metrics.Metric):
        """1 / (1 + mean squared error): better when higher, a name tapefit cannot know."""

        def __init__(self, name="agreement", **kwargs):
            super().__init__(name=name, **kwargs)
            self.total = self.add_variable((), initializer="zeros", name="total")
            self.count = self.add_variable((), initializer="zeros", name="count")

        def update_state(self, y_true, y_pred, sample_weight=None):
            error = keras.ops.mean(keras.ops.square(y_true - y_pred), axis=-1)
            self.total.assign_add(keras.ops.sum(error))
            self.count.assign_add(keras.ops.cast(keras.ops.shape(error)[0], "float32"))

        def result(self):
            return 1.0 / (1.0 + self.total / self.count)


    def points(n, seed):
        x = np.random.default_rng(seed).normal(size=(n, 4)).astype("float32")
        x[:, 2:] = x[:, :2] * 0.5  # two directions carry everything: learnable in width 2
        return x


    def arrays(n=256, seed=0):
        return {"train": (points(n, seed), points(n, seed)), "test": (points(64, 9), points(64, 9))}


    def datasets(repeat=False):
        """Batched tf.data splits, a validation split of their own."""
        train = tf.data.Dataset.from_tensor_slices((points(256, 0), points(256, 0))).batch(16)
        val = tf.data.Dataset.from_tensor_slices((points(64, 1), points(64, 1))).batch(16)
        return {"train": train.repeat() if repeat else train, "validation": val}


    def unbatched():
        x = points(64, 0)
        return {"train": tf.data.Dataset.from_tensor_slices((x, x)), "validation": (x, x)}
    '''
)

EXPERIMENT = """# @package _global_
defaults:
  - override /model: null
  - override /data: null
experiment_name: autoencoder
model: {_target_: hits_user.AutoEncoder}
data: {_target_: hits_user.arrays}
compile: {loss: mse}
trainer: {epochs: 3, verbose: 0, steps_per_execution: 1, deterministic: true}
"""

LEARNING_RATES = """# @package tune.space
optimizer.learning_rate: {type: choice, values: [0.0003, 0.01, 0.05]}
"""
AGREEMENT = ["compile.metrics=[{_target_: hits_user.Agreement}]", "objective=val_agreement"]


@pytest.fixture(scope="session")
def project(tmp_path_factory):
    root = tmp_path_factory.mktemp("hits_project")
    (root / "hits_user.py").write_text(MODULE)
    (root / "conf" / "experiment").mkdir(parents=True)
    (root / "conf" / "experiment" / "autoencoder.yaml").write_text(EXPERIMENT)
    (root / "conf" / "search_space").mkdir()
    (root / "conf" / "search_space" / "learning_rates.yaml").write_text(LEARNING_RATES)
    return root


def tapefit_cli(project: Path, *args: str, shell_command: str | None = None):
    """`python -m tapefit --config-dir conf experiment=autoencoder ARGS` in the project."""
    env = dict(os.environ, KERAS_BACKEND="tensorflow", TF_CPP_MIN_LOG_LEVEL="2")
    env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{env['PATH']}"  # `python`
    words = [sys.executable, "-m", "tapefit", "--config-dir", "conf", "experiment=autoencoder"]
    return processes.run(
        ["bash", "-c", shell_command] if shell_command else [*words, *args],
        cwd=project,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )


# The refusals of this project (a metric with no direction, endless and unbatched datasets, a
# leaked search space) are rows of docs/reference/errors.md: tests/docs/test_error_table.py.


@pytest.fixture(scope="session")
def maximised_run(project, tmp_path_factory):
    run_dir = tmp_path_factory.mktemp("maximised")
    result = tapefit_cli(project, *AGREEMENT, "objective_direction=max", f"hydra.run.dir={run_dir}")
    assert result.returncode == 0, result.stderr[-3000:]
    return run_dir


def test_a_maximised_user_metric_selects_its_highest_epoch(maximised_run):
    metrics = json.loads((maximised_run / "metrics.json").read_text())
    values = json.loads((maximised_run / "history.json").read_text())["val_agreement"]
    assert max(values) != min(values)  # the choice matters
    best = values.index(max(values)) + 1
    assert metrics["objective_direction"] == "max"
    assert metrics["objective_epoch"] == best and metrics["objective_value"] == max(values)
    assert metrics["tested_epoch"] == best
    status = json.loads((maximised_run / "status.json").read_text())
    assert status["objective_direction"] == "max"


def test_a_maximised_search_keeps_the_highest_trial_and_its_command_pastes(project, tmp_path):
    result = tapefit_cli(
        project,
        *AGREEMENT,
        "objective_direction=max",
        "search_space=learning_rates",
        "tune=grid",
        "tune.max_trials=3",
        "trainer.epochs=2",
        f"hydra.run.dir={tmp_path}",
    )
    assert result.returncode == 0, result.stderr[-3000:]
    summary = json.loads((tmp_path / "search.json").read_text())
    values = [
        json.loads(path.read_text())["objective_value"]
        for path in (tmp_path / "trials").glob("*/metrics.json")
    ]
    assert len(values) == 3 and len(set(values)) == 3
    assert summary["best_value"] == max(values)
    # The printed command, pasted into a shell as it is, composes the best trial's config.
    command = summary["best_command"]
    assert "'compile.metrics=[{_target_: hits_user.Agreement}]'" in command
    composed = tapefit_cli(project, shell_command=f"{command} --cfg job")
    assert composed.returncode == 0, composed.stderr[-3000:]
    cfg = OmegaConf.create(composed.stdout)
    assert cfg.compile.metrics[0]._target_ == "hits_user.Agreement"
    assert cfg.objective_direction == "max" and cfg.tune.algorithm == "none"


def test_ignored_data_keys_and_an_early_stop_are_logged(project, tmp_path):
    result = tapefit_cli(
        project,
        "data._target_=hits_user.datasets",
        "+data.batch_size=64",
        "+data.val_fraction=0.5",
        "trainer.epochs=4",
        "callbacks.early_stopping.enabled=true",
        "callbacks.early_stopping.monitor=loss",
        "callbacks.early_stopping.mode=max",  # the loss falls: stops after patience
        "callbacks.early_stopping.patience=1",
        f"hydra.run.dir={tmp_path}",
    )
    assert result.returncode == 0, result.stderr[-3000:]
    log = (tmp_path / "tapefit.log").read_text()
    assert "data.batch_size=64 is ignored: the loader returns tf.data.Datasets" in log
    assert "data.val_fraction=0.5 is ignored: the loader returns its own 'validation'" in log
    metrics = json.loads((tmp_path / "metrics.json").read_text())
    assert metrics["epochs_run"] == 2
    assert (
        "EarlyStopping stopped training at the end of epoch 2: loss did not improve for 1 epochs"
        in log
    )

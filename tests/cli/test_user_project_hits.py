"""What a user's own project hits, through the real CLI from a project in a temporary folder:
a maximised user metric, ignored data keys, re-run commands that paste into a shell, the line
saying a callback stopped the run, and a typo in the optimizer's options. The project is
tests/conftest.py's `hits_project`."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from omegaconf import OmegaConf

from tests.helpers import built_once_per_session, run_cli, run_in

AGREEMENT = ["compile.metrics=[{_target_: hits_user.Agreement}]", "objective=val_agreement"]


def tapefit_cli(project: Path, *args: str, shell_command: str | None = None):
    """`python -m tapefit --config-dir conf experiment=autoencoder ARGS` in the project, or
    `shell_command` as a user's shell runs it: bash splits and unquotes its words, which then
    run with `python` as this interpreter (forked from the tests' warm one, not a fresh
    interpreter importing TensorFlow, about 5 s)."""
    path = {"PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}"}
    if shell_command:
        words = subprocess.run(
            ["bash", "-c", f"printf '%s\\0' {shell_command}"],
            capture_output=True,
            text=True,
            check=True,
            timeout=60,
        ).stdout.split("\0")[:-1]
        assert words[0] == "python", words
        return run_in(project, [sys.executable, *words[1:]], env=path)
    return run_cli("--config-dir", "conf", "experiment=autoencoder", *args, cwd=project, env=path)


# The refusals of this project (a metric with no direction, endless and unbatched datasets, a
# leaked search space) are rows of docs/reference/errors.md: tests/docs/test_error_table.py.


@pytest.fixture(scope="session")
@built_once_per_session
def maximised_run(hits_project, tmp_path_factory):
    run_dir = tmp_path_factory.mktemp("maximised")
    overrides = [*AGREEMENT, "objective_direction=max", f"hydra.run.dir={run_dir}"]
    result = tapefit_cli(hits_project, *overrides)
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


def test_a_maximised_search_keeps_the_highest_trial_and_its_command_pastes(hits_project, tmp_path):
    result = tapefit_cli(
        hits_project,
        *AGREEMENT,
        "objective_direction=max",
        "search_space=learning_rates",
        "tune=grid",
        "tune.max_trials=2",  # two learning rates: the higher value must be kept
        "trainer.epochs=2",
        f"hydra.run.dir={tmp_path}",
    )
    assert result.returncode == 0, result.stderr[-3000:]
    summary = json.loads((tmp_path / "search.json").read_text())
    values = [
        json.loads(path.read_text())["objective_value"]
        for path in (tmp_path / "trials").glob("*/metrics.json")
    ]
    assert len(values) == 2 and len(set(values)) == 2
    assert summary["best_value"] == max(values)
    # The printed command, pasted into a shell as it is, composes the best trial's config.
    command = summary["best_command"]
    assert "'compile.metrics=[{_target_: hits_user.Agreement}]'" in command
    composed = tapefit_cli(hits_project, shell_command=f"{command} --cfg job")
    assert composed.returncode == 0, composed.stderr[-3000:]
    cfg = OmegaConf.create(composed.stdout)
    assert cfg.compile.metrics[0]._target_ == "hits_user.Agreement"
    assert cfg.objective_direction == "max" and cfg.tune.algorithm == "none"


def test_ignored_data_keys_and_an_early_stop_are_logged(hits_project, tmp_path):
    result = tapefit_cli(
        hits_project,
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
